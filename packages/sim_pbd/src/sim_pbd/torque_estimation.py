"""Joint torques estimated through the differentiable simulator (the paper's Sec. IV-B).

The loss is the paper's Eq. 26 over a horizon of H steps started from a simulator state:

    L(u) = 1/K Σ_t Σ_i λ1 (q_i^t - q̂_i^t)² + λ2 (q̇_i^t - q̂̇_i^t)² + λ3 (u_i^t - u_i^(t-1))²

with q^t, q̇^t the joint angles [rad] and rates [rad/s] after step t
(:func:`~sim_pbd.kinematics.joint_positions`), q̂ the targets, u the joint torques [N m]
and K = H m (m joints). Its gradient comes from ``sim.step_vjp`` and
:func:`~sim_pbd.kinematics.joint_positions_vjp`, swept in reverse over the horizon.

- :func:`holding_torque`: the torque that keeps the robot at rest at a pose for one step
  (the target is the pose and zero rates): XPBD's gravity compensation torque (Sec. V-C).
- :func:`track_torques`: per-step torques along a recorded trajectory (Sec. V-D): at each
  step the torques of the next H steps are fitted from the simulator's own state (H = 1:
  the paper's short horizon, H = 3: its MPC) and the first is applied.

Two optimizers: ``"gauss_newton"`` (default) solves the least-squares problem with the
residuals' Jacobian assembled from one reverse sweep per weighted angle or rate residual
(the map from torques to the next joint state is nearly linear over a step, so it
converges in two or three iterations, whatever the start); ``"adam"`` is the paper's (the
core's Adam with a fixed iteration budget), where the start (zero, previous, gravity
compensation) matters.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from codesign.optim import Adam
from codesign.optim.base import Evaluation
from codesign.tree import tree_add

from .kinematics import joint_positions, joint_positions_vjp
from .state import PBDState

__all__ = ["OPTIMIZERS", "INITS", "HorizonProblem", "LeastSquares", "Tracking", "holding_torque",
           "rest_state", "track_torques"]

OPTIMIZERS = ("gauss_newton", "adam")
INITS = ("zero", "previous", "gravity")


def rest_state(sim, design: dict, joint_q) -> PBDState:
    """The robot of ``sim`` at rest at joint positions ``joint_q`` (m,) [rad or m]."""
    joint_q = np.asarray(joint_q, dtype=np.float64)
    return sim.state_at_joints(design, joint_q, np.zeros(joint_q.shape))


def _weights(weights, count: int) -> np.ndarray:
    values = np.asarray(weights, dtype=np.float64)
    if values.shape != (count,) or np.any(values < 0) or not np.all(np.isfinite(values)):
        raise ValueError(f"weights must be {count} finite non-negative numbers "
                         f"({'(λ1, λ2, λ3)' if count == 3 else '(λ1, λ2)'}), got {weights!r}")
    if not np.any(values[:2] > 0):
        raise ValueError("weights: λ1 (angles) or λ2 (rates) must be positive, else the torques "
                         "are not observed")
    return values


class LeastSquares:
    """The loss r·r of a problem's residuals r and its gradient 2 (∂r/∂x)ᵀ r, for the
    problems here that define ``residuals(x) -> (r, rollout)`` and ``residuals_vjp(x,
    rollout, g_r)``: the core's :class:`~codesign.optim.base.ObjectiveFunction` interface."""

    def loss(self, x) -> float:
        """L(x) = r·r (Eq. 26)."""
        r, _ = self.residuals(x)
        return float(r @ r)

    def evaluate(self, x, *, grad: bool = True) -> Evaluation:
        """Loss and (optionally) its gradient (the size of x) at ``x``."""
        r, rollout = self.residuals(x)
        gradient = self.residuals_vjp(x, rollout, 2.0 * r) if grad else None
        return Evaluation(loss=float(r @ r), grad=gradient)

    def evaluate_many(self, xs, *, grad: bool = False) -> list[Evaluation]:
        """:meth:`evaluate` at each of ``xs``."""
        return [self.evaluate(x, grad=grad) for x in xs]


