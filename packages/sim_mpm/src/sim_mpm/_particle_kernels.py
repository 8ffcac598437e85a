"""Particle passes of the numba kernels: per-particle physics, stress + P2G, G2P, and their
adjoints. One file on purpose: numba's on-disk cache checks only the source file of the
function it caches, so code inlined from another module would not invalidate it.

Each pass is one loop over particles; the scatters (P2G, the G2P adjoint) run over chunks
of consecutive particles, one chunk per thread, each into its own copy of the grid
accumulator, which the grid pass sums in chunk order. Results are thus deterministic for a
given number of chunks (threads) and equal the serial ones to round-off.

The quadratic B-spline stencil of a particle (base node b, fraction f = x/Δx − b, weights w,
their derivatives dw/df) is recomputed in registers in every pass (:func:`_axis`); storing
(n, 3^d) weights and node indices cost more memory traffic than the arithmetic.

The stencil sums use the separable form of the weights w = w₀(i₀) w₁(i₁) w₂(i₂) and of the
node offsets o = (i − f) Δx: for example G2P's C = K Σ w v oᵀ = K Δx (Σ w v iᵀ − (Σ w v) fᵀ)
with Σ w v iᵀ accumulated row by row, and P2G's node value momentum + A o = (momentum −
Δx A f) + Δx A i. This needs about half the arithmetic of summing per node; the results
equal the reference's to round-off.

The per-particle physics are scalar functions inlined into the particle loops, with every
matrix entry in a local (tuples of 4 or 9 scalars, row-major): arrays as scratch would be
reloaded after every store. The stress and its adjoint run in loops of their own that LLVM
vectorizes across particles: they read and write rows by particle ((k, n) arrays)
and interleaved (n, d, d) arrays through flat views, index nothing through memory, and
compile the common material (corotated, no incompressibility term) with constant switches.
The stencil loops, which scatter or gather through computed node indices, stay scalar and
pass their per-particle results through such rows. Arithmetic stays in the inputs'
precision (``one`` carries it: float literals would promote float32 to float64).

Both materials share one form of the Kirchhoff stress with actuation,

    τ = (a F − b R + F S) Fᵀ + c(J) I,     S = diag(σ_a),

fixed corotated: a = b = 2μ, c = λ(J − 1)J (P Fᵀ with P = 2μ(F − R) + λ(J − 1)J F⁻ᵀ);
neo-Hookean: a = μ, b = 0, c = λ log J − μ (P = μ(F − F⁻ᵀ) + λ log J F⁻ᵀ); the
incompressibility term adds κ p (J − 1)^(p−1) J to c. No inverse of F is needed; its
adjoint uses ∂J/∂F = cof F. The P2G inputs are mass m = ρV, momentum m v + Δt f and
affine = −Δt K V τ + m C (K = 4/Δx²), as in :func:`sim_mpm.step.particle_impulses`.

The 3D polar rotation uses scaled Newton iterations X ← ½(ζX + X⁻ᵀ/ζ),
ζ = (‖X⁻¹‖/‖X‖)^½: :func:`polar3_batch` runs a fixed number of them over a range of particles,
a loop without branches that LLVM vectorizes across particles, and
:func:`polar3_finish` continues those that have not converged to round-off and takes the
SVD for inverted particles (det F ≤ 0), so both paths give the reference's R.

The kernels take named tuples (kernels.py builds them) as plain tuples of their fields:
numba types a named tuple by its field names on every call (0.5-2 µs), a plain tuple as
fast as separate arguments. The per-chunk functions rebuild the records in their first
line, and each function unpacks what it reads at its top, so that the loops read locals.
"""

from __future__ import annotations

import functools
import types
from typing import NamedTuple

import numba
import numpy as np
from llvmlite import binding, ir
from numba.core import cgutils
from numba.core.compiler import Compiler
from numba.extending import intrinsic

__all__ = ["POLAR_BATCH_ITERATIONS", "Actuation", "Kernel", "Materials", "Particles", "Work",
           "particles_to_grid", "grid_to_particles", "grid_to_particles_vjp",
           "particles_to_grid_vjp"]


class Particles(NamedTuple):
    """Particle arrays of n particles in d dimensions, or their cotangents (model dtype)."""

    x: np.ndarray  # positions [m], (n, d)
    v: np.ndarray  # velocities [m/s], (n, d)
    F: np.ndarray  # deformation gradients, (n, d, d)
    C: np.ndarray  # affine velocity fields [1/s], (n, d, d)


class Materials(NamedTuple):
    """Per-particle parameters, or their cotangents, shape (n,) in any float dtype (the
    kernels read them in the particles' dtype)."""

    E: np.ndarray  # Young's modulus [Pa]
    nu: np.ndarray  # Poisson's ratio
    rho: np.ndarray  # density [kg/m^d]
    V: np.ndarray  # volume [m^d]


class Actuation(NamedTuple):
    """One step's actuation in the kernels' layout (k stress actuators, model dtype)."""

    row: np.ndarray  # the particle's stress actuator + 1 (0: none), (n,) int64
    scale: np.ndarray  # signal · σ_max [Pa] per actuator after a leading 0, (k + 1,)
    axes: np.ndarray  # axis masks per actuator after a zero row, (k + 1, d)
    cable_force: np.ndarray  # [N], (n, d)


class Work(NamedTuple):
    """What the particle passes read and write besides a step's inputs: the model's
    scalars, then buffers (see kernels._Records) for n particles in c chunks; floats in the
    model dtype."""

    dx: float  # [m]
    K: float  # 4/Δx² [1/m²]
    tolerance: float  # of the polar iteration's squared change
    res: int  # grid nodes per axis
    corotated: bool  # fixed corotated (else neo-Hookean)
    exponent: int  # incompressibility exponent p (0: no term)
    bounds: np.ndarray  # first particle of each chunk, then n, (c + 1,) int64
    rotation: np.ndarray  # polar rotations in 3D corotated, (9, n) (see polar3_batch)
    table: np.ndarray  # material rows (see material_batch), (4, n)
    actuation: np.ndarray  # σ_a, (d, n)
    saved: np.ndarray  # P2G inputs m, momentum, affine, (1 + d + d², n)
    box: np.ndarray  # (lowest base node, highest + 3) per chunk, (c, 2, d) int64
    acc: np.ndarray  # P2G's (momentum, mass) per chunk, (c, nodes, 4)
    grid_v: np.ndarray  # grid velocity, (nodes, 4; lanes past d zero)
    g_grid: np.ndarray  # ∂L/∂(grid momentum, mass), (nodes, 4; lanes past d + 1 zero)
    g_acc: np.ndarray  # ∂L/∂(grid v) per chunk, (c, nodes, 4)
    gathered: np.ndarray  # ∂L/∂(m, momentum, affine), (1 + d + d², n)
    g_rows: np.ndarray  # ∂L/∂F, ∂L/∂σ_a, (d² + d, n)
    g_act: np.ndarray  # ∂L/∂σ_a per chunk and actuator, (c, k + 1)


class _KernelCompiler(Compiler):
    """numba's compiler with LLVM's vectorizer allowed more run-time checks, for these
    kernels only: LLVM vectorizes a loop whose arrays it cannot prove apart only behind
    run-time overlap checks, at most 128 by default (and 16 that index arithmetic does not
    wrap), and the stress loops read and write about thirty arrays. The limits are
    process-wide LLVM options, so they are raised while a kernel compiles (callees and LLVM
    optimization included) and set back to LLVM's defaults after (llvmlite cannot read the
    current value): other numba code compiles as if sim_mpm were not there. ``_depth``
    counts nested kernel compilations (numba compiles under one global lock)."""

    _THRESHOLDS = (("vectorize-memory-check-threshold", 1024, 128),
                   ("vectorize-scev-check-threshold", 256, 16))  # (option, ours, LLVM's)
    _depth = 0

    def compile_extra(self, func):
        cls = type(self)
        if cls._depth == 0:
            for option, ours, _ in cls._THRESHOLDS:
                binding.set_option("sim_mpm", f"-{option}={ours}")
        cls._depth += 1
        try:
            return super().compile_extra(func)
        finally:
            cls._depth -= 1
            if cls._depth == 0:
                for option, _, default in cls._THRESHOLDS:
                    binding.set_option("sim_mpm", f"-{option}={default}")


# fused multiply-adds (contract) are allowed; no other fast-math reassociation
_FLAGS = dict(cache=True, error_model="numpy", fastmath={"contract"},
              pipeline_class=_KernelCompiler)
_inline = numba.njit(inline="always", **_FLAGS)

class Variant(NamedTuple):
    """What the particle passes are compiled for besides their argument types: constants
    that let numba drop the branches a scene never takes before typing them (compiling
    both dimensions into every build tripled the first run's compile time)."""

    dim: int  # 2 or 3
    common_material: bool  # fixed corotated without the incompressibility term

    @classmethod
    def of(cls, dim: int, material: str, exponent: int) -> Variant:
        """The variant of a scene of ``dim`` dimensions, ``material`` and incompressibility
        ``exponent``."""
        if dim not in (2, 3):
            raise ValueError(f"the particle kernels are built for dim 2 or 3, got {dim}")
        return cls(dim, material == "corotated" and exponent == 0)

    @classmethod
    def all(cls) -> list[Variant]:
        """Every variant."""
        return [cls(dim, common) for dim in (2, 3) for common in (True, False)]

    @property
    def suffix(self) -> str:
        """The builds' name suffix (numba's cache tells functions apart by name)."""
        return f"_{self.dim}d" + ("_corotated" if self.common_material else "")


DIM = 0
COMMON_MATERIAL = False
"""The :class:`Variant` fields in the per-range loops (:func:`_range`): placeholders here;
each variant's builds read its own constants (see :func:`_namespace`)."""

_RANGES: dict[str, types.FunctionType] = {}


def _range(fn):
    """Register a per-range loop: compiled once per :class:`Variant` and called by the
    serial and the threaded drivers (numba's parallel array analysis fails on the tuples of
    the inlined per-particle functions, so a prange body holds only a call)."""
    _RANGES[fn.__name__] = fn
    return fn


