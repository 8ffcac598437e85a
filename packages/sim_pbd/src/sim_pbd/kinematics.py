"""Joint space <-> link poses, with VJPs: forward kinematics and joint positions from states.

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
    quat_rotate_vjp,
    quat_to_matrix,
    quat_to_matrix_vjp,
)
from .state import PBDState

__all__ = [
    "JointFrames",
    "joint_frames",
    "forward_kinematics",
    "forward_kinematics_vjp",
    "joint_positions",
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
        prismatic: True for prismatic joints, (m,) bool.
        order: joint indices sorted so that every parent link is placed before its
            children, (m,) int64.
    """

    parent_axis: np.ndarray
    child_axis: np.ndarray
    parent_normal: np.ndarray
    child_normal: np.ndarray
    prismatic: np.ndarray
    order: np.ndarray


def _perpendicular(axis) -> np.ndarray:
    helper = np.eye(3)[int(np.argmin(np.abs(axis)))]
    normal = np.cross(axis, helper)
    return normal / np.linalg.norm(normal)


def joint_frames(model: PBDModel) -> JointFrames:
    """The joints' axes and normals in their two links' body frames, and the tree order.

    Raises ValueError when a joint's parent link is not placed by an earlier joint (the
    joints do not form a tree rooted at the world or at a floating base)."""
    m = model.joint_count
    frames = {name: np.zeros((m, 3)) for name in JointFrames._fields[:4]}
    for j in range(m):
        axis = np.asarray(model.joint_axis[j], dtype=np.float64)
        normal = _perpendicular(axis)
        frames["parent_axis"][j] = quat_rotate(model.joint_parent_q[j], axis)
        frames["child_axis"][j] = quat_rotate(model.joint_child_q[j], axis)
        frames["parent_normal"][j] = quat_rotate(model.joint_parent_q[j], normal)
        frames["child_normal"][j] = quat_rotate(model.joint_child_q[j], normal)
    order = np.argsort(model.joint_child, kind="stable")
    placed = {-1, 0} if model.floating_base else {-1}
    for j in order:
        if int(model.joint_parent[j]) not in placed:
            raise ValueError(
                f"joint {model.joint_names[j]!r}: its parent link {model.joint_parent[j]} is "
                "not placed by an earlier joint; order the links so that a joint's parent "
                "has a lower index than its child (tree order)")
        placed.add(int(model.joint_child[j]))
    return JointFrames(prismatic=np.asarray(model.joint_type) == PRISMATIC,
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


class _Bodies(NamedTuple):
    unit_q: np.ndarray
    matrix: np.ndarray


def _bodies(link_q) -> _Bodies:
    unit_q = np.array([quat_normalize(q) for q in np.asarray(link_q, dtype=np.float64)])
    return _Bodies(unit_q, np.array([quat_to_matrix(q) for q in unit_q]).reshape(-1, 3, 3))


def _pose(state_x, matrix, link: int):
    if link < 0:
        return np.zeros(3), np.eye(3)
    return state_x[link], matrix[link]


def _velocity(state_v, link: int):
    return np.zeros(3) if link < 0 else state_v[link]


def joint_positions(model: PBDModel, params, state: PBDState) -> tuple[np.ndarray, np.ndarray]:
    """Joint positions [rad or m] and rates [rad/s or m/s] from link states, each (m,).

    Orientations are normalized first. ``params`` holds ``joint_parent_x`` and
    ``joint_child_x`` (m, 3) [m] (read by prismatic joints)."""
    frames = joint_frames(model)
    joint_parent_x = np.asarray(params["joint_parent_x"], dtype=np.float64)
    joint_child_x = np.asarray(params["joint_child_x"], dtype=np.float64)
    bodies = _bodies(state.link_q)
    m = model.joint_count
    joint_q, joint_qd = np.zeros(m), np.zeros(m)
    for j in range(m):
        parent, child = model.joint_parent[j], model.joint_child[j]
        x_p, r_p = _pose(state.link_x, bodies.matrix, parent)
        x_c, r_c = _pose(state.link_x, bodies.matrix, child)
        w_p, w_c = _velocity(state.link_w, parent), state.link_w[child]
        axis = r_p @ frames.parent_axis[j]
        if frames.prismatic[j]:
            lever_c, lever_p = r_c @ joint_child_x[j], r_p @ joint_parent_x[j]
            gap = x_c + lever_c - x_p - lever_p
            rel_v = (state.link_v[child] + np.cross(w_c, lever_c)
                     - _velocity(state.link_v, parent) - np.cross(w_p, lever_p))
            joint_q[j] = axis @ gap
            joint_qd[j] = np.cross(w_p, axis) @ gap + axis @ rel_v
        else:
            e_p, e_c = r_p @ frames.parent_normal[j], r_c @ frames.child_normal[j]
            joint_q[j] = np.arctan2(axis @ np.cross(e_p, e_c), e_p @ e_c)
            joint_qd[j] = axis @ (w_c - w_p)
    return joint_q, joint_qd


def joint_positions_vjp(model: PBDModel, params, state: PBDState, g_joint_q, g_joint_qd):
    """(∂L/∂state, ∂L/∂params) of :func:`joint_positions` given ∂L/∂joint_q and
    ∂L/∂joint_qd (m,); the params gradient holds ``joint_parent_x`` and ``joint_child_x``."""
    frames = joint_frames(model)
    joint_parent_x = np.asarray(params["joint_parent_x"], dtype=np.float64)
    joint_child_x = np.asarray(params["joint_child_x"], dtype=np.float64)
    bodies = _bodies(state.link_q)
    n = model.link_count
    g_x, g_v, g_w = np.zeros((n, 3)), np.zeros((n, 3)), np.zeros((n, 3))
    g_matrix = np.zeros((n, 3, 3))
    g_parent_x = np.zeros_like(joint_parent_x)
    g_child_x = np.zeros_like(joint_child_x)
    for j in range(model.joint_count):
        parent, child = model.joint_parent[j], model.joint_child[j]
        x_p, r_p = _pose(state.link_x, bodies.matrix, parent)
        x_c, r_c = _pose(state.link_x, bodies.matrix, child)
        w_p, w_c = _velocity(state.link_w, parent), state.link_w[child]
        axis = r_p @ frames.parent_axis[j]
        g_rp = np.zeros((3, 3))
        g_wp, g_xp, g_vp = np.zeros(3), np.zeros(3), np.zeros(3)
        if frames.prismatic[j]:
            lever_c, lever_p = r_c @ joint_child_x[j], r_p @ joint_parent_x[j]
            gap = x_c + lever_c - x_p - lever_p
            rel_v = (state.link_v[child] + np.cross(w_c, lever_c)
                     - _velocity(state.link_v, parent) - np.cross(w_p, lever_p))
            g_rate = g_joint_qd[j]
            g_axis = g_joint_q[j] * gap + g_rate * (np.cross(gap, w_p) + rel_v)
            g_gap = g_joint_q[j] * axis + g_rate * np.cross(w_p, axis)
            g_wp += g_rate * np.cross(axis, gap)
            g_rel = g_rate * axis
            g_v[child] += g_rel
            g_vp -= g_rel
            g_w[child] += np.cross(lever_c, g_rel)
            g_wp -= np.cross(lever_p, g_rel)
            g_lever_c = np.cross(g_rel, w_c) + g_gap
            g_lever_p = -np.cross(g_rel, w_p) - g_gap
            g_x[child] += g_gap
            g_xp -= g_gap
            g_matrix[child] += np.outer(g_lever_c, joint_child_x[j])
            g_child_x[j] += r_c.T @ g_lever_c
            g_rp += np.outer(g_lever_p, joint_parent_x[j])
            g_parent_x[j] += r_p.T @ g_lever_p
        else:
            e_p, e_c = r_p @ frames.parent_normal[j], r_c @ frames.child_normal[j]
            cross = np.cross(e_p, e_c)
            sin, cos = axis @ cross, e_p @ e_c
            scale = g_joint_q[j] / (sin * sin + cos * cos)
            g_sin, g_cos = scale * cos, -scale * sin
            g_axis = g_sin * cross + g_joint_qd[j] * (w_c - w_p)
            g_cross = g_sin * axis
            g_ep = np.cross(e_c, g_cross) + g_cos * e_c
            g_ec = np.cross(g_cross, e_p) + g_cos * e_p
            g_w[child] += g_joint_qd[j] * axis
            g_wp -= g_joint_qd[j] * axis
            g_rp += np.outer(g_ep, frames.parent_normal[j])
            g_matrix[child] += np.outer(g_ec, frames.child_normal[j])
        g_rp += np.outer(g_axis, frames.parent_axis[j])
        if parent >= 0:
            g_matrix[parent] += g_rp
            g_x[parent] += g_xp
            g_v[parent] += g_vp
            g_w[parent] += g_wp
    q = np.asarray(state.link_q, dtype=np.float64)
    g_q = np.array([quat_normalize_vjp(q[i], quat_to_matrix_vjp(bodies.unit_q[i], g_matrix[i]))
                    for i in range(n)]).reshape(n, 4)
    return (PBDState(link_x=g_x, link_q=g_q, link_v=g_v, link_w=g_w),
            {"joint_parent_x": g_parent_x, "joint_child_x": g_child_x})
