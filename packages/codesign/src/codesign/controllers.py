"""Controllers ``a = act(o, t; w)`` with VJPs: open-loop table, MLP, sinusoid/CPG, PD, and a
task-space stiffness law that tracks a circle (:class:`CircleTrajectory`).

Weights ``w`` are a dict described by ``parameter_space()`` and are optimized together with
the simulator design. ``act_vjp`` *adds* ∂L/∂w into a caller-owned dict: a time-indexed
table touches one row per step, and in-place accumulation keeps a T-step reverse sweep O(T)
instead of O(T²). It returns ∂L/∂o as a new array.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .design import DesignSpace, Parameter

__all__ = [
    "Controller",
    "OpenLoopController",
    "MLPController",
    "SinusoidController",
    "PDController",
    "CircleTrajectory",
    "TaskSpaceStiffnessController",
]


@runtime_checkable
class Controller(Protocol):
    """Maps an observation (1-D, ``observation_size``) and control step to an action."""

    observation_size: int
    action_size: int

    def parameter_space(self) -> DesignSpace:
        """The controller's weights as named parameters."""
        ...

    def act(self, observation, control_step: int, weights: dict[str, Any]):
        """Action, shape (action_size,)."""
        ...

    def act_vjp(self, observation, control_step: int, weights, g_action, g_weights) -> Any:
        """Add ∂L/∂w into ``g_weights``; return ∂L/∂o, shape (observation_size,)."""
        ...


class _Sized:
    """Checks and keeps the sizes every controller is built with."""

    min_action_size = 1
    """The fewest actions the law makes sense for."""

    def __init__(self, observation_size: int, action_size: int):
        if action_size < self.min_action_size:
            raise ValueError(f"{type(self).__name__} needs action_size >= "
                             f"{self.min_action_size}, got {action_size}")
        if observation_size < 0:
            raise ValueError(f"observation_size must be >= 0, got {observation_size}")
        self.observation_size, self.action_size = observation_size, action_size
        self._zeros_obs = np.zeros(observation_size)  # ∂L/∂o of a law that ignores o


class OpenLoopController(_Sized):
    """A table of actions, one row per control step; optionally squashed by ``tanh``.

    Weights: ``table`` of shape (control_steps, action_size). ``action_size`` may be 0: a
    passive scene (no actuators) then runs with an empty table and no dummy actuator.
    """

    min_action_size = 0

    def __init__(
        self,
        *,
        observation_size: int,
        action_size: int,
        control_steps: int,
        initial: float = 0.0,
        squash: bool = False,
        lower: float = -np.inf,
        upper: float = np.inf,
    ):
        super().__init__(observation_size, action_size)
        self.control_steps = int(control_steps)
        self.initial, self.squash, self.lower, self.upper = initial, squash, lower, upper

    def parameter_space(self) -> DesignSpace:
        return DesignSpace([
            Parameter("table", (self.control_steps, self.action_size), self.initial,
                      lower=self.lower, upper=self.upper, doc="action per control step"),
        ])

    def act(self, observation, control_step, weights):
        row = weights["table"][control_step]
        return np.tanh(row) if self.squash else row.copy()

    def act_vjp(self, observation, control_step, weights, g_action, g_weights):
        if self.squash:
            g_action = g_action * (1.0 - np.tanh(weights["table"][control_step]) ** 2)
        g_weights["table"][control_step] += g_action
        return self._zeros_obs


