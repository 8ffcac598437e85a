"""Penalty frictional contact between points fixed on links and signed distance fields
(:mod:`sim_rigid.sdf`: planes, boxes, spheres, capsules, mesh grids) that are static or
fixed on other links (the paper's extension of Geilinger et al.), on the dual arrays of
:mod:`sim_rigid.dynamics` (row 0 the value, rows 1..K tangents).

A point at x [m] moving at ẋ [m/s] relative to the shape's material point there (u = ω ×
(x - o) + v_o of the shape's link, zero for a static shape) penetrates by d = -φ(x) > 0 (φ
the shape's signed distance, outward normal n = ∇φ / |∇φ|) and feels, scaled by the point's
area a (a design parameter, default 1),

    f_n = kn d + kd d ḋ,   ḋ = -n·(ẋ - u)       (continuous at first contact: the damping
                                                grows with d, the paper's law)
    f_t = -kt v_t            while kt |v_t| <= μ f_n  (sticking, viscously regularized)
    f_t = -μ f_n v_t / |v_t| otherwise             (sliding),   v_t = (ẋ - u) - n·(ẋ - u) n,

or, with ``friction_sharpness`` p > 0, the smooth law f_t = -kt v_t (1 + r^p)^(-1/p), r =
kt |v_t| / (μ f_n): the same sticking and sliding limits, 2^(-1/p) of the hard law's force at
the switch (0.84 at p = 4), and no kink for Newton's method to stall on (the hard switch
can leave it stepping back and forth across the kink, its line search unable to lower the
residual: ``NewtonError``),

f = a (f_n n + f_t) on the point's link and -f, at x, on the shape's link; nothing where
d <= 0 or f_n <= 0 (contact only pushes). The two friction branches meet where kt |v_t| =
μ f_n, so f is continuous. The tangents of n come from the shape's Hessian, dn = (I - n nᵀ)
∇²φ dz / |∇φ| in the shape's frame, then turned by the (moving) frame.
"""

from __future__ import annotations

import numpy as np

from .model import RigidModel
from .sdf import shape_distance

__all__ = ["COEFFICIENTS", "contact_force", "pair_force", "signed_distance",
           "smooth_friction"]

COEFFICIENTS = ("contact_stiffness", "contact_damping", "friction", "friction_stiffness")
"""The contact law's coefficients kn, kd, μ, kt, in the order of its dual coefficient array
(model fields and :data:`~sim_rigid.model.PARAMETERS` entries)."""


def _shape_frame(model: RigidModel, obstacle: int, link_rotation, link_origin):
    """The shape's world rotation and origin from its link's (constant for the world)."""
    rotation, center = model.obstacle_rotation[obstacle], model.obstacle_center[obstacle]
    return link_rotation @ rotation, link_origin + link_rotation @ center


def signed_distance(model: RigidModel, obstacle: int, x, *,
                    frame=None) -> tuple[float, np.ndarray]:
    """(φ [m], outward unit normal (3,) in the world) of obstacle ``obstacle`` at the world
    point ``x`` (3,); ``frame`` is (rotation (3, 3), origin (3,) [m]) of the obstacle's link
    in the world (None: a static obstacle)."""
    link_rotation, link_origin = frame if frame is not None else (np.eye(3), np.zeros(3))
    rotation, origin = _shape_frame(model, obstacle, link_rotation, link_origin)
    local = rotation.T @ (np.asarray(x, dtype=np.float64) - origin)
    distance, gradient, _ = shape_distance(
        int(model.obstacle_type[obstacle]), model.obstacle_half_extents[obstacle],
        model.obstacle_sdf_grid(obstacle), local)
    norm = np.linalg.norm(gradient)
    return distance, rotation @ (gradient / norm if norm > 0.0 else gradient)


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


def _dot(a, b):
    """a · b for dual vectors (K+1, 3)."""
    out = a @ b[0]
    out[1:] += b[1:] @ a[0]
    return out


def _turn(rotation, x, *, transpose=False):
    """R x (or Rᵀ x) for dual rotations (K+1, 3, 3) and dual vectors (K+1, 3)."""
    matrix = rotation.transpose(0, 2, 1) if transpose else rotation
    out = np.einsum("ij,kj->ki", matrix[0], x)
    out[1:] += np.einsum("kij,j->ki", matrix[1:], x[0])
    return out


def _quotient(a, b):
    """a / b for dual scalars (K+1,)."""
    out = a / b[0]
    out[1:] -= a[0] * b[1:] / b[0] ** 2
    return out