@dataclasses.dataclass
class HorizonProblem(LeastSquares):
    """Eq. 26 over ``len(target_q)`` steps from ``state``, as a function of the torques.

    Flattened torques x (H m,) [N m] are the unknowns, so the problem is also the core's
    :class:`~codesign.optim.base.ObjectiveFunction` (unbounded) for its optimizers.

    Attributes:
        sim: a :class:`~sim_pbd.simulator.PBDSimulator`.
        design: its design (``sim.design_space().defaults()`` or another).
        state: the start state.
        target_q, target_qd: joint angles [rad] and rates [rad/s] wanted after each step,
            (H, m).
        previous: the torque applied before the horizon (m,) [N m] for the λ3 term of its
            first step, or None (no term).
        dt: the step [s].
        weights: (λ1, λ2, λ3).
    """

    sim: object
    design: dict
    state: PBDState
    target_q: np.ndarray
    target_qd: np.ndarray
    previous: np.ndarray | None
    dt: float
    weights: tuple[float, float, float]

    def __post_init__(self):
        m = self.sim.model.joint_count
        self.target_q = np.atleast_2d(np.asarray(self.target_q, dtype=np.float64))
        self.target_qd = np.atleast_2d(np.asarray(self.target_qd, dtype=np.float64))
        if self.target_q.shape[1:] != (m,) or self.target_qd.shape != self.target_q.shape:
            raise ValueError(f"target_q and target_qd must both be (H, {m}), got "
                             f"{self.target_q.shape} and {self.target_qd.shape}")
        self.weights = tuple(_weights(self.weights, 3))
        self.horizon = self.target_q.shape[0]
        self.size = self.horizon * m
        self.lower, self.upper = np.full(self.size, -np.inf), np.full(self.size, np.inf)
        self.constraint_lower = self.constraint_upper = np.zeros(0)
        self._params = self.sim.parameters(self.design)
        self._scale = np.sqrt(np.asarray(self.weights) / self.size)

    def _actions(self, x) -> np.ndarray:
        return np.asarray(x, dtype=np.float64).reshape(self.horizon, -1)

    def _changes(self, actions) -> np.ndarray:
        """u^t - u^(t-1) over the horizon (the first row 0 without ``previous``)."""
        before = np.vstack([actions[:1] if self.previous is None else self.previous[None],
                            actions[:-1]])
        return actions - before

    def residuals(self, x) -> tuple[np.ndarray, list[PBDState]]:
        """The weighted residuals r (3 H m,), L = Σ r², and the states visited (for the VJP):
        angle, rate and torque-change residuals in that order, each (H, m) flattened."""
        actions = self._actions(x)
        states, angles, rates = [self.state], [], []
        for action in actions:
            states.append(self.sim.step(states[-1], action, self.design, self.dt))
            joint_q, joint_qd = joint_positions(self.sim.model, self._params, states[-1])
            angles.append(joint_q)
            rates.append(joint_qd)
        s1, s2, s3 = self._scale
        r = np.concatenate([(s1 * (np.array(angles) - self.target_q)).ravel(),
                            (s2 * (np.array(rates) - self.target_qd)).ravel(),
                            (s3 * self._changes(actions)).ravel()])
        return r, states

    def residuals_vjp(self, x, states: list[PBDState], g_r) -> np.ndarray:
        """∂(g_r · r)/∂x (H m,): one reverse sweep through the steps of :meth:`residuals`."""
        actions = self._actions(x)
        s1, s2, s3 = self._scale
        g_r = np.asarray(g_r, dtype=np.float64).reshape(3, self.horizon, -1)
        g_q, g_qd, g_change = s1 * g_r[0], s2 * g_r[1], s3 * g_r[2]
        # u^t enters change t with +1 and change t+1 with -1
        g_actions = g_change.copy()
        g_actions[:-1] -= g_change[1:]
        if self.previous is None:
            g_actions[0] -= g_change[0]
        g_state = None
        for t in range(self.horizon - 1, -1, -1):
            g_next, _ = joint_positions_vjp(self.sim.model, self._params, states[t + 1],
                                            g_q[t], g_qd[t])
            if g_state is not None:
                g_next = tree_add(g_next, g_state)
            g_state, g_action, _ = self.sim.step_vjp(states[t], actions[t], self.design,
                                                     self.dt, g_next)
            g_actions[t] += g_action
        return g_actions.ravel()

    def jacobian(self, x, states: list[PBDState]) -> np.ndarray:
        """∂r/∂x (3 H m, H m): a reverse sweep per angle and rate residual of positive
        weight (the rows of a zero weight are zero), the torque-change rows in closed form
        (s3 times the difference matrix of :meth:`_changes`)."""
        n = self.size
        rows = np.zeros((3 * n, n))
        for block in (0, 1):
            if self.weights[block] > 0:
                for k in range(block * n, (block + 1) * n):
                    seed = np.zeros(3 * n)
                    seed[k] = 1.0
                    rows[k] = self.residuals_vjp(x, states, seed)
        m = self.sim.model.joint_count
        difference = np.eye(n) - np.eye(n, k=-m)
        if self.previous is None:
            difference[:m] = 0.0
        rows[2 * n:] = self._scale[2] * difference
        return rows


