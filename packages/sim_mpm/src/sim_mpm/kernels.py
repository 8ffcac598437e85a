"""numba CPU kernels for the MLS-MPM substep and its adjoint, equal to :mod:`.step`.

Everything per particle or per node is a compiled loop: stencil weights, stress
(materials and stress actuation), P2G, grid update, boundary projections, G2P, and the
adjoint of each. Only the cable forces (a few route particles) reuse the array-level
functions of :mod:`.actuators`. The 3D polar rotation uses scaled Newton iterations
X ← ½(ζX + X⁻ᵀ/ζ) (the reference uses an SVD; both give the same R to round-off for
det F > 0) and falls back to a per-particle SVD for inverted particles.

Parallelism: each loop nest is compiled twice, serial and with ``prange`` over particles or
nodes; ``parallel=True`` selects the threaded build. The two scatters (P2G and the grid
side of the G2P adjoint) always run serially in particle order: threads would need atomics
or colouring, and the serial scatter keeps results bitwise reproducible. Serial is the
default because on small machines a threaded launch costs more than these loops (measured
on a busy 2-core machine: 0.2 ms with numba's workqueue layer, 8 ms with OpenMP, for a
loop that takes 0.004 ms serially).

Each per-particle loop body is an inlined function of the dimension D, called with the
constant 2 or 3, so that numba/LLVM unroll the d-loops (2.4× faster in 2D than loops over
a runtime d). The hottest bodies (P2G, G2P and their adjoints in 2D and 3D, the 2D fixed
corotated stress and its adjoint) also have explicit branches that hold the particle's
matrices and accumulators in local variables: written as loops over (n, d, d) arrays,
every store may alias the other arrays, so LLVM reloads them (measured 1.5-5× per kernel).

Grid passes (zeroing, momentum to velocity, boundary projections and their adjoints) run
only over the box of nodes the particles' stencils touch (_node_box): nodes outside it
receive no mass, so whatever the workspace holds there never reaches a particle. The
material adjoint reuses P, F⁻ᵀ and R from the forward pass that substep_vjp runs first
instead of recomputing them (the 3D polar iteration dominated it).

Intermediates (stencil weights, grid fields, scratch matrices) live in a workspace per
model, reused across calls: fresh multi-megabyte arrays every substep cost more in page
faults than the arithmetic. Returned arrays are always new, so steps stay pure, but one
simulator must not be stepped from two threads at once.
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
def _offset(offsets, fx, p, s, k, dx):
    """x_i − x_p along axis k [m] for stencil node s of particle p."""
    return (offsets[s, k] - fx[p, k]) * dx


@numba.njit(cache=True, error_model="numpy", inline="always")
def _grad(offsets, w, dw, p, s, k, inv_dx, D):
    """∂w_ip/∂x_p along axis k [1/m]."""
    g = dw[p, k, offsets[s, k]] * inv_dx
    for j in range(D):
        if j != k:
            g *= w[p, j, offsets[s, j]]
    return g


@_dual
def _stencil(x, dx, res, strides, fx, w, dw, weight, node):
    """Fill per-axis B-spline weights w, dw/dfx (n, d, 3), fx (n, d), and per-node weight
    and flat index (n, 3^d). Offsets and weight gradients are recomputed where needed
    rather than stored: (n, 3^d, d) arrays cost more memory traffic than the arithmetic."""
    n, d = x.shape
    for p in numba.prange(n):
        b0 = 0
        for k in range(d):
            xs = x[p, k] / dx
            b = int(np.floor(xs - 0.5))
            b = min(max(b, 0), res - 3)
            b0 += b * strides[k]
            f = xs - b
            fx[p, k] = f
            w[p, k, 0] = 0.5 * (1.5 - f) * (1.5 - f)
            w[p, k, 1] = 0.75 - (f - 1.0) * (f - 1.0)
            w[p, k, 2] = 0.5 * (f - 0.5) * (f - 0.5)
            dw[p, k, 0] = f - 1.5
            dw[p, k, 1] = -2.0 * (f - 1.0)
            dw[p, k, 2] = f - 0.5
        if d == 3:
            # the C-order stencil of step.stencil_offsets, products hoisted per axis
            s = 0
            for i0 in range(3):
                for i1 in range(3):
                    w01 = w[p, 0, i0] * w[p, 1, i1]
                    flat01 = b0 + i0 * strides[0] + i1 * strides[1]
                    for i2 in range(3):
                        weight[p, s] = w01 * w[p, 2, i2]
                        node[p, s] = flat01 + i2 * strides[2]
                        s += 1
        else:
            s = 0
            for i0 in range(3):
                for i1 in range(3):
                    weight[p, s] = w[p, 0, i0] * w[p, 1, i1]
                    node[p, s] = b0 + i0 * strides[0] + i1 * strides[1]
                    s += 1


@numba.njit(cache=True, error_model="numpy")
def _node_box(x, dx, res, strides):
    """The box of grid nodes the particles' stencils touch, as rows along the last axis.

    Returns (lo (d,), hi (d,), row_start (rows,)): node cells lo ≤ cell < hi on each
    axis, and the flat index of each row's first node; every row holds hi[-1] − lo[-1]
    consecutive nodes. Grid passes run over this box only: nodes outside it get no mass,
    so their values never reach a particle (base cells as in _stencil).
    """
    n, d = x.shape
    lo = np.full(d, res, dtype=np.int64)
    hi = np.zeros(d, dtype=np.int64)
    for p in range(n):
        for k in range(d):
            b = int(np.floor(x[p, k] / dx - 0.5))
            b = min(max(b, 0), res - 3)
            lo[k] = min(lo[k], b)
            hi[k] = max(hi[k], b + 3)
    if n == 0:
        lo[:] = 0
        hi[:] = 0
    rows = 1
    for k in range(d - 1):
        rows *= hi[k] - lo[k]
    row_start = np.empty(rows, dtype=np.int64)
    for r in range(rows):
        flat = lo[d - 1]
        rest = r
        for k in range(d - 2, -1, -1):
            extent = hi[k] - lo[k]
            flat += (lo[k] + rest % extent) * strides[k]
            rest //= extent
        row_start[r] = flat
    return lo, hi, row_start


@numba.njit(cache=True, error_model="numpy", inline="always")
def _p2g_particle(p, D, weight, node, offsets, fx, dx, momentum, affine, mass, grid_mv, grid_m):
    S = weight.shape[1]
    if D == 3:
        # particle values in locals: the grid stores could alias them, so LLVM would
        # otherwise reload them for every node
        m0, m1, m2 = momentum[p, 0], momentum[p, 1], momentum[p, 2]
        a00, a01, a02 = affine[p, 0, 0], affine[p, 0, 1], affine[p, 0, 2]
        a10, a11, a12 = affine[p, 1, 0], affine[p, 1, 1], affine[p, 1, 2]
        a20, a21, a22 = affine[p, 2, 0], affine[p, 2, 1], affine[p, 2, 2]
        mp = mass[p]
        for s in range(S):
            i = node[p, s]
            wt = weight[p, s]
            o0 = _offset(offsets, fx, p, s, 0, dx)
            o1 = _offset(offsets, fx, p, s, 1, dx)
            o2 = _offset(offsets, fx, p, s, 2, dx)
            grid_mv[i, 0] += wt * (m0 + a00 * o0 + a01 * o1 + a02 * o2)
            grid_mv[i, 1] += wt * (m1 + a10 * o0 + a11 * o1 + a12 * o2)
            grid_mv[i, 2] += wt * (m2 + a20 * o0 + a21 * o1 + a22 * o2)
            grid_m[i] += wt * mp
        return
    if D == 2:
        m0, m1 = momentum[p, 0], momentum[p, 1]
        a00, a01, a10, a11 = affine[p, 0, 0], affine[p, 0, 1], affine[p, 1, 0], affine[p, 1, 1]
        mp = mass[p]
        for s in range(S):
            i = node[p, s]
            wt = weight[p, s]
            o0 = _offset(offsets, fx, p, s, 0, dx)
            o1 = _offset(offsets, fx, p, s, 1, dx)
            grid_mv[i, 0] += wt * (m0 + a00 * o0 + a01 * o1)
            grid_mv[i, 1] += wt * (m1 + a10 * o0 + a11 * o1)
            grid_m[i] += wt * mp
        return
    for s in range(S):
        i = node[p, s]
        wt = weight[p, s]
        for a in range(D):
            acc = momentum[p, a]
            for b in range(D):
                acc += affine[p, a, b] * _offset(offsets, fx, p, s, b, dx)
            grid_mv[i, a] += wt * acc
        grid_m[i] += wt * mass[p]


@_dual
def _p2g(weight, node, offsets, fx, dx, momentum, affine, mass, grid_mv, grid_m, row_start,
         row_length):
    """Scatter mass and momentum to the grid (zeroed here over the node box); serial in
    particle order."""
    n = weight.shape[0]
    d = fx.shape[1]
    for r in range(row_start.shape[0]):
        for i in range(row_start[r], row_start[r] + row_length):
            grid_m[i] = 0.0
            for a in range(d):
                grid_mv[i, a] = 0.0
    for p in range(n):
        if d == 2:
            _p2g_particle(p, 2, weight, node, offsets, fx, dx, momentum, affine, mass, grid_mv,
                          grid_m)
        else:
            _p2g_particle(p, 3, weight, node, offsets, fx, dx, momentum, affine, mass, grid_mv,
                          grid_m)


@_dual
def _grid_update(grid_mv, grid_m, gravity, dt, grid_v, grid_v_free, inv_m, row_start,
                 row_length):
    d = grid_mv.shape[1]
    for r in numba.prange(row_start.shape[0]):
        for i in range(row_start[r], row_start[r] + row_length):
            if grid_m[i] > 0:
                inv = 1.0 / grid_m[i]
                inv_m[i] = inv
                for a in range(d):
                    vf = grid_mv[i, a] * inv
                    grid_v_free[i, a] = vf
                    grid_v[i, a] = vf + dt * gravity[a]
            else:
                inv_m[i] = 0.0
                for a in range(d):
                    grid_v_free[i, a] = 0.0
                    grid_v[i, a] = 0.0


@numba.njit(cache=True, error_model="numpy", inline="always")
def _in_box(node_cell, e, lo, hi):
    """Whether boundary entry e's node lies in the node box (see _node_box)."""
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
def _g2p_particle(p, D, weight, node, offsets, fx, dx, grid_v, x, F, dt, K, new_x, new_v, new_C,
                  new_F):
    S = weight.shape[1]
    if D == 3:
        v0 = v1 = v2 = 0.0
        c00 = c01 = c02 = c10 = c11 = c12 = c20 = c21 = c22 = 0.0
        for s in range(S):
            i = node[p, s]
            wt = weight[p, s]
            o0 = _offset(offsets, fx, p, s, 0, dx)
            o1 = _offset(offsets, fx, p, s, 1, dx)
            o2 = _offset(offsets, fx, p, s, 2, dx)
            g0 = grid_v[i, 0]
            g1 = grid_v[i, 1]
            g2 = grid_v[i, 2]
            v0 += wt * g0
            v1 += wt * g1
            v2 += wt * g2
            k0 = K * wt * g0
            k1 = K * wt * g1
            k2 = K * wt * g2
            c00 += k0 * o0
            c01 += k0 * o1
            c02 += k0 * o2
            c10 += k1 * o0
            c11 += k1 * o1
            c12 += k1 * o2
            c20 += k2 * o0
            c21 += k2 * o1
            c22 += k2 * o2
        new_v[p, 0] = v0
        new_v[p, 1] = v1
        new_v[p, 2] = v2
        new_C[p, 0, 0] = c00
        new_C[p, 0, 1] = c01
        new_C[p, 0, 2] = c02
        new_C[p, 1, 0] = c10
        new_C[p, 1, 1] = c11
        new_C[p, 1, 2] = c12
        new_C[p, 2, 0] = c20
        new_C[p, 2, 1] = c21
        new_C[p, 2, 2] = c22
    elif D == 2:
        v0 = v1 = 0.0
        c00 = c01 = c10 = c11 = 0.0
        for s in range(S):
            i = node[p, s]
            wt = weight[p, s]
            o0 = _offset(offsets, fx, p, s, 0, dx)
            o1 = _offset(offsets, fx, p, s, 1, dx)
            g0 = grid_v[i, 0]
            g1 = grid_v[i, 1]
            v0 += wt * g0
            v1 += wt * g1
            k0 = K * wt * g0
            k1 = K * wt * g1
            c00 += k0 * o0
            c01 += k0 * o1
            c10 += k1 * o0
            c11 += k1 * o1
        new_v[p, 0] = v0
        new_v[p, 1] = v1
        new_C[p, 0, 0] = c00
        new_C[p, 0, 1] = c01
        new_C[p, 1, 0] = c10
        new_C[p, 1, 1] = c11
    else:
        for a in range(D):
            new_v[p, a] = 0.0
            for b in range(D):
                new_C[p, a, b] = 0.0
        for s in range(S):
            i = node[p, s]
            wt = weight[p, s]
            for a in range(D):
                gv = grid_v[i, a]
                new_v[p, a] += wt * gv
                for b in range(D):
                    new_C[p, a, b] += K * wt * gv * _offset(offsets, fx, p, s, b, dx)
    for a in range(D):
        new_x[p, a] = x[p, a] + dt * new_v[p, a]
        for b in range(D):
            acc = 0.0
            for c in range(D):
                acc += new_C[p, a, c] * F[p, c, b]
            new_F[p, a, b] = F[p, a, b] + dt * acc


