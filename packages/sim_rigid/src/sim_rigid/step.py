"""One implicit time step and its adjoint.

BDF2 (second order, two-step) advances every step but the first, which SDIRK2 (Alexander's
two-stage, L-stable, stiffly accurate, γ = 1 - 1/√2) takes from the initial state alone, as
in the paper. Each BDF2 step and each SDIRK2 stage is one implicit solve of the same form:
given base values ``q_b``, ``v_b`` and a coefficient ``c`` [s], find the rates v with

    q = q_b + c v,   a = (v - v_b) / c,
    r(v) = ID(q, v, a) + D v - B τ_act(q, v, u) = 0,

ID the rigid-body inverse dynamics (:mod:`sim_rigid.dynamics`, gravity included), D the joint
damping, B the actuated coordinates and τ_act the actuation: the action times each joint's
gear (joint torques; the gear is 1 unless the description sets it) or PD servos ``kp (u - q)
- kd v`` tracking position targets u. BDF2: q_b = (4 q_n - q_{n-1}) / 3, v_b likewise, c =
2h/3. SDIRK2: stage 1 from (q_n, v_n), stage 2 from q_n + (1 - γ) h V1 and v_n + (1 - γ) h
A1, both with c = γh.

Newton's method solves r(v) = 0 on the analytic Jacobian ∂r/∂v = c ∂ID/∂q + ∂ID/∂v + M/c + D
(+ servo gains), with a backtracking line search on |r|; it has converged when a full step
moves v by at most ``tolerance`` (1 + |v|∞), and raises :class:`NewtonError` (step number,
residual) when it has not within ``iterations``.

The adjoint of a solve factors the Jacobian at the converged solution (its final Newton
matrix) and solves Jᵀ λ = ∂L/∂v; then ∂L/∂(q_b, v_b, u, θ) = -λᵀ ∂r/∂(q_b, v_b, u, θ), the
partial derivatives by forward-mode tangents of the recursive Newton-Euler algorithm.
:func:`step_vjp` recomputes the step from its state, as the core's contract asks.

:func:`simulate` takes many steps in one call and :func:`simulate_vjp` sweeps back through
them from the solves it kept (the core's optional ``simulate`` hooks): the same states and
gradients as :func:`step` and :func:`step_vjp` step by step, without the re-solve.

``kernels="numpy"`` runs the readable reference below (:class:`_Solve`, on
:mod:`sim_rigid.dynamics`); ``kernels="numba"`` (the default) runs the same formulas as one
compiled call per step and one per VJP (:func:`sim_rigid._kernels.implicit_step`), equal
to round-off.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from codesign.simulator import SimulationError, Trajectory

from . import _kernels, dynamics, kernels
from ._kernels import ARMIJO, GAMMA, SMALLEST_STEP
from .contact import COEFFICIENTS
from .model import RigidModel
from .options import RigidOptions
from .state import RigidState

__all__ = ["GAMMA", "NewtonError", "simulate", "simulate_vjp", "step", "step_vjp"]

_DEFAULT = RigidOptions()
_KERNELS = ("numba", "numpy")
_GRADIENT_FIELDS = ("joint_q", "joint_qd", "joint_q_prev", "joint_qd_prev")


class NewtonError(SimulationError):
    """Newton's method did not solve a step's implicit equations."""


class _Solve:
    """One implicit solve r(v) = 0 (the module docstring) at fixed base values."""

    def __init__(self, model: RigidModel, params: dict, q_base, v_base, c: float, action,
                 settings: dict):
        self.model, self.params, self.settings = model, params, settings
        self.q_base, self.v_base, self.c = q_base, v_base, c
        self.action = action
        self.actuated = model.actuated
        self.gear = model.actuated_gear
        self.position = settings["actuation"] == "position"
        self.dynamics = dynamics

    def _servo(self, q, v):
        """B τ_act (d,) at (q, v)."""
        out = np.zeros(self.model.coordinate_count)
        a = self.actuated
        if self.position:
            out[a] = (self.settings["servo_stiffness"] * (self.action - q[a])
                      - self.settings["servo_damping"] * v[a])
        else:
            out[a] = self.gear * self.action
        return out

    def _servo_jacobian(self):
        """-∂(B τ_act)/∂q and -∂(B τ_act)/∂v, diagonal (d,) each."""
        d = self.model.coordinate_count
        gain_q, gain_v = np.zeros(d), np.zeros(d)
        if self.position:
            gain_q[self.actuated] = self.settings["servo_stiffness"]
            gain_v[self.actuated] = self.settings["servo_damping"]
        return gain_q, gain_v

    def state_at(self, v):
        """(q, a) of the rates v."""
        return self.q_base + self.c * v, (v - self.v_base) / self.c

    def residual(self, v) -> np.ndarray:
        """r(v) [N m or N], (d,)."""
        q, a = self.state_at(v)
        tau = self.dynamics.inverse_dynamics_tangents(self.model, self.params, q, v, a)[0]
        return tau + self.params["joint_damping"] * v - self._servo(q, v)

    def residual_and_jacobian(self, v):
        """(r(v) (d,), ∂r/∂v (d, d))."""
        q, a = self.state_at(v)
        d = self.model.coordinate_count
        identity = np.eye(d)
        rows = self.dynamics.inverse_dynamics_tangents(
            self.model, self.params, q, v, a, tangents={"q": self.c * identity, "qd": identity})
        gain_q, gain_v = self._servo_jacobian()
        jacobian = (rows[1:].T + self.dynamics.mass_matrix(self.model, self.params, q) / self.c
                    + np.diag(self.params["joint_damping"] + self.c * gain_q + gain_v))
        return rows[0] + self.params["joint_damping"] * v - self._servo(q, v), jacobian

    def solve(self, v_start, step_index: int) -> np.ndarray:
        """The rates v solving r(v) = 0 by Newton's method with a line search."""
        tolerance, iterations = self.settings["tolerance"], self.settings["iterations"]
        v = np.array(v_start, dtype=np.float64)
        residual, jacobian = self.residual_and_jacobian(v)
        update = np.full_like(v, np.inf)
        for _ in range(iterations):
            with np.errstate(all="ignore"):
                update = -np.linalg.solve(jacobian, residual) if np.all(
                    np.isfinite(jacobian)) else np.full_like(v, np.nan)
            if not np.all(np.isfinite(update)):
                break
            if np.max(np.abs(update)) <= tolerance * (1.0 + np.max(np.abs(v))):
                return v + update
            norm, fraction = np.linalg.norm(residual), 1.0
            while True:
                trial = v + fraction * update
                trial_residual = self.residual(trial)
                if (np.linalg.norm(trial_residual) <= (1.0 - ARMIJO * fraction) * norm
                        or fraction <= SMALLEST_STEP):
                    break
                fraction *= 0.5
            v = trial
            residual, jacobian = self.residual_and_jacobian(v)
        raise _newton_error(step_index, iterations, np.linalg.norm(residual),
                            np.max(np.abs(update)))

    def vjp(self, v, g_q, g_v):
        """(∂L/∂q_b, ∂L/∂v_b, ∂L/∂action, ∂L/∂params) of a solution v, given ∂L/∂q and
        ∂L/∂v of its outputs q = q_b + c v and v."""
        model, c = self.model, self.c
        d = model.coordinate_count
        q, a = self.state_at(v)
        # one tangent direction per scalar input: the state's, then every parameter's (the
        # contact ones only where the model has contact points)
        shapes = {"q": (d,), "qd": (d,)} | {
            name: np.shape(self.params[name]) for name in
            ("link_mass", "link_com", "link_inertia", "joint_origin", "joint_axis", *((
                "contact_point", *COEFFICIENTS, "contact_area") if len(model.contact_link)
                else ()))}
        blocks = {name: int(np.prod(shape, dtype=np.int64)) for name, shape in shapes.items()}
        total = sum(blocks.values())
        tangents, start = {}, 0
        for name, size in blocks.items():
            block = np.zeros((total, size))
            block[start:start + size] = np.eye(size)
            tangents[name] = block.reshape((total,) + shapes[name])
            start += size
        rows = self.dynamics.inverse_dynamics_tangents(model, self.params, q, v, a,
                                                       tangents=tangents)[1:]
        d_q, d_v = rows[:d], rows[d:2 * d]
        gain_q, gain_v = self._servo_jacobian()
        mass = self.dynamics.mass_matrix(model, self.params, q)
        jacobian = (c * d_q.T + d_v.T + mass / c
                    + np.diag(self.params["joint_damping"] + c * gain_q + gain_v))
        factor = scipy.linalg.lu_factor(jacobian)
        adjoint = scipy.linalg.lu_solve(factor, g_v + c * g_q, trans=1)
        g_q_base = g_q - d_q @ adjoint - gain_q * adjoint
        g_v_base = mass @ adjoint / c
        g_action = adjoint[self.actuated] * (self.settings["servo_stiffness"] if self.position
                                             else self.gear)
        g_params, start = {}, 2 * d
        for name in list(blocks)[2:]:
            size = blocks[name]
            g_params[name] = -(rows[start:start + size] @ adjoint).reshape(shapes[name])
            start += size
        g_params["joint_damping"] = -adjoint * v
        return g_q_base, g_v_base, g_action, g_params


