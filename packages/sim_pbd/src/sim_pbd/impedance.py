"""Joint impedance control with a net-torque map built through the simulator (the paper's
Sec. IV-C, Eq. 28, and Sec. V-E, Figs. 12 and 13).

Eq. 28 without its Coriolis term (the paper drops it too):

    τ = K_m (q_d - q) + D_m (q̇_d - q̇) + s τ_net(q_d - q, q̇)

τ_net, the model part (inertia matching and gravity), comes from a lookup map keyed by the
angle difference Δθ = q_d - q [rad] and the joint rate ω = q̇ [rad/s]: the torque that
takes the joint from angle q_d - Δθ, moving at ω, to q_d in one step of ``dt``, found by
minimizing Eq. 26 with the angle term only (λ1 = 1, λ2 = λ3 = 0) through the differentiable
step (:func:`build_net_torque_map`). The paper's grid: Δt = 0.01 s, |ω| ≤ 0.5 rad/s,
|Δθ| ≤ 0.00625 rad; K_m = 30, D_m = 0.01, s = 1.

At run time the law is a pure function of the joint state (:func:`impedance_torque`,
:class:`ImpedanceController`): the map is read from its file (:meth:`NetTorqueMap.load`)
and interpolated bilinearly, with no simulator, so a robot's controller (the ROS 2 bridge)
can call it. Outside its grid the map holds its edge values: the torque stays bounded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .kinematics import forward_kinematics, joint_frames, joint_origins, joint_positions
from .rotations import quat_rotate_rows
from .state import PBDState
from .torque_estimation import HorizonProblem, _gauss_newton

__all__ = ["ClosedLoop", "ImpedanceController", "NetTorqueMap", "build_net_torque_map",
           "closed_loop", "impedance_torque", "moving_state", "pd_torque"]

PAPER_GAINS = {"stiffness": 30.0, "damping": 0.01}
"""The paper's K_m [N m/rad] and D_m [N m s/rad] (Sec. V-E)."""


def _grid(name: str, values) -> np.ndarray:
    grid = np.asarray(values, dtype=np.float64)
    if grid.ndim != 1 or grid.size < 2 or not np.all(np.isfinite(grid)) \
            or np.any(np.diff(grid) <= 0):
        raise ValueError(f"{name} must be at least 2 finite values in increasing order, got "
                         f"{values!r}")
    return grid


def _cell(grid: np.ndarray, value) -> tuple[np.ndarray, np.ndarray]:
    """The grid cell of each value (clamped to the grid) and its fraction across it."""
    clamped = np.clip(value, grid[0], grid[-1])
    index = np.clip(np.searchsorted(grid, clamped, side="right") - 1, 0, grid.size - 2)
    return index, (clamped - grid[index]) / (grid[index + 1] - grid[index])


@dataclasses.dataclass(frozen=True)
class NetTorqueMap:
    """τ_net [N m] over a grid of angle differences Δθ = q_d - q [rad] and rates ω [rad/s].

    Attributes:
        angle_steps: the Δθ grid, (A,) increasing [rad].
        rates: the ω grid, (W,) increasing [rad/s].
        torques: τ_net at each grid point, (A, W) [N m].
        dt: the step [s] the map moves the joint to its goal in.
        goal: the joint angle [rad] it was built at.
        joint: the joint's name.
    """

    angle_steps: np.ndarray
    rates: np.ndarray
    torques: np.ndarray
    dt: float
    goal: float
    joint: str = ""

    def __post_init__(self):
        angle_steps, rates = _grid("angle_steps", self.angle_steps), _grid("rates", self.rates)
        torques = np.asarray(self.torques, dtype=np.float64)
        if torques.shape != (angle_steps.size, rates.size) or not np.all(np.isfinite(torques)):
            raise ValueError(f"torques must be finite, one per grid point ({angle_steps.size} "
                             f"angle steps x {rates.size} rates), got shape {torques.shape}")
        if not (np.isfinite(self.dt) and self.dt > 0):
            raise ValueError(f"dt must be a positive time step [s], got {self.dt!r}")
        object.__setattr__(self, "angle_steps", angle_steps)
        object.__setattr__(self, "rates", rates)
        object.__setattr__(self, "torques", torques)
        object.__setattr__(self, "dt", float(self.dt))
        object.__setattr__(self, "goal", float(self.goal))
        object.__setattr__(self, "joint", str(self.joint))

    def __call__(self, angle_step, rate):
        """τ_net [N m] at Δθ ``angle_step`` [rad] and ω ``rate`` [rad/s] (scalars or arrays
        that broadcast), bilinear between grid points, the edge value beyond the grid."""
        i, u = _cell(self.angle_steps, np.asarray(angle_step, dtype=np.float64))
        j, v = _cell(self.rates, np.asarray(rate, dtype=np.float64))
        t = self.torques
        return ((1 - u) * ((1 - v) * t[i, j] + v * t[i, j + 1])
                + u * ((1 - v) * t[i + 1, j] + v * t[i + 1, j + 1]))

    def save(self, path) -> Path:
        """Write the map to ``path`` (an ``.npz``: the grids, torques, dt, goal and joint)."""
        path = Path(path)
        np.savez(path, angle_steps=self.angle_steps, rates=self.rates, torques=self.torques,
                 dt=self.dt, goal=self.goal, joint=np.str_(self.joint))
        return path

    @classmethod
    def load(cls, path) -> NetTorqueMap:
        """The map :meth:`save` wrote to ``path``; ValueError naming a missing entry."""
        with np.load(path, allow_pickle=False) as data:
            missing = [k for k in ("angle_steps", "rates", "torques", "dt", "goal", "joint")
                       if k not in data.files]
            if missing:
                raise ValueError(f"{path}: not a net-torque map (missing {missing}); write one "
                                 "with NetTorqueMap.save or build_net_torque_map")
            return cls(angle_steps=data["angle_steps"], rates=data["rates"],
                       torques=data["torques"], dt=float(data["dt"]), goal=float(data["goal"]),
                       joint=str(data["joint"]))


