"""numba CPU kernels for the MLS-MPM substep and its adjoint, equal to :mod:`.step`.

Everything per particle or per node is a compiled loop: stress (materials and stress
actuation), P2G, grid update, boundary projections, G2P, and the adjoint of each. Only the
cable forces (a few route particles) reuse the array-level functions of :mod:`.actuators`.
The 3D polar rotation uses scaled Newton iterations X ← ½(ζX + X⁻ᵀ/ζ) (the reference uses
an SVD; both give the same R to round-off for det F > 0) and falls back to a per-particle
SVD for inverted particles.

Transfers recompute the particle's quadratic B-spline stencil (base node, weights and
their derivatives, three per axis) in registers in every pass that needs it (_axis):
storing (n, 3^d) weights and node indices cost more memory traffic than the arithmetic
(measured 1.5-1.8x on the 2D benchmark block). The stencil loops are written per
dimension (2D and 3D) with the particle's matrices and accumulators in locals, so numba/LLVM
unroll them and never reload values that a grid store could alias. Arithmetic stays in the
arrays' precision: float literals would promote float32 to float64 (2x slower in G2P).

Parallelism: each loop nest that has no scatter is compiled twice, serial and with
``prange`` over particles or nodes; ``parallel=True`` selects the threaded build. The two
scatters (P2G and the G2P adjoint, which scatters ∂L/∂(grid v)) always run serially in
particle order: threads would need atomics or colouring, and the serial scatter keeps
results bitwise reproducible. Serial is the default because on small machines a threaded
launch costs more than these loops (measured on a busy 2-core machine: 0.2 ms with numba's
workqueue layer, 8 ms with OpenMP, for a loop that takes 0.004 ms serially).

Grid passes run only over the box of nodes the particles' stencils touch, which P2G
records: nodes outside it receive no mass, so whatever the workspace holds there never
reaches a particle. The scatter targets (grid momentum and mass, ∂L/∂(grid v)) are zeroed
by the pass that consumes them, so no pass clears the grid. The material adjoint reuses P,
F⁻ᵀ and R from the forward pass that substep_vjp runs first instead of recomputing them
(the 3D polar iteration dominated it).

Intermediates (grid fields, scratch matrices) live in a workspace per model, reused across
calls: fresh multi-megabyte arrays every substep cost more in page faults than the
arithmetic. Returned arrays are always new, so steps stay pure, but one simulator must not
be stepped from two threads at once.
"""

from __future__ import annotations

import weakref

import numba
import numpy as np

from .actuators import cable_forces, cable_forces_vjp
from .state import MPMState
from .step import StepConstants

__all__ = ["substep", "substep_vjp"]


class _Kernel:
    """One loop nest compiled twice: serial (prange runs as range) and multithreaded."""

    def __init__(self, fn):
        self.serial = numba.njit(cache=True, error_model="numpy")(fn)
        self.parallel = numba.njit(cache=True, parallel=True, error_model="numpy")(fn)


def _dual(fn):
    return _Kernel(fn)


@numba.njit(cache=True, error_model="numpy", inline="always")
def _axis(x, p, k, dx, res):
    """Stencil along axis k of particle p: base node b, fraction f = x/Δx − b, the three
    quadratic B-spline weights w(f) and their derivatives dw/df, in x's precision (float
    literals would promote float32 arithmetic to float64)."""
    T = x.dtype.type
    xs = x[p, k] / dx
    b = min(max(int(np.floor(xs - T(0.5))), 0), res - 3)
    f = xs - T(b)
    u = T(1.5) - f
    v = f - T(1.0)
    z = f - T(0.5)
    return b, f, T(0.5) * u * u, T(0.75) - v * v, T(0.5) * z * z, -u, T(-2.0) * v, z


@numba.njit(cache=True, error_model="numpy", inline="always")
def _pick3(i, a0, a1, a2):
    """a_i for a compile-time i in {0, 1, 2} (the stencil loops are unrolled)."""
    return a0 if i == 0 else (a1 if i == 1 else a2)


@numba.njit(cache=True, error_model="numpy")
def _p2g(x, dx, res, momentum, affine, mass, grid_mv, grid_m, lo, hi):
    """Scatter mass and momentum (with the MLS stress impulse in ``affine``) to the grid,
    serially in particle order, and record the node box the stencils touch in lo, hi (d,).

    grid_mv, grid_m must be zero where the particles scatter: _grid_update zeroes them again
    as it reads them, so the workspace stays zero between substeps."""
    n, d = x.shape
    T = x.dtype.type
    lo0 = lo1 = lo2 = res
    hi0 = hi1 = hi2 = 0
    for p in range(n):
        if d == 2:
            b0, f0, wa0, wa1, wa2, _, _, _ = _axis(x, p, 0, dx, res)
            b1, f1, wb0, wb1, wb2, _, _, _ = _axis(x, p, 1, dx, res)
            lo0, hi0 = min(lo0, b0), max(hi0, b0 + 3)
            lo1, hi1 = min(lo1, b1), max(hi1, b1 + 3)
            m0, m1 = momentum[p, 0], momentum[p, 1]
            a00, a01 = affine[p, 0, 0], affine[p, 0, 1]
            a10, a11 = affine[p, 1, 0], affine[p, 1, 1]
            mp = mass[p]
            for i0 in range(3):
                w0 = _pick3(i0, wa0, wa1, wa2)
                o0 = (T(i0) - f0) * dx
                q0 = m0 + a00 * o0
                q1 = m1 + a10 * o0
                row = (b0 + i0) * res + b1
                for i1 in range(3):
                    wt = w0 * _pick3(i1, wb0, wb1, wb2)
                    o1 = (T(i1) - f1) * dx
                    i = row + i1
                    grid_mv[i, 0] += wt * (q0 + a01 * o1)
                    grid_mv[i, 1] += wt * (q1 + a11 * o1)
                    grid_m[i] += wt * mp
        else:
            b0, f0, wa0, wa1, wa2, _, _, _ = _axis(x, p, 0, dx, res)
            b1, f1, wb0, wb1, wb2, _, _, _ = _axis(x, p, 1, dx, res)
            b2, f2, wc0, wc1, wc2, _, _, _ = _axis(x, p, 2, dx, res)
            lo0, hi0 = min(lo0, b0), max(hi0, b0 + 3)
            lo1, hi1 = min(lo1, b1), max(hi1, b1 + 3)
            lo2, hi2 = min(lo2, b2), max(hi2, b2 + 3)
            m0, m1, m2 = momentum[p, 0], momentum[p, 1], momentum[p, 2]
            a00, a01, a02 = affine[p, 0, 0], affine[p, 0, 1], affine[p, 0, 2]
            a10, a11, a12 = affine[p, 1, 0], affine[p, 1, 1], affine[p, 1, 2]
            a20, a21, a22 = affine[p, 2, 0], affine[p, 2, 1], affine[p, 2, 2]
            mp = mass[p]
            for i0 in range(3):
                w0 = _pick3(i0, wa0, wa1, wa2)
                o0 = (T(i0) - f0) * dx
                for i1 in range(3):
                    w01 = w0 * _pick3(i1, wb0, wb1, wb2)
                    o1 = (T(i1) - f1) * dx
                    q0 = m0 + a00 * o0 + a01 * o1
                    q1 = m1 + a10 * o0 + a11 * o1
                    q2 = m2 + a20 * o0 + a21 * o1
                    row = ((b0 + i0) * res + b1 + i1) * res + b2
                    for i2 in range(3):
                        wt = w01 * _pick3(i2, wc0, wc1, wc2)
                        o2 = (T(i2) - f2) * dx
                        i = row + i2
                        grid_mv[i, 0] += wt * (q0 + a02 * o2)
                        grid_mv[i, 1] += wt * (q1 + a12 * o2)
                        grid_mv[i, 2] += wt * (q2 + a22 * o2)
                        grid_m[i] += wt * mp
    if n == 0:
        lo0 = lo1 = lo2 = hi0 = hi1 = hi2 = 0
    lo[0], hi[0], lo[1], hi[1] = lo0, hi0, lo1, hi1
    if d == 3:
        lo[2], hi[2] = lo2, hi2


@numba.njit(cache=True, error_model="numpy")
def _box_rows(lo, hi, strides):
    """Flat index of the first node of every row (along the last axis) of the node box
    lo ≤ cell < hi; each row holds hi[-1] − lo[-1] consecutive nodes."""
    d = lo.shape[0]
    rows = 1
    for k in range(d - 1):
        rows *= hi[k] - lo[k]
    row_start = np.empty(max(rows, 0), dtype=np.int64)
    for r in range(row_start.shape[0]):
        flat = lo[d - 1]
        rest = r
        for k in range(d - 2, -1, -1):
            extent = hi[k] - lo[k]
            flat += (lo[k] + rest % extent) * strides[k]
            rest //= extent
        row_start[r] = flat
    return row_start