def _newton_error(step_index: int, iterations: int, residual: float,
                  update: float) -> NewtonError:
    return NewtonError(
        f"step {step_index}: Newton's method did not converge in {iterations} iterations "
        f"(residual {residual:.3g} N m or N, last update {update:.3g}); lower dt or raise "
        f"newton_iterations")


def _settings(actuation, servo_stiffness, servo_damping, tolerance, iterations,
              kernels) -> dict:
    if kernels not in _KERNELS:
        raise ValueError(f"kernels must be one of {sorted(_KERNELS)}, got {kernels!r}")
    return dict(actuation=actuation, servo_stiffness=float(servo_stiffness),
                servo_damping=float(servo_damping), tolerance=float(tolerance),
                iterations=int(iterations), kernels=kernels)


def _stages(model, state, action, params, dt, settings):
    """The solves of one step in order, each as (solve, base rates' start): SDIRK2's two
    stages (the second built after the first is solved) or BDF2's one."""
    q_n, v_n = state.joint_q, state.joint_qd
    count = int(state.step_count)
    if count == 0:
        c = GAMMA * dt
        first = _Solve(model, params, q_n, v_n, c, action, settings)
        v1 = first.solve(v_n, count)
        second = _Solve(model, params, q_n + (1.0 - GAMMA) * dt * v1,
                        v_n + (1.0 - GAMMA) * dt * (v1 - v_n) / c, c, action, settings)
        return [(first, v1), (second, second.solve(v1, count))]
    c = 2.0 * dt / 3.0
    bdf = _Solve(model, params, (4.0 * q_n - state.joint_q_prev) / 3.0,
                 (4.0 * v_n - state.joint_qd_prev) / 3.0, c, action, settings)
    return [(bdf, bdf.solve(2.0 * v_n - state.joint_qd_prev, count))]


