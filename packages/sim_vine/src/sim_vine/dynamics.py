"""Mass matrix, gravity and the torsional springs and dampers at the pins.

Pin j's joint angle is ``φ_j = θ_child − θ_parent`` (the base angle for the base pin) and
its torque ``τ_j = −K_j (φ_j − φ0_j) − C_j φ̇_j`` (φ0: the pin's rest angle) acts +τ on the
child and −τ on the parent. With
implicit springs the torque uses the end-of-step angle and rate, ``φ + Δt φ̇'`` and ``φ̇'``,
so the QP's Hessian gains ``R diag(Δt² K + Δt C) Rᵀ`` (backward Euler, stable for any Δt);
explicit springs (the paper's) use ``φ`` and ``φ̇`` at the start of the step.
"""

from __future__ import annotations

import numpy as np

from .model import VineModel

__all__ = ["joint_angles", "joint_rates", "spread_torques", "mass_diagonal", "spring_weights"]


def joint_angles(model: VineModel, q) -> np.ndarray:
    """Pin joint angles φ [rad], shape (n_pins,)."""
    parent, child = model.pins
    parent_angle = np.where(parent >= 0, q[np.maximum(parent, 0), 2], model.base[2])
    return q[child, 2] - parent_angle


def joint_rates(model: VineModel, v) -> np.ndarray:
    """Pin joint rates φ̇ = Rᵀ v [rad/s], shape (n_pins,)."""
    parent, child = model.pins
    return v[child, 2] - np.where(parent >= 0, v[np.maximum(parent, 0), 2], 0.0)


def spread_torques(model: VineModel, torques) -> np.ndarray:
    """``R τ``: pin torques [N m] as generalized forces on the bodies, shape (N, 3)."""
    parent, child = model.pins
    out = np.zeros((model.body_count, 3))
    np.add.at(out[:, 2], child, torques)
    real = parent >= 0
    np.add.at(out[:, 2], parent[real], -torques[real])
    return out


def mass_diagonal(model: VineModel, mass, gyration_sq=None) -> np.ndarray:
    """Diagonal of M: (m, m, m r²) per body [kg, kg, kg m²], shape (N, 3); ``gyration_sq``:
    each body's r² [m²], shape (N,) (default: the model's ``gyration²`` for every body)."""
    mass = np.asarray(mass, dtype=np.float64)
    r2 = model.gyration**2 if gyration_sq is None else np.asarray(gyration_sq, np.float64)
    return np.stack([mass, mass, mass * r2], axis=1)


def spring_weights(model: VineModel, stiffness, damping, dt: float) -> np.ndarray:
    """Per-pin weights of ``R diag(·) Rᵀ`` in the QP Hessian [N m s²/rad], shape (n_pins,)."""
    if not model.implicit_springs:
        return np.zeros(model.pin_count)
    return dt * dt * np.asarray(stiffness) + dt * np.asarray(damping)
