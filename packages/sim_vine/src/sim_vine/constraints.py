"""Joint, growth and contact constraints with analytic Jacobians and their curvature.

Every constraint row touches at most two bodies, so a row is stored as the pair of bodies
``row_bodies`` (m, 2) (``-1`` for none: the base or a single-body row) and six Jacobian
values ``row_values`` (m, 6): three for the first body's (ẋ, ẏ, θ̇) and three for the
second's. The pattern never changes, which lets the QP keep one sparsity structure.

Rows, in this order:

- pins (2 per pin): ``c = e_a − e_b``, the distal end of the parent (or the base point)
  minus the proximal end of the child;
- prismatic joints (2 each): ``n_a·(p_b − p_a) = 0`` and ``n_b·(p_b − p_a) = 0``, the bodies
  stay collinear (n: a body's normal);
- growth (1 per prismatic joint): extension rate ``d/dt [t_a·(p_b − p_a)] = rate``;
- a vine that everts (:mod:`sim_vine.evert`) has instead, per joint, the rows (ν, lock) in
  place of a pin's and a slot row σ as its growth row;
- contacts (2 per contact point and obstacle): ``(N ± μ T)·v_c ≥ −Φ/Δt``, the two edges of
  the polyhedral friction cone (Anitescu's convex relaxation), with N the obstacle normal
  and T its tangent at the contact point; with μ = 0 both are the non-penetration row.

``*_curvature`` functions give ``∂/∂q [λᵀ A(q) w]`` for row weights λ and a velocity-like
direction w, the second-order term the implicit-function gradient needs.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .model import VineModel

__all__ = [
    "RowLayout",
    "ContactFrame",
    "row_layout",
    "joint_residual",
    "joint_rows",
    "joint_curvature",
    "growth_rows",
    "growth_curvature",
    "contact_frame",
    "contact_rows",
    "contact_curvature",
    "tangent_rows",
    "rows_times",
    "rows_transpose_times",
]


def _frames(theta):
    c, s = np.cos(theta), np.sin(theta)
    return np.stack([c, s], axis=-1), np.stack([-s, c], axis=-1)  # tangent, normal


@dataclasses.dataclass(frozen=True)
class RowLayout:
    """Fixed row structure of a model's constraints.

    Attributes:
        row_bodies: the two bodies each row touches, shape (m, 2), ``-1`` for none.
        joint: slice of the joint rows (pins then prismatic), equalities (a lock row of a
            vine that everts has infinite bounds, is free, once its joint has everted).
        growth: slice of the growth rows, equalities.
        contact: slice of the contact rows, inequalities, ordered (point, obstacle, ±).
        pair_count: contact point × obstacle pairs.
    """

    row_bodies: np.ndarray
    joint: slice
    growth: slice
    contact: slice
    pair_count: int

    @property
    def size(self) -> int:
        """Number of rows m."""
        return len(self.row_bodies)

    @property
    def equality_count(self) -> int:
        """Number of equality rows (joints and growth), which come first."""
        return self.growth.stop


def row_layout(model: VineModel) -> RowLayout:
    """The row structure of ``model``'s constraints."""
    pin_a, pin_b = model.pins
    pr_a, pr_b = model.prismatics
    # a vine that everts grows at every joint (sim_vine.evert): one slot row per pin
    grow_a, grow_b = (pin_a, pin_b) if model.evert else (pr_a, pr_b)
    cp_body = model.contact_points[0]
    n_obs = len(model.obstacles)
    parts = [
        np.repeat(np.stack([pin_a, pin_b], axis=1), 2, axis=0),
        np.repeat(np.stack([pr_a, pr_b], axis=1), 2, axis=0),
        np.stack([grow_a, grow_b], axis=1),
        np.stack([np.full(2 * n_obs * len(cp_body), -1),
                  np.repeat(cp_body, 2 * n_obs)], axis=1),
    ]
    bodies = np.concatenate([p.reshape(-1, 2) for p in parts]).astype(np.int64)
    n_joint = 2 * (len(pin_a) + len(pr_a))
    n_growth = len(grow_a)
    return RowLayout(
        row_bodies=bodies,
        joint=slice(0, n_joint),
        growth=slice(n_joint, n_joint + n_growth),
        contact=slice(n_joint + n_growth, len(bodies)),
        pair_count=n_obs * len(cp_body),
    )


def rows_times(row_bodies, row_values, v) -> np.ndarray:
    """``A v`` for rows in the two-body layout; ``v`` shape (N, 3), result (m,)."""
    out = np.zeros(len(row_bodies))
    for side in range(2):
        body = row_bodies[:, side]
        on = body >= 0
        out[on] += np.einsum("mk,mk->m", row_values[on, 3 * side:3 * side + 3], v[body[on]])
    return out


def rows_transpose_times(row_bodies, row_values, weights, body_count: int) -> np.ndarray:
    """``Aᵀ λ`` as body-shaped (N, 3) for row weights ``weights`` shape (m,)."""
    out = np.zeros((body_count, 3))
    for side in range(2):
        body = row_bodies[:, side]
        on = body >= 0
        np.add.at(out, body[on], row_values[on, 3 * side:3 * side + 3] * weights[on, None])
    return out