@_dual
def _g2p(weight, node, offsets, fx, dx, grid_v, x, F, dt, K):
    n = weight.shape[0]
    d = fx.shape[1]
    new_x = np.empty_like(x)
    new_v = np.empty_like(x)
    new_C = np.empty_like(F)
    new_F = np.empty_like(F)
    for p in numba.prange(n):
        if d == 2:
            _g2p_particle(p, 2, weight, node, offsets, fx, dx, grid_v, x, F, dt, K, new_x, new_v,
                          new_C, new_F)
        else:
            _g2p_particle(p, 3, weight, node, offsets, fx, dx, grid_v, x, F, dt, K, new_x, new_v,
                          new_C, new_F)
    return new_x, new_v, new_C, new_F


@numba.njit(cache=True, error_model="numpy", inline="always")
def _g2p_vjp_particles_particle(p, D, weight, node, offsets, fx, w, dw, dx, grid_v, F, new_C,
                                g_x_next, g_v_next, g_F_next, g_C_next, dt, K, g_x, g_F, g_new_v,
                                g_new_C):
    S = weight.shape[1]
    inv_dx = 1.0 / dx
    for a in range(D):
        g_new_v[p, a] = g_v_next[p, a] + dt * g_x_next[p, a]
        for b in range(D):
            acc_f = 0.0
            acc_c = 0.0
            for c in range(D):
                # (I + dt C')ᵀ g_F' and g_F' Fᵀ
                acc_f += new_C[p, c, a] * g_F_next[p, c, b]
                acc_c += g_F_next[p, a, c] * F[p, b, c]
            g_F[p, a, b] = g_F_next[p, a, b] + dt * acc_f
            g_new_C[p, a, b] = g_C_next[p, a, b] + dt * acc_c
    if D == 3:
        # cotangents in locals (see _p2g_particle); sums keep the generic loop's order
        u0, u1, u2 = g_new_v[p, 0], g_new_v[p, 1], g_new_v[p, 2]
        c00, c01, c02 = g_new_C[p, 0, 0], g_new_C[p, 0, 1], g_new_C[p, 0, 2]
        c10, c11, c12 = g_new_C[p, 1, 0], g_new_C[p, 1, 1], g_new_C[p, 1, 2]
        c20, c21, c22 = g_new_C[p, 2, 0], g_new_C[p, 2, 1], g_new_C[p, 2, 2]
        # K·C̄ once per particle: dot = gv·(ū + K C̄ o) and K C̄ᵀ gv (round-off differs
        # from the generic loop, not the value)
        c00, c01, c02 = K * c00, K * c01, K * c02
        c10, c11, c12 = K * c10, K * c11, K * c12
        c20, c21, c22 = K * c20, K * c21, K * c22
        x0, x1, x2 = g_x_next[p, 0], g_x_next[p, 1], g_x_next[p, 2]
        for s in range(S):
            i = node[p, s]
            wt = weight[p, s]
            o0 = _offset(offsets, fx, p, s, 0, dx)
            o1 = _offset(offsets, fx, p, s, 1, dx)
            o2 = _offset(offsets, fx, p, s, 2, dx)
            gv0, gv1, gv2 = grid_v[i, 0], grid_v[i, 1], grid_v[i, 2]
            dot = (gv0 * (u0 + c00 * o0 + c01 * o1 + c02 * o2)
                   + gv1 * (u1 + c10 * o0 + c11 * o1 + c12 * o2)
                   + gv2 * (u2 + c20 * o0 + c21 * o1 + c22 * o2))
            x0 += (_grad(offsets, w, dw, p, s, 0, inv_dx, D) * dot
                   - wt * (gv0 * c00 + gv1 * c10 + gv2 * c20))
            x1 += (_grad(offsets, w, dw, p, s, 1, inv_dx, D) * dot
                   - wt * (gv0 * c01 + gv1 * c11 + gv2 * c21))
            x2 += (_grad(offsets, w, dw, p, s, 2, inv_dx, D) * dot
                   - wt * (gv0 * c02 + gv1 * c12 + gv2 * c22))
        g_x[p, 0] = x0
        g_x[p, 1] = x1
        g_x[p, 2] = x2
        return
    if D == 2:
        u0, u1 = g_new_v[p, 0], g_new_v[p, 1]
        c00, c01, c10, c11 = (K * g_new_C[p, 0, 0], K * g_new_C[p, 0, 1],
                              K * g_new_C[p, 1, 0], K * g_new_C[p, 1, 1])
        x0, x1 = g_x_next[p, 0], g_x_next[p, 1]
        for s in range(S):
            i = node[p, s]
            wt = weight[p, s]
            o0 = _offset(offsets, fx, p, s, 0, dx)
            o1 = _offset(offsets, fx, p, s, 1, dx)
            gv0, gv1 = grid_v[i, 0], grid_v[i, 1]
            dot = gv0 * (u0 + c00 * o0 + c01 * o1) + gv1 * (u1 + c10 * o0 + c11 * o1)
            x0 += (_grad(offsets, w, dw, p, s, 0, inv_dx, D) * dot
                   - wt * (gv0 * c00 + gv1 * c10))
            x1 += (_grad(offsets, w, dw, p, s, 1, inv_dx, D) * dot
                   - wt * (gv0 * c01 + gv1 * c11))
        g_x[p, 0] = x0
        g_x[p, 1] = x1
        return
    for a in range(D):
        g_x[p, a] = g_x_next[p, a]
    for s in range(S):
        i = node[p, s]
        wt = weight[p, s]
        dot = 0.0
        for a in range(D):
            gv = grid_v[i, a]
            dot += gv * g_new_v[p, a]
            for b in range(D):
                dot += K * gv * g_new_C[p, a, b] * _offset(offsets, fx, p, s, b, dx)
        for b in range(D):
            acc = 0.0
            for a in range(D):
                acc += grid_v[i, a] * g_new_C[p, a, b]
            g_x[p, b] += _grad(offsets, w, dw, p, s, b, inv_dx, D) * dot - K * wt * acc