def step(model: RigidModel, state: RigidState, action, params: dict, dt: float, *,
         actuation: str = _DEFAULT.actuation,
         servo_stiffness: float = _DEFAULT.servo_stiffness,
         servo_damping: float = _DEFAULT.servo_damping,
         tolerance: float = _DEFAULT.newton_tolerance,
         iterations: int = _DEFAULT.newton_iterations,
         kernels: str = _DEFAULT.kernels) -> RigidState:
    """The state ``dt`` [s] later under ``action`` (a,) (torques [N m or N] or position
    targets [rad or m], see ``actuation``) with the model's :data:`PARAMETERS` ``params``;
    pure. ``kernels`` picks the compiled dynamics or the NumPy reference. Raises
    :class:`NewtonError` when a solve does not converge."""
    settings = _settings(actuation, servo_stiffness, servo_damping, tolerance, iterations,
                         kernels)
    if kernels == "numba":
        q, v, status, residual, update = _kernels.implicit_step(
            *_compiled_arguments(model, state, action, params, dt, settings))
        _check_status(status, state, residual, update, settings)
    else:
        solve, v = _stages(model, state, np.asarray(action, dtype=np.float64), params,
                           float(dt), settings)[-1]
        q = solve.q_base + solve.c * v
    return RigidState(joint_q=q, joint_qd=v,
                      joint_q_prev=np.array(state.joint_q, dtype=np.float64),
                      joint_qd_prev=np.array(state.joint_qd, dtype=np.float64),
                      step_count=np.asarray(int(state.step_count) + 1, dtype=np.int64))