@_dual
def _grid_update(grid_mv, grid_m, gravity, dt, grid_v, grid_v_free, inv_m, row_start,
                 row_length):
    """Momentum to velocity plus gravity over the node box; zeroes grid_mv, grid_m behind it
    (see _p2g)."""
    d = grid_mv.shape[1]
    zero = grid_m.dtype.type(0.0)
    one = grid_m.dtype.type(1.0)
    for r in numba.prange(row_start.shape[0]):
        for i in range(row_start[r], row_start[r] + row_length):
            if grid_m[i] > 0:
                inv = one / grid_m[i]
                inv_m[i] = inv
                for a in range(d):
                    vf = grid_mv[i, a] * inv
                    grid_v_free[i, a] = vf
                    grid_v[i, a] = vf + dt * gravity[a]
            else:
                inv_m[i] = zero
                for a in range(d):
                    grid_v_free[i, a] = zero
                    grid_v[i, a] = zero
            grid_m[i] = zero
            for a in range(d):
                grid_mv[i, a] = zero



@numba.njit(cache=True, error_model="numpy", inline="always")
def _in_box(node_cell, e, lo, hi):
    """Whether boundary entry e's node lies in the node box that _p2g recorded."""
    for k in range(lo.shape[0]):
        if node_cell[e, k] < lo[k] or node_cell[e, k] >= hi[k]:
            return False
    return True


@_dual
def _project(grid_v, node_index, node_cell, normal, start, kinds, frictions, inputs, lo, hi):
    d = grid_v.shape[1]
    for layer in range(kinds.shape[0]):
        kind = kinds[layer]
        mu = frictions[layer]
        for e in numba.prange(start[layer], start[layer + 1]):
            if not _in_box(node_cell, e, lo, hi):
                continue
            i = node_index[e]
            vn = 0.0
            for a in range(d):
                inputs[e, a] = grid_v[i, a]
                vn += grid_v[i, a] * normal[e, a]
            if kind == 0:
                for a in range(d):
                    grid_v[i, a] = 0.0
            elif kind == 1 or (kind == 2 and vn < 0):
                for a in range(d):
                    grid_v[i, a] -= vn * normal[e, a]
            elif kind == 3 and vn < 0:
                speed2 = 0.0
                for a in range(d):
                    vt = grid_v[i, a] - vn * normal[e, a]
                    speed2 += vt * vt
                speed = np.sqrt(speed2)
                safe = speed if speed > 0 else 1.0
                scale = max(0.0, 1.0 + mu * vn / safe)
                for a in range(d):
                    grid_v[i, a] = (grid_v[i, a] - vn * normal[e, a]) * scale


@_dual
def _project_vjp(g, node_index, node_cell, normal, start, kinds, frictions, inputs, lo, hi):
    d = g.shape[1]
    for layer in range(kinds.shape[0] - 1, -1, -1):
        kind = kinds[layer]
        mu = frictions[layer]
        for e in numba.prange(start[layer], start[layer + 1]):
            if not _in_box(node_cell, e, lo, hi):
                continue
            i = node_index[e]
            vn = 0.0
            gn = 0.0
            for a in range(d):
                vn += inputs[e, a] * normal[e, a]
                gn += g[i, a] * normal[e, a]
            if kind == 0:
                for a in range(d):
                    g[i, a] = 0.0
            elif kind == 1 or (kind == 2 and vn < 0):
                for a in range(d):
                    g[i, a] -= gn * normal[e, a]
            elif kind == 3 and vn < 0:
                speed2 = 0.0
                g_vt = 0.0
                for a in range(d):
                    vt = inputs[e, a] - vn * normal[e, a]
                    speed2 += vt * vt
                    g_vt += g[i, a] * vt
                speed = np.sqrt(speed2)
                safe = speed if speed > 0 else 1.0
                scale = 1.0 + mu * vn / safe
                for a in range(d):
                    if scale > 0:
                        tangent = (inputs[e, a] - vn * normal[e, a]) / safe
                        g[i, a] = (scale * (g[i, a] - gn * normal[e, a])
                                   + mu * g_vt * (normal[e, a] / safe
                                                  - vn * tangent / (safe * safe)))
                    else:
                        g[i, a] = 0.0


@numba.njit(cache=True, error_model="numpy", inline="always")
def _gather(p, D, x, grid_v, dx, res, K, new_v, new_C):
    """Particle p's velocity and APIC affine velocity C from the grid into new_v, new_C."""
    T = x.dtype.type
    zero = T(0.0)
    if D == 2:
        b0, f0, wa0, wa1, wa2, _, _, _ = _axis(x, p, 0, dx, res)
        b1, f1, wb0, wb1, wb2, _, _, _ = _axis(x, p, 1, dx, res)
        v0 = v1 = zero
        c00 = c01 = c10 = c11 = zero
        for i0 in range(3):
            w0 = _pick3(i0, wa0, wa1, wa2)
            o0 = (T(i0) - f0) * dx
            row = (b0 + i0) * res + b1
            for i1 in range(3):
                wt = w0 * _pick3(i1, wb0, wb1, wb2)
                o1 = (T(i1) - f1) * dx
                i = row + i1
                g0, g1 = grid_v[i, 0], grid_v[i, 1]
                v0 += wt * g0
                v1 += wt * g1
                k0, k1 = K * wt * g0, K * wt * g1
                c00 += k0 * o0
                c01 += k0 * o1
                c10 += k1 * o0
                c11 += k1 * o1
        new_v[p, 0], new_v[p, 1] = v0, v1
        new_C[p, 0, 0], new_C[p, 0, 1], new_C[p, 1, 0], new_C[p, 1, 1] = c00, c01, c10, c11
        return
    b0, f0, wa0, wa1, wa2, _, _, _ = _axis(x, p, 0, dx, res)
    b1, f1, wb0, wb1, wb2, _, _, _ = _axis(x, p, 1, dx, res)
    b2, f2, wc0, wc1, wc2, _, _, _ = _axis(x, p, 2, dx, res)
    v0 = v1 = v2 = zero
    c00 = c01 = c02 = c10 = c11 = c12 = c20 = c21 = c22 = zero
    for i0 in range(3):
        w0 = _pick3(i0, wa0, wa1, wa2)
        o0 = (T(i0) - f0) * dx
        for i1 in range(3):
            w01 = w0 * _pick3(i1, wb0, wb1, wb2)
            o1 = (T(i1) - f1) * dx
            row = ((b0 + i0) * res + b1 + i1) * res + b2
            for i2 in range(3):
                wt = w01 * _pick3(i2, wc0, wc1, wc2)
                o2 = (T(i2) - f2) * dx
                i = row + i2
                g0, g1, g2 = grid_v[i, 0], grid_v[i, 1], grid_v[i, 2]
                v0 += wt * g0
                v1 += wt * g1
                v2 += wt * g2
                k0, k1, k2 = K * wt * g0, K * wt * g1, K * wt * g2
                c00 += k0 * o0
                c01 += k0 * o1
                c02 += k0 * o2
                c10 += k1 * o0
                c11 += k1 * o1
                c12 += k1 * o2
                c20 += k2 * o0
                c21 += k2 * o1
                c22 += k2 * o2
    new_v[p, 0], new_v[p, 1], new_v[p, 2] = v0, v1, v2
    new_C[p, 0, 0], new_C[p, 0, 1], new_C[p, 0, 2] = c00, c01, c02
    new_C[p, 1, 0], new_C[p, 1, 1], new_C[p, 1, 2] = c10, c11, c12
    new_C[p, 2, 0], new_C[p, 2, 1], new_C[p, 2, 2] = c20, c21, c22


@numba.njit(cache=True, error_model="numpy", inline="always")
def _g2p_particle(p, D, x, F, grid_v, dx, res, dt, K, new_x, new_v, new_C, new_F):
    _gather(p, D, x, grid_v, dx, res, K, new_v, new_C)
    for a in range(D):
        new_x[p, a] = x[p, a] + dt * new_v[p, a]
        for b in range(D):
            acc = F[p, 0, b] * new_C[p, a, 0]
            for c in range(1, D):
                acc += new_C[p, a, c] * F[p, c, b]
            new_F[p, a, b] = F[p, a, b] + dt * acc


@_dual
def _g2p(x, F, grid_v, dx, res, dt, K):
    """Gather velocity and affine velocity C from the grid; advance x and F."""
    n, d = x.shape
    new_x = np.empty_like(x)
    new_v = np.empty_like(x)
    new_C = np.empty_like(F)
    new_F = np.empty_like(F)
    for p in numba.prange(n):
        if d == 2:
            _g2p_particle(p, 2, x, F, grid_v, dx, res, dt, K, new_x, new_v, new_C, new_F)
        else:
            _g2p_particle(p, 3, x, F, grid_v, dx, res, dt, K, new_x, new_v, new_C, new_F)
    return new_x, new_v, new_C, new_F