@_dual
def _g2p_vjp_particles(weight, node, offsets, fx, w, dw, dx, grid_v, F, new_C, g_x_next,
                       g_v_next, g_F_next, g_C_next, dt, K, g_x, g_F, g_new_v, g_new_C):
    """Particle side of the G2P adjoint: fill g_x, g_F and the per-particle cotangents."""
    n = weight.shape[0]
    d = fx.shape[1]
    for p in numba.prange(n):
        if d == 2:
            _g2p_vjp_particles_particle(p, 2, weight, node, offsets, fx, w, dw, dx, grid_v, F,
                                        new_C, g_x_next, g_v_next, g_F_next, g_C_next, dt, K, g_x,
                                        g_F, g_new_v, g_new_C)
        else:
            _g2p_vjp_particles_particle(p, 3, weight, node, offsets, fx, w, dw, dx, grid_v, F,
                                        new_C, g_x_next, g_v_next, g_F_next, g_C_next, dt, K, g_x,
                                        g_F, g_new_v, g_new_C)


@numba.njit(cache=True, error_model="numpy", inline="always")
def _g2p_vjp_grid_particle(p, D, weight, node, offsets, fx, dx, g_new_v, g_new_C, K, g_grid_v):
    S = weight.shape[1]
    if D == 3:
        v0, v1, v2 = g_new_v[p, 0], g_new_v[p, 1], g_new_v[p, 2]
        c00, c01, c02 = g_new_C[p, 0, 0], g_new_C[p, 0, 1], g_new_C[p, 0, 2]
        c10, c11, c12 = g_new_C[p, 1, 0], g_new_C[p, 1, 1], g_new_C[p, 1, 2]
        c20, c21, c22 = g_new_C[p, 2, 0], g_new_C[p, 2, 1], g_new_C[p, 2, 2]
        for s in range(S):
            i = node[p, s]
            wt = weight[p, s]
            o0 = _offset(offsets, fx, p, s, 0, dx)
            o1 = _offset(offsets, fx, p, s, 1, dx)
            o2 = _offset(offsets, fx, p, s, 2, dx)
            g_grid_v[i, 0] += wt * (v0 + K * c00 * o0 + K * c01 * o1 + K * c02 * o2)
            g_grid_v[i, 1] += wt * (v1 + K * c10 * o0 + K * c11 * o1 + K * c12 * o2)
            g_grid_v[i, 2] += wt * (v2 + K * c20 * o0 + K * c21 * o1 + K * c22 * o2)
        return
    if D == 2:
        v0, v1 = g_new_v[p, 0], g_new_v[p, 1]
        c00, c01, c10, c11 = (g_new_C[p, 0, 0], g_new_C[p, 0, 1], g_new_C[p, 1, 0],
                              g_new_C[p, 1, 1])
        for s in range(S):
            i = node[p, s]
            wt = weight[p, s]
            o0 = _offset(offsets, fx, p, s, 0, dx)
            o1 = _offset(offsets, fx, p, s, 1, dx)
            g_grid_v[i, 0] += wt * (v0 + K * c00 * o0 + K * c01 * o1)
            g_grid_v[i, 1] += wt * (v1 + K * c10 * o0 + K * c11 * o1)
        return
    for s in range(S):
        i = node[p, s]
        wt = weight[p, s]
        for a in range(D):
            acc = g_new_v[p, a]
            for b in range(D):
                acc += K * g_new_C[p, a, b] * _offset(offsets, fx, p, s, b, dx)
            g_grid_v[i, a] += wt * acc


