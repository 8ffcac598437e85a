"""Design parameters identified from static poses through the differentiable simulator (the
paper's Sec. V-C, its shoulder-spring estimation).

The robot is measured at rest at P poses q̂_p (m,) while its motors hold it with torques
τ̂_p (m,). Placed at rest at each pose in the simulator and driven by τ̂_p for one step of
``dt``, a robot with the true design stays still; any other design moves. The loss is the
paper's Eq. 26 without its torque term, over the poses instead of time steps:

    L(design) = 1/K Σ_p Σ_i λ1 (q_i^p - q̂_i^p)² + λ2 (q̇_i^p)²,   K = P m,

with q^p, q̇^p the joint angles [rad] and rates [rad/s] after the step. Its gradient with
respect to the chosen design parameters comes from ``sim.step_vjp``,
:func:`~sim_pbd.kinematics.joint_positions_vjp` and (the rest pose depends on the joint
origins) :func:`~sim_pbd.kinematics.forward_kinematics_vjp`. :func:`fit_design` minimizes it
by Gauss-Newton (the residuals' Jacobian from one reverse sweep per residual).

The paper fits Baxter's shoulder spring this way (``spring.stiffness`` k and
``spring.offset`` α₂ of Eq. 31, with λ1 = 1, λ2 = 0.2): ``examples/pbd/spring_estimation.py``.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from .kinematics import forward_kinematics_vjp, joint_positions, joint_positions_vjp
from .state import PBDState
from .torque_estimation import LeastSquares, _gauss_newton, _weights, rest_state

__all__ = ["Fit", "StaticPoseProblem", "fit_design"]


@dataclasses.dataclass
class StaticPoseProblem(LeastSquares):
    """Eq. 26 at static poses as a function of the design parameters ``names``.

    Their flattened values x (the order of ``names``, each raveled) are the unknowns, so the
    problem is also the core's :class:`~codesign.optim.base.ObjectiveFunction` (bounded by
    the parameters' bounds) for its optimizers.

    Attributes:
        sim: a :class:`~sim_pbd.simulator.PBDSimulator`.
        design: the design the unknowns replace entries of (the others stay).
        names: the design parameters fitted, e.g. ``("spring.stiffness", "spring.offset")``.
        joint_q: the measured poses q̂, (P, m) [rad or m].
        torques: the measured holding torques τ̂, (P, m) [N m or N].
        dt: the step [s].
        weights: (λ1, λ2).
    """

    sim: object
    design: dict
    names: tuple[str, ...]
    joint_q: np.ndarray
    torques: np.ndarray
    dt: float
    weights: tuple[float, float]

    def __post_init__(self):
        m = self.sim.model.joint_count
        self.joint_q = np.atleast_2d(np.asarray(self.joint_q, dtype=np.float64))
        self.torques = np.atleast_2d(np.asarray(self.torques, dtype=np.float64))
        if self.joint_q.shape[1:] != (m,) or self.torques.shape != self.joint_q.shape:
            raise ValueError(f"joint_q and torques must both be (P, {m}) (one row per pose, "
                             f"one column per joint), got {self.joint_q.shape} and "
                             f"{self.torques.shape}")
        space = self.sim.design_space()
        unknown = [name for name in self.names if name not in space]
        if unknown or not self.names:
            raise ValueError(f"names must be design parameters of the simulator, got "
                             f"{list(self.names)}; it has {space.names}")
        self.names = tuple(self.names)
        self.space = space.subset(self.names)
        self.weights = tuple(_weights(self.weights, 2))
        self.size = self.space.size
        self.lower, self.upper = self.space.bounds()
        self.constraint_lower = self.constraint_upper = np.zeros(0)
        self._scale = np.sqrt(np.asarray(self.weights) / self.joint_q.size)

    def design_at(self, x) -> dict:
        """The design with the unknowns ``x`` (size,) in place."""
        return {**self.design, **self.space.unflatten(np.asarray(x, dtype=np.float64))}

    def residuals(self, x) -> tuple[np.ndarray, list[PBDState]]:
        """The weighted residuals r (2 P m,), L = Σ r², and each pose's state after the step
        (for the VJP): angle residuals of every pose, then rate residuals, each (P, m)
        flattened."""
        design = self.design_at(x)
        params = self.sim.parameters(design)
        after, angles, rates = [], [], []
        for pose, torque in zip(self.joint_q, self.torques, strict=True):
            state = self.sim.step(rest_state(self.sim, design, pose), torque, design, self.dt)
            joint_q, joint_qd = joint_positions(self.sim.model, params, state)
            after.append(state)
            angles.append(joint_q)
            rates.append(joint_qd)
        s1, s2 = self._scale
        r = np.concatenate([(s1 * (np.array(angles) - self.joint_q)).ravel(),
                            (s2 * np.array(rates)).ravel()])
        return r, after

    def residuals_vjp(self, x, after: list[PBDState], g_r) -> np.ndarray:
        """∂(g_r · r)/∂x (size,): per pose, back through the joint angles, the step and the
        rest pose's forward kinematics."""
        g_r = np.asarray(g_r, dtype=np.float64).reshape(2, *self.joint_q.shape)
        design = self.design_at(x)
        params = self.sim.parameters(design)
        return sum(self._pose_vjp(p, design, params, after[p], g_r[0, p], g_r[1, p])
                   for p in range(len(self.joint_q)))

    def _pose_vjp(self, p: int, design: dict, params: dict, after: PBDState, g_angle,
                  g_rate) -> np.ndarray:
        """∂/∂x of pose ``p``'s angle and rate residuals weighted by ``g_angle`` and
        ``g_rate`` (m,)."""
        model, pose, torque = self.sim.model, self.joint_q[p], self.torques[p]
        g_after, g_fk = joint_positions_vjp(model, params, after, self._scale[0] * g_angle,
                                            self._scale[1] * g_rate)
        start = rest_state(self.sim, design, pose)
        g_start, _, g_design = self.sim.step_vjp(start, torque, design, self.dt, g_after)
        _, g_rest = forward_kinematics_vjp(model, params, pose, g_start.link_x,
                                           g_start.link_q)
        total = {name: np.zeros(np.shape(design[name])) for name in self.names}
        for gradient in (self.sim.parameters_vjp(design, g_fk), g_design,
                         self.sim.parameters_vjp(design, g_rest)):
            for name in self.names:
                if name in gradient:
                    total[name] = total[name] + gradient[name]
        return self.space.flatten_gradient(total)

    def jacobian(self, x, after: list[PBDState]) -> np.ndarray:
        """∂r/∂x (2 P m, size): one reverse sweep through its pose per residual of positive
        weight (the rows of a zero weight are zero)."""
        design = self.design_at(x)
        params = self.sim.parameters(design)
        poses, m = self.joint_q.shape
        rows = np.zeros((2, poses, m, self.size))
        for block in (0, 1):
            if self.weights[block] > 0:
                for p in range(poses):
                    for i in range(m):
                        seeds = np.zeros((2, m))
                        seeds[block, i] = 1.0
                        rows[block, p, i] = self._pose_vjp(p, design, params, after[p],
                                                           *seeds)
        return rows.reshape(2 * poses * m, self.size)


