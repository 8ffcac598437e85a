"""numba CPU kernels for the MLS-MPM step and its adjoint, equal to :mod:`.step`.

One step is three compiled passes:

1. particles → grid (:mod:`._particle_kernels`): per particle the Kirchhoff stress with
   actuation, mass, momentum and affine momentum (vectorized loops into rows by particle;
   in 3D corotated a vectorized pass first finds every particle's polar rotation), then
   scattered to the grid;
2. grid (:mod:`._grid_kernels`): momentum to velocity plus gravity over the box of nodes
   the particles touch, then the boundary layers;
3. grid → particles: v, C, F ← (I + Δt C) F, x.

The adjoint recomputes passes 1 and 2 from the state (no cache between calls), then runs
the adjoint of G2P (which scatters ∂L/∂(grid v)), of the grid pass, and of pass 1 (which
gathers and goes through the stress per particle). Only the cable forces (a few route
particles) use the array-level functions of :mod:`.actuators`.

Parallelism: with ``parallel=True`` every pass runs on numba's threads (OpenMP when
available: a launch costs about 2 µs, against 50 µs for numba's fallback workqueue). The
scatters split the particles into one chunk of consecutive particles per thread, each with
its own copy of the grid accumulator, summed in chunk order, so results are deterministic
for a given thread count and equal the serial ones to round-off. Serial is the default of
:class:`sim_mpm.MPMSimulator`; see its ``parallel`` option.

Compilation: each pass is compiled on its first call for the scene's dimension, material
switches (:class:`~sim_mpm._particle_kernels.Variant`), dtype and build, and cached on disk
(numba's cache, beside the sources or in ``NUMBA_CACHE_DIR``); while that happens, stderr
says "sim_mpm: compiling kernels (first run only)", once per process.

Intermediates (grid fields, per-chunk accumulators, per-particle scratch) live in buffers
per model, particle count and thread count, reused across calls: fresh multi-megabyte
arrays every step cost more in page faults than the arithmetic, and looking each one up
cost more than the kernels of a small scene. Returned arrays are always new, so steps stay
pure, but one simulator must not be stepped from two threads at once.
"""

from __future__ import annotations

import weakref

import numba
import numpy as np

from codesign.compile_notice import announce_compiles

from ._grid_kernels import Grid, boundary_table, grid_pass, grid_pass_vjp
from ._particle_kernels import (
    Actuation,
    Materials,
    Particles,
    Variant,
    Work,
    grid_to_particles,
    grid_to_particles_vjp,
    particles_to_grid,
    particles_to_grid_vjp,
)
from .actuators import cable_forces, cable_forces_vjp
from .state import MPMState
from .step import StepConstants

__all__ = ["COMPILE_NOTICE", "step", "step_vjp"]

_PARAMETERS = ("youngs_modulus", "poissons_ratio", "density", "volume")  # Materials' order


