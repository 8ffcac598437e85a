"""Compiled (numba) recursive Newton-Euler algorithm with forward-mode tangents and
composite-rigid-body algorithm, equal to the NumPy reference in :mod:`sim_rigid.dynamics`
(whose formulas these transcribe) to round-off; and the implicit steps and their adjoints
built on them, one call each (:func:`implicit_step`, :func:`implicit_step_vjp`; the
section at the end of this file).

Dual arrays as in the reference: row 0 a value, rows 1..K its tangents along K directions;
every product of two dual quantities applies the product rule row by row, products with
constants act on every row. Entry points take :class:`NodeArrays` as a plain tuple, and
the parameters that the model's nodes share (joint origins, unit joint axes, centres of
mass) as arrays by joint or link: the joint axes as dual arrays (their tangents carried like
the joint origins'), the centres of mass as plain ones (their gradient comes from the
virtual-power pass, :func:`rnea_parameter_vjp`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

__all__ = ["ARMIJO", "CONVERGED", "Contacts", "Drive", "GAMMA", "NOT_CONVERGED", "NodeArrays",
           "Parameters", "SMALLEST_STEP", "implicit_step", "implicit_step_vjp",
           "implicit_trajectory", "implicit_trajectory_vjp", "link_point_dual", "mass_matrix",
           "rnea", "rnea_parameter_vjp", "shape_distance"]

_REVOLUTE, _PRISMATIC = 0, 1
_PLANE, _BOX, _SPHERE, _CAPSULE, _MESH = 0, 1, 2, 3, 4


class NodeArrays(NamedTuple):
    """A model's elementary nodes (:class:`sim_rigid.dynamics.NodeTable`), N of them."""

    parent: np.ndarray  # (N,) int64, -1 the world
    kind: np.ndarray  # (N,) int64: 0 revolute, 1 prismatic, 2 fixed
    axis: np.ndarray  # (N, 3) constant axes (a free joint's nodes)
    rotation: np.ndarray  # (N, 3, 3) joint frame in the parent node's frame
    origin_joint: np.ndarray  # (N,) int64, -1 none
    link: np.ndarray  # (N,) int64, -1 massless
    coordinate: np.ndarray  # (N,) int64, -1 fixed
    axis_joint: np.ndarray  # (N,) int64: the joint whose axis the node has, -1 constant


class Contacts(NamedTuple):
    """Where the contact points sit and the contact shapes (:mod:`sim_rigid.contact`), c
    points and o shapes; the points' positions, areas and the coefficients are parameters,
    passed as dual arrays."""

    node: np.ndarray  # (c,) int64, the node of each point's link
    link: np.ndarray  # (c,) int64, each point's link
    obstacle_type: np.ndarray  # (o,) int64, index into sim_rigid.model.OBSTACLE_TYPES
    obstacle_center: np.ndarray  # (o, 3) [m], in the world or its link's frame
    obstacle_rotation: np.ndarray  # (o, 3, 3)
    obstacle_half_extents: np.ndarray  # (o, 3) [m]
    obstacle_link: np.ndarray  # (o,) int64, -1 static
    obstacle_node: np.ndarray  # (o,) int64, the node of its link, -1 static
    grid: np.ndarray  # (G,) mesh grids' signed distances [m], flattened
    grid_shape: np.ndarray  # (o, 3) int64
    grid_start: np.ndarray  # (o,) int64
    friction_sharpness: float  # 0: the hard stick-slip switch, else the smooth law's p
    obstacle_bound: np.ndarray  # (o,) [m]: φ > 0 farther than this from a shape's centre


@numba.njit(cache=True)
def _matmul(a, b):
    """a b for small 2-D arrays, in loops: numba's ``@`` calls BLAS, whose call costs more
    than a 3 × 3 or 6 × 6 product."""
    out = np.zeros((a.shape[0], b.shape[1]))
    for i in range(a.shape[0]):
        for k in range(a.shape[1]):
            aik = a[i, k]
            for j in range(b.shape[1]):
                out[i, j] += aik * b[k, j]
    return out


@numba.njit(cache=True)
def _matvec(a, x):
    """a x for a small 2-D array and a vector, in loops (see :func:`_matmul`)."""
    out = np.zeros(a.shape[0])
    for i in range(a.shape[0]):
        total = 0.0
        for k in range(a.shape[1]):
            total += a[i, k] * x[k]
        out[i] = total
    return out


@numba.njit(cache=True)
def _dot(a, b):
    """a · b for vectors, in a loop (see :func:`_matmul`)."""
    total = 0.0
    for k in range(a.shape[0]):
        total += a[k] * b[k]
    return total


@numba.njit(cache=True)
def _add(out, x):
    """out += x for (R, 3) arrays, in a loop: ``array[i] += x`` on a view would first copy
    x (numba guards the overlap), an allocation per call."""
    for k in range(out.shape[0]):
        for i in range(3):
            out[k, i] += x[k, i]


@numba.njit(cache=True)
def _subtract(out, x):
    """out -= x for (R, 3) arrays, in a loop (see :func:`_add`)."""
    for k in range(out.shape[0]):
        for i in range(3):
            out[k, i] -= x[k, i]


@numba.njit(cache=True)
def _cross(a, b, out):
    """out = a × b for dual (R, 3) arrays."""
    rows = a.shape[0]
    for k in range(rows):
        a0, b0 = a[0], b[k]
        x = a0[1] * b0[2] - a0[2] * b0[1]
        y = a0[2] * b0[0] - a0[0] * b0[2]
        z = a0[0] * b0[1] - a0[1] * b0[0]
        if k > 0:
            ak, bz = a[k], b[0]
            x += ak[1] * bz[2] - ak[2] * bz[1]
            y += ak[2] * bz[0] - ak[0] * bz[2]
            z += ak[0] * bz[1] - ak[1] * bz[0]
        out[k, 0], out[k, 1], out[k, 2] = x, y, z


@numba.njit(cache=True, inline="always")
def _rotate_at(rotation, rn, x, xn, transpose, rows, out, on):
    """out[on] = R x (or Rᵀ x) of the dual rotation R = rotation[rn] (rows, 3, 3) and the
    dual vector x[xn] (rows, 3): :func:`_rotate` on whole arrays by index, inlined, for the
    recursion's loops (a view per call costs its reference count more than the product)."""
    for k in range(rows):
        for i in range(3):
            total = 0.0
            for j in range(3):
                r0 = rotation[rn, 0, j, i] if transpose else rotation[rn, 0, i, j]
                total += r0 * x[xn, k, j]
                if k > 0:
                    rk = rotation[rn, k, j, i] if transpose else rotation[rn, k, i, j]
                    total += rk * x[xn, 0, j]
            out[on, k, i] = total


@numba.njit(cache=True, inline="always")
def _cross_at(a, an, b, bn, rows, out, on):
    """out[on] = a[an] × b[bn] for dual (rows, 3) vectors: :func:`_cross` by index (see
    :func:`_rotate_at`)."""
    for k in range(rows):
        x = a[an, 0, 1] * b[bn, k, 2] - a[an, 0, 2] * b[bn, k, 1]
        y = a[an, 0, 2] * b[bn, k, 0] - a[an, 0, 0] * b[bn, k, 2]
        z = a[an, 0, 0] * b[bn, k, 1] - a[an, 0, 1] * b[bn, k, 0]
        if k > 0:
            x += a[an, k, 1] * b[bn, 0, 2] - a[an, k, 2] * b[bn, 0, 1]
            y += a[an, k, 2] * b[bn, 0, 0] - a[an, k, 0] * b[bn, 0, 2]
            z += a[an, k, 0] * b[bn, 0, 1] - a[an, k, 1] * b[bn, 0, 0]
        out[on, k, 0], out[on, k, 1], out[on, k, 2] = x, y, z


@numba.njit(cache=True, inline="always")
def _add_at(out, on, x, xn, rows):
    """out[on] += x[xn] for dual (rows, 3) vectors, by index (see :func:`_rotate_at`)."""
    for k in range(rows):
        for i in range(3):
            out[on, k, i] += x[xn, k, i]


@numba.njit(cache=True)
def _rotate(rotation, x, transpose, out):
    """out = R x (or Rᵀ x) for dual rotations (R, 3, 3) and dual vectors (R, 3); a rotation
    of one row is constant (zero tangents)."""
    rows = x.shape[0]
    varies = rotation.shape[0] > 1
    for k in range(rows):
        for i in range(3):
            total = 0.0
            for j in range(3):
                r0 = rotation[0, j, i] if transpose else rotation[0, i, j]
                total += r0 * x[k, j]
                if k > 0 and varies:
                    rk = rotation[k, j, i] if transpose else rotation[k, i, j]
                    total += rk * x[0, j]
            out[k, i] = total


@numba.njit(cache=True)
def _scale(s, x, out):
    """out = s x for a dual scalar (R,) and a dual vector (R, 3); a scalar of one row is
    constant (zero tangents)."""
    varies = s.shape[0] > 1
    for k in range(x.shape[0]):
        for i in range(3):
            out[k, i] = s[0] * x[k, i] + (s[k] * x[0, i] if k > 0 and varies else 0.0)


@numba.njit(cache=True, inline="always")
def _skew_entry(a0, a1, a2, i, j):
    """Entry (i, j) of [a]×, the cross-product matrix of a = (a0, a1, a2)."""
    if i == j:
        return 0.0
    if i == 0:
        return -a2 if j == 1 else a1
    if i == 1:
        return a2 if j == 0 else -a0
    return -a1 if j == 0 else a0


@numba.njit(cache=True, inline="always")
def _skew_squared_entry(a0, a1, a2, i, j):
    """Entry (i, j) of [a]×² = a aᵀ - |a|² I, a = (a0, a1, a2)."""
    ai = a0 if i == 0 else (a1 if i == 1 else a2)
    aj = a0 if j == 0 else (a1 if j == 1 else a2)
    return ai * aj - (a0 * a0 + a1 * a1 + a2 * a2 if i == j else 0.0)


@numba.njit(cache=True, inline="always")
def _node_axes(nodes, axis, out):
    """Every node's dual unit axis into ``out`` (N, R, 3): its joint's first R rows of the
    dual joint axes ``axis`` (R or more, n, 3), or its constant axis with zero tangents."""
    constant, joints = nodes[2], nodes[7]
    for node in range(out.shape[0]):
        joint = joints[node]
        for k in range(out.shape[1]):
            for i in range(3):
                if joint >= 0:
                    out[node, k, i] = axis[k, joint, i]
                else:
                    out[node, k, i] = constant[node, i] if k == 0 else 0.0


