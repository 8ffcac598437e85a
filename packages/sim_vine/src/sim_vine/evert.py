"""Growth by eversion at the tip (``growth: evert``): the joints, their schedule and VJP.

A fixed maximum of N bodies, each 2d long, joined in a chain: joint j holds body j's
proximal end ``e_j = p_j − d t_j`` on the axis of its parent (body j − 1, or the base for
j = 0) at the slot offset

    σ_j = t_a·(e_j − o_a),   ν_j = n_a·(e_j − o_a) = 0,

with ``o_a = p_a + d t_a`` the parent's distal end (the base point for j = 0) and (t_a, n_a)
its axis and normal. ``σ_j = −2d``: body j lies on its parent (not everted); ``σ_j = 0``: it
sits end to end, and joint j is a pin. The vine has everted ``E = Σ_{j≥1} (2d + σ_j)``
beyond body 0, and a step at growth rate u gives that length to the joints in order, each
up to its full 2d (the schedule ``S_j(E) = clip(E − 2d(j − 1), 0, 2d) − 2d``,
:meth:`VineModel.evert_schedule`): the row

    σ̇_j = (S_j(E(q) + Δt u) − σ_j(q)) / Δt

makes the emerging body slide out of its parent at the whole rate, and holds the others
where the schedule puts them (drift corrected at the position level). In the step where a
body reaches its full length the rest of the step's growth goes to the next one. A joint
whose body is not fully out after the step is locked straight (``θ_j − θ_a = 0``, a row
with infinite bounds, so inactive, once it has everted): a body everts straight out of its
parent and bends at its pin only once it is out. Bodies not yet everted lie on the
emerging body, so the tip is always the last body's distal end; their contact rows are
off, and their masses follow the everted material (:mod:`sim_vine.everted_mass`).

Rows per joint, in the constraint layout's order: the joint slice holds ``(ν_j, lock_j)``
for every joint, the growth slice ``σ_j``. The NumPy reference of what the compiled
kernels (:mod:`sim_vine._kernels`) compute.
"""

from __future__ import annotations

import numpy as np

from .constraints import rows_transpose_times
from .model import VineModel

__all__ = ["slot_offsets", "everted_length", "joint_rows", "joint_bounds",
           "emerged_bodies", "joint_curvature", "target_vjp", "joint_residual"]


def _geometry(model: VineModel, q):
    q = np.asarray(q, dtype=np.float64)
    d = model.half_length
    parent, child = model.pins
    real = parent >= 0
    angle_a = np.where(real, q[np.maximum(parent, 0), 2], model.base[2])
    t_a = np.stack([np.cos(angle_a), np.sin(angle_a)], axis=1)
    n_a = np.stack([-t_a[:, 1], t_a[:, 0]], axis=1)
    o_a = np.where(real[:, None], q[np.maximum(parent, 0), :2] + d * t_a, model.base[:2])
    t_b = np.stack([np.cos(q[child, 2]), np.sin(q[child, 2])], axis=1)
    n_b = np.stack([-t_b[:, 1], t_b[:, 0]], axis=1)
    delta = q[child, :2] - d * t_b - o_a
    return real, t_a, n_a, t_b, n_b, delta


def _dot(x, y):
    return np.sum(x * y, axis=1)


def slot_offsets(model: VineModel, q) -> np.ndarray:
    """σ_j [m], shape (N,): how far body j's proximal end sits along its parent's axis
    from the parent's distal end (−2d: not everted, 0: end to end)."""
    _, t_a, _, _, _, delta = _geometry(model, q)
    return np.sum(t_a * delta, axis=1)


def everted_length(model: VineModel, q) -> float:
    """E [m]: the length everted beyond body 0, ``Σ_{j≥1} (2d + σ_j)``."""
    return float(np.sum(model.body_length + slot_offsets(model, q)[1:]))


def emerged_bodies(model: VineModel, length: float) -> np.ndarray:
    """Bodies out of their parent at everted length E [m] (their contact rows are on),
    shape (N,) bool."""
    return length - model.body_length * np.arange(-1, model.body_count - 1) > 0.0


def joint_rows(model: VineModel, q) -> tuple[np.ndarray, np.ndarray]:
    """Jacobian values of the joint rows ``(ν_j, lock_j)`` (2N, 6) and of the slot rows
    σ_j (N, 6) in the two-body layout."""
    real, t_a, n_a, t_b, n_b, delta = _geometry(model, q)
    d = model.half_length
    n = model.body_count
    normal, slot = np.zeros((n, 6)), np.zeros((n, 6))
    normal[:, 0:2] = -n_a
    normal[:, 2] = -np.sum(t_a * delta, axis=1) - d
    normal[:, 3:5] = n_a
    normal[:, 5] = -d * np.sum(n_a * n_b, axis=1)
    slot[:, 0:2] = -t_a
    slot[:, 2] = np.sum(n_a * delta, axis=1)
    slot[:, 3:5] = t_a
    slot[:, 5] = -d * np.sum(t_a * n_b, axis=1)
    lock = np.zeros((n, 6))
    lock[:, 2], lock[:, 5] = -1.0, 1.0
    for rows in (normal, slot, lock):
        rows[~real, :3] = 0.0  # the base does not move
    return np.stack([normal, lock], axis=1).reshape(-1, 6), slot