class MLPController(_Sized):
    """A multilayer perceptron with tanh hidden layers and tanh output times ``action_scale``.

    Optional phase inputs ``sin/cos(2π k t / period)`` (k = 1..phase_inputs) give a feed-forward
    rhythm, as in ChainQueen's and DiffTaichi's walkers. Weights ``w{i}`` (fan_in, fan_out) and
    ``b{i}`` (fan_out,), Glorot-uniform initialized from ``seed``.
    """

    def __init__(
        self,
        *,
        observation_size: int,
        action_size: int,
        control_steps: int = 0,
        hidden: tuple[int, ...] | list[int] = (64, 64),
        action_scale: float = 1.0,
        phase_inputs: int = 0,
        period: int = 100,
        init_scale: float = 1.0,
        seed: int = 0,
    ):
        super().__init__(observation_size, action_size)
        if any(int(h) < 1 for h in hidden):
            raise ValueError(f"hidden layer sizes must be positive, got {list(hidden)}")
        if phase_inputs < 0 or period < 1:
            raise ValueError("phase_inputs must be >= 0 and period >= 1")
        self.hidden = [int(h) for h in hidden]
        self.action_scale, self.phase_inputs, self.period = action_scale, phase_inputs, period
        self.init_scale, self.seed = init_scale, seed
        self._sizes = [observation_size + 2 * phase_inputs, *self.hidden, action_size]

    def parameter_space(self) -> DesignSpace:
        rng = np.random.default_rng(self.seed)
        parameters = []
        for i, (fan_in, fan_out) in enumerate(zip(self._sizes[:-1], self._sizes[1:], strict=True)):
            limit = self.init_scale * np.sqrt(6.0 / (fan_in + fan_out))
            parameters.append(Parameter(f"w{i}", (fan_in, fan_out),
                                        rng.uniform(-limit, limit, (fan_in, fan_out))))
            parameters.append(Parameter(f"b{i}", (fan_out,), 0.0))
        return DesignSpace(parameters)

    def _input(self, observation, control_step):
        if not self.phase_inputs:
            return np.asarray(observation, dtype=np.float64)
        k = np.arange(1, self.phase_inputs + 1)
        angle = 2.0 * np.pi * k * control_step / self.period
        return np.concatenate([observation, np.sin(angle), np.cos(angle)])

    def _forward(self, observation, control_step, weights):
        activations = [self._input(observation, control_step)]
        for i in range(len(self._sizes) - 1):
            activations.append(np.tanh(activations[-1] @ weights[f"w{i}"] + weights[f"b{i}"]))
        return activations

    def act(self, observation, control_step, weights):
        return self.action_scale * self._forward(observation, control_step, weights)[-1]

    def act_vjp(self, observation, control_step, weights, g_action, g_weights):
        activations = self._forward(observation, control_step, weights)
        g = np.asarray(g_action) * self.action_scale
        for i in reversed(range(len(self._sizes) - 1)):
            g_pre = g * (1.0 - activations[i + 1] ** 2)
            g_weights[f"w{i}"] += np.outer(activations[i], g_pre)
            g_weights[f"b{i}"] += g_pre
            g = weights[f"w{i}"] @ g_pre
        return g[: self.observation_size]


class SinusoidController(_Sized):
    """Central-pattern generator: ``a_j(t) = offset_j + Σ_k amp_jk sin(2π k f t + phase_jk)``.

    ``t = control_step * control_dt`` [s]; ``frequency`` f [Hz] is fixed, amplitudes, phases [rad]
    and offsets are weights. With ``squash`` the sum passes through ``tanh``.
    """

    def __init__(
        self,
        *,
        observation_size: int,
        action_size: int,
        control_steps: int = 0,
        control_dt: float,
        frequency: float = 1.0,
        harmonics: int = 1,
        amplitude: float = 0.5,
        squash: bool = True,
        seed: int = 0,
    ):
        super().__init__(observation_size, action_size)
        if harmonics < 1 or frequency <= 0 or control_dt <= 0:
            raise ValueError("harmonics >= 1, frequency > 0 and control_dt > 0 are required")
        self.control_dt, self.frequency, self.harmonics = control_dt, frequency, harmonics
        self.amplitude, self.squash, self.seed = amplitude, squash, seed

    def parameter_space(self) -> DesignSpace:
        rng = np.random.default_rng(self.seed)
        shape = (self.action_size, self.harmonics)
        return DesignSpace([
            Parameter("amplitude", shape, self.amplitude),
            Parameter("phase", shape, rng.uniform(0, 2 * np.pi, shape), unit="rad"),
            Parameter("offset", (self.action_size,), 0.0),
        ])

    def _angles(self, control_step):
        k = np.arange(1, self.harmonics + 1)
        return 2.0 * np.pi * k * self.frequency * control_step * self.control_dt

    def act(self, observation, control_step, weights):
        angle = self._angles(control_step)[None, :] + weights["phase"]
        raw = weights["offset"] + np.sum(weights["amplitude"] * np.sin(angle), axis=1)
        return np.tanh(raw) if self.squash else raw

    def act_vjp(self, observation, control_step, weights, g_action, g_weights):
        angle = self._angles(control_step)[None, :] + weights["phase"]
        g = np.asarray(g_action)
        if self.squash:
            raw = weights["offset"] + np.sum(weights["amplitude"] * np.sin(angle), axis=1)
            g = g * (1.0 - np.tanh(raw) ** 2)
        g_weights["offset"] += g
        g_weights["amplitude"] += g[:, None] * np.sin(angle)
        g_weights["phase"] += g[:, None] * weights["amplitude"] * np.cos(angle)
        return self._zeros_obs


