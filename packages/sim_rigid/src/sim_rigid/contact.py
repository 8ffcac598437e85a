"""Penalty frictional contact between points fixed on links and static obstacles (the
paper's extension of Geilinger et al.), on the dual arrays of :mod:`sim_rigid.dynamics`
(row 0 the value, rows 1..K tangents).

A point at x [m] moving at ẋ [m/s] that penetrates an obstacle by d = -φ(x) > 0 (φ the
obstacle's signed distance, outward normal n = ∇φ) feels

    f_n = kn d + kd d ḋ,   ḋ = -n·ẋ            (continuous at first contact: the damping
                                                grows with d, the paper's law)
    f_t = -kt v_t            while kt |v_t| <= μ f_n  (sticking, viscously regularized)
    f_t = -μ f_n v_t / |v_t| otherwise             (sliding),   v_t = ẋ - (n·ẋ) n,

f = f_n n + f_t, and nothing where d <= 0 or f_n <= 0 (contact only pushes). The two
friction branches meet where kt |v_t| = μ f_n, so f is continuous. Inside a box φ is the
distance to the nearest face (its normal constant there), a plane's φ is affine: n does not
vary with x where forces act, so the tangents need no second derivatives of φ.
"""

from __future__ import annotations

import numpy as np

from .model import OBSTACLE_TYPES, RigidModel

__all__ = ["contact_force", "signed_distance"]

_PLANE, _BOX = OBSTACLE_TYPES.index("plane"), OBSTACLE_TYPES.index("box")


def signed_distance(model: RigidModel, obstacle: int, x) -> tuple[float, np.ndarray]:
    """(φ [m], outward unit normal (3,)) of obstacle ``obstacle`` at the world point ``x``
    (3,); the normal is returned where φ < 0 (zeros outside a box, where no force acts)."""
    rotation = model.obstacle_rotation[obstacle]
    relative = np.asarray(x, dtype=np.float64) - model.obstacle_center[obstacle]
    if model.obstacle_type[obstacle] == _PLANE:
        normal = rotation[:, 2]
        return float(normal @ relative), normal
    local = rotation.T @ relative
    excess = np.abs(local) - model.obstacle_half_extents[obstacle]
    if np.all(excess < 0.0):
        axis = int(np.argmax(excess))
        return float(excess[axis]), np.sign(local[axis]) * rotation[:, axis]
    return float(np.linalg.norm(np.maximum(excess, 0.0))
                 + min(float(np.max(excess)), 0.0)), np.zeros(3)


def contact_force(model: RigidModel, x, xdot) -> np.ndarray:
    """The world force [N] on a contact point, summed over the obstacles it penetrates, as a
    dual array (K+1, 3) from its dual position ``x`` and velocity ``xdot`` (K+1, 3)."""
    total = np.zeros_like(x)
    kn, kd = model.contact_stiffness, model.contact_damping
    mu, kt = model.friction, model.friction_stiffness
    for obstacle in range(len(model.obstacle_type)):
        distance, normal = signed_distance(model, obstacle, x[0])
        if distance >= 0.0:
            continue
        depth = -(x @ normal)
        depth[0] = -distance
        rate = -(xdot @ normal)
        normal_force = kn * depth + kd * depth[0] * rate
        normal_force[1:] += kd * depth[1:] * rate[0]
        if normal_force[0] <= 0.0:
            continue
        slip = xdot - np.outer(xdot @ normal, normal)
        speed = float(np.linalg.norm(slip[0]))
        if kt * speed <= mu * normal_force[0]:
            friction = -kt * slip
        else:
            direction = slip[0] / speed
            turn = (slip[1:] - np.outer(slip[1:] @ direction, direction)) / speed
            friction = np.empty_like(slip)
            friction[0] = -mu * normal_force[0] * direction
            friction[1:] = -mu * (np.outer(normal_force[1:], direction)
                                  + normal_force[0] * turn)
        total += np.outer(normal_force, normal) + friction
    return total