@numba.njit(cache=True, error_model="numpy", inline="always")
def _g2p_vjp_particle(p, D, x, F, grid_v, dx, inv_dx, res, g_x_next, g_v_next, g_F_next,
                      g_C_next, dt, K, g_x, g_F, g_new_v, g_new_C, g_grid_v, new_v, new_C):
    T = x.dtype.type
    zero = T(0.0)
    _gather(p, D, x, grid_v, dx, res, K, new_v, new_C)
    for a in range(D):
        g_new_v[p, a] = g_v_next[p, a] + dt * g_x_next[p, a]
        for b in range(D):
            acc_f = zero
            acc_c = zero
            for c in range(D):
                # (I + dt C')ᵀ g_F' and g_F' Fᵀ
                acc_f += new_C[p, c, a] * g_F_next[p, c, b]
                acc_c += g_F_next[p, a, c] * F[p, b, c]
            g_F[p, a, b] = g_F_next[p, a, b] + dt * acc_f
            g_new_C[p, a, b] = g_C_next[p, a, b] + dt * acc_c
    # one pass over the stencil: the cotangent ū + K C̄ o reaches the node's velocity
    # (scatter) and, through the weights and offsets, the particle's position
    if D == 2:
        b0, f0, wa0, wa1, wa2, da0, da1, da2 = _axis(x, p, 0, dx, res)
        b1, f1, wb0, wb1, wb2, db0, db1, db2 = _axis(x, p, 1, dx, res)
        u0, u1 = g_new_v[p, 0], g_new_v[p, 1]
        c00, c01 = K * g_new_C[p, 0, 0], K * g_new_C[p, 0, 1]
        c10, c11 = K * g_new_C[p, 1, 0], K * g_new_C[p, 1, 1]
        x0, x1 = g_x_next[p, 0], g_x_next[p, 1]
        for i0 in range(3):
            w0 = _pick3(i0, wa0, wa1, wa2)
            d0 = _pick3(i0, da0, da1, da2) * inv_dx
            o0 = (T(i0) - f0) * dx
            row = (b0 + i0) * res + b1
            for i1 in range(3):
                w1 = _pick3(i1, wb0, wb1, wb2)
                wt = w0 * w1
                o1 = (T(i1) - f1) * dx
                i = row + i1
                gv0, gv1 = grid_v[i, 0], grid_v[i, 1]
                e0 = u0 + c00 * o0 + c01 * o1
                e1 = u1 + c10 * o0 + c11 * o1
                dot = gv0 * e0 + gv1 * e1
                x0 += d0 * w1 * dot - wt * (gv0 * c00 + gv1 * c10)
                x1 += _pick3(i1, db0, db1, db2) * inv_dx * w0 * dot - wt * (gv0 * c01 + gv1 * c11)
                g_grid_v[i, 0] += wt * e0
                g_grid_v[i, 1] += wt * e1
        g_x[p, 0], g_x[p, 1] = x0, x1
        return
    b0, f0, wa0, wa1, wa2, da0, da1, da2 = _axis(x, p, 0, dx, res)
    b1, f1, wb0, wb1, wb2, db0, db1, db2 = _axis(x, p, 1, dx, res)
    b2, f2, wc0, wc1, wc2, dc0, dc1, dc2 = _axis(x, p, 2, dx, res)
    u0, u1, u2 = g_new_v[p, 0], g_new_v[p, 1], g_new_v[p, 2]
    c00, c01, c02 = K * g_new_C[p, 0, 0], K * g_new_C[p, 0, 1], K * g_new_C[p, 0, 2]
    c10, c11, c12 = K * g_new_C[p, 1, 0], K * g_new_C[p, 1, 1], K * g_new_C[p, 1, 2]
    c20, c21, c22 = K * g_new_C[p, 2, 0], K * g_new_C[p, 2, 1], K * g_new_C[p, 2, 2]
    x0, x1, x2 = g_x_next[p, 0], g_x_next[p, 1], g_x_next[p, 2]
    for i0 in range(3):
        w0 = _pick3(i0, wa0, wa1, wa2)
        d0 = _pick3(i0, da0, da1, da2) * inv_dx
        o0 = (T(i0) - f0) * dx
        for i1 in range(3):
            w1 = _pick3(i1, wb0, wb1, wb2)
            d1 = _pick3(i1, db0, db1, db2) * inv_dx
            o1 = (T(i1) - f1) * dx
            row = ((b0 + i0) * res + b1 + i1) * res + b2
            for i2 in range(3):
                w2 = _pick3(i2, wc0, wc1, wc2)
                wt = w0 * w1 * w2
                o2 = (T(i2) - f2) * dx
                i = row + i2
                gv0, gv1, gv2 = grid_v[i, 0], grid_v[i, 1], grid_v[i, 2]
                e0 = u0 + c00 * o0 + c01 * o1 + c02 * o2
                e1 = u1 + c10 * o0 + c11 * o1 + c12 * o2
                e2 = u2 + c20 * o0 + c21 * o1 + c22 * o2
                dot = gv0 * e0 + gv1 * e1 + gv2 * e2
                x0 += d0 * w1 * w2 * dot - wt * (gv0 * c00 + gv1 * c10 + gv2 * c20)
                x1 += d1 * w0 * w2 * dot - wt * (gv0 * c01 + gv1 * c11 + gv2 * c21)
                x2 += (_pick3(i2, dc0, dc1, dc2) * inv_dx * w0 * w1 * dot
                       - wt * (gv0 * c02 + gv1 * c12 + gv2 * c22))
                g_grid_v[i, 0] += wt * e0
                g_grid_v[i, 1] += wt * e1
                g_grid_v[i, 2] += wt * e2
    g_x[p, 0], g_x[p, 1], g_x[p, 2] = x0, x1, x2


@numba.njit(cache=True, error_model="numpy")
def _g2p_vjp(x, F, grid_v, dx, res, g_x_next, g_v_next, g_F_next, g_C_next, dt, K, g_x, g_F,
             g_grid_v, scratch):
    """Adjoint of G2P: fill g_x and g_F, and scatter ∂L/∂(grid v) into g_grid_v (which must be
    zero over the node box; _grid_update_vjp zeroes it again), serially in particle order.
    ``scratch`` holds arrays (n, d), (n, d, d), (n, d), (n, d, d) for the cotangents of the
    gathered v and C and the gathered values themselves."""
    n, d = x.shape
    inv_dx = x.dtype.type(1.0) / dx
    g_new_v, g_new_C, new_v, new_C = scratch
    for p in range(n):
        if d == 2:
            _g2p_vjp_particle(p, 2, x, F, grid_v, dx, inv_dx, res, g_x_next, g_v_next, g_F_next,
                              g_C_next, dt, K, g_x, g_F, g_new_v, g_new_C, g_grid_v, new_v,
                              new_C)
        else:
            _g2p_vjp_particle(p, 3, x, F, grid_v, dx, inv_dx, res, g_x_next, g_v_next, g_F_next,
                              g_C_next, dt, K, g_x, g_F, g_new_v, g_new_C, g_grid_v, new_v,
                              new_C)


@_dual
def _grid_update_vjp(g_grid_v0, grid_v_free, inv_m, g_mv, g_m, row_start, row_length):
    """Adjoint of _grid_update over the node box; zeroes g_grid_v0 behind it (see _g2p_vjp)."""
    d = g_grid_v0.shape[1]
    zero = inv_m.dtype.type(0.0)
    for r in numba.prange(row_start.shape[0]):
        for i in range(row_start[r], row_start[r] + row_length):
            acc = zero
            for a in range(d):
                g_mv[i, a] = g_grid_v0[i, a] * inv_m[i]
                acc += g_grid_v0[i, a] * grid_v_free[i, a]
                g_grid_v0[i, a] = zero
            g_m[i] = -acc * inv_m[i]


