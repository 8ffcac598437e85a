"""Compiled (numba) recursive Newton-Euler algorithm with forward-mode tangents and
composite-rigid-body algorithm, equal to the NumPy reference in :mod:`sim_rigid.dynamics`
(whose formulas these transcribe) to round-off.

Dual arrays as in the reference: row 0 a value, rows 1..K its tangents along K directions;
every product of two dual quantities applies the product rule row by row, products with
constants act on every row. Entry points take :class:`NodeArrays` as a plain tuple.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

__all__ = ["Contacts", "NodeArrays", "mass_matrix", "rnea"]

_REVOLUTE, _PRISMATIC = 0, 1
_PLANE = 0


class NodeArrays(NamedTuple):
    """A model's elementary nodes (:class:`sim_rigid.dynamics.NodeTable`), N of them."""

    parent: np.ndarray  # (N,) int64, -1 the world
    kind: np.ndarray  # (N,) int64: 0 revolute, 1 prismatic, 2 fixed
    axis: np.ndarray  # (N, 3)
    rotation: np.ndarray  # (N, 3, 3) joint frame in the parent node's frame
    origin_joint: np.ndarray  # (N,) int64, -1 none
    link: np.ndarray  # (N,) int64, -1 massless
    coordinate: np.ndarray  # (N,) int64, -1 fixed
    com: np.ndarray  # (N, 3) centre of mass of the node's link [m] (0 when massless)


class Contacts(NamedTuple):
    """Where the contact points sit and the static obstacles (:mod:`sim_rigid.contact`), c
    points and o obstacles; the points' positions and the coefficients are parameters,
    passed as dual arrays."""

    node: np.ndarray  # (c,) int64, the node of each point's link
    obstacle_type: np.ndarray  # (o,) int64: 0 plane, 1 box
    obstacle_center: np.ndarray  # (o, 3) [m]
    obstacle_rotation: np.ndarray  # (o, 3, 3)
    obstacle_half_extents: np.ndarray  # (o, 3) [m]


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


@numba.njit(cache=True)
def _cross_constant(a, c, out):
    """out = a × c for a dual (R, 3) array and a constant 3-vector."""
    for k in range(a.shape[0]):
        out[k, 0] = a[k, 1] * c[2] - a[k, 2] * c[1]
        out[k, 1] = a[k, 2] * c[0] - a[k, 0] * c[2]
        out[k, 2] = a[k, 0] * c[1] - a[k, 1] * c[0]


@numba.njit(cache=True)
def _rotate(rotation, x, transpose, out):
    """out = R x (or Rᵀ x) for dual rotations (R, 3, 3) and dual vectors (R, 3)."""
    rows = x.shape[0]
    for k in range(rows):
        for i in range(3):
            total = 0.0
            for j in range(3):
                r0 = rotation[0, j, i] if transpose else rotation[0, i, j]
                total += r0 * x[k, j]
                if k > 0:
                    rk = rotation[k, j, i] if transpose else rotation[k, i, j]
                    total += rk * x[0, j]
            out[k, i] = total


@numba.njit(cache=True)
def _scale(s, x, out):
    """out = s x for a dual scalar (R,) and a dual vector (R, 3)."""
    for k in range(x.shape[0]):
        for i in range(3):
            out[k, i] = s[0] * x[k, i] + (s[k] * x[0, i] if k > 0 else 0.0)


@numba.njit(cache=True)
def _placement(nodes, node, origin, q, rotation, offset):
    """The node's dual rotation to its parent's frame (R, 3, 3) and dual origin (R, 3)."""
    parent, kind, axis, base, origin_joint, link, coordinate, com = nodes
    rows = q.shape[0]
    joint = origin_joint[node]
    for k in range(rows):
        for i in range(3):
            offset[k, i] = origin[k, joint, i] if joint >= 0 else 0.0
            for j in range(3):
                rotation[k, i, j] = base[node, i, j] if k == 0 else 0.0
    c = coordinate[node]
    a = axis[node]
    if kind[node] == _REVOLUTE:
        angle = q[0, c]
        sin, cos = math.sin(angle), math.cos(angle)
        skew = np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])
        turn = np.eye(3) + sin * skew + (1.0 - cos) * (skew @ skew)
        value = base[node] @ turn
        derivative = value @ skew
        for i in range(3):
            for j in range(3):
                rotation[0, i, j] = value[i, j]
        for k in range(1, rows):
            for i in range(3):
                for j in range(3):
                    rotation[k, i, j] = q[k, c] * derivative[i, j]
    elif kind[node] == _PRISMATIC:
        direction = base[node] @ a
        for k in range(rows):
            for i in range(3):
                offset[k, i] += q[k, c] * direction[i]