# -- joints ------------------------------------------------------------------------------


def _pin_parts(model: VineModel, q):
    parent, child = model.pins
    d = model.half_length
    t_b, n_b = _frames(q[child, 2])
    e_b = q[child, :2] - d * t_b
    real = parent >= 0
    t_a = np.zeros((len(parent), 2))
    n_a = np.zeros((len(parent), 2))
    e_a = np.broadcast_to(model.base[:2], (len(parent), 2)).copy()
    if np.any(real):
        t_a[real], n_a[real] = _frames(q[parent[real], 2])
        e_a[real] = q[parent[real], :2] + d * t_a[real]
    return parent, child, real, t_a, n_a, t_b, n_b, e_a, e_b


def joint_residual(model: VineModel, q) -> np.ndarray:
    """Joint constraint errors c(q) [m], shape (2 n_pins + 2 n_prismatic,)."""
    *_, e_a, e_b = _pin_parts(model, q)
    a, b = model.prismatics
    _, n_pa = _frames(q[a, 2])
    _, n_pb = _frames(q[b, 2])
    delta = q[b, :2] - q[a, :2]
    prism = np.stack([np.sum(n_pa * delta, axis=1), np.sum(n_pb * delta, axis=1)], axis=1)
    return np.concatenate([(e_a - e_b).reshape(-1), prism.reshape(-1)])


def joint_rows(model: VineModel, q) -> np.ndarray:
    """Jacobian values ∂c/∂q of the joint rows in the two-body layout, shape (m_joint, 6)."""
    parent, child, real, t_a, n_a, t_b, n_b, _, _ = _pin_parts(model, q)
    d = model.half_length
    pins = np.zeros((len(parent), 2, 6))
    pins[:, 0, 0], pins[:, 1, 1] = 1.0, 1.0
    pins[:, :, 2] = d * n_a
    pins[~real, :, :3] = 0.0
    pins[:, 0, 3], pins[:, 1, 4] = -1.0, -1.0
    pins[:, :, 5] = d * n_b
    a, b = model.prismatics
    ta, na = _frames(q[a, 2])
    tb, nb = _frames(q[b, 2])
    delta = q[b, :2] - q[a, :2]
    prism = np.zeros((len(a), 2, 6))
    prism[:, 0, 0:2], prism[:, 0, 3:5] = -na, na
    prism[:, 0, 2] = -np.sum(ta * delta, axis=1)
    prism[:, 1, 0:2], prism[:, 1, 3:5] = -nb, nb
    prism[:, 1, 5] = -np.sum(tb * delta, axis=1)
    return np.concatenate([pins.reshape(-1, 6), prism.reshape(-1, 6)])


def joint_curvature(model: VineModel, q, weights, direction) -> np.ndarray:
    """``∂/∂q [λᵀ J(q) w]`` for joint-row weights λ (m_joint,) and w (N, 3); shape (N, 3)."""
    out = np.zeros((model.body_count, 3))
    parent, child, real, t_a, _, t_b, _, _, _ = _pin_parts(model, q)
    d = model.half_length
    lam = weights[: 2 * len(parent)].reshape(-1, 2)
    np.add.at(out[:, 2], child, -d * direction[child, 2] * np.sum(lam * t_b, axis=1))
    pa = parent[real]
    np.add.at(out[:, 2], pa, -d * direction[pa, 2] * np.sum(lam[real] * t_a[real], axis=1))
    a, b = model.prismatics
    if len(a):
        lam = weights[2 * len(parent):].reshape(-1, 2)
        ta, na = _frames(q[a, 2])
        tb, nb = _frames(q[b, 2])
        delta = q[b, :2] - q[a, :2]
        dv = direction[b, :2] - direction[a, :2]
        wa, wb = direction[a, 2], direction[b, 2]
        out[a, 2] += lam[:, 0] * (-np.sum(ta * dv, axis=1) - wa * np.sum(na * delta, axis=1))
        out[b, 2] += lam[:, 1] * (-np.sum(tb * dv, axis=1) - wb * np.sum(nb * delta, axis=1))
        push = (lam[:, 0] * wa)[:, None] * ta + (lam[:, 1] * wb)[:, None] * tb
        out[b, :2] -= push
        out[a, :2] += push
    return out


# -- growth ------------------------------------------------------------------------------


def growth_rows(model: VineModel, q) -> np.ndarray:
    """Jacobian of the prismatic extensions ``t_a·(p_b − p_a)``, shape (n_prismatic, 6)."""
    a, b = model.prismatics
    ta, na = _frames(q[a, 2])
    delta = q[b, :2] - q[a, :2]
    rows = np.zeros((len(a), 6))
    rows[:, 0:2], rows[:, 3:5] = -ta, ta
    rows[:, 2] = np.sum(na * delta, axis=1)
    return rows