@numba.njit(cache=True, error_model="numpy", inline="always")
def _p2g_vjp_particle(p, D, x, dx, inv_dx, res, g_mv, g_m, momentum, affine, mass, g_momentum,
                      g_affine, g_mass, g_x):
    T = x.dtype.type
    zero = T(0.0)
    if D == 2:
        b0, f0, wa0, wa1, wa2, da0, da1, da2 = _axis(x, p, 0, dx, res)
        b1, f1, wb0, wb1, wb2, db0, db1, db2 = _axis(x, p, 1, dx, res)
        m0, m1 = momentum[p, 0], momentum[p, 1]
        a00, a01, a10, a11 = affine[p, 0, 0], affine[p, 0, 1], affine[p, 1, 0], affine[p, 1, 1]
        mp = mass[p]
        gm = gp0 = gp1 = gx0 = gx1 = ga00 = ga01 = ga10 = ga11 = zero
        for i0 in range(3):
            w0 = _pick3(i0, wa0, wa1, wa2)
            d0 = _pick3(i0, da0, da1, da2) * inv_dx
            o0 = (T(i0) - f0) * dx
            row = (b0 + i0) * res + b1
            for i1 in range(3):
                w1 = _pick3(i1, wb0, wb1, wb2)
                wt = w0 * w1
                o1 = (T(i1) - f1) * dx
                i = row + i1
                G0, G1 = g_mv[i, 0], g_mv[i, 1]
                gmi = g_m[i]
                dot = gmi * mp
                gp0 += wt * G0
                ga00 += wt * G0 * o0
                ga01 += wt * G0 * o1
                dot += G0 * (m0 + a00 * o0 + a01 * o1)
                gp1 += wt * G1
                ga10 += wt * G1 * o0
                ga11 += wt * G1 * o1
                dot += G1 * (m1 + a10 * o0 + a11 * o1)
                gm += wt * gmi
                gx0 += d0 * w1 * dot - wt * (G0 * a00 + G1 * a10)
                gx1 += _pick3(i1, db0, db1, db2) * inv_dx * w0 * dot - wt * (G0 * a01 + G1 * a11)
        g_mass[p] = gm
        g_momentum[p, 0], g_momentum[p, 1] = gp0, gp1
        g_x[p, 0], g_x[p, 1] = gx0, gx1
        g_affine[p, 0, 0], g_affine[p, 0, 1] = ga00, ga01
        g_affine[p, 1, 0], g_affine[p, 1, 1] = ga10, ga11
        return
    b0, f0, wa0, wa1, wa2, da0, da1, da2 = _axis(x, p, 0, dx, res)
    b1, f1, wb0, wb1, wb2, db0, db1, db2 = _axis(x, p, 1, dx, res)
    b2, f2, wc0, wc1, wc2, dc0, dc1, dc2 = _axis(x, p, 2, dx, res)
    m0, m1, m2 = momentum[p, 0], momentum[p, 1], momentum[p, 2]
    a00, a01, a02 = affine[p, 0, 0], affine[p, 0, 1], affine[p, 0, 2]
    a10, a11, a12 = affine[p, 1, 0], affine[p, 1, 1], affine[p, 1, 2]
    a20, a21, a22 = affine[p, 2, 0], affine[p, 2, 1], affine[p, 2, 2]
    mp = mass[p]
    gm = gp0 = gp1 = gp2 = gx0 = gx1 = gx2 = zero
    ga00 = ga01 = ga02 = ga10 = ga11 = ga12 = ga20 = ga21 = ga22 = zero
    for i0 in range(3):
        w0 = _pick3(i0, wa0, wa1, wa2)
        d0 = _pick3(i0, da0, da1, da2) * inv_dx
        o0 = (T(i0) - f0) * dx
        for i1 in range(3):
            w1 = _pick3(i1, wb0, wb1, wb2)
            d1 = _pick3(i1, db0, db1, db2) * inv_dx
            o1 = (T(i1) - f1) * dx
            row = ((b0 + i0) * res + b1 + i1) * res + b2
            for i2 in range(3):
                w2 = _pick3(i2, wc0, wc1, wc2)
                wt = w0 * w1 * w2
                o2 = (T(i2) - f2) * dx
                i = row + i2
                G0, G1, G2 = g_mv[i, 0], g_mv[i, 1], g_mv[i, 2]
                gmi = g_m[i]
                dot = gmi * mp
                gp0 += wt * G0
                ga00 += wt * G0 * o0
                ga01 += wt * G0 * o1
                ga02 += wt * G0 * o2
                dot += G0 * (m0 + a00 * o0 + a01 * o1 + a02 * o2)
                gp1 += wt * G1
                ga10 += wt * G1 * o0
                ga11 += wt * G1 * o1
                ga12 += wt * G1 * o2
                dot += G1 * (m1 + a10 * o0 + a11 * o1 + a12 * o2)
                gp2 += wt * G2
                ga20 += wt * G2 * o0
                ga21 += wt * G2 * o1
                ga22 += wt * G2 * o2
                dot += G2 * (m2 + a20 * o0 + a21 * o1 + a22 * o2)
                gm += wt * gmi
                gx0 += d0 * w1 * w2 * dot - wt * (G0 * a00 + G1 * a10 + G2 * a20)
                gx1 += d1 * w0 * w2 * dot - wt * (G0 * a01 + G1 * a11 + G2 * a21)
                gx2 += (_pick3(i2, dc0, dc1, dc2) * inv_dx * w0 * w1 * dot
                        - wt * (G0 * a02 + G1 * a12 + G2 * a22))
    g_mass[p] = gm
    g_momentum[p, 0], g_momentum[p, 1], g_momentum[p, 2] = gp0, gp1, gp2
    g_x[p, 0], g_x[p, 1], g_x[p, 2] = gx0, gx1, gx2
    g_affine[p, 0, 0], g_affine[p, 0, 1], g_affine[p, 0, 2] = ga00, ga01, ga02
    g_affine[p, 1, 0], g_affine[p, 1, 1], g_affine[p, 1, 2] = ga10, ga11, ga12
    g_affine[p, 2, 0], g_affine[p, 2, 1], g_affine[p, 2, 2] = ga20, ga21, ga22


@_dual
def _p2g_vjp(x, dx, res, g_mv, g_m, momentum, affine, mass, g_momentum, g_affine, g_mass, g_x):
    """Fill the particle cotangents of P2G's inputs (gathered from the grid)."""
    n, d = x.shape
    inv_dx = x.dtype.type(1.0) / dx
    for p in numba.prange(n):
        if d == 2:
            _p2g_vjp_particle(p, 2, x, dx, inv_dx, res, g_mv, g_m, momentum, affine, mass,
                              g_momentum, g_affine, g_mass, g_x)
        else:
            _p2g_vjp_particle(p, 3, x, dx, inv_dx, res, g_mv, g_m, momentum, affine, mass,
                              g_momentum, g_affine, g_mass, g_x)


# -- constitutive models, per particle p of (n, d, d) arrays -----------------------------------


@numba.njit(cache=True, error_model="numpy", inline="always")
def _det(A, p, D):
    if D == 2:
        return A[p, 0, 0] * A[p, 1, 1] - A[p, 0, 1] * A[p, 1, 0]
    return (A[p, 0, 0] * (A[p, 1, 1] * A[p, 2, 2] - A[p, 1, 2] * A[p, 2, 1])
            - A[p, 0, 1] * (A[p, 1, 0] * A[p, 2, 2] - A[p, 1, 2] * A[p, 2, 0])
            + A[p, 0, 2] * (A[p, 1, 0] * A[p, 2, 1] - A[p, 1, 1] * A[p, 2, 0]))


@numba.njit(cache=True, error_model="numpy", inline="always")
def _inverse_transpose(A, out, p, D):
    """out = A⁻ᵀ = cof(A) / det(A); returns det(A)."""
    J = _det(A, p, D)
    inv = 1.0 / J  # one division instead of d²
    if D == 2:
        out[p, 0, 0] = A[p, 1, 1] * inv
        out[p, 0, 1] = -A[p, 1, 0] * inv
        out[p, 1, 0] = -A[p, 0, 1] * inv
        out[p, 1, 1] = A[p, 0, 0] * inv
    else:
        for i in range(3):
            i1, i2 = (i + 1) % 3, (i + 2) % 3
            for j in range(3):
                j1, j2 = (j + 1) % 3, (j + 2) % 3
                out[p, i, j] = (A[p, i1, j1] * A[p, i2, j2] - A[p, i1, j2] * A[p, i2, j1]) * inv
    return J


@numba.njit(cache=True, error_model="numpy", inline="always")
def _square(a):
    return a * a


@numba.njit(cache=True, error_model="numpy", inline="always")
def _polar(F, R, eps, p, D):
    """R = rotation of the polar decomposition of F (det R = +1)."""
    d = D
    if d == 2:
        a = F[p, 0, 0] + F[p, 1, 1]
        b = F[p, 1, 0] - F[p, 0, 1]
        inv_r = 1.0 / np.sqrt(a * a + b * b)
        R[p, 0, 0] = a * inv_r
        R[p, 0, 1] = -b * inv_r
        R[p, 1, 0] = b * inv_r
        R[p, 1, 1] = a * inv_r
        return
    if _det(F, p, D) <= 0:
        U, _, Vt = np.linalg.svd(F[p].astype(np.float64))
        Q = U @ Vt
        if np.linalg.det(Q) < 0:
            for i in range(3):
                U[i, 2] = -U[i, 2]
            Q = U @ Vt
        for i in range(3):
            for j in range(3):
                R[p, i, j] = Q[i, j]
        return
    # scaled Newton iteration on the nine entries in locals (array scratch would be
    # reloaded after every store: 5x slower)
    T = F.dtype.type
    half = T(0.5)
    x00, x01, x02 = F[p, 0, 0], F[p, 0, 1], F[p, 0, 2]
    x10, x11, x12 = F[p, 1, 0], F[p, 1, 1], F[p, 1, 2]
    x20, x21, x22 = F[p, 2, 0], F[p, 2, 1], F[p, 2, 2]
    tolerance = (T(4.0) * eps) * (T(4.0) * eps)
    for _ in range(60):
        # Y = X⁻ᵀ = cof(X) / det(X)
        c00 = x11 * x22 - x12 * x21
        c01 = x12 * x20 - x10 * x22
        c02 = x10 * x21 - x11 * x20
        inv = T(1.0) / (x00 * c00 + x01 * c01 + x02 * c02)
        y00, y01, y02 = c00 * inv, c01 * inv, c02 * inv
        y10 = (x21 * x02 - x22 * x01) * inv
        y11 = (x22 * x00 - x20 * x02) * inv
        y12 = (x20 * x01 - x21 * x00) * inv
        y20 = (x01 * x12 - x02 * x11) * inv
        y21 = (x02 * x10 - x00 * x12) * inv
        y22 = (x00 * x11 - x01 * x10) * inv
        nx = (x00 * x00 + x01 * x01 + x02 * x02 + x10 * x10 + x11 * x11 + x12 * x12
              + x20 * x20 + x21 * x21 + x22 * x22)
        ny = (y00 * y00 + y01 * y01 + y02 * y02 + y10 * y10 + y11 * y11 + y12 * y12
              + y20 * y20 + y21 * y21 + y22 * y22)
        zeta = np.sqrt(np.sqrt(ny / nx))  # (ny/nx)^¼ without a pow call
        a = half * zeta
        b = half / zeta
        n00, n01, n02 = a * x00 + b * y00, a * x01 + b * y01, a * x02 + b * y02
        n10, n11, n12 = a * x10 + b * y10, a * x11 + b * y11, a * x12 + b * y12
        n20, n21, n22 = a * x20 + b * y20, a * x21 + b * y21, a * x22 + b * y22
        change = (_square(n00 - x00) + _square(n01 - x01) + _square(n02 - x02)
                  + _square(n10 - x10) + _square(n11 - x11) + _square(n12 - x12)
                  + _square(n20 - x20) + _square(n21 - x21) + _square(n22 - x22))
        x00, x01, x02, x10, x11, x12, x20, x21, x22 = n00, n01, n02, n10, n11, n12, n20, n21, n22
        if change <= tolerance:
            break
    R[p, 0, 0], R[p, 0, 1], R[p, 0, 2] = x00, x01, x02
    R[p, 1, 0], R[p, 1, 1], R[p, 1, 2] = x10, x11, x12
    R[p, 2, 0], R[p, 2, 1], R[p, 2, 2] = x20, x21, x22