@_dual
def _g2p_vjp_grid(weight, node, offsets, fx, dx, g_new_v, g_new_C, K, g_grid_v, row_start,
                  row_length):
    """Grid side of the G2P adjoint: scatter ∂L/∂(grid v) (zeroed here over the node box),
    serially."""
    n = weight.shape[0]
    d = fx.shape[1]
    for r in range(row_start.shape[0]):
        for i in range(row_start[r], row_start[r] + row_length):
            for a in range(d):
                g_grid_v[i, a] = 0.0
    for p in range(n):
        if d == 2:
            _g2p_vjp_grid_particle(p, 2, weight, node, offsets, fx, dx, g_new_v, g_new_C, K,
                                   g_grid_v)
        else:
            _g2p_vjp_grid_particle(p, 3, weight, node, offsets, fx, dx, g_new_v, g_new_C, K,
                                   g_grid_v)


@_dual
def _grid_update_vjp(g_grid_v0, grid_v_free, inv_m, g_mv, g_m, row_start, row_length):
    d = g_grid_v0.shape[1]
    for r in numba.prange(row_start.shape[0]):
        for i in range(row_start[r], row_start[r] + row_length):
            acc = 0.0
            for a in range(d):
                g_mv[i, a] = g_grid_v0[i, a] * inv_m[i]
                acc += g_grid_v0[i, a] * grid_v_free[i, a]
            g_m[i] = -acc * inv_m[i]


