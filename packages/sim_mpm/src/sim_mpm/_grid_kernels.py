"""Grid passes of the numba kernels: momentum to velocity, boundary projections, adjoints.

They run only over the box of nodes the particles' stencils touch (recorded by P2G): nodes
outside it receive no mass, so whatever the workspace holds there never reaches a particle.
The per-chunk accumulators that P2G and the G2P adjoint scatter into are summed here in
chunk order and zeroed behind the read, so no pass clears the whole grid.
"""

from __future__ import annotations

import numba
import numpy as np

from ._particle_kernels import Kernel

__all__ = ["box_rows", "grid_update", "project", "project_vjp", "sum_chunks", "grid_update_vjp"]


@numba.njit(cache=True, error_model="numpy")
def box_rows(box, strides):
    """(flat index of the first node of every row along the last axis, row length) of the
    node box lo ≤ cell < hi covering every chunk's box[chunk] = (lo (d,), hi (d,)); also
    returns the covering (lo, hi)."""
    d = box.shape[2]
    lo = box[0, 0].copy()
    hi = box[0, 1].copy()
    for chunk in range(1, box.shape[0]):
        for k in range(d):
            if box[chunk, 0, k] < box[chunk, 1, k]:  # empty chunks have lo = res > hi = 0
                lo[k] = min(lo[k], box[chunk, 0, k])
                hi[k] = max(hi[k], box[chunk, 1, k])
    for k in range(d):
        if hi[k] <= lo[k]:
            lo[:] = 0
            hi[:] = 0
            break
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
    return row_start, hi[d - 1] - lo[d - 1], lo, hi


def _grid_update(acc, gravity, dt, grid_v, grid_v_free, inv_m, row_start, row_length):
    """Sum the chunks' (momentum, mass) in acc (chunks, nodes, d + 1), then velocity plus
    gravity where the mass is positive; zeroes acc behind it."""
    d = grid_v.shape[1]
    zero = inv_m.dtype.type(0.0)
    one = inv_m.dtype.type(1.0)
    for r in numba.prange(row_start.shape[0]):
        for i in range(row_start[r], row_start[r] + row_length):
            m = acc[0, i, d]
            acc[0, i, d] = zero
            for chunk in range(1, acc.shape[0]):
                m += acc[chunk, i, d]
                acc[chunk, i, d] = zero
            inv = one / m if m > 0 else zero
            inv_m[i] = inv
            for a in range(d):
                mv = acc[0, i, a]
                acc[0, i, a] = zero
                for chunk in range(1, acc.shape[0]):
                    mv += acc[chunk, i, a]
                    acc[chunk, i, a] = zero
                vf = mv * inv
                grid_v_free[i, a] = vf
                grid_v[i, a] = vf + dt * gravity[a] if m > 0 else zero


grid_update = Kernel(_grid_update)


@numba.njit(cache=True, error_model="numpy", inline="always")
def _in_box(node_cell, e, lo, hi):
    """Whether boundary entry e's node lies in the node box lo ≤ cell < hi."""
    for k in range(lo.shape[0]):
        if node_cell[e, k] < lo[k] or node_cell[e, k] >= hi[k]:
            return False
    return True


def _project(grid_v, node_index, node_cell, normal, start, kinds, frictions, inputs, lo, hi):
    """Apply the boundary layers in order (see sim_mpm.boundaries), recording each entry's
    input velocity in ``inputs`` for the adjoint."""
    d = grid_v.shape[1]
    zero = grid_v.dtype.type(0.0)
    one = grid_v.dtype.type(1.0)
    for layer in range(kinds.shape[0]):
        kind = kinds[layer]
        mu = frictions[layer]
        for e in numba.prange(start[layer], start[layer + 1]):
            if not _in_box(node_cell, e, lo, hi):
                continue
            i = node_index[e]
            vn = zero
            for a in range(d):
                inputs[e, a] = grid_v[i, a]
                vn += grid_v[i, a] * normal[e, a]
            if kind == 0:
                for a in range(d):
                    grid_v[i, a] = zero
            elif kind == 1 or (kind == 2 and vn < 0):
                for a in range(d):
                    grid_v[i, a] -= vn * normal[e, a]
            elif kind == 3 and vn < 0:
                speed2 = zero
                for a in range(d):
                    vt = grid_v[i, a] - vn * normal[e, a]
                    speed2 += vt * vt
                speed = np.sqrt(speed2)
                safe = speed if speed > 0 else one
                scale = max(zero, one + mu * vn / safe)
                for a in range(d):
                    grid_v[i, a] = (grid_v[i, a] - vn * normal[e, a]) * scale