def _compiled_model(model, params, settings) -> tuple:
    """The model's leading arguments of every kernel of :mod:`sim_rigid._kernels` that steps:
    (nodes, contacts, parameters, drive)."""
    actuated, gear = kernels.drive_arrays(model)
    drive = tuple(_kernels.Drive(actuated=actuated, gear=gear,
                                  position=settings["actuation"] == "position",
                                  stiffness=settings["servo_stiffness"],
                                  damping=settings["servo_damping"]))
    return (kernels.node_arrays(model), kernels.contact_arrays(model),
            kernels.parameter_arrays(model, params), drive)


def _compiled_state(state) -> list:
    """(q, qd, q_prev, qd_prev) of ``state`` as contiguous float64 arrays."""
    return [np.ascontiguousarray(x, dtype=np.float64) for x in (
        state.joint_q, state.joint_qd, state.joint_q_prev, state.joint_qd_prev)]


def _compiled_arguments(model, state, action, params, dt, settings) -> tuple:
    """The leading arguments of :func:`sim_rigid._kernels.implicit_step` and
    ``implicit_step_vjp``."""
    return (*_compiled_model(model, params, settings),
            np.ascontiguousarray(action, dtype=np.float64), *_compiled_state(state),
            int(state.step_count), float(dt), settings["tolerance"], settings["iterations"])


def _check_status(status, state, residual, update, settings) -> None:
    if status != _kernels.CONVERGED:
        raise _newton_error(int(state.step_count), settings["iterations"], residual, update)


def _zeros_for_none(value, size):
    return np.zeros(size) if value is None else np.asarray(value, dtype=np.float64)