@numba.njit(cache=True, inline="always")
def _axis_turn(d0, d1, d2, a0, a1, a2, sin, cos, i, j):
    """Entry (i, j) of sin δK + (1 - cos)(δK K + K δK), K = [a]×, δK = [δ]×: the joint
    turn's tangent along a tangent δ = (d0, d1, d2) of its unit axis a = (a0, a1, a2)."""
    total = sin * _skew_entry(d0, d1, d2, i, j)
    for m in range(3):
        total += (1.0 - cos) * (_skew_entry(d0, d1, d2, i, m) * _skew_entry(a0, a1, a2, m, j)
                                + _skew_entry(a0, a1, a2, i, m) * _skew_entry(d0, d1, d2, m, j))
    return total


@numba.njit(cache=True, inline="always")
def _placements(nodes, origin, node_axis, q, rotation, offset):
    """Every node's dual rotation to its parent's frame into ``rotation`` (N, R, 3, 3) and
    dual origin into ``offset`` (N, R, 3), from dual joint origins (R or more, n, 3), the
    nodes' dual unit axes (N, R, 3) (:func:`_node_axes`) and dual coordinates (R, d)."""
    kind, base, origin_joint, coordinate, axis_joint = (nodes[1], nodes[3], nodes[4],
                                                        nodes[6], nodes[7])
    rows = q.shape[0]
    for node in range(kind.shape[0]):
        joint = origin_joint[node]
        for k in range(rows):
            for i in range(3):
                offset[node, k, i] = origin[k, joint, i] if joint >= 0 else 0.0
                for j in range(3):
                    rotation[node, k, i, j] = base[node, i, j] if k == 0 else 0.0
        c = coordinate[node]
        a0, a1, a2 = node_axis[node, 0, 0], node_axis[node, 0, 1], node_axis[node, 0, 2]
        if kind[node] == _REVOLUTE:
            angle = q[0, c]
            sin, cos = math.sin(angle), math.cos(angle)
            # value = base (I + sin K + (1 - cos) K²), K = [a]×; its derivative value K
            for i in range(3):
                for j in range(3):
                    total = 0.0
                    for m in range(3):
                        turn = ((1.0 if m == j else 0.0) + sin * _skew_entry(a0, a1, a2, m, j)
                                + (1.0 - cos) * _skew_squared_entry(a0, a1, a2, m, j))
                        total += base[node, i, m] * turn
                    rotation[node, 0, i, j] = total
            for i in range(3):
                for j in range(3):
                    derivative = 0.0
                    for m in range(3):
                        derivative += rotation[node, 0, i, m] * _skew_entry(a0, a1, a2, m, j)
                    for k in range(1, rows):
                        rotation[node, k, i, j] = q[k, c] * derivative
            if axis_joint[node] >= 0:  # along the axis: base (sin δK + (1 - cos)(δK K + K δK))
                for k in range(1, rows):
                    d0, d1, d2 = node_axis[node, k, 0], node_axis[node, k, 1], node_axis[node, k, 2]
                    if d0 == 0.0 and d1 == 0.0 and d2 == 0.0:
                        continue
                    for i in range(3):
                        for j in range(3):
                            total = 0.0
                            for m in range(3):
                                total += base[node, i, m] * _axis_turn(d0, d1, d2, a0, a1, a2,
                                                                       sin, cos, m, j)
                            rotation[node, k, i, j] += total
        elif kind[node] == _PRISMATIC:
            for i in range(3):
                direction = base[node, i, 0] * a0 + base[node, i, 1] * a1 + base[node, i, 2] * a2
                for k in range(rows):
                    offset[node, k, i] += q[k, c] * direction
            if axis_joint[node] >= 0:  # along the axis: q base δa
                for k in range(1, rows):
                    for i in range(3):
                        offset[node, k, i] += q[0, c] * (base[node, i, 0] * node_axis[node, k, 0]
                                                         + base[node, i, 1] * node_axis[node, k, 1]
                                                         + base[node, i, 2] * node_axis[node, k, 2])


@numba.njit(cache=True)
def _round(offset, radius, free):
    """φ = |offset| - radius with gradient and Hessian (the reference's ``sdf._round``)."""
    length = np.sqrt(np.sum(offset ** 2))
    gradient = np.zeros(3)
    hessian = np.zeros((3, 3))
    if length == 0.0:
        gradient[2] = 1.0
        return -radius, gradient, hessian
    gradient[:] = offset / length
    for i in range(3):
        for j in range(3):
            hessian[i, j] = ((free[i] if i == j else 0.0) - gradient[i] * gradient[j]) / length
    return length - radius, gradient, hessian


@numba.njit(cache=True)
def _trilinear(grid, shape, start, half, z):
    """The reference's ``sdf._trilinear`` on a flattened grid."""
    gradient = np.zeros(3)
    hessian = np.zeros((3, 3))
    spacing = np.zeros(3)
    t = np.zeros(3)
    cell = np.zeros(3, dtype=np.int64)
    outside = 0.0
    for a in range(3):
        spacing[a] = 2.0 * half[a] / (shape[a] - 1)
        clamped = min(max(z[a], -half[a]), half[a])
        outside += (z[a] - clamped) ** 2
        position = (clamped + half[a]) / spacing[a]
        cell[a] = min(int(np.floor(position)), shape[a] - 2)
        t[a] = position - cell[a]
    value = 0.0
    for i in range(2):
        wx, sx = (t[0] if i else 1.0 - t[0]), (1.0 if i else -1.0) / spacing[0]
        for j in range(2):
            wy, sy = (t[1] if j else 1.0 - t[1]), (1.0 if j else -1.0) / spacing[1]
            for k in range(2):
                wz, sz = (t[2] if k else 1.0 - t[2]), (1.0 if k else -1.0) / spacing[2]
                c = grid[start + ((cell[0] + i) * shape[1] + cell[1] + j) * shape[2]
                         + cell[2] + k]
                value += c * wx * wy * wz
                gradient[0] += c * sx * wy * wz
                gradient[1] += c * wx * sy * wz
                gradient[2] += c * wx * wy * sz
                hessian[0, 1] += c * sx * sy * wz
                hessian[0, 2] += c * sx * wy * sz
                hessian[1, 2] += c * wx * sy * sz
    if outside > 0.0:
        return value + np.sqrt(outside), np.zeros(3), np.zeros((3, 3))
    hessian[1, 0], hessian[2, 0], hessian[2, 1] = hessian[0, 1], hessian[0, 2], hessian[1, 2]
    return value, gradient, hessian


@numba.njit(cache=True)
def shape_distance(kind, half, grid, shape, start, z):
    """(φ, ∇φ, ∇²φ) of a shape at its frame's point z (the reference's
    ``sdf.shape_distance``; ``grid`` flattened, the mesh's from ``start`` in ``shape``)."""
    gradient = np.zeros(3)
    if kind == _PLANE:
        gradient[2] = 1.0
        return z[2], gradient, np.zeros((3, 3))
    if kind == _BOX:
        excess = np.abs(z) - half
        if np.all(excess <= 0.0):  # on the surface too: a face's normal, not 0/0
            axis = np.argmax(excess)
            gradient[axis] = -1.0 if z[axis] < 0.0 else 1.0
            return excess[axis], gradient, np.zeros((3, 3))
        offset = np.zeros(3)
        free = np.zeros(3)
        for a in range(3):
            if excess[a] > 0.0:
                offset[a] = -excess[a] if z[a] < 0.0 else excess[a]
                free[a] = 1.0
        return _round(offset, 0.0, free)
    if kind == _SPHERE:
        return _round(z.copy(), half[0], np.ones(3))
    if kind == _CAPSULE:
        length = half[2] - half[0]
        offset = z.copy()
        offset[2] -= min(max(z[2], -length), length)
        free = np.ones(3)
        if abs(z[2]) < length:
            free[2] = 0.0
        return _round(offset, half[0], free)
    return _trilinear(grid, shape, start, half, z)


@numba.njit(cache=True)
def _grid_axis(z, half, count):
    """One axis of :func:`_trilinear`'s lookup: (the cell, the fraction t across it, the
    squared distance outside the grid)."""
    spacing = 2.0 * half / (count - 1)
    clamped = min(max(z, -half), half)
    position = (clamped + half) / spacing
    cell = min(int(np.floor(position)), count - 2)
    return cell, position - cell, (z - clamped) ** 2


@numba.njit(cache=True)
def _shape_value(kind, half, grid, shape, start, z0, z1, z2):
    """φ alone of :func:`shape_distance` at the shape's point (z0, z1, z2), in scalars (no
    gradient, no arrays): the test whether a pair touches at all, before any dual rows."""
    if kind == _PLANE:
        return z2
    if kind == _BOX:
        e0, e1, e2 = abs(z0) - half[0], abs(z1) - half[1], abs(z2) - half[2]
        if e0 <= 0.0 and e1 <= 0.0 and e2 <= 0.0:
            return max(e0, e1, e2)
        return np.sqrt(max(e0, 0.0) ** 2 + max(e1, 0.0) ** 2 + max(e2, 0.0) ** 2)
    if kind == _SPHERE:
        return np.sqrt(z0 ** 2 + z1 ** 2 + z2 ** 2) - half[0]
    if kind == _CAPSULE:
        length = half[2] - half[0]
        along = z2 - min(max(z2, -length), length)
        return np.sqrt(z0 ** 2 + z1 ** 2 + along ** 2) - half[0]
    c0, t0, o0 = _grid_axis(z0, half[0], shape[0])
    c1, t1, o1 = _grid_axis(z1, half[1], shape[1])
    c2, t2, o2 = _grid_axis(z2, half[2], shape[2])
    value = 0.0
    for i in range(2):
        for j in range(2):
            for k in range(2):
                weight = ((t0 if i else 1.0 - t0) * (t1 if j else 1.0 - t1)
                          * (t2 if k else 1.0 - t2))
                value += grid[start + ((c0 + i) * shape[1] + c1 + j) * shape[2] + c2 + k] * weight
    outside = o0 + o1 + o2
    return value + np.sqrt(outside) if outside > 0.0 else value


@numba.njit(cache=True)
def _times(a, b):
    """a b for dual scalars (R,)."""
    out = a[0] * b
    out[1:] += a[1:] * b[0]
    return out


@numba.njit(cache=True)
def _quotient(a, b):
    """a / b for dual scalars (R,)."""
    out = a / b[0]
    out[1:] -= a[0] * b[1:] / b[0] ** 2
    return out


@numba.njit(cache=True)
def _power(a, exponent):
    """a^exponent for a dual scalar (R,) (the reference's ``_power``)."""
    out = np.zeros_like(a)
    if a[0] > 0.0 or exponent == 1.0:
        out[:] = exponent * a[0] ** (exponent - 1.0) * a
    out[0] = a[0] ** exponent
    return out