def pd_torque(q, qd, goal, *, stiffness: float, damping: float, goal_rate=0.0):
    """τ_pd = K (q_d - q) + D (q̇_d - q̇) [N m] (Eq. 28's PD part) at angle ``q`` [rad] and
    rate ``qd`` [rad/s], goal ``goal`` [rad] and ``goal_rate`` [rad/s]; ``stiffness`` K
    [N m/rad], ``damping`` D [N m s/rad]."""
    return stiffness * (np.asarray(goal) - q) + damping * (np.asarray(goal_rate) - qd)


def impedance_torque(net_torque: NetTorqueMap, q, qd, goal, *, stiffness: float,
                     damping: float, goal_rate=0.0, scale: float = 1.0):
    """Eq. 28's joint torque [N m]: :func:`pd_torque` plus ``scale`` times the map's
    τ_net at Δθ = ``goal`` - ``q`` and ω = ``qd`` (scalars or arrays that broadcast)."""
    return (pd_torque(q, qd, goal, stiffness=stiffness, damping=damping, goal_rate=goal_rate)
            + scale * net_torque(np.asarray(goal) - q, qd))


@dataclasses.dataclass(frozen=True)
class ImpedanceController:
    """The impedance law of one joint with its map loaded: ``controller(q, qd, goal)`` ->
    τ [N m], a pure function of the joint state (no simulator).

    Attributes:
        net_torque: the τ_net map (:meth:`NetTorqueMap.load` reads one from its file).
        stiffness: K_m [N m/rad] (the paper's 30).
        damping: D_m [N m s/rad] (the paper's 0.01).
        scale: the impedance component's factor s (1 in the paper's simulation, 0.6 on
            its robot).
    """

    net_torque: NetTorqueMap
    stiffness: float = PAPER_GAINS["stiffness"]
    damping: float = PAPER_GAINS["damping"]
    scale: float = 1.0

    def __call__(self, q, qd, goal, goal_rate=0.0):
        """τ [N m] at angle ``q`` [rad], rate ``qd`` [rad/s], goal ``goal`` [rad] and
        ``goal_rate`` [rad/s]."""
        return impedance_torque(self.net_torque, q, qd, goal, stiffness=self.stiffness,
                                damping=self.damping, goal_rate=goal_rate, scale=self.scale)


