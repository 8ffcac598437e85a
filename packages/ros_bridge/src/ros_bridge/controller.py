"""The safe impedance controller: the law, its limits and its watchdog as one clocked object.

:class:`SafeImpedanceController` is pure: :meth:`~SafeImpedanceController.receive` and
:meth:`~SafeImpedanceController.command` take a :class:`ControllerState` and the time now
[s] and return a new one, so a node calls ``receive`` on every joint state and ``command``
on every timer tick, and a test drives both with an injected clock.

A command is zero torque, with its reason, when the joint states are stale (the watchdog),
when the latest one is unusable (NaN, missing joints or a malformed message), when a joint
leaves its position or velocity limits, or when the model fails; the last two latch until
:meth:`~SafeImpedanceController.reset` (a person must look). Otherwise the law's torque is
clamped to the effort limits and moves at most ``rate`` per cycle from the previous command
(a stop is never rate limited: zero is the safe command, and a restart ramps up from it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from codesign.impedance import NetTorque, impedance_torque, zero_net_torque

from .limits import JointLimits, bounds_violation, limit_torque
from .messages import JointSample, MessageError, joint_sample
from .watchdog import Watchdog

__all__ = ["Command", "ControllerState", "JointListError", "SafeImpedanceController"]


class JointListError(ValueError):
    """The controller's joints do not match the robot's command interface."""


@dataclasses.dataclass(frozen=True)
class ControllerState:
    """What the controller remembers between calls.

    Attributes:
        sample: the latest usable joint state, or ``None``.
        received: when it was received [s], or ``None``.
        fault: why the latest joint state message was unusable, or ``None``.
        torque: the last command [N m], shape (n,).
        latched: why the controller stopped for good (until reset), or ``None``.
    """

    sample: JointSample | None
    received: float | None
    fault: str | None
    torque: np.ndarray
    latched: str | None


@dataclasses.dataclass(frozen=True)
class Command:
    """Effort command [N m], shape (n,), in the controller's joint order; ``stop`` says why
    it is zero (``None`` when the law acts)."""

    torque: np.ndarray
    stop: str | None = None


class SafeImpedanceController:
    """τ = K (q_d − q) + D (q̇_d − q̇) + λ τ_net within limits, guarded by a watchdog.

    Args:
        joints: joint names, in the order of the effort command.
        stiffness, damping: K [N m/rad] and D [N m s/rad], (n,) or scalars, ≥ 0.
        goal_q, goal_qd: goal joint angles [rad] and rates [rad/s], (n,).
        limits: :class:`~ros_bridge.limits.JointLimits` (from :func:`joint_limits`).
        period: control period [s].
        net_torque: the model's τ_net (:class:`codesign.impedance.NetTorque`, e.g. a
            :class:`~codesign.impedance.NetTorqueMap` loaded from its file); default none
            (PD alone).
        scale: λ, the impedance scaling factor, ≥ 0.
        missed_periods: the watchdog's tolerance, in control periods.
    """

    def __init__(self, *, joints: Sequence[str], stiffness, damping, goal_q, goal_qd,
                 limits: JointLimits, period: float, net_torque: NetTorque = zero_net_torque,
                 scale: float = 1.0, missed_periods: float = 2.0):
        self.joints = list(joints)
        n = len(self.joints)
        if n == 0 or len(set(self.joints)) != n:
            raise JointListError(f"the controller needs distinct joint names, got {joints}")

        def per_joint(name, value):
            array = np.broadcast_to(np.asarray(value, dtype=np.float64), (n,)).copy()
            if not np.all(np.isfinite(array)):
                raise ValueError(f"{name} must be finite, got {array}")
            return array

        self.stiffness, self.damping = per_joint("stiffness", stiffness), per_joint("damping",
                                                                                    damping)
        if np.any(self.stiffness < 0) or np.any(self.damping < 0):
            raise ValueError("stiffness and damping must be >= 0")
        self.goal_q, self.goal_qd = per_joint("goal_q", goal_q), per_joint("goal_qd", goal_qd)
        for field in dataclasses.fields(limits):
            if np.shape(getattr(limits, field.name)) != (n,):
                raise ValueError(f"limits.{field.name} must have shape ({n},)")
        if not (limits.lower <= self.goal_q).all() or not (self.goal_q <= limits.upper).all():
            raise ValueError(f"goal_q {self.goal_q} lies outside the joint limits")
        if not (np.isfinite(scale) and scale >= 0):
            raise ValueError(f"scale must be a number >= 0, got {scale}")
        self.limits, self.net_torque, self.scale = limits, net_torque, float(scale)
        self.watchdog = Watchdog(period, missed_periods)

    def check_joints(self, robot_joints: Sequence[str]) -> None:
        """Refuse to start unless ``robot_joints`` (the effort controller's joint list) is
        the controller's, in the same order: a command's i-th value goes to its i-th joint."""
        if list(robot_joints) != self.joints:
            raise JointListError(f"the robot's effort interface takes joints "
                                 f"{list(robot_joints)} but the controller has {self.joints}; "
                                 "list the same joints in the same order")

    def initial_state(self) -> ControllerState:
        """Nothing received yet, zero torque, not latched."""
        return ControllerState(sample=None, received=None, fault=None,
                               torque=np.zeros(len(self.joints)), latched=None)

    def receive(self, state: ControllerState, message, now: float) -> ControllerState:
        """A ``sensor_msgs/JointState`` (:mod:`ros_bridge.messages` class) received at ``now``
        [s]; one without the controller's joints or with NaN is a fault (zero torque) until
        a good one arrives."""
        try:
            sample = joint_sample(message, self.joints)
        except MessageError as exc:
            return dataclasses.replace(state, fault=f"bad joint state: {exc}")
        if not (np.all(np.isfinite(sample.position)) and np.all(np.isfinite(sample.velocity))):
            return dataclasses.replace(state, fault="joint state with NaN/inf position or "
                                                    "velocity (or no velocity)")
        return dataclasses.replace(state, sample=sample, received=float(now), fault=None)

    def _stop(self, state: ControllerState, reason: str, *, latch: bool = False):
        torque = np.zeros(len(self.joints))
        latched = reason if latch else state.latched
        return Command(torque, reason), dataclasses.replace(state, torque=torque,
                                                            latched=latched)

    def command(self, state: ControllerState, now: float) -> tuple[Command, ControllerState]:
        """The effort command at ``now`` [s] and the state after it."""
        if state.latched is not None:
            return self._stop(state, f"stopped: {state.latched}; reset to resume")
        stale = self.watchdog.stale(state.received, now)
        if stale is not None:
            return self._stop(state, stale)
        if state.fault is not None:
            return self._stop(state, state.fault)
        q, qd = state.sample.position, state.sample.velocity
        outside = bounds_violation(q, qd, self.limits, self.joints)
        if outside is not None:
            return self._stop(state, outside, latch=True)
        try:
            torque = impedance_torque(q, qd, goal_q=self.goal_q, goal_qd=self.goal_qd,
                                      stiffness=self.stiffness, damping=self.damping,
                                      net_torque=self.net_torque, scale=self.scale)
        except Exception as exc:  # noqa: BLE001 - any model failure must stop the robot
            return self._stop(state, f"the model failed: {type(exc).__name__}: {exc}",
                              latch=True)
        if torque.shape != (len(self.joints),) or not np.all(np.isfinite(torque)):
            return self._stop(state, f"the model gave torque {torque}", latch=True)
        torque = limit_torque(torque, state.torque, self.limits)
        return Command(torque), dataclasses.replace(state, torque=torque)

    def reset(self, state: ControllerState) -> ControllerState:
        """Clear a latched stop (after a person has checked the robot); torque restarts at
        zero and ramps up at the rate limit."""
        return dataclasses.replace(state, latched=None, torque=np.zeros(len(self.joints)))

    def shutdown(self) -> Command:
        """The last command of all: zero torque."""
        return Command(np.zeros(len(self.joints)), "shutdown")