@numba.njit(cache=True)
def _smooth_friction(kt, limit, slip, sharpness, out):
    """out = -kt v_t (1 + r^p)^(-1/p) (the reference's ``smooth_friction``, negated: the
    caller subtracts it)."""
    rows = slip.shape[0]
    speed_squared = _matvec(slip, slip[0])
    for k in range(1, rows):
        speed_squared[k] += _dot(slip[0], slip[k])
    ratio_squared = _quotient(_times(_times(kt, kt), speed_squared), _times(limit, limit))
    base = _power(ratio_squared, sharpness / 2.0)
    base[0] += 1.0
    _scale(_times(kt, _power(base, -1.0 / sharpness)), slip, out)


@numba.njit(cache=True)
def _may_touch(contacts, obstacle, point, link_rotation, link_origin, moving):
    """False where the point (3,) surely does not touch the shape, by a test that costs less
    than :func:`_pair_force`'s call: outside the shape's bounding sphere (``obstacle_bound``
    about its centre; the shape's link at ``link_rotation`` (3, 3), ``link_origin`` (3,)
    when ``moving``), or above a static plane (its φ, as ``_pair_force`` computes it)."""
    center = contacts[3][obstacle]
    if contacts[2][obstacle] == _PLANE and not moving:
        normal = contacts[4][obstacle]
        return (normal[0, 2] * (point[0] - center[0]) + normal[1, 2] * (point[1] - center[1])
                + normal[2, 2] * (point[2] - center[2])) < 0.0
    bound = contacts[12][obstacle]
    gap = 0.0
    for i in range(3):
        centre = center[i]
        if moving:
            centre = link_origin[i] + (link_rotation[i, 0] * center[0]
                                       + link_rotation[i, 1] * center[1]
                                       + link_rotation[i, 2] * center[2])
        gap += (point[i] - centre) ** 2
    return gap <= bound * bound


@numba.njit(cache=True)
def _pair_force(contacts, obstacle, coefficients, area, x, xdot, link_rotation, link_origin,
                omega, velocity, moving, out):
    """The dual world force (R, 3) of one obstacle on a contact point into ``out``; False
    where they do not touch (the reference's ``pair_force``; ``moving`` False: a static
    obstacle, the link arrays unused)."""
    kinds, centers, rotations, halves = contacts[2], contacts[3], contacts[4], contacts[5]
    grid, grid_shape, grid_start = contacts[8], contacts[9], contacts[10]
    rows = x.shape[0]
    # the value row alone first: most pairs do not touch, and need no tangent rows
    shape_centre = centers[obstacle]
    centre = np.empty(3)  # the shape's centre in the world
    for i in range(3):
        centre[i] = shape_centre[i]
        if moving:
            centre[i] = link_origin[0, i] + (link_rotation[0, i, 0] * shape_centre[0]
                                             + link_rotation[0, i, 1] * shape_centre[1]
                                             + link_rotation[0, i, 2] * shape_centre[2])
    o0, o1, o2 = x[0, 0] - centre[0], x[0, 1] - centre[1], x[0, 2] - centre[2]
    turn = _matmul(link_rotation[0], rotations[obstacle]) if moving else rotations[obstacle]
    z0 = turn[0, 0] * o0 + turn[1, 0] * o1 + turn[2, 0] * o2
    z1 = turn[0, 1] * o0 + turn[1, 1] * o1 + turn[2, 1] * o2
    z2 = turn[0, 2] * o0 + turn[1, 2] * o1 + turn[2, 2] * o2
    if _shape_value(kinds[obstacle], halves[obstacle], grid, grid_shape[obstacle],
                    grid_start[obstacle], z0, z1, z2) >= 0.0:
        return False
    rotation = np.zeros((rows, 3, 3))
    origin = np.zeros((rows, 3))
    rotation[0], origin[0] = turn, centre
    if moving:
        for k in range(1, rows):
            rotation[k] = _matmul(link_rotation[k], rotations[obstacle])
            origin[k] = link_origin[k] + _matvec(link_rotation[k], centers[obstacle])
    local = np.zeros((rows, 3))
    _rotate(rotation, x - origin, True, local)
    distance, gradient, hessian = shape_distance(kinds[obstacle], halves[obstacle], grid,
                                                 grid_shape[obstacle], grid_start[obstacle],
                                                 local[0])
    if distance >= 0.0:
        return False
    kn, kd = coefficients[:, 0].copy(), coefficients[:, 1].copy()
    mu, kt = coefficients[:, 2].copy(), coefficients[:, 3].copy()
    norm = np.sqrt(np.sum(gradient ** 2))
    local_normal = np.zeros((rows, 3))
    local_normal[0] = gradient / norm
    bend = _matmul(np.eye(3) - np.outer(local_normal[0], local_normal[0]), hessian) / norm
    depth = np.zeros(rows)
    depth[0] = -distance
    for k in range(1, rows):
        local_normal[k] = _matvec(bend, local[k])
        depth[k] = -_dot(local[k], gradient)
    normal = np.zeros((rows, 3))
    _rotate(rotation, local_normal, False, normal)
    relative = xdot.copy()
    if moving:
        spin = np.zeros((rows, 3))
        _cross(omega, x - link_origin, spin)
        relative -= velocity + spin
    approach = _matvec(relative, normal[0])
    for k in range(1, rows):
        approach[k] += _dot(relative[0], normal[k])
    normal_force = _times(kn, depth) - _times(_times(kd, depth), approach)
    if normal_force[0] <= 0.0:
        return False
    along = np.zeros((rows, 3))
    _scale(approach, normal, along)
    slip = relative - along
    speed = np.sqrt(np.sum(slip[0] ** 2))
    friction = np.empty_like(slip)
    sharpness = contacts[11]
    if sharpness > 0.0 and mu[0] > 0.0:
        _smooth_friction(kt, _times(mu, normal_force), slip, sharpness, friction)
    elif kt[0] * speed <= mu[0] * normal_force[0]:
        _scale(kt, slip, friction)
    else:
        direction = np.empty_like(slip)
        direction[0] = slip[0] / speed
        for k in range(1, rows):
            direction[k] = (slip[k] - _dot(slip[k], direction[0]) * direction[0]) / speed
        _scale(_times(mu, normal_force), direction, friction)
    _scale(normal_force, normal, along)
    _scale(area, along - friction, out)
    return True


@numba.njit(cache=True)
def _world_frames(parent, rotation, offset):
    """Every node's dual world rotation (N, R, 3, 3) and origin (N, R, 3) from the dual
    placements in its parent's frame (``_placement``'s, per node)."""
    count, rows = parent.shape[0], rotation.shape[1]
    world_rotation = np.zeros((count, rows, 3, 3))
    world_origin = np.zeros((count, rows, 3))
    for node in range(count):
        p = parent[node]
        if p < 0:
            world_rotation[node] = rotation[node]
            world_origin[node] = offset[node]
            continue
        for k in range(rows):  # the product rule, each product summed as _matmul's
            for i in range(3):
                for j in range(3):
                    total = 0.0
                    for m in range(3):
                        total += world_rotation[p, 0, i, m] * rotation[node, k, m, j]
                    if k > 0:
                        other = 0.0
                        for m in range(3):
                            other += world_rotation[p, k, i, m] * rotation[node, 0, m, j]
                        total += other
                    world_rotation[node, k, i, j] = total
        _rotate(world_rotation[p], offset[node], False, world_origin[node])
        _add(world_origin[node], world_origin[p])
    return world_rotation, world_origin


@numba.njit(cache=True)
def _apply_contacts(nodes, contacts, points, coefficients, area, rotation, offset, w, v,
                    torque, force):
    """Subtract each contact point's force from its node's body force and add the reaction
    to the obstacle's link; dual points (R or more, c, 3), coefficients (R or more, 4),
    areas (R or more, c), R the placements' rows (the reference's ``_apply_contacts``)."""
    count, rows = nodes[0].shape[0], rotation.shape[1]
    world_rotation, world_origin = _world_frames(nodes[0], rotation, offset)
    world_w = np.zeros((count, rows, 3))
    world_v = np.zeros((count, rows, 3))
    for node in range(count):
        _rotate(world_rotation[node], w[node], False, world_w[node])
        _rotate(world_rotation[node], v[node], False, world_v[node])
    x = np.zeros((rows, 3))
    xdot = np.zeros((rows, 3))
    spin = np.zeros((rows, 3))
    world_force = np.zeros((rows, 3))
    body = np.zeros((rows, 3))
    lever = np.zeros((rows, 3))
    arm = np.zeros((rows, 3))
    point = np.zeros((rows, 3))
    point_area = np.zeros(rows)
    # the parameters' first R rows (they may have more: a line search's one-row pass)
    coefficient_rows = np.zeros((rows, 4))
    for k in range(rows):
        for j in range(4):
            coefficient_rows[k, j] = coefficients[k, j]
    contact_node, contact_link = contacts[0], contacts[1]
    obstacle_link, obstacle_node = contacts[6], contacts[7]
    for index in range(contact_node.shape[0]):
        node = contact_node[index]
        for k in range(rows):
            point_area[k] = area[k, index]
            for i in range(3):
                point[k, i] = points[k, index, i]
        _rotate(world_rotation[node], point, False, x)
        _add(x, world_origin[node])
        _cross(w[node], point, spin)
        _add(spin, v[node])
        _rotate(world_rotation[node], spin, False, xdot)
        for obstacle in range(obstacle_link.shape[0]):
            if obstacle_link[obstacle] == contact_link[index]:
                continue
            other = obstacle_node[obstacle]
            moving = other >= 0
            frame = max(other, 0)
            if not _may_touch(contacts, obstacle, x[0], world_rotation[frame, 0],
                              world_origin[frame, 0], moving):
                continue
            if not _pair_force(contacts, obstacle, coefficient_rows, point_area, x, xdot,
                               world_rotation[frame], world_origin[frame], world_w[frame],
                               world_v[frame], moving, world_force):
                continue
            _rotate(world_rotation[node], world_force, True, body)
            _subtract(force[node], body)
            _cross(point, body, lever)
            _subtract(torque[node], lever)
            if moving:
                _rotate(world_rotation[other], world_force, True, body)
                for k in range(rows):  # spin: x - o of the shape's link
                    for i in range(3):
                        spin[k, i] = x[k, i] - world_origin[other, k, i]
                _rotate(world_rotation[other], spin, True, arm)
                _add(force[other], body)
                _cross(arm, body, lever)
                _add(torque[other], lever)