def _power(a, exponent: float):
    """a^exponent for a dual scalar (K+1,), a[0] >= 0 (the derivative's power taken as 0
    where a[0] = 0 and exponent > 1)."""
    out = exponent * a[0] ** (exponent - 1.0) * a if a[0] > 0.0 or exponent == 1.0 \
        else np.zeros_like(a)
    out[0] = a[0] ** exponent
    return out


def smooth_friction(kt, limit, slip, sharpness: float) -> np.ndarray:
    """The smooth friction -kt v_t (1 + r^p)^(-1/p), r = kt |v_t| / limit, as a dual vector
    (K+1, 3) from dual kt and limit μ f_n (K+1,), the dual slip velocity v_t (K+1, 3) and
    p = ``sharpness`` >= 2."""
    ratio_squared = _quotient(_times(_times(kt, kt), _dot(slip, slip)), _times(limit, limit))
    base = _power(ratio_squared, sharpness / 2.0)
    base[0] += 1.0
    return -_scaled(_times(kt, _power(base, -1.0 / sharpness)), slip)


def _cross(a, b):
    """a × b for dual vectors (K+1, 3)."""
    out = np.cross(a[0], b)
    out[1:] += np.cross(a[1:], b[0])
    return out


def pair_force(model: RigidModel, obstacle: int, coefficients, area, x, xdot,
               body=None) -> np.ndarray | None:
    """The world force [N] of obstacle ``obstacle`` on a contact point as a dual array
    (K+1, 3), or None where the point does not touch it. Duals: the coefficients (kn, kd,
    μ, kt) (K+1, 4), the point's area (K+1,), its world position ``x`` and velocity
    ``xdot`` (K+1, 3); ``body`` is the obstacle's link as duals (rotation (K+1, 3, 3),
    origin (K+1, 3), angular velocity (K+1, 3), velocity of its origin (K+1, 3)), all in
    the world, or None for a static obstacle. The reaction, minus this force at x, belongs
    to the obstacle's link."""
    rows = x.shape[0]
    if body is None:
        link_rotation = np.zeros((rows, 3, 3))
        link_rotation[0] = np.eye(3)
        link_origin, omega, velocity = np.zeros((rows, 3)), None, None
    else:
        link_rotation, link_origin, omega, velocity = body
    rotation, origin = _shape_frame(model, obstacle, link_rotation, link_origin)
    local = _turn(rotation, x - origin, transpose=True)
    distance, gradient, hessian = shape_distance(
        int(model.obstacle_type[obstacle]), model.obstacle_half_extents[obstacle],
        model.obstacle_sdf_grid(obstacle), local[0])
    if distance >= 0.0:
        return None
    kn, kd, mu, kt = coefficients.T
    norm = float(np.linalg.norm(gradient))
    local_normal = np.empty_like(local)
    local_normal[0] = gradient / norm
    projector = np.eye(3) - np.outer(local_normal[0], local_normal[0])
    local_normal[1:] = local[1:] @ (projector @ hessian).T / norm
    normal = _turn(rotation, local_normal)
    depth = -(local @ gradient)
    depth[0] = -distance
    relative = xdot if body is None else xdot - velocity - _cross(omega, x - link_origin)
    approach = _dot(relative, normal)
    normal_force = _times(kn, depth) - _times(_times(kd, depth), approach)
    if normal_force[0] <= 0.0:
        return None
    slip = relative - _scaled(approach, normal)
    speed = float(np.linalg.norm(slip[0]))
    if model.friction_sharpness > 0.0 and mu[0] > 0.0:  # μ = 0: nothing to smooth
        friction = smooth_friction(kt, _times(mu, normal_force), slip, model.friction_sharpness)
    elif kt[0] * speed <= mu[0] * normal_force[0]:
        friction = -_scaled(kt, slip)
    else:
        direction = np.empty_like(slip)
        direction[0] = slip[0] / speed
        direction[1:] = (slip[1:] - np.outer(slip[1:] @ direction[0], direction[0])) / speed
        friction = -_scaled(_times(mu, normal_force), direction)
    return _scaled(area, _scaled(normal_force, normal) + friction)


def contact_force(model: RigidModel, coefficients, x, xdot) -> np.ndarray:
    """The world force [N] on a contact point of unit area, summed over the static
    obstacles it penetrates, as a dual array (K+1, 3) from the dual coefficients (kn, kd,
    μ, kt) (K+1, 4) and the point's dual position ``x`` and velocity ``xdot`` (K+1, 3)."""
    total = np.zeros_like(x)
    area = np.zeros(x.shape[0])
    area[0] = 1.0
    for obstacle in np.flatnonzero(model.obstacle_link < 0):
        force = pair_force(model, int(obstacle), coefficients, area, x, xdot)
        if force is not None:
            total += force
    return total