@numba.njit(cache=True, error_model="numpy", inline="always")
def _p2g_vjp_particle(p, D, weight, node, offsets, fx, w, dw, dx, g_mv, g_m, momentum, affine, mass,
                      g_momentum, g_affine, g_mass, g_x):
    S = weight.shape[1]
    inv_dx = 1.0 / dx
    if D == 3:
        # particle values and accumulators in locals (see _p2g_particle); sums keep the
        # generic loop's order
        m0, m1, m2 = momentum[p, 0], momentum[p, 1], momentum[p, 2]
        a00, a01, a02 = affine[p, 0, 0], affine[p, 0, 1], affine[p, 0, 2]
        a10, a11, a12 = affine[p, 1, 0], affine[p, 1, 1], affine[p, 1, 2]
        a20, a21, a22 = affine[p, 2, 0], affine[p, 2, 1], affine[p, 2, 2]
        mp = mass[p]
        gm = 0.0
        gp0 = gp1 = gp2 = 0.0
        gx0 = gx1 = gx2 = 0.0
        ga00 = ga01 = ga02 = ga10 = ga11 = ga12 = ga20 = ga21 = ga22 = 0.0
        for s in range(S):
            i = node[p, s]
            wt = weight[p, s]
            o0 = _offset(offsets, fx, p, s, 0, dx)
            o1 = _offset(offsets, fx, p, s, 1, dx)
            o2 = _offset(offsets, fx, p, s, 2, dx)
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
            gx0 += (_grad(offsets, w, dw, p, s, 0, inv_dx, D) * dot
                    - wt * (0.0 + G0 * a00 + G1 * a10 + G2 * a20))
            gx1 += (_grad(offsets, w, dw, p, s, 1, inv_dx, D) * dot
                    - wt * (0.0 + G0 * a01 + G1 * a11 + G2 * a21))
            gx2 += (_grad(offsets, w, dw, p, s, 2, inv_dx, D) * dot
                    - wt * (0.0 + G0 * a02 + G1 * a12 + G2 * a22))
        g_mass[p] = gm
        g_momentum[p, 0], g_momentum[p, 1], g_momentum[p, 2] = gp0, gp1, gp2
        g_x[p, 0], g_x[p, 1], g_x[p, 2] = gx0, gx1, gx2
        g_affine[p, 0, 0], g_affine[p, 0, 1], g_affine[p, 0, 2] = ga00, ga01, ga02
        g_affine[p, 1, 0], g_affine[p, 1, 1], g_affine[p, 1, 2] = ga10, ga11, ga12
        g_affine[p, 2, 0], g_affine[p, 2, 1], g_affine[p, 2, 2] = ga20, ga21, ga22
        return
    if D == 2:
        m0, m1 = momentum[p, 0], momentum[p, 1]
        a00, a01, a10, a11 = affine[p, 0, 0], affine[p, 0, 1], affine[p, 1, 0], affine[p, 1, 1]
        mp = mass[p]
        gm = gp0 = gp1 = gx0 = gx1 = ga00 = ga01 = ga10 = ga11 = 0.0
        for s in range(S):
            i = node[p, s]
            wt = weight[p, s]
            o0 = _offset(offsets, fx, p, s, 0, dx)
            o1 = _offset(offsets, fx, p, s, 1, dx)
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
            gx0 += (_grad(offsets, w, dw, p, s, 0, inv_dx, D) * dot
                    - wt * (0.0 + G0 * a00 + G1 * a10))
            gx1 += (_grad(offsets, w, dw, p, s, 1, inv_dx, D) * dot
                    - wt * (0.0 + G0 * a01 + G1 * a11))
        g_mass[p] = gm
        g_momentum[p, 0], g_momentum[p, 1] = gp0, gp1
        g_x[p, 0], g_x[p, 1] = gx0, gx1
        g_affine[p, 0, 0], g_affine[p, 0, 1] = ga00, ga01
        g_affine[p, 1, 0], g_affine[p, 1, 1] = ga10, ga11
        return
    g_mass[p] = 0.0
    for a in range(D):
        g_momentum[p, a] = 0.0
        g_x[p, a] = 0.0
        for b in range(D):
            g_affine[p, a, b] = 0.0
    for s in range(S):
        i = node[p, s]
        wt = weight[p, s]
        dot = g_m[i] * mass[p]
        for a in range(D):
            G = g_mv[i, a]
            g_momentum[p, a] += wt * G
            moved = momentum[p, a]
            for b in range(D):
                off = _offset(offsets, fx, p, s, b, dx)
                g_affine[p, a, b] += wt * G * off
                moved += affine[p, a, b] * off
            dot += G * moved
        g_mass[p] += wt * g_m[i]
        for b in range(D):
            acc = 0.0
            for a in range(D):
                acc += g_mv[i, a] * affine[p, a, b]
            g_x[p, b] += _grad(offsets, w, dw, p, s, b, inv_dx, D) * dot - wt * acc