@numba.njit(cache=True, inline="always")
def _motion(nodes, q, qd, qdd, origin, node_axis, gravity, rotation, offset, w, v, dw, dv,
            scratch):
    """Every node's dual placement in its parent's frame into ``rotation`` (N, R, 3, 3) and
    ``offset`` (N, R, 3), and its spatial velocity and acceleration in its own frame into
    ω, v, α, a (``w``, ``v``, ``dw``, ``dv``, each (N, R, 3); the base accelerates at
    -gravity): the forward pass of the recursive Newton-Euler algorithm on dual
    coordinates, rates, accelerations (R, d), joint origins (R or more, n, 3) and the nodes'
    unit axes (N, R, 3) (:func:`_node_axes`); ``scratch`` (2 or more, R, 3)."""
    parent, kind, coordinate = nodes[0], nodes[1], nodes[6]
    count, rows = parent.shape[0], q.shape[0]
    _placements(nodes, origin, node_axis, q, rotation, offset)
    tmp, s_motion = 0, 1  # scratch rows
    for node in range(count):
        p = parent[node]
        if p < 0:  # the world: at rest, accelerating at -gravity
            for k in range(rows):
                for i in range(3):
                    w[node, k, i], v[node, k, i], dw[node, k, i] = 0.0, 0.0, 0.0
                    scratch[tmp, k, i] = -gravity[i] if k == 0 else 0.0
            _rotate_at(rotation, node, scratch, tmp, True, rows, dv, node)
        else:
            # ω = Rᵀ ω_p + s_ω q̇
            _rotate_at(rotation, node, w, p, True, rows, w, node)
            # v = Rᵀ (v_p + ω_p × t) + s_v q̇
            _cross_at(w, p, offset, node, rows, scratch, tmp)
            _add_at(scratch, tmp, v, p, rows)
            _rotate_at(rotation, node, scratch, tmp, True, rows, v, node)
            # α = Rᵀ α_p + s_ω q̈ + ω × s_ω q̇ ; a = Rᵀ (a_p + α_p × t) + s_v q̈ + ω × s_v q̇
            # + v × s_ω q̇
            _rotate_at(rotation, node, dw, p, True, rows, dw, node)
            _cross_at(dw, p, offset, node, rows, scratch, tmp)
            _add_at(scratch, tmp, dv, p, rows)
            _rotate_at(rotation, node, scratch, tmp, True, rows, dv, node)
        c = coordinate[node]
        if c >= 0:
            # s q̇ and s q̈ by the product rule (the axis has tangents of its own)
            for k in range(rows):
                for i in range(3):
                    scratch[s_motion, k, i] = qd[k, c] * node_axis[node, 0, i]
                    scratch[tmp, k, i] = qdd[k, c] * node_axis[node, 0, i]
                    if k > 0:
                        scratch[s_motion, k, i] += qd[0, c] * node_axis[node, k, i]
                        scratch[tmp, k, i] += qdd[0, c] * node_axis[node, k, i]
            if kind[node] == _REVOLUTE:
                _add_at(w, node, scratch, s_motion, rows)
                _add_at(dw, node, scratch, tmp, rows)
                _cross_at(w, node, scratch, s_motion, rows, scratch, tmp)
                _add_at(dw, node, scratch, tmp, rows)
                _cross_at(v, node, scratch, s_motion, rows, scratch, tmp)
                _add_at(dv, node, scratch, tmp, rows)
            elif kind[node] == _PRISMATIC:
                _add_at(v, node, scratch, s_motion, rows)
                _add_at(dv, node, scratch, tmp, rows)
                _cross_at(w, node, scratch, s_motion, rows, scratch, tmp)
                _add_at(dv, node, scratch, tmp, rows)


@numba.njit(cache=True)
def _rnea_work(count, rows):
    """Scratch for one :func:`_rnea_into` pass of ``rows`` dual rows on ``count`` nodes:
    the placements' rotations (N, R, 3, 3); their origins, the nodes' unit axes, ω, v, α, a,
    the body torques and forces (8, N, R, 3); five temporaries (5, R, 3)."""
    return (np.zeros((count, rows, 3, 3)), np.zeros((8, count, rows, 3)),
            np.zeros((5, rows, 3)))


@numba.njit(cache=True, inline="always")
def _body_momentum(mass, body, centre, w, v, node, rows, scratch, rate, out):
    """out = m (v + ω × c) (or its rate m (a + α × c), given a and α as ``v`` and ``w``)
    of the link ``body`` at node ``node`` into scratch row ``out``, by index (dual masses
    (R or 1, n); a mass of one row is constant), scratch row ``rate`` the temporary."""
    cx, cy, cz = centre[0], centre[1], centre[2]
    for k in range(rows):
        scratch[rate, k, 0] = (w[node, k, 1] * cz - w[node, k, 2] * cy) + v[node, k, 0]
        scratch[rate, k, 1] = (w[node, k, 2] * cx - w[node, k, 0] * cz) + v[node, k, 1]
        scratch[rate, k, 2] = (w[node, k, 0] * cy - w[node, k, 1] * cx) + v[node, k, 2]
    varies = mass.shape[0] > 1
    for k in range(rows):
        for i in range(3):
            scratch[out, k, i] = mass[0, body] * scratch[rate, k, i] + (
                mass[k, body] * scratch[rate, 0, i] if k > 0 and varies else 0.0)


@numba.njit(cache=True, inline="always")
def _inertia_times(inertia, body, x, xn, rows, out, on):
    """out[on] = I x[xn] for the dual inertia of link ``body`` (inertias (R or 1, n, 3, 3);
    one row: constant), by index (:func:`_rotate` of ``inertia[:, body]``)."""
    varies = inertia.shape[0] > 1
    for k in range(rows):
        for i in range(3):
            total = 0.0
            for j in range(3):
                total += inertia[0, body, i, j] * x[xn, k, j]
                if k > 0 and varies:
                    total += inertia[k, body, i, j] * x[xn, 0, j]
            out[on, k, i] = total


@numba.njit(cache=True, inline="always")
def _rnea_into(nodes, contacts, q, qd, qdd, mass, com, inertia, origin, axis, points, area,
               coefficients, gravity, work, tau):
    """:func:`rnea` into ``tau`` (R, d), in the scratch ``work`` (:func:`_rnea_work` of R
    rows); the dual parameters may have more rows than R (the first R are used)."""
    parent, kind, link, coordinate = nodes[0], nodes[1], nodes[5], nodes[6]
    count, rows = parent.shape[0], q.shape[0]
    rotation, vectors, scratch = work
    offset, node_axis, w, v, dw, dv, torque, force = (vectors[0], vectors[1], vectors[2],
                                                      vectors[3], vectors[4], vectors[5],
                                                      vectors[6], vectors[7])
    _node_axes(nodes, axis, node_axis)
    _motion(nodes, q, qd, qdd, origin, node_axis, gravity, rotation, offset, w, v, dw, dv,
            scratch)
    tmp, tmp2, p_dot, momentum, angular = 0, 1, 2, 3, 4  # scratch rows
    torque[:] = 0.0
    force[:] = 0.0
    for node in range(count):
        body = link[node]
        if body < 0:
            continue
        centre = com[body]
        cx, cy, cz = centre[0], centre[1], centre[2]
        # p = m (v + ω × c), ṗ = m (a + α × c)
        _body_momentum(mass, body, centre, dw, dv, node, rows, scratch, tmp, p_dot)
        _body_momentum(mass, body, centre, w, v, node, rows, scratch, tmp, momentum)
        # n = I α + c × ṗ + ω × (I ω + c × p) + v × p ; f = ṗ + ω × p
        _inertia_times(inertia, body, dw, node, rows, torque, node)
        for k in range(rows):
            px, py, pz = scratch[p_dot, k, 0], scratch[p_dot, k, 1], scratch[p_dot, k, 2]
            torque[node, k, 0] += cy * pz - cz * py
            torque[node, k, 1] += cz * px - cx * pz
            torque[node, k, 2] += cx * py - cy * px
        _inertia_times(inertia, body, w, node, rows, scratch, angular)
        for k in range(rows):
            px, py, pz = scratch[momentum, k, 0], scratch[momentum, k, 1], scratch[momentum, k, 2]
            scratch[angular, k, 0] += cy * pz - cz * py
            scratch[angular, k, 1] += cz * px - cx * pz
            scratch[angular, k, 2] += cx * py - cy * px
        _cross_at(w, node, scratch, angular, rows, scratch, tmp)
        _add_at(torque, node, scratch, tmp, rows)
        _cross_at(v, node, scratch, momentum, rows, scratch, tmp)
        _add_at(torque, node, scratch, tmp, rows)
        _cross_at(w, node, scratch, momentum, rows, scratch, tmp)
        for k in range(rows):
            for i in range(3):
                force[node, k, i] = scratch[p_dot, k, i] + scratch[tmp, k, i]
    if contacts[0].shape[0] and contacts[2].shape[0]:  # points and shapes
        _apply_contacts(nodes, contacts, points, coefficients, area, rotation, offset, w, v,
                        torque, force)
    tau[:] = 0.0
    for node in range(count - 1, -1, -1):
        c = coordinate[node]
        if c >= 0:
            source = torque if kind[node] == _REVOLUTE else force
            for k in range(rows):
                tau[k, c] = (source[node, k, 0] * node_axis[node, 0, 0]
                             + source[node, k, 1] * node_axis[node, 0, 1]
                             + source[node, k, 2] * node_axis[node, 0, 2])
                if k > 0:
                    tau[k, c] += (source[node, 0, 0] * node_axis[node, k, 0]
                                  + source[node, 0, 1] * node_axis[node, k, 1]
                                  + source[node, 0, 2] * node_axis[node, k, 2])
        p = parent[node]
        if p >= 0:
            _rotate_at(rotation, node, force, node, False, rows, scratch, tmp)
            _add_at(force, p, scratch, tmp, rows)
            _cross_at(offset, node, scratch, tmp, rows, scratch, tmp2)
            _add_at(torque, p, scratch, tmp2, rows)
            _rotate_at(rotation, node, torque, node, False, rows, scratch, tmp)
            _add_at(torque, p, scratch, tmp, rows)


@numba.njit(cache=True)
def rnea(nodes, contacts, q, qd, qdd, mass, com, inertia, origin, axis, points, area,
         coefficients, gravity):
    """Dual joint forces (R, d) of dual coordinates, rates, accelerations (R, d), masses
    (R, n), plain centres of mass (n, 3), inertias (R, n, 3, 3), joint origins and unit joint
    axes (R, n, 3), contact points (R, c, 3), areas (R, c) and contact coefficients (R, 4),
    contact forces subtracted (the reference's ``inverse_dynamics_tangents``). Masses and
    inertias of one row are constants (no tangent rows to carry)."""
    rows = q.shape[0]
    tau = np.zeros((rows, q.shape[1]))
    _rnea_into(nodes, contacts, q, qd, qdd, mass, com, inertia, origin, axis, points, area,
               coefficients, gravity, _rnea_work(nodes[0].shape[0], rows), tau)
    return tau


@numba.njit(cache=True)
def _cross3(a, b):
    """a × b for plain 3-vectors."""
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2],
                     a[0] * b[1] - a[1] * b[0]])