def step_vjp(model: RigidModel, state: RigidState, action, params: dict, dt: float,
             g_next: RigidState, *, actuation: str = _DEFAULT.actuation,
             servo_stiffness: float = _DEFAULT.servo_stiffness,
             servo_damping: float = _DEFAULT.servo_damping,
             tolerance: float = _DEFAULT.newton_tolerance,
             iterations: int = _DEFAULT.newton_iterations,
             kernels: str = _DEFAULT.kernels):
    """(∂L/∂state, ∂L/∂action, ∂L/∂params) given ∂L/∂(next state) ``g_next`` (``None``
    fields are zero); the step is recomputed from ``state``."""
    settings = _settings(actuation, servo_stiffness, servo_damping, tolerance, iterations,
                         kernels)
    dt = float(dt)
    d = model.coordinate_count
    g_q, g_v, g_q_prev, g_v_prev = (_zeros_for_none(getattr(g_next, name), d)
                                    for name in _GRADIENT_FIELDS)
    if kernels == "numba":
        return _compiled_vjp(model, state, action, params, dt, settings,
                             (g_q, g_v, g_q_prev, g_v_prev))
    stages = _stages(model, state, np.asarray(action, dtype=np.float64), params, dt, settings)
    g_action = np.zeros(len(model.actuated))
    g_params = {name: np.zeros_like(np.asarray(value, dtype=np.float64))
                for name, value in params.items()}

    def solve_vjp(solve, v, g_out_q, g_out_v):
        nonlocal g_action
        g_base_q, g_base_v, g_a, g_p = solve.vjp(v, g_out_q, g_out_v)
        g_action = g_action + g_a
        for name, value in g_p.items():
            g_params[name] = g_params[name] + value
        return g_base_q, g_base_v

    g_state_q, g_state_v = g_q_prev.copy(), g_v_prev.copy()  # the state moves to "previous"
    g_before_q, g_before_v = np.zeros(d), np.zeros(d)
    if len(stages) == 2:
        (first, v1), (second, v2) = stages
        g_base_q, g_base_v = solve_vjp(second, v2, g_q, g_v)
        ratio = (1.0 - GAMMA) * dt / first.c
        g_v1 = (1.0 - GAMMA) * dt * g_base_q + ratio * g_base_v
        g_state_q += g_base_q
        g_state_v += (1.0 - ratio) * g_base_v
        g_base_q, g_base_v = solve_vjp(first, v1, np.zeros(d), g_v1)
        g_state_q += g_base_q
        g_state_v += g_base_v
    else:
        ((bdf, v),) = stages
        g_base_q, g_base_v = solve_vjp(bdf, v, g_q, g_v)
        g_state_q += 4.0 / 3.0 * g_base_q
        g_state_v += 4.0 / 3.0 * g_base_v
        g_before_q, g_before_v = -g_base_q / 3.0, -g_base_v / 3.0
    g_state = RigidState(joint_q=g_state_q, joint_qd=g_state_v, joint_q_prev=g_before_q,
                         joint_qd_prev=g_before_v, step_count=None)
    return g_state, g_action, g_params


def simulate(model: RigidModel, state: RigidState, actions, params: dict, dt: float, *,
             actuation: str = _DEFAULT.actuation,
             servo_stiffness: float = _DEFAULT.servo_stiffness,
             servo_damping: float = _DEFAULT.servo_damping,
             tolerance: float = _DEFAULT.newton_tolerance,
             iterations: int = _DEFAULT.newton_iterations,
             kernels: str = _DEFAULT.kernels) -> Trajectory:
    """N = len(``actions``) steps of :func:`step` from ``state``, ``actions`` (N, a), in one
    call: a :class:`~codesign.simulator.Trajectory` of the N + 1 states whose ``record``
    keeps the solves for :func:`simulate_vjp` (``kernels="numpy"``: step by step, no
    record). Raises :class:`NewtonError` naming the first step whose solve failed."""
    settings = _settings(actuation, servo_stiffness, servo_damping, tolerance, iterations,
                         kernels)
    actions = np.ascontiguousarray(actions, dtype=np.float64)
    if kernels == "numpy":
        states = [state]
        for action in actions:
            states.append(step(model, states[-1], action, params, dt, **settings))
        return Trajectory(states=states)
    q, qd, q_prev, qd_prev = _compiled_state(state)
    count = int(state.step_count)
    (coordinates, rates, *solves, failed, status, residual, update) = \
        _kernels.implicit_trajectory(*_compiled_model(model, params, settings), actions, q, qd,
                                     q_prev, qd_prev, count, float(dt),
                                     settings["tolerance"], settings["iterations"])
    if failed >= 0:
        raise _newton_error(count + int(failed), settings["iterations"], residual, update)
    before_q = [q_prev, *coordinates[:-1]]
    before_v = [qd_prev, *rates[:-1]]
    states = [RigidState(joint_q=coordinates[i], joint_qd=rates[i], joint_q_prev=before_q[i],
                         joint_qd_prev=before_v[i],
                         step_count=np.asarray(count + i, dtype=np.int64))
              for i in range(len(coordinates))]
    return Trajectory(states=states, record=tuple(solves))


