"""Rigid-body dynamics in reduced coordinates (Featherstone): the recursive Newton-Euler
algorithm (inverse dynamics, bias forces) with forward-mode tangents, the composite-rigid-body
algorithm (mass matrix), and forward kinematics.

The equations of motion are ``M(q) q̈ + C(q, q̇) = τ``: :func:`inverse_dynamics` gives the
left side for any q̈ (``C``, gravity included, is its value at q̈ = 0: :func:`bias_forces`),
:func:`mass_matrix` gives ``M``. Every joint is expanded into elementary nodes of at most one
coordinate (:func:`node_table`: a free joint becomes three prismatic and three revolute
nodes, the first five massless), so the recursions only know revolute, prismatic and fixed
nodes with constant axes.

Spatial vectors are kept as pairs of 3-vectors in the node's own frame at its origin:
motion (ω, v) and force (n, f), Featherstone's convention (v the velocity of the point at
the frame origin, accelerations spatial, not classical).

Derivatives are exact forward-mode tangents carried through the same recursion
(:func:`inverse_dynamics_tangents`): each quantity is an array whose row 0 is its value and
rows 1..K its derivatives along K input directions (coordinates, rates, accelerations,
masses, inertias, joint origins), so one pass gives a Jacobian of K columns.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from .contact import COEFFICIENTS, pair_force
from .model import JOINT_TYPES, RigidModel

__all__ = ["NodeTable", "bias_forces", "dual", "dual_rows", "inverse_dynamics",
           "inverse_dynamics_tangents", "link_frames", "link_frames_dual", "mass_matrix",
           "node_table"]

_REVOLUTE, _PRISMATIC, _FIXED = 0, 1, 2
_AXES = np.eye(3)


class NodeTable(NamedTuple):
    """A model's joints as elementary nodes in tree order (N nodes).

    Attributes:
        parent: parent node, -1 for the world, (N,).
        kind: 0 revolute, 1 prismatic, 2 fixed, (N,).
        axis: unit axis in the node's joint frame, (N, 3).
        rotation: constant orientation of the joint frame in the parent node's frame, (N, 3, 3).
        origin_joint: the joint whose ``joint_origin`` is the node's offset in its parent's
            frame, -1 for none (the inner nodes of a free joint), (N,).
        link: the link whose mass the node carries, -1 for none, (N,).
        coordinate: the node's coordinate in ``joint_q``, -1 for a fixed node, (N,).
        link_node: each link's node, (n,).
    """

    parent: np.ndarray
    kind: np.ndarray
    axis: np.ndarray
    rotation: np.ndarray
    origin_joint: np.ndarray
    link: np.ndarray
    coordinate: np.ndarray
    link_node: np.ndarray


@functools.cache
def node_table(model: RigidModel) -> NodeTable:
    """The elementary nodes of ``model`` (cached per model: models are immutable)."""
    rows: list[tuple] = []
    link_node = np.empty(model.link_count, dtype=np.int64)
    first = model.joint_first
    for i, kind in enumerate(model.joint_type):
        parent = -1 if model.joint_parent[i] < 0 else int(link_node[model.joint_parent[i]])
        name, start = JOINT_TYPES[kind], int(first[i])
        if name == "free":
            # translation x, y, z then rotations z, y, x: the link turned by Rz Ry Rx
            steps = [(_PRISMATIC, _AXES[k], start + k) for k in range(3)]
            steps += [(_REVOLUTE, _AXES[2 - k], start + 3 + k) for k in range(3)]
            for k, (node_kind, axis, coordinate) in enumerate(steps):
                rows.append((parent, node_kind, axis,
                             model.joint_rotation[i] if k == 0 else np.eye(3),
                             i if k == 0 else -1, i if k == 5 else -1, coordinate))
                parent = len(rows) - 1
        else:
            node_kind = {"revolute": _REVOLUTE, "prismatic": _PRISMATIC, "fixed": _FIXED}[name]
            rows.append((parent, node_kind, model.joint_axis[i] if node_kind != _FIXED
                         else np.zeros(3), model.joint_rotation[i], i, i,
                         start if node_kind != _FIXED else -1))
        link_node[i] = len(rows) - 1
    columns = list(zip(*rows, strict=True))
    return NodeTable(parent=np.array(columns[0], dtype=np.int64),
                     kind=np.array(columns[1], dtype=np.int64),
                     axis=np.array(columns[2], dtype=np.float64),
                     rotation=np.array(columns[3], dtype=np.float64),
                     origin_joint=np.array(columns[4], dtype=np.int64),
                     link=np.array(columns[5], dtype=np.int64),
                     coordinate=np.array(columns[6], dtype=np.int64),
                     link_node=link_node)


# -- dual arrays: row 0 the value, rows 1..K the tangents -----------------------------------

def _cross(a, b):
    """a × b for dual 3-vectors (K+1, 3) (product rule on the tangent rows)."""
    out = np.cross(a[0], b)
    out[1:] += np.cross(a[1:], b[0])
    return out


def _rotate(rotation, x, *, transpose=False):
    """R x (or Rᵀ x) for dual rotations (K+1, 3, 3) and dual vectors (K+1, 3)."""
    pattern = "kji,kj->ki" if transpose else "kij,kj->ki"
    head = "ji,kj->ki" if transpose else "ij,kj->ki"
    out = np.einsum(head, rotation[0], x)
    out[1:] += np.einsum(pattern, rotation[1:], np.broadcast_to(x[0], x[1:].shape))
    return out


def _matmul(a, b):
    """A B for dual matrices (K+1, 3, 3)."""
    out = a[0] @ b
    out[1:] += a[1:] @ b[0]
    return out


def _scale(s, x):
    """s x for a dual scalar (K+1,) and a dual vector (K+1, 3)."""
    out = s[0] * x
    out[1:] += s[1:, None] * x[0]
    return out


def _skew(a):
    return np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])


def _node_placements(table: NodeTable, origin, q):
    """Per node, the dual rotation from its frame to its parent's (K+1, 3, 3) and the dual
    position of its origin in the parent's frame (K+1, 3), from dual joint origins
    (K+1, n, 3) and dual coordinates (K+1, d)."""
    rows = q.shape[0]
    placements = []
    for node in range(len(table.parent)):
        kind, axis, base = table.kind[node], table.axis[node], table.rotation[node]
        joint, coordinate = table.origin_joint[node], table.coordinate[node]
        offset = origin[:, joint] if joint >= 0 else np.zeros((rows, 3))
        rotation = np.zeros((rows, 3, 3))
        rotation[0] = base
        if kind == _REVOLUTE:
            angle = q[:, coordinate]
            skew = _skew(axis)
            turn = np.eye(3) + np.sin(angle[0]) * skew + (1.0 - np.cos(angle[0])) * skew @ skew
            rotation[0] = base @ turn
            rotation[1:] = angle[1:, None, None] * (rotation[0] @ skew)
        elif kind == _PRISMATIC:
            offset = offset + np.outer(q[:, coordinate], base @ axis)
        placements.append((rotation, offset))
    return placements


def dual_rows(tangents: dict) -> int:
    """K+1 for tangents that each hold K input directions along their first axis (1 for no
    tangents): the rows of every dual array built from them."""
    count = {np.shape(v)[0] for v in tangents.values()}
    if len(count) > 1:
        raise ValueError(f"every tangent needs the same number of directions, got {count}; "
                         f"give each tangent array the same first dimension K")
    return 1 + (count.pop() if count else 0)


def dual(value, tangent, rows: int) -> np.ndarray:
    """Stack a value and its (K, ...) tangent (None: zero) into a dual array (K+1, ...),
    ``rows`` = K+1 (:func:`dual_rows`)."""
    out = np.zeros((rows,) + np.shape(value))
    out[0] = value
    if tangent is not None:
        out[1:] = tangent
    return out


def inverse_dynamics_tangents(model: RigidModel, params: dict, q, qd, qdd, *,
                              tangents: dict | None = None) -> np.ndarray:
    """Joint forces τ = M(q) q̈ + C(q, q̇) [N m or N] and their directional derivatives.

    Args:
        model: the robot.
        params: :data:`~sim_rigid.model.PARAMETERS` (``link_mass``, ``link_inertia``,
            ``joint_origin``, the contact points and coefficients; damping is not part of
            the rigid-body dynamics).
        q, qd, qdd: coordinates [rad or m], rates, accelerations, each (d,).
        tangents: K input directions, by name: ``q``, ``qd``, ``qdd`` (K, d), ``link_mass``
            (K, n), ``link_inertia`` (K, n, 3, 3), ``joint_origin`` (K, n, 3),
            ``contact_point`` (K, c, 3), ``contact_area`` (K, c), each contact coefficient of
            :data:`~sim_rigid.contact.COEFFICIENTS` (K,); a missing name is zero along every
            direction. All given arrays share K.

    Returns:
        (K+1, d): row 0 is τ, row k the derivative of τ along direction k.
    """
    tangents = tangents or {}
    rows = dual_rows(tangents)
    table = node_table(model)
    q_d, qd_d, qdd_d = (dual(np.asarray(x, dtype=np.float64), tangents.get(name), rows)
                        for name, x in (("q", q), ("qd", qd), ("qdd", qdd)))
    mass = dual(params["link_mass"], tangents.get("link_mass"), rows)
    inertia = dual(params["link_inertia"], tangents.get("link_inertia"), rows)
    origin = dual(params["joint_origin"], tangents.get("joint_origin"), rows)
    placements = _node_placements(table, origin, q_d)
    zero = np.zeros((rows, 3))
    gravity_acceleration = np.zeros((rows, 3))
    gravity_acceleration[0] = -model.gravity  # the base accelerates up: gravity on every link
    count_nodes = len(table.parent)
    w, v, dw, dv = ([None] * count_nodes for _ in range(4))
    torque, force = [None] * count_nodes, [None] * count_nodes
    for node in range(count_nodes):
        parent, (rotation, offset) = table.parent[node], placements[node]
        if parent < 0:
            w_p, v_p, dw_p, dv_p = zero, zero, zero, gravity_acceleration
        else:
            w_p, v_p, dw_p, dv_p = w[parent], v[parent], dw[parent], dv[parent]
        s_w, s_v = _motion_subspace(table, node)
        coordinate = table.coordinate[node]
        rate = qd_d[:, coordinate] if coordinate >= 0 else np.zeros(rows)
        accel = qdd_d[:, coordinate] if coordinate >= 0 else np.zeros(rows)
        w[node] = _rotate(rotation, w_p, transpose=True) + np.outer(rate, s_w)
        v[node] = _rotate(rotation, v_p + _cross(w_p, offset), transpose=True) \
            + np.outer(rate, s_v)
        dw[node] = (_rotate(rotation, dw_p, transpose=True) + np.outer(accel, s_w)
                    + _cross(w[node], np.outer(rate, s_w)))
        dv[node] = (_rotate(rotation, dv_p + _cross(dw_p, offset), transpose=True)
                    + np.outer(accel, s_v) + _cross(w[node], np.outer(rate, s_v))
                    + _cross(v[node], np.outer(rate, s_w)))
        link = table.link[node]
        if link >= 0:
            torque[node], force[node] = _body_force(
                mass[:, link], inertia[:, link], model.link_com[link],
                w[node], v[node], dw[node], dv[node])
        else:
            torque[node], force[node] = np.zeros((rows, 3)), np.zeros((rows, 3))
    if len(model.contact_link):
        points = dual(params["contact_point"], tangents.get("contact_point"), rows)
        coefficients = np.stack([dual(params[name], tangents.get(name), rows)
                                 for name in COEFFICIENTS], axis=1)
        area = dual(params["contact_area"], tangents.get("contact_area"), rows)
        _apply_contacts(model, table, placements, points, coefficients, area, w, v, torque,
                        force)
    tau = np.zeros((rows, model.coordinate_count))
    for node in range(count_nodes - 1, -1, -1):
        s_w, s_v = _motion_subspace(table, node)
        coordinate = table.coordinate[node]
        if coordinate >= 0:
            tau[:, coordinate] = torque[node] @ s_w + force[node] @ s_v
        parent = table.parent[node]
        if parent >= 0:
            rotation, offset = placements[node]
            f_parent = _rotate(rotation, force[node])
            torque[parent] = torque[parent] + _rotate(rotation, torque[node]) \
                + _cross(offset, f_parent)
            force[parent] = force[parent] + f_parent
    return tau


def _apply_contacts(model, table, placements, points, coefficients, area, w, v, torque,
                    force):
    """Subtract each contact point's force (:func:`sim_rigid.contact.pair_force`, for every
    obstacle not on the point's link) from its node's body force and add the reaction to
    the obstacle's link, so the recursion's joint forces become M q̈ + C - Jᵀ f; dual points
    (K+1, c, 3) in their links' frames, coefficients (K+1, 4) and areas (K+1, c)."""
    world_rotation, world_origin = [], []
    for node, (rotation, offset) in enumerate(placements):
        parent = table.parent[node]
        if parent < 0:
            world_rotation.append(rotation)
            world_origin.append(offset)
        else:
            world_rotation.append(_matmul(world_rotation[parent], rotation))
            world_origin.append(world_origin[parent] + _rotate(world_rotation[parent], offset))
    bodies = {}
    for link in set(model.obstacle_link.tolist()) - {-1}:
        node = table.link_node[link]
        rotation = world_rotation[node]
        bodies[link] = (rotation, world_origin[node], _rotate(rotation, w[node]),
                        _rotate(rotation, v[node]))
    for index, link in enumerate(model.contact_link):
        node, point = table.link_node[link], points[:, index]
        rotation = world_rotation[node]
        x = world_origin[node] + _rotate(rotation, point)
        xdot = _rotate(rotation, v[node] + _cross(w[node], point))
        for obstacle, other in enumerate(model.obstacle_link):
            if other == link:
                continue
            world_force = pair_force(model, obstacle, coefficients, area[:, index], x, xdot,
                                     bodies.get(int(other)))
            if world_force is None:
                continue
            body = _rotate(rotation, world_force, transpose=True)
            force[node] = force[node] - body
            torque[node] = torque[node] - _cross(point, body)
            if other >= 0:  # the reaction -f at x on the obstacle's link
                other_rotation, other_origin = bodies[int(other)][:2]
                other_node = table.link_node[other]
                reaction = _rotate(other_rotation, world_force, transpose=True)
                lever = _rotate(other_rotation, x - other_origin, transpose=True)
                force[other_node] = force[other_node] + reaction
                torque[other_node] = torque[other_node] + _cross(lever, reaction)


