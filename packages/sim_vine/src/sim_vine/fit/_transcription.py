"""The joint estimation's nonlinear program in CasADi (see :mod:`sim_vine.fit.estimation`).

Units: every variable is scaled so that one unit is about one millimetre: positions in mm,
angles as the arc [mm] at a body's end, velocities as mm per step, impulses as the
displacement [mm] they give the mean body in one step, free parameters by their starting
value. Residuals and rows are in mm too, so the trust R is dimensionless and IPOPT sees an
NLP whose curvature is not spread over 10 decades (in SI units the objective's Hessian
diagonal ran from 2e3 to 5e12).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..everted_mass import masses_grow
from ..model import VineModel
from ._symbolic import SymbolicVine
from .contact_schedule import local_surface

__all__ = ["FreeParameter", "Program", "StartPoint", "transcribe"]

_MM = 1e-3
"""One unit of the scaled variables and rows [m]."""


@dataclasses.dataclass(frozen=True)
class FreeParameter:
    """A free parameter's place in the variable vector: value = variable × scale.

    ``lower`` and ``upper`` are its bounds in the parameter's own units; ``per_joint``
    fits one value per pin instead of one shared by every pin.
    """

    name: str
    index: slice
    scale: float
    lower: float
    upper: float
    per_joint: bool


@dataclasses.dataclass(frozen=True)
class StartPoint:
    """Where the solver starts.

    Attributes:
        theta: free parameters, scaled, shape (n_theta,).
        body_q: poses [m, m, rad], shape (K + 1, N, 3).
        body_qd: velocities of steps 1 … K [m/s], shape (K, N, 3); None: differences of
            the poses.
        reactions: joint and growth impulses λ of steps 1 … K − 1 [N s], shape
            (K − 1, rows); None: zero.
        contact_impulses: normal impulses of the scheduled contacts [N s], shape
            (K, pairs); None: zero.
    """

    theta: np.ndarray
    body_q: np.ndarray
    body_qd: np.ndarray | None = None
    reactions: np.ndarray | None = None
    contact_impulses: np.ndarray | None = None


@dataclasses.dataclass(frozen=True)
class Program:
    """A transcribed estimation: variables ``x``, weighted residuals whose sum of squares is
    the objective, rows ``= 0``, bounds, the start, and where things sit in ``x``.

    Attributes:
        contact_slots: (step, pair) of each contact impulse variable, in order.
        impulse_unit: one scaled impulse [N s].
        q_unit: one scaled pose unit per coordinate [m, m, rad], shape (3N,).
        start_velocity: velocities before step 0 [m/s] as an expression of ``x`` (3N,).
    """

    x: Any
    weighted: Any
    rows: Any
    x0: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    theta: slice
    poses: slice
    velocities: slice
    reactions: slice
    impulses: slice
    contact_slots: list[tuple[int, int]]
    impulse_unit: float
    q_unit: np.ndarray
    start_velocity: Any

    def body_q(self, x) -> np.ndarray:
        """Poses of steps 0 … K [m, m, rad] in a solution ``x``, shape (K + 1, N, 3)."""
        q = np.asarray(x)[self.poses].reshape(-1, len(self.q_unit)) * self.q_unit
        return q.reshape(len(q), -1, 3)

    def body_qd(self, x, dt: float) -> np.ndarray:
        """Velocities of steps 1 … K [m/s, m/s, rad/s] in ``x``, shape (K, N, 3)."""
        v = np.asarray(x)[self.velocities].reshape(-1, len(self.q_unit)) * self.q_unit / dt
        return v.reshape(len(v), -1, 3)

    def contact_impulse(self, x, contacts) -> np.ndarray:
        """Normal impulses [N s] of the scheduled contacts in ``x``, shape (K, pairs):
        NaN at step 0 (no impulse variable), 0 where free."""
        impulse = np.zeros(np.shape(contacts))
        impulse[0][np.asarray(contacts)[0] != 0] = np.nan
        for slot, value in zip(self.contact_slots, np.asarray(x)[self.impulses], strict=True):
            impulse[slot] = value * self.impulse_unit
        return impulse

    def warm_start(self, x, dt: float, contact_impulse) -> StartPoint:
        """A start at the solution ``x`` (for the same recording with a new schedule)."""
        steps = len(self.body_q(x)) - 1
        return StartPoint(theta=np.asarray(x)[self.theta], body_q=self.body_q(x),
                          body_qd=self.body_qd(x, dt),
                          reactions=np.asarray(x)[self.reactions].reshape(steps - 1, -1)
                          * self.impulse_unit,
                          contact_impulses=np.nan_to_num(contact_impulse))


class _Parameters:
    """Parameter expressions: free ones from ``theta``, the others fixed at the design.

    A free per-pin or per-body parameter not fitted ``per_joint`` is one value shared by
    every entry (the paper's scalar K and C)."""

    def __init__(self, ca, theta, free: list[FreeParameter], design):
        self.ca, self.theta, self.free, self.design = ca, theta, free, design

    def __call__(self, name: str):
        ca = self.ca
        value = np.asarray(self.design[name], dtype=np.float64)
        item = next((f for f in self.free if f.name == name), None)
        if item is None:
            return ca.DM(value.reshape(-1)) if value.ndim else ca.DM(float(value))
        fitted = self.theta[item.index] * item.scale
        return ca.repmat(fitted, value.size, 1) if value.ndim and not item.per_joint else fitted


def _step_terms(ca, sym: SymbolicVine, model: VineModel, param, mass, dt: float,
                impulse_unit: float, theta):
    """One step in physical units: (momentum without contacts, joint rows, growth rows)
    as CasADi functions, and the momentum without any constraint impulse with its symbols.
    ``mass``: the design's body masses (N,) [kg]; with ``linear_density`` M depends on the
    step's poses as in the simulator (:mod:`sim_vine.everted_mass`).
    """
    n = model.body_count
    q, v, v1 = ca.SX.sym("q", 3 * n), ca.SX.sym("v", 3 * n), ca.SX.sym("v1", 3 * n)
    n_joint = 2 * (model.pin_count + model.prismatic_count)
    lam, rate = ca.SX.sym("lam", n_joint + model.prismatic_count), ca.SX.sym("rate")
    stiffness, damping = param("joint.stiffness"), param("joint.damping")
    rest = param("joint.rest_angle")
    ground = ca.repmat(ca.transpose(param("ground.friction")), 3, 1)  # c_g per coordinate
    if masses_grow(model):  # M(q): the masses and inertias at the step's input poses
        m_diag = sym.mass_diagonal(q, mass)
    else:
        m_diag = ca.DM(np.stack([mass, mass, mass * model.gyration**2], axis=1).reshape(-1))
    # m g on the bodies' x and y
    gravity = m_diag * ca.DM(np.tile([model.gravity[0], model.gravity[1], 0.0], n))
    c, ext = sym.joint_residual(q), sym.extensions(q)
    bend, angle_rate = sym.joint_angles(q) - rest, sym.joint_rates(v1)
    if model.implicit_springs:
        torque = -stiffness * (bend + dt * angle_rate) - damping * angle_rate
    else:
        torque = -stiffness * bend - damping * sym.joint_rates(v)
    # the viscous ground drag −c_g M v' is implicit, as in the step's P = M (1 + Δt c_g)
    free_momentum = (m_diag * (v1 - v) + dt * m_diag * ca.vec(ground) * v1
                     - dt * sym.spread(torque) - dt * gravity)
    reaction = ca.jtimes(c, q, lam[:n_joint], True)
    if model.prismatic_count:
        reaction = reaction + ca.jtimes(ext, q, lam[n_joint:], True)
    momentum = ca.Function("momentum", [q, v, v1, lam, theta],
                           [free_momentum - impulse_unit * reaction])
    joint = ca.Function("joint", [q, v1], [(ca.jtimes(c, q, v1) * dt + c) / _MM])
    growth = ca.Function("growth", [q, v1, rate, theta], [
        (ca.jtimes(ext, q, v1) - (rate + param("growth.offset")) * model.growth_weights)
        * dt / _MM])
    return momentum, joint, growth, (free_momentum, q, v, v1)


def _contact_row(ca, sym: SymbolicVine, model: VineModel, pair: int, mode: int, friction,
                 q, v1, q_near, dt: float):
    """A known contact's row [mm] and the generalized direction (3,) of its impulse.

    The point stays on the obstacle's surface near its position in ``q_near``; the impulse
    lies on the friction cone edge ``N + mode μ T``.
    """
    n_obs = len(model.obstacles)
    body = int(model.contact_points[0][pair // n_obs])
    along = float(model.contact_points[1][pair // n_obs])
    surface = local_surface(model.obstacles[pair % n_obs],
                            model.contact_positions(q_near)[pair // n_obs])
    point, body_normal = sym.contact_point(q, body, along)
    delta = point - ca.DM(surface.anchor)
    if surface.radius is None:
        normal, distance = ca.DM(surface.normal), ca.dot(ca.DM(surface.normal), delta)
    else:
        norm = ca.sqrt(ca.dot(delta, delta) + 1e-18)
        normal, distance = delta / norm, norm - surface.radius
    edge = normal + float(mode) * friction * ca.vertcat(-normal[1], normal[0])
    v_point = v1[3 * body:3 * body + 2] + along * v1[3 * body + 2] * body_normal
    row = (ca.dot(edge, v_point) * dt + distance) / _MM
    return row, body, ca.vertcat(edge, along * ca.dot(edge, body_normal))


def transcribe(ca, model: VineModel, *, measured: np.ndarray, substeps: int, dt: float,
               rates: np.ndarray, contacts: np.ndarray, design, free: list[FreeParameter],
               start: StartPoint, trust: float) -> Program:
    """Build the estimation NLP (see :mod:`sim_vine.fit.estimation` for the problem).

    Args:
        ca: the imported ``casadi`` module.
        model: the vine model.
        measured: keypoints [m], shape (frames, n, 2), NaN rows for missing frames; frame f
            is model step f × ``substeps``.
        substeps, dt: model steps per frame and the model step [s].
        rates: growth rate of every step [m/s], shape (K,).
        contacts: contact modes, shape (K, pairs).
        design: the full design (values of the fixed parameters).
        free: the free parameters.
        start: the starting point (its poses also choose each contact's surface feature).
        trust: the dimensionless weight R of the dynamics residuals.
    """
    steps = len(start.body_q) - 1
    n = model.body_count
    sym = SymbolicVine(ca, model)
    theta = ca.SX.sym("theta", len(start.theta))
    param = _Parameters(ca, theta, free, design)
    mass = np.asarray(design["body.mass"], dtype=np.float64)
    # the residuals' scale: the design's masses (with linear_density those of each body's
    # own length; M itself then moves with the poses, _step_terms)
    m_diag = np.stack([mass, mass, mass * model.gyration**2], axis=1).reshape(-1)
    q_unit = np.tile([_MM, _MM, _MM / model.half_length], n)
    impulse_unit = float(np.mean(mass)) * _MM / dt
    momentum_fn, joint_fn, growth_fn, (free_momentum, q, v, v1) = _step_terms(
        ca, sym, model, param, mass, dt, impulse_unit, theta)

    # variables: poses 0 … K, velocities 1 … K, reactions and contact impulses of steps
    # 1 … K − 1 (step 0 has no momentum residual), the start's shared extension
    n_rows = 2 * (model.pin_count + model.prismatic_count) + model.prismatic_count
    Q, V = ca.SX.sym("Q", 3 * n, steps + 1), ca.SX.sym("V", 3 * n, steps)
    L = ca.SX.sym("L", n_rows, steps - 1)
    slots = [(int(k), int(pair)) for k, pair in np.argwhere(contacts != 0) if k > 0]
    Y = ca.SX.sym("Y", len(slots))
    E = ca.SX.sym("E", 1 if model.prismatic_count else 0)
    q_all = ca.repmat(ca.DM(q_unit), 1, steps + 1) * Q
    v_all = ca.repmat(ca.DM(q_unit / dt), 1, steps) * V
    theta_cols = ca.repmat(theta, 1, steps)

    contact_rows, pushes = [], [ca.SX.zeros(3 * n) for _ in range(steps)]
    slot_of = {slot: i for i, slot in enumerate(slots)}
    for k, pair in np.argwhere(contacts != 0):
        row, body, direction = _contact_row(
            ca, sym, model, int(pair), int(contacts[k, pair]), param("contact.friction"),
            q_all[:, k], v_all[:, k], start.body_q[k], dt)
        contact_rows.append(row)
        if k > 0:
            push = impulse_unit * Y[slot_of[(int(k), int(pair))]] * direction
            pushes[k][3 * body:3 * body + 3] = pushes[k][3 * body:3 * body + 3] + push
    momentum = momentum_fn.map(steps - 1)(q_all[:, 1:-1], v_all[:, :-1], v_all[:, 1:], L,
                                          theta_cols[:, 1:]) - ca.horzcat(*pushes[1:])
    residual = ca.vertcat(  # the displacement each residual causes in a step, and q' − q − Δt v'
        ca.vec(ca.repmat(ca.DM(dt / m_diag / q_unit), 1, steps - 1) * momentum),
        ca.vec(Q[:, 1:] - Q[:, :-1] - V))

    keypoint_fn = ca.Function("kp", [q], [sym.keypoints(q, measured.shape[1])])
    seen = [f for f in range(len(measured)) if np.all(np.isfinite(measured[f]))]
    predicted = keypoint_fn.map(len(seen))(q_all[:, [f * substeps for f in seen]])
    errors = (predicted - ca.DM(measured[seen].reshape(len(seen), -1).T)) / _MM
    weighted = ca.vertcat(ca.vec(errors), np.sqrt(trust) * residual)

    rows = [ca.vec(joint_fn.map(steps)(q_all[:, :-1], v_all)),
            ca.vec(growth_fn.map(steps)(q_all[:, :-1], v_all, ca.DM(rates).T, theta_cols)),
            *contact_rows,
            sym.joint_residual(q_all[:, 0]) / _MM]  # the start is a vine: joints closed …
    if model.prismatic_count:  # … and extended as the growth mode shares extension
        rows.append(sym.extensions(q_all[:, 0]) / _MM - ca.DM(model.growth_weights) * E)

    x = ca.vertcat(theta, ca.vec(Q), ca.vec(V), ca.vec(L), Y, E)
    n_theta = len(start.theta)
    poses = slice(n_theta, n_theta + Q.numel())
    velocities = slice(poses.stop, poses.stop + V.numel())
    reactions = slice(velocities.stop, velocities.stop + L.numel())
    impulses = slice(reactions.stop, reactions.stop + len(slots))
    lower, upper = np.full(x.shape[0], -np.inf), np.full(x.shape[0], np.inf)
    for item in free:
        lower[item.index], upper[item.index] = item.lower / item.scale, item.upper / item.scale
    lower[impulses] = 0.0  # contact impulses push

    q0 = start.body_q.reshape(steps + 1, -1) / q_unit
    v0 = (np.diff(q0, axis=0) if start.body_qd is None
          else start.body_qd.reshape(steps, -1) * dt / q_unit)
    weights = model.growth_weights
    e0 = np.asarray(ca.Function("e", [q], [sym.extensions(q)])(
        start.body_q[0].reshape(-1))).reshape(-1)
    x0 = np.concatenate([
        start.theta, q0.reshape(-1), v0.reshape(-1),
        np.zeros(L.numel()) if start.reactions is None
        else np.asarray(start.reactions).reshape(-1) / impulse_unit,
        np.zeros(len(slots)) if start.contact_impulses is None
        else np.maximum([start.contact_impulses[slot] for slot in slots], 0.0) / impulse_unit,
        [e0 @ weights / (weights @ weights) / _MM] if model.prismatic_count else []])

    # the velocity before step 0: step 0's momentum with no constraint impulse, solved for v
    v_before = ca.SX.sym("v_before", 3 * n)
    first = ca.substitute(free_momentum, ca.vertcat(q, v, v1),
                          ca.vertcat(q_all[:, 0], v_before, v_all[:, 0]))
    start_velocity = -ca.solve(ca.jacobian(first, v_before),
                               ca.substitute(first, v_before, ca.DM.zeros(3 * n)))
    return Program(x=x, weighted=weighted, rows=ca.vertcat(*rows), x0=x0,
                   lower=lower, upper=upper, theta=slice(0, n_theta), poses=poses,
                   velocities=velocities, reactions=reactions, impulses=impulses,
                   contact_slots=slots, impulse_unit=impulse_unit, q_unit=q_unit,
                   start_velocity=start_velocity)
