"""Compiled (numba) implicit steps and their adjoints: one call per step does the whole
BDF2 step or both SDIRK2 stages (Newton's method with its backtracking line search on the
analytic Jacobian, servo terms, penalty contact), and one call its VJP (the step again,
the final Jacobian's LU factorization, the adjoint solve, ∂L/∂(state, action, θ)). The
formulas and their order are :mod:`sim_rigid.step`'s NumPy path (``kernels="numpy"``), the
readable reference these equal to round-off; only the parameter rows differ in method:
∂L/∂(masses, centres of mass, inertias, contact points, areas, coefficients) come from one
virtual-power pass (:func:`sim_rigid._kernels.rnea_parameter_vjp`) instead of one tangent
row each, and a joint axis takes two tangent rows (two directions across the unit axis,
the only ones its normalization lets it move in) where the reference takes three.

Arguments are plain tuples (:class:`Parameters`, :class:`Drive`, and the kernels' node and
contact tuples) so a step crosses from Python once. A solve that does not converge returns
a status and the numbers :class:`sim_rigid.step.NewtonError` names; Python raises it.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

from ._kernels import _cross3, _dot, _matvec, mass_matrix, rnea, rnea_parameter_vjp

__all__ = ["ARMIJO", "CONVERGED", "Drive", "GAMMA", "NOT_CONVERGED", "Parameters",
           "SMALLEST_STEP", "step", "step_vjp"]

GAMMA = 1.0 - 1.0 / math.sqrt(2.0)
"""SDIRK2's diagonal coefficient (Alexander 1977): L-stable and second order."""
ARMIJO = 1e-4
"""The line search's sufficient decrease: accept |r(v + s Δv)| <= (1 - ARMIJO s) |r(v)|."""
SMALLEST_STEP = 2.0**-30
"""The line search's last fraction s, taken whatever the residual."""
CONVERGED, NOT_CONVERGED = 0, 1
"""A solve's status."""


class Parameters(NamedTuple):
    """The model's parameters as the compiled steps take them (float64, contiguous)."""

    mass: np.ndarray  # (n,) [kg]
    inertia: np.ndarray  # (n, 3, 3) [kg m²]
    origin: np.ndarray  # (n, 3) joint origins [m]
    points: np.ndarray  # (c, 3) contact points [m]
    area: np.ndarray  # (c,)
    coefficients: np.ndarray  # (4,) kn, kd, μ, kt
    damping: np.ndarray  # (d,) joint damping
    gravity: np.ndarray  # (3,) [m/s²]
    com: np.ndarray  # (n, 3) centres of mass in the link frames [m]
    axis: np.ndarray  # (n, 3) joint axis directions (normalized here; any length > 0)


class Drive(NamedTuple):
    """The actuation: which coordinates the action drives and how."""

    actuated: np.ndarray  # (a,) int64, the actuated coordinates
    gear: np.ndarray  # (a,) torque per unit of action
    position: bool  # PD servos on position targets, else torques
    stiffness: float  # servo kp
    damping: float  # servo kd


@numba.njit(cache=True)
def _lu_factor(matrix):
    """(LU, row pivots) of a square matrix by Gaussian elimination with partial pivoting (a
    zero pivot leaves inf or NaN, which the callers test)."""
    size = matrix.shape[0]
    lu = matrix.copy()
    pivots = np.arange(size)
    for k in range(size):
        best = k
        for i in range(k + 1, size):
            if abs(lu[i, k]) > abs(lu[best, k]):
                best = i
        if best != k:
            for j in range(size):
                lu[k, j], lu[best, j] = lu[best, j], lu[k, j]
            pivots[k], pivots[best] = pivots[best], pivots[k]
        for i in range(k + 1, size):
            lu[i, k] /= lu[k, k]
            for j in range(k + 1, size):
                lu[i, j] -= lu[i, k] * lu[k, j]
    return lu, pivots