def moving_state(sim, design: dict, joint_q, joint_qd) -> PBDState:
    """The robot of ``sim`` at joint positions ``joint_q`` (m,) moving at joint rates
    ``joint_qd`` (m,) [rad/s or m/s]: link velocities from the chain's joint rates (a
    revolute joint adds ω a to its child's angular velocity and ω a × r to the velocity of
    a point r from its origin, a prismatic one v a), the base fixed."""
    model, params = sim.model, sim.parameters(design)
    joint_q = np.asarray(joint_q, dtype=np.float64)
    joint_qd = np.asarray(joint_qd, dtype=np.float64)
    m = model.joint_count
    if joint_q.shape != (m,) or joint_qd.shape != (m,):
        raise ValueError(f"joint_q and joint_qd must have one value per joint ({m}: "
                         f"{list(model.joint_names)}), got shapes {joint_q.shape} and "
                         f"{joint_qd.shape}")
    link_x, link_q = forward_kinematics(model, params, joint_q)
    state = PBDState(link_x, link_q, np.zeros_like(link_x), np.zeros_like(link_x))
    frames = joint_frames(model)
    _, origin = joint_origins(model, state, params)
    axis = quat_rotate_rows(link_q[model.joint_child], frames.child_axis)
    for j in frames.order:
        parent, child = model.joint_parent[j], model.joint_child[j]
        if parent >= 0:
            state.link_w[child] = state.link_w[parent]
            state.link_v[child] = state.link_v[parent] + np.cross(
                state.link_w[parent], link_x[child] - link_x[parent])
        if frames.prismatic[j]:
            state.link_v[child] += joint_qd[j] * axis[j]
        else:
            state.link_w[child] += joint_qd[j] * axis[j]
            state.link_v[child] += np.cross(joint_qd[j] * axis[j], link_x[child] - origin[j])
    return state


def build_net_torque_map(sim, design: dict, *, goal: float, angle_steps, rates,
                         dt: float = 0.01, iterations: int = 10,
                         tolerance: float = 1e-10) -> NetTorqueMap:
    """The τ_net map of the one joint of ``sim`` (build it with that joint kept and the
    others frozen, as the paper holds them) at goal angle ``goal`` [rad]: at each Δθ of
    ``angle_steps`` [rad] and ω of ``rates`` [rad/s], the torque that takes the joint from
    ``goal`` - Δθ moving at ω to ``goal`` in one step of ``dt`` [s] (Eq. 26 with λ1 = 1,
    λ2 = λ3 = 0, minimized through the simulator's step by Gauss-Newton: at most
    ``iterations`` iterations, stopping at a change below ``tolerance`` [N m])."""
    if sim.model.joint_count != 1:
        raise ValueError(f"the net-torque map is of one joint, but the simulator has "
                         f"{sim.model.joint_count} ({list(sim.model.joint_names)}): build it "
                         "with joints=[<the joint>] so the others are frozen")
    angle_steps, rates = _grid("angle_steps", angle_steps), _grid("rates", rates)
    torques = np.zeros((angle_steps.size, rates.size))
    for a, angle_step in enumerate(angle_steps):
        for w, rate in enumerate(rates):
            state = moving_state(sim, design, [goal - angle_step], [rate])
            problem = HorizonProblem(sim, design, state, [[goal]], [[0.0]], None, float(dt),
                                     (1.0, 0.0, 0.0))
            torques[a, w] = _gauss_newton(problem, np.zeros(1), iterations=iterations,
                                          tolerance=tolerance)[0]
    return NetTorqueMap(angle_steps=angle_steps, rates=rates, torques=torques, dt=float(dt),
                        goal=float(goal), joint=sim.model.joint_names[0])


class ClosedLoop(NamedTuple):
    """What :func:`closed_loop` returns, K steps.

    Attributes:
        time: (K + 1,) [s].
        joint_q, joint_qd: the joint angles [rad] and rates [rad/s], (K + 1, m).
        torques: the controller's torques, (K, m) [N m].
    """

    time: np.ndarray
    joint_q: np.ndarray
    joint_qd: np.ndarray
    torques: np.ndarray


def closed_loop(sim, design: dict, controller: Callable, *, joint_q, steps: int, dt: float,
                external: Callable | None = None) -> ClosedLoop:
    """Simulate ``steps`` steps of ``dt`` [s] from rest at ``joint_q`` (m,) with the joint
    torques ``controller(q, qd)`` (m,) [N m] read from the joint state at each step's start
    (a robot's zero-order hold), plus ``external(t)`` (m,) [N m] at time t [s] if given."""
    state = moving_state(sim, design, joint_q, np.zeros(sim.model.joint_count))
    params = sim.parameters(design)
    angles, rates, torques = [], [], []
    for k in range(int(steps)):
        q, qd = joint_positions(sim.model, params, state)
        angles.append(q)
        rates.append(qd)
        torque = np.asarray(controller(q, qd), dtype=np.float64).reshape(-1)
        torques.append(torque)
        action = torque if external is None else torque + np.asarray(external(k * dt))
        state = sim.step(state, action, design, dt)
    q, qd = joint_positions(sim.model, params, state)
    angles.append(q)
    rates.append(qd)
    return ClosedLoop(time=dt * np.arange(int(steps) + 1), joint_q=np.array(angles),
                      joint_qd=np.array(rates), torques=np.array(torques))

