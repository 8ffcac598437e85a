"""One vine step forward, and its vector-Jacobian product by implicit differentiation.

Forward (Jitosho et al. 2023, Algorithm 1, with friction, gravity, implicit springs and
implicit viscous ground friction):
assemble the QP at (q_k, v_k), solve it for v_{k+1}, and integrate ``q_{k+1} = q_k + Δt
v_{k+1}`` (semi-implicit Euler).

Backward: at the solution's active set the QP is the linear KKT system

    [P  Aₐᵀ] [v]   [b ]
    [Aₐ  0 ] [y] = [rₐ],

so with the adjoint ``[w; z] = K⁻¹ [∂L/∂v; 0]`` the cotangents are ``∂L/∂b = w``,
``∂L/∂P = −w vᵀ``, ``∂L/∂rₐ = z`` and ``∂L/∂Aₐ = −(y wᵀ + z vᵀ)``, which flow on to the
state, the growth rate and the design through the assembly below. The result is exact away
from contact switching events (where the active set changes). :func:`step_vjp` is compiled
(the QP from the compiled assembly, the banded adjoint solve, and
:func:`sim_vine._kernels.step_backward` for the rest); :func:`step_vjp_reference` computes the
same with NumPy from :func:`assemble` and the curvature terms of :mod:`sim_vine.constraints`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from . import evert
from ._kernels import ModelArrays, assemble_rows, step_backward
from .constraints import (
    ContactFrame,
    RowLayout,
    contact_curvature,
    contact_frame,
    contact_rows,
    growth_curvature,
    growth_rows,
    joint_curvature,
    joint_residual,
    joint_rows,
    rows_transpose_times,
    tangent_rows,
)
from .dynamics import joint_angles, joint_rates, mass_diagonal, spread_torques, spring_weights
from .model import VineModel
from .qp import QPProblem, QPSolution, VineQP

__all__ = ["StepParameters", "StepGradient", "Assembly", "assemble", "build_problem",
           "step", "step_vjp", "step_vjp_reference"]


@dataclasses.dataclass(frozen=True)
class StepParameters:
    """Differentiable parameters of a step.

    Attributes:
        stiffness: torsional stiffness per pin [N m/rad], shape (n_pins,).
        damping: torsional damping per pin [N m s/rad], shape (n_pins,).
        rest_angle: spring rest angle φ0 per pin [rad], shape (n_pins,).
        friction: Coulomb friction coefficient [-].
        mass: body masses [kg], shape (N,).
        ground_friction: viscous ground friction c_g per body [1/s], shape (N,).
        gyration_sq: each body's radius of gyration squared r² [m²] (inertia m r²), shape
            (N,); None: the model's ``gyration²`` for every body (fixed inertias).
    """

    stiffness: np.ndarray
    damping: np.ndarray
    rest_angle: np.ndarray
    friction: float
    mass: np.ndarray
    ground_friction: np.ndarray
    gyration_sq: np.ndarray | None = None


@dataclasses.dataclass(frozen=True)
class StepGradient:
    """Cotangents of a step's inputs: state (N, 3) twice, growth rate, parameters (and the
    bodies' r², ``gyration_sq`` (N,), whether given or the model's)."""

    q: np.ndarray
    v: np.ndarray
    rate: float
    stiffness: np.ndarray
    damping: np.ndarray
    rest_angle: np.ndarray
    friction: float
    mass: np.ndarray
    ground_friction: np.ndarray
    gyration_sq: np.ndarray


@dataclasses.dataclass(frozen=True)
class Assembly:
    """A step's QP with the pieces the backward pass reuses."""

    problem: QPProblem
    frame: ContactFrame
    phi_rows: np.ndarray
    joint_angle: np.ndarray