def joint_bounds(model: VineModel, q, rate: float, dt: float
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(lower, upper)`` of the joint and slot rows (3N,), in the layout's order, and the
    locked joints (N,) bool at growth rate [m/s] over ``dt`` [s]."""
    real, t_a, n_a, t_b, n_b, delta = _geometry(model, q)
    q = np.asarray(q, dtype=np.float64)
    parent, child = model.pins
    nu = np.sum(n_a * delta, axis=1)
    sigma = np.sum(t_a * delta, axis=1)
    target, _ = model.evert_schedule(everted_length(model, q) + dt * rate)
    locked = target < 0.0
    angle = q[child, 2] - np.where(real, q[np.maximum(parent, 0), 2], model.base[2])
    lock = np.where(locked, -angle / dt, 0.0)
    joint_lower = np.stack([-nu / dt, np.where(locked, lock, -np.inf)], axis=1).reshape(-1)
    joint_upper = np.stack([-nu / dt, np.where(locked, lock, np.inf)], axis=1).reshape(-1)
    slot = (target - sigma) / dt
    return (np.concatenate([joint_lower, slot]), np.concatenate([joint_upper, slot]), locked)


def joint_residual(model: VineModel, q) -> np.ndarray:
    """Joint errors [m], shape (2N,): ν_j, and how far σ_j lies outside [−2d, 0] (0 for
    the base joint)."""
    _, t_a, n_a, _, _, delta = _geometry(model, q)
    sigma = np.sum(t_a * delta, axis=1)
    low = np.full(model.body_count, -model.body_length)
    low[0] = 0.0
    outside = np.maximum(sigma, 0.0) + np.minimum(sigma - low, 0.0)
    return np.stack([np.sum(n_a * delta, axis=1), outside], axis=1).reshape(-1)


def joint_curvature(model: VineModel, q, joint_weights, slot_weights, direction) -> np.ndarray:
    """``∂/∂q [λᵀ J(q) w]`` for weights λ of the joint rows (2N,) and slot rows (N,) and a
    velocity-like w (N, 3); shape (N, 3). The lock rows are constant."""
    real, t_a, n_a, t_b, n_b, delta = _geometry(model, q)
    d = model.half_length
    parent, child = model.pins
    w = np.asarray(direction, dtype=np.float64)
    pa = np.maximum(parent, 0)
    w_a = np.where(real[:, None], w[pa], 0.0)
    dw = w[child, :2] - w_a[:, :2]
    om_a, om_b = w_a[:, 2], w[child, 2]
    lam0 = np.asarray(joint_weights, dtype=np.float64).reshape(-1, 2)[:, 0]
    lam1 = np.asarray(slot_weights, dtype=np.float64)
    dot = _dot
    g_theta_a = (lam0 * (-dot(t_a, dw) - dot(n_a, delta) * om_a + d * dot(t_a, n_b) * om_b)
                 + lam1 * (dot(n_a, dw) - (dot(t_a, delta) + d) * om_a
                           - d * dot(n_a, n_b) * om_b))
    g_theta_b = (lam0 * (d * dot(t_a, n_b) * om_a + d * dot(n_a, t_b) * om_b)
                 + lam1 * (-d * dot(n_a, n_b) * om_a + d * dot(t_a, t_b) * om_b))
    g_p = (-lam0 * om_a)[:, None] * t_a + (lam1 * om_a)[:, None] * n_a  # ∂/∂p_b = −∂/∂p_a
    out = np.zeros((model.body_count, 3))
    out[child, 2] += g_theta_b
    out[child, :2] += g_p
    np.add.at(out[:, 2], parent[real], g_theta_a[real])
    np.add.at(out[:, :2], parent[real], -g_p[real])
    return out


def target_vjp(model: VineModel, q, rate: float, dt: float, joint_weights, slot_weights
               ) -> tuple[np.ndarray, float]:
    """``(∂L/∂q (N, 3), ∂L/∂rate)`` through the rows' targets given ∂L/∂target: joint rows
    (2N,) and slot rows (N,). The slot targets ``(S_j(E(q) + Δt u) − σ_j(q))/Δt`` depend on
    the poses through σ_j and through E, for the joint whose body emerges."""
    parent, child = model.pins
    joint_values, slot_values = joint_rows(model, q)
    _, slope = model.evert_schedule(everted_length(model, q) + dt * rate)
    slot_weights = np.asarray(slot_weights, dtype=np.float64)
    emerging = float(slot_weights @ slope)
    # ∂E/∂q = Σ_{j≥1} ∂σ_j/∂q, the slot rows of every joint but the base's
    slot_scale = -slot_weights.copy()
    slot_scale[1:] += emerging
    pair_bodies = np.stack([parent, child], axis=1)
    g_q = rows_transpose_times(np.repeat(pair_bodies, 2, axis=0), joint_values,
                               -np.asarray(joint_weights, dtype=np.float64), model.body_count)
    g_q += rows_transpose_times(pair_bodies, slot_values, slot_scale, model.body_count)
    return g_q / dt, emerging
