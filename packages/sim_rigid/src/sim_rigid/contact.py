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

__all__ = ["COEFFICIENTS", "contact_force", "signed_distance"]

COEFFICIENTS = ("contact_stiffness", "contact_damping", "friction", "friction_stiffness")
"""The contact law's coefficients kn, kd, μ, kt, in the order of its dual coefficient array
(model fields and :data:`~sim_rigid.model.PARAMETERS` entries)."""

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


def _times(a, b):
    """a b for dual scalars (K+1,)."""
    out = a[0] * b
    out[1:] += a[1:] * b[0]
    return out


def _scaled(s, x):
    """s x for a dual scalar (K+1,) and a dual vector (K+1, 3)."""
    out = s[0] * x
    out[1:] += np.outer(s[1:], x[0])
    return out


def contact_force(model: RigidModel, coefficients, x, xdot) -> np.ndarray:
    """The world force [N] on a contact point, summed over the obstacles it penetrates, as a
    dual array (K+1, 3) from the dual coefficients (kn, kd, μ, kt) (K+1, 4) and the point's
    dual position ``x`` and velocity ``xdot`` (K+1, 3)."""
    total = np.zeros_like(x)
    kn, kd, mu, kt = coefficients.T
    for obstacle in range(len(model.obstacle_type)):
        distance, normal = signed_distance(model, obstacle, x[0])
        if distance >= 0.0:
            continue
        depth = -(x @ normal)
        depth[0] = -distance
        rate = -(xdot @ normal)
        normal_force = _times(kn, depth) + _times(_times(kd, depth), rate)
        if normal_force[0] <= 0.0:
            continue
        slip = xdot - np.outer(xdot @ normal, normal)
        speed = float(np.linalg.norm(slip[0]))
        if kt[0] * speed <= mu[0] * normal_force[0]:
            friction = -_scaled(kt, slip)
        else:
            direction = np.empty_like(slip)
            direction[0] = slip[0] / speed
            direction[1:] = (slip[1:] - np.outer(slip[1:] @ direction[0], direction[0])) / speed
            friction = -_scaled(_times(mu, normal_force), direction)
        total += np.outer(normal_force, normal) + friction
    return total