class PDController(_Sized):
    """Proportional-derivative law ``a = kp (target - q) - kd q̇``.

    The observation is ``[q, q̇]`` (length 2 * action_size). Weights ``kp``, ``kd`` and
    ``target`` (each shape (action_size,)); gains are bounded below by zero.
    """

    def __init__(
        self,
        *,
        observation_size: int,
        action_size: int,
        control_steps: int = 0,
        kp: float = 1.0,
        kd: float = 0.1,
        target: float = 0.0,
    ):
        super().__init__(observation_size, action_size)
        if observation_size != 2 * action_size:
            raise ValueError(
                f"the PD controller needs observations [q, q̇] of length 2 * action_size = "
                f"{2 * action_size}, got {observation_size}; choose an observer that reports "
                "positions and velocities"
            )
        self.kp, self.kd, self.target = kp, kd, target

    def parameter_space(self) -> DesignSpace:
        n = self.action_size
        return DesignSpace([
            Parameter("kp", (n,), self.kp, lower=0.0),
            Parameter("kd", (n,), self.kd, lower=0.0),
            Parameter("target", (n,), self.target),
        ])

    def act(self, observation, control_step, weights):
        n = self.action_size
        q, qd = observation[:n], observation[n:]
        return weights["kp"] * (weights["target"] - q) - weights["kd"] * qd

    def act_vjp(self, observation, control_step, weights, g_action, g_weights):
        n = self.action_size
        q, qd = observation[:n], observation[n:]
        g_weights["kp"] += g_action * (weights["target"] - q)
        g_weights["kd"] -= g_action * qd
        g_weights["target"] += g_action * weights["kp"]
        return np.concatenate([-g_action * weights["kp"], -g_action * weights["kd"]])


@dataclasses.dataclass(frozen=True, kw_only=True)
class CircleTrajectory:
    """A point running round a circle at constant speed, counter-clockwise from ``axes[0]``
    towards ``axes[1]``: ``p(t) = centre + radius (cos φ axes[0] + sin φ axes[1])`` with
    ``φ = phase + 2π t / period``.

    Attributes:
        centre: the circle's centre [m], (3,).
        radius: [m], >= 0.
        period: time of one turn [s], > 0.
        axes: two orthonormal vectors spanning the circle's plane, (2, 3).
        phase: angle φ at t = 0 [rad].
    """

    centre: Any = (0.0, 0.0, 0.0)
    radius: float = 0.3
    period: float = 2.0
    axes: Any = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0))
    phase: float = 0.0

    def __post_init__(self):
        centre = np.asarray(self.centre, dtype=np.float64)
        axes = np.asarray(self.axes, dtype=np.float64)
        if centre.shape != (3,) or not np.all(np.isfinite(centre)):
            raise ValueError(f"circle centre must be [x, y, z] in metres, got {self.centre!r}")
        if not (np.isfinite(self.radius) and self.radius >= 0):
            raise ValueError(f"circle radius must be a length >= 0 m, got {self.radius!r}")
        if not (np.isfinite(self.period) and self.period > 0):
            raise ValueError(f"circle period must be a positive time in s, got {self.period!r}")
        if not np.isfinite(self.phase):
            raise ValueError(f"circle phase must be a finite angle in rad, got {self.phase!r}")
        if axes.shape != (2, 3) or not np.allclose(axes @ axes.T, np.eye(2), atol=1e-9):
            raise ValueError(f"circle axes must be two orthonormal vectors [[x, y, z], "
                             f"[x, y, z]] spanning its plane, got {self.axes!r}")
        object.__setattr__(self, "centre", centre)
        object.__setattr__(self, "axes", axes)

    def _angle(self, time: float) -> float:
        return self.phase + 2.0 * np.pi * time / self.period

    def position(self, time: float) -> np.ndarray:
        """The point at ``time`` [s], (3,) [m]."""
        angle = self._angle(time)
        return self.centre + self.radius * (np.cos(angle) * self.axes[0]
                                            + np.sin(angle) * self.axes[1])

    def velocity(self, time: float) -> np.ndarray:
        """Its velocity at ``time`` [s], (3,) [m/s]."""
        angle, rate = self._angle(time), 2.0 * np.pi / self.period
        return self.radius * rate * (-np.sin(angle) * self.axes[0]
                                     + np.cos(angle) * self.axes[1])