@numba.njit(cache=True)
def _signed_distance(contacts, obstacle, x):
    """(φ, outward normal) of an obstacle at the world point x (the reference's
    ``signed_distance``)."""
    _, kinds, centers, rotations, halves = contacts
    kind, center = kinds[obstacle], centers[obstacle]
    rotation, half = rotations[obstacle], halves[obstacle]
    relative = x - center
    normal = np.zeros(3)
    if kind == _PLANE:
        normal[:] = rotation[:, 2]
        return normal @ relative, normal
    local = rotation.T @ relative
    excess = np.abs(local) - half
    if np.all(excess < 0.0):
        axis = np.argmax(excess)
        normal[:] = np.sign(local[axis]) * rotation[:, axis]
        return excess[axis], normal
    return np.sqrt(np.sum(np.maximum(excess, 0.0) ** 2)) + min(np.max(excess), 0.0), normal


@numba.njit(cache=True)
def _times(a, b):
    """a b for dual scalars (R,)."""
    out = a[0] * b
    out[1:] += a[1:] * b[0]
    return out


@numba.njit(cache=True)
def _contact_force(contacts, coefficients, x, xdot, total):
    """The dual world force (R, 3) on a contact point into ``total``, from the dual
    coefficients (R, 4) (the reference's ``contact_force``)."""
    kinds = contacts[1]
    kn, kd = coefficients[:, 0].copy(), coefficients[:, 1].copy()
    mu, kt = coefficients[:, 2].copy(), coefficients[:, 3].copy()
    rows = x.shape[0]
    total[:] = 0.0
    for obstacle in range(kinds.shape[0]):
        distance, normal = _signed_distance(contacts, obstacle, x[0])
        if distance >= 0.0:
            continue
        depth = -(x @ normal)
        depth[0] = -distance
        rate = -(xdot @ normal)
        normal_force = _times(kn, depth) + _times(_times(kd, depth), rate)
        if normal_force[0] <= 0.0:
            continue
        along = xdot @ normal
        slip = xdot - along.reshape(rows, 1) * normal.reshape(1, 3)
        speed = np.sqrt(np.sum(slip[0] ** 2))
        friction = np.empty_like(slip)
        if kt[0] * speed <= mu[0] * normal_force[0]:
            _scale(kt, slip, friction)
        else:
            direction = np.empty_like(slip)
            direction[0] = slip[0] / speed
            for k in range(1, rows):
                direction[k] = (slip[k] - (slip[k] @ direction[0]) * direction[0]) / speed
            _scale(_times(mu, normal_force), direction, friction)
        total -= friction
        total += normal_force.reshape(rows, 1) * normal.reshape(1, 3)


@numba.njit(cache=True)
def _apply_contacts(nodes, contacts, points, coefficients, rotation, offset, w, v, torque,
                    force):
    """Subtract each contact point's force from its node's body force, dual points (R, c, 3)
    and coefficients (R, 4) (the reference's ``_apply_contacts``)."""
    parent = nodes[0]
    count, rows = parent.shape[0], rotation.shape[1]
    world_rotation = np.zeros((count, rows, 3, 3))
    world_origin = np.zeros((count, rows, 3))
    for node in range(count):
        p = parent[node]
        if p < 0:
            world_rotation[node] = rotation[node]
            world_origin[node] = offset[node]
        else:
            for k in range(rows):
                world_rotation[node, k] = world_rotation[p, 0] @ rotation[node, k]
                if k > 0:
                    world_rotation[node, k] += world_rotation[p, k] @ rotation[node, 0]
            _rotate(world_rotation[p], offset[node], False, world_origin[node])
            world_origin[node] += world_origin[p]
    x = np.zeros((rows, 3))
    xdot = np.zeros((rows, 3))
    spin = np.zeros((rows, 3))
    world_force = np.zeros((rows, 3))
    body = np.zeros((rows, 3))
    lever = np.zeros((rows, 3))
    contact_node = contacts[0]
    for index in range(contact_node.shape[0]):
        node = contact_node[index]
        point = points[:, index].copy()
        _rotate(world_rotation[node], point, False, x)
        x += world_origin[node]
        _cross(w[node], point, spin)
        spin += v[node]
        _rotate(world_rotation[node], spin, False, xdot)
        _contact_force(contacts, coefficients, x, xdot, world_force)
        _rotate(world_rotation[node], world_force, True, body)
        force[node] -= body
        _cross(point, body, lever)
        torque[node] -= lever