@_dual
def _p2g_vjp(weight, node, offsets, fx, w, dw, dx, g_mv, g_m, momentum, affine, mass,
             g_momentum, g_affine, g_mass, g_x):
    """Fill (zeroing first) the particle cotangents of P2G's inputs."""
    n = weight.shape[0]
    d = fx.shape[1]
    for p in numba.prange(n):
        if d == 2:
            _p2g_vjp_particle(p, 2, weight, node, offsets, fx, w, dw, dx, g_mv, g_m, momentum,
                              affine, mass, g_momentum, g_affine, g_mass, g_x)
        else:
            _p2g_vjp_particle(p, 3, weight, node, offsets, fx, w, dw, dx, g_mv, g_m, momentum,
                              affine, mass, g_momentum, g_affine, g_mass, g_x)


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
def _polar(F, R, X, Y, eps, p, D):
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
    for i in range(3):
        for j in range(3):
            X[p, i, j] = F[p, i, j]
    for _ in range(60):
        _inverse_transpose(X, Y, p, D)
        nx = 0.0
        ny = 0.0
        for i in range(3):
            for j in range(3):
                nx += X[p, i, j] * X[p, i, j]
                ny += Y[p, i, j] * Y[p, i, j]
        zeta = np.sqrt(np.sqrt(ny / nx))  # (ny/nx)^¼ without a pow call
        change = 0.0
        for i in range(3):
            for j in range(3):
                new = 0.5 * (zeta * X[p, i, j] + Y[p, i, j] / zeta)
                change += (new - X[p, i, j]) ** 2
                X[p, i, j] = new
        if change <= (4.0 * eps) ** 2:
            break
    for i in range(3):
        for j in range(3):
            R[p, i, j] = X[p, i, j]


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
def _lame(E, nu):
    return E / (2.0 * (1.0 + nu)), E * nu / ((1.0 + nu) * (1.0 - 2.0 * nu))