@numba.njit(cache=True)
def _lu_solve(lu, pivots, rhs, transpose):
    """x with A x = rhs (or Aᵀ x = rhs) for A's :func:`_lu_factor` (P A = L U)."""
    size = rhs.shape[0]
    x = np.zeros(size)
    if not transpose:
        for i in range(size):  # L y = P b
            total = rhs[pivots[i]]
            for j in range(i):
                total -= lu[i, j] * x[j]
            x[i] = total
        for i in range(size - 1, -1, -1):  # U x = y
            total = x[i]
            for j in range(i + 1, size):
                total -= lu[i, j] * x[j]
            x[i] = total / lu[i, i]
        return x
    y = np.zeros(size)
    for i in range(size):  # Uᵀ z = b
        total = rhs[i]
        for j in range(i):
            total -= lu[j, i] * y[j]
        y[i] = total / lu[i, i]
    for i in range(size - 1, -1, -1):  # Lᵀ w = z
        for j in range(i + 1, size):
            y[i] -= lu[j, i] * y[j]
    for i in range(size):  # x = Pᵀ w
        x[pivots[i]] = y[i]
    return x


@numba.njit(cache=True)
def _gains(drive, d):
    """-∂(B τ_act)/∂q and -∂(B τ_act)/∂v, diagonal (d,) each."""
    gain_q, gain_v = np.zeros(d), np.zeros(d)
    if drive[2]:
        for k in range(drive[0].shape[0]):
            gain_q[drive[0][k]] = drive[3]
            gain_v[drive[0][k]] = drive[4]
    return gain_q, gain_v


@numba.njit(cache=True)
def _servo(drive, action, q, v):
    """B τ_act (d,) at (q, v)."""
    actuated, gear, position, stiffness, damping = drive
    out = np.zeros(q.shape[0])
    for k in range(actuated.shape[0]):
        j = actuated[k]
        if position:
            out[j] = stiffness * (action[k] - q[j]) - damping * v[j]
        else:
            out[j] = gear[k] * action[k]
    return out


@numba.njit(cache=True)
def _unit_axes(direction):
    """(unit axes (n, 3), norms (n,)) of joint axis directions (n, 3); a zero direction
    (a fixed or free joint's, unused) stays zero."""
    unit = np.zeros_like(direction)
    norms = np.zeros(direction.shape[0])
    for j in range(direction.shape[0]):
        norms[j] = math.sqrt(_dot(direction[j], direction[j]))
        if norms[j] > 0.0:
            unit[j] = direction[j] / norms[j]
    return unit, norms


@numba.njit(cache=True)
def _constant_duals(theta, rows):
    """The parameters as dual arrays of ``rows`` rows with zero tangents (origins, unit joint
    axes, points, areas, coefficients), and the masses and inertias as constants of one row
    (the recursion skips their tangents; their gradient is the virtual-power pass's), for
    passes that differentiate along q, v and the joint frames."""
    mass, inertia, origin, points, area, coefficients = (theta[0], theta[1], theta[2],
                                                         theta[3], theta[4], theta[5])
    out_mass = np.zeros((1,) + mass.shape)
    out_inertia = np.zeros((1,) + inertia.shape)
    out_origin = np.zeros((rows,) + origin.shape)
    out_axis = np.zeros((rows,) + origin.shape)
    out_points = np.zeros((rows,) + points.shape)
    out_area = np.zeros((rows,) + area.shape)
    out_coefficients = np.zeros((rows, 4))
    out_mass[0], out_inertia[0], out_origin[0] = mass, inertia, origin
    out_axis[0] = _unit_axes(theta[9])[0]
    out_points[0], out_area[0], out_coefficients[0] = points, area, coefficients
    return (out_mass, out_inertia, out_origin, out_axis, out_points, out_area,
            out_coefficients)


@numba.njit(cache=True)
def _evaluate(nodes, contacts, theta, drive, action, q_base, v_base, c, v, duals, jacobian):
    """(r(v) (d,), ∂r/∂v (d, d) when ``jacobian``, else an empty array) of the solve at
    base values (q_base, v_base) and coefficient c [s]; ``duals`` are
    :func:`_constant_duals` of 1 + d rows (Jacobian) or 1. The Jacobian's tangents move q,
    q̇ and q̈ together (dq = c dv, dq̈ = dv / c), so the mass matrix comes from the same
    pass."""
    d = v.shape[0]
    rows = 1 + d if jacobian else 1
    q = q_base + c * v
    a = (v - v_base) / c
    q_dual, v_dual, a_dual = np.zeros((rows, d)), np.zeros((rows, d)), np.zeros((rows, d))
    q_dual[0], v_dual[0], a_dual[0] = q, v, a
    for k in range(1, rows):  # one direction per rate: dq = c dv, da = dv / c
        q_dual[k, k - 1] = c
        v_dual[k, k - 1] = 1.0
        a_dual[k, k - 1] = 1.0 / c
    mass, inertia, origin, axis, points, area, coefficients = duals
    tau = rnea(nodes, contacts, q_dual, v_dual, a_dual, mass, theta[8], inertia, origin, axis,
               points, area, coefficients, theta[7])
    damping = theta[6]
    residual = tau[0] + damping * v - _servo(drive, action, q, v)
    if not jacobian:
        return residual, np.zeros((0, 0))
    gain_q, gain_v = _gains(drive, d)
    matrix = tau[1:].T.copy()  # c ∂ID/∂q + ∂ID/∂q̇ + M/c in one pass
    for k in range(d):
        matrix[k, k] += damping[k] + c * gain_q[k] + gain_v[k]
    return residual, matrix