@numba.njit(cache=True)
def rnea(nodes, contacts, q, qd, qdd, mass, inertia, origin, points, coefficients, gravity):
    """Dual joint forces (R, d) of dual coordinates, rates, accelerations (R, d), masses
    (R, n), inertias (R, n, 3, 3), joint origins (R, n, 3), contact points (R, c, 3) and
    contact coefficients (R, 4), contact forces subtracted (the reference's
    ``inverse_dynamics_tangents``)."""
    parent, kind, axis, base, origin_joint, link, coordinate, com = nodes
    count, rows, d = parent.shape[0], q.shape[0], q.shape[1]
    rotation = np.zeros((count, rows, 3, 3))
    offset = np.zeros((count, rows, 3))
    w = np.zeros((count, rows, 3))
    v = np.zeros((count, rows, 3))
    dw = np.zeros((count, rows, 3))
    dv = np.zeros((count, rows, 3))
    torque = np.zeros((count, rows, 3))
    force = np.zeros((count, rows, 3))
    zero = np.zeros((rows, 3))
    base_accel = np.zeros((rows, 3))
    base_accel[0] = -gravity
    tmp = np.zeros((rows, 3))
    tmp2 = np.zeros((rows, 3))
    s_motion = np.zeros((rows, 3))
    for node in range(count):
        _placement(nodes, node, origin, q, rotation[node], offset[node])
        p = parent[node]
        if p < 0:
            w_p, v_p, dw_p, dv_p = zero, zero, zero, base_accel
        else:
            w_p, v_p, dw_p, dv_p = w[p], v[p], dw[p], dv[p]
        c = coordinate[node]
        revolute, prismatic = kind[node] == _REVOLUTE, kind[node] == _PRISMATIC
        a = axis[node]
        # ω = Rᵀ ω_p + s_ω q̇
        _rotate(rotation[node], w_p, True, w[node])
        # v = Rᵀ (v_p + ω_p × t) + s_v q̇
        _cross(w_p, offset[node], tmp)
        tmp += v_p
        _rotate(rotation[node], tmp, True, v[node])
        # α = Rᵀ α_p + s_ω q̈ + ω × s_ω q̇ ; a = Rᵀ (a_p + α_p × t) + s_v q̈ + ω × s_v q̇ + v × s_ω q̇
        _rotate(rotation[node], dw_p, True, dw[node])
        _cross(dw_p, offset[node], tmp)
        tmp += dv_p
        _rotate(rotation[node], tmp, True, dv[node])
        if c >= 0:
            for k in range(rows):
                for i in range(3):
                    s_motion[k, i] = qd[k, c] * a[i]
            if revolute:
                w[node] += s_motion
                dw[node] += qdd[:, c:c + 1] * a.reshape(1, 3)
                _cross(w[node], s_motion, tmp)
                dw[node] += tmp
                _cross(v[node], s_motion, tmp)
                dv[node] += tmp
            elif prismatic:
                v[node] += s_motion
                dv[node] += qdd[:, c:c + 1] * a.reshape(1, 3)
                _cross(w[node], s_motion, tmp)
                dv[node] += tmp
        body = link[node]
        if body >= 0:
            centre = com[node]
            m_dual = mass[:, body]
            i_dual = inertia[:, body]
            # p = m (v + ω × c), ṗ = m (a + α × c)
            _cross_constant(dw[node], centre, tmp)
            tmp += dv[node]
            p_dot = np.zeros((rows, 3))
            _scale(m_dual, tmp, p_dot)
            _cross_constant(w[node], centre, tmp)
            tmp += v[node]
            momentum = np.zeros((rows, 3))
            _scale(m_dual, tmp, momentum)
            # n = I α + c × ṗ + ω × (I ω + c × p) + v × p ; f = ṗ + ω × p
            _rotate(i_dual, dw[node], False, torque[node])
            for k in range(rows):
                cx, cy, cz = centre[0], centre[1], centre[2]
                px, py, pz = p_dot[k, 0], p_dot[k, 1], p_dot[k, 2]
                torque[node, k, 0] += cy * pz - cz * py
                torque[node, k, 1] += cz * px - cx * pz
                torque[node, k, 2] += cx * py - cy * px
            angular = np.zeros((rows, 3))
            _rotate(i_dual, w[node], False, angular)
            for k in range(rows):
                cx, cy, cz = centre[0], centre[1], centre[2]
                px, py, pz = momentum[k, 0], momentum[k, 1], momentum[k, 2]
                angular[k, 0] += cy * pz - cz * py
                angular[k, 1] += cz * px - cx * pz
                angular[k, 2] += cx * py - cy * px
            _cross(w[node], angular, tmp)
            torque[node] += tmp
            _cross(v[node], momentum, tmp)
            torque[node] += tmp
            _cross(w[node], momentum, tmp)
            force[node] = p_dot + tmp
    if contacts[0].shape[0]:
        _apply_contacts(nodes, contacts, points, coefficients, rotation, offset, w, v, torque,
                        force)
    tau = np.zeros((rows, d))
    for node in range(count - 1, -1, -1):
        c = coordinate[node]
        if c >= 0:
            source = torque[node] if kind[node] == _REVOLUTE else force[node]
            for k in range(rows):
                tau[k, c] = (source[k, 0] * axis[node, 0] + source[k, 1] * axis[node, 1]
                             + source[k, 2] * axis[node, 2])
        p = parent[node]
        if p >= 0:
            _rotate(rotation[node], force[node], False, tmp)
            force[p] += tmp
            _cross(offset[node], tmp, tmp2)
            torque[p] += tmp2
            _rotate(rotation[node], torque[node], False, tmp)
            torque[p] += tmp
    return tau