@numba.njit(cache=True, error_model="numpy", inline="always")
def _polar_vjp(F, R, G, out, S, p, D):
    """out += ∂L/∂F given ∂L/∂R = G for R = polar rotation of F (see materials.py)."""
    d = D
    trace = 0.0
    for i in range(d):
        for j in range(d):
            acc = 0.0
            for k in range(d):
                acc += R[p, k, i] * F[p, k, j]
            S[p, i, j] = acc
        trace += S[p, i, i]
    # M = Rᵀ G; m = axial components of M − Mᵀ
    if d == 2:
        m21 = 0.0
        m12 = 0.0
        for k in range(2):
            m21 += R[p, k, 1] * G[p, k, 0]
            m12 += R[p, k, 0] * G[p, k, 1]
        w = (m21 - m12) / trace
        # out += R [[0, −w], [w, 0]]
        for i in range(2):
            out[p, i, 0] += R[p, i, 1] * w
            out[p, i, 1] -= R[p, i, 0] * w
        return
    m0 = 0.0
    m1 = 0.0
    m2 = 0.0
    for k in range(3):
        m0 += R[p, k, 2] * G[p, k, 1] - R[p, k, 1] * G[p, k, 2]
        m1 += R[p, k, 0] * G[p, k, 2] - R[p, k, 2] * G[p, k, 0]
        m2 += R[p, k, 1] * G[p, k, 0] - R[p, k, 0] * G[p, k, 1]
    # A = tr(S) I − sym(S); ω = A⁻¹ m by cofactors (A is symmetric)
    a00 = trace - S[p, 0, 0]
    a11 = trace - S[p, 1, 1]
    a22 = trace - S[p, 2, 2]
    a01 = -0.5 * (S[p, 0, 1] + S[p, 1, 0])
    a02 = -0.5 * (S[p, 0, 2] + S[p, 2, 0])
    a12 = -0.5 * (S[p, 1, 2] + S[p, 2, 1])
    c00 = a11 * a22 - a12 * a12
    c01 = a02 * a12 - a01 * a22
    c02 = a01 * a12 - a02 * a11
    c11 = a00 * a22 - a02 * a02
    c12 = a01 * a02 - a00 * a12
    c22 = a00 * a11 - a01 * a01
    det = a00 * c00 + a01 * c01 + a02 * c02
    w0 = (c00 * m0 + c01 * m1 + c02 * m2) / det
    w1 = (c01 * m0 + c11 * m1 + c12 * m2) / det
    w2 = (c02 * m0 + c12 * m1 + c22 * m2) / det
    # out += R [ω]×
    for i in range(3):
        out[p, i, 0] += R[p, i, 1] * w2 - R[p, i, 2] * w1
        out[p, i, 1] += -R[p, i, 0] * w2 + R[p, i, 2] * w0
        out[p, i, 2] += R[p, i, 0] * w1 - R[p, i, 1] * w0


@numba.njit(cache=True, error_model="numpy", inline="always")
def _lame(E, nu, one):
    """Lamé parameters (μ, λ) [Pa]; ``one`` is 1 in the arithmetic's precision."""
    two = one + one
    return E / (two * (one + nu)), E * nu / ((one + nu) * (one - two * nu))


@numba.njit(cache=True, error_model="numpy", inline="always")
def _piola(F, E, nu, corotated, exponent, P, H, R, eps, p, D):
    """P = first Piola-Kirchhoff stress of F; fills H = F⁻ᵀ and (corotated) R."""
    d = D
    mu, lam = _lame(E, nu, 1.0)
    J = _inverse_transpose(F, H, p, D)
    if corotated:
        _polar(F, R, eps, p, D)
        c = lam * (J - 1.0) * J
        for i in range(d):
            for j in range(d):
                P[p, i, j] = 2.0 * mu * (F[p, i, j] - R[p, i, j]) + c * H[p, i, j]
    else:
        c = lam * np.log(J)
        for i in range(d):
            for j in range(d):
                P[p, i, j] = mu * (F[p, i, j] - H[p, i, j]) + c * H[p, i, j]
    if exponent:
        kappa = E / (3.0 * (2.0 - 2.0 * nu))
        c = kappa * exponent * (J - 1.0) ** (exponent - 1) * J
        for i in range(d):
            for j in range(d):
                P[p, i, j] += c * H[p, i, j]
    return J


@numba.njit(cache=True, error_model="numpy", inline="always")
def _piola_vjp(F, E, nu, corotated, exponent, G, g_F, H, R, T, S, J, p, D):
    """g_F += ∂L/∂F given ∂L/∂P = G; returns (∂L/∂E, ∂L/∂ν). H, R from _piola."""
    d = D
    mu, lam = _lame(E, nu, 1.0)
    gH = 0.0
    for i in range(d):
        for j in range(d):
            gH += G[p, i, j] * H[p, i, j]
    # T = H Gᵀ H (the VJP of H = F⁻ᵀ is −H Gᵀ H)
    for i in range(d):
        for j in range(d):
            acc = 0.0
            for a in range(d):
                for b in range(d):
                    acc += H[p, i, a] * G[p, b, a] * H[p, b, j]
            T[p, i, j] = acc
    g_E = 0.0
    g_nu = 0.0
    if exponent:
        q = exponent
        kappa = E / (3.0 * (2.0 - 2.0 * nu))
        phi = kappa * q * (J - 1.0) ** (q - 1) * J
        dphi = kappa * q * ((q - 1) * (J - 1.0) ** (q - 2) * J + (J - 1.0) ** (q - 1))
        for i in range(d):
            for j in range(d):
                g_F[p, i, j] += dphi * J * gH * H[p, i, j] - phi * T[p, i, j]
        g_kappa = q * (J - 1.0) ** (q - 1) * J * gH
        g_E += g_kappa / (6.0 * (1.0 - nu))
        g_nu += g_kappa * E / (6.0 * (1.0 - nu) ** 2)
    if corotated:
        c = lam * (J - 1.0) * J
        dc = lam * (2.0 * J - 1.0) * J * gH
        g_mu = 0.0
        for i in range(d):
            for j in range(d):
                g_F[p, i, j] += 2.0 * mu * G[p, i, j] + dc * H[p, i, j] - c * T[p, i, j]
                g_mu += 2.0 * G[p, i, j] * (F[p, i, j] - R[p, i, j])
                S[p, i, j] = -2.0 * mu * G[p, i, j]
        _polar_vjp(F, R, S, g_F, T, p, D)
        g_lam = (J - 1.0) * J * gH
    else:
        logJ = np.log(J)
        g_mu = 0.0
        for i in range(d):
            for j in range(d):
                g_F[p, i, j] += (mu * G[p, i, j] + (mu - lam * logJ) * T[p, i, j]
                                 + lam * gH * H[p, i, j])
                g_mu += G[p, i, j] * (F[p, i, j] - H[p, i, j])
        g_lam = logJ * gH
    g_E += g_mu / (2.0 * (1.0 + nu)) + g_lam * nu / ((1.0 + nu) * (1.0 - 2.0 * nu))
    g_nu += (-g_mu * E / (2.0 * (1.0 + nu) ** 2)
             + g_lam * E * (1.0 + 2.0 * nu * nu) / ((1.0 + nu) * (1.0 - 2.0 * nu)) ** 2)
    return g_E, g_nu


