"""Per-step state of a vine: body poses and velocities in maximal coordinates."""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["VineState"]


@dataclasses.dataclass(frozen=True)
class VineState:
    """Poses and velocities of the N rigid bodies of a vine, base to tip.

    Attributes:
        body_q: body poses ``(x [m], y [m], θ [rad])`` of each centre of mass in the world
            frame, shape (N, 3).
        body_qd: body velocities ``(ẋ [m/s], ẏ [m/s], θ̇ [rad/s])``, shape (N, 3).
    """

    body_q: np.ndarray
    body_qd: np.ndarray
