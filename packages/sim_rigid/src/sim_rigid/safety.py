"""The robot's safety checks: a usable time step, sane inputs every step, and divergence or a
free joint at its Euler singularity during a run.

BDF2 is A-stable and its SDIRK2 start L-stable, so no time step makes the integration blow up
the way an explicit method does; too large a step shows up instead as a Newton solve that does
not converge (:class:`sim_rigid.step.NewtonError`, naming the step and the residual).
"""

from __future__ import annotations

import math

import numpy as np

from codesign.simulator import SimulationError, UnstableTimeStepError

from .model import JOINT_TYPES, RigidModel
from .state import RigidState

__all__ = ["EULER_MARGIN", "check_actions", "check_state", "check_step_inputs",
           "check_time_step"]

EULER_MARGIN = 0.05
"""How close [rad] a free joint's middle Euler angle may come to ±π/2, where its rotation
coordinates are singular (gimbal lock) and the mass matrix loses rank."""

_FIELDS = ("joint_q", "joint_qd", "joint_q_prev", "joint_qd_prev")


def check_time_step(dt: float) -> None:
    """Raise UnstableTimeStepError unless ``dt`` [s] is a positive finite number."""
    try:
        seconds = float(dt)
    except (TypeError, ValueError):
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0.0):
        raise UnstableTimeStepError(f"dt must be a positive finite number of seconds, got "
                                    f"{dt!r}")


def check_step_inputs(model: RigidModel, state: RigidState, action) -> np.ndarray:
    """The action as a float64 array (a,); raise ValueError for a state or action of the
    wrong shape and SimulationError for NaN or inf in either. Runs every step."""
    d = model.coordinate_count
    for name in _FIELDS:
        value = getattr(state, name)
        if np.shape(value) != (d,):
            raise ValueError(f"state.{name} must have shape ({d},), got {np.shape(value)}")
        if not np.all(np.isfinite(value)):
            raise SimulationError(f"state.{name} holds NaN or inf")
    if np.shape(state.step_count) != () or np.asarray(state.step_count).dtype.kind not in "iu":
        raise ValueError(f"state.step_count must be an integer scalar array, got "
                         f"{state.step_count!r}")
    action = np.asarray(action, dtype=np.float64)
    if action.shape != (len(model.actuated),):
        actuated = _actuated_names(model)
        raise ValueError(f"the action holds one value per actuated joint ({', '.join(actuated)})"
                         f": shape ({len(actuated)},), got {action.shape}")
    if not np.all(np.isfinite(action)):
        bad = [_actuated_names(model)[k] for k in np.flatnonzero(~np.isfinite(action))]
        raise SimulationError(f"the action is NaN or inf at joint(s) {', '.join(bad)}")
    return action


def check_actions(model: RigidModel, state: RigidState, actions) -> np.ndarray:
    """The actions of many steps as a float64 array (N, a); raise as
    :func:`check_step_inputs` does, naming the first step with a NaN or inf action."""
    actions = np.asarray(actions, dtype=np.float64)
    a = len(model.actuated)
    if actions.ndim != 2 or actions.shape[1] != a:
        raise ValueError(f"the actions hold one row per step and one value per actuated joint "
                         f"({', '.join(_actuated_names(model))}): shape (N, {a}), got "
                         f"{actions.shape}")
    finite = np.isfinite(actions)
    if not finite.all():
        step = int(np.flatnonzero(~finite.all(axis=1))[0])
        bad = [_actuated_names(model)[k] for k in np.flatnonzero(~finite[step])]
        raise SimulationError(f"the action of step {int(state.step_count) + step} is NaN or "
                              f"inf at joint(s) {', '.join(bad)}")
    check_step_inputs(model, state, np.zeros(a))
    return actions


def _actuated_names(model: RigidModel) -> list[str]:
    """The actuated coordinates' names, for messages only (the names are built on every
    access, too slow for each step's check)."""
    return [model.coordinate_names[k] for k in model.actuated]


def check_state(model: RigidModel, state: RigidState, step_index: int) -> None:
    """Raise SimulationError at step ``step_index`` when the state holds NaN or inf or a free
    joint's middle Euler angle is within :data:`EULER_MARGIN` of ±π/2, naming the cause."""
    for name in _FIELDS:
        if not np.all(np.isfinite(getattr(state, name))):
            raise SimulationError(f"step {step_index}: state.{name} holds NaN or inf; "
                                  f"reduce dt or the actions")
    free = np.flatnonzero(model.joint_type == JOINT_TYPES.index("free"))
    for joint in free:
        pitch = float(state.joint_q[model.joint_first[joint] + 4])
        if abs(math.cos(pitch)) < math.sin(EULER_MARGIN):
            raise SimulationError(
                f"step {step_index}: free joint {model.joint_names[joint]!r} turned to "
                f"{pitch:.3f} rad about its middle (y) Euler axis, within {EULER_MARGIN} rad "
                f"of ±π/2 where Z-Y-X Euler angles are singular; turn the joint frame (rpy) "
                f"so the motion stays away from it")