def _gauss_newton(problem: HorizonProblem, x0, *, iterations: int, tolerance: float):
    """Gauss-Newton with step halving until the loss decreases; stops when a step changes no
    torque by more than ``tolerance`` [N m]."""
    x = np.asarray(x0, dtype=np.float64).copy()
    r, states = problem.residuals(x)
    for _ in range(iterations):
        step = np.linalg.lstsq(problem.jacobian(x, states), -r, rcond=None)[0]
        for _ in range(30):
            r_new, states_new = problem.residuals(x + step)
            if r_new @ r_new <= r @ r:
                break
            step = 0.5 * step
        else:
            break
        x, r, states = x + step, r_new, states_new
        if np.max(np.abs(step)) <= tolerance:
            break
    return x


def _minimize(problem: HorizonProblem, x0, *, optimizer: str, iterations: int,
              learning_rate: float, tolerance: float) -> np.ndarray:
    if optimizer == "gauss_newton":
        return _gauss_newton(problem, x0, iterations=iterations, tolerance=tolerance)
    if optimizer == "adam":
        result = Adam(learning_rate=learning_rate).minimize(problem, np.asarray(x0, float),
                                                            max_iterations=iterations)
        return result.x
    raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")


def holding_torque(sim, design: dict, joint_q, *, dt: float, iterations: int = 10,
                   weights=(1.0, 0.02), optimizer: str = "gauss_newton", init=None,
                   learning_rate: float = 0.2, tolerance: float = 1e-9) -> np.ndarray:
    """The joint torques (m,) [N m] that hold the robot at rest at ``joint_q`` (m,) [rad]
    for one step of ``dt`` [s]: Eq. 26 with targets ``joint_q`` and zero rates, weights
    (λ1, λ2) (the paper's Sec. V-C: 1 and 0.02), minimized from ``init`` (default zero) by
    ``optimizer`` in at most ``iterations`` iterations (Adam: ``learning_rate`` [N m]).

    With XPBD this is the gravity compensation torque g(q) up to the step's discretization
    (see the package README, "Torque estimation")."""
    joint_q = np.asarray(joint_q, dtype=np.float64)
    state = rest_state(sim, design, joint_q)
    problem = HorizonProblem(sim, design, state, joint_q[None], np.zeros((1, joint_q.size)),
                             None, float(dt), (*_weights(weights, 2), 0.0))
    x0 = np.zeros(joint_q.size) if init is None else np.asarray(init, dtype=np.float64)
    return _minimize(problem, x0, optimizer=optimizer, iterations=iterations,
                     learning_rate=learning_rate, tolerance=tolerance)


class Tracking(NamedTuple):
    """What :func:`track_torques` returns.

    Attributes:
        torques: the torque applied at each step, (K, m) [N m].
        joint_q, joint_qd: the simulator's joint angles [rad] and rates [rad/s] under them,
            (K + 1, m), row 0 the start.
    """

    torques: np.ndarray
    joint_q: np.ndarray
    joint_qd: np.ndarray


