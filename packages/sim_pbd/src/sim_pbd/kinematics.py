"""Joint space <-> link poses, with VJPs: forward kinematics and joint positions from states;
the state at joint positions and rates.

Conventions (shared with :mod:`sim_pbd.step`): joint j's frame sits on its parent at origin
``x_P + R_P joint_parent_x`` with orientation ``q_P ⊗ joint_parent_q`` and on its child at
``x_C + R_C joint_child_x`` with orientation ``q_C ⊗ joint_child_q``. At joint position 0 the
two frames coincide; a revolute joint at angle θ rotates the child's joint frame by θ about
``joint_axis`` (joint frame), a prismatic joint at s moves its origin by s along the axis.

Joint angles are read robustly: θ = atan2(a·(e_P × e_C), e_P·e_C), with a the axis and e_P,
e_C a unit vector perpendicular to it carried by the parent's and the child's joint frame, so
θ is continuous on (-π, π] with no arcsin branch to pick (the paper's Algorithm 2 reads
arcsin of a cross product and patches its branches). Rates are the relative angular velocity
about the parent's axis (revolute) and the time derivative of s (prismatic).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .model import JOINT_TYPES, PBDModel
from .rotations import (
    quat_conjugate,
    quat_from_axis_angle,
    quat_from_axis_angle_vjp,
    quat_multiply,
    quat_multiply_vjp,
    quat_normalize,
    quat_normalize_vjp,
    quat_rotate,
    quat_rotate_rows,
    quat_rotate_vjp,
    quat_to_matrix,
    quat_to_matrix_vjp,
)
from .state import PBDState

__all__ = [
    "JointFrames",
    "joint_origins",
    "joint_frames",
    "joint_coordinate",
    "joint_coordinate_vjp",
    "joint_jacobian",
    "joint_jacobian_vjp",
    "link_matrices",
    "link_matrices_vjp",
    "forward_kinematics",
    "forward_kinematics_vjp",
    "joint_positions",
    "state_at_joints",
    "joint_positions_vjp",
]

PRISMATIC = JOINT_TYPES.index("prismatic")
_IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])


class JointFrames(NamedTuple):
    """Constant body-frame vectors of every joint, shapes (m, 3) unless noted.

    Attributes:
        parent_axis: the joint axis in the parent's body frame (the world for parent -1).
        child_axis: the joint axis in the child's body frame.
        parent_normal: a unit vector perpendicular to the axis, parent's body frame.
        child_normal: the same joint-frame vector in the child's body frame.
        parent_rotation: the joint frame's orientation in the parent's body frame as a
            matrix, (m, 3, 3).
        child_rotation: the joint frame's orientation in the child's body frame, (m, 3, 3).
        prismatic: True for prismatic joints, (m,) bool.
        order: joint indices sorted so that every parent link is placed before its
            children, (m,) int64.
    """

    parent_axis: np.ndarray
    child_axis: np.ndarray
    parent_normal: np.ndarray
    child_normal: np.ndarray
    parent_rotation: np.ndarray
    child_rotation: np.ndarray
    prismatic: np.ndarray
    order: np.ndarray


def _perpendicular(axis) -> np.ndarray:
    helper = np.eye(3)[int(np.argmin(np.abs(axis)))]
    normal = np.cross(axis, helper)
    return normal / np.linalg.norm(normal)


def joint_frames(model: PBDModel) -> JointFrames:
    """The joints' axes, normals and frame rotations in their two links' body frames, and
    the tree order."""
    m = model.joint_count
    frames = {name: np.zeros((m, 3)) for name in JointFrames._fields[:4]}
    for j in range(m):
        axis = np.asarray(model.joint_axis[j], dtype=np.float64)
        normal = _perpendicular(axis)
        frames["parent_axis"][j] = quat_rotate(model.joint_parent_q[j], axis)
        frames["child_axis"][j] = quat_rotate(model.joint_child_q[j], axis)
        frames["parent_normal"][j] = quat_rotate(model.joint_parent_q[j], normal)
        frames["child_normal"][j] = quat_rotate(model.joint_child_q[j], normal)
    # the model holds joint_parent < joint_child, so child order places parents first
    order = np.argsort(model.joint_child, kind="stable")
    rotations = {
        name: np.array([quat_to_matrix(q) for q in quats]).reshape(m, 3, 3)
        for name, quats in (("parent_rotation", model.joint_parent_q),
                            ("child_rotation", model.joint_child_q))
    }
    return JointFrames(prismatic=np.asarray(model.joint_type) == PRISMATIC, **rotations,
                       order=order.astype(np.int64), **frames)


def forward_kinematics(model: PBDModel, params, joint_q) -> tuple[np.ndarray, np.ndarray]:
    """Link poses for the joint positions ``joint_q`` [rad or m], shape (m,).

    Returns ``(link_x, link_q)``: centre-of-mass positions [m] (n, 3) and unit orientations
    (n, 4). ``params`` holds ``joint_parent_x`` and ``joint_child_x`` (m, 3) [m]. A floating
    root (no joint) sits at the world origin with the identity orientation."""
    frames = joint_frames(model)
    joint_parent_x = np.asarray(params["joint_parent_x"], dtype=np.float64)
    joint_child_x = np.asarray(params["joint_child_x"], dtype=np.float64)
    n = model.link_count
    link_x = np.zeros((n, 3))
    link_q = np.tile(_IDENTITY, (n, 1))
    for j in frames.order:
        parent, child = model.joint_parent[j], model.joint_child[j]
        parent_x = np.zeros(3) if parent < 0 else link_x[parent]
        parent_q = _IDENTITY if parent < 0 else link_q[parent]
        frame_q = quat_multiply(parent_q, model.joint_parent_q[j])
        origin = parent_x + quat_rotate(parent_q, joint_parent_x[j])
        if frames.prismatic[j]:
            child_frame_q = frame_q
            origin = origin + quat_rotate(frame_q, model.joint_axis[j]) * joint_q[j]
        else:
            child_frame_q = quat_multiply(frame_q, quat_from_axis_angle(model.joint_axis[j],
                                                                        joint_q[j]))
        link_q[child] = quat_multiply(child_frame_q, quat_conjugate(model.joint_child_q[j]))
        link_x[child] = origin - quat_rotate(link_q[child], joint_child_x[j])
    return link_x, link_q


def forward_kinematics_vjp(model: PBDModel, params, joint_q, g_link_x, g_link_q):
    """(∂L/∂joint_q (m,), ∂L/∂params) of :func:`forward_kinematics` given ∂L/∂link_x (n, 3)
    and ∂L/∂link_q (n, 4); the params gradient holds ``joint_parent_x``, ``joint_child_x``."""
    frames = joint_frames(model)
    joint_parent_x = np.asarray(params["joint_parent_x"], dtype=np.float64)
    joint_child_x = np.asarray(params["joint_child_x"], dtype=np.float64)
    link_x, link_q = forward_kinematics(model, params, joint_q)
    g_x = np.array(g_link_x, dtype=np.float64)
    g_q = np.array(g_link_q, dtype=np.float64)
    g_joint_q = np.zeros(model.joint_count)
    g_parent_x = np.zeros_like(joint_parent_x)
    g_child_x = np.zeros_like(joint_child_x)
    for j in frames.order[::-1]:
        parent, child = model.joint_parent[j], model.joint_child[j]
        parent_q = _IDENTITY if parent < 0 else link_q[parent]
        frame_q = quat_multiply(parent_q, model.joint_parent_q[j])
        child_conj = quat_conjugate(model.joint_child_q[j])
        g_origin = g_x[child]
        g_child_q, g_child_x[j] = quat_rotate_vjp(link_q[child], joint_child_x[j], -g_origin)
        g_child_q = g_child_q + g_q[child]
        if frames.prismatic[j]:
            child_frame_q = frame_q
        else:
            turn = quat_from_axis_angle(model.joint_axis[j], joint_q[j])
            child_frame_q = quat_multiply(frame_q, turn)
        g_child_frame_q, _ = quat_multiply_vjp(child_frame_q, child_conj, g_child_q)
        if frames.prismatic[j]:
            g_frame_q, _ = quat_rotate_vjp(frame_q, model.joint_axis[j], g_origin * joint_q[j])
            g_frame_q = g_frame_q + g_child_frame_q
            g_joint_q[j] = g_origin @ quat_rotate(frame_q, model.joint_axis[j])
        else:
            g_frame_q, g_turn = quat_multiply_vjp(frame_q, turn, g_child_frame_q)
            g_joint_q[j] = quat_from_axis_angle_vjp(model.joint_axis[j], joint_q[j], g_turn)
        g_parent_q, g_parent_x[j] = quat_rotate_vjp(parent_q, joint_parent_x[j], g_origin)
        g_parent_q = g_parent_q + quat_multiply_vjp(parent_q, model.joint_parent_q[j],
                                                    g_frame_q)[0]
        if parent >= 0:
            g_x[parent] += g_origin
            g_q[parent] += g_parent_q
    return g_joint_q, {"joint_parent_x": g_parent_x, "joint_child_x": g_child_x}


def joint_coordinate(frames: JointFrames, j: int, x_p, r_p, x_c, r_c, joint_parent_x,
                     joint_child_x) -> float:
    """Joint j's position [rad or m] from its parent's and child's poses.

    ``x_p``, ``x_c`` are centre-of-mass positions [m] (3,), ``r_p``, ``r_c`` rotation
    matrices (3, 3) (the world's: zeros and the identity); ``joint_parent_x``,
    ``joint_child_x`` are joint j's origins in the two body frames [m] (3,)."""
    axis = r_p @ frames.parent_axis[j]
    if frames.prismatic[j]:
        return float(axis @ (x_c + r_c @ joint_child_x - x_p - r_p @ joint_parent_x))
    e_p, e_c = r_p @ frames.parent_normal[j], r_c @ frames.child_normal[j]
    return float(np.arctan2(axis @ np.cross(e_p, e_c), e_p @ e_c))


def joint_coordinate_vjp(frames: JointFrames, j: int, x_p, r_p, x_c, r_c, joint_parent_x,
                         joint_child_x, g: float):
    """Cotangents (x_p, r_p, x_c, r_c, joint_parent_x, joint_child_x) of
    :func:`joint_coordinate` given ∂L/∂(joint position)."""
    axis = r_p @ frames.parent_axis[j]
    g_rp = np.zeros((3, 3))
    g_rc = np.zeros((3, 3))
    g_parent_x, g_child_x = np.zeros(3), np.zeros(3)
    if frames.prismatic[j]:
        gap = x_c + r_c @ joint_child_x - x_p - r_p @ joint_parent_x
        g_axis, g_gap = g * gap, g * axis
        g_rc += np.outer(g_gap, joint_child_x)
        g_rp -= np.outer(g_gap, joint_parent_x)
        g_child_x, g_parent_x = r_c.T @ g_gap, -(r_p.T @ g_gap)
        g_xp, g_xc = -g_gap, g_gap
    else:
        e_p, e_c = r_p @ frames.parent_normal[j], r_c @ frames.child_normal[j]
        cross = np.cross(e_p, e_c)
        sin, cos = axis @ cross, e_p @ e_c
        scale = g / (sin * sin + cos * cos)
        g_sin, g_cos = scale * cos, -scale * sin
        g_axis, g_cross = g_sin * cross, g_sin * axis
        g_rp += np.outer(np.cross(e_c, g_cross) + g_cos * e_c, frames.parent_normal[j])
        g_rc += np.outer(np.cross(g_cross, e_p) + g_cos * e_p, frames.child_normal[j])
        g_xp, g_xc = np.zeros(3), np.zeros(3)
    g_rp += np.outer(g_axis, frames.parent_axis[j])
    return g_xp, g_rp, g_xc, g_rc, g_parent_x, g_child_x


def joint_jacobian(frames: JointFrames, j: int, x_p, r_p, x_c, r_c, joint_child_x):
    """Joint j's rate as ``lin·(v_c - v_p) + ang_c·w_c - ang_p·w_p``: (lin, ang_c, ang_p),
    each (3,).

    Revolute: (0, a, a) with a the parent's world axis. Prismatic: (a, r_c × a, r_p × a)
    with r_c, r_p the levers from each centre of mass to the child's joint origin (the
    material points that slide on each other). A generalized force u along the joint acts as
    force ``lin u`` and torque ``ang_c u`` on the child and the opposite on the parent, so it
    moves no net momentum. Arguments as in :func:`joint_coordinate`."""
    axis = r_p @ frames.parent_axis[j]
    if not frames.prismatic[j]:
        return np.zeros(3), axis, axis
    lever_c = r_c @ joint_child_x
    lever_p = x_c + lever_c - x_p
    return axis, np.cross(lever_c, axis), np.cross(lever_p, axis)


def joint_jacobian_vjp(frames: JointFrames, j: int, x_p, r_p, x_c, r_c, joint_child_x,
                       g_lin, g_ang_c, g_ang_p):
    """Cotangents (x_p, r_p, x_c, r_c, joint_child_x) of :func:`joint_jacobian`."""
    axis = r_p @ frames.parent_axis[j]
    if not frames.prismatic[j]:
        zero = np.zeros(3)
        return (zero, np.outer(g_ang_c + g_ang_p, frames.parent_axis[j]), zero,
                np.zeros((3, 3)), zero)
    lever_c = r_c @ joint_child_x
    lever_p = x_c + lever_c - x_p
    g_axis = g_lin + np.cross(g_ang_c, lever_c) + np.cross(g_ang_p, lever_p)
    g_lever_p = np.cross(axis, g_ang_p)
    g_lever_c = np.cross(axis, g_ang_c) + g_lever_p
    return (-g_lever_p, np.outer(g_axis, frames.parent_axis[j]), g_lever_p,
            np.outer(g_lever_c, joint_child_x), r_c.T @ g_lever_c)


def link_matrices(link_q) -> tuple[np.ndarray, np.ndarray]:
    """(unit quaternions (n, 4), rotation matrices (n, 3, 3)) of ``link_q`` (n, 4)."""
    unit_q = np.array([quat_normalize(q) for q in np.asarray(link_q, dtype=np.float64)])
    unit_q = unit_q.reshape(-1, 4)
    return unit_q, np.array([quat_to_matrix(q) for q in unit_q]).reshape(-1, 3, 3)


def link_matrices_vjp(link_q, g_matrix) -> np.ndarray:
    """∂L/∂link_q (n, 4) of :func:`link_matrices`' matrices given ∂L/∂matrices (n, 3, 3)."""
    q = np.asarray(link_q, dtype=np.float64)
    return np.array([quat_normalize_vjp(q[i], quat_to_matrix_vjp(quat_normalize(q[i]),
                                                                 g_matrix[i]))
                     for i in range(len(q))]).reshape(-1, 4)


def _pose(link_x, matrix, link: int):
    if link < 0:
        return np.zeros(3), np.eye(3)
    return link_x[link], matrix[link]


def _rate(lin, ang_c, ang_p, v_p, w_p, v_c, w_c) -> float:
    return float(lin @ (v_c - v_p) + ang_c @ w_c - ang_p @ w_p)


def _velocities(state: PBDState, link: int):
    if link < 0:
        return np.zeros(3), np.zeros(3)
    return state.link_v[link], state.link_w[link]


def joint_positions(model: PBDModel, params, state: PBDState) -> tuple[np.ndarray, np.ndarray]:
    """Joint positions [rad or m] and rates [rad/s or m/s] from link states, each (m,).

    Orientations are normalized first. ``params`` holds ``joint_parent_x`` and
    ``joint_child_x`` (m, 3) [m] (read by prismatic joints). The rate is
    :func:`joint_jacobian` times the two links' velocities."""
    frames = joint_frames(model)
    joint_parent_x = np.asarray(params["joint_parent_x"], dtype=np.float64)
    joint_child_x = np.asarray(params["joint_child_x"], dtype=np.float64)
    _, matrix = link_matrices(state.link_q)
    m = model.joint_count
    joint_q, joint_qd = np.zeros(m), np.zeros(m)
    for j in range(m):
        parent, child = model.joint_parent[j], model.joint_child[j]
        x_p, r_p = _pose(state.link_x, matrix, parent)
        x_c, r_c = _pose(state.link_x, matrix, child)
        joint_q[j] = joint_coordinate(frames, j, x_p, r_p, x_c, r_c, joint_parent_x[j],
                                      joint_child_x[j])
        jacobian = joint_jacobian(frames, j, x_p, r_p, x_c, r_c, joint_child_x[j])
        joint_qd[j] = _rate(*jacobian, *_velocities(state, parent), *_velocities(state, child))
    return joint_q, joint_qd


def joint_positions_vjp(model: PBDModel, params, state: PBDState, g_joint_q, g_joint_qd):
    """(∂L/∂state, ∂L/∂params) of :func:`joint_positions` given ∂L/∂joint_q and
    ∂L/∂joint_qd (m,); the params gradient holds ``joint_parent_x`` and ``joint_child_x``."""
    frames = joint_frames(model)
    joint_parent_x = np.asarray(params["joint_parent_x"], dtype=np.float64)
    joint_child_x = np.asarray(params["joint_child_x"], dtype=np.float64)
    _, matrix = link_matrices(state.link_q)
    n = model.link_count
    grads = {name: np.zeros((n, 3)) for name in ("x", "v", "w")}
    g_matrix = np.zeros((n, 3, 3))
    g_parent_x = np.zeros_like(joint_parent_x)
    g_child_x = np.zeros_like(joint_child_x)

    def add(link, g_x, g_r, g_v, g_w):
        if link >= 0:
            grads["x"][link] += g_x
            g_matrix[link] += g_r
            grads["v"][link] += g_v
            grads["w"][link] += g_w

    for j in range(model.joint_count):
        parent, child = model.joint_parent[j], model.joint_child[j]
        x_p, r_p = _pose(state.link_x, matrix, parent)
        x_c, r_c = _pose(state.link_x, matrix, child)
        g_xp, g_rp, g_xc, g_rc, g_parent_x[j], g_child_x[j] = joint_coordinate_vjp(
            frames, j, x_p, r_p, x_c, r_c, joint_parent_x[j], joint_child_x[j], g_joint_q[j])
        lin, ang_c, ang_p = joint_jacobian(frames, j, x_p, r_p, x_c, r_c, joint_child_x[j])
        (v_p, w_p), (v_c, w_c) = _velocities(state, parent), _velocities(state, child)
        g_rate = g_joint_qd[j]
        jac_grads = joint_jacobian_vjp(frames, j, x_p, r_p, x_c, r_c, joint_child_x[j],
                                       g_rate * (v_c - v_p), g_rate * w_c, -g_rate * w_p)
        g_child_x[j] += jac_grads[4]
        add(parent, g_xp + jac_grads[0], g_rp + jac_grads[1], -g_rate * lin, -g_rate * ang_p)
        add(child, g_xc + jac_grads[2], g_rc + jac_grads[3], g_rate * lin, g_rate * ang_c)
    g_q = link_matrices_vjp(state.link_q, g_matrix)
    return (PBDState(link_x=grads["x"], link_q=g_q, link_v=grads["v"], link_w=grads["w"]),
            {"joint_parent_x": g_parent_x, "joint_child_x": g_child_x})


def joint_origins(model: PBDModel, state: PBDState, params) -> tuple[np.ndarray, np.ndarray]:
    """World positions [m] of each joint origin as the parent link (the world for parent -1)
    and as the child link carry it, each (m, 3); they coincide when the joint holds (for a
    prismatic joint, up to its slide along the axis)."""
    parent, child = model.joint_parent, model.joint_child
    on_child = state.link_x[child] + quat_rotate_rows(state.link_q[child],
                                                      params["joint_child_x"])
    on_parent = np.array(params["joint_parent_x"], dtype=np.float64)
    moving = parent >= 0
    on_parent[moving] = (state.link_x[parent[moving]]
                         + quat_rotate_rows(state.link_q[parent[moving]], on_parent[moving]))
    return on_parent, on_child


def state_at_joints(model: PBDModel, params, joint_q, joint_qd) -> PBDState:
    """The links at joint positions ``joint_q`` (m,) [rad or m] moving at joint rates
    ``joint_qd`` (m,) [rad/s or m/s], the base fixed: poses by :func:`forward_kinematics`,
    velocities down the chain (a revolute joint adds ω a to its child's angular velocity and
    ω a × r to the velocity of a point r from its origin, a prismatic one v a)."""
    joint_q = np.asarray(joint_q, dtype=np.float64)
    joint_qd = np.asarray(joint_qd, dtype=np.float64)
    m = model.joint_count
    if joint_q.shape != (m,) or joint_qd.shape != (m,):
        raise ValueError(f"joint_q and joint_qd must have one value per joint ({m}: "
                         f"{list(model.joint_names)}), got shapes {joint_q.shape} and "
                         f"{joint_qd.shape}")
    link_x, link_q = forward_kinematics(model, params, joint_q)
    state = PBDState(link_x, link_q, np.zeros_like(link_x), np.zeros_like(link_x))
    frames = joint_frames(model)
    _, origin = joint_origins(model, state, params)
    axis = quat_rotate_rows(link_q[model.joint_child], frames.child_axis)
    for j in frames.order:
        parent, child = model.joint_parent[j], model.joint_child[j]
        if parent >= 0:
            state.link_w[child] = state.link_w[parent]
            state.link_v[child] = state.link_v[parent] + np.cross(
                state.link_w[parent], link_x[child] - link_x[parent])
        if frames.prismatic[j]:
            state.link_v[child] += joint_qd[j] * axis[j]
        else:
            state.link_w[child] += joint_qd[j] * axis[j]
            state.link_v[child] += np.cross(joint_qd[j] * axis[j], link_x[child] - origin[j])
    return state