@numba.njit(cache=True, error_model="numpy", inline="always")
def _impulses_particle_corotated_2d(p, F, C, v, E, nu, rho, V, sigma, cable_f, dt, K, mass,
                                    affine, momentum, tau, P, H, R):
    """_impulses_particle for the common 2D fixed-corotated case with every matrix entry in
    a local (the generic path re-reads them from memory after each store)."""
    T = F.dtype.type
    zero, one, two = T(0.0), T(1.0), T(2.0)
    f00, f01, f10, f11 = F[p, 0, 0], F[p, 0, 1], F[p, 1, 0], F[p, 1, 1]
    mu, lam = _lame(E[p], nu[p], one)
    J = f00 * f11 - f01 * f10
    inv = one / J
    h00, h01, h10, h11 = f11 * inv, -f10 * inv, -f01 * inv, f00 * inv
    a = f00 + f11
    b = f10 - f01
    inv_r = one / np.sqrt(a * a + b * b)
    r00, r01, r10, r11 = a * inv_r, -b * inv_r, b * inv_r, a * inv_r
    c = lam * (J - one) * J
    p00 = two * mu * (f00 - r00) + c * h00
    p01 = two * mu * (f01 - r01) + c * h01
    p10 = two * mu * (f10 - r10) + c * h10
    p11 = two * mu * (f11 - r11) + c * h11
    H[p, 0, 0], H[p, 0, 1], H[p, 1, 0], H[p, 1, 1] = h00, h01, h10, h11
    R[p, 0, 0], R[p, 0, 1], R[p, 1, 0], R[p, 1, 1] = r00, r01, r10, r11
    P[p, 0, 0], P[p, 0, 1], P[p, 1, 0], P[p, 1, 1] = p00, p01, p10, p11
    s0, s1 = sigma[p, 0], sigma[p, 1]
    # τ = P Fᵀ + F σ Fᵀ
    t00 = zero + (p00 * f00 + f00 * s0 * f00) + (p01 * f01 + f01 * s1 * f01)
    t01 = zero + (p00 * f10 + f00 * s0 * f10) + (p01 * f11 + f01 * s1 * f11)
    t10 = zero + (p10 * f00 + f10 * s0 * f00) + (p11 * f01 + f11 * s1 * f01)
    t11 = zero + (p10 * f10 + f10 * s0 * f10) + (p11 * f11 + f11 * s1 * f11)
    tau[p, 0, 0], tau[p, 0, 1], tau[p, 1, 0], tau[p, 1, 1] = t00, t01, t10, t11
    m = rho[p] * V[p]
    mass[p] = m
    momentum[p, 0] = m * v[p, 0] + dt * cable_f[p, 0]
    momentum[p, 1] = m * v[p, 1] + dt * cable_f[p, 1]
    q = -dt * K * V[p]
    affine[p, 0, 0] = q * t00 + m * C[p, 0, 0]
    affine[p, 0, 1] = q * t01 + m * C[p, 0, 1]
    affine[p, 1, 0] = q * t10 + m * C[p, 1, 0]
    affine[p, 1, 1] = q * t11 + m * C[p, 1, 1]


@numba.njit(cache=True, error_model="numpy", inline="always")
def _impulses_particle(p, D, F, C, v, E, nu, rho, V, sigma, cable_f, dt, K, corotated, exponent,
                       eps, mass, affine, momentum, tau, P, H, R):
    if D == 2 and corotated and not exponent:
        _impulses_particle_corotated_2d(p, F, C, v, E, nu, rho, V, sigma, cable_f, dt, K, mass,
                                        affine, momentum, tau, P, H, R)
        return
    _piola(F, E[p], nu[p], corotated, exponent, P, H, R, eps, p, D)
    m = rho[p] * V[p]
    mass[p] = m
    zero = F.dtype.type(0.0)
    for i in range(D):
        momentum[p, i] = m * v[p, i] + dt * cable_f[p, i]
        for j in range(D):
            acc = zero
            for k in range(D):
                acc += P[p, i, k] * F[p, j, k] + F[p, i, k] * sigma[p, k] * F[p, j, k]
            tau[p, i, j] = acc
    for i in range(D):
        for j in range(D):
            affine[p, i, j] = -dt * K * V[p] * tau[p, i, j] + m * C[p, i, j]


@_dual
def _impulses(F, C, v, E, nu, rho, V, sigma, cable_f, dt, K, corotated, exponent, eps,
              mass, affine, momentum, tau, P, H, R):
    """Fill mass (n,), affine (n, d, d), momentum (n, d), τ (n, d, d) (see
    step.particle_impulses); P, H, R are (n, d, d) scratch."""
    n, d = v.shape
    for p in numba.prange(n):
        if d == 2:
            _impulses_particle(p, 2, F, C, v, E, nu, rho, V, sigma, cable_f, dt, K, corotated,
                               exponent, eps, mass, affine, momentum, tau, P, H, R)
        else:
            _impulses_particle(p, 3, F, C, v, E, nu, rho, V, sigma, cable_f, dt, K, corotated,
                               exponent, eps, mass, affine, momentum, tau, P, H, R)


@numba.njit(cache=True, error_model="numpy", inline="always")
def _impulses_vjp_particle_corotated_2d(p, F, C, v, E, nu, rho, V, sigma, tau, dt, K,
                                        g_mass_in, g_affine, g_momentum, P, H, R, g_v, g_F,
                                        g_C, g_sigma, g_E, g_nu, g_rho, g_V):
    """_impulses_vjp_particle for 2D fixed corotated with entries in locals (see
    _impulses_particle_corotated_2d); P, H, R come from the forward pass."""
    T = F.dtype.type
    one, two = T(1.0), T(2.0)
    f00, f01, f10, f11 = F[p, 0, 0], F[p, 0, 1], F[p, 1, 0], F[p, 1, 1]
    p00, p01, p10, p11 = P[p, 0, 0], P[p, 0, 1], P[p, 1, 0], P[p, 1, 1]
    h00, h01, h10, h11 = H[p, 0, 0], H[p, 0, 1], H[p, 1, 0], H[p, 1, 1]
    r00, r01, r10, r11 = R[p, 0, 0], R[p, 0, 1], R[p, 1, 0], R[p, 1, 1]
    a00, a01, a10, a11 = g_affine[p, 0, 0], g_affine[p, 0, 1], g_affine[p, 1, 0], \
        g_affine[p, 1, 1]
    gm0, gm1 = g_momentum[p, 0], g_momentum[p, 1]
    J = f00 * f11 - f01 * f10
    Vp = V[p]
    m = rho[p] * Vp
    g_v[p, 0] = m * gm0
    g_v[p, 1] = m * gm1
    g_m = (g_mass_in[p] + v[p, 0] * gm0 + C[p, 0, 0] * a00 + C[p, 0, 1] * a01
           + v[p, 1] * gm1 + C[p, 1, 0] * a10 + C[p, 1, 1] * a11)
    g_C[p, 0, 0], g_C[p, 0, 1], g_C[p, 1, 0], g_C[p, 1, 1] = m * a00, m * a01, m * a10, m * a11
    q = -dt * K * Vp
    t00, t01, t10, t11 = q * a00, q * a01, q * a10, q * a11
    g_vol = -dt * K * (tau[p, 0, 0] * a00 + tau[p, 0, 1] * a01 + tau[p, 1, 0] * a10
                       + tau[p, 1, 1] * a11)
    g_rho[p] = g_m * Vp
    g_V[p] = g_vol + g_m * rho[p]
    s0, s1 = sigma[p, 0], sigma[p, 1]
    # τ = P Fᵀ + F σ Fᵀ: ∂/∂P = ḡ F, ∂/∂F = ḡᵀ P + (ḡ + ḡᵀ) F σ, ∂/∂σ_i = (Fᵀ ḡ F)_ii
    G00 = t00 * f00 + t01 * f10
    G01 = t00 * f01 + t01 * f11
    G10 = t10 * f00 + t11 * f10
    G11 = t10 * f01 + t11 * f11
    u00, u01, u11 = t00 + t00, t01 + t10, t11 + t11
    gf00 = t00 * p00 + t10 * p10 + (u00 * f00 + u01 * f10) * s0
    gf01 = t00 * p01 + t10 * p11 + (u00 * f01 + u01 * f11) * s1
    gf10 = t01 * p00 + t11 * p10 + (u01 * f00 + u11 * f10) * s0
    gf11 = t01 * p01 + t11 * p11 + (u01 * f01 + u11 * f11) * s1
    g_sigma[p, 0] = (f00 * (t00 * f00 + t01 * f10) + f10 * (t10 * f00 + t11 * f10))
    g_sigma[p, 1] = (f01 * (t00 * f01 + t01 * f11) + f11 * (t10 * f01 + t11 * f11))
    # P = 2μ(F − R) + λ(J − 1)J H with H = F⁻ᵀ; the VJP of H is −H Gᵀ H
    Ep, nup = E[p], nu[p]
    mu, lam = _lame(Ep, nup, one)
    gH = G00 * h00 + G01 * h01 + G10 * h10 + G11 * h11
    # T = H Gᵀ H
    k00 = G00 * h00 + G10 * h10  # (Gᵀ H)_00
    k01 = G00 * h01 + G10 * h11
    k10 = G01 * h00 + G11 * h10
    k11 = G01 * h01 + G11 * h11
    T00 = h00 * k00 + h01 * k10
    T01 = h00 * k01 + h01 * k11
    T10 = h10 * k00 + h11 * k10
    T11 = h10 * k01 + h11 * k11
    c = lam * (J - one) * J
    dc = lam * (two * J - one) * J * gH
    two_mu = two * mu
    gf00 += two_mu * G00 + dc * h00 - c * T00
    gf01 += two_mu * G01 + dc * h01 - c * T01
    gf10 += two_mu * G10 + dc * h10 - c * T10
    gf11 += two_mu * G11 + dc * h11 - c * T11
    g_mu = two * (G00 * (f00 - r00) + G01 * (f01 - r01) + G10 * (f10 - r10)
                  + G11 * (f11 - r11))
    # polar rotation (materials.py): ω = (m21 − m12) / tr(RᵀF) with M = Rᵀ(−2μG)
    trace = r00 * f00 + r10 * f10 + r01 * f01 + r11 * f11
    m21 = -two_mu * (r01 * G00 + r11 * G10)
    m12 = -two_mu * (r00 * G01 + r10 * G11)
    w = (m21 - m12) / trace
    gf00 += r01 * w
    gf10 += r11 * w
    gf01 -= r00 * w
    gf11 -= r10 * w
    g_F[p, 0, 0], g_F[p, 0, 1], g_F[p, 1, 0], g_F[p, 1, 1] = gf00, gf01, gf10, gf11
    g_lam = (J - one) * J * gH
    g_E[p] = g_mu / (two * (one + nup)) + g_lam * nup / ((one + nup) * (one - two * nup))
    shear = one + nup
    bulk = (one + nup) * (one - two * nup)
    g_nu[p] = (-g_mu * Ep / (two * shear * shear)
               + g_lam * Ep * (one + two * nup * nup) / (bulk * bulk))


