"""Joint impedance control as a run's controller (``joint_impedance``): the paper's Eq. 28
with its net-torque map built through the simulator (Sec. V-E, Figs. 12 and 13).

    τ = K_m (q_d − q) − D_m q̇ + s τ_net(q_d − q, q̇)

The observation is the ``joints`` observer's [q, q̇] (2m); the action the m joint torques
[N m]. ``net_torque`` chooses τ_net: ``map`` builds the paper's lookup map through the
simulator on first use (:func:`sim_pbd.impedance.build_net_torque_map`, one joint), a path
loads a saved one (:meth:`codesign.impedance.NetTorqueMap.load`), ``none`` makes the law PD.
``pushes`` adds external torques over time windows, the paper's 5 and 10 N m at 5–15 s and
20–30 s: they act on the joints with the motor's torque, so the action is their sum.

The gains K_m and D_m are the controller's weights (``optimize: true`` tunes them); the
paper's experiment holds them (``optimize: false`` with ``optimizer: {name: none}``). The
run's report (:meth:`JointImpedanceController.report`) writes the map (the file a robot's
controller loads, e.g. through ros_bridge), draws it (Fig. 12) and draws the run against
the same law without its map, PD (Fig. 13).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from codesign.design import DesignSpace, Parameter
from codesign.impedance import ImpedanceController, NetTorqueMap, zero_net_torque

from .impedance import build_net_torque_map, closed_loop
from .kinematics import joint_positions
from .reports import impedance_report

__all__ = ["JointImpedanceController"]


def _per_joint(name: str, value, m: int) -> np.ndarray:
    """``value`` (a scalar or m values) as a finite (m,) array, or a ValueError naming it."""
    array = np.broadcast_to(np.asarray(value, dtype=np.float64), (m,)) \
        if np.ndim(value) == 0 else np.asarray(value, dtype=np.float64)
    if array.shape != (m,) or not np.all(np.isfinite(array)):
        raise ValueError(f"joint_impedance: {name} must be one finite value or one per joint "
                         f"({m}), got {value!r}")
    return np.array(array)


class JointImpedanceController:
    """Eq. 28 on the ``pbd`` simulator's joints, with weights ``stiffness`` K_m [N m/rad]
    and ``damping`` D_m [N m s/rad], each (m,).

    Args:
        goal: q_d [rad or m], one value or one per joint.
        stiffness, damping: the weights' initial values (the paper's 30 and 0.01).
        scale: s, the impedance scaling factor (1 in the paper's simulation).
        net_torque: ``map`` (build it through the simulator, one joint), ``none`` (PD) or
            the path of a saved map (``.npz``, relative to the working directory).
        angle_points, rate_points, max_angle_step, max_rate: the built map's grid: Δθ over
            [−max_angle_step, max_angle_step] [rad], ω over [−max_rate, max_rate] [rad/s].
        pushes: external torques, rows ``[start s, end s, τ_1 … τ_m N m]`` applied over
            start ≤ t < end, t = control step × control period.
    """

    def __init__(self, *, simulator, observation_size: int, action_size: int,
                 control_steps: int = 0, control_dt: float,
                 goal: float | list[float] = 0.0, stiffness: float | list[float] = 30.0,
                 damping: float | list[float] = 0.01, scale: float = 1.0,
                 net_torque: str = "map", angle_points: int = 21, rate_points: int = 21,
                 max_angle_step: float = 0.00625, max_rate: float = 0.5,
                 pushes: list[list[float]] = ()):
        model = getattr(simulator, "model", None)
        if model is None or not hasattr(model, "joint_names"):
            raise ValueError("joint_impedance needs the pbd simulator")
        m = model.joint_count
        if action_size != m or observation_size != 2 * m:
            raise ValueError(f"joint_impedance reads [q, q̇] of the {m} joint(s) and gives "
                             f"{m} torque(s): set observer: {{name: joints}} (got an "
                             f"observation of {observation_size} and {action_size} actions)")
        self.simulator, self.control_dt = simulator, float(control_dt)
        self.observation_size, self.action_size = observation_size, action_size
        self.goal = _per_joint("goal", goal, m)
        self.stiffness = _per_joint("stiffness", stiffness, m)
        self.damping = _per_joint("damping", damping, m)
        # the law's own checks (non-negative, finite gains and scale) before anything is built
        ImpedanceController(zero_net_torque, stiffness=self.stiffness, damping=self.damping,
                            scale=scale)
        self.scale = float(scale)
        self.pushes = self._check_pushes(pushes, m)
        self._grid = {"angle_steps": np.linspace(-max_angle_step, max_angle_step,
                                                 int(angle_points)),
                      "rates": np.linspace(-max_rate, max_rate, int(rate_points))}
        self.net_torque_source = str(net_torque)
        self._net = self._initial_net(self.net_torque_source, model)

    @staticmethod
    def _check_pushes(pushes, m: int) -> np.ndarray:
        try:
            rows = np.asarray(pushes, dtype=np.float64) if len(pushes) \
                else np.zeros((0, 2 + m))
        except (TypeError, ValueError):  # ragged rows, words
            rows = np.zeros((1, 0))
        if rows.ndim != 2 or rows.shape[1] != 2 + m or not np.all(np.isfinite(rows)) \
                or np.any(rows[:, 1] <= rows[:, 0]):
            raise ValueError(f"joint_impedance: each push is [start s, end s, one torque per "
                             f"joint ({m})] with start < end, got {pushes!r}")
        return rows

    def _initial_net(self, source: str, model):
        """τ_net now (none, a file), or None when it is built on first use."""
        if source == "none":
            return zero_net_torque
        if source == "map":
            if model.joint_count != 1:
                raise ValueError(f"joint_impedance: net_torque: map builds a one-joint map, but "
                                 f"the simulator has {model.joint_count} joints; set the "
                                 "simulator's joints to [<the joint>] or load a map file")
            for name, grid in self._grid.items():
                if grid.size < 2 or not np.all(np.diff(grid) > 0):
                    raise ValueError(f"joint_impedance: the map's {name} grid needs at least 2 "
                                     "points and a positive range (angle_points, rate_points, "
                                     "max_angle_step, max_rate)")
            return None
        net = NetTorqueMap.load(source)
        if list(net.joints) != list(model.joint_names):
            raise ValueError(f"joint_impedance: the map {source!r} is of joints "
                             f"{list(net.joints)}, the simulator's are "
                             f"{list(model.joint_names)}")
        return net

    @property
    def net_torque(self):
        """τ_net: the built or loaded map, or :func:`zero_net_torque` (PD)."""
        if self._net is None:
            sim = self.simulator
            self._net = build_net_torque_map(
                sim, sim.design_space().defaults(), goal=float(self.goal[0]),
                dt=self.control_dt, **self._grid)
        return self._net

    def push(self, control_step: int) -> np.ndarray:
        """The external torques [N m], (m,), at control step ``control_step``."""
        t = control_step * self.control_dt
        active = (self.pushes[:, 0] <= t) & (t < self.pushes[:, 1])
        return self.pushes[active, 2:].sum(axis=0)

    def parameter_space(self) -> DesignSpace:
        """The weights ``stiffness`` and ``damping``, (m,) each, at least 0."""
        m = self.action_size
        return DesignSpace([Parameter("stiffness", (m,), self.stiffness, lower=0.0),
                            Parameter("damping", (m,), self.damping, lower=0.0)])

    def _split(self, observation):
        m = self.action_size
        observation = np.asarray(observation, dtype=np.float64)
        return observation[:m], observation[m:]

    def act(self, observation, control_step, weights):
        """The motor's torque plus the pushes at ``control_step``, (m,) [N m]."""
        q, qd = self._split(observation)
        law = ImpedanceController(self.net_torque, stiffness=weights["stiffness"],
                                  damping=weights["damping"], scale=self.scale)
        return law(q, qd, self.goal) + self.push(control_step)

    def act_vjp(self, observation, control_step, weights, g_action, g_weights):
        """∂/∂observation (2m,) of ``g_action · act``; adds the weights' part into
        ``g_weights``. The map's part is its bilinear slopes (zero where it is clamped)."""
        q, qd = self._split(observation)
        g_action = np.asarray(g_action, dtype=np.float64)
        g_weights["stiffness"] += g_action * (self.goal - q)
        g_weights["damping"] -= g_action * qd
        g_q = -g_action * weights["stiffness"]
        g_qd = -g_action * weights["damping"]
        if isinstance(self.net_torque, NetTorqueMap):
            d_angle, d_rate = self.net_torque.slopes(q, qd, self.goal)
            g_q = g_q - self.scale * g_action * d_angle
            g_qd = g_qd + self.scale * g_action * d_rate
        return np.concatenate([g_q, g_qd])

    def report(self, folder: Path, context) -> dict:
        """Into ``folder``: ``net_torque_map.npz`` and ``net_torque_map.png`` (with a map)
        and ``impedance_control.png`` (:func:`sim_pbd.reports.impedance_report`): the run
        against the same law without its map (PD), simulated from the same start one
        simulator step of the control period per control step, under the same pushes.
        Returns the numbers (largest and final error under each push, largest torque)."""
        sim, design = self.simulator, context.design
        params = sim.parameters(design)
        angles = np.array([joint_positions(sim.model, params, s) for s in context.states])
        steps = len(context.actions)
        pushes = np.array([self.push(k) for k in range(steps)])
        weights = {"stiffness": self.stiffness, "damping": self.damping}
        if context.controller_weights:
            weights = {name: np.asarray(context.controller_weights[name]) for name in weights}
        pd = ImpedanceController(zero_net_torque, **weights)
        baseline = closed_loop(sim, design, lambda q, qd: pd(q, qd, self.goal),
                               joint_q=angles[0, 0], steps=steps, dt=self.control_dt,
                               external=lambda t: self.push(int(round(t / self.control_dt))))
        net = self.net_torque if isinstance(self.net_torque, NetTorqueMap) else None
        return impedance_report(
            folder, joint_names=sim.model.joint_names, control_dt=self.control_dt,
            goal=self.goal, pushes=self.pushes, external=pushes,
            runs={"impedance": (angles[:, 0], np.asarray(context.actions) - pushes),
                  "PD": (baseline.joint_q, baseline.torques)},
            parts={"PD component": pd(angles[:-1, 0], angles[:-1, 1], self.goal),
                   "map component": np.zeros((steps, self.action_size)) if net is None
                   else self.scale * net(angles[:-1, 0], angles[:-1, 1], self.goal)},
            net_torque=net)