def _motion_subspace(table: NodeTable, node: int):
    """(s_ω, s_v): the node's motion per unit rate in its own frame."""
    axis, kind = table.axis[node], table.kind[node]
    zero = np.zeros(3)
    return (axis, zero) if kind == _REVOLUTE else (zero, axis if kind == _PRISMATIC else zero)


def _body_force(mass, inertia, com, w, v, dw, dv):
    """Dual spatial force (n, f) at the frame origin, I A + V ×* I V, of a body of dual mass
    (K+1,), dual inertia about its centre of mass (K+1, 3, 3) and constant centre ``com``."""
    accel_com = dv + np.cross(dw, com)          # classical-free: a + α × c
    speed_com = v + np.cross(w, com)
    p_dot = _scale(mass, accel_com)
    p = _scale(mass, speed_com)
    n = _rotate(inertia, dw) + np.cross(com, p_dot)
    momentum = _rotate(inertia, w) + np.cross(com, p)
    return n + _cross(w, momentum) + _cross(v, p), p_dot + _cross(w, p)


def inverse_dynamics(model: RigidModel, params: dict, q, qd, qdd) -> np.ndarray:
    """τ = M(q) q̈ + C(q, q̇) [N m or N], (d,), gravity included (no damping)."""
    return inverse_dynamics_tangents(model, params, q, qd, qdd)[0]