project = Kernel(_project)


def _project_vjp(g, node_index, node_cell, normal, start, kinds, frictions, inputs, lo, hi):
    """Adjoint of _project, in place on g = ∂L/∂(grid v), layers in reverse order."""
    d = g.shape[1]
    zero = g.dtype.type(0.0)
    one = g.dtype.type(1.0)
    for layer in range(kinds.shape[0] - 1, -1, -1):
        kind = kinds[layer]
        mu = frictions[layer]
        for e in numba.prange(start[layer], start[layer + 1]):
            if not _in_box(node_cell, e, lo, hi):
                continue
            i = node_index[e]
            vn = zero
            gn = zero
            for a in range(d):
                vn += inputs[e, a] * normal[e, a]
                gn += g[i, a] * normal[e, a]
            if kind == 0:
                for a in range(d):
                    g[i, a] = zero
            elif kind == 1 or (kind == 2 and vn < 0):
                for a in range(d):
                    g[i, a] -= gn * normal[e, a]
            elif kind == 3 and vn < 0:
                speed2 = zero
                g_vt = zero
                for a in range(d):
                    vt = inputs[e, a] - vn * normal[e, a]
                    speed2 += vt * vt
                    g_vt += g[i, a] * vt
                speed = np.sqrt(speed2)
                safe = speed if speed > 0 else one
                scale = one + mu * vn / safe
                for a in range(d):
                    if scale > 0:
                        tangent = (inputs[e, a] - vn * normal[e, a]) / safe
                        g[i, a] = (scale * (g[i, a] - gn * normal[e, a])
                                   + mu * g_vt * (normal[e, a] / safe
                                                  - vn * tangent / (safe * safe)))
                    else:
                        g[i, a] = zero


project_vjp = Kernel(_project_vjp)


def _sum_chunks(g_acc, g_grid_v, row_start, row_length):
    """g_grid_v = Σ_chunks g_acc[chunk] over the node box; zeroes g_acc behind it."""
    d = g_grid_v.shape[1]
    zero = g_grid_v.dtype.type(0.0)
    for r in numba.prange(row_start.shape[0]):
        for i in range(row_start[r], row_start[r] + row_length):
            for a in range(d):
                total = g_acc[0, i, a]
                g_acc[0, i, a] = zero
                for chunk in range(1, g_acc.shape[0]):
                    total += g_acc[chunk, i, a]
                    g_acc[chunk, i, a] = zero
                g_grid_v[i, a] = total


sum_chunks = Kernel(_sum_chunks)


def _grid_update_vjp(g_grid_v, grid_v_free, inv_m, g_grid, row_start, row_length):
    """Adjoint of _grid_update over the node box: g_grid (nodes, d + 1) = ∂L/∂(momentum,
    mass) given g_grid_v = ∂L/∂(velocity before the projections)."""
    d = g_grid_v.shape[1]
    zero = inv_m.dtype.type(0.0)
    for r in numba.prange(row_start.shape[0]):
        for i in range(row_start[r], row_start[r] + row_length):
            acc = zero
            for a in range(d):
                g_grid[i, a] = g_grid_v[i, a] * inv_m[i]
                acc += g_grid_v[i, a] * grid_v_free[i, a]
            g_grid[i, d] = -acc * inv_m[i]


grid_update_vjp = Kernel(_grid_update_vjp)
