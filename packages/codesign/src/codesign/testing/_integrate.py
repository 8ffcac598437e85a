"""Classical Runge-Kutta for reference trajectories of second-order systems (the simulators'
accuracy tests integrate Pinocchio's dynamics with it)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["rk4_step"]


def rk4_step(q: np.ndarray, v: np.ndarray, acceleration: Callable, dt: float
             ) -> tuple[np.ndarray, np.ndarray]:
    """One classical RK4 step [dt s] of q̇ = v, v̇ = ``acceleration(q, v)`` for coordinates
    q and rates v of the same shape (coordinates that add like vectors): the new (q, v)."""
    a1 = acceleration(q, v)
    v2 = v + 0.5 * dt * a1
    a2 = acceleration(q + 0.5 * dt * v, v2)
    v3 = v + 0.5 * dt * a2
    a3 = acceleration(q + 0.5 * dt * v2, v3)
    v4 = v + dt * a3
    a4 = acceleration(q + dt * v3, v4)
    return (q + dt / 6.0 * (v + 2.0 * v2 + 2.0 * v3 + v4),
            v + dt / 6.0 * (a1 + 2.0 * a2 + 2.0 * a3 + a4))