@numba.njit(cache=True, error_model="numpy", inline="always")
def _impulses_vjp_particle(p, D, F, C, v, E, nu, rho, V, sigma, tau, dt, K, corotated, exponent,
                           g_mass_in, g_affine, g_momentum, scratch, outputs):
    # tuples keep the call under CPython's 30-argument limit for plain calls, beyond which
    # numba cannot inline it
    P, H, R, X, Y, g_tau, g_P = scratch
    g_v, g_F, g_C, g_sigma, g_E, g_nu, g_rho, g_V = outputs
    # P, H = F⁻ᵀ and R still hold this particle's values from the forward _impulses call
    J = _det(F, p, D)
    m = rho[p] * V[p]
    g_m = g_mass_in[p]
    g_vol = 0.0
    for i in range(D):
        g_v[p, i] = m * g_momentum[p, i]
        g_m += v[p, i] * g_momentum[p, i]
        for j in range(D):
            g_m += C[p, i, j] * g_affine[p, i, j]
            g_C[p, i, j] = m * g_affine[p, i, j]
            g_tau[p, i, j] = -dt * K * V[p] * g_affine[p, i, j]
            g_vol += -dt * K * tau[p, i, j] * g_affine[p, i, j]
    g_rho[p] = g_m * V[p]
    g_V[p] = g_vol + g_m * rho[p]
    for i in range(D):
        for j in range(D):
            a_P = 0.0
            a_F = 0.0
            a_S = 0.0
            for k in range(D):
                a_P += g_tau[p, i, k] * F[p, k, j]
                a_F += g_tau[p, k, i] * P[p, k, j]
                a_S += (g_tau[p, i, k] + g_tau[p, k, i]) * F[p, k, j]
            g_P[p, i, j] = a_P
            g_F[p, i, j] += a_F + a_S * sigma[p, j]
        acc = 0.0
        for a in range(D):
            for b in range(D):
                acc += F[p, a, i] * g_tau[p, a, b] * F[p, b, i]
        g_sigma[p, i] = acc
    g_e, g_n = _piola_vjp(F, E[p], nu[p], corotated, exponent, g_P, g_F, H, R, X,
                            Y, J, p, D)
    g_E[p] = g_e
    g_nu[p] = g_n


@_dual
def _impulses_vjp(F, C, v, E, nu, rho, V, sigma, tau, dt, K, corotated, exponent,
                  g_mass_in, g_affine, g_momentum, P, H, R, X, Y, g_tau, g_P):
    """VJP of _impulses except the cable term: g_v, g_F, g_C, g_σ, g_E, g_ν, g_ρ, g_V.

    P, H, R must be the arrays _impulses just filled for the same F (the forward pass that
    substep_vjp runs first); X, Y, g_tau, g_P are scratch."""
    n, d = v.shape
    g_v = np.empty_like(v)
    g_F = np.zeros_like(F)
    g_C = np.empty_like(F)
    g_sigma = np.empty_like(v)
    g_E = np.empty_like(E)
    g_nu = np.empty_like(E)
    g_rho = np.empty_like(E)
    g_V = np.empty_like(E)
    scratch = (P, H, R, X, Y, g_tau, g_P)
    outputs = (g_v, g_F, g_C, g_sigma, g_E, g_nu, g_rho, g_V)
    for p in numba.prange(n):
        if d == 2 and corotated and not exponent:
            _impulses_vjp_particle_corotated_2d(p, F, C, v, E, nu, rho, V, sigma, tau, dt, K,
                                                g_mass_in, g_affine, g_momentum, P, H, R, g_v,
                                                g_F, g_C, g_sigma, g_E, g_nu, g_rho, g_V)
        elif d == 2:
            _impulses_vjp_particle(p, 2, F, C, v, E, nu, rho, V, sigma, tau, dt, K, corotated,
                                   exponent, g_mass_in, g_affine, g_momentum, scratch,
                                   outputs)
        else:
            _impulses_vjp_particle(p, 3, F, C, v, E, nu, rho, V, sigma, tau, dt, K, corotated,
                                   exponent, g_mass_in, g_affine, g_momentum, scratch,
                                   outputs)
    return g_v, g_F, g_C, g_sigma, g_E, g_nu, g_rho, g_V


@_dual
def _actuation(signals, actuator_index, axes, max_stress, n):
    d = axes.shape[1]
    sigma = np.zeros((n, d), dtype=signals.dtype)
    for p in numba.prange(n):
        k = actuator_index[p]
        if k >= 0:
            for i in range(d):
                sigma[p, i] = signals[k] * max_stress[k] * axes[k, i]
    return sigma


@numba.njit(cache=True, error_model="numpy")
def _actuation_vjp(g_sigma, actuator_index, axes, max_stress):
    n, d = g_sigma.shape
    g = np.zeros(axes.shape[0], dtype=g_sigma.dtype)
    for p in range(n):
        k = actuator_index[p]
        if k >= 0:
            for i in range(d):
                g[k] += g_sigma[p, i] * axes[k, i]
    for k in range(axes.shape[0]):
        g[k] *= max_stress[k]
    return g


def _flat_layers(c: StepConstants):
    layers = c.layers
    sizes = [int(layer.node_index.shape[0]) for layer in layers]
    start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    if layers:
        node_index = np.concatenate([layer.node_index for layer in layers]).astype(np.int64)
        normal = np.concatenate([layer.normal for layer in layers]).astype(c.dtype)
    else:
        node_index = np.zeros(0, dtype=np.int64)
        normal = np.zeros((0, c.dim), dtype=c.dtype)
    kinds = np.array([layer.kind for layer in layers], dtype=np.int64)
    frictions = np.array([layer.friction for layer in layers], dtype=c.dtype)
    node_cell = np.ascontiguousarray(
        np.stack(np.unravel_index(node_index, (c.grid_resolution,) * c.dim), axis=1),
        dtype=np.int64).reshape(-1, c.dim)
    return node_index, node_cell, normal, start, kinds, frictions


_LAYER_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _layers(c: StepConstants):
    """The boundary layers concatenated for the kernels, computed once per constants."""
    flat = _LAYER_CACHE.get(c)
    if flat is None:
        flat = _LAYER_CACHE[c] = _flat_layers(c)
    return flat


def _pick(kernel: _Kernel, parallel: bool):
    return kernel.parallel if parallel else kernel.serial


def _particle_terms(c: StepConstants, state: MPMState, action, params: dict, dt: float,
                    parallel: bool):
    """Actuation stress, cable forces and the compiled per-particle impulses."""
    dtype = c.dtype
    action = np.asarray(action, dtype=dtype)
    stress_signals, cable_signals = action[: c.n_stress], action[c.n_stress:]
    n = state.particle_x.shape[0]
    sigma = _pick(_actuation, parallel)(stress_signals, c.actuator_index, c.actuator_axes,
                                        c.actuator_max_stress, n)
    if c.cables:
        cable_f = cable_forces(np, state.particle_x, cable_signals, c.cables)
    else:
        cable_f = np.zeros_like(state.particle_x)
    ws = _workspace(c)
    d = state.particle_x.shape[1]
    mass = ws.get("mass", (n,), dtype)
    affine, tau = ws.get("affine", (n, d, d), dtype), ws.get("tau", (n, d, d), dtype)
    momentum = ws.get("momentum", (n, d), dtype)
    _pick(_impulses, parallel)(
        state.particle_F, state.particle_C, state.particle_v, params["youngs_modulus"],
        params["poissons_ratio"], params["density"], params["volume"], sigma, cable_f,
        dtype.type(dt), dtype.type(4.0 / c.dx**2), c.material == "corotated", c.exponent,
        dtype.type(np.finfo(dtype).eps), mass, affine, momentum, tau,
        *_matrices(ws, "scratch", 3, n, d, dtype))
    saved = dict(sigma=sigma, tau=tau, cable_signals=cable_signals)
    return mass, affine, momentum, saved