def _twin(fn, namespace: dict, suffix: str) -> types.FunctionType:
    """A copy of ``fn`` under the name ``fn.__name__ + suffix`` that reads its globals from
    ``namespace``. numba's cache keys on the function's name and signature (and bytecode),
    not on its globals, so every build of one function needs a name of its own, or builds
    would share (and silently swap) their cached machine code."""
    twin = types.FunctionType(fn.__code__, namespace, fn.__name__ + suffix, fn.__defaults__,
                              fn.__closure__)
    twin.__qualname__ = fn.__qualname__ + suffix
    twin.__module__ = fn.__module__
    twin.__doc__ = fn.__doc__
    return twin


@functools.cache
def _namespace(variant: Variant) -> dict:
    """This module's globals with the ``variant``'s constants (:data:`DIM`,
    :data:`COMMON_MATERIAL`) and the per-range loops rebuilt for it (dispatchers named
    ``<loop><variant suffix>``, compiled on first call)."""
    namespace = {**globals(), "DIM": variant.dim, "COMMON_MATERIAL": variant.common_material}
    for name, fn in _RANGES.items():
        namespace[name] = numba.njit(**_FLAGS)(_twin(fn, namespace, variant.suffix))
    return namespace


class Kernel:
    """One loop nest compiled per build: serial (prange runs as range) or multithreaded,
    and, for the particle passes, per :class:`Variant`. Builds are made and compiled on
    first use, so a scene pays only for the builds it runs."""

    def __init__(self, fn, *, per_variant: bool = False):
        self.fn, self.per_variant = fn, per_variant
        self.__doc__ = fn.__doc__
        self._builds: dict = {}

    def pick(self, parallel: bool, variant: Variant | None = None):
        """The multithreaded build if ``parallel``, else the serial one; with
        ``per_variant``, the one for ``variant``. Called on every step: a dict hit."""
        try:
            return self._builds[parallel, variant]
        except KeyError:
            return self._build(parallel, variant)

    def builds(self) -> list:
        """Every build (serial and multithreaded, per variant) as a numba dispatcher, made
        now and compiled on its first call."""
        variants = Variant.all() if self.per_variant else [None]
        return [self.pick(parallel, variant) for parallel in (False, True)
                for variant in variants]

    def _build(self, parallel: bool, variant: Variant | None):
        if self.per_variant != (variant is not None):
            raise ValueError(f"{self.fn.__name__} is built "
                             + ("per variant: pass one" if self.per_variant else "once"))
        suffix = (variant.suffix if variant else "") + ("_parallel" if parallel else "")
        namespace = _namespace(variant) if variant else self.fn.__globals__
        build = numba.njit(parallel=parallel, **_FLAGS)(
            _twin(self.fn, namespace, suffix) if suffix else self.fn)
        self._builds[parallel, variant] = build
        return build


def _splat(builder, vector, value):
    """LLVM IR: ``value`` in every lane of ``vector``'s type."""
    lanes = ir.Constant(vector, ir.Undefined)
    for lane in range(vector.count):
        lanes = builder.insert_element(lanes, value, ir.Constant(ir.IntType(32), lane))
    return lanes


def _vector_fma(builder, element, vector):
    """LLVM's fused multiply-add on four lanes of ``element``."""
    name = "llvm.fma.v4f32" if element == ir.FloatType() else "llvm.fma.v4f64"
    return cgutils.get_or_insert_function(builder.module,
                                          ir.FunctionType(vector, [vector] * 3), name)


@intrinsic
def add4(typingctx, array, index, w, a, b, c, d):
    """array[index:index + 4] += w · (a, b, c, d) as one 4-lane vector read-add-write.

    ``array`` is a 1-D contiguous float array. The scatters add four channels (momentum and
    mass, or the three velocity cotangents and a zero) per grid node; LLVM would emit four
    scalar updates (numba leaves its SLP vectorizer off), which bound P2G's speed."""
    sig = numba.types.void(array, index, w, a, b, c, d)

    def codegen(context, builder, signature, args):
        array_value, offset, weight = args[0], args[1], args[2]
        element = context.get_data_type(signature.args[0].dtype)
        vector = ir.VectorType(element, 4)
        data = context.make_array(signature.args[0])(context, builder, array_value).data
        pointer = builder.bitcast(builder.gep(data, [offset], inbounds=True),
                                  vector.as_pointer())
        lanes = ir.Constant(vector, ir.Undefined)
        for k, value in enumerate(args[3:]):
            lanes = builder.insert_element(lanes, value, ir.Constant(ir.IntType(32), k))
        align = 4 if element == ir.FloatType() else 8  # the element's, not the vector's
        old = builder.load(pointer, align=align)
        new = builder.call(_vector_fma(builder, element, vector),
                           [_splat(builder, vector, weight), lanes, old])
        builder.store(new, pointer, align=align)
        return context.get_dummy_value()

    return sig, codegen


# -- per-particle physics: stress, P2G inputs and their adjoint ---------------------------------

POLAR_BATCH_ITERATIONS = (3, 4)
"""Newton iterations every particle gets in the vectorized polar pass in float32 and
float64 (enough for strains of a few per cent to converge to round-off; the rest continue
in :func:`polar3_finish`)."""


@_inline
def load4(A, p):
    """Entries of the 2x2 matrix A[p] as a row-major tuple."""
    return A[p, 0, 0], A[p, 0, 1], A[p, 1, 0], A[p, 1, 1]


@_inline
def load9(A, p):
    """Entries of the 3x3 matrix A[p] as a row-major tuple."""
    return (A[p, 0, 0], A[p, 0, 1], A[p, 0, 2], A[p, 1, 0], A[p, 1, 1], A[p, 1, 2],
            A[p, 2, 0], A[p, 2, 1], A[p, 2, 2])


@_inline
def cofactor9(f):
    """cof F = J F⁻ᵀ of a 3x3 matrix given as a row-major tuple."""
    f00, f01, f02, f10, f11, f12, f20, f21, f22 = f
    return (f11 * f22 - f12 * f21, f12 * f20 - f10 * f22, f10 * f21 - f11 * f20,
            f21 * f02 - f22 * f01, f22 * f00 - f20 * f02, f20 * f01 - f21 * f00,
            f01 * f12 - f02 * f11, f02 * f10 - f00 * f12, f00 * f11 - f01 * f10)


@_inline
def _newton3(x, one, scaled):
    """One Newton step of the polar iteration, scaled by ζ or (``scaled`` False, for
    iterates already near orthogonal, where ζ ≈ 1) plain X ← ½(X + X⁻ᵀ); returns (X',
    ‖X' − X‖²_F)."""
    x00, x01, x02, x10, x11, x12, x20, x21, x22 = x
    half = one / (one + one)
    c = cofactor9(x)
    inv = one / (x00 * c[0] + x01 * c[1] + x02 * c[2])
    y00, y01, y02 = c[0] * inv, c[1] * inv, c[2] * inv
    y10, y11, y12 = c[3] * inv, c[4] * inv, c[5] * inv
    y20, y21, y22 = c[6] * inv, c[7] * inv, c[8] * inv
    if scaled:
        nx = (x00 * x00 + x01 * x01 + x02 * x02 + x10 * x10 + x11 * x11 + x12 * x12
              + x20 * x20 + x21 * x21 + x22 * x22)
        ny = (y00 * y00 + y01 * y01 + y02 * y02 + y10 * y10 + y11 * y11 + y12 * y12
              + y20 * y20 + y21 * y21 + y22 * y22)
        zeta = np.sqrt(np.sqrt(ny / nx))  # (ny/nx)^¼ without a pow call
        a = half * zeta
        b = half / zeta
    else:
        a = half
        b = half
    n00, n01, n02 = a * x00 + b * y00, a * x01 + b * y01, a * x02 + b * y02
    n10, n11, n12 = a * x10 + b * y10, a * x11 + b * y11, a * x12 + b * y12
    n20, n21, n22 = a * x20 + b * y20, a * x21 + b * y21, a * x22 + b * y22
    change = ((n00 - x00) * (n00 - x00) + (n01 - x01) * (n01 - x01) + (n02 - x02) * (n02 - x02)
              + (n10 - x10) * (n10 - x10) + (n11 - x11) * (n11 - x11)
              + (n12 - x12) * (n12 - x12) + (n20 - x20) * (n20 - x20)
              + (n21 - x21) * (n21 - x21) + (n22 - x22) * (n22 - x22))
    return (n00, n01, n02, n10, n11, n12, n20, n21, n22), change


@_inline
def polar3_batch(F, R, start, stop, tolerance, one):
    """POLAR_BATCH_ITERATIONS Newton steps from F[p] for start ≤ p < stop into R (9, n):
    R[0, p] = the last step's squared change (+inf where det F ≤ 0), R[1:, p] = the
    entries R₀₁ … R₂₂ of the iterate. R₀₀ is not stored: for a rotation it equals its
    cofactor R₁₁R₂₂ − R₁₂R₂₁ (:func:`rotation3`), which leaves room for the convergence
    measure in nine rows. :func:`polar3_finish` continues the particles whose change
    exceeds ``tolerance``.

    Nine stores of unsigned-indexed rows and nothing else: LLVM then vectorizes the loop
    (a signed index keeps numba's negative-index wraparound, which hides the accesses'
    bounds from it)."""
    inf = one / (one - one)
    for p in range(np.uint64(start), np.uint64(stop)):
        f = load9(F, p)
        det = f[0] * (f[4] * f[8] - f[5] * f[7]) - f[1] * (f[3] * f[8] - f[5] * f[6]) \
            + f[2] * (f[3] * f[7] - f[4] * f[6])
        # scaled once (balances large stretches), then plain steps: ζ costs two square
        # roots and two divisions, the bulk of a step
        x, _ = _newton3(f, one, True)
        x, _ = _newton3(x, one, False)
        if R.itemsize == 8:  # float64 round-off takes one step more (a compile-time branch)
            x, _ = _newton3(x, one, False)
        x, change = _newton3(x, one, False)
        R[0, p] = change if det > 0 else inf
        R[1, p], R[2, p], R[3, p], R[4, p], R[5, p], R[6, p], R[7, p], R[8, p] = x[1:]


@_inline
def rotation3(R, p):
    """Particle p's rotation from the (9, n) array of :func:`polar3_batch` (R₀₀ from its
    cofactor), row-major."""
    r01, r02, r10, r11, r12, r20, r21, r22 = (R[1, p], R[2, p], R[3, p], R[4, p], R[5, p],
                                              R[6, p], R[7, p], R[8, p])
    return r11 * r22 - r12 * r21, r01, r02, r10, r11, r12, r20, r21, r22