@numba.njit(cache=True)
def _cross_tuple(a, b):
    """a × b as a tuple of 3 floats, for 3-vectors given as arrays or tuples."""
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


@numba.njit(cache=True)
def _plus(a, b):
    """a + b as a tuple of 3 floats, for 3-vectors given as arrays or tuples."""
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


@numba.njit(cache=True)
def _dot3(a, b):
    """a · b for 3-vectors given as arrays or tuples, summed as :func:`_dot`."""
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@numba.njit(cache=True)
def _inertial_vjp(nodes, w, v, dw, dv, w_virtual, v_virtual, mass, com, g_mass, g_com,
                  g_inertia):
    """Add λᵀ ∂τ/∂(masses, centres of mass, inertias) to ``g_mass`` (n,), ``g_com`` (n, 3)
    and ``g_inertia`` (n, 3, 3), from each node's motion and its virtual velocity V(λ)
    (plain (N, 1, 3) arrays) at masses (n,) and centres (n, 3): a link's
    parameters enter only its own body force F, whose virtual power is F · V(λ)."""
    link = nodes[5]
    # in scalars (tuples) throughout: small arrays here would cost more than the arithmetic
    for node in range(link.shape[0]):
        body = link[node]
        if body < 0:
            continue
        centre = com[body]
        omega, velocity, alpha = w[node, 0], v[node, 0], dw[node, 0]
        rate = _plus(velocity, _cross_tuple(omega, centre))  # p / m
        rate_dot = _plus(dv[node, 0], _cross_tuple(alpha, centre))  # ṗ / m
        # ∂f/∂m = ṗ/m + ω × p/m ; ∂n/∂m = c × ṗ/m + ω × (c × p/m) + v × p/m
        force = _plus(rate_dot, _cross_tuple(omega, rate))
        torque = _plus(_plus(_cross_tuple(centre, rate_dot),
                             _cross_tuple(omega, _cross_tuple(centre, rate))),
                       _cross_tuple(velocity, rate))
        virtual_w, virtual_v = w_virtual[node, 0], v_virtual[node, 0]
        g_mass[body] += _dot3(torque, virtual_w) + _dot3(force, virtual_v)
        # ∂n/∂I_ab = E_ab α + ω × E_ab ω, whose power with ω_λ is ω_λa αb + (ω_λ × ω)a ωb
        spin = _cross_tuple(virtual_w, omega)
        for i in range(3):
            for j in range(3):
                g_inertia[body, i, j] += virtual_w[i] * alpha[j] + spin[i] * omega[j]
        # along δc: δp = m ω × δc, δṗ = m α × δc ; δn = δc × ṗ + c × δṗ + ω × (δc × p
        # + c × δp) + v × δp, δf = δṗ + ω × δp; their power with (ω_λ, v_λ), rearranged by
        # the scalar triple product into g · δc:
        # g = m [ṗ/m × ω_λ + p/m × (ω_λ × ω) + (ω_λ × c) × α + ((ω_λ × ω) × c) × ω
        #        + (ω_λ × v) × ω + v_λ × α + (v_λ × ω) × ω]
        lever = _cross_tuple(virtual_w, centre)
        first = _cross_tuple(spin, centre)
        second = _cross_tuple(virtual_w, velocity)
        third = _cross_tuple(virtual_v, omega)
        turned = (first[0] + second[0] + third[0], first[1] + second[1] + third[1],
                  first[2] + second[2] + third[2])
        for terms in (_cross_tuple(rate_dot, virtual_w), _cross_tuple(rate, spin),
                      _cross_tuple(lever, alpha), _cross_tuple(turned, omega),
                      _cross_tuple(virtual_v, alpha)):
            for i in range(3):
                g_com[body, i] += mass[body] * terms[i]


@numba.njit(cache=True)
def _contact_vjp(nodes, contacts, rotation, offset, w, v, w_virtual, v_virtual, points,
                 area, coefficients, g_points, g_area, g_coefficients):
    """Add λᵀ ∂τ/∂(contact points, areas, coefficients) to the gradients (c, 3), (c,),
    (4,): each force f at x enters τ as -f · (ẋ(λ) - u(λ)) (the point's virtual velocity
    relative to the shape's material point), differentiated along the point's own 8
    directions (its 3 coordinates, its area, the 4 coefficients) as dual arrays of 9 rows."""
    world_rotation, world_origin = _world_frames(nodes[0], rotation, offset)
    rows = 9
    coefficient_dual = np.zeros((rows, 4))
    coefficient_dual[0] = coefficients
    for j in range(4):
        coefficient_dual[5 + j, j] = 1.0
    area_dual = np.zeros(rows)
    area_dual[4] = 1.0
    frame_rotation = np.zeros((rows, 3, 3))
    frame_origin = np.zeros((rows, 3))
    frame_w = np.zeros((rows, 3))
    frame_v = np.zeros((rows, 3))
    x = np.zeros((rows, 3))
    xdot = np.zeros((rows, 3))
    virtual = np.zeros((rows, 3))
    relative = np.zeros((rows, 3))
    world_force = np.zeros((rows, 3))
    contact_node, contact_link = contacts[0], contacts[1]
    obstacle_link, obstacle_node = contacts[6], contacts[7]
    for index in range(contact_node.shape[0]):
        node = contact_node[index]
        turn, point = world_rotation[node, 0], points[index]
        area_dual[0] = area[index]
        # x = R p + o ; ẋ = R (ω × p + v) ; ẋ(λ) = R (ω_λ × p + v_λ), and along p's axes
        x[0] = _matvec(turn, point) + world_origin[node, 0]
        xdot[0] = _matvec(turn, _cross3(w[node, 0], point) + v[node, 0])
        virtual[0] = _matvec(turn, _cross3(w_virtual[node, 0], point) + v_virtual[node, 0])
        for j in range(3):
            axis = np.zeros(3)
            axis[j] = 1.0
            x[1 + j] = turn[:, j]
            xdot[1 + j] = _matvec(turn, _cross3(w[node, 0], axis))
            virtual[1 + j] = _matvec(turn, _cross3(w_virtual[node, 0], axis))
        for obstacle in range(obstacle_link.shape[0]):
            if obstacle_link[obstacle] == contact_link[index]:
                continue
            other = obstacle_node[obstacle]
            moving = other >= 0
            frame = max(other, 0)
            if not _may_touch(contacts, obstacle, x[0], world_rotation[frame, 0],
                              world_origin[frame, 0], moving):
                continue
            other_turn = world_rotation[frame, 0]
            frame_rotation[0] = other_turn
            frame_origin[0] = world_origin[frame, 0]
            frame_w[0] = _matvec(other_turn, w[frame, 0])
            frame_v[0] = _matvec(other_turn, v[frame, 0])
            if not _pair_force(contacts, obstacle, coefficient_dual, area_dual, x, xdot,
                               frame_rotation, frame_origin, frame_w, frame_v, moving,
                               world_force):
                continue
            relative[:] = virtual
            if moving:  # minus u(λ) = ω_λ × (x - o) + v_λ of the shape's link
                spin = _matvec(other_turn, w_virtual[frame, 0])
                relative[0] -= (_cross3(spin, x[0] - frame_origin[0])
                                + _matvec(other_turn, v_virtual[frame, 0]))
                for k in range(1, rows):
                    relative[k] -= _cross3(spin, x[k])
            power = _matvec(relative, world_force[0])
            for k in range(1, rows):
                power[k] += _dot(world_force[k], relative[0])
            g_points[index] -= power[1:4]
            g_area[index] -= power[4]
            g_coefficients -= power[5:]


@numba.njit(cache=True)
def rnea_parameter_vjp(nodes, contacts, q, qd, qdd, adjoint, mass, com, inertia, origin,
                       axis, points, area, coefficients, gravity):
    """λᵀ ∂τ/∂(link masses (n,), centres of mass (n, 3), inertias (n, 3, 3), contact points
    (c, 3), areas (c,), coefficients (4,)) for the adjoint λ = ``adjoint`` (d,) at plain
    coordinates, rates, accelerations (d,) and parameters (``axis`` the unit joint axes
    (n, 3)), τ as :func:`rnea`'s, in one pass instead of one
    tangent row per parameter: by virtual power, λᵀ τ = Σ_k F_k · V_k(λ), V_k(λ) node k's
    spatial velocity were the rates λ, and these parameters act only through their own
    node's body force or contact force."""
    d, n, c, count = q.shape[0], mass.shape[0], points.shape[0], nodes[0].shape[0]
    q_row, origin_row = q.reshape(1, d), origin.reshape(1, n, 3)
    node_axis = np.zeros((count, 1, 3))
    _node_axes(nodes, axis.reshape(1, n, 3), node_axis)
    rotation, offset = np.zeros((count, 1, 3, 3)), np.zeros((count, 1, 3))
    motion, scratch = np.zeros((8, count, 1, 3)), np.zeros((2, 1, 3))
    w, v, dw, dv = motion[0], motion[1], motion[2], motion[3]
    w_virtual, v_virtual = motion[4], motion[5]
    _motion(nodes, q_row, qd.reshape(1, d), qdd.reshape(1, d), origin_row, node_axis,
            gravity, rotation, offset, w, v, dw, dv, scratch)
    # the virtual pass: the same placements, its accelerations unused
    _motion(nodes, q_row, adjoint.reshape(1, d), np.zeros((1, d)), origin_row, node_axis,
            gravity, rotation, offset, w_virtual, v_virtual, motion[6], motion[7], scratch)
    g_mass, g_com, g_inertia = np.zeros(n), np.zeros((n, 3)), np.zeros((n, 3, 3))
    _inertial_vjp(nodes, w, v, dw, dv, w_virtual, v_virtual, mass, com, g_mass, g_com,
                  g_inertia)
    g_points, g_area, g_coefficients = np.zeros((c, 3)), np.zeros(c), np.zeros(4)
    if c and contacts[2].shape[0]:  # points and shapes
        _contact_vjp(nodes, contacts, rotation, offset, w, v, w_virtual, v_virtual, points,
                     area, coefficients, g_points, g_area, g_coefficients)
    return g_mass, g_com, g_inertia, g_points, g_area, g_coefficients