@numba.njit(cache=True)
def mass_matrix(nodes, q, mass, inertia, origin):
    """M(q) (d, d) by the composite-rigid-body algorithm (the reference's
    ``mass_matrix``)."""
    parent, kind, axis, base, origin_joint, link, coordinate, com = nodes
    count, d = parent.shape[0], q.shape[0]
    q_dual = q.reshape(1, d)
    origin_dual = origin.reshape(1, origin.shape[0], 3)
    rotation = np.zeros((1, 3, 3))
    offset = np.zeros((1, 3))
    transforms = np.zeros((count, 6, 6))
    composite = np.zeros((count, 6, 6))
    for node in range(count):
        _placement(nodes, node, origin_dual, q_dual, rotation, offset)
        r, t = rotation[0], offset[0]
        skew_t = np.array([[0.0, -t[2], t[1]], [t[2], 0.0, -t[0]], [-t[1], t[0], 0.0]])
        transforms[node, :3, :3] = r.T
        transforms[node, 3:, 3:] = r.T
        transforms[node, 3:, :3] = -r.T @ skew_t
        body = link[node]
        if body >= 0:
            m, c = mass[body], com[node]
            skew_c = np.array([[0.0, -c[2], c[1]], [c[2], 0.0, -c[0]], [-c[1], c[0], 0.0]])
            composite[node, :3, :3] = inertia[body] + m * skew_c @ skew_c.T
            composite[node, :3, 3:] = m * skew_c
            composite[node, 3:, :3] = m * skew_c.T
            for i in range(3):
                composite[node, 3 + i, 3 + i] = m
    for node in range(count - 1, -1, -1):
        p = parent[node]
        if p >= 0:
            x = transforms[node]
            composite[p] += x.T @ composite[node] @ x
    matrix = np.zeros((d, d))
    subspace = np.zeros((count, 6))
    for node in range(count):
        if kind[node] == _REVOLUTE:
            subspace[node, :3] = axis[node]
        elif kind[node] == _PRISMATIC:
            subspace[node, 3:] = axis[node]
    for node in range(count):
        row = coordinate[node]
        if row < 0:
            continue
        f = composite[node] @ subspace[node]
        matrix[row, row] = subspace[node] @ f
        other = node
        while parent[other] >= 0:
            f = transforms[other].T @ f
            other = parent[other]
            column = coordinate[other]
            if column >= 0:
                value = subspace[other] @ f
                matrix[row, column] = value
                matrix[column, row] = value
    return matrix