def bias_forces(model: RigidModel, params: dict, q, qd) -> np.ndarray:
    """C(q, q̇) [N m or N], (d,): Coriolis, centrifugal and gravity forces, the inverse
    dynamics at zero acceleration."""
    return inverse_dynamics(model, params, q, qd, np.zeros(model.coordinate_count))


def _motion_transform(rotation, offset):
    """6x6 transform of motion vectors (ω, v) from a parent's frame to the child's."""
    out = np.zeros((6, 6))
    out[:3, :3] = out[3:, 3:] = rotation.T
    out[3:, :3] = -rotation.T @ _skew(offset)
    return out


def _spatial_inertia(mass, com, inertia):
    """6x6 spatial inertia at the frame origin of a body with its centre at ``com``."""
    c = _skew(com)
    out = np.zeros((6, 6))
    out[:3, :3] = inertia + mass * c @ c.T
    out[:3, 3:] = mass * c
    out[3:, :3] = mass * c.T
    out[3:, 3:] = mass * np.eye(3)
    return out


def mass_matrix(model: RigidModel, params: dict, q) -> np.ndarray:
    """M(q) [kg m² / kg], (d, d), symmetric positive definite away from singular poses, by
    the composite-rigid-body algorithm."""
    table = node_table(model)
    q_d = np.asarray(q, dtype=np.float64)[None]
    placements = _node_placements(table, np.asarray(params["joint_origin"])[None], q_d)
    count_nodes = len(table.parent)
    transforms = [_motion_transform(r[0], t[0]) for r, t in placements]
    composite = [np.zeros((6, 6)) if table.link[node] < 0 else
                 _spatial_inertia(params["link_mass"][table.link[node]],
                                  model.link_com[table.link[node]],
                                  params["link_inertia"][table.link[node]])
                 for node in range(count_nodes)]
    for node in range(count_nodes - 1, -1, -1):
        parent = table.parent[node]
        if parent >= 0:
            x = transforms[node]
            composite[parent] = composite[parent] + x.T @ composite[node] @ x
    d = model.coordinate_count
    matrix = np.zeros((d, d))
    for node in range(count_nodes):
        row = table.coordinate[node]
        if row < 0:
            continue
        subspace = np.concatenate(_motion_subspace(table, node))
        force = composite[node] @ subspace
        matrix[row, row] = subspace @ force
        other = node
        while table.parent[other] >= 0:
            force = transforms[other].T @ force
            other = table.parent[other]
            column = table.coordinate[other]
            if column >= 0:
                matrix[row, column] = matrix[column, row] = \
                    np.concatenate(_motion_subspace(table, other)) @ force
    return matrix