@numba.njit(cache=True)
def mass_matrix(nodes, q, mass, com, inertia, origin, axis):
    """M(q) (d, d) by the composite-rigid-body algorithm (the reference's
    ``mass_matrix``), at plain masses (n,), centres of mass (n, 3), inertias (n, 3, 3),
    joint origins (n, 3) and unit joint axes (n, 3)."""
    parent, kind, link, coordinate = nodes[0], nodes[1], nodes[5], nodes[6]
    count, d = parent.shape[0], q.shape[0]
    q_dual = q.reshape(1, d)
    origin_dual = origin.reshape(1, origin.shape[0], 3)
    node_axis = np.zeros((count, 1, 3))
    _node_axes(nodes, axis.reshape(1, axis.shape[0], 3), node_axis)
    rotation = np.zeros((count, 1, 3, 3))
    offset = np.zeros((count, 1, 3))
    _placements(nodes, origin_dual, node_axis, q_dual, rotation, offset)
    transforms = np.zeros((count, 6, 6))
    composite = np.zeros((count, 6, 6))
    # the 6 × 6 blocks in loops, each product summed as _matmul's
    for node in range(count):
        t0, t1, t2 = offset[node, 0, 0], offset[node, 0, 1], offset[node, 0, 2]
        for i in range(3):  # [[Rᵀ, 0], [-Rᵀ [t]×, Rᵀ]]
            for j in range(3):
                transforms[node, i, j] = rotation[node, 0, j, i]
                transforms[node, 3 + i, 3 + j] = rotation[node, 0, j, i]
                total = 0.0
                for m in range(3):
                    total += rotation[node, 0, m, i] * _skew_entry(t0, t1, t2, m, j)
                transforms[node, 3 + i, j] = -total
        body = link[node]
        if body >= 0:  # [[I + m [c]× [c]×ᵀ, m [c]×], [m [c]×ᵀ, m 1]]
            body_mass, c0, c1, c2 = mass[body], com[body, 0], com[body, 1], com[body, 2]
            for i in range(3):
                for j in range(3):
                    total = 0.0
                    for m in range(3):
                        total += _skew_entry(c0, c1, c2, i, m) * _skew_entry(c0, c1, c2, j, m)
                    composite[node, i, j] = inertia[body, i, j] + body_mass * total
                    composite[node, i, 3 + j] = body_mass * _skew_entry(c0, c1, c2, i, j)
                    composite[node, 3 + i, j] = body_mass * _skew_entry(c0, c1, c2, j, i)
                composite[node, 3 + i, 3 + i] = body_mass
    product = np.zeros((6, 6))
    for node in range(count - 1, -1, -1):
        p = parent[node]
        if p >= 0:  # composite[p] += Xᵀ composite X
            x, own = transforms[node], composite[node]
            for i in range(6):
                for j in range(6):
                    total = 0.0
                    for m in range(6):
                        total += x[m, i] * own[m, j]
                    product[i, j] = total
            for i in range(6):
                for j in range(6):
                    total = 0.0
                    for m in range(6):
                        total += product[i, m] * x[m, j]
                    composite[p, i, j] += total
    matrix = np.zeros((d, d))
    subspace = np.zeros((count, 6))
    for node in range(count):
        if kind[node] == _REVOLUTE:
            subspace[node, :3] = node_axis[node, 0]
        elif kind[node] == _PRISMATIC:
            subspace[node, 3:] = node_axis[node, 0]
    f, moved = np.zeros(6), np.zeros(6)
    for node in range(count):
        row = coordinate[node]
        if row < 0:
            continue
        for i in range(6):
            total = 0.0
            for k in range(6):
                total += composite[node, i, k] * subspace[node, k]
            f[i] = total
        matrix[row, row] = _dot(subspace[node], f)
        other = node
        while parent[other] >= 0:
            for i in range(6):  # Xᵀ f
                total = 0.0
                for k in range(6):
                    total += transforms[other, k, i] * f[k]
                moved[i] = total
            f, moved = moved, f
            other = parent[other]
            column = coordinate[other]
            if column >= 0:
                value = _dot(subspace[other], f)
                matrix[row, column] = value
                matrix[column, row] = value
    return matrix


# -- implicit steps ----------------------------------------------------------------
# Compiled (numba) implicit steps and their adjoints: one call per step does the whole
# BDF2 step or both SDIRK2 stages (Newton's method with its backtracking line search on the
# analytic Jacobian, servo terms, penalty contact), and one call its VJP (the step again,
# the final Jacobian's LU factorization, the adjoint solve, ∂L/∂(state, action, θ)). The
# formulas and their order are :mod:`sim_rigid.step`'s NumPy path (``kernels="numpy"``), the
# readable reference these equal to round-off; only the parameter rows differ in method:
# ∂L/∂(masses, centres of mass, inertias, contact points, areas, coefficients) come from one
# virtual-power pass (:func:`sim_rigid._kernels.rnea_parameter_vjp`) instead of one tangent
# row each, and a joint axis takes two tangent rows (two directions across the unit axis,
# the only ones its normalization lets it move in) where the reference takes three.
#
# Arguments are plain tuples (:class:`Parameters`, :class:`Drive`, and the kernels' node and
# contact tuples) so a step crosses from Python once. A solve that does not converge returns
# a status and the numbers :class:`sim_rigid.step.NewtonError` names; Python raises it.
# They live in this file with the recursions they call: numba's on-disk cache checks only
# the cached function's own source file (tests/test_numba_cache.py).

GAMMA = 1.0 - 1.0 / math.sqrt(2.0)
"""SDIRK2's diagonal coefficient (Alexander 1977): L-stable and second order."""
ARMIJO = 1e-4
"""The line search's sufficient decrease: accept |r(v + s Δv)| <= (1 - ARMIJO s) |r(v)|."""
SMALLEST_STEP = 2.0**-30
"""The line search's last fraction s, taken whatever the residual."""
CONVERGED, NOT_CONVERGED = 0, 1
"""A solve's status."""


class Parameters(NamedTuple):
    """The model's parameters as the compiled steps take them (float64, contiguous)."""

    mass: np.ndarray  # (n,) [kg]
    inertia: np.ndarray  # (n, 3, 3) [kg m²]
    origin: np.ndarray  # (n, 3) joint origins [m]
    points: np.ndarray  # (c, 3) contact points [m]
    area: np.ndarray  # (c,)
    coefficients: np.ndarray  # (4,) kn, kd, μ, kt
    damping: np.ndarray  # (d,) joint damping
    gravity: np.ndarray  # (3,) [m/s²]
    com: np.ndarray  # (n, 3) centres of mass in the link frames [m]
    axis: np.ndarray  # (n, 3) joint axis directions (normalized here; any length > 0)


class Drive(NamedTuple):
    """The actuation: which coordinates the action drives and how."""

    actuated: np.ndarray  # (a,) int64, the actuated coordinates
    gear: np.ndarray  # (a,) torque per unit of action
    position: bool  # PD servos on position targets, else torques
    stiffness: float  # servo kp
    damping: float  # servo kd


@numba.njit(cache=True)
def _lu_factor(matrix):
    """(LU, row pivots) of a square matrix by Gaussian elimination with partial pivoting (a
    zero pivot leaves inf or NaN, which the callers test)."""
    size = matrix.shape[0]
    lu = matrix.copy()
    pivots = np.arange(size)
    for k in range(size):
        best = k
        for i in range(k + 1, size):
            if abs(lu[i, k]) > abs(lu[best, k]):
                best = i
        if best != k:
            for j in range(size):
                lu[k, j], lu[best, j] = lu[best, j], lu[k, j]
            pivots[k], pivots[best] = pivots[best], pivots[k]
        for i in range(k + 1, size):
            lu[i, k] /= lu[k, k]
            for j in range(k + 1, size):
                lu[i, j] -= lu[i, k] * lu[k, j]
    return lu, pivots


@numba.njit(cache=True)
def _lu_solve(lu, pivots, rhs, transpose):
    """x with A x = rhs (or Aᵀ x = rhs) for A's :func:`_lu_factor` (P A = L U)."""
    size = rhs.shape[0]
    x = np.zeros(size)
    if not transpose:
        for i in range(size):  # L y = P b
            total = rhs[pivots[i]]
            for j in range(i):
                total -= lu[i, j] * x[j]
            x[i] = total
        for i in range(size - 1, -1, -1):  # U x = y
            total = x[i]
            for j in range(i + 1, size):
                total -= lu[i, j] * x[j]
            x[i] = total / lu[i, i]
        return x
    y = np.zeros(size)
    for i in range(size):  # Uᵀ z = b
        total = rhs[i]
        for j in range(i):
            total -= lu[j, i] * y[j]
        y[i] = total / lu[i, i]
    for i in range(size - 1, -1, -1):  # Lᵀ w = z
        for j in range(i + 1, size):
            y[i] -= lu[j, i] * y[j]
    for i in range(size):  # x = Pᵀ w
        x[pivots[i]] = y[i]
    return x


@numba.njit(cache=True)
def _gains(drive, d):
    """-∂(B τ_act)/∂q and -∂(B τ_act)/∂v, diagonal (d,) each."""
    gain_q, gain_v = np.zeros(d), np.zeros(d)
    if drive[2]:
        for k in range(drive[0].shape[0]):
            gain_q[drive[0][k]] = drive[3]
            gain_v[drive[0][k]] = drive[4]
    return gain_q, gain_v


@numba.njit(cache=True)
def _servo(drive, action, q, v, out):
    """B τ_act (d,) at (q, v) into ``out``."""
    actuated, gear, position, stiffness, damping = drive
    out[:] = 0.0
    for k in range(actuated.shape[0]):
        j = actuated[k]
        if position:
            out[j] = stiffness * (action[k] - q[j]) - damping * v[j]
        else:
            out[j] = gear[k] * action[k]


@numba.njit(cache=True)
def _unit_axes(direction):
    """(unit axes (n, 3), norms (n,)) of joint axis directions (n, 3); a zero direction
    (a fixed or free joint's, unused) stays zero."""
    unit = np.zeros_like(direction)
    norms = np.zeros(direction.shape[0])
    for j in range(direction.shape[0]):
        norms[j] = math.sqrt(_dot(direction[j], direction[j]))
        if norms[j] > 0.0:
            unit[j] = direction[j] / norms[j]
    return unit, norms


@numba.njit(cache=True)
def _constant_duals(theta, rows):
    """The parameters as dual arrays of ``rows`` rows with zero tangents (origins, unit joint
    axes, points, areas, coefficients), and the masses and inertias as constants of one row
    (the recursion skips their tangents; their gradient is the virtual-power pass's), for
    passes that differentiate along q, v and the joint frames."""
    mass, inertia, origin, points, area, coefficients = (theta[0], theta[1], theta[2],
                                                         theta[3], theta[4], theta[5])
    out_mass = np.zeros((1,) + mass.shape)
    out_inertia = np.zeros((1,) + inertia.shape)
    out_origin = np.zeros((rows,) + origin.shape)
    out_axis = np.zeros((rows,) + origin.shape)
    out_points = np.zeros((rows,) + points.shape)
    out_area = np.zeros((rows,) + area.shape)
    out_coefficients = np.zeros((rows, 4))
    out_mass[0], out_inertia[0], out_origin[0] = mass, inertia, origin
    out_axis[0] = _unit_axes(theta[9])[0]
    out_points[0], out_area[0], out_coefficients[0] = points, area, coefficients
    return (out_mass, out_inertia, out_origin, out_axis, out_points, out_area,
            out_coefficients)


