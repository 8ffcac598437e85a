"""Per-step state of an articulated rigid robot in reduced coordinates."""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["RigidState"]


@dataclasses.dataclass(frozen=True)
class RigidState:
    """Coordinates and rates now and one step before (BDF2 is a two-step method).

    Attributes:
        joint_q: coordinates [rad or m], (d,).
        joint_qd: rates [rad/s or m/s], (d,).
        joint_q_prev: coordinates one step earlier [rad or m], (d,) (unused before the first
            step, which SDIRK2 takes alone).
        joint_qd_prev: rates one step earlier [rad/s or m/s], (d,).
        step_count: steps taken since the initial state, int64 of shape (): 0 selects the
            one-step SDIRK2 start, later steps are BDF2.
    """

    joint_q: np.ndarray
    joint_qd: np.ndarray
    joint_q_prev: np.ndarray
    joint_qd_prev: np.ndarray
    step_count: np.ndarray