def track_torques(sim, design: dict, joint_q_recorded, joint_qd_recorded, *, dt: float,
                  init: str = "gravity", weights=(1.0, 0.02, 0.0), horizon: int = 1,
                  gravity_torques=None, optimizer: str = "gauss_newton", iterations: int = 10,
                  learning_rate: float = 0.2, tolerance: float = 1e-9) -> Tracking:
    """Per-step torques that make the simulator follow a recording (the paper's Sec. V-D).

    The simulator starts at rest at the first recorded angles (the recording must start at
    rest). At each step t it minimizes Eq. 26 over the torques of steps t … t+H-1 against
    the recorded angles and rates after them (``horizon`` H), applies the first torque and
    moves on from its own new state.

    Args:
        joint_q_recorded, joint_qd_recorded: recorded angles [rad] and rates [rad/s],
            (K + 1, m), one row every ``dt`` [s].
        init: the optimizer's start for each step: ``"zero"``, ``"previous"`` (the torque
            found at the step before; for H > 1 the previous plan shifted by one step,
            its new last entry the gravity compensation torque: the paper's MPC) or
            ``"gravity"`` (the gravity compensation torque).
        weights: (λ1, λ2, λ3) of Eq. 26: angle only (1, 0, 0), rate only (0, 1, 0), both
            (1, 0.02, 0); the MPC adds λ3 = 2e-7.
        gravity_torques: gravity compensation torques at the recorded angles, (K + 1, m)
            [N m] (e.g. Pinocchio's g(q)); default :func:`holding_torque` at each recorded
            angle, computed only where ``init`` needs it.
        optimizer, iterations, learning_rate, tolerance: as in :func:`holding_torque`.
    """
    recorded_q = np.asarray(joint_q_recorded, dtype=np.float64)
    recorded_qd = np.asarray(joint_qd_recorded, dtype=np.float64)
    m = sim.model.joint_count
    if recorded_q.ndim != 2 or recorded_q.shape[1] != m or recorded_q.shape[0] < 2:
        raise ValueError(f"joint_q_recorded must be (K + 1, {m}) with K >= 1, got "
                         f"{recorded_q.shape}")
    if recorded_qd.shape != recorded_q.shape:
        raise ValueError(f"joint_qd_recorded must have joint_q_recorded's shape "
                         f"{recorded_q.shape}, got {recorded_qd.shape}")
    if init not in INITS:
        raise ValueError(f"init must be one of {INITS}, got {init!r}")
    if int(horizon) < 1:
        raise ValueError(f"horizon must be at least 1 step, got {horizon}")
    weights = tuple(_weights(weights, 3))
    steps = recorded_q.shape[0] - 1
    gravity = None if gravity_torques is None else np.asarray(gravity_torques, np.float64)
    if gravity is not None and gravity.shape != recorded_q.shape:
        raise ValueError(f"gravity_torques must be (K + 1, {m}) like the recording, got "
                         f"{gravity.shape}")
    cache: dict[int, np.ndarray] = {}

    def gravity_at(t: int) -> np.ndarray:
        if gravity is not None:
            return gravity[t]
        if t not in cache:
            cache[t] = holding_torque(sim, design, recorded_q[t], dt=dt,
                                      weights=weights[:2], tolerance=tolerance)
        return cache[t]

    state = rest_state(sim, design, recorded_q[0])
    params = sim.parameters(design)
    plan = None
    torques, angles, rates = [], [], []
    q0, qd0 = joint_positions(sim.model, params, state)
    angles.append(q0)
    rates.append(qd0)
    for t in range(steps):
        h = min(int(horizon), steps - t)
        window = range(t + 1, t + 1 + h)
        if init == "zero" or (init == "previous" and plan is None):
            x0 = np.zeros((h, m))
        elif init == "gravity":
            x0 = np.array([gravity_at(k) for k in window])
        elif int(horizon) == 1:
            x0 = plan
        else:
            x0 = np.vstack([plan[1:], gravity_at(t + h)[None]])[:h]
        problem = HorizonProblem(sim, design, state, recorded_q[list(window)],
                                 recorded_qd[list(window)], torques[-1] if torques else None,
                                 float(dt), weights)
        plan = _minimize(problem, x0.ravel(), optimizer=optimizer, iterations=iterations,
                         learning_rate=learning_rate, tolerance=tolerance).reshape(h, m)
        torques.append(plan[0])
        state = sim.step(state, plan[0], design, dt)
        joint_q, joint_qd = joint_positions(sim.model, params, state)
        angles.append(joint_q)
        rates.append(joint_qd)
    return Tracking(torques=np.array(torques), joint_q=np.array(angles),
                    joint_qd=np.array(rates))
