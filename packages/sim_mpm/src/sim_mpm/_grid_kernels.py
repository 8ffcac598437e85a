"""Grid passes of the numba kernels: momentum to velocity, boundary projections, adjoints.

Each is one loop over the box of nodes the particles' stencils touch (recorded by P2G):
nodes outside it receive no mass, so whatever the buffers hold there never reaches a
particle. The per-chunk accumulators that P2G and the G2P adjoint scatter into are summed
here in chunk order and zeroed behind the read, so no pass clears the whole grid.

The boundary layers (:mod:`sim_mpm.boundaries`) are applied per node, in layer order,
through a table from each node to its boundary entries (``entry_start``, CSR), so the
pass costs the node box and not every wall node of the grid (73k in a 64³ box).

The passes take one named tuple, :class:`Grid`, as a plain tuple (see _particle_kernels),
defined here and not with the particle kernels: numba's cache keys on a kernel's argument
types, not on where their field order is written, so a record unpacked by cached code of
another file could go stale.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from ._particle_kernels import Kernel

__all__ = ["Grid", "box_rows", "boundary_table", "grid_pass", "grid_pass_vjp"]

# inlined into grid_pass / grid_pass_vjp
_inline = numba.njit(cache=True, error_model="numpy", inline="always")


class Grid(NamedTuple):
    """What the grid passes read and write: the model's arrays, then buffers (see
    kernels._Records); d dimensions, e boundary entries, c chunks, model dtype unless noted."""

    strides: np.ndarray  # flat-index stride of each axis, (d,) int64
    gravity: np.ndarray  # [m/s²], (d,)
    entries: np.ndarray  # boundary entries by node (see boundary_table), (e,) int64
    entry_start: np.ndarray  # (nodes + 1,) int64
    normal: np.ndarray  # unit normal per entry, (e, d)
    kind: np.ndarray  # boundaries.BoundaryLayer kind per entry, (e,) int64
    friction: np.ndarray  # μ per entry, (e,)
    acc: np.ndarray  # P2G's (momentum, mass) per chunk, (c, nodes, 4)
    box: np.ndarray  # P2G's node box per chunk, (c, 2, d) int64
    grid_v: np.ndarray  # velocity after the boundaries, (nodes, 4; lanes past d zero)
    grid_v_free: np.ndarray  # momentum / mass, (nodes, d)
    inv_m: np.ndarray  # 1/mass (0 without mass), (nodes,)
    inputs: np.ndarray  # each boundary entry's input velocity, (e, d)
    g_acc: np.ndarray  # the G2P adjoint's ∂L/∂(grid v) per chunk, (c, nodes, 4)
    g_grid_v: np.ndarray  # ∂L/∂(grid v), (nodes, d)
    g_grid: np.ndarray  # ∂L/∂(grid momentum, mass), (nodes, 4; lanes past d + 1 zero)


def boundary_table(node_index: np.ndarray, sizes: list, node_count: int):
    """(entry_start (node_count + 1,), order (entries,)): the boundary entries of node i
    are order[entry_start[i]:entry_start[i + 1]], in layer order.

    node_index: node of each entry, layer after layer; sizes: entries per layer."""
    layer = np.repeat(np.arange(len(sizes)), sizes)
    order = np.lexsort((layer, node_index)).astype(np.int64)
    counts = np.bincount(node_index, minlength=node_count)
    entry_start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return entry_start, order


@numba.njit(cache=True, error_model="numpy")
def box_rows(box, strides):
    """(flat index of the first node of every row along the last axis, row length) of the
    node box lo ≤ cell < hi covering every chunk's box[chunk] = (lo (d,), hi (d,))."""
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
    return row_start, hi[d - 1] - lo[d - 1]


@_inline
def _project_node(grid_v, i, grid):
    """Node i's boundary entries in order (see sim_mpm.boundaries), recording each entry's
    input velocity in grid.inputs for the adjoint."""
    entries, entry_start, normal, kinds, frictions, inputs = (
        grid.entries, grid.entry_start, grid.normal, grid.kind, grid.friction, grid.inputs)
    d = normal.shape[1]
    zero = grid_v.dtype.type(0.0)
    one = grid_v.dtype.type(1.0)
    for j in range(entry_start[i], entry_start[i + 1]):
        e = entries[j]
        kind = kinds[e]
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
            scale = max(zero, one + frictions[e] * vn / safe)
            for a in range(d):
                grid_v[i, a] = (grid_v[i, a] - vn * normal[e, a]) * scale