def assemble(model: VineModel, layout: RowLayout, q, v, rate: float,
             params: StepParameters, dt: float) -> Assembly:
    """Build the step QP at poses ``q`` and velocities ``v`` (N, 3) for growth rate [m/s]."""
    m_diag = mass_diagonal(model, params.mass, params.gyration_sq)
    # ground friction −c_g M v' (implicit): P = M (1 + Δt c_g), b keeps M v_k
    p_diag = m_diag * (1.0 + dt * params.ground_friction)[:, None]
    phi = joint_angles(model, q)
    torque = -params.stiffness * (phi - params.rest_angle)
    if not model.implicit_springs:
        torque = torque - params.damping * joint_rates(model, v)
    rhs = m_diag * v + dt * spread_torques(model, torque)
    rhs[:, :2] += dt * params.mass[:, None] * model.gravity
    frame = contact_frame(model, q)
    c_rows, phi_rows = contact_rows(frame, params.friction)
    contact_lower = np.repeat(-frame.phi / dt, 2)
    if model.evert:
        joint_values, slot_values = evert.joint_rows(model, q)
        row_values = np.concatenate([joint_values, slot_values, c_rows])
        joint_lower, joint_upper, _ = evert.joint_bounds(model, q, rate, dt)
        grown = evert.everted_length(model, q) + dt * rate
        out = evert.emerged_bodies(model, grown)[np.repeat(frame.body, 2)]
        contact_lower = np.where(out, contact_lower, -np.inf)  # bodies not yet everted
    else:
        row_values = np.concatenate([joint_rows(model, q), growth_rows(model, q), c_rows])
        joint_lower = np.concatenate([-joint_residual(model, q) / dt,
                                      rate * model.growth_weights])
        joint_upper = joint_lower
    lower = np.concatenate([joint_lower, contact_lower])
    upper = np.concatenate([joint_upper, np.full(len(contact_lower), np.inf)])
    problem = QPProblem(mass_diagonal=p_diag,
                        spring_weights=spring_weights(model, params.stiffness, params.damping,
                                                      dt),
                        rhs=rhs, row_values=row_values, lower=lower, upper=upper,
                        friction=float(params.friction), tangent_rows=tangent_rows(frame))
    return Assembly(problem=problem, frame=frame, phi_rows=phi_rows, joint_angle=phi)


def build_problem(arrays: ModelArrays, layout: RowLayout, q, v, rate: float,
                  params: StepParameters, dt: float) -> QPProblem:
    """The step QP of :func:`assemble`, built by the compiled kernel (same numbers)."""
    mass_diag, spring_w, rhs, rows, lower, upper, tangent = assemble_rows(
        arrays, q, v, rate, params.stiffness, params.damping, params.rest_angle,
        params.friction, params.mass, _gyration_sq(arrays, params), params.ground_friction, dt,
        layout.size)
    return QPProblem(mass_diagonal=mass_diag, spring_weights=spring_w, rhs=rhs,
                     row_values=rows, lower=lower, upper=upper,
                     friction=float(params.friction), tangent_rows=tangent)


def _gyration_sq(arrays: ModelArrays, params: StepParameters) -> np.ndarray:
    return arrays.gyration_sq if params.gyration_sq is None else params.gyration_sq


def step(arrays: ModelArrays, layout: RowLayout, qp: VineQP, q, v, rate: float,
         params: StepParameters, dt: float):
    """``(q_next, v_next, solution, problem)`` for one step of length ``dt`` [s]."""
    problem = build_problem(arrays, layout, q, v, rate, params, dt)
    solution = qp.solve(problem, warm_v=v)
    return q + dt * solution.v, solution.v, solution, problem


def step_vjp(arrays: ModelArrays, layout: RowLayout, qp: VineQP, q, v, rate: float,
             params: StepParameters, dt: float, g_q_next, g_v_next) -> StepGradient:
    """Cotangents of ``(q, v, rate, params)`` given those of ``(q_next, v_next)`` (N, 3).

    The step's QP and solution are those of :func:`step` (the same compiled assembly, and
    the solve is a pure function of them); then the banded adjoint solve and one compiled
    pass for the assembly's and the constraints' derivatives.
    """
    problem = build_problem(arrays, layout, q, v, rate, params, dt)
    solution = qp.solve(problem, warm_v=v)
    g_q_next = np.asarray(g_q_next, dtype=np.float64)
    g_vstar = (np.asarray(g_v_next, dtype=np.float64) + dt * g_q_next).reshape(-1)
    w, z = qp.adjoint(problem, solution.active, g_vstar, dual=solution.dual)
    g_q, g_v, g_rate, g_stiffness, g_damping, g_rest, g_friction, g_mass, g_ground, g_r2 = \
        step_backward(tuple(arrays), q, v, solution.v, solution.y, w.reshape(-1, 3), z,
                      params.stiffness, params.damping, params.rest_angle,
                      float(params.friction), params.mass, _gyration_sq(arrays, params),
                      params.ground_friction, float(dt), layout.row_bodies,
                      problem.row_values, layout.contact.start, g_q_next, float(rate))
    return StepGradient(q=g_q, v=g_v, rate=g_rate, stiffness=g_stiffness, damping=g_damping,
                        rest_angle=g_rest, friction=g_friction, mass=g_mass,
                        ground_friction=g_ground, gyration_sq=g_r2)