@numba.njit(cache=True)
def _solve(nodes, contacts, theta, drive, action, q_base, v_base, c, v_start, tolerance,
           iterations):
    """(v, status, |r| [N m or N], largest last update) of r(v) = 0 by Newton's method with
    a backtracking line search from ``v_start``: converged when a full step moves v by at
    most ``tolerance`` (1 + |v|∞)."""
    d = v_start.shape[0]
    single, full = _constant_duals(theta, 1), _constant_duals(theta, 1 + d)
    v = v_start.copy()
    residual, matrix = _evaluate(nodes, contacts, theta, drive, action, q_base, v_base, c, v,
                                 full, True)
    update = np.full(d, np.inf)
    for _ in range(iterations):
        if not np.all(np.isfinite(matrix)):
            update[:] = np.nan
            break
        lu, pivots = _lu_factor(matrix)
        update = -_lu_solve(lu, pivots, residual, False)
        if not np.all(np.isfinite(update)):
            break
        if np.max(np.abs(update)) <= tolerance * (1.0 + np.max(np.abs(v))):
            return v + update, CONVERGED, np.sqrt(_dot(residual, residual)), np.max(np.abs(update))
        norm, fraction = np.sqrt(_dot(residual, residual)), 1.0
        while True:
            trial = v + fraction * update
            # the full step usually passes: evaluate its Jacobian with its residual
            trial_residual, trial_matrix = _evaluate(nodes, contacts, theta, drive, action,
                                                     q_base, v_base, c, trial,
                                                     full if fraction == 1.0 else single,
                                                     fraction == 1.0)
            if (np.sqrt(_dot(trial_residual, trial_residual)) <= (1.0 - ARMIJO * fraction) * norm
                    or fraction <= SMALLEST_STEP):
                break
            fraction *= 0.5
        v = trial
        if fraction == 1.0:
            residual, matrix = trial_residual, trial_matrix
        else:
            residual, matrix = _evaluate(nodes, contacts, theta, drive, action, q_base,
                                         v_base, c, v, full, True)
    return v, NOT_CONVERGED, np.sqrt(_dot(residual, residual)), np.max(np.abs(update))


@numba.njit(cache=True)
def _stages(nodes, contacts, theta, drive, action, q, qd, q_prev, qd_prev, count, dt,
            tolerance, iterations):
    """The solves of one step: (stage count, base coordinates (2, d), base rates (2, d),
    solutions (2, d), c [s], status, |r|, last update); SDIRK2's two stages when ``count``
    is 0, else BDF2's one (row 0)."""
    d = q.shape[0]
    q_base, v_base, solution = np.zeros((2, d)), np.zeros((2, d)), np.zeros((2, d))
    if count == 0:
        c = GAMMA * dt
        q_base[0], v_base[0] = q, qd
        v1, status, norm, update = _solve(nodes, contacts, theta, drive, action, q, qd, c, qd,
                                          tolerance, iterations)
        solution[0] = v1
        if status != CONVERGED:
            return 1, q_base, v_base, solution, c, status, norm, update
        q_base[1] = q + (1.0 - GAMMA) * dt * v1
        v_base[1] = qd + (1.0 - GAMMA) * dt * (v1 - qd) / c
        v2, status, norm, update = _solve(nodes, contacts, theta, drive, action, q_base[1],
                                          v_base[1], c, v1, tolerance, iterations)
        solution[1] = v2
        return 2, q_base, v_base, solution, c, status, norm, update
    c = 2.0 * dt / 3.0
    q_base[0] = (4.0 * q - q_prev) / 3.0
    v_base[0] = (4.0 * qd - qd_prev) / 3.0
    v, status, norm, update = _solve(nodes, contacts, theta, drive, action, q_base[0],
                                     v_base[0], c, 2.0 * qd - qd_prev, tolerance, iterations)
    solution[0] = v
    return 1, q_base, v_base, solution, c, status, norm, update


