"""The joint impedance law of Liu, Li et al. (Sec. IV-C, Eq. 28) and its net-torque models.

    τ = K (q_d − q) + D (q̇_d − q̇) + λ τ_net

``τ_net`` comes from a model: the inverse dynamics ``M(q) q̈_d + S(q, q̇) q̇ + g(q)``
(:func:`inverse_dynamics_net_torque`) or the paper's net-torque lookup map
(:class:`NetTorqueMap`, Sec. V-E: torque by angle difference q_d − q and joint rate q̇,
built by a simulator plugin and read from its ``.npz`` file); ``λ`` is the paper's
impedance scaling factor (1 in simulation, 0.6 on the real Baxter). ``λ = 0`` or
:func:`zero_net_torque` is PD alone. The paper drops Eq. 28's Coriolis term; so does the
map.

Everything here is pure and needs no simulator, so a robot's control loop (ros_bridge) and
a simulator's closed loop (sim_pbd) share it. Joint states are arrays whose last axis is
the n joints, (n,) or (..., n) for many states at once; torques come back in the same shape.
"""

from __future__ import annotations

import dataclasses
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

__all__ = [
    "PAPER_GAINS",
    "ImpedanceController",
    "NetTorque",
    "NetTorqueMap",
    "impedance_torque",
    "inverse_dynamics_net_torque",
    "zero_net_torque",
]

PAPER_GAINS = {"stiffness": 30.0, "damping": 0.01}
"""The paper's K_m [N m/rad] and D_m [N m s/rad] (Sec. V-E)."""

_MAP_ENTRIES = ("joints", "angle_steps", "rates", "torques", "dt", "goal")


class NetTorque(Protocol):
    """A model's net torque [N m], shape (..., n), at the measured and goal joint states."""

    def __call__(self, joint_q: np.ndarray, joint_qd: np.ndarray, goal_q: np.ndarray,
                 goal_qd: np.ndarray) -> np.ndarray: ...


def zero_net_torque(joint_q, joint_qd, goal_q, goal_qd) -> np.ndarray:
    """No model: zeros shaped like ``joint_q``, so the law is PD alone."""
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


def _grid(name: str, values) -> np.ndarray:
    grid = np.asarray(values, dtype=np.float64)
    if grid.ndim != 1 or grid.size < 2 or not np.all(np.isfinite(grid)) \
            or np.any(np.diff(grid) <= 0):
        raise ValueError(f"NetTorqueMap {name} must be an increasing grid: at least 2 finite "
                         f"values in increasing order, got {values!r}")
    return grid


