"""The joint impedance law of Liu, Li et al. (Sec. IV-C, Eq. 28) and its net-torque models.

    τ = K (q_d − q) + D (q̇_d − q̇) + λ τ_net

``τ_net`` comes from a model: the inverse dynamics ``M(q) q̈_d + S(q, q̇) q̇ + g(q)`` or the
paper's net-torque lookup map (Sec. V-E: torque by angle difference and angular velocity,
built by optimizing in the differentiable simulator); ``λ`` is the paper's impedance scaling
factor (1 in simulation, 0.6 on the real Baxter). ``λ = 0`` or :func:`zero_net_torque` is PD
alone. Everything here is pure: arrays in, a new array out, shapes (n,) for n joints.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

__all__ = [
    "NetTorque",
    "NetTorqueMap",
    "impedance_torque",
    "inverse_dynamics_net_torque",
    "zero_net_torque",
]


class NetTorque(Protocol):
    """A model's net torque [N m], shape (n,), at the measured and goal joint states."""

    def __call__(self, joint_q: np.ndarray, joint_qd: np.ndarray, goal_q: np.ndarray,
                 goal_qd: np.ndarray) -> np.ndarray: ...


def zero_net_torque(joint_q, joint_qd, goal_q, goal_qd) -> np.ndarray:
    """No model: the law is PD alone."""
    return np.zeros(np.shape(joint_q))


def inverse_dynamics_net_torque(
        inverse_dynamics: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray], *,
        goal_qdd=None) -> NetTorque:
    """τ_net = ID(q, q̇, q̈_d) = M(q) q̈_d + S(q, q̇) q̇ + g(q) from a model's inverse dynamics.

    Args:
        inverse_dynamics: ``(joint_q, joint_qd, joint_qdd) -> joint torque`` [N m], (n,).
        goal_qdd: the goal's joint accelerations q̈_d [rad/s²], (n,); default zero (a
            set point).
    """
    def net_torque(joint_q, joint_qd, goal_q, goal_qd):
        qdd = np.zeros(np.shape(joint_q)) if goal_qdd is None else np.asarray(goal_qdd, float)
        return np.asarray(inverse_dynamics(joint_q, joint_qd, qdd), dtype=np.float64)
    return net_torque


class NetTorqueMap:
    """The paper's net-torque lookup map, one table per joint, bilinear in between.

    Args:
        angle_error: grid of q_d − q [rad], shape (a,), increasing.
        velocity: grid of q̇ [rad/s], shape (v,), increasing.
        torque: net torque [N m] at the grid points, shape (n, a, v).

    Outside the grid the nearest edge value is used (the map is never extrapolated).
    """

    def __init__(self, *, angle_error, velocity, torque):
        self.angle_error = np.asarray(angle_error, dtype=np.float64)
        self.velocity = np.asarray(velocity, dtype=np.float64)
        self.torque = np.asarray(torque, dtype=np.float64)
        for name, grid in (("angle_error", self.angle_error), ("velocity", self.velocity)):
            if grid.ndim != 1 or grid.size < 2 or np.any(np.diff(grid) <= 0):
                raise ValueError(f"NetTorqueMap {name} must be an increasing grid of at least "
                                 f"two values, got {grid}")
        shape = (self.angle_error.size, self.velocity.size)
        if self.torque.ndim != 3 or self.torque.shape[1:] != shape:
            raise ValueError(f"NetTorqueMap torque must have shape (joints, {shape[0]}, "
                             f"{shape[1]}), got {self.torque.shape}")
        if not np.all(np.isfinite(self.torque)):
            raise ValueError("NetTorqueMap torque must be finite")

    @staticmethod
    def _cell(grid: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = np.clip(x, grid[0], grid[-1])
        i = np.clip(np.searchsorted(grid, x, side="right") - 1, 0, grid.size - 2)
        return i, (x - grid[i]) / (grid[i + 1] - grid[i])

    def __call__(self, joint_q, joint_qd, goal_q, goal_qd) -> np.ndarray:
        error = np.asarray(goal_q, float) - np.asarray(joint_q, float)
        if error.shape != (self.torque.shape[0],):
            raise ValueError(f"the map has {self.torque.shape[0]} joint(s), the state "
                             f"{error.size}")
        i, s = self._cell(self.angle_error, error)
        j, t = self._cell(self.velocity, np.asarray(joint_qd, float))
        joint = np.arange(error.size)
        table = self.torque
        return ((1 - s) * (1 - t) * table[joint, i, j] + s * (1 - t) * table[joint, i + 1, j]
                + (1 - s) * t * table[joint, i, j + 1] + s * t * table[joint, i + 1, j + 1])


def impedance_torque(joint_q, joint_qd, *, goal_q, goal_qd, stiffness, damping,
                     net_torque: NetTorque = zero_net_torque, scale: float = 1.0) -> np.ndarray:
    """τ = K (q_d − q) + D (q̇_d − q̇) + λ τ_net [N m], shape (n,).

    Args:
        joint_q, joint_qd: measured joint angles [rad] and rates [rad/s], (n,).
        goal_q, goal_qd: goal angles q_d [rad] and rates q̇_d [rad/s], (n,).
        stiffness, damping: K [N m/rad] and D [N m s/rad], (n,) or scalars.
        net_torque: the model's τ_net (:class:`NetTorque`).
        scale: λ, the impedance scaling factor, ≥ 0.
    """
    q, qd = np.asarray(joint_q, float), np.asarray(joint_qd, float)
    goal_q, goal_qd = np.asarray(goal_q, float), np.asarray(goal_qd, float)
    pd = np.asarray(stiffness, float) * (goal_q - q) + np.asarray(damping, float) * (goal_qd - qd)
    if scale == 0:
        return pd
    return pd + scale * np.asarray(net_torque(q, qd, goal_q, goal_qd), dtype=np.float64)