@numba.njit(cache=True)
def step(nodes, contacts, theta, drive, action, q, qd, q_prev, qd_prev, count, dt, tolerance,
         iterations):
    """(coordinates (d,), rates (d,), status, |r|, last update) ``dt`` [s] after (q, qd)
    (previous (q_prev, qd_prev), ``count`` steps taken): :func:`sim_rigid.step.step`."""
    stages, q_base, v_base, solution, c, status, norm, update = _stages(
        nodes, contacts, theta, drive, action, q, qd, q_prev, qd_prev, count, dt, tolerance,
        iterations)
    last = stages - 1
    return (q_base[last] + c * solution[last], solution[last].copy(), status, norm, update)


@numba.njit(cache=True)
def _axis_joints(nodes, n):
    """The joints whose axis some node turns about or slides along (revolute, prismatic),
    in order, (m,) int64."""
    used = np.zeros(n, dtype=np.bool_)
    for joint in nodes[7]:
        if joint >= 0:
            used[joint] = True
    return np.flatnonzero(used)


@numba.njit(cache=True)
def _across(axis):
    """Two unit vectors (2, 3) orthogonal to the unit ``axis`` and to each other: the
    directions a normalized axis can move in."""
    helper = np.zeros(3)
    helper[np.argmin(np.abs(axis))] = 1.0
    first = _cross3(axis, helper)
    first /= math.sqrt(_dot(first, first))
    out = np.zeros((2, 3))
    out[0] = first
    out[1] = _cross3(axis, first)
    return out