@numba.njit(cache=True)
def _evaluation_work(drive, count, d, rows, c):
    """Scratch for :func:`_evaluate` with ``rows`` dual rows (1: the residual alone, 1 + d:
    with the Jacobian) on ``count`` nodes at coefficient c [s]: dual coordinates, rates and
    accelerations (R, d) with their tangent rows set (one direction per rate: dq = c dv,
    da = dv / c), the joint forces (R, d), the servo's (d,), :func:`_rnea_work`, and the
    servo's :func:`_gains`."""
    q_dual, v_dual, a_dual = np.zeros((rows, d)), np.zeros((rows, d)), np.zeros((rows, d))
    for k in range(1, rows):
        q_dual[k, k - 1] = c
        v_dual[k, k - 1] = 1.0
        a_dual[k, k - 1] = 1.0 / c
    gain_q, gain_v = _gains(drive, d)
    return (q_dual, v_dual, a_dual, np.zeros((rows, d)), np.zeros(d), _rnea_work(count, rows),
            gain_q, gain_v)


@numba.njit(cache=True)
def _evaluate(nodes, contacts, theta, drive, action, q_base, v_base, c, v, duals, work,
              residual, matrix):
    """r(v) into ``residual`` (d,) and, when ``work`` (:func:`_evaluation_work`) has 1 + d
    rows, ∂r/∂v into ``matrix`` (d, d), of the solve at base values (q_base, v_base) and
    coefficient c [s]; ``duals`` are :func:`_constant_duals` of as many rows or more. The
    Jacobian's tangents move q, q̇ and q̈ together (dq = c dv, dq̈ = dv / c), so the mass
    matrix comes from the same pass."""
    q_dual, v_dual, a_dual, tau, servo, rnea_work, gain_q, gain_v = work
    d = v.shape[0]
    for i in range(d):
        q_dual[0, i] = q_base[i] + c * v[i]
        v_dual[0, i] = v[i]
        a_dual[0, i] = (v[i] - v_base[i]) / c
    mass, inertia, origin, axis, points, area, coefficients = duals
    _rnea_into(nodes, contacts, q_dual, v_dual, a_dual, mass, theta[8], inertia, origin, axis,
               points, area, coefficients, theta[7], rnea_work, tau)
    damping = theta[6]
    _servo(drive, action, q_dual[0], v, servo)
    for i in range(d):
        residual[i] = tau[0, i] + damping[i] * v[i] - servo[i]
    if q_dual.shape[0] == 1:
        return
    for i in range(d):  # c ∂ID/∂q + ∂ID/∂q̇ + M/c in one pass
        for j in range(d):
            matrix[i, j] = tau[1 + j, i]
        matrix[i, i] += damping[i] + c * gain_q[i] + gain_v[i]


@numba.njit(cache=True)
def _finite(array):
    """Whether every entry of ``array`` is finite."""
    for value in array.flat:
        if not math.isfinite(value):
            return False
    return True


@numba.njit(cache=True)
def _largest(x):
    """max |x| of a vector (NaN where x holds one, as ``np.max(np.abs(x))``)."""
    best = abs(x[0])
    for i in range(1, x.shape[0]):
        size = abs(x[i])
        if size > best or math.isnan(size):
            best = size
    return best


@numba.njit(cache=True)
def _solve(nodes, contacts, theta, drive, action, q_base, v_base, c, v_start, tolerance,
           iterations):
    """(v, status, |r| [N m or N], largest last update) of r(v) = 0 by Newton's method with
    a backtracking line search from ``v_start``: converged when a full step moves v by at
    most ``tolerance`` (1 + |v|∞)."""
    d, count = v_start.shape[0], nodes[0].shape[0]
    full = _constant_duals(theta, 1 + d)
    work = _evaluation_work(drive, count, d, 1 + d, c)
    residual, matrix = np.zeros(d), np.zeros((d, d))
    trial_residual, trial_matrix = np.zeros(d), np.zeros((d, d))
    v = v_start.copy()
    _evaluate(nodes, contacts, theta, drive, action, q_base, v_base, c, v, full, work,
              residual, matrix)
    update = np.full(d, np.inf)
    for _ in range(iterations):
        if not _finite(matrix):
            update[:] = np.nan
            break
        lu, pivots = _lu_factor(matrix)
        update = -_lu_solve(lu, pivots, residual, False)
        if not _finite(update):
            break
        if _largest(update) <= tolerance * (1.0 + _largest(v)):
            return v + update, CONVERGED, np.sqrt(_dot(residual, residual)), _largest(update)
        norm, fraction = np.sqrt(_dot(residual, residual)), 1.0
        while True:
            trial = v + fraction * update
            # the full step usually passes: evaluate its Jacobian with its residual
            if fraction == 1.0:
                _evaluate(nodes, contacts, theta, drive, action, q_base, v_base, c, trial,
                          full, work, trial_residual, trial_matrix)
            else:
                _evaluate(nodes, contacts, theta, drive, action, q_base, v_base, c, trial,
                          full, _evaluation_work(drive, count, d, 1, c), trial_residual,
                          trial_matrix)
            if (np.sqrt(_dot(trial_residual, trial_residual)) <= (1.0 - ARMIJO * fraction) * norm
                    or fraction <= SMALLEST_STEP):
                break
            fraction *= 0.5
        v = trial
        if fraction == 1.0:
            residual, trial_residual = trial_residual, residual
            matrix, trial_matrix = trial_matrix, matrix
        else:
            _evaluate(nodes, contacts, theta, drive, action, q_base, v_base, c, v, full, work,
                      residual, matrix)
    return v, NOT_CONVERGED, np.sqrt(_dot(residual, residual)), _largest(update)


@numba.njit(cache=True)
def _stages(nodes, contacts, theta, drive, action, q, qd, q_prev, qd_prev, count, dt,
            tolerance, iterations):
    """The solves of one step: (stage count, base coordinates (2, d), base rates (2, d),
    solutions (2, d), c [s], status, |r|, last update); SDIRK2's two stages when ``count``
    is 0, else BDF2's one (row 0)."""
    d = q.shape[0]
    q_base, v_base, solution = np.zeros((2, d)), np.zeros((2, d)), np.zeros((2, d))
    if count == 0:
        c = GAMMA * dt
        q_base[0], v_base[0] = q, qd
        v1, status, norm, update = _solve(nodes, contacts, theta, drive, action, q, qd, c, qd,
                                          tolerance, iterations)
        solution[0] = v1
        if status != CONVERGED:
            return 1, q_base, v_base, solution, c, status, norm, update
        q_base[1] = q + (1.0 - GAMMA) * dt * v1
        v_base[1] = qd + (1.0 - GAMMA) * dt * (v1 - qd) / c
        v2, status, norm, update = _solve(nodes, contacts, theta, drive, action, q_base[1],
                                          v_base[1], c, v1, tolerance, iterations)
        solution[1] = v2
        return 2, q_base, v_base, solution, c, status, norm, update
    c = 2.0 * dt / 3.0
    q_base[0] = (4.0 * q - q_prev) / 3.0
    v_base[0] = (4.0 * qd - qd_prev) / 3.0
    v, status, norm, update = _solve(nodes, contacts, theta, drive, action, q_base[0],
                                     v_base[0], c, 2.0 * qd - qd_prev, tolerance, iterations)
    solution[0] = v
    return 1, q_base, v_base, solution, c, status, norm, update


@numba.njit(cache=True)
def implicit_step(nodes, contacts, theta, drive, action, q, qd, q_prev, qd_prev, count, dt,
                  tolerance, iterations):
    """(coordinates (d,), rates (d,), status, |r|, last update) ``dt`` [s] after (q, qd)
    (previous (q_prev, qd_prev), ``count`` steps taken): :func:`sim_rigid.step.step`."""
    stages, q_base, v_base, solution, c, status, norm, update = _stages(
        nodes, contacts, theta, drive, action, q, qd, q_prev, qd_prev, count, dt, tolerance,
        iterations)
    last = stages - 1
    return (q_base[last] + c * solution[last], solution[last].copy(), status, norm, update)


@numba.njit(cache=True)
def _axis_joints(nodes, n):
    """The joints whose axis some node turns about or slides along (revolute, prismatic),
    in order, (m,) int64."""
    used = np.zeros(n, dtype=np.bool_)
    for joint in nodes[7]:
        if joint >= 0:
            used[joint] = True
    return np.flatnonzero(used)


@numba.njit(cache=True)
def _across(axis):
    """Two unit vectors (2, 3) orthogonal to the unit ``axis`` and to each other: the
    directions a normalized axis can move in."""
    helper = np.zeros(3)
    helper[np.argmin(np.abs(axis))] = 1.0
    first = _cross3(axis, helper)
    first /= math.sqrt(_dot(first, first))
    out = np.zeros((2, 3))
    out[0] = first
    out[1] = _cross3(axis, first)
    return out