class _Records:
    """The records the kernels take for one model, n particles and a chunk count (see the
    module docstring): ``work`` and ``grid`` (the model's layout and the buffers),
    ``actuation`` without stress signals or cable forces, and the ``variant`` of the
    particle passes the model runs (compiled on first use, see _particle_kernels.Variant).

    The kernels take each record as the plain tuple of its fields (see _particle_kernels),
    built once here: ``work_fields``, ``grid_fields``, ``actuation_fields``.

    ``acc`` and ``g_acc`` are scatter targets that the grid passes zero again behind them;
    ``dirty`` names those a step left behind unfinished (an exception or KeyboardInterrupt
    between two kernels), which the next use clears.
    """

    def __init__(self, c: StepConstants, n: int, chunks: int):
        d, nodes, dtype, layers = c.dim, c.node_count, c.dtype, c.layers
        rows = n if d == 3 and c.material == "corotated" else 1
        saved = (1 + d + d * d, n)
        box = np.empty((chunks, 2, d), dtype=np.int64)
        # four lanes a node for the vector read-add-writes of the scatters (_particle_kernels
        # .add4): momentum and mass (2D: one lane spare), velocity cotangents (spare lanes)
        acc, g_acc = (np.zeros((chunks, nodes, 4), dtype=dtype) for _ in range(2))
        # four lanes a node, the lanes past d zero, for the vector row loads (row_sums)
        grid_v, g_grid = (np.zeros((nodes, 4), dtype=dtype) for _ in range(2))
        eps = np.finfo(dtype).eps
        self.work = Work(
            dx=dtype.type(c.dx), K=dtype.type(4.0 / c.dx**2), tolerance=dtype.type((4 * eps) ** 2),
            res=c.grid_resolution, corotated=c.material == "corotated", exponent=c.exponent,
            bounds=(np.arange(chunks + 1, dtype=np.int64) * n) // chunks,
            rotation=np.empty((9, rows), dtype=dtype), table=np.empty((4, n), dtype=dtype),
            actuation=np.empty((d, n), dtype=dtype), saved=np.empty(saved, dtype=dtype),
            box=box, acc=acc, grid_v=grid_v, g_grid=g_grid, g_acc=g_acc,
            gathered=np.empty(saved, dtype=dtype), g_rows=np.empty((d * d + d, n), dtype=dtype),
            g_act=np.empty((chunks, c.n_stress + 1), dtype=dtype))
        sizes = [int(layer.node_index.shape[0]) for layer in layers]
        node_index = np.concatenate([np.zeros(0, dtype=np.int64)]
                                    + [layer.node_index for layer in layers]).astype(np.int64)
        normal = np.concatenate([np.zeros((0, d))] + [layer.normal for layer in layers])
        entry_start, entries = boundary_table(node_index, sizes, nodes)
        self.grid = Grid(
            strides=c.strides, gravity=c.gravity, entries=entries, entry_start=entry_start,
            normal=np.ascontiguousarray(normal, dtype=dtype),
            kind=np.repeat(np.array([layer.kind for layer in layers], dtype=np.int64), sizes),
            friction=np.repeat(np.array([layer.friction for layer in layers], dtype=dtype),
                               sizes),
            acc=acc, box=box, grid_v=grid_v, grid_v_free=np.empty((nodes, d), dtype=dtype),
            inv_m=np.empty(nodes, dtype=dtype), inputs=np.empty((len(entries), d), dtype=dtype),
            g_acc=g_acc, g_grid_v=np.empty((nodes, d), dtype=dtype), g_grid=g_grid)
        axes = np.zeros((c.n_stress + 1, d), dtype=dtype)
        axes[1:] = c.actuator_axes
        self.actuation = Actuation(
            row=np.ascontiguousarray(c.actuator_index + 1, dtype=np.int64),
            scale=np.zeros(1, dtype=dtype), axes=axes, cable_force=np.zeros((n, d), dtype=dtype))
        self.work_fields, self.grid_fields, self.actuation_fields = (
            tuple(self.work), tuple(self.grid), tuple(self.actuation))
        self.dirty: set[str] = set()
        self.variant = Variant.of(d, c.material, c.exponent)

    def scatter_target(self, name: str) -> None:
        """Make ``acc`` or ``g_acc`` zero; call :meth:`settle` once its grid pass has run."""
        if name in self.dirty:
            getattr(self.grid, name).fill(0)
        self.dirty.add(name)

    def settle(self, name: str) -> None:
        """Mark a scatter target zero again (its grid pass has cleared it)."""
        self.dirty.discard(name)


COMPILE_NOTICE = "sim_mpm: compiling kernels (first run only)"


_COMPILES = announce_compiles(f"{__package__}.", COMPILE_NOTICE)

_RECORDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # by constants, (n, chunks)


