"""End-effector kinematics from link states: position, velocity and the positional Jacobian
of a point fixed on a link, with their VJPs (with respect to the state and the joint origins).

A task-space controller (the paper's stiffness law, Eq. 29) reads these. The Jacobian's
column j is ``a_j × (p - o_j)`` for a revolute joint on the chain from the root to the link
(``a_j`` its world axis, ``o_j`` its world origin) and ``a_j`` for a prismatic one; joints
off the chain give zero columns. It is taken from the current link poses, so it holds for
the robot as simulated (joints assembled up to the solver's tolerance), and it depends on
the design through the joint origins ``joint_child_x`` (the link lengths).
"""

from __future__ import annotations

import numpy as np

from .kinematics import joint_frames, link_matrices, link_matrices_vjp
from .model import PBDModel
from .state import PBDState

__all__ = ["end_effector", "end_effector_chain", "end_effector_vjp"]


def end_effector_chain(model: PBDModel, link: int) -> np.ndarray:
    """Indices of the joints from the root down to ``link`` (a link index), root first."""
    if not 0 <= link < model.link_count:
        raise ValueError(f"link index {link} is outside the model's {model.link_count} links")
    chain = []
    while True:
        above = np.flatnonzero(model.joint_child == link)
        if above.size == 0:
            break
        chain.append(int(above[0]))
        link = int(model.joint_parent[above[0]])
        if link < 0:
            break
    return np.array(chain[::-1], dtype=np.int64)


def end_effector(model: PBDModel, params, state: PBDState, *, link: int, point):
    """Position [m] (3,), velocity [m/s] (3,) and positional Jacobian (3, m) [m/rad or
    m/m] of ``point`` [m] (3,), given in ``link``'s body frame (from its centre of mass).

    ``params`` holds ``joint_child_x`` (m, 3) [m]; orientations are normalized first."""
    frames = joint_frames(model)
    _, matrix = link_matrices(state.link_q)
    lever = matrix[link] @ np.asarray(point, dtype=np.float64)
    position = state.link_x[link] + lever
    velocity = state.link_v[link] + np.cross(state.link_w[link], lever)
    jacobian = np.zeros((3, model.joint_count))
    joint_child_x = np.asarray(params["joint_child_x"], dtype=np.float64)
    for j in end_effector_chain(model, link):
        parent, child = model.joint_parent[j], model.joint_child[j]
        axis = frames.parent_axis[j] if parent < 0 else matrix[parent] @ frames.parent_axis[j]
        if frames.prismatic[j]:
            jacobian[:, j] = axis
        else:
            origin = state.link_x[child] + matrix[child] @ joint_child_x[j]
            jacobian[:, j] = np.cross(axis, position - origin)
    return position, velocity, jacobian


def end_effector_vjp(model: PBDModel, params, state: PBDState, *, link: int, point, g_position,
                     g_velocity, g_jacobian):
    """(∂L/∂state, ∂L/∂params) of :func:`end_effector` given ∂L/∂position (3,),
    ∂L/∂velocity (3,) and ∂L/∂jacobian (3, m); the params gradient holds
    ``joint_child_x``."""
    frames = joint_frames(model)
    _, matrix = link_matrices(state.link_q)
    point = np.asarray(point, dtype=np.float64)
    lever = matrix[link] @ point
    position = state.link_x[link] + lever
    joint_child_x = np.asarray(params["joint_child_x"], dtype=np.float64)
    g_velocity = np.asarray(g_velocity, dtype=np.float64)
    g_jacobian = np.asarray(g_jacobian, dtype=np.float64)
    n = model.link_count
    g_x, g_v, g_w = np.zeros((n, 3)), np.zeros((n, 3)), np.zeros((n, 3))
    g_matrix = np.zeros((n, 3, 3))
    g_child_x = np.zeros_like(joint_child_x)
    g_point_world = np.array(g_position, dtype=np.float64)
    for j in end_effector_chain(model, link):
        parent, child = model.joint_parent[j], model.joint_child[j]
        axis = frames.parent_axis[j] if parent < 0 else matrix[parent] @ frames.parent_axis[j]
        g_column = g_jacobian[:, j]
        if frames.prismatic[j]:
            g_axis = g_column
        else:
            origin = state.link_x[child] + matrix[child] @ joint_child_x[j]
            arm = position - origin
            g_axis, g_arm = np.cross(arm, g_column), np.cross(g_column, axis)
            g_point_world += g_arm
            g_x[child] -= g_arm
            g_matrix[child] -= np.outer(g_arm, joint_child_x[j])
            g_child_x[j] -= matrix[child].T @ g_arm
        if parent >= 0:
            g_matrix[parent] += np.outer(g_axis, frames.parent_axis[j])
    g_v[link] += g_velocity
    g_w[link] += np.cross(lever, g_velocity)
    g_lever = g_point_world + np.cross(g_velocity, state.link_w[link])
    g_x[link] += g_point_world
    g_matrix[link] += np.outer(g_lever, point)
    g_q = link_matrices_vjp(state.link_q, g_matrix)
    return (PBDState(link_x=g_x, link_q=g_q, link_v=g_v, link_w=g_w),
            {"joint_child_x": g_child_x})