@numba.njit(cache=True, error_model="numpy", inline="always")
def _piola(F, E, nu, corotated, exponent, P, H, R, X, Y, eps, p, D):
    """P = first Piola-Kirchhoff stress of F; fills H = F⁻ᵀ and (corotated) R."""
    d = D
    mu, lam = _lame(E, nu)
    J = _inverse_transpose(F, H, p, D)
    if corotated:
        _polar(F, R, X, Y, eps, p, D)
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
    mu, lam = _lame(E, nu)
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
    f00, f01, f10, f11 = F[p, 0, 0], F[p, 0, 1], F[p, 1, 0], F[p, 1, 1]
    mu, lam = _lame(E[p], nu[p])
    J = f00 * f11 - f01 * f10
    inv = 1.0 / J
    h00, h01, h10, h11 = f11 * inv, -f10 * inv, -f01 * inv, f00 * inv
    a = f00 + f11
    b = f10 - f01
    inv_r = 1.0 / np.sqrt(a * a + b * b)
    r00, r01, r10, r11 = a * inv_r, -b * inv_r, b * inv_r, a * inv_r
    c = lam * (J - 1.0) * J
    p00 = 2.0 * mu * (f00 - r00) + c * h00
    p01 = 2.0 * mu * (f01 - r01) + c * h01
    p10 = 2.0 * mu * (f10 - r10) + c * h10
    p11 = 2.0 * mu * (f11 - r11) + c * h11
    H[p, 0, 0], H[p, 0, 1], H[p, 1, 0], H[p, 1, 1] = h00, h01, h10, h11
    R[p, 0, 0], R[p, 0, 1], R[p, 1, 0], R[p, 1, 1] = r00, r01, r10, r11
    P[p, 0, 0], P[p, 0, 1], P[p, 1, 0], P[p, 1, 1] = p00, p01, p10, p11
    s0, s1 = sigma[p, 0], sigma[p, 1]
    # τ = P Fᵀ + F σ Fᵀ
    t00 = 0.0 + (p00 * f00 + f00 * s0 * f00) + (p01 * f01 + f01 * s1 * f01)
    t01 = 0.0 + (p00 * f10 + f00 * s0 * f10) + (p01 * f11 + f01 * s1 * f11)
    t10 = 0.0 + (p10 * f00 + f10 * s0 * f00) + (p11 * f01 + f11 * s1 * f01)
    t11 = 0.0 + (p10 * f10 + f10 * s0 * f10) + (p11 * f11 + f11 * s1 * f11)
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
                       eps, mass, affine, momentum, tau, P, H, R, X, Y):
    if D == 2 and corotated and not exponent:
        _impulses_particle_corotated_2d(p, F, C, v, E, nu, rho, V, sigma, cable_f, dt, K, mass,
                                        affine, momentum, tau, P, H, R)
        return
    _piola(F, E[p], nu[p], corotated, exponent, P, H, R, X, Y, eps, p, D)
    m = rho[p] * V[p]
    mass[p] = m
    for i in range(D):
        momentum[p, i] = m * v[p, i] + dt * cable_f[p, i]
        for j in range(D):
            acc = 0.0
            for k in range(D):
                acc += P[p, i, k] * F[p, j, k] + F[p, i, k] * sigma[p, k] * F[p, j, k]
            tau[p, i, j] = acc
    for i in range(D):
        for j in range(D):
            affine[p, i, j] = -dt * K * V[p] * tau[p, i, j] + m * C[p, i, j]


@_dual
def _impulses(F, C, v, E, nu, rho, V, sigma, cable_f, dt, K, corotated, exponent, eps,
              mass, affine, momentum, tau, P, H, R, X, Y):
    """Fill mass (n,), affine (n, d, d), momentum (n, d), τ (n, d, d) (see
    step.particle_impulses); P, H, R, X, Y are (n, d, d) scratch."""
    n, d = v.shape
    for p in numba.prange(n):
        if d == 2:
            _impulses_particle(p, 2, F, C, v, E, nu, rho, V, sigma, cable_f, dt, K, corotated,
                               exponent, eps, mass, affine, momentum, tau, P, H, R, X, Y)
        else:
            _impulses_particle(p, 3, F, C, v, E, nu, rho, V, sigma, cable_f, dt, K, corotated,
                               exponent, eps, mass, affine, momentum, tau, P, H, R, X, Y)


@numba.njit(cache=True, error_model="numpy", inline="always")
def _impulses_vjp_particle_corotated_2d(p, F, C, v, E, nu, rho, V, sigma, tau, dt, K,
                                        g_mass_in, g_affine, g_momentum, P, H, R, g_v, g_F,
                                        g_C, g_sigma, g_E, g_nu, g_rho, g_V):
    """_impulses_vjp_particle for 2D fixed corotated with entries in locals (see
    _impulses_particle_corotated_2d); P, H, R come from the forward pass."""
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
    mu, lam = _lame(Ep, nup)
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
    c = lam * (J - 1.0) * J
    dc = lam * (2.0 * J - 1.0) * J * gH
    two_mu = 2.0 * mu
    gf00 += two_mu * G00 + dc * h00 - c * T00
    gf01 += two_mu * G01 + dc * h01 - c * T01
    gf10 += two_mu * G10 + dc * h10 - c * T10
    gf11 += two_mu * G11 + dc * h11 - c * T11
    g_mu = 2.0 * (G00 * (f00 - r00) + G01 * (f01 - r01) + G10 * (f10 - r10)
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
    g_lam = (J - 1.0) * J * gH
    g_E[p] = g_mu / (2.0 * (1.0 + nup)) + g_lam * nup / ((1.0 + nup) * (1.0 - 2.0 * nup))
    g_nu[p] = (-g_mu * Ep / (2.0 * (1.0 + nup) ** 2)
               + g_lam * Ep * (1.0 + 2.0 * nup * nup)
               / ((1.0 + nup) * (1.0 - 2.0 * nup)) ** 2)


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
        *_matrices(ws, "scratch", 5, n, d, dtype))
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

    def get(self, name: str, shape: tuple, dtype) -> np.ndarray:
        array = self._arrays.get(name)
        if array is None or array.shape != shape or array.dtype != dtype:
            array = np.empty(shape, dtype=dtype)
            self._arrays[name] = array
        return array


_WORKSPACES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _workspace(c: StepConstants) -> _Workspace:
    ws = _WORKSPACES.get(c)
    if ws is None:
        ws = _WORKSPACES[c] = _Workspace()
    return ws


def _matrices(ws: _Workspace, name: str, count: int, n: int, d: int, dtype) -> list:
    """``count`` scratch arrays of shape (n, d, d)."""
    return [ws.get(f"{name}{k}", (n, d, d), dtype) for k in range(count)]


