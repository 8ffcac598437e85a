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
masses, centres of mass, inertias, joint origins and axes, contact parameters), so one pass
gives a Jacobian of K columns.

Joint axes enter as directions (``joint_axis``, any nonzero length): the recursions use the
unit vector a = u / |u| (:func:`unit_axes`), whose tangent (I - a aᵀ) δu / |u| is the
normalization's derivative, so a design may move an axis freely and stays a rotation about
(or a slide along) a unit vector.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from .contact import COEFFICIENTS, pair_force
from .model import JOINT_TYPES, RigidModel

__all__ = ["NodeTable", "bias_forces", "dual", "dual_rows", "inverse_dynamics",
           "inverse_dynamics_tangents", "link_frames", "link_frames_dual", "mass_matrix",
           "node_table", "unit_axes"]

_REVOLUTE, _PRISMATIC, _FIXED = 0, 1, 2
_AXES = np.eye(3)


class NodeTable(NamedTuple):
    """A model's joints as elementary nodes in tree order (N nodes).

    Attributes:
        parent: parent node, -1 for the world, (N,).
        kind: 0 revolute, 1 prismatic, 2 fixed, (N,).
        axis: unit axis in the node's joint frame, (N, 3): the model's for a node of a
            revolute or prismatic joint (replaced by the parameters' ``joint_axis``, see
            ``axis_joint``), constant for a free joint's nodes, zero for a fixed one.
        rotation: constant orientation of the joint frame in the parent node's frame, (N, 3, 3).
        origin_joint: the joint whose ``joint_origin`` is the node's offset in its parent's
            frame, -1 for none (the inner nodes of a free joint), (N,).
        link: the link whose mass the node carries, -1 for none, (N,).
        coordinate: the node's coordinate in ``joint_q``, -1 for a fixed node, (N,).
        link_node: each link's node, (n,).
        axis_joint: the joint whose ``joint_axis`` is the node's axis, -1 for a constant
            axis (a free joint's nodes, a fixed node), (N,).
    """

    parent: np.ndarray
    kind: np.ndarray
    axis: np.ndarray
    rotation: np.ndarray
    origin_joint: np.ndarray
    link: np.ndarray
    coordinate: np.ndarray
    link_node: np.ndarray
    axis_joint: np.ndarray


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
                             i if k == 0 else -1, i if k == 5 else -1, coordinate, -1))
                parent = len(rows) - 1
        else:
            node_kind = {"revolute": _REVOLUTE, "prismatic": _PRISMATIC, "fixed": _FIXED}[name]
            moving = node_kind != _FIXED
            rows.append((parent, node_kind, model.joint_axis[i] if moving else np.zeros(3),
                         model.joint_rotation[i], i, i, start if moving else -1,
                         i if moving else -1))
        link_node[i] = len(rows) - 1
    columns = list(zip(*rows, strict=True))
    return NodeTable(parent=np.array(columns[0], dtype=np.int64),
                     kind=np.array(columns[1], dtype=np.int64),
                     axis=np.array(columns[2], dtype=np.float64),
                     rotation=np.array(columns[3], dtype=np.float64),
                     origin_joint=np.array(columns[4], dtype=np.int64),
                     link=np.array(columns[5], dtype=np.int64),
                     coordinate=np.array(columns[6], dtype=np.int64),
                     link_node=link_node,
                     axis_joint=np.array(columns[7], dtype=np.int64))


def unit_axes(direction, tangent=None, rows: int = 1) -> np.ndarray:
    """Dual unit joint axes (K+1, n, 3) of axis directions ``direction`` (n, 3) (any
    nonzero length) with their (K, n, 3) tangents (None: zero), ``rows`` = K+1: a = u / |u|,
    δa = (δu - a (a · δu)) / |u|. A zero direction gives NaN rows (the simulator refuses it
    first, :meth:`~sim_rigid.simulator.RigidSimulator.parameters`)."""
    direction = dual(np.asarray(direction, dtype=np.float64), tangent, rows)
    with np.errstate(invalid="ignore", divide="ignore"):
        norm = np.linalg.norm(direction[0], axis=-1)[:, None]
        axis = np.empty_like(direction)
        axis[0] = direction[0] / norm
        along = np.einsum("ni,kni->kn", axis[0], direction[1:])
        axis[1:] = (direction[1:] - along[..., None] * axis[0]) / norm
    return axis


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