def growth_curvature(model: VineModel, q, weights, direction) -> np.ndarray:
    """``∂/∂q [λᵀ G(q) w]`` for growth-row weights λ (n_prismatic,); shape (N, 3)."""
    out = np.zeros((model.body_count, 3))
    a, b = model.prismatics
    if len(a) == 0:
        return out
    ta, na = _frames(q[a, 2])
    delta = q[b, :2] - q[a, :2]
    dv = direction[b, :2] - direction[a, :2]
    wa = direction[a, 2]
    out[a, 2] += weights * (np.sum(na * dv, axis=1) - wa * np.sum(ta * delta, axis=1))
    push = (weights * wa)[:, None] * na
    out[b, :2] += push
    out[a, :2] -= push
    return out


# -- contacts ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ContactFrame:
    """Obstacle queries at every contact point × obstacle pair (pairs ordered point-major).

    Attributes:
        body: body of each pair's contact point, shape (p,).
        offset: the point's offset along the body axis [m], shape (p,).
        phi: signed distance [m], shape (p,).
        normal: outward obstacle normal N, shape (p, 2).
        dnormal: ∂N/∂point [1/m], shape (p, 2, 2).
        body_normal: the body's normal n at the pair, shape (p, 2).
        body_tangent: the body's tangent t at the pair, shape (p, 2).
    """

    body: np.ndarray
    offset: np.ndarray
    phi: np.ndarray
    normal: np.ndarray
    dnormal: np.ndarray
    body_normal: np.ndarray
    body_tangent: np.ndarray


def contact_frame(model: VineModel, q) -> ContactFrame:
    """Signed distances and normals of every contact point to every obstacle."""
    bodies, offsets = model.contact_points
    n_obs = len(model.obstacles)
    phi, normal, dnormal = model.obstacle_distances(q)
    body = np.repeat(bodies, n_obs)
    t, n = _frames(q[body, 2])
    return ContactFrame(body=body, offset=np.repeat(offsets, n_obs), phi=phi.reshape(-1),
                        normal=normal.reshape(-1, 2), dnormal=dnormal.reshape(-1, 2, 2),
                        body_normal=n, body_tangent=t)


def _cone_edges(frame: ContactFrame, friction: float) -> np.ndarray:
    tangent = np.stack([-frame.normal[:, 1], frame.normal[:, 0]], axis=1)
    return np.stack([frame.normal + friction * tangent, frame.normal - friction * tangent],
                    axis=1)  # (p, 2, 2): the two cone edges per pair


def _point_rows(direction2, frame: ContactFrame) -> np.ndarray:
    """Rows ``direction2·v_c`` with v_c the contact point's velocity; direction2 (p, ..., 2)."""
    extra = (1,) * (direction2.ndim - 2)
    offset = frame.offset.reshape(frame.offset.shape + extra)
    body_normal = frame.body_normal.reshape((len(frame.offset),) + extra + (2,))
    rows = np.zeros(direction2.shape[:-1] + (6,))
    rows[..., 3:5] = direction2
    rows[..., 5] = offset * np.sum(direction2 * body_normal, axis=-1)
    return rows


def contact_rows(frame: ContactFrame, friction: float) -> tuple[np.ndarray, np.ndarray]:
    """Jacobian values of the contact rows (2p, 6) and of Φ itself (p, 6), two-body layout."""
    edges = _cone_edges(frame, friction)
    return _point_rows(edges, frame).reshape(-1, 6), _point_rows(frame.normal, frame)


def tangent_rows(frame: ContactFrame) -> np.ndarray:
    """Rows of the tangential contact velocity ``T·v_c`` per pair, two-body layout (p, 6)."""
    tangent = np.stack([-frame.normal[:, 1], frame.normal[:, 0]], axis=1)
    return _point_rows(tangent, frame)


def contact_curvature(frame: ContactFrame, friction: float, weights, direction,
                      body_count: int) -> tuple[np.ndarray, float]:
    """``∂/∂q`` and ``∂/∂μ`` of ``λᵀ A_contact(q, μ) w`` for contact-row weights λ (2p,)."""
    out = np.zeros((body_count, 3))
    lam = weights.reshape(-1, 2)
    if lam.size == 0:
        return out, 0.0
    edges = _cone_edges(frame, friction)
    w = direction[frame.body]
    s = frame.offset
    v_c = w[:, :2] + (s * w[:, 2])[:, None] * frame.body_normal
    rot = np.array([[0.0, -1.0], [1.0, 0.0]])
    tangent = frame.normal @ rot.T
    g_point = np.zeros((len(s), 2))
    g_theta = np.zeros(len(s))
    g_mu = 0.0
    for k, sign in enumerate((1.0, -1.0)):
        d_edge = (np.eye(2) + sign * friction * rot)[None] @ frame.dnormal  # ∂edge/∂point
        g = lam[:, k, None] * np.einsum("pij,pi->pj", d_edge, v_c)
        g_point += g
        g_theta += s * np.sum(frame.body_normal * g, axis=1) - lam[:, k] * s * w[:, 2] * np.sum(
            edges[:, k] * frame.body_tangent, axis=1)
        g_mu += sign * float(np.sum(lam[:, k] * np.sum(tangent * v_c, axis=1)))
    np.add.at(out[:, :2], frame.body, g_point)
    np.add.at(out[:, 2], frame.body, g_theta)
    return out, g_mu