def _forward(c: StepConstants, state: MPMState, action, params: dict, dt: float,
             parallel: bool):
    dtype = c.dtype
    K = dtype.type(4.0 / c.dx**2)
    dt_t = dtype.type(dt)
    dx = dtype.type(c.dx)
    state = _contiguous(state)
    x, F = state.particle_x, state.particle_F
    n, d = x.shape
    S, G = c.offsets.shape[0], c.node_count
    ws = _workspace(c)
    mass, affine, momentum, saved = _particle_terms(c, state, action, params, dt, parallel)
    fx, w, dw = ws.get("fx", (n, d), dtype), ws.get("w", (n, d, 3), dtype), \
        ws.get("dw", (n, d, 3), dtype)
    weight, node = ws.get("weight", (n, S), dtype), ws.get("node", (n, S), np.int64)
    _pick(_stencil, parallel)(x, dx, c.grid_resolution, c.strides, fx, w, dw,
                              weight, node)
    lo, hi, row_start = _node_box(x, dx, c.grid_resolution, c.strides)
    row_length = int(hi[-1] - lo[-1])
    grid_mv, grid_m = ws.get("grid_mv", (G, d), dtype), ws.get("grid_m", (G,), dtype)
    _p2g.serial(weight, node, c.offsets, fx, dx, momentum, affine, mass, grid_mv, grid_m,
                row_start, row_length)
    grid_v, grid_v_free = ws.get("grid_v", (G, d), dtype), ws.get("grid_v_free", (G, d), dtype)
    inv_m = ws.get("inv_m", (G,), dtype)
    _pick(_grid_update, parallel)(grid_mv, grid_m, c.gravity, dt_t, grid_v, grid_v_free, inv_m,
                                  row_start, row_length)
    node_index, node_cell, normal, start, kinds, frictions = _layers(c)
    inputs = ws.get("inputs", (node_index.shape[0], d), dtype)
    _pick(_project, parallel)(grid_v, node_index, node_cell, normal, start, kinds, frictions,
                              inputs, lo, hi)
    new_x, new_v, new_C, new_F = _pick(_g2p, parallel)(weight, node, c.offsets, fx, dx, grid_v,
                                                       x, F, dt_t, K)
    saved.update(mass=mass, affine=affine, momentum=momentum, fx=fx, w=w, dw=dw,
                 weight=weight, node=node, grid_v=grid_v, grid_v_free=grid_v_free,
                 inv_m=inv_m, inputs=inputs, new_C=new_C, dx=dx, lo=lo, hi=hi,
                 row_start=row_start, row_length=row_length)
    return MPMState(new_x, new_v, new_F, new_C), saved


def substep(c: StepConstants, state: MPMState, action, params: dict, dt: float, *,
            parallel: bool = False) -> MPMState:
    """Same contract as :func:`sim_mpm.step.substep` (NumPy arrays); ``parallel`` selects
    the multithreaded builds."""
    return _forward(c, state, action, params, dt, parallel)[0]


def substep_vjp(c: StepConstants, state: MPMState, action, params: dict, dt: float,
                g_next: MPMState, *, parallel: bool = False):
    """Same contract as :func:`sim_mpm.step.substep_vjp` (NumPy arrays)."""
    dtype = c.dtype
    K = dtype.type(4.0 / c.dx**2)
    dt_t = dtype.type(dt)
    state = _contiguous(state)
    g_next = _contiguous(g_next)
    _, s = _forward(c, state, action, params, dt, parallel)
    ws = _workspace(c)
    G, d = s["grid_v"].shape
    dx = s["dx"]
    n = state.particle_x.shape[0]
    g_x, g_new_v = ws.get("g_x", (n, d), dtype), ws.get("g_new_v", (n, d), dtype)
    g_F, g_new_C = ws.get("g_F", (n, d, d), dtype), ws.get("g_new_C", (n, d, d), dtype)
    _pick(_g2p_vjp_particles, parallel)(
        s["weight"], s["node"], c.offsets, s["fx"], s["w"], s["dw"], dx, s["grid_v"],
        state.particle_F, s["new_C"], g_next.particle_x, g_next.particle_v,
        g_next.particle_F, g_next.particle_C, dt_t, K, g_x, g_F, g_new_v, g_new_C)
    g_grid_v = ws.get("g_grid_v", (G, d), dtype)
    _g2p_vjp_grid.serial(s["weight"], s["node"], c.offsets, s["fx"], dx, g_new_v, g_new_C, K,
                         g_grid_v, s["row_start"], s["row_length"])
    node_index, node_cell, normal, start, kinds, frictions = _layers(c)
    _pick(_project_vjp, parallel)(g_grid_v, node_index, node_cell, normal, start, kinds,
                                  frictions, s["inputs"], s["lo"], s["hi"])
    g_mv, g_m = ws.get("g_mv", (G, d), dtype), ws.get("g_m", (G,), dtype)
    _pick(_grid_update_vjp, parallel)(g_grid_v, s["grid_v_free"], s["inv_m"], g_mv, g_m,
                                      s["row_start"], s["row_length"])
    g_momentum, g_xp = ws.get("g_momentum", (n, d), dtype), ws.get("g_xp", (n, d), dtype)
    g_affine, g_mass = ws.get("g_affine", (n, d, d), dtype), ws.get("g_mass", (n,), dtype)
    _pick(_p2g_vjp, parallel)(
        s["weight"], s["node"], c.offsets, s["fx"], s["w"], s["dw"], dx, g_mv, g_m,
        s["momentum"], s["affine"], s["mass"], g_momentum, g_affine, g_mass, g_xp)
    g_xi, g_v, g_Fi, g_C, g_action, g_params = _particle_terms_vjp(
        c, state, params, dt, s, g_mass, g_affine, g_momentum, parallel)
    return MPMState(g_x + g_xp + g_xi, g_v, g_F + g_Fi, g_C), g_action, g_params