def link_frames_dual(model: RigidModel, origin, q) -> tuple[np.ndarray, np.ndarray]:
    """Dual world orientations (link frame to world, (K+1, n, 3, 3)) and origins [m]
    (K+1, n, 3) of the link frames from dual joint origins (K+1, n, 3) [m] and dual
    coordinates (K+1, d) (:func:`dual`): row 0 the frames, rows 1..K their tangents."""
    table = node_table(model)
    placements = _node_placements(table, np.asarray(origin, dtype=np.float64),
                                  np.asarray(q, dtype=np.float64))
    rotations, origins = [], []
    for node, (rotation, offset) in enumerate(placements):
        parent = table.parent[node]
        if parent < 0:
            rotations.append(rotation)
            origins.append(offset)
        else:
            rotations.append(_matmul(rotations[parent], rotation))
            origins.append(origins[parent] + _rotate(rotations[parent], offset))
    return (np.stack([rotations[k] for k in table.link_node], axis=1),
            np.stack([origins[k] for k in table.link_node], axis=1))


def link_frames(model: RigidModel, params: dict, q) -> tuple[np.ndarray, np.ndarray]:
    """World orientations (rotation matrices, link frame to world, (n, 3, 3)) and origins
    [m] (n, 3) of the link frames at coordinates ``q`` (d,)."""
    rotations, origins = link_frames_dual(model, np.asarray(params["joint_origin"])[None],
                                          np.asarray(q, dtype=np.float64)[None])
    return rotations[0], origins[0]