@_inline
def _project_node_vjp(g, i, grid):
    """Adjoint of :func:`_project_node`, in place on g = ∂L/∂(grid v), entries in reverse."""
    entries, entry_start, normal, kinds, frictions, inputs = (
        grid.entries, grid.entry_start, grid.normal, grid.kind, grid.friction, grid.inputs)
    d = g.shape[1]
    zero = g.dtype.type(0.0)
    one = g.dtype.type(1.0)
    for j in range(entry_start[i + 1] - 1, entry_start[i] - 1, -1):
        e = entries[j]
        kind = kinds[e]
        mu = frictions[e]
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


@_inline
def _sum_chunks(flat, first, last):
    """Add every other chunk's lanes of nodes first ≤ i < last into chunk 0 and zero them
    (flat: (chunks, 4 · nodes)), one contiguous span per chunk."""
    zero = flat.dtype.type(0.0)
    for chunk in range(1, flat.shape[0]):
        for k in range(first * 4, last * 4):
            flat[0, k] += flat[chunk, k]
            flat[chunk, k] = zero


def _grid_pass(grid, dt):
    """The grid part of a step of dt [s] over the node box of every chunk's ``grid.box``:
    sum the chunks' (momentum, mass) in grid.acc and zero it, velocity plus gravity where
    the mass is positive into grid.grid_v (lanes past d untouched), then the node's
    boundary entries. Returns the box rows (row_start, row_length) for the adjoint."""
    grid = Grid(*grid)
    strides, gravity, entry_start, acc, box, grid_v, grid_v_free, inv_m = (
        grid.strides, grid.gravity, grid.entry_start, grid.acc, grid.box, grid.grid_v,
        grid.grid_v_free, grid.inv_m)
    row_start, row_length = box_rows(box, strides)
    d = grid_v_free.shape[1]
    zero = inv_m.dtype.type(0.0)
    one = inv_m.dtype.type(1.0)
    flat = acc.reshape(acc.shape[0], -1)
    for r in numba.prange(row_start.shape[0]):
        first, last = row_start[r], row_start[r] + row_length
        _sum_chunks(flat, first, last)
        for i in range(first, last):
            m = acc[0, i, d]
            acc[0, i, d] = zero
            inv = one / m if m > 0 else zero
            inv_m[i] = inv
            for a in range(d):
                vf = acc[0, i, a] * inv
                acc[0, i, a] = zero
                grid_v_free[i, a] = vf
                grid_v[i, a] = vf + dt * gravity[a] if m > 0 else zero
            if entry_start[i + 1] > entry_start[i]:
                _project_node(grid_v, i, grid)
    return row_start, row_length


grid_pass = Kernel(_grid_pass)


def _grid_pass_vjp(grid, rows):
    """Adjoint of :func:`_grid_pass`: per node of its box ``rows``, the chunks' ∂L/∂(grid v)
    in grid.g_acc summed (zeroing g_acc) into grid.g_grid_v, the boundary adjoints, and
    grid.g_grid (lanes past d + 1 untouched) = ∂L/∂(grid momentum, mass)."""
    grid = Grid(*grid)
    entry_start, grid_v_free, inv_m, g_acc, g_grid_v, g_grid = (
        grid.entry_start, grid.grid_v_free, grid.inv_m, grid.g_acc, grid.g_grid_v, grid.g_grid)
    row_start, row_length = rows
    d = g_grid_v.shape[1]
    zero = inv_m.dtype.type(0.0)
    flat = g_acc.reshape(g_acc.shape[0], -1)
    for r in numba.prange(row_start.shape[0]):
        first, last = row_start[r], row_start[r] + row_length
        _sum_chunks(flat, first, last)
        for i in range(first, last):
            for a in range(d):
                g_grid_v[i, a] = g_acc[0, i, a]
                g_acc[0, i, a] = zero
            if entry_start[i + 1] > entry_start[i]:
                _project_node_vjp(g_grid_v, i, grid)
            dot = zero
            for a in range(d):
                g_grid[i, a] = g_grid_v[i, a] * inv_m[i]
                dot += g_grid_v[i, a] * grid_v_free[i, a]
            g_grid[i, d] = -dot * inv_m[i]


grid_pass_vjp = Kernel(_grid_pass_vjp)