def _records(c: StepConstants, n: int, parallel: bool) -> _Records:
    chunks = numba.get_num_threads() if parallel else 1
    per_model = _RECORDS.setdefault(c, {})
    records = per_model.get((n, chunks))
    if records is None:
        records = per_model[n, chunks] = _Records(c, n, chunks)
    return records


def _particles(state: MPMState) -> Particles:
    arrays = (state.particle_x, state.particle_v, state.particle_F, state.particle_C)
    if all(a.flags.c_contiguous for a in arrays):
        return Particles(*arrays)
    return Particles(*(np.ascontiguousarray(a) for a in arrays))


def _to_grid(c: StepConstants, b: _Records, state: Particles, action, mat: Materials, dt,
             parallel: bool):
    """Pass 1 (stresses and P2G) and pass 2 (grid update and boundaries) of ``state`` into
    the buffers; returns (act, Δt, cable signals, box rows) for G2P and the adjoint,
    which also reads each particle's P2G inputs from the buffers."""
    dtype = c.dtype
    action = np.asarray(action, dtype=dtype)
    act = b.actuation
    if c.n_stress:
        scale = np.zeros(c.n_stress + 1, dtype=dtype)
        np.multiply(action[: c.n_stress], c.actuator_max_stress, out=scale[1:])
        act = act._replace(scale=scale)
    cable_signals = action[c.n_stress:]
    if c.cables:
        act = act._replace(cable_force=cable_forces(np, state.x, cable_signals, c.cables))
    act = b.actuation_fields if act is b.actuation else tuple(act)
    dt = dtype.type(dt)
    b.scatter_target("acc")
    particles_to_grid.pick(parallel, b.variant)(tuple(state), tuple(mat), act, b.work_fields,
                                                dt)
    rows = grid_pass.pick(parallel)(b.grid_fields, dt)
    b.settle("acc")
    return act, dt, cable_signals, rows


def step(c: StepConstants, state: MPMState, action, params: dict, dt: float, *,
         parallel: bool = False) -> MPMState:
    """Same contract as :func:`sim_mpm.step.step` (NumPy arrays); ``parallel`` selects the
    multithreaded builds."""
    particles = _particles(state)
    b = _records(c, particles.x.shape[0], parallel)
    mat = Materials(*map(params.__getitem__, _PARAMETERS))
    _, dt, _, _ = _to_grid(c, b, particles, action, mat, dt, parallel)
    return MPMState(*grid_to_particles.pick(parallel, b.variant)(tuple(particles),
                                                                 b.work_fields, dt))


def step_vjp(c: StepConstants, state: MPMState, action, params: dict, dt: float,
             g_next: MPMState, *, parallel: bool = False):
    """Same contract as :func:`sim_mpm.step.step_vjp` (NumPy arrays)."""
    particles = _particles(state)
    x = particles.x
    b = _records(c, x.shape[0], parallel)
    mat = Materials(*map(params.__getitem__, _PARAMETERS))
    act, dt, cable_signals, rows = _to_grid(c, b, particles, action, mat, dt, parallel)
    b.scatter_target("g_acc")
    g_x, g_F = grid_to_particles_vjp.pick(parallel, b.variant)(
        tuple(particles), tuple(_particles(g_next)), b.work_fields, dt)
    grid_pass_vjp.pick(parallel)(b.grid_fields, rows)
    b.settle("g_acc")
    g_state, g_mat, g_momentum = particles_to_grid_vjp.pick(parallel, b.variant)(
        tuple(particles), tuple(mat), act, b.work_fields, dt, g_x, g_F)
    g_action = b.work.g_act.sum(axis=0)[1:] * c.actuator_max_stress  # row 0: no actuator
    if c.cables:
        g_x_cable, g_cable = cable_forces_vjp(np, x, cable_signals, c.cables, dt * g_momentum)
        g_x += g_x_cable
        g_action = np.concatenate([g_action, g_cable])
    return (MPMState(*g_state), g_action.astype(c.dtype),
            dict(zip(_PARAMETERS, g_mat, strict=True)))