def _particle_terms_vjp(c: StepConstants, state: MPMState, params: dict, dt: float, saved,
                        g_mass, g_affine, g_momentum, parallel: bool):
    dtype = c.dtype
    g_v, g_F, g_C, g_sigma, g_E, g_nu, g_rho, g_V = _pick(_impulses_vjp, parallel)(
        state.particle_F, state.particle_C, state.particle_v, params["youngs_modulus"],
        params["poissons_ratio"], params["density"], params["volume"], saved["sigma"],
        saved["tau"], dtype.type(dt), dtype.type(4.0 / c.dx**2), c.material == "corotated",
        c.exponent, g_mass, g_affine, g_momentum,
        *_matrices(_workspace(c), "scratch", 7, *state.particle_F.shape[:2], dtype))
    g_stress = _actuation_vjp(g_sigma, c.actuator_index, c.actuator_axes,
                              c.actuator_max_stress)
    g_x, g_cable = cable_forces_vjp(np, state.particle_x, saved["cable_signals"], c.cables,
                                    dtype.type(dt) * g_momentum)
    g_params = {"youngs_modulus": g_E, "poissons_ratio": g_nu, "density": g_rho,
                "volume": g_V}
    return g_x, g_v, g_F, g_C, np.concatenate([g_stress, g_cable]), g_params


def _contiguous(state: MPMState) -> MPMState:
    return MPMState(*(np.ascontiguousarray(a) for a in (
        state.particle_x, state.particle_v, state.particle_F, state.particle_C)))


class _Workspace:
    """Grid-sized and per-particle scratch arrays reused across calls.

    Allocating fresh multi-megabyte arrays every substep costs page faults that exceed the
    arithmetic (3D, 64³ nodes: ~6 MB per grid field). Results returned to callers are
    always fresh arrays; only intermediates live here, so a simulator must not be stepped
    from two threads at once.
    """

    def __init__(self):
        self._arrays: dict[str, np.ndarray] = {}
        self._dirty: set[str] = set()

    def get(self, name: str, shape: tuple, dtype) -> np.ndarray:
        array = self._arrays.get(name)
        if array is None or array.shape != shape or array.dtype != dtype:
            array = np.empty(shape, dtype=dtype)
            self._arrays[name] = array
        return array

    def accumulator(self, name: str, shape: tuple, dtype) -> np.ndarray:
        """A zero array for a scatter whose consumer zeroes it again (then call ``settle``).

        One left dirty by an interrupted step (KeyboardInterrupt between the two kernels) is
        cleared here, so a later step never adds to stale sums.
        """
        array = self._arrays.get(name)
        if array is None or array.shape != shape or array.dtype != dtype:
            array = np.zeros(shape, dtype=dtype)
            self._arrays[name] = array
        elif name in self._dirty:
            array.fill(0)
        self._dirty.add(name)
        return array

    def settle(self, *names: str) -> None:
        """Mark accumulators as zero again (their consumer kernel has cleared them)."""
        self._dirty.difference_update(names)


_WORKSPACES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _workspace(c: StepConstants) -> _Workspace:
    ws = _WORKSPACES.get(c)
    if ws is None:
        ws = _WORKSPACES[c] = _Workspace()
    return ws


def _matrices(ws: _Workspace, name: str, count: int, n: int, d: int, dtype) -> list:
    """``count`` scratch arrays of shape (n, d, d)."""
    return [ws.get(f"{name}{k}", (n, d, d), dtype) for k in range(count)]


def _to_grid(c: StepConstants, state: MPMState, action, params: dict, dt: float,
             parallel: bool) -> dict:
    """Particle stresses, P2G, grid update and boundaries; returns what G2P and the
    adjoint read (the grid velocities live in the workspace until the next call)."""
    dtype = c.dtype
    dt_t = dtype.type(dt)
    dx = dtype.type(c.dx)
    res = c.grid_resolution
    x = state.particle_x
    d = x.shape[1]
    G = c.node_count
    ws = _workspace(c)
    mass, affine, momentum, saved = _particle_terms(c, state, action, params, dt, parallel)
    grid_mv = ws.accumulator("grid_mv", (G, d), dtype)
    grid_m = ws.accumulator("grid_m", (G,), dtype)
    lo, hi = np.empty(d, dtype=np.int64), np.empty(d, dtype=np.int64)
    _p2g(x, dx, res, momentum, affine, mass, grid_mv, grid_m, lo, hi)
    row_start = _box_rows(lo, hi, c.strides)
    row_length = int(hi[-1] - lo[-1])
    grid_v, grid_v_free = ws.get("grid_v", (G, d), dtype), ws.get("grid_v_free", (G, d), dtype)
    inv_m = ws.get("inv_m", (G,), dtype)
    _pick(_grid_update, parallel)(grid_mv, grid_m, c.gravity, dt_t, grid_v, grid_v_free, inv_m,
                                  row_start, row_length)
    ws.settle("grid_mv", "grid_m")
    node_index, node_cell, normal, start, kinds, frictions = _layers(c)
    inputs = ws.get("inputs", (node_index.shape[0], d), dtype)
    _pick(_project, parallel)(grid_v, node_index, node_cell, normal, start, kinds, frictions,
                              inputs, lo, hi)
    saved.update(mass=mass, affine=affine, momentum=momentum, grid_v=grid_v,
                 grid_v_free=grid_v_free, inv_m=inv_m, inputs=inputs, dx=dx, lo=lo, hi=hi,
                 row_start=row_start, row_length=row_length)
    return saved


def substep(c: StepConstants, state: MPMState, action, params: dict, dt: float, *,
            parallel: bool = False) -> MPMState:
    """Same contract as :func:`sim_mpm.step.substep` (NumPy arrays); ``parallel`` selects
    the multithreaded builds."""
    state = _contiguous(state)
    s = _to_grid(c, state, action, params, dt, parallel)
    dtype = c.dtype
    new_x, new_v, new_C, new_F = _pick(_g2p, parallel)(
        state.particle_x, state.particle_F, s["grid_v"], s["dx"], c.grid_resolution,
        dtype.type(dt), dtype.type(4.0 / c.dx**2))
    return MPMState(new_x, new_v, new_F, new_C)


def substep_vjp(c: StepConstants, state: MPMState, action, params: dict, dt: float,
                g_next: MPMState, *, parallel: bool = False):
    """Same contract as :func:`sim_mpm.step.substep_vjp` (NumPy arrays)."""
    dtype = c.dtype
    K = dtype.type(4.0 / c.dx**2)
    dt_t = dtype.type(dt)
    state = _contiguous(state)
    g_next = _contiguous(g_next)
    s = _to_grid(c, state, action, params, dt, parallel)
    ws = _workspace(c)
    G, d = s["grid_v"].shape
    dx = s["dx"]
    res = c.grid_resolution
    x = state.particle_x
    n = x.shape[0]
    g_x, g_F = ws.get("g_x", (n, d), dtype), ws.get("g_F", (n, d, d), dtype)
    g_grid_v = ws.accumulator("g_grid_v", (G, d), dtype)
    scratch = (ws.get("g_new_v", (n, d), dtype), ws.get("g_new_C", (n, d, d), dtype),
               ws.get("new_v", (n, d), dtype), ws.get("new_C", (n, d, d), dtype))
    _g2p_vjp(x, state.particle_F, s["grid_v"], dx, res, g_next.particle_x, g_next.particle_v,
             g_next.particle_F, g_next.particle_C, dt_t, K, g_x, g_F, g_grid_v, scratch)
    node_index, node_cell, normal, start, kinds, frictions = _layers(c)
    _pick(_project_vjp, parallel)(g_grid_v, node_index, node_cell, normal, start, kinds,
                                  frictions, s["inputs"], s["lo"], s["hi"])
    g_mv, g_m = ws.get("g_mv", (G, d), dtype), ws.get("g_m", (G,), dtype)
    _pick(_grid_update_vjp, parallel)(g_grid_v, s["grid_v_free"], s["inv_m"], g_mv, g_m,
                                      s["row_start"], s["row_length"])
    ws.settle("g_grid_v")
    g_momentum, g_xp = ws.get("g_momentum", (n, d), dtype), ws.get("g_xp", (n, d), dtype)
    g_affine, g_mass = ws.get("g_affine", (n, d, d), dtype), ws.get("g_mass", (n,), dtype)
    _pick(_p2g_vjp, parallel)(x, dx, res, g_mv, g_m, s["momentum"], s["affine"], s["mass"],
                              g_momentum, g_affine, g_mass, g_xp)
    g_xi, g_v, g_Fi, g_C, g_action, g_params = _particle_terms_vjp(
        c, state, params, dt, s, g_mass, g_affine, g_momentum, parallel)
    return MPMState(g_x + g_xp + g_xi, g_v, g_F + g_Fi, g_C), g_action, g_params