class TaskSpaceStiffnessController(_Sized):
    """Task-space stiffness law ``τ = Jᵀ (K (p_des - p) + D (ṗ_des - ṗ))`` (Liu, Li et al.,
    Eq. 29) driving an end effector round a circle (:class:`CircleTrajectory`).

    The observation is ``[p (3) m, ṗ (3) m/s, J (3, n) row-major]``, length 6 + 3n for n
    actions, the end effector's position, velocity and positional Jacobian (the ``pbd``
    simulator's ``end_effector`` observer gives it). The desired point is the circle's at
    ``t = control_step · control_dt``. Weights ``stiffness`` K [N/m] and ``damping``
    D [N s/m] (scalars, bounded below by zero).
    """

    def __init__(
        self,
        *,
        observation_size: int,
        action_size: int,
        control_steps: int = 0,
        control_dt: float,
        stiffness: float = 60.0,
        damping: float = 6.0,
        centre: list[float] = (0.0, 0.0, 0.0),
        radius: float = 0.3,
        period: float = 2.0,
        axes: list[list[float]] = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0)),
        phase: float = 0.0,
    ):
        super().__init__(observation_size, action_size)
        if observation_size != 6 + 3 * action_size:
            raise ValueError(
                f"the task-space stiffness controller needs observations [p, ṗ, J] of length "
                f"6 + 3 * action_size = {6 + 3 * action_size}, got {observation_size}; choose "
                "an observer that reports the end effector's position, velocity and Jacobian "
                "(pbd: end_effector)")
        if not (np.isfinite(control_dt) and control_dt > 0):
            raise ValueError(f"control_dt must be a positive time in s, got {control_dt!r}")
        self.control_dt, self.stiffness, self.damping = float(control_dt), stiffness, damping
        self.circle = CircleTrajectory(centre=centre, radius=radius, period=period, axes=axes,
                                       phase=phase)

    def parameter_space(self) -> DesignSpace:
        return DesignSpace([
            Parameter("stiffness", (), self.stiffness, lower=0.0, unit="N/m",
                      doc="task-space stiffness K"),
            Parameter("damping", (), self.damping, lower=0.0, unit="N s/m",
                      doc="task-space damping D"),
        ])

    def _errors(self, observation, control_step):
        """(p_des - p, ṗ_des - ṗ, J (3, n))."""
        observation = np.asarray(observation, dtype=np.float64)
        time = control_step * self.control_dt
        return (self.circle.position(time) - observation[:3],
                self.circle.velocity(time) - observation[3:6],
                observation[6:].reshape(3, self.action_size))

    def act(self, observation, control_step, weights):
        error, rate_error, jacobian = self._errors(observation, control_step)
        return jacobian.T @ (weights["stiffness"] * error + weights["damping"] * rate_error)

    def act_vjp(self, observation, control_step, weights, g_action, g_weights):
        error, rate_error, jacobian = self._errors(observation, control_step)
        g_action = np.asarray(g_action, dtype=np.float64)
        force = weights["stiffness"] * error + weights["damping"] * rate_error
        g_force = jacobian @ g_action
        g_weights["stiffness"] += g_force @ error
        g_weights["damping"] += g_force @ rate_error
        return np.concatenate([-weights["stiffness"] * g_force, -weights["damping"] * g_force,
                               np.outer(force, g_action).reshape(-1)])