@numba.njit(cache=True)
def _solve_vjp(nodes, contacts, theta, drive, action, q_base, v_base, c, v, g_q, g_v,
               g_action, g_parameters):
    """(∂L/∂q_b, ∂L/∂v_b) of a solution v given ∂L/∂q and ∂L/∂v of its outputs q = q_b +
    c v and v; adds ∂L/∂action to ``g_action`` and ∂L/∂θ to ``g_parameters`` (masses,
    inertias, origins, damping, points, areas, coefficients, centres of mass, axis
    directions)."""
    mass, inertia, origin, points, area, coefficients, damping, gravity, com, direction = theta
    d, n = v.shape[0], mass.shape[0]
    q = q_base + c * v
    a = (v - v_base) / c
    unit, norms = _unit_axes(direction)
    moving = _axis_joints(nodes, n)
    # tangents along q, v (the Jacobian's two halves), every joint origin coordinate, and two
    # directions across each revolute or prismatic joint's unit axis
    first_axis = 1 + 2 * d + 3 * n
    rows = first_axis + 2 * moving.shape[0]
    q_dual, v_dual, a_dual = np.zeros((rows, d)), np.zeros((rows, d)), np.zeros((rows, d))
    q_dual[0], v_dual[0], a_dual[0] = q, v, a
    for k in range(d):
        q_dual[1 + k, k] = 1.0
        v_dual[1 + d + k, k] = 1.0
    duals = _constant_duals(theta, rows)
    origin_dual, axis_dual = duals[2], duals[3]
    for k in range(3 * n):
        origin_dual[1 + 2 * d + k, k // 3, k % 3] = 1.0
    across = np.zeros((moving.shape[0], 2, 3))
    for t in range(moving.shape[0]):
        across[t] = _across(unit[moving[t]])
        axis_dual[first_axis + 2 * t, moving[t]] = across[t, 0]
        axis_dual[first_axis + 2 * t + 1, moving[t]] = across[t, 1]
    tau = rnea(nodes, contacts, q_dual, v_dual, a_dual, duals[0], com, duals[1], origin_dual,
               axis_dual, duals[4], duals[5], duals[6], gravity)
    d_q, d_v = tau[1:1 + d], tau[1 + d:1 + 2 * d]
    d_origin, d_axis = tau[1 + 2 * d:first_axis], tau[first_axis:]
    gain_q, gain_v = _gains(drive, d)
    inertia_matrix = mass_matrix(nodes, q, mass, com, inertia, origin, unit)
    matrix = c * d_q.T + d_v.T + inertia_matrix / c
    for k in range(d):
        matrix[k, k] += damping[k] + c * gain_q[k] + gain_v[k]
    lu, pivots = _lu_factor(matrix)
    adjoint = _lu_solve(lu, pivots, g_v + c * g_q, True)
    g_q_base = g_q - _matvec(d_q, adjoint) - gain_q * adjoint
    g_v_base = _matvec(inertia_matrix, adjoint) / c
    actuated, gear, position, stiffness, _ = drive
    for k in range(actuated.shape[0]):
        g_action[k] += adjoint[actuated[k]] * (stiffness if position else gear[k])
    (g_mass, g_inertia, g_origin, g_damping, g_points, g_area, g_coefficients, g_com,
     g_axis) = g_parameters
    g_origin -= _matvec(d_origin, adjoint).reshape(n, 3)
    # the direction u's gradient: (I - a aᵀ)/|u| maps it to a's, spanned by the two rows
    g_across = _matvec(d_axis, adjoint)
    for t in range(moving.shape[0]):
        j = moving[t]
        g_axis[j] -= (g_across[2 * t] * across[t, 0]
                      + g_across[2 * t + 1] * across[t, 1]) / norms[j]
    g_damping -= adjoint * v
    p_mass, p_com, p_inertia, p_points, p_area, p_coefficients = rnea_parameter_vjp(
        nodes, contacts, q, v, a, adjoint, mass, com, inertia, origin, unit, points, area,
        coefficients, gravity)
    g_mass -= p_mass
    g_com -= p_com
    g_inertia -= p_inertia
    g_points -= p_points
    g_area -= p_area
    g_coefficients -= p_coefficients
    return g_q_base, g_v_base


@numba.njit(cache=True)
def step_vjp(nodes, contacts, theta, drive, action, q, qd, q_prev, qd_prev, count, dt,
             tolerance, iterations, g_q, g_v, g_q_prev, g_v_prev):
    """The step again and its VJP (:func:`sim_rigid.step.step_vjp`) given ∂L/∂(next q, qd,
    q_prev, qd_prev) (d,) each: (status, |r|, last update, ∂L/∂(q, qd, q_prev, qd_prev)
    (4, d), ∂L/∂action (a,), ∂L/∂θ as (masses (n,), inertias (n, 3, 3), origins (n, 3),
    damping (d,), points (c, 3), areas (c,), coefficients (4,), centres of mass (n, 3), axis
    directions (n, 3)))."""
    d = q.shape[0]
    g_parameters = (np.zeros_like(theta[0]), np.zeros_like(theta[1]), np.zeros_like(theta[2]),
                    np.zeros_like(theta[6]), np.zeros_like(theta[3]), np.zeros_like(theta[4]),
                    np.zeros(4), np.zeros_like(theta[8]), np.zeros_like(theta[9]))
    g_action = np.zeros(drive[0].shape[0])
    g_state = np.zeros((4, d))
    stages, q_base, v_base, solution, c, status, norm, update = _stages(
        nodes, contacts, theta, drive, action, q, qd, q_prev, qd_prev, count, dt, tolerance,
        iterations)
    if status != CONVERGED:
        return status, norm, update, g_state, g_action, g_parameters
    g_state[0] += g_q_prev  # the state moves to "previous"
    g_state[1] += g_v_prev
    if stages == 2:
        g_base_q, g_base_v = _solve_vjp(nodes, contacts, theta, drive, action, q_base[1],
                                        v_base[1], c, solution[1], g_q, g_v, g_action,
                                        g_parameters)
        ratio = (1.0 - GAMMA) * dt / c
        g_v1 = (1.0 - GAMMA) * dt * g_base_q + ratio * g_base_v
        g_state[0] += g_base_q
        g_state[1] += (1.0 - ratio) * g_base_v
        g_base_q, g_base_v = _solve_vjp(nodes, contacts, theta, drive, action, q_base[0],
                                        v_base[0], c, solution[0], np.zeros(d), g_v1,
                                        g_action, g_parameters)
        g_state[0] += g_base_q
        g_state[1] += g_base_v
    else:
        g_base_q, g_base_v = _solve_vjp(nodes, contacts, theta, drive, action, q_base[0],
                                        v_base[0], c, solution[0], g_q, g_v, g_action,
                                        g_parameters)
        g_state[0] += 4.0 / 3.0 * g_base_q
        g_state[1] += 4.0 / 3.0 * g_base_v
        g_state[2] = -g_base_q / 3.0
        g_state[3] = -g_base_v / 3.0
    return status, norm, update, g_state, g_action, g_parameters