class Fit(NamedTuple):
    """What :func:`fit_design` returns.

    Attributes:
        design: the design with the fitted parameters in place.
        history: the fitted parameters' flattened values at the start and after each
            Gauss-Newton iteration, (iterations + 1, size).
        losses: L at each row of ``history``.
    """

    design: dict
    history: np.ndarray
    losses: np.ndarray


def fit_design(sim, design: dict, names, joint_q, torques, *, dt: float,
               weights=(1.0, 0.2), iterations: int = 10, rtol: float = 1e-7) -> Fit:
    """Fit the design parameters ``names`` to holding torques ``torques`` (P, m) [N m]
    measured at static poses ``joint_q`` (P, m) [rad]: :class:`StaticPoseProblem` with
    weights (λ1, λ2) (the paper's spring fit: 1 and 0.2) and step ``dt`` [s], minimized by
    Gauss-Newton from ``design``'s values for at most ``iterations`` iterations, stopping
    when an iteration changes every fitted value by at most ``rtol`` times its magnitude
    (or 1, for values below 1)."""
    if int(iterations) < 1:
        raise ValueError(f"iterations must be at least 1, got {iterations}")
    problem = StaticPoseProblem(sim, design, tuple(names), joint_q, torques, float(dt),
                                tuple(weights))
    x = problem.space.flatten(design)
    history, losses = [x], [problem.loss(x)]
    for _ in range(int(iterations)):
        x = _gauss_newton(problem, x, iterations=1, tolerance=0.0)
        history.append(x)
        losses.append(problem.loss(x))
        change = np.abs(history[-1] - history[-2])
        if np.all(change <= rtol * np.maximum(np.abs(history[-2]), 1.0)):
            break
    return Fit(design=problem.design_at(x), history=np.array(history),
               losses=np.array(losses))
