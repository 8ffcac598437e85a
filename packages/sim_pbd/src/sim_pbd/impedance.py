"""The net-torque map of joint impedance control built through the simulator (the paper's
Sec. IV-C, Eq. 28, and Sec. V-E, Figs. 12 and 13), and closed-loop runs of a controller.

The law and the map are the core's (:mod:`codesign.impedance`):

    τ = K_m (q_d - q) + D_m (q̇_d - q̇) + s τ_net(q_d - q, q̇)

τ_net, the model part (inertia matching and gravity), comes from a lookup map keyed by the
angle difference Δθ = q_d - q [rad] and the joint rate ω = q̇ [rad/s]. Here the map is
built: each entry is the torque that takes the joint from angle q_d - Δθ, moving at ω, to
q_d in one step of ``dt``, found by minimizing Eq. 26 with the angle term only (λ1 = 1,
λ2 = λ3 = 0) through the differentiable step (:func:`build_net_torque_map`). The paper's
grid: Δt = 0.01 s, |ω| ≤ 0.5 rad/s, |Δθ| ≤ 0.00625 rad; K_m = 30, D_m = 0.01, s = 1.

At run time nothing here is needed: :meth:`codesign.impedance.NetTorqueMap.load` reads the
map and :class:`codesign.impedance.ImpedanceController` applies the law, so a robot's
controller (the ROS 2 bridge) uses it without the simulator. :func:`closed_loop` runs any
such controller on the simulated robot.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from codesign.impedance import NetTorqueMap

from .kinematics import joint_positions
from .torque_estimation import HorizonProblem, _gauss_newton

__all__ = ["ClosedLoop", "build_net_torque_map", "closed_loop"]


def build_net_torque_map(sim, design: dict, *, goal: float, angle_steps, rates,
                         dt: float = 0.01, iterations: int = 10,
                         tolerance: float = 1e-10) -> NetTorqueMap:
    """The τ_net map (:class:`codesign.impedance.NetTorqueMap`, one joint) of the one joint
    of ``sim`` (build it with that joint kept and the others frozen, as the paper holds
    them) at goal angle ``goal`` [rad]: at each Δθ of ``angle_steps`` [rad] and ω of
    ``rates`` [rad/s], the torque that takes the joint from ``goal`` - Δθ moving at ω to
    ``goal`` in one step of ``dt`` [s] (Eq. 26 with λ1 = 1, λ2 = λ3 = 0, minimized through
    the simulator's step by Gauss-Newton: at most ``iterations`` iterations, stopping at a
    change below ``tolerance`` [N m])."""
    if sim.model.joint_count != 1:
        raise ValueError(f"the net-torque map is of one joint, but the simulator has "
                         f"{sim.model.joint_count} ({list(sim.model.joint_names)}): build it "
                         "with joints=[<the joint>] so the others are frozen")
    # the map's checks (grids, dt, goal) before the long build, on a map of zeros
    blank = NetTorqueMap(joints=[sim.model.joint_names[0]], angle_steps=angle_steps,
                         rates=rates, torques=np.zeros((1, np.size(angle_steps),
                                                        np.size(rates))),
                         dt=dt, goal=[goal])
    torques = np.zeros_like(blank.torques)
    for a, angle_step in enumerate(blank.angle_steps):
        for w, rate in enumerate(blank.rates):
            state = sim.state_at_joints(design, [goal - angle_step], [rate])
            problem = HorizonProblem(sim, design, state, [[goal]], [[0.0]], None, blank.dt,
                                     (1.0, 0.0, 0.0))
            torques[0, a, w] = _gauss_newton(problem, np.zeros(1), iterations=iterations,
                                             tolerance=tolerance)[0]
    return dataclasses.replace(blank, torques=torques)


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
    state = sim.state_at_joints(design, joint_q, np.zeros(sim.model.joint_count))
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

