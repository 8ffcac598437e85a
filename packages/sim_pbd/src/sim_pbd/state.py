"""Per-step state of an articulated rigid robot in maximal coordinates."""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["PBDState"]


@dataclasses.dataclass(frozen=True)
class PBDState:
    """Poses and velocities of the n dynamic links, in the world frame.

    Attributes:
        link_x: centre-of-mass positions [m], shape (n, 3).
        link_q: orientations of the body frames, unit quaternions (w, x, y, z) rotating body
            vectors into the world, shape (n, 4).
        link_v: centre-of-mass velocities [m/s], shape (n, 3).
        link_w: angular velocities [rad/s], world frame, shape (n, 3).
    """

    link_x: np.ndarray
    link_q: np.ndarray
    link_v: np.ndarray
    link_w: np.ndarray