def _cell(grid: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The grid cell of each value (clamped to the grid) and its fraction across it."""
    clamped = np.clip(value, grid[0], grid[-1])
    index = np.clip(np.searchsorted(grid, clamped, side="right") - 1, 0, grid.size - 2)
    return index, (clamped - grid[index]) / (grid[index + 1] - grid[index])


@dataclasses.dataclass(frozen=True, eq=False)
class NetTorqueMap:
    """The paper's net-torque lookup map: τ_net [N m] of each joint over a grid of angle
    differences Δθ = q_d − q [rad] and joint rates ω = q̇ [rad/s], bilinear between grid
    points and holding the edge value beyond the grid (never extrapolated, so the torque
    stays bounded). A :class:`NetTorque`: ``map(joint_q, joint_qd, goal_q, goal_qd)``.

    Attributes:
        joints: the n joints' names, in the order of the state's last axis.
        angle_steps: the Δθ grid, (A,) increasing [rad].
        rates: the ω grid, (W,) increasing [rad/s].
        torques: τ_net at each grid point of each joint, (n, A, W) [N m].
        dt: the step [s] the map was built to reach the goal in.
        goal: the joint angles [rad] it was built at, (n,).
    """

    joints: tuple[str, ...]
    angle_steps: np.ndarray
    rates: np.ndarray
    torques: np.ndarray
    dt: float
    goal: np.ndarray

    def __post_init__(self):
        if isinstance(self.joints, str):
            raise ValueError(f"NetTorqueMap joints must be a list of joint names, got the "
                             f"string {self.joints!r}: write [{self.joints!r}]")
        joints = tuple(str(joint) for joint in self.joints)
        n = len(joints)
        if n == 0 or len(set(joints)) != n:
            raise ValueError(f"NetTorqueMap joints must be distinct joint names, at least one, "
                             f"got {self.joints!r}")
        angle_steps, rates = _grid("angle_steps", self.angle_steps), _grid("rates", self.rates)
        shape = (n, angle_steps.size, rates.size)
        torques = np.asarray(self.torques, dtype=np.float64)
        if torques.shape != shape or not np.all(np.isfinite(torques)):
            raise ValueError(f"NetTorqueMap torques must be finite, one per grid point of each "
                             f"joint: shape (joints, {shape[1]}, {shape[2]}) = {shape}, got "
                             f"shape {torques.shape}")
        if not (np.isfinite(self.dt) and self.dt > 0):
            raise ValueError(f"NetTorqueMap dt must be a positive time step [s], got "
                             f"{self.dt!r}")
        goal = np.asarray(self.goal, dtype=np.float64)
        if goal.shape != (n,) or not np.all(np.isfinite(goal)):
            raise ValueError(f"NetTorqueMap goal must be one finite angle [rad] per joint "
                             f"({n}: {list(joints)}), got {self.goal!r}")
        for name, value in (("joints", joints), ("angle_steps", angle_steps), ("rates", rates),
                            ("torques", torques), ("dt", float(self.dt)), ("goal", goal)):
            object.__setattr__(self, name, value)

    def __call__(self, joint_q, joint_qd, goal_q, goal_qd=0.0) -> np.ndarray:
        """τ_net [N m], (..., n), at Δθ = ``goal_q`` − ``joint_q`` [rad] and ω = ``joint_qd``
        [rad/s] (arrays whose last axis is the joints; the goal's rate is not a key)."""
        angle_step = np.asarray(goal_q, dtype=np.float64) - np.asarray(joint_q, np.float64)
        n = len(self.joints)
        if angle_step.ndim == 0 or angle_step.shape[-1] != n:
            raise ValueError(f"the map has {n} joint(s) {list(self.joints)}, but the state has "
                             f"shape {angle_step.shape}: give one value per joint on its last "
                             "axis")
        rate = np.broadcast_to(np.asarray(joint_qd, dtype=np.float64), angle_step.shape)
        i, u = _cell(self.angle_steps, angle_step)
        j, v = _cell(self.rates, rate)
        joint, table = np.arange(n), self.torques
        return ((1 - u) * ((1 - v) * table[joint, i, j] + v * table[joint, i, j + 1])
                + u * ((1 - v) * table[joint, i + 1, j] + v * table[joint, i + 1, j + 1]))

    def slopes(self, joint_q, joint_qd, goal_q) -> tuple[np.ndarray, np.ndarray]:
        """(∂τ_net/∂Δθ [N m/rad], ∂τ_net/∂ω [N m s/rad]), each (..., n), at the points of
        :meth:`__call__`: the bilinear interpolant's slopes inside the grid cell of each
        point (on a grid line, the cell above it), zero along an axis clamped at the grid's
        edge (the held edge value)."""
        angle_step = np.asarray(goal_q, dtype=np.float64) - np.asarray(joint_q, np.float64)
        rate = np.broadcast_to(np.asarray(joint_qd, dtype=np.float64), angle_step.shape)
        i, u = _cell(self.angle_steps, angle_step)
        j, v = _cell(self.rates, rate)
        joint, table = np.arange(len(self.joints)), self.torques
        corner = {(a, b): table[joint, i + a, j + b] for a in (0, 1) for b in (0, 1)}
        inside_angle = (angle_step > self.angle_steps[0]) & (angle_step < self.angle_steps[-1])
        inside_rate = (rate > self.rates[0]) & (rate < self.rates[-1])
        d_angle = ((1 - v) * (corner[1, 0] - corner[0, 0]) + v * (corner[1, 1] - corner[0, 1])) \
            / (self.angle_steps[i + 1] - self.angle_steps[i])
        d_rate = ((1 - u) * (corner[0, 1] - corner[0, 0]) + u * (corner[1, 1] - corner[1, 0])) \
            / (self.rates[j + 1] - self.rates[j])
        return np.where(inside_angle, d_angle, 0.0), np.where(inside_rate, d_rate, 0.0)

    def save(self, path) -> Path:
        """Write the map to ``path`` (an ``.npz`` of its six attributes) and return it."""
        path = Path(path)
        # through a file object: np.savez would append ".npz" to a path without it
        with path.open("wb") as file:
            np.savez(file, joints=np.array(self.joints, dtype=np.str_),
                     angle_steps=self.angle_steps, rates=self.rates, torques=self.torques,
                     dt=self.dt, goal=self.goal)
        return path

    @classmethod
    def load(cls, path) -> NetTorqueMap:
        """The map :meth:`save` wrote to ``path``; FileNotFoundError when there is none,
        ValueError naming the problem for a file that is not a whole, valid map."""
        path = Path(path)
        remedy = "write one with NetTorqueMap.save (a simulator plugin builds one)"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no net-torque map file there; {remedy}")
        try:
            data = np.load(path, allow_pickle=False)
            if isinstance(data, np.ndarray):
                raise ValueError("it holds one array, not named entries")
            with data:
                entries = {name: data[name] for name in _MAP_ENTRIES if name in data.files}
        except (OSError, EOFError, ValueError, zipfile.BadZipFile) as exc:
            raise ValueError(f"{path}: not a readable net-torque map .npz ({exc}); "
                             f"{remedy}") from exc
        missing = [name for name in _MAP_ENTRIES if name not in entries]
        if missing:
            raise ValueError(f"{path}: not a net-torque map (missing {missing}); {remedy}")
        try:
            return cls(joints=entries["joints"].reshape(-1).tolist(),
                       angle_steps=entries["angle_steps"], rates=entries["rates"],
                       torques=entries["torques"], dt=float(entries["dt"]),
                       goal=entries["goal"])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}: a corrupt net-torque map: {exc}; {remedy}") from exc


def impedance_torque(joint_q, joint_qd, *, goal_q, goal_qd=0.0, stiffness, damping,
                     net_torque: NetTorque = zero_net_torque, scale: float = 1.0) -> np.ndarray:
    """τ = K (q_d − q) + D (q̇_d − q̇) + λ τ_net [N m], (..., n).

    Args:
        joint_q, joint_qd: measured joint angles [rad] and rates [rad/s], (..., n).
        goal_q, goal_qd: goal angles q_d [rad] and rates q̇_d [rad/s], (..., n) or what
            broadcasts to it.
        stiffness, damping: K [N m/rad] and D [N m s/rad], (n,) or scalars.
        net_torque: the model's τ_net (:class:`NetTorque`); default none (PD alone).
        scale: λ, the impedance scaling factor, ≥ 0.
    """
    q, qd = np.asarray(joint_q, float), np.asarray(joint_qd, float)
    goal_q, goal_qd = np.asarray(goal_q, float), np.asarray(goal_qd, float)
    pd = np.asarray(stiffness, float) * (goal_q - q) + np.asarray(damping, float) * (goal_qd - qd)
    if scale == 0:
        return pd
    return pd + scale * np.asarray(net_torque(q, qd, goal_q, goal_qd), dtype=np.float64)


@dataclasses.dataclass(frozen=True, eq=False)
class ImpedanceController:
    """The impedance law with its model loaded: ``controller(q, qd, goal_q, goal_qd=0)`` ->
    τ [N m], a pure function of the joint state (:func:`impedance_torque`).

    Attributes:
        net_torque: τ_net, e.g. a :class:`NetTorqueMap` from :meth:`NetTorqueMap.load`;
            :func:`zero_net_torque` makes the controller PD.
        stiffness: K [N m/rad], (n,) or a scalar (the paper's 30).
        damping: D [N m s/rad], (n,) or a scalar (the paper's 0.01).
        scale: λ, the impedance scaling factor, ≥ 0 (1 in the paper's simulation, 0.6 on
            its robot).
    """

    net_torque: NetTorque
    stiffness: float | Sequence[float] = PAPER_GAINS["stiffness"]
    damping: float | Sequence[float] = PAPER_GAINS["damping"]
    scale: float = 1.0

    def __post_init__(self):
        for name in ("stiffness", "damping", "scale"):
            value = np.asarray(getattr(self, name), dtype=np.float64)
            if not (np.all(np.isfinite(value)) and np.all(value >= 0)):
                raise ValueError(f"ImpedanceController {name} must be finite and >= 0, got "
                                 f"{getattr(self, name)!r}")

    def __call__(self, q, qd, goal_q, goal_qd=0.0) -> np.ndarray:
        """τ [N m], (..., n), at joint angles ``q`` [rad] and rates ``qd`` [rad/s], goal
        angles ``goal_q`` [rad] and rates ``goal_qd`` [rad/s] (last axis: the joints)."""
        return impedance_torque(q, qd, goal_q=goal_q, goal_qd=goal_qd,
                                stiffness=self.stiffness, damping=self.damping,
                                net_torque=self.net_torque, scale=self.scale)