def simulate_vjp(model: RigidModel, trajectory: Trajectory, actions, params: dict, dt: float,
                 g_states, *, actuation: str = _DEFAULT.actuation,
                 servo_stiffness: float = _DEFAULT.servo_stiffness,
                 servo_damping: float = _DEFAULT.servo_damping,
                 tolerance: float = _DEFAULT.newton_tolerance,
                 iterations: int = _DEFAULT.newton_iterations,
                 kernels: str = _DEFAULT.kernels):
    """(∂L/∂(start state), ∂L/∂actions (N, a), ∂L/∂params) of :func:`simulate`'s
    ``trajectory`` given ``g_states``: N + 1 entries, ∂L/∂(state i) taken at it directly (a
    :class:`RigidState` of gradients, ``None`` fields or entries zero)."""
    settings = _settings(actuation, servo_stiffness, servo_damping, tolerance, iterations,
                         kernels)
    d = model.coordinate_count
    packed = np.zeros((len(g_states), 4, d))
    for i, g in enumerate(g_states):
        if g is not None:
            for k, name in enumerate(_GRADIENT_FIELDS):
                if getattr(g, name) is not None:
                    packed[i, k] = getattr(g, name)
    actions = np.ascontiguousarray(actions, dtype=np.float64)
    if kernels == "numpy":
        return _reference_simulate_vjp(model, trajectory.states, actions, params, dt, packed,
                                       settings)
    g_start, g_actions, g_theta = _kernels.implicit_trajectory_vjp(
        *_compiled_model(model, params, settings), actions, *trajectory.record, float(dt),
        packed)
    return (_state_gradient(g_start), g_actions,
            {name: value for name, value in _named_parameter_gradients(g_theta).items()
             if name in params})


def _reference_simulate_vjp(model, states, actions, params, dt, packed, settings):
    """:func:`simulate_vjp` by :func:`step_vjp` step by step (the NumPy reference)."""
    carry = packed[-1]
    g_actions = np.zeros((len(actions), len(model.actuated)))
    g_params = {}
    for i in reversed(range(len(actions))):
        g_state, g_actions[i], g_step = step_vjp(model, states[i], actions[i], params, dt,
                                                 _state_gradient(carry), **settings)
        carry = np.array([getattr(g_state, name) for name in _GRADIENT_FIELDS]) + packed[i]
        for name, value in g_step.items():
            g_params[name] = g_params.get(name, 0.0) + value
    return _state_gradient(carry), g_actions, g_params



def _state_gradient(rows) -> RigidState:
    """∂L/∂state from its (q, qd, q_prev, qd_prev) rows (4, d)."""
    return RigidState(joint_q=rows[0], joint_qd=rows[1], joint_q_prev=rows[2],
                      joint_qd_prev=rows[3], step_count=None)


def _named_parameter_gradients(g_theta) -> dict:
    """The compiled ∂L/∂θ tuple (:func:`sim_rigid._kernels.implicit_step_vjp`'s order) by
    :data:`~sim_rigid.model.PARAMETERS` name."""
    (g_mass, g_inertia, g_origin, g_damping, g_points, g_area, g_coefficients, g_com,
     g_axis) = g_theta
    return {"link_mass": g_mass, "link_com": g_com, "link_inertia": g_inertia,
            "joint_origin": g_origin, "joint_axis": g_axis, "joint_damping": g_damping,
            "contact_point": g_points, "contact_area": g_area} | {
        name: np.asarray(g_coefficients[k]) for k, name in enumerate(COEFFICIENTS)}


def _compiled_vjp(model, state, action, params, dt, settings, g_next):
    """:func:`step_vjp` in one compiled call (:func:`sim_rigid._kernels.implicit_step_vjp`)."""
    status, residual, update, g_state, g_action, g_theta = _kernels.implicit_step_vjp(
        *_compiled_arguments(model, state, action, params, dt, settings),
        *(np.ascontiguousarray(g) for g in g_next))
    _check_status(status, state, residual, update, settings)
    g_params = _named_parameter_gradients(g_theta)
    return _state_gradient(g_state), g_action, {name: g_params[name] for name in params}