@_inline
def polar3_finish(F, R, start, stop, tolerance, one):
    """Continue the polar iteration of the particles :func:`polar3_batch` left above
    ``tolerance`` until their squared change is below it (from the batch's iterate: a
    few steps at large strains), and take the SVD (det R = +1) for inverted ones
    (det F ≤ 0)."""
    zero = one - one
    for p in range(start, stop):
        if R[0, p] <= tolerance:
            continue
        if R[0, p] == one / zero:
            U, _, Vt = np.linalg.svd(F[p].astype(np.float64))
            Q = U @ Vt
            if np.linalg.det(Q) < 0:
                for i in range(3):
                    U[i, 2] = -U[i, 2]
                Q = U @ Vt
            for k in range(1, 9):
                R[k, p] = Q[k // 3, k % 3]
            R[0, p] = zero
            continue
        x = rotation3(R, p)
        change = R[0, p]
        for _ in range(60):
            x, change = _newton3(x, one, True)
            if change <= tolerance:
                break
        R[0, p] = change
        R[1, p], R[2, p], R[3, p], R[4, p], R[5, p], R[6, p], R[7, p], R[8, p] = x[1:]


@_inline
def _power(x, k, one):
    """x**k for an integer k ≥ 0 in x's precision (x ** k would promote float32)."""
    out = one
    for _ in range(k):
        out *= x
    return out


@_inline
def _float(k, one):
    """The integer k ≥ 0 as a float in one's precision."""
    out = one - one
    for _ in range(k):
        out += one
    return out


@_inline
def material_batch(E, nu, out, start, stop, one):
    """Lamé parameters and the reciprocals their adjoint needs for particles start ≤ p <
    stop: out (4, n) rows μ, λ, 1/(1 + ν), 1/((1 + ν)(1 − 2ν)) in ``one``'s precision.

    A branch-free loop LLVM vectorizes: the divisions cost most of a particle's stress
    when they are done one particle at a time."""
    T = out.dtype.type
    two = one + one
    for p in range(np.uint64(start), np.uint64(stop)):
        e = T(E[p])
        n = T(nu[p])
        r_shear = one / (one + n)
        r_bulk = r_shear / (one - two * n)
        out[0, p] = e * r_shear / two
        out[1, p] = e * n * r_bulk
        out[2, p] = r_shear
        out[3, p] = r_bulk


@_inline
def material(E, nu, table, p):
    """Particle p's (E, ν, μ, λ, 1/(1 + ν), 1/((1 + ν)(1 − 2ν))) from :func:`material_batch`."""
    T = table.dtype.type
    return (T(E[p]), T(nu[p]), table[0, p], table[1, p], table[2, p], table[3, p])


@_inline
def _coefficients(mat, J, corotated, exponent, one):
    """(a, b, c) of τ = (a F − b R + F S) Fᵀ + c I for one particle of material ``mat``
    (see :func:`material`)."""
    E, nu, mu, lam, _, _ = mat
    two = one + one
    if corotated:
        a = two * mu
        b = a
        c = lam * (J - one) * J
    else:
        a = mu
        b = mu - mu
        c = lam * np.log(J) - mu
    if exponent:
        kappa = E / (two * (one + two) * (one - nu))
        c += kappa * _float(exponent, one) * _power(J - one, exponent - 1, one) * J
    return a, b, c


@_inline
def _coefficients_vjp(mat, J, corotated, exponent, g_a, g_b, g_c, one):
    """(∂L/∂J, ∂L/∂E, ∂L/∂ν) given ∂L/∂(a, b, c) of :func:`_coefficients`."""
    E, nu, _, lam, r_shear, r_bulk = mat
    two = one + one
    if corotated:
        g_mu = two * (g_a + g_b)
        g_lam = g_c * (J - one) * J
        g_J = g_c * lam * (two * J - one)
    else:
        g_mu = g_a - g_c
        g_lam = g_c * np.log(J)
        g_J = g_c * lam / J
    # μ = E/(2(1 + ν)), λ = Eν/((1 + ν)(1 − 2ν))
    g_E = g_mu * r_shear / two + g_lam * nu * r_bulk
    g_nu = (-g_mu * E * r_shear * r_shear / two
            + g_lam * E * (one + two * nu * nu) * r_bulk * r_bulk)
    if exponent:
        six = two * (one + two)
        q = _float(exponent, one)
        kappa = E / (six * (one - nu))
        g_kappa = g_c * q * _power(J - one, exponent - 1, one) * J
        g_J += g_c * kappa * q * ((q - one) * _power(J - one, exponent - 2, one) * J
                                  + _power(J - one, exponent - 1, one))
        g_E += g_kappa / (six * (one - nu))
        g_nu += g_kappa * E / (six * (one - nu) * (one - nu))
    return g_J, g_E, g_nu


@_inline
def rotation2(f, one):
    """Rotation of the 2D polar decomposition of F (row-major tuple), closed form."""
    a = f[0] + f[3]
    b = f[2] - f[1]
    inv_r = one / np.sqrt(a * a + b * b)
    return a * inv_r, -b * inv_r, b * inv_r, a * inv_r


@_inline
def impulse2(f, r, c_mat, v, mat, rho, V, s, cable, dt, K, corotated, exponent, one):
    """2D P2G inputs of one particle: (m, momentum (2,), affine (4,)).

    f, r, c_mat: F, R (corotated; ignored otherwise), C as row-major tuples; v, s, cable:
    velocity, actuation stress diag(σ_a) and cable force as 2-tuples."""
    f00, f01, f10, f11 = f
    J = f00 * f11 - f01 * f10
    a, b, c = _coefficients(mat, J, corotated, exponent, one)
    g00, g01 = f00 * (a + s[0]) - b * r[0], f01 * (a + s[1]) - b * r[1]
    g10, g11 = f10 * (a + s[0]) - b * r[2], f11 * (a + s[1]) - b * r[3]
    t00 = g00 * f00 + g01 * f01 + c
    t01 = g00 * f10 + g01 * f11  # = τ₁₀: τ is symmetric (see impulse3)
    t11 = g10 * f10 + g11 * f11 + c
    m = rho * V
    q = -dt * K * V
    return (m, (m * v[0] + dt * cable[0], m * v[1] + dt * cable[1]),
            (q * t00 + m * c_mat[0], q * t01 + m * c_mat[1], q * t01 + m * c_mat[2],
             q * t11 + m * c_mat[3]))


@_inline
def impulse3(f, r, c_mat, v, mat, rho, V, s, cable, dt, K, corotated, exponent, one):
    """3D P2G inputs of one particle: (m, momentum (3,), affine (9,)); see impulse2."""
    f00, f01, f02, f10, f11, f12, f20, f21, f22 = f
    J = f00 * (f11 * f22 - f12 * f21) - f01 * (f10 * f22 - f12 * f20) \
        + f02 * (f10 * f21 - f11 * f20)
    a, b, c = _coefficients(mat, J, corotated, exponent, one)
    a0, a1, a2 = a + s[0], a + s[1], a + s[2]
    g00, g01, g02 = f00 * a0 - b * r[0], f01 * a1 - b * r[1], f02 * a2 - b * r[2]
    g10, g11, g12 = f10 * a0 - b * r[3], f11 * a1 - b * r[4], f12 * a2 - b * r[5]
    g20, g21, g22 = f20 * a0 - b * r[6], f21 * a1 - b * r[7], f22 * a2 - b * r[8]
    m = rho * V
    q = -dt * K * V
    # τ is symmetric (R Fᵀ = R S Rᵀ for the polar rotation; F S Fᵀ): six entries
    t01 = q * (g00 * f10 + g01 * f11 + g02 * f12)
    t02 = q * (g00 * f20 + g01 * f21 + g02 * f22)
    t12 = q * (g10 * f20 + g11 * f21 + g12 * f22)
    return (m, (m * v[0] + dt * cable[0], m * v[1] + dt * cable[1], m * v[2] + dt * cable[2]),
            (q * (g00 * f00 + g01 * f01 + g02 * f02 + c) + m * c_mat[0], t01 + m * c_mat[1],
             t02 + m * c_mat[2], t01 + m * c_mat[3],
             q * (g10 * f10 + g11 * f11 + g12 * f12 + c) + m * c_mat[4], t12 + m * c_mat[5],
             t02 + m * c_mat[6], t12 + m * c_mat[7],
             q * (g20 * f20 + g21 * f21 + g22 * f22 + c) + m * c_mat[8]))


@_inline
def impulse2_vjp(f, r, c_mat, v, mat, rho, V, s, dt, K, corotated, exponent, g_m, g_q,
                 g_affine, one):
    """Adjoint of :func:`impulse2` given ∂L/∂m, ∂L/∂momentum (2,), ∂L/∂affine (4,).

    Returns (g_F (4,), g_C (4,), g_v (2,), g_E, g_ν, g_ρ, g_V, g_s (2,)); the cable force's
    cotangent is Δt ∂L/∂momentum."""
    f00, f01, f10, f11 = f
    J = f00 * f11 - f01 * f10
    a, b, c = _coefficients(mat, J, corotated, exponent, one)
    m = rho * V
    A0, A1, A2, A3 = g_affine
    g_mass = g_m + v[0] * g_q[0] + v[1] * g_q[1] + (c_mat[0] * A0 + c_mat[1] * A1
                                                    + c_mat[2] * A2 + c_mat[3] * A3)
    q = -dt * K * V
    # τ and its cotangent T = q Ā
    g00, g01 = f00 * (a + s[0]) - b * r[0], f01 * (a + s[1]) - b * r[1]
    g10, g11 = f10 * (a + s[0]) - b * r[2], f11 * (a + s[1]) - b * r[3]
    tau_dot = ((g00 * f00 + g01 * f01 + c) * A0 + (g00 * f10 + g01 * f11) * A1
               + (g10 * f00 + g11 * f01) * A2 + (g10 * f10 + g11 * f11 + c) * A3)
    T00, T01, T10, T11 = q * A0, q * A1, q * A2, q * A3
    # τ = G Fᵀ + cI: Ḡ = T F, F̄ = Tᵀ G + Ḡ ⊙ (a + s)_column
    G00, G01 = T00 * f00 + T01 * f10, T00 * f01 + T01 * f11
    G10, G11 = T10 * f00 + T11 * f10, T10 * f01 + T11 * f11
    h00 = T00 * g00 + T10 * g10 + G00 * (a + s[0])
    h01 = T00 * g01 + T10 * g11 + G01 * (a + s[1])
    h10 = T01 * g00 + T11 * g10 + G10 * (a + s[0])
    h11 = T01 * g01 + T11 * g11 + G11 * (a + s[1])
    g_a = G00 * f00 + G01 * f01 + G10 * f10 + G11 * f11
    g_b = -(G00 * r[0] + G01 * r[1] + G10 * r[2] + G11 * r[3])
    g_s = (G00 * f00 + G10 * f10, G01 * f01 + G11 * f11)
    g_c = T00 + T11
    if corotated:
        # R̄ = −b Ḡ through the polar rotation: ω = (M₁₀ − M₀₁)/tr(RᵀF), M = RᵀR̄
        trace = r[0] * f00 + r[2] * f10 + r[1] * f01 + r[3] * f11
        m10 = -b * (r[1] * G00 + r[3] * G10)
        m01 = -b * (r[0] * G01 + r[2] * G11)
        w = (m10 - m01) / trace
        h00 += r[1] * w
        h10 += r[3] * w
        h01 -= r[0] * w
        h11 -= r[2] * w
    g_J, g_E, g_nu = _coefficients_vjp(mat, J, corotated, exponent, g_a, g_b, g_c, one)
    # ∂J/∂F = cof F
    g_F = (h00 + g_J * f11, h01 - g_J * f10, h10 - g_J * f01, h11 + g_J * f00)
    g_V = -dt * K * tau_dot + g_mass * rho
    return (g_F, (m * A0, m * A1, m * A2, m * A3), (m * g_q[0], m * g_q[1]), g_E, g_nu,
            g_mass * V, g_V, g_s)


@_inline
def impulse3_vjp(f, r, c_mat, v, mat, rho, V, s, dt, K, corotated, exponent, g_m, g_q,
                 g_affine, one):
    """Adjoint of :func:`impulse3`; see impulse2_vjp (tuples of 9 and 3)."""
    f00, f01, f02, f10, f11, f12, f20, f21, f22 = f
    r00, r01, r02, r10, r11, r12, r20, r21, r22 = r
    A = g_affine
    cof = cofactor9(f)
    J = f00 * cof[0] + f01 * cof[1] + f02 * cof[2]
    a, b, c = _coefficients(mat, J, corotated, exponent, one)
    m = rho * V
    g_mass = g_m + v[0] * g_q[0] + v[1] * g_q[1] + v[2] * g_q[2]
    for k in range(9):
        g_mass += c_mat[k] * A[k]
    q = -dt * K * V
    a0, a1, a2 = a + s[0], a + s[1], a + s[2]
    g00, g01, g02 = f00 * a0 - b * r00, f01 * a1 - b * r01, f02 * a2 - b * r02
    g10, g11, g12 = f10 * a0 - b * r10, f11 * a1 - b * r11, f12 * a2 - b * r12
    g20, g21, g22 = f20 * a0 - b * r20, f21 * a1 - b * r21, f22 * a2 - b * r22
    tau_dot = ((g00 * f00 + g01 * f01 + g02 * f02 + c) * A[0]
               + (g00 * f10 + g01 * f11 + g02 * f12) * A[1]
               + (g00 * f20 + g01 * f21 + g02 * f22) * A[2]
               + (g10 * f00 + g11 * f01 + g12 * f02) * A[3]
               + (g10 * f10 + g11 * f11 + g12 * f12 + c) * A[4]
               + (g10 * f20 + g11 * f21 + g12 * f22) * A[5]
               + (g20 * f00 + g21 * f01 + g22 * f02) * A[6]
               + (g20 * f10 + g21 * f11 + g22 * f12) * A[7]
               + (g20 * f20 + g21 * f21 + g22 * f22 + c) * A[8])
    T00, T01, T02 = q * A[0], q * A[1], q * A[2]
    T10, T11, T12 = q * A[3], q * A[4], q * A[5]
    T20, T21, T22 = q * A[6], q * A[7], q * A[8]
    # Ḡ = T F
    G00 = T00 * f00 + T01 * f10 + T02 * f20
    G01 = T00 * f01 + T01 * f11 + T02 * f21
    G02 = T00 * f02 + T01 * f12 + T02 * f22
    G10 = T10 * f00 + T11 * f10 + T12 * f20
    G11 = T10 * f01 + T11 * f11 + T12 * f21
    G12 = T10 * f02 + T11 * f12 + T12 * f22
    G20 = T20 * f00 + T21 * f10 + T22 * f20
    G21 = T20 * f01 + T21 * f11 + T22 * f21
    G22 = T20 * f02 + T21 * f12 + T22 * f22
    # F̄ = Tᵀ G + Ḡ ⊙ (a + s)_column
    h00 = T00 * g00 + T10 * g10 + T20 * g20 + G00 * a0
    h01 = T00 * g01 + T10 * g11 + T20 * g21 + G01 * a1
    h02 = T00 * g02 + T10 * g12 + T20 * g22 + G02 * a2
    h10 = T01 * g00 + T11 * g10 + T21 * g20 + G10 * a0
    h11 = T01 * g01 + T11 * g11 + T21 * g21 + G11 * a1
    h12 = T01 * g02 + T11 * g12 + T21 * g22 + G12 * a2
    h20 = T02 * g00 + T12 * g10 + T22 * g20 + G20 * a0
    h21 = T02 * g01 + T12 * g11 + T22 * g21 + G21 * a1
    h22 = T02 * g02 + T12 * g12 + T22 * g22 + G22 * a2
    g_a = (G00 * f00 + G01 * f01 + G02 * f02 + G10 * f10 + G11 * f11 + G12 * f12
           + G20 * f20 + G21 * f21 + G22 * f22)
    g_b = -(G00 * r00 + G01 * r01 + G02 * r02 + G10 * r10 + G11 * r11 + G12 * r12
            + G20 * r20 + G21 * r21 + G22 * r22)
    g_s = (G00 * f00 + G10 * f10 + G20 * f20, G01 * f01 + G11 * f11 + G21 * f21,
           G02 * f02 + G12 * f12 + G22 * f22)
    g_c = T00 + T11 + T22
    if corotated:
        # R̄ = −b Ḡ through the polar rotation (materials.polar_rotation_vjp): m = axial
        # part of M = RᵀR̄, (tr S·I − sym S) ω = m with S = RᵀF, F̄ += R [ω]×
        m0 = -b * (r02 * G01 + r12 * G11 + r22 * G21 - r01 * G02 - r11 * G12 - r21 * G22)
        m1 = -b * (r00 * G02 + r10 * G12 + r20 * G22 - r02 * G00 - r12 * G10 - r22 * G20)
        m2 = -b * (r01 * G00 + r11 * G10 + r21 * G20 - r00 * G01 - r10 * G11 - r20 * G21)
        s00 = r00 * f00 + r10 * f10 + r20 * f20
        s11 = r01 * f01 + r11 * f11 + r21 * f21
        s22 = r02 * f02 + r12 * f12 + r22 * f22
        s01 = r00 * f01 + r10 * f11 + r20 * f21
        s10 = r01 * f00 + r11 * f10 + r21 * f20
        s02 = r00 * f02 + r10 * f12 + r20 * f22
        s20 = r02 * f00 + r12 * f10 + r22 * f20
        s12 = r01 * f02 + r11 * f12 + r21 * f22
        s21 = r02 * f01 + r12 * f11 + r22 * f21
        trace = s00 + s11 + s22
        half = one / (one + one)
        b00, b11, b22 = trace - s00, trace - s11, trace - s22
        b01, b02, b12 = -half * (s01 + s10), -half * (s02 + s20), -half * (s12 + s21)
        c00 = b11 * b22 - b12 * b12
        c01 = b02 * b12 - b01 * b22
        c02 = b01 * b12 - b02 * b11
        c11 = b00 * b22 - b02 * b02
        c12 = b01 * b02 - b00 * b12
        c22 = b00 * b11 - b01 * b01
        inv = one / (b00 * c00 + b01 * c01 + b02 * c02)
        w0 = (c00 * m0 + c01 * m1 + c02 * m2) * inv
        w1 = (c01 * m0 + c11 * m1 + c12 * m2) * inv
        w2 = (c02 * m0 + c12 * m1 + c22 * m2) * inv
        h00 += r01 * w2 - r02 * w1
        h01 += r02 * w0 - r00 * w2
        h02 += r00 * w1 - r01 * w0
        h10 += r11 * w2 - r12 * w1
        h11 += r12 * w0 - r10 * w2
        h12 += r10 * w1 - r11 * w0
        h20 += r21 * w2 - r22 * w1
        h21 += r22 * w0 - r20 * w2
        h22 += r20 * w1 - r21 * w0
    g_J, g_E, g_nu = _coefficients_vjp(mat, J, corotated, exponent, g_a, g_b, g_c, one)
    g_F = (h00 + g_J * cof[0], h01 + g_J * cof[1], h02 + g_J * cof[2],
           h10 + g_J * cof[3], h11 + g_J * cof[4], h12 + g_J * cof[5],
           h20 + g_J * cof[6], h21 + g_J * cof[7], h22 + g_J * cof[8])
    g_C = (m * A[0], m * A[1], m * A[2], m * A[3], m * A[4], m * A[5], m * A[6], m * A[7],
           m * A[8])
    return (g_F, g_C, (m * g_q[0], m * g_q[1], m * g_q[2]), g_E, g_nu, g_mass * V,
            -dt * K * tau_dot + g_mass * rho, g_s)


# -- stencils -----------------------------------------------------------------------------------


@_inline
def _axis(x, p, k, dx, res):
    """Stencil along axis k of particle p: base node b, fraction f = x/Δx − b, the three
    quadratic B-spline weights w(f) and their derivatives dw/df, in x's precision."""
    T = x.dtype.type
    xs = x[p, k] / dx
    b = min(max(int(np.floor(xs - T(0.5))), 0), res - 3)
    f = xs - T(b)
    u = T(1.5) - f
    v = f - T(1.0)
    z = f - T(0.5)
    return b, f, T(0.5) * u * u, T(0.75) - v * v, T(0.5) * z * z, -u, T(-2.0) * v, z


@_inline
def _pick3(i, a0, a1, a2):
    """a_i for a compile-time i in {0, 1, 2} (the stencil loops are unrolled)."""
    return a0 if i == 0 else (a1 if i == 1 else a2)


# -- P2G ----------------------------------------------------------------------------------------


@_inline
def _p2g2(x, p, dx, res, m, q, A, flat, base):
    """Scatter particle p's mass and momentum (2D) into the grid accumulator ``flat`` (the
    flattened (chunks, nodes, 4) array; ``base`` = the chunk's first node); returns the
    particle's base node."""
    zero = m - m
    b0, f0, wa0, wa1, wa2, _, _, _ = _axis(x, p, 0, dx, res)
    b1, f1, wb0, wb1, wb2, _, _, _ = _axis(x, p, 1, dx, res)
    a00, a01, a10, a11 = A
    c00, c10, c01, c11 = dx * a00, dx * a10, dx * a01, dx * a11
    u0 = q[0] - (c00 * f0 + c01 * f1)
    u1 = q[1] - (c10 * f0 + c11 * f1)
    for i0 in range(3):
        w0 = _pick3(i0, wa0, wa1, wa2)
        n0, n1 = u0, u1
        row = (b0 + i0) * res + b1
        for i1 in range(3):
            wt = w0 * _pick3(i1, wb0, wb1, wb2)
            i = row + i1
            add4(flat, (base + i) * 4, wt, n0, n1, m, zero)
            n0, n1 = n0 + c01, n1 + c11
        u0, u1 = u0 + c00, u1 + c10
    return b0, b1


@_inline
def _p2g3(x, p, dx, res, m, q, A, flat, base):
    """The 3D counterpart of :func:`_p2g2`."""
    b0, f0, wa0, wa1, wa2, _, _, _ = _axis(x, p, 0, dx, res)
    b1, f1, wb0, wb1, wb2, _, _, _ = _axis(x, p, 1, dx, res)
    b2, f2, wc0, wc1, wc2, _, _, _ = _axis(x, p, 2, dx, res)
    a00, a01, a02, a10, a11, a12, a20, a21, a22 = A
    # the node value momentum + A o steps by Δx A[:, k] along axis k (added, not multiplied
    # by the index: 0 · c is not folded away without fast-math)
    c00, c10, c20 = dx * a00, dx * a10, dx * a20
    c01, c11, c21 = dx * a01, dx * a11, dx * a21
    c02, c12, c22 = dx * a02, dx * a12, dx * a22
    u0 = q[0] - (c00 * f0 + c01 * f1 + c02 * f2)
    u1 = q[1] - (c10 * f0 + c11 * f1 + c12 * f2)
    u2 = q[2] - (c20 * f0 + c21 * f1 + c22 * f2)
    for i0 in range(3):
        w0 = _pick3(i0, wa0, wa1, wa2)
        v0, v1, v2 = u0, u1, u2
        for i1 in range(3):
            w01 = w0 * _pick3(i1, wb0, wb1, wb2)
            n0, n1, n2 = v0, v1, v2
            row = ((b0 + i0) * res + b1 + i1) * res + b2
            for i2 in range(3):
                wt = w01 * _pick3(i2, wc0, wc1, wc2)
                i = row + i2
                add4(flat, (base + i) * 4, wt, n0, n1, n2, m)
                n0, n1, n2 = n0 + c02, n1 + c12, n2 + c22
            v0, v1, v2 = v0 + c01, v1 + c11, v2 + c21
        u0, u1, u2 = u0 + c00, u1 + c10, u2 + c20
    return b0, b1, b2


@_inline
def _actuation_rows(start, stop, act, out):
    """Diagonal actuation stress σ_a of particles start ≤ p < stop into out (d, n). Its own
    loop: an index read from memory (the particle's actuator) keeps LLVM from vectorizing
    the loops that use it."""
    row, scale, axes, _ = act
    d = out.shape[0]
    for p in range(start, stop):
        k = row[p]
        s = scale[k]
        for a in range(d):
            out[a, p] = s * axes[k, a]


@_inline
def _impulse2_loop(start, stop, state, mat, act, work, dt, corotated, exponent, one):
    """P2G inputs of 2D particles start ≤ p < stop into the rows of work.saved (m, momentum
    (2), affine (4)); vectorized like :func:`_stress2_vjp_loop`."""
    _, v, F, C = state
    T = F.dtype.type
    E, nu, rho, V = mat
    K, table, actuation, saved, cable_f = (work.K, work.table, work.actuation, work.saved,
                                           act.cable_force)
    F, C, v, cable_f = F.reshape(-1), C.reshape(-1), v.reshape(-1), cable_f.reshape(-1)
    for p in range(np.uint64(start), np.uint64(stop)):
        f2 = _flat4(F, p)
        r2 = rotation2(f2, one) if corotated else f2
        i = np.uint64(2) * p
        j = i + np.uint64(1)
        m, q, A = impulse2(f2, r2, _flat4(C, p), (v[i], v[j]), material(E, nu, table, p),
                           T(rho[p]), T(V[p]), (actuation[0, p], actuation[1, p]),
                           (cable_f[i], cable_f[j]), dt, K, corotated, exponent, one)
        saved[0, p] = m
        saved[1, p], saved[2, p] = q
        saved[3, p], saved[4, p], saved[5, p], saved[6, p] = A


@_inline
def _impulse3_loop(start, stop, state, mat, act, work, dt, corotated, exponent, one):
    """The 3D counterpart of :func:`_impulse2_loop` (rows m, momentum (3), affine (9))."""
    _, v, F, C = state
    T = F.dtype.type
    E, nu, rho, V = mat
    K, rotation, table, actuation, saved, cable_f = (
        work.K, work.rotation, work.table, work.actuation, work.saved, act.cable_force)
    F, C, v, cable_f = F.reshape(-1), C.reshape(-1), v.reshape(-1), cable_f.reshape(-1)
    for p in range(np.uint64(start), np.uint64(stop)):
        f3 = _flat9(F, p)
        r3 = rotation3(rotation, p) if corotated else f3
        i = np.uint64(3) * p
        j, k = i + np.uint64(1), i + np.uint64(2)
        m, q, A = impulse3(f3, r3, _flat9(C, p), (v[i], v[j], v[k]), material(E, nu, table, p),
                           T(rho[p]), T(V[p]),
                           (actuation[0, p], actuation[1, p], actuation[2, p]),
                           (cable_f[i], cable_f[j], cable_f[k]), dt, K, corotated, exponent, one)
        saved[0, p] = m
        saved[1, p], saved[2, p], saved[3, p] = q
        (saved[4, p], saved[5, p], saved[6, p], saved[7, p], saved[8, p], saved[9, p],
         saved[10, p], saved[11, p], saved[12, p]) = A


@_range
def _particles_to_grid_range(start, stop, chunk, state, mat, act, work, dt):
    """Particle stresses and P2G, one chunk of particles per work.acc[chunk].

    Fills work's rotation (3D corotated), table, actuation, saved (the adjoint reads them
    too) and box[chunk] (lo = res, hi = 0 for an empty chunk); work.acc must be zero where
    the particles scatter (the grid pass zeroes it again).

    The per-particle physics runs in loops that LLVM vectorizes, the scatter in a loop of
    its own."""
    state, mat, act, work = Particles(*state), Materials(*mat), Actuation(*act), Work(*work)
    x, _, F, _ = state
    dx, tolerance, res, corotated, exponent, rotation, table, saved, box, acc = (
        work.dx, work.tolerance, work.res, work.corotated, work.exponent, work.rotation,
        work.table, work.saved, work.box, work.acc)
    d = DIM
    one = x.dtype.type(1.0)
    material_batch(mat.E, mat.nu, table, start, stop, one)
    _actuation_rows(start, stop, act, work.actuation)
    if d == 2:
        # the common material compiled with constant switches, which lets the loop vectorize
        # (COMMON_MATERIAL: this build is for it, see Variant)
        if COMMON_MATERIAL:
            _impulse2_loop(start, stop, state, mat, act, work, dt, True, 0, one)
        else:
            _impulse2_loop(start, stop, state, mat, act, work, dt, corotated, exponent, one)
    else:
        if corotated:
            polar3_batch(F, rotation, start, stop, tolerance, one)
            polar3_finish(F, rotation, start, stop, tolerance, one)
        if COMMON_MATERIAL:
            _impulse3_loop(start, stop, state, mat, act, work, dt, True, 0, one)
        else:
            _impulse3_loop(start, stop, state, mat, act, work, dt, corotated, exponent, one)
    flat = acc.reshape(-1)
    base = chunk * acc.shape[1]
    lo0 = lo1 = lo2 = res
    hi0 = hi1 = hi2 = 0
    for p in range(start, stop):
        if d == 2:
            b0, b1 = _p2g2(x, p, dx, res, saved[0, p], (saved[1, p], saved[2, p]),
                           (saved[3, p], saved[4, p], saved[5, p], saved[6, p]), flat, base)
            b2 = 0
        else:
            b0, b1, b2 = _p2g3(x, p, dx, res, saved[0, p], (saved[1, p], saved[2, p], saved[3, p]),
                               (saved[4, p], saved[5, p], saved[6, p], saved[7, p], saved[8, p],
                                saved[9, p], saved[10, p], saved[11, p], saved[12, p]), flat,
                               base)
        lo0, hi0 = min(lo0, b0), max(hi0, b0 + 3)
        lo1, hi1 = min(lo1, b1), max(hi1, b1 + 3)
        lo2, hi2 = min(lo2, b2), max(hi2, b2 + 3)
    box[chunk, 0, 0], box[chunk, 1, 0] = lo0, hi0
    box[chunk, 0, 1], box[chunk, 1, 1] = lo1, hi1
    if d == 3:
        box[chunk, 0, 2], box[chunk, 1, 2] = lo2, hi2


def _particles_to_grid(state, mat, act, work, dt):
    """Particle stresses and P2G of a step of dt [s], chunk by chunk (see
    _particles_to_grid_range), one chunk of particles per work.acc[chunk]."""
    bounds = Work(*work).bounds
    for chunk in numba.prange(bounds.shape[0] - 1):
        _particles_to_grid_range(bounds[chunk], bounds[chunk + 1], chunk, state, mat, act,
                                 work, dt)


particles_to_grid = Kernel(_particles_to_grid, per_variant=True)


# -- stencil sweeps shared by G2P and the adjoints ----------------------------------------------


@intrinsic
def row_sums(typingctx, array, index, weights):
    """Weighted sums over three consecutive grid nodes of four lanes each: for every weight
    triple (w₀, w₁, w₂) in ``weights`` (a tuple of 3·S floats), w₀ g₀ + w₁ g₁ + w₂ g₂ with
    g_k = array[index + 4k : index + 4k + 4]; returns the S sums' lanes, 4·S floats.

    The stencil sweeps gather a row of the quadratic stencil with it: three vector loads
    and 3·S vector multiply-adds where scalar code issues twelve loads and 12·S."""
    count = len(weights)
    if count % 3 or not isinstance(array, numba.types.Array):
        return None
    dtype = array.dtype
    sig = numba.types.UniTuple(dtype, 4 * (count // 3))(array, index, weights)

    def codegen(context, builder, signature, args):
        array_value, offset, weight_tuple = args
        element = context.get_data_type(dtype)
        vector = ir.VectorType(element, 4)
        data = context.make_array(signature.args[0])(context, builder, array_value).data
        align = 4 if element == ir.FloatType() else 8  # the element's, not the vector's
        nodes = []
        for k in range(3):
            at = builder.add(offset, ir.Constant(offset.type, 4 * k))
            pointer = builder.bitcast(builder.gep(data, [at], inbounds=True),
                                      vector.as_pointer())
            nodes.append(builder.load(pointer, align=align))
        fma = _vector_fma(builder, element, vector)
        weight_values = cgutils.unpack_tuple(builder, weight_tuple, count)
        lanes = []
        for first in range(0, count, 3):
            total = None
            for k in range(3):
                weight = _splat(builder, vector, weight_values[first + k])
                total = (builder.fmul(weight, nodes[k]) if total is None
                         else builder.call(fma, [weight, nodes[k], total]))
            lanes.extend(builder.extract_element(total, ir.Constant(ir.IntType(32), lane))
                         for lane in range(4))
        return context.make_tuple(builder, signature.return_type, lanes)

    return sig, codegen


@_inline
def _sweep2(x, p, dx, res, field, base, M, m, target, first, with_dot, with_mass, scatter):
    """One pass over particle p's 2D stencil: (Σ w g (2,), Σ w g oᵀ (4,), Σ w g_m,
    Σ ∂w/∂x (g·u + g_m m) (2,)).

    ``field`` is a flattened (nodes, 4) array: g its first two lanes at the node, g_m its
    third (``with_mass``); o is the node's offset from the particle and u = base + M o
    (row-major M (4,)); ``with_dot`` computes the last sum (else zeros), ``scatter`` adds
    w u into ``target``, a flattened (chunks, nodes, 4) array whose chunk starts at node
    ``first``. G2P gathers (v, C/K); the G2P adjoint scatters ∂L/∂(grid v) with u = ∂L/∂v'
    + K Ĉ o; the P2G adjoint gathers with u = momentum + A o.

    Rows of the stencil (i₀ fixed) are gathered by :func:`row_sums` as moments Σ w₁ g,
    Σ i₁ w₁ g (and with the weights' derivatives for the position gradient): u is linear
    in the node index, so Σ w₁ g·u = (Σ w₁ g)·h + (Σ i₁ w₁ g)·c₁ with h the row's first u."""
    T = x.dtype.type
    zero = T(0.0)
    two = T(2.0)
    inv_dx = T(1.0) / dx
    b0, f0, wa0, wa1, wa2, da0, da1, da2 = _axis(x, p, 0, dx, res)
    b1, f1, wb0, wb1, wb2, db0, db1, db2 = _axis(x, p, 1, dx, res)
    # u at node i = e + i₀ c₀ + i₁ c₁, stepped by c₀, c₁ (added, not multiplied by the index:
    # 0 · c is not folded away without fast-math)
    c00, c01, c10, c11 = dx * M[0], dx * M[1], dx * M[2], dx * M[3]
    e0 = base[0] - (c00 * f0 + c01 * f1)
    e1 = base[1] - (c10 * f0 + c11 * f1)
    v0 = v1 = vm = s00 = s01 = s10 = s11 = x0 = x1 = zero  # s_ca = Σ w g_c i_a
    h0, h1 = e0, e1
    for i0 in range(3):
        w0 = _pick3(i0, wa0, wa1, wa2)
        i = (b0 + i0) * res + b1
        if with_dot:
            (r0, r1, rm, _, y0, y1, _, _, k0, k1, km, _, z0, z1, _, _) = row_sums(
                field, 4 * i, (wb0, wb1, wb2, zero, wb1, two * wb2, db0, db1, db2, zero, db1,
                               two * db2))
            # Σ_i₁ w₁ (g·u + g_m m) and the same with dw₁/df
            t0 = r0 * h0 + r1 * h1 + y0 * c01 + y1 * c11
            t1 = k0 * h0 + k1 * h1 + z0 * c01 + z1 * c11
            if with_mass:
                t0 += rm * m
                t1 += km * m
        else:
            r0, r1, rm, _, y0, y1, _, _ = row_sums(field, 4 * i,
                                                   (wb0, wb1, wb2, zero, wb1, two * wb2))
        if scatter:
            n0, n1 = h0, h1
            for i1 in range(3):
                add4(target, (first + i + i1) * 4, w0 * _pick3(i1, wb0, wb1, wb2), n0, n1,
                     zero, zero)
                n0, n1 = n0 + c01, n1 + c11
        h0, h1 = h0 + c00, h1 + c10
        v0 += w0 * r0
        v1 += w0 * r1
        if i0 > 0:
            s00 += T(i0) * w0 * r0
            s10 += T(i0) * w0 * r1
        s01 += w0 * y0
        s11 += w0 * y1
        # (guarded: w · 0 is not folded away without fast-math)
        if with_mass:
            vm += w0 * rm
        if with_dot:
            x0 += _pick3(i0, da0, da1, da2) * t0
            x1 += w0 * t1
    return ((v0, v1),
            (dx * (s00 - v0 * f0), dx * (s01 - v0 * f1), dx * (s10 - v1 * f0),
             dx * (s11 - v1 * f1)),
            vm, (x0 * inv_dx, x1 * inv_dx))


@_inline
def _sweep3(x, p, dx, res, field, base, M, m, target, first, with_dot, with_mass, scatter):
    """The 3D counterpart of :func:`_sweep2` (tuples of 3, 9, and 3; g_m is lane 3; rows
    along i₂)."""
    T = x.dtype.type
    zero = T(0.0)
    two = T(2.0)
    inv_dx = T(1.0) / dx
    b0, f0, wa0, wa1, wa2, da0, da1, da2 = _axis(x, p, 0, dx, res)
    b1, f1, wb0, wb1, wb2, db0, db1, db2 = _axis(x, p, 1, dx, res)
    b2, f2, wc0, wc1, wc2, dc0, dc1, dc2 = _axis(x, p, 2, dx, res)
    c00, c01, c02 = dx * M[0], dx * M[1], dx * M[2]
    c10, c11, c12 = dx * M[3], dx * M[4], dx * M[5]
    c20, c21, c22 = dx * M[6], dx * M[7], dx * M[8]
    e0 = base[0] - (c00 * f0 + c01 * f1 + c02 * f2)
    e1 = base[1] - (c10 * f0 + c11 * f1 + c12 * f2)
    e2 = base[2] - (c20 * f0 + c21 * f1 + c22 * f2)
    v0 = v1 = v2 = vm = x0 = x1 = x2 = zero
    s00 = s01 = s02 = s10 = s11 = s12 = s20 = s21 = s22 = zero  # s_ca = Σ w g_c i_a
    h0, h1, h2 = e0, e1, e2
    for i0 in range(3):
        w0 = _pick3(i0, wa0, wa1, wa2)
        j0, j1, j2 = h0, h1, h2
        r0 = r1 = r2 = rm = y0 = y1 = y2 = z0 = z1 = z2 = ta = tb = tc = zero
        for i1 in range(3):
            w1 = _pick3(i1, wb0, wb1, wb2)
            i = ((b0 + i0) * res + b1 + i1) * res + b2
            if with_dot:
                (q0, q1, q2, qm, o0, o1, o2, _, k0, k1, k2, km, l0, l1, l2, _) = row_sums(
                    field, 4 * i, (wc0, wc1, wc2, zero, wc1, two * wc2, dc0, dc1, dc2, zero,
                                   dc1, two * dc2))
                # Σ_i₂ w₂ (g·u + g_m m) and the same with dw₂/df
                t = q0 * j0 + q1 * j1 + q2 * j2 + o0 * c02 + o1 * c12 + o2 * c22
                tz = k0 * j0 + k1 * j1 + k2 * j2 + l0 * c02 + l1 * c12 + l2 * c22
                if with_mass:
                    t += qm * m
                    tz += km * m
            else:
                q0, q1, q2, qm, o0, o1, o2, _ = row_sums(field, 4 * i,
                                                         (wc0, wc1, wc2, zero, wc1, two * wc2))
            if scatter:
                w01 = w0 * w1
                n0, n1, n2 = j0, j1, j2
                for i2 in range(3):
                    add4(target, (first + i + i2) * 4, w01 * _pick3(i2, wc0, wc1, wc2), n0, n1,
                         n2, zero)
                    n0, n1, n2 = n0 + c02, n1 + c12, n2 + c22
            j0, j1, j2 = j0 + c01, j1 + c11, j2 + c21
            r0 += w1 * q0
            r1 += w1 * q1
            r2 += w1 * q2
            if i1 > 0:
                y0 += T(i1) * w1 * q0
                y1 += T(i1) * w1 * q1
                y2 += T(i1) * w1 * q2
            z0 += w1 * o0
            z1 += w1 * o1
            z2 += w1 * o2
            # (guarded: w · 0 is not folded away without fast-math)
            if with_mass:
                rm += w1 * qm
            if with_dot:
                ta += w1 * t
                tb += _pick3(i1, db0, db1, db2) * t
                tc += w1 * tz
        v0 += w0 * r0
        v1 += w0 * r1
        v2 += w0 * r2
        if i0 > 0:
            s00 += T(i0) * w0 * r0
            s10 += T(i0) * w0 * r1
            s20 += T(i0) * w0 * r2
        s01 += w0 * y0
        s11 += w0 * y1
        s21 += w0 * y2
        s02 += w0 * z0
        s12 += w0 * z1
        s22 += w0 * z2
        if with_mass:
            vm += w0 * rm
        if with_dot:
            x0 += _pick3(i0, da0, da1, da2) * ta
            x1 += w0 * tb
            x2 += w0 * tc
        h0, h1, h2 = h0 + c00, h1 + c10, h2 + c20
    return ((v0, v1, v2),
            (dx * (s00 - v0 * f0), dx * (s01 - v0 * f1), dx * (s02 - v0 * f2),
             dx * (s10 - v1 * f0), dx * (s11 - v1 * f1), dx * (s12 - v1 * f2),
             dx * (s20 - v2 * f0), dx * (s21 - v2 * f1), dx * (s22 - v2 * f2)),
            vm, (x0 * inv_dx, x1 * inv_dx, x2 * inv_dx))


# -- G2P ----------------------------------------------------------------------------------------


@_range
def _grid_to_particles_range(start, stop, state, work, dt, new):
    """G2P of particles start ≤ p < stop into ``new`` (x, v, F, C)."""
    x, _, F, _ = state
    work = Work(*work)
    dx, K, res, grid_v = work.dx, work.K, work.res, work.grid_v
    new_x, new_v, new_F, new_C = new
    d = DIM
    zero = x.dtype.type(0.0)
    unused = np.empty(0, dtype=x.dtype)
    field = grid_v.reshape(-1)
    for p in range(start, stop):
        if d == 2:
            v2, o2, _, _ = _sweep2(x, p, dx, res, field, (zero, zero), (zero, zero, zero, zero),
                                   zero, unused, 0, False, False, False)
            c2 = (K * o2[0], K * o2[1], K * o2[2], K * o2[3])
            f2 = load4(F, p)
            for a in range(2):
                new_v[p, a] = v2[a]
                new_x[p, a] = x[p, a] + dt * v2[a]
                for b in range(2):
                    new_C[p, a, b] = c2[2 * a + b]
                    new_F[p, a, b] = f2[2 * a + b] + dt * (c2[2 * a] * f2[b]
                                                           + c2[2 * a + 1] * f2[2 + b])
        else:
            v3, o3, _, _ = _sweep3(x, p, dx, res, field, (zero, zero, zero),
                                   (zero, zero, zero, zero, zero, zero, zero, zero, zero), zero,
                                   unused, 0, False, False, False)
            c3 = (K * o3[0], K * o3[1], K * o3[2], K * o3[3], K * o3[4], K * o3[5], K * o3[6],
                  K * o3[7], K * o3[8])
            f3 = load9(F, p)
            for a in range(3):
                new_v[p, a] = v3[a]
                new_x[p, a] = x[p, a] + dt * v3[a]
                for b in range(3):
                    new_C[p, a, b] = c3[3 * a + b]
                    new_F[p, a, b] = f3[3 * a + b] + dt * (c3[3 * a] * f3[b]
                                                           + c3[3 * a + 1] * f3[3 + b]
                                                           + c3[3 * a + 2] * f3[6 + b])


def _grid_to_particles(state, work, dt):
    """G2P: the particles' (x, v, F, C) after a step of dt [s] from the grid velocities
    work.grid_v, chunk by chunk."""
    x, _, F, _ = state
    bounds = Work(*work).bounds
    new = (np.empty_like(x), np.empty_like(x), np.empty_like(F), np.empty_like(F))
    for chunk in numba.prange(bounds.shape[0] - 1):
        _grid_to_particles_range(bounds[chunk], bounds[chunk + 1], state, work, dt, new)
    return new


grid_to_particles = Kernel(_grid_to_particles, per_variant=True)


# -- G2P adjoint --------------------------------------------------------------------------------


@_range
def _grid_to_particles_vjp_range(start, stop, chunk, state, g_next, work, dt, g_x, g_F):
    """The G2P adjoint of particles start ≤ p < stop (see _grid_to_particles_vjp)."""
    x, _, F, _ = state
    gx, gv, gF, gC = g_next
    work = Work(*work)
    dx, K, res, grid_v, g_acc = work.dx, work.K, work.res, work.grid_v, work.g_acc
    d = DIM
    zero = x.dtype.type(0.0)
    field = grid_v.reshape(-1)
    flat = g_acc.reshape(-1)
    first = chunk * g_acc.shape[1]
    for p in range(start, stop):
        if d == 2:
            f2 = load4(F, p)
            h2 = load4(gF, p)
            u2 = (gv[p, 0] + dt * gx[p, 0], gv[p, 1] + dt * gx[p, 1])
            # ∂L/∂C' of the gathered C: g_C' + Δt g_F' Fᵀ
            e2 = (gC[p, 0, 0] + dt * (h2[0] * f2[0] + h2[1] * f2[1]),
                  gC[p, 0, 1] + dt * (h2[0] * f2[2] + h2[1] * f2[3]),
                  gC[p, 1, 0] + dt * (h2[2] * f2[0] + h2[3] * f2[1]),
                  gC[p, 1, 1] + dt * (h2[2] * f2[2] + h2[3] * f2[3]))
            v2, o2, _, x2 = _sweep2(x, p, dx, res, field, u2,
                                    (K * e2[0], K * e2[1], K * e2[2], K * e2[3]), zero, flat,
                                    first, True, False, True)
            c2 = (K * o2[0], K * o2[1], K * o2[2], K * o2[3])
            for a in range(2):
                # −K Ĉᵀ v from the offsets' dependence on x
                g_x[p, a] = gx[p, a] + x2[a] - K * (e2[a] * v2[0] + e2[2 + a] * v2[1])
                for b in range(2):
                    g_F[p, a, b] = h2[2 * a + b] + dt * (c2[a] * h2[b] + c2[2 + a] * h2[2 + b])
        else:
            f3 = load9(F, p)
            h3 = load9(gF, p)
            u3 = (gv[p, 0] + dt * gx[p, 0], gv[p, 1] + dt * gx[p, 1],
                  gv[p, 2] + dt * gx[p, 2])
            e3 = (gC[p, 0, 0] + dt * (h3[0] * f3[0] + h3[1] * f3[1] + h3[2] * f3[2]),
                  gC[p, 0, 1] + dt * (h3[0] * f3[3] + h3[1] * f3[4] + h3[2] * f3[5]),
                  gC[p, 0, 2] + dt * (h3[0] * f3[6] + h3[1] * f3[7] + h3[2] * f3[8]),
                  gC[p, 1, 0] + dt * (h3[3] * f3[0] + h3[4] * f3[1] + h3[5] * f3[2]),
                  gC[p, 1, 1] + dt * (h3[3] * f3[3] + h3[4] * f3[4] + h3[5] * f3[5]),
                  gC[p, 1, 2] + dt * (h3[3] * f3[6] + h3[4] * f3[7] + h3[5] * f3[8]),
                  gC[p, 2, 0] + dt * (h3[6] * f3[0] + h3[7] * f3[1] + h3[8] * f3[2]),
                  gC[p, 2, 1] + dt * (h3[6] * f3[3] + h3[7] * f3[4] + h3[8] * f3[5]),
                  gC[p, 2, 2] + dt * (h3[6] * f3[6] + h3[7] * f3[7] + h3[8] * f3[8]))
            v3, o3, _, x3 = _sweep3(
                x, p, dx, res, field, u3,
                (K * e3[0], K * e3[1], K * e3[2], K * e3[3], K * e3[4], K * e3[5], K * e3[6],
                 K * e3[7], K * e3[8]), zero, flat, first, True, False, True)
            c3 = (K * o3[0], K * o3[1], K * o3[2], K * o3[3], K * o3[4], K * o3[5], K * o3[6],
                  K * o3[7], K * o3[8])
            for a in range(3):
                g_x[p, a] = gx[p, a] + x3[a] - K * (e3[a] * v3[0] + e3[3 + a] * v3[1]
                                                    + e3[6 + a] * v3[2])
                for b in range(3):
                    g_F[p, a, b] = h3[3 * a + b] + dt * (c3[a] * h3[b] + c3[3 + a] * h3[3 + b]
                                                         + c3[6 + a] * h3[6 + b])


def _grid_to_particles_vjp(state, g_next, work, dt):
    """Adjoint of G2P given the Particles g_next = ∂L/∂(x', v', F', C'): returns (∂L/∂x,
    ∂L/∂F) through G2P and scatters ∂L/∂(grid v) into work.g_acc[chunk] (zero where the
    particles scatter; the last lane, or two in 2D, stays zero)."""
    x, _, F, _ = state
    bounds = Work(*work).bounds
    g_x = np.empty_like(x)
    g_F = np.empty_like(F)
    for chunk in numba.prange(bounds.shape[0] - 1):
        _grid_to_particles_vjp_range(bounds[chunk], bounds[chunk + 1], chunk, state, g_next,
                                     work, dt, g_x, g_F)
    return g_x, g_F


grid_to_particles_vjp = Kernel(_grid_to_particles_vjp, per_variant=True)


# -- P2G adjoint --------------------------------------------------------------------------------


@_inline
def _flat4(A, p):
    """Entries 4p … 4p + 3 of the flat array A (p unsigned: no negative-index wrapping)."""
    i = np.uint64(4) * p
    return A[i], A[i + np.uint64(1)], A[i + np.uint64(2)], A[i + np.uint64(3)]


@_inline
def _flat9(A, p):
    """Entries 9p … 9p + 8 of the flat array A (p unsigned)."""
    i = np.uint64(9) * p
    return (A[i], A[i + np.uint64(1)], A[i + np.uint64(2)], A[i + np.uint64(3)],
            A[i + np.uint64(4)], A[i + np.uint64(5)], A[i + np.uint64(6)], A[i + np.uint64(7)],
            A[i + np.uint64(8)])


@_inline
def _stress2_vjp_loop(start, stop, state, mat, work, dt, g_mat, corotated, exponent, one):
    """The stress adjoint of 2D particles start ≤ p < stop given the gathered rows
    (∂L/∂m, ∂L/∂momentum (2), ∂L/∂affine (4)) by particle: fills g_rows (rows ∂L/∂F (4),
    ∂L/∂σ_a (2)) and g_mat.

    Written so that LLVM vectorizes it across particles when ``corotated`` and
    ``exponent`` are constants: no branch on the particle, no index read from memory,
    stores by particle into rows (stores interleaved by particle vectorized poorly), and
    interleaved reads through flat views, whose entries lie at constant distances."""
    _, v, F, C = state
    T = F.dtype.type
    E, nu, rho, V = mat
    g_E, g_nu, g_rho, g_V = g_mat
    K, table, actuation, gathered, g_rows = (work.K, work.table, work.actuation,
                                             work.gathered, work.g_rows)
    F, C, v = F.reshape(-1), C.reshape(-1), v.reshape(-1)
    for p in range(np.uint64(start), np.uint64(stop)):
        f2 = _flat4(F, p)
        r2 = rotation2(f2, one) if corotated else f2
        i = np.uint64(2) * p
        gf2, _, _, ge, gn, gr, gvol, ga2 = impulse2_vjp(
            f2, r2, _flat4(C, p), (v[i], v[i + np.uint64(1)]), material(E, nu, table, p),
            T(rho[p]), T(V[p]), (actuation[0, p], actuation[1, p]), dt, K, corotated, exponent,
            gathered[0, p], (gathered[1, p], gathered[2, p]),
            (gathered[3, p], gathered[4, p], gathered[5, p], gathered[6, p]), one)
        g_rows[0, p], g_rows[1, p], g_rows[2, p], g_rows[3, p] = gf2
        g_rows[4, p], g_rows[5, p] = ga2
        g_E[p], g_nu[p], g_rho[p], g_V[p] = ge, gn, gr, gvol


@_inline
def _stress3_vjp_loop(start, stop, state, mat, work, dt, g_mat, corotated, exponent, one):
    """The 3D counterpart of :func:`_stress2_vjp_loop` (gathered rows 1 + 3 + 9, g_rows
    9 + 3; rotations from the polar pass)."""
    _, v, F, C = state
    T = F.dtype.type
    E, nu, rho, V = mat
    g_E, g_nu, g_rho, g_V = g_mat
    K, rotation, table, actuation, gathered, g_rows = (
        work.K, work.rotation, work.table, work.actuation, work.gathered, work.g_rows)
    F, C, v = F.reshape(-1), C.reshape(-1), v.reshape(-1)
    for p in range(np.uint64(start), np.uint64(stop)):
        f3 = _flat9(F, p)
        r3 = rotation3(rotation, p) if corotated else f3
        i = np.uint64(3) * p
        gf3, _, _, ge, gn, gr, gvol, ga3 = impulse3_vjp(
            f3, r3, _flat9(C, p), (v[i], v[i + np.uint64(1)], v[i + np.uint64(2)]),
            material(E, nu, table, p), T(rho[p]), T(V[p]),
            (actuation[0, p], actuation[1, p], actuation[2, p]), dt, K, corotated, exponent,
            gathered[0, p], (gathered[1, p], gathered[2, p], gathered[3, p]),
            (gathered[4, p], gathered[5, p], gathered[6, p], gathered[7, p], gathered[8, p],
             gathered[9, p], gathered[10, p], gathered[11, p], gathered[12, p]), one)
        (g_rows[0, p], g_rows[1, p], g_rows[2, p], g_rows[3, p], g_rows[4, p], g_rows[5, p],
         g_rows[6, p], g_rows[7, p], g_rows[8, p]) = gf3
        g_rows[9, p], g_rows[10, p], g_rows[11, p] = ga3
        g_E[p], g_nu[p], g_rho[p], g_V[p] = ge, gn, gr, gvol


@_inline
def _outputs_loop(start, stop, d, work, g_state, g_q):
    """Last of the P2G adjoint in d dimensions (a constant: the loops over entries unroll),
    vectorized: g_state.F += the stress rows; g_state.v = m ∂L/∂momentum, g_state.C = m
    ∂L/∂affine (m from ``saved``) and g_q = ∂L/∂momentum (interleaved stores through flat
    views, which LLVM vectorizes in a loop this small)."""
    saved, gathered, g_rows = work.saved, work.gathered, work.g_rows
    _, g_v, g_F, g_C = g_state
    gF, gC, gv, gq = g_F.reshape(-1), g_C.reshape(-1), g_v.reshape(-1), g_q.reshape(-1)
    for p in range(np.uint64(start), np.uint64(stop)):
        m = saved[0, p]
        i = np.uint64(d * d) * p
        for j in range(d * d):
            gF[i + np.uint64(j)] += g_rows[j, p]
            gC[i + np.uint64(j)] = m * gathered[1 + d + j, p]
        i = np.uint64(d) * p
        for j in range(d):
            gq[i + np.uint64(j)] = gathered[1 + j, p]
            gv[i + np.uint64(j)] = m * gathered[1 + j, p]


@_range
def _particles_to_grid_vjp_range(start, stop, chunk, state, mat, act, work, dt, g_state, g_mat,
                                 g_q):
    """The P2G adjoint of particles start ≤ p < stop (see _particles_to_grid_vjp).

    Three loops: the stencil gathers of ∂L/∂(m, momentum, affine), with the outputs linear
    in them; the stress adjoint per particle, which vectorizes (one loop doing both ran
    slower even before: its body did not fit the registers); ∂L/∂F and the sums per
    actuator from its rows."""
    state, mat, act, work = Particles(*state), Materials(*mat), Actuation(*act), Work(*work)
    g_state, g_mat = Particles(*g_state), Materials(*g_mat)
    x = state.x
    dx, res, corotated, exponent, saved, g_grid, gathered, g_rows, g_act = (
        work.dx, work.res, work.corotated, work.exponent, work.saved, work.g_grid,
        work.gathered, work.g_rows, work.g_act)
    g_x = g_state.x
    d = DIM
    one = x.dtype.type(1.0)
    unused = np.empty(0, dtype=x.dtype)
    field = g_grid.reshape(-1)
    for p in range(start, stop):
        m = saved[0, p]
        if d == 2:
            A2 = (saved[3, p], saved[4, p], saved[5, p], saved[6, p])
            gq2, gA2, gm2, gs2 = _sweep2(x, p, dx, res, field, (saved[1, p], saved[2, p]), A2,
                                         m, unused, 0, True, True, False)
            gathered[0, p] = gm2
            gathered[1, p], gathered[2, p] = gq2
            gathered[3, p], gathered[4, p], gathered[5, p], gathered[6, p] = gA2
            # −Aᵀ ∂L/∂momentum from the offsets' dependence on x
            g_x[p, 0] += gs2[0] - (A2[0] * gq2[0] + A2[2] * gq2[1])
            g_x[p, 1] += gs2[1] - (A2[1] * gq2[0] + A2[3] * gq2[1])
        else:
            A3 = (saved[4, p], saved[5, p], saved[6, p], saved[7, p], saved[8, p], saved[9, p],
                  saved[10, p], saved[11, p], saved[12, p])
            gq3, gA3, gm3, gs3 = _sweep3(x, p, dx, res, field,
                                         (saved[1, p], saved[2, p], saved[3, p]), A3, m, unused,
                                         0, True, True, False)
            gathered[0, p] = gm3
            gathered[1, p], gathered[2, p], gathered[3, p] = gq3
            (gathered[4, p], gathered[5, p], gathered[6, p], gathered[7, p], gathered[8, p],
             gathered[9, p], gathered[10, p], gathered[11, p], gathered[12, p]) = gA3
            g_x[p, 0] += gs3[0] - (A3[0] * gq3[0] + A3[3] * gq3[1] + A3[6] * gq3[2])
            g_x[p, 1] += gs3[1] - (A3[1] * gq3[0] + A3[4] * gq3[1] + A3[7] * gq3[2])
            g_x[p, 2] += gs3[2] - (A3[2] * gq3[0] + A3[5] * gq3[1] + A3[8] * gq3[2])
    # the common material compiled with constant switches, which lets the loop vectorize
        # (COMMON_MATERIAL: this build is for it, see Variant)
    if d == 2:
        if COMMON_MATERIAL:
            _stress2_vjp_loop(start, stop, state, mat, work, dt, g_mat, True, 0, one)
        else:
            _stress2_vjp_loop(start, stop, state, mat, work, dt, g_mat, corotated, exponent, one)
    elif COMMON_MATERIAL:
        _stress3_vjp_loop(start, stop, state, mat, work, dt, g_mat, True, 0, one)
    else:
        _stress3_vjp_loop(start, stop, state, mat, work, dt, g_mat, corotated, exponent, one)
    if d == 2:
        _outputs_loop(start, stop, 2, work, g_state, g_q)
    else:
        _outputs_loop(start, stop, 3, work, g_state, g_q)
    # summed locally: the chunks' rows of g_act share a cache line, which two threads
    # writing per particle would pass back and forth; particles of one actuator come in
    # runs, summed in a register (a sum through memory waits on the store before it)
    act_sum = np.zeros(g_act.shape[1], dtype=g_act.dtype)
    row, _, axes, _ = act
    zero = g_act.dtype.type(0.0)
    k_run = 0
    run_sum = zero
    for p in range(start, stop):
        k = row[p]
        if k != k_run:
            act_sum[k_run] += run_sum
            run_sum = zero
            k_run = k
        for a in range(d):
            run_sum += g_rows[d * d + a, p] * axes[k, a]
    act_sum[k_run] += run_sum
    for k in range(g_act.shape[1]):
        g_act[chunk, k] = act_sum[k]


def _particles_to_grid_vjp(state, mat, act, work, dt, g_x, g_F):
    """Adjoint of :func:`particles_to_grid` given work.g_grid = ∂L/∂(grid momentum, mass):
    adds ∂L/∂x and ∂L/∂F into g_x, g_F, accumulates ∂L/∂(σ_a along each actuator's axes)
    into work.g_act[chunk, index + 1] (overwritten), and returns (∂L/∂state: g_x, ∂L/∂v,
    g_F, ∂L/∂C; ∂L/∂mat in its fields' order and dtype; ∂L/∂momentum (n, d), for the
    cables). work holds what particles_to_grid filled for the same state."""
    x, v, F, C = state
    E, bounds = mat[0], Work(*work).bounds
    g_state = (g_x, np.empty_like(v), g_F, np.empty_like(C))
    g_mat = (np.empty_like(E), np.empty_like(E), np.empty_like(E), np.empty_like(E))
    g_q = np.empty_like(x)
    for chunk in numba.prange(bounds.shape[0] - 1):
        _particles_to_grid_vjp_range(bounds[chunk], bounds[chunk + 1], chunk, state, mat, act,
                                     work, dt, g_state, g_mat, g_q)
    return g_state, g_mat, g_q


particles_to_grid_vjp = Kernel(_particles_to_grid_vjp, per_variant=True)