def _node_axis(table: NodeTable, axis, node: int) -> np.ndarray:
    """The node's dual unit axis (K+1, 3) from the dual joint axes (K+1, n, 3)
    (:func:`unit_axes`); a constant axis has zero tangents."""
    joint = table.axis_joint[node]
    if joint >= 0:
        return axis[:, joint]
    out = np.zeros((axis.shape[0], 3))
    out[0] = table.axis[node]
    return out


def _node_placements(table: NodeTable, origin, axis, q):
    """Per node, the dual rotation from its frame to its parent's (K+1, 3, 3) and the dual
    position of its origin in the parent's frame (K+1, 3), from dual joint origins
    (K+1, n, 3), dual unit joint axes (K+1, n, 3) and dual coordinates (K+1, d)."""
    rows = q.shape[0]
    placements = []
    for node in range(len(table.parent)):
        kind, base = table.kind[node], table.rotation[node]
        joint, coordinate = table.origin_joint[node], table.coordinate[node]
        offset = origin[:, joint] if joint >= 0 else np.zeros((rows, 3))
        rotation = np.zeros((rows, 3, 3))
        rotation[0] = base
        node_axis = _node_axis(table, axis, node)
        if kind == _REVOLUTE:
            # base (I + sin θ K + (1 - cos θ) K²), K = [a]×: along θ its derivative is the
            # value times K; along the axis, base (sin θ δK + (1 - cos θ)(δK K + K δK))
            angle = q[:, coordinate]
            sin, cos = np.sin(angle[0]), np.cos(angle[0])
            skew = _skew(node_axis[0])
            turn = np.eye(3) + sin * skew + (1.0 - cos) * skew @ skew
            rotation[0] = base @ turn
            turns = np.array([_skew(a) for a in node_axis[1:]]).reshape(-1, 3, 3)
            rotation[1:] = (angle[1:, None, None] * (rotation[0] @ skew)
                            + base @ (sin * turns + (1.0 - cos) * (turns @ skew
                                                                   + skew @ turns)))
        elif kind == _PRISMATIC:
            offset = offset + _scale(q[:, coordinate], node_axis @ base.T)
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
        params: :data:`~sim_rigid.model.PARAMETERS` (``link_mass``, ``link_com``,
            ``link_inertia``, ``joint_origin``, ``joint_axis`` (directions, normalized
            here), the contact points and coefficients; damping is not part of the
            rigid-body dynamics).
        q, qd, qdd: coordinates [rad or m], rates, accelerations, each (d,).
        tangents: K input directions, by name: ``q``, ``qd``, ``qdd`` (K, d), ``link_mass``
            (K, n), ``link_com`` (K, n, 3), ``link_inertia`` (K, n, 3, 3), ``joint_origin``
            (K, n, 3), ``joint_axis`` (K, n, 3, of the directions),
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
    com = dual(params["link_com"], tangents.get("link_com"), rows)
    inertia = dual(params["link_inertia"], tangents.get("link_inertia"), rows)
    origin = dual(params["joint_origin"], tangents.get("joint_origin"), rows)
    axis = unit_axes(params["joint_axis"], tangents.get("joint_axis"), rows)
    placements = _node_placements(table, origin, axis, q_d)
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
        s_w, s_v = _motion_subspace(table, node, axis)
        coordinate = table.coordinate[node]
        rate = qd_d[:, coordinate] if coordinate >= 0 else np.zeros(rows)
        accel = qdd_d[:, coordinate] if coordinate >= 0 else np.zeros(rows)
        w[node] = _rotate(rotation, w_p, transpose=True) + _scale(rate, s_w)
        v[node] = _rotate(rotation, v_p + _cross(w_p, offset), transpose=True) \
            + _scale(rate, s_v)
        dw[node] = (_rotate(rotation, dw_p, transpose=True) + _scale(accel, s_w)
                    + _cross(w[node], _scale(rate, s_w)))
        dv[node] = (_rotate(rotation, dv_p + _cross(dw_p, offset), transpose=True)
                    + _scale(accel, s_v) + _cross(w[node], _scale(rate, s_v))
                    + _cross(v[node], _scale(rate, s_w)))
        link = table.link[node]
        if link >= 0:
            torque[node], force[node] = _body_force(
                mass[:, link], inertia[:, link], com[:, link],
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
        s_w, s_v = _motion_subspace(table, node, axis)
        coordinate = table.coordinate[node]
        if coordinate >= 0:
            tau[:, coordinate] = _dot(torque[node], s_w) + _dot(force[node], s_v)
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


def _motion_subspace(table: NodeTable, node: int, axis):
    """Dual (s_ω, s_v), each (K+1, 3): the node's motion per unit rate in its own frame,
    from the dual unit joint axes (K+1, n, 3)."""
    node_axis = _node_axis(table, axis, node)
    zero = np.zeros_like(node_axis)
    kind = table.kind[node]
    return (node_axis, zero) if kind == _REVOLUTE else (
        zero, node_axis if kind == _PRISMATIC else zero)


def _dot(a, b):
    """a · b (K+1,) for dual vectors (K+1, 3)."""
    out = a @ b[0]
    out[1:] += b[1:] @ a[0]
    return out


def _body_force(mass, inertia, com, w, v, dw, dv):
    """Dual spatial force (n, f) at the frame origin, I A + V ×* I V, of a body of dual mass
    (K+1,), dual inertia about its centre of mass (K+1, 3, 3) and dual centre of mass
    (K+1, 3) in its frame."""
    accel_com = dv + _cross(dw, com)          # classical-free: a + α × c
    speed_com = v + _cross(w, com)
    p_dot = _scale(mass, accel_com)
    p = _scale(mass, speed_com)
    n = _rotate(inertia, dw) + _cross(com, p_dot)
    momentum = _rotate(inertia, w) + _cross(com, p)
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
    axis = unit_axes(params["joint_axis"])
    placements = _node_placements(table, np.asarray(params["joint_origin"])[None], axis, q_d)
    count_nodes = len(table.parent)
    transforms = [_motion_transform(r[0], t[0]) for r, t in placements]
    composite = [np.zeros((6, 6)) if table.link[node] < 0 else
                 _spatial_inertia(params["link_mass"][table.link[node]],
                                  params["link_com"][table.link[node]],
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
        subspace = np.concatenate([s[0] for s in _motion_subspace(table, node, axis)])
        force = composite[node] @ subspace
        matrix[row, row] = subspace @ force
        other = node
        while table.parent[other] >= 0:
            force = transforms[other].T @ force
            other = table.parent[other]
            column = table.coordinate[other]
            if column >= 0:
                matrix[row, column] = matrix[column, row] = np.concatenate(
                    [s[0] for s in _motion_subspace(table, other, axis)]) @ force
    return matrix


def link_frames_dual(model: RigidModel, origin, q, *,
                     axis=None) -> tuple[np.ndarray, np.ndarray]:
    """Dual world orientations (link frame to world, (K+1, n, 3, 3)) and origins [m]
    (K+1, n, 3) of the link frames from dual joint origins (K+1, n, 3) [m], dual
    coordinates (K+1, d) (:func:`dual`) and dual unit joint axes (K+1, n, 3)
    (:func:`unit_axes`; None: the model's, constant): row 0 the frames, rows 1..K their
    tangents."""
    table = node_table(model)
    q = np.asarray(q, dtype=np.float64)
    if axis is None:
        axis = unit_axes(model.joint_axis, rows=q.shape[0])
    placements = _node_placements(table, np.asarray(origin, dtype=np.float64), axis, q)
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
    [m] (n, 3) of the link frames at coordinates ``q`` (d,), from ``params``'
    ``joint_origin`` and ``joint_axis`` (default the model's)."""
    rotations, origins = link_frames_dual(
        model, np.asarray(params["joint_origin"])[None], np.asarray(q, dtype=np.float64)[None],
        axis=unit_axes(params.get("joint_axis", model.joint_axis)))
    return rotations[0], origins[0]