@numba.njit(cache=True)
def _solve_vjp(nodes, contacts, theta, drive, action, q_base, v_base, c, v, g_q, g_v,
               g_action, g_parameters):
    """(∂L/∂q_b, ∂L/∂v_b) of a solution v given ∂L/∂q and ∂L/∂v of its outputs q = q_b +
    c v and v; adds ∂L/∂action to ``g_action`` and ∂L/∂θ to ``g_parameters`` (masses,
    inertias, origins, damping, points, areas, coefficients, centres of mass, axis
    directions)."""
    mass, inertia, origin, points, area, coefficients, damping, gravity, com, direction = theta
    d, n = v.shape[0], mass.shape[0]
    q = q_base + c * v
    a = (v - v_base) / c
    unit, norms = _unit_axes(direction)
    moving = _axis_joints(nodes, n)
    # tangents along q, v (the Jacobian's two halves), every joint origin coordinate, and two
    # directions across each revolute or prismatic joint's unit axis
    first_axis = 1 + 2 * d + 3 * n
    rows = first_axis + 2 * moving.shape[0]
    q_dual, v_dual, a_dual = np.zeros((rows, d)), np.zeros((rows, d)), np.zeros((rows, d))
    q_dual[0], v_dual[0], a_dual[0] = q, v, a
    for k in range(d):
        q_dual[1 + k, k] = 1.0
        v_dual[1 + d + k, k] = 1.0
    duals = _constant_duals(theta, rows)
    origin_dual, axis_dual = duals[2], duals[3]
    for k in range(3 * n):
        origin_dual[1 + 2 * d + k, k // 3, k % 3] = 1.0
    across = np.zeros((moving.shape[0], 2, 3))
    for t in range(moving.shape[0]):
        across[t] = _across(unit[moving[t]])
        axis_dual[first_axis + 2 * t, moving[t]] = across[t, 0]
        axis_dual[first_axis + 2 * t + 1, moving[t]] = across[t, 1]
    tau = rnea(nodes, contacts, q_dual, v_dual, a_dual, duals[0], com, duals[1], origin_dual,
               axis_dual, duals[4], duals[5], duals[6], gravity)
    d_q, d_v = tau[1:1 + d], tau[1 + d:1 + 2 * d]
    d_origin, d_axis = tau[1 + 2 * d:first_axis], tau[first_axis:]
    gain_q, gain_v = _gains(drive, d)
    inertia_matrix = mass_matrix(nodes, q, mass, com, inertia, origin, unit)
    matrix = c * d_q.T + d_v.T + inertia_matrix / c
    for k in range(d):
        matrix[k, k] += damping[k] + c * gain_q[k] + gain_v[k]
    lu, pivots = _lu_factor(matrix)
    adjoint = _lu_solve(lu, pivots, g_v + c * g_q, True)
    g_q_base = g_q - _matvec(d_q, adjoint) - gain_q * adjoint
    g_v_base = _matvec(inertia_matrix, adjoint) / c
    actuated, gear, position, stiffness, _ = drive
    for k in range(actuated.shape[0]):
        g_action[k] += adjoint[actuated[k]] * (stiffness if position else gear[k])
    (g_mass, g_inertia, g_origin, g_damping, g_points, g_area, g_coefficients, g_com,
     g_axis) = g_parameters
    g_origin -= _matvec(d_origin, adjoint).reshape(n, 3)
    # the direction u's gradient: (I - a aᵀ)/|u| maps it to a's, spanned by the two rows
    g_across = _matvec(d_axis, adjoint)
    for t in range(moving.shape[0]):
        j = moving[t]
        g_axis[j] -= (g_across[2 * t] * across[t, 0]
                      + g_across[2 * t + 1] * across[t, 1]) / norms[j]
    g_damping -= adjoint * v
    p_mass, p_com, p_inertia, p_points, p_area, p_coefficients = rnea_parameter_vjp(
        nodes, contacts, q, v, a, adjoint, mass, com, inertia, origin, unit, points, area,
        coefficients, gravity)
    g_mass -= p_mass
    g_com -= p_com
    g_inertia -= p_inertia
    g_points -= p_points
    g_area -= p_area
    g_coefficients -= p_coefficients
    return g_q_base, g_v_base


@numba.njit(cache=True)
def _stages_vjp(nodes, contacts, theta, drive, action, stages, q_base, v_base, solution, c,
                dt, g_next, g_action, g_parameters):
    """∂L/∂(q, qd, q_prev, qd_prev) (4, d) of one step whose solves :func:`_stages` gave
    (``stages``, ``q_base``, ``v_base``, ``solution``, ``c``), given ∂L/∂(next q, qd,
    q_prev, qd_prev) ``g_next`` (4, d); adds ∂L/∂action to ``g_action`` (a,) and ∂L/∂θ to
    ``g_parameters`` (:func:`implicit_step_vjp`'s order)."""
    d = g_next.shape[1]
    g_q, g_v = g_next[0], g_next[1]
    g_state = np.zeros((4, d))
    g_state[0] += g_next[2]  # the state moves to "previous"
    g_state[1] += g_next[3]
    if stages == 2:
        g_base_q, g_base_v = _solve_vjp(nodes, contacts, theta, drive, action, q_base[1],
                                        v_base[1], c, solution[1], g_q, g_v, g_action,
                                        g_parameters)
        ratio = (1.0 - GAMMA) * dt / c
        g_v1 = (1.0 - GAMMA) * dt * g_base_q + ratio * g_base_v
        g_state[0] += g_base_q
        g_state[1] += (1.0 - ratio) * g_base_v
        g_base_q, g_base_v = _solve_vjp(nodes, contacts, theta, drive, action, q_base[0],
                                        v_base[0], c, solution[0], np.zeros(d), g_v1,
                                        g_action, g_parameters)
        g_state[0] += g_base_q
        g_state[1] += g_base_v
    else:
        g_base_q, g_base_v = _solve_vjp(nodes, contacts, theta, drive, action, q_base[0],
                                        v_base[0], c, solution[0], g_q, g_v, g_action,
                                        g_parameters)
        g_state[0] += 4.0 / 3.0 * g_base_q
        g_state[1] += 4.0 / 3.0 * g_base_v
        g_state[2] = -g_base_q / 3.0
        g_state[3] = -g_base_v / 3.0
    return g_state


@numba.njit(cache=True)
def _parameter_gradients(theta):
    """Zero ∂L/∂θ in :func:`implicit_step_vjp`'s order."""
    return (np.zeros_like(theta[0]), np.zeros_like(theta[1]), np.zeros_like(theta[2]),
            np.zeros_like(theta[6]), np.zeros_like(theta[3]), np.zeros_like(theta[4]),
            np.zeros(4), np.zeros_like(theta[8]), np.zeros_like(theta[9]))


@numba.njit(cache=True)
def implicit_step_vjp(nodes, contacts, theta, drive, action, q, qd, q_prev, qd_prev, count, dt,
                      tolerance, iterations, g_q, g_v, g_q_prev, g_v_prev):
    """The step again and its VJP (:func:`sim_rigid.step.step_vjp`) given ∂L/∂(next q, qd,
    q_prev, qd_prev) (d,) each: (status, |r|, last update, ∂L/∂(q, qd, q_prev, qd_prev)
    (4, d), ∂L/∂action (a,), ∂L/∂θ as (masses (n,), inertias (n, 3, 3), origins (n, 3),
    damping (d,), points (c, 3), areas (c,), coefficients (4,), centres of mass (n, 3), axis
    directions (n, 3)))."""
    d = q.shape[0]
    g_parameters = _parameter_gradients(theta)
    g_action = np.zeros(drive[0].shape[0])
    stages, q_base, v_base, solution, c, status, norm, update = _stages(
        nodes, contacts, theta, drive, action, q, qd, q_prev, qd_prev, count, dt, tolerance,
        iterations)
    if status != CONVERGED:
        return status, norm, update, np.zeros((4, d)), g_action, g_parameters
    g_next = np.empty((4, d))
    g_next[0], g_next[1], g_next[2], g_next[3] = g_q, g_v, g_q_prev, g_v_prev
    g_state = _stages_vjp(nodes, contacts, theta, drive, action, stages, q_base, v_base,
                          solution, c, dt, g_next, g_action, g_parameters)
    return status, norm, update, g_state, g_action, g_parameters


@numba.njit(cache=True)
def implicit_trajectory(nodes, contacts, theta, drive, actions, q, qd, q_prev, qd_prev, count,
                        dt, tolerance, iterations):
    """N = len(actions) steps of :func:`implicit_step` from (q, qd) (previous (q_prev,
    qd_prev), ``count`` steps taken), one action (a,) per step in ``actions`` (N, a):
    (coordinates (N + 1, d), rates (N + 1, d), each step's solves for
    :func:`implicit_trajectory_vjp` (stage counts (N,), base coordinates (N, 2, d), base
    rates (N, 2, d), solutions (N, 2, d), c (N,) [s]), the first step whose solve failed or
    -1, its status, |r| and last update)."""
    n, d = actions.shape[0], q.shape[0]
    coordinates, rates = np.zeros((n + 1, d)), np.zeros((n + 1, d))
    stage_counts = np.zeros(n, dtype=np.int64)
    q_bases, v_bases, solutions = np.zeros((n, 2, d)), np.zeros((n, 2, d)), np.zeros((n, 2, d))
    coefficients = np.zeros(n)
    coordinates[0], rates[0] = q, qd
    before_q, before_v = q_prev, qd_prev
    for i in range(n):
        stages, q_base, v_base, solution, c, status, norm, update = _stages(
            nodes, contacts, theta, drive, actions[i], coordinates[i], rates[i], before_q,
            before_v, count + i, dt, tolerance, iterations)
        if status != CONVERGED:
            return (coordinates, rates, stage_counts, q_bases, v_bases, solutions,
                    coefficients, i, status, norm, update)
        last = stages - 1
        coordinates[i + 1] = q_base[last] + c * solution[last]
        rates[i + 1] = solution[last]
        stage_counts[i], coefficients[i] = stages, c
        q_bases[i], v_bases[i], solutions[i] = q_base, v_base, solution
        before_q, before_v = coordinates[i], rates[i]
    return (coordinates, rates, stage_counts, q_bases, v_bases, solutions, coefficients, -1,
            CONVERGED, 0.0, 0.0)


@numba.njit(cache=True)
def implicit_trajectory_vjp(nodes, contacts, theta, drive, actions, stage_counts, q_bases,
                            v_bases, solutions, coefficients, dt, g_states):
    """The VJP of :func:`implicit_trajectory` from its solves, given ∂L/∂(q, qd, q_prev,
    qd_prev) taken at each state directly, ``g_states`` (N + 1, 4, d): (∂L/∂ the start's (q,
    qd, q_prev, qd_prev) (4, d), ∂L/∂actions (N, a), ∂L/∂θ in :func:`implicit_step_vjp`'s
    order)."""
    n = actions.shape[0]
    g_parameters = _parameter_gradients(theta)
    g_actions = np.zeros((n, drive[0].shape[0]))
    carry = g_states[n].copy()
    for i in range(n - 1, -1, -1):
        carry = _stages_vjp(nodes, contacts, theta, drive, actions[i], stage_counts[i],
                            q_bases[i], v_bases[i], solutions[i], coefficients[i], dt, carry,
                            g_actions[i], g_parameters) + g_states[i]
    return carry, g_actions, g_parameters


@numba.njit(cache=True)
def link_point_dual(nodes, q, origin, axis, node, point):
    """Dual world position [m] (R, 3) of ``point`` (3,) [m], fixed in node ``node``'s frame
    (its link's), from dual coordinates (R, d), joint origins (R, n, 3) and unit joint axes
    (R, n, 3): the forward kinematics of :func:`sim_rigid.dynamics.link_frames_dual` with
    its tangents, for task terms (:mod:`sim_rigid.kinematics`)."""
    count, rows = nodes[0].shape[0], q.shape[0]
    node_axis = np.zeros((count, rows, 3))
    _node_axes(nodes, axis, node_axis)
    rotation = np.zeros((count, rows, 3, 3))
    offset = np.zeros((count, rows, 3))
    _placements(nodes, origin, node_axis, q, rotation, offset)
    world_rotation, world_origin = _world_frames(nodes[0], rotation, offset)
    constant = np.zeros((rows, 3))
    constant[0] = point
    out = np.zeros((rows, 3))
    _rotate(world_rotation[node], constant, False, out)
    return out + world_origin[node]