def step_vjp_reference(model: VineModel, layout: RowLayout, qp: VineQP, q, v, rate: float,
                       params: StepParameters, dt: float, g_q_next, g_v_next) -> StepGradient:
    """:func:`step_vjp` in NumPy: the QP of :func:`assemble` and the curvature terms of
    :mod:`sim_vine.constraints` (the reference the compiled path is tested against)."""
    assembly = assemble(model, layout, q, v, rate, params, dt)
    solution = qp.solve(assembly.problem, warm_v=v)
    return _backward(model, layout, qp, q, v, params, dt, solution, assembly,
                     np.asarray(g_q_next, dtype=np.float64), np.asarray(g_v_next, dtype=np.float64),
                     rate)


def _backward(model, layout, qp, q, v, params, dt, solution: QPSolution, assembly: Assembly,
              g_q_next, g_v_next, rate: float) -> StepGradient:
    problem = assembly.problem
    n_body = model.body_count
    g_vstar = (g_v_next + dt * g_q_next).reshape(-1)
    w, z = qp.adjoint(problem, solution.active, g_vstar, dual=solution.dual)
    w = w.reshape(-1, 3)
    y = solution.y
    v_star = solution.v
    m_diag = mass_diagonal(model, params.mass, params.gyration_sq)
    r2 = model.gyration**2 if params.gyration_sq is None else params.gyration_sq

    g_q = g_q_next.copy()
    # ∂L/∂b = w, with b = M v_k + Δt (R τ + m g)
    g_v = m_diag * w
    g_mass = w[:, 0] * v[:, 0] + w[:, 1] * v[:, 1] + r2 * w[:, 2] * v[:, 2]
    g_mass += dt * (w[:, :2] @ model.gravity)
    w_rate = joint_rates(model, w)  # Rᵀ w
    g_stiffness = -dt * (assembly.joint_angle - params.rest_angle) * w_rate
    g_rest = dt * params.stiffness * w_rate
    g_damping = np.zeros(model.pin_count)
    g_q += dt * spread_torques(model, -params.stiffness * w_rate)
    if not model.implicit_springs:
        g_damping += -dt * joint_rates(model, v) * w_rate
        g_v += dt * spread_torques(model, -params.damping * w_rate)
    # ∂L/∂P = −w vᵀ, with P's diagonal M (1 + Δt c_g)
    w_v_star = w[:, 0] * v_star[:, 0] + w[:, 1] * v_star[:, 1] + r2 * w[:, 2] * v_star[:, 2]
    g_mass -= (1.0 + dt * params.ground_friction) * w_v_star
    g_ground = -dt * params.mass * w_v_star
    # the inertia m r² in b's M v_k and P's M (1 + Δt c_g)
    g_r2 = params.mass * w[:, 2] * (v[:, 2] - (1.0 + dt * params.ground_friction) * v_star[:, 2])
    if model.implicit_springs:
        spring = w_rate * joint_rates(model, v_star)
        g_stiffness -= dt * dt * spring
        g_damping -= dt * spring
    # ∂L/∂r = z
    joint, growth, contact = layout.joint, layout.growth, layout.contact
    if model.evert:
        g_targets, g_rate = evert.target_vjp(model, q, rate, dt, z[joint], z[growth])
        g_q += g_targets
    else:
        g_q -= rows_transpose_times(layout.row_bodies[joint], problem.row_values[joint],
                                    z[joint], n_body) / dt
        g_rate = float(z[growth] @ model.growth_weights)
    z_pairs = z[contact].reshape(-1, 2).sum(axis=1)
    pair_bodies = np.stack([np.full(len(z_pairs), -1), assembly.frame.body], axis=1)
    g_q -= rows_transpose_times(pair_bodies, assembly.phi_rows, z_pairs, n_body) / dt
    # ∂L/∂A = −(y wᵀ + z vᵀ) through the constraint Jacobians' dependence on q and μ
    if model.evert:
        g_q -= evert.joint_curvature(model, q, y[joint], y[growth], w)
        g_q -= evert.joint_curvature(model, q, z[joint], z[growth], v_star)
    else:
        g_q -= joint_curvature(model, q, y[joint], w) + joint_curvature(model, q, z[joint],
                                                                          v_star)
        g_q -= growth_curvature(model, q, y[growth], w) + growth_curvature(model, q,
                                                                            z[growth], v_star)
    cq_y, cmu_y = contact_curvature(assembly.frame, params.friction, y[contact], w, n_body)
    cq_z, cmu_z = contact_curvature(assembly.frame, params.friction, z[contact], v_star, n_body)
    g_q -= cq_y + cq_z
    g_friction = -(cmu_y + cmu_z)
    return StepGradient(q=g_q, v=g_v, rate=g_rate, stiffness=g_stiffness, damping=g_damping,
                        rest_angle=g_rest, friction=g_friction, mass=g_mass,
                        ground_friction=g_ground, gyration_sq=g_r2)
