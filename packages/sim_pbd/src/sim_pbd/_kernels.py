"""Compiled (numba) XPBD step of an articulated robot and its adjoint, equal to the NumPy
reference in :mod:`sim_pbd.step` (and :mod:`.constraints`, :mod:`.kinematics`,
:mod:`.rotations`, whose formulas these transcribe) to round-off.

One call runs a whole step: every substep, iteration and constraint. :func:`step_vjp`
replays the forward pass recording a tape (flat arrays sized from the model: each
substep's start state, predicted velocities and end orientations; the links' velocities
before each joint's damping and friction; the two links' poses and the multiplier before
each Gauss-Seidel projection, or the state and multipliers at the start of each Jacobi
pass), then runs the local adjoints in reverse, recomputing each projection from its taped
inputs.

3-vectors are tuples of three floats, 3×3 matrices tuples of nine (row-major) and
quaternions tuples of four (w, x, y, z), all in registers. A link as a projection reads it
is a body tuple (centre of mass x, rotation r, world inverse inertia a = r I⁻¹ rᵀ, inverse
mass); its cotangent a body-gradient tuple of the same fields. The world (link -1) is the
body (0, 1, 0, 0).

The entry points take :class:`ModelArrays` and :class:`Params` as plain tuples (numba types
a named tuple by its field names on every call; a plain tuple costs as little as separate
arguments) and build the :class:`_System` record they share inside compiled code, where
field access is free.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

__all__ = ["ModelArrays", "Params", "step", "step_vjp"]

_POS, _ANG, _LIM = 0, 1, 2
_ZERO3 = (0.0, 0.0, 0.0)
_ZERO9 = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
_EYE = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)


class ModelArrays(NamedTuple):
    """The constant part of a model: joint links and frames (:class:`~sim_pbd.kinematics.
    JointFrames`), limits, friction and gravity. m joints; parent -1 is the world."""

    parent: np.ndarray  # (m,) int64
    child: np.ndarray  # (m,) int64
    order: np.ndarray  # (m,) int64, parents before children
    prismatic: np.ndarray  # (m,) bool
    parent_axis: np.ndarray  # (m, 3)
    child_axis: np.ndarray  # (m, 3)
    parent_normal: np.ndarray  # (m, 3)
    child_normal: np.ndarray  # (m, 3)
    parent_rotation: np.ndarray  # (m, 3, 3)
    child_rotation: np.ndarray  # (m, 3, 3)
    lower: np.ndarray  # (m,) [rad or m]
    upper: np.ndarray  # (m,)
    limited: np.ndarray  # (m,) bool
    friction: np.ndarray  # (m,) [N m or N]
    gravity: np.ndarray  # (3,) [m/s²]


class Params(NamedTuple):
    """The step's parameters (:data:`sim_pbd.model.PARAMETERS`, float64, C order)."""

    link_mass: np.ndarray  # (n,) [kg]
    link_inertia: np.ndarray  # (n, 3, 3) [kg m²], its symmetric part is used
    joint_parent_x: np.ndarray  # (m, 3) [m]
    joint_child_x: np.ndarray  # (m, 3) [m]
    joint_damping: np.ndarray  # (m,)
    joint_compliance: np.ndarray  # (m,)


class _System(NamedTuple):
    parent: np.ndarray
    child: np.ndarray
    order: np.ndarray
    prismatic: np.ndarray
    parent_axis: np.ndarray
    child_axis: np.ndarray
    parent_normal: np.ndarray
    child_normal: np.ndarray
    parent_rotation: np.ndarray
    child_rotation: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    limited: np.ndarray
    friction: np.ndarray
    gravity: np.ndarray
    inv_mass: np.ndarray
    inertia: np.ndarray  # symmetric part
    inv_inertia: np.ndarray
    joint_parent_x: np.ndarray
    joint_child_x: np.ndarray
    damping: np.ndarray
    compliance: np.ndarray  # α / h²
    h: float


class _Tape(NamedTuple):
    """What the reverse sweep reads, by substep s, iteration i, tree position k (the k-th
    joint of ``order``) and link; the arrays of the solver not used have size zero."""

    x0: np.ndarray  # (S, n, 3) substep start
    q0: np.ndarray  # (S, n, 4)
    v0: np.ndarray  # (S, n, 3)
    w0: np.ndarray  # (S, n, 3)
    v_pred: np.ndarray  # (S, n, 3) after damping and friction
    w_pred: np.ndarray  # (S, n, 3)
    q_end: np.ndarray  # (S, n, 4) after the projections
    joint_v: np.ndarray  # (S, m, 4, 3) v_p, w_p, v_c, w_c before joint k's damping
    pose: np.ndarray  # (S, I, 3m, 2, 7) Gauss-Seidel: (x, q) of parent and child before
    lam: np.ndarray  # (S, I, 3m, 3) Gauss-Seidel: the multiplier before
    pass_x: np.ndarray  # (S, I, n, 3) Jacobi: pass start
    pass_q: np.ndarray  # (S, I, n, 4)
    pass_lam: np.ndarray  # (S, I, 2, m, 3)
    active: np.ndarray  # (S, I, m) bool: joint k's limit projected
    bound: np.ndarray  # (S, I, m) the violated limit


class _Work(NamedTuple):
    """Scratch of one call, and the reverse sweep's cotangent accumulators (g_*)."""

    x0: np.ndarray  # (n, 3)
    q0: np.ndarray  # (n, 4)
    force: np.ndarray  # (n, 3)
    torque: np.ndarray  # (n, 3)
    lam: np.ndarray  # (2, m, 3)
    dx: np.ndarray  # (n, 3) Jacobi sums
    dphi: np.ndarray  # (n, 3)
    count: np.ndarray  # (n,)
    active: np.ndarray  # (m,) bool
    bound: np.ndarray  # (m,)
    corr: np.ndarray  # (3m, 4, 3) Jacobi corrections in the reverse sweep
    body_grad: np.ndarray  # (n, 22) Jacobi: x, r, a, inv_mass cotangents per link
    g_dphi: np.ndarray  # (n, 3) Jacobi: the turns' cotangents
    g_matrix: np.ndarray  # (n, 3, 3) the rotation matrices' cotangents in the prediction
    g_x: np.ndarray  # (n, 3)
    g_q: np.ndarray  # (n, 4)
    g_v: np.ndarray  # (n, 3)
    g_w: np.ndarray  # (n, 3)
    g_x0: np.ndarray  # (n, 3)
    g_q0: np.ndarray  # (n, 4)
    g_lam: np.ndarray  # (2, m, 3)
    g_inv_mass: np.ndarray  # (n,)
    g_inertia: np.ndarray  # (n, 3, 3)
    g_inv_inertia: np.ndarray  # (n, 3, 3)
    g_parent_x: np.ndarray  # (m, 3)
    g_child_x: np.ndarray  # (m, 3)
    g_damping: np.ndarray  # (m,)
    g_compliance: np.ndarray  # (m,)
    g_action: np.ndarray  # (m,)


# -- 3-vectors, 3×3 matrices, quaternions -----------------------------------------------


@numba.njit(cache=True)
def _row3(a, i):
    return (a[i, 0], a[i, 1], a[i, 2])


@numba.njit(cache=True)
def _row4(a, i):
    return (a[i, 0], a[i, 1], a[i, 2], a[i, 3])


@numba.njit(cache=True)
def _row9(a, i):
    return (a[i, 0, 0], a[i, 0, 1], a[i, 0, 2], a[i, 1, 0], a[i, 1, 1], a[i, 1, 2],
            a[i, 2, 0], a[i, 2, 1], a[i, 2, 2])


@numba.njit(cache=True)
def _put3(a, i, v):
    a[i, 0], a[i, 1], a[i, 2] = v[0], v[1], v[2]


@numba.njit(cache=True)
def _put4(a, i, v):
    a[i, 0], a[i, 1], a[i, 2], a[i, 3] = v[0], v[1], v[2], v[3]


@numba.njit(cache=True)
def _acc3(a, i, v):
    a[i, 0] += v[0]
    a[i, 1] += v[1]
    a[i, 2] += v[2]


@numba.njit(cache=True)
def _acc4(a, i, v):
    a[i, 0] += v[0]
    a[i, 1] += v[1]
    a[i, 2] += v[2]
    a[i, 3] += v[3]


@numba.njit(cache=True)
def _acc9(a, i, m):
    for r in range(3):
        for c in range(3):
            a[i, r, c] += m[3 * r + c]


@numba.njit(cache=True)
def _add(a, b):
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


@numba.njit(cache=True)
def _sub(a, b):
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


@numba.njit(cache=True)
def _mul(s, a):
    return (s * a[0], s * a[1], s * a[2])


@numba.njit(cache=True)
def _over(a, d):
    return (a[0] / d, a[1] / d, a[2] / d)


@numba.njit(cache=True)
def _neg(a):
    return (-a[0], -a[1], -a[2])


@numba.njit(cache=True)
def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@numba.njit(cache=True)
def _cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


@numba.njit(cache=True)
def _mv(m, v):
    return (m[0] * v[0] + m[1] * v[1] + m[2] * v[2], m[3] * v[0] + m[4] * v[1] + m[5] * v[2],
            m[6] * v[0] + m[7] * v[1] + m[8] * v[2])


@numba.njit(cache=True)
def _mtv(m, v):
    return (m[0] * v[0] + m[3] * v[1] + m[6] * v[2], m[1] * v[0] + m[4] * v[1] + m[7] * v[2],
            m[2] * v[0] + m[5] * v[1] + m[8] * v[2])


@numba.njit(cache=True)
def _mm(a, b):
    return (a[0] * b[0] + a[1] * b[3] + a[2] * b[6], a[0] * b[1] + a[1] * b[4] + a[2] * b[7],
            a[0] * b[2] + a[1] * b[5] + a[2] * b[8], a[3] * b[0] + a[4] * b[3] + a[5] * b[6],
            a[3] * b[1] + a[4] * b[4] + a[5] * b[7], a[3] * b[2] + a[4] * b[5] + a[5] * b[8],
            a[6] * b[0] + a[7] * b[3] + a[8] * b[6], a[6] * b[1] + a[7] * b[4] + a[8] * b[7],
            a[6] * b[2] + a[7] * b[5] + a[8] * b[8])


@numba.njit(cache=True)
def _mt(a):
    return (a[0], a[3], a[6], a[1], a[4], a[7], a[2], a[5], a[8])


@numba.njit(cache=True)
def _madd(a, b):
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3], a[4] + b[4], a[5] + b[5],
            a[6] + b[6], a[7] + b[7], a[8] + b[8])


@numba.njit(cache=True)
def _msub(a, b):
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2], a[3] - b[3], a[4] - b[4], a[5] - b[5],
            a[6] - b[6], a[7] - b[7], a[8] - b[8])


@numba.njit(cache=True)
def _mscale(s, a):
    return (s * a[0], s * a[1], s * a[2], s * a[3], s * a[4], s * a[5], s * a[6], s * a[7],
            s * a[8])


@numba.njit(cache=True)
def _outer(a, b):
    return (a[0] * b[0], a[0] * b[1], a[0] * b[2], a[1] * b[0], a[1] * b[1], a[1] * b[2],
            a[2] * b[0], a[2] * b[1], a[2] * b[2])


@numba.njit(cache=True)
def _trace(a):
    return a[0] + a[4] + a[8]


@numba.njit(cache=True)
def _skew(v):
    return (0.0, -v[2], v[1], v[2], 0.0, -v[0], -v[1], v[0], 0.0)


@numba.njit(cache=True)
def _vee(g):
    """The cotangent of v from that of [v]× (rotations.skew_vjp)."""
    return (g[7] - g[5], g[2] - g[6], g[3] - g[1])


@numba.njit(cache=True)
def _inverse(m):
    """The inverse of a 3×3 matrix (adjugate over determinant)."""
    c0 = m[4] * m[8] - m[5] * m[7]
    c1 = m[5] * m[6] - m[3] * m[8]
    c2 = m[3] * m[7] - m[4] * m[6]
    det = m[0] * c0 + m[1] * c1 + m[2] * c2
    return (c0 / det, (m[2] * m[7] - m[1] * m[8]) / det, (m[1] * m[5] - m[2] * m[4]) / det,
            c1 / det, (m[0] * m[8] - m[2] * m[6]) / det, (m[2] * m[3] - m[0] * m[5]) / det,
            c2 / det, (m[1] * m[6] - m[0] * m[7]) / det, (m[0] * m[4] - m[1] * m[3]) / det)


@numba.njit(cache=True)
def _quat_matrix(q):
    w, x, y, z = q
    s = w * w - (x * x + y * y + z * z)
    return (s + 2.0 * x * x, 2.0 * x * y - 2.0 * w * z, 2.0 * x * z + 2.0 * w * y,
            2.0 * x * y + 2.0 * w * z, s + 2.0 * y * y, 2.0 * y * z - 2.0 * w * x,
            2.0 * x * z - 2.0 * w * y, 2.0 * y * z + 2.0 * w * x, s + 2.0 * z * z)


@numba.njit(cache=True)
def _quat_matrix_vjp(q, g):
    w, u = q[0], (q[1], q[2], q[3])
    trace = _trace(g)
    vee = _vee(g)
    sym = _madd(g, _mt(g))
    out_u = _add(_add(_mul(-2.0 * trace, u), _mul(2.0, _mv(sym, u))), _mul(2.0 * w, vee))
    return (2.0 * w * trace + 2.0 * _dot(u, vee), out_u[0], out_u[1], out_u[2])


@numba.njit(cache=True)
def _quat_multiply(a, b):
    au, bu = (a[1], a[2], a[3]), (b[1], b[2], b[3])
    u = _add(_add(_mul(a[0], bu), _mul(b[0], au)), _cross(au, bu))
    return (a[0] * b[0] - _dot(au, bu), u[0], u[1], u[2])


@numba.njit(cache=True)
def _quat_multiply_vjp(a, b, g):
    au, bu, gu = (a[1], a[2], a[3]), (b[1], b[2], b[3]), (g[1], g[2], g[3])
    ga = _add(_add(_mul(-g[0], bu), _mul(b[0], gu)), _cross(bu, gu))
    gb = _add(_add(_mul(-g[0], au), _mul(a[0], gu)), _cross(gu, au))
    return ((g[0] * b[0] + _dot(gu, bu), ga[0], ga[1], ga[2]),
            (g[0] * a[0] + _dot(gu, au), gb[0], gb[1], gb[2]))


@numba.njit(cache=True)
def _quat_normalize(q):
    norm = math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    return (q[0] / norm, q[1] / norm, q[2] / norm, q[3] / norm)


@numba.njit(cache=True)
def _quat_normalize_vjp(q, g):
    norm = math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    unit = (q[0] / norm, q[1] / norm, q[2] / norm, q[3] / norm)
    along = unit[0] * g[0] + unit[1] * g[1] + unit[2] * g[2] + unit[3] * g[3]
    return ((g[0] - unit[0] * along) / norm, (g[1] - unit[1] * along) / norm,
            (g[2] - unit[2] * along) / norm, (g[3] - unit[3] * along) / norm)


@numba.njit(cache=True)
def _quat_integrate(q, dphi):
    """q + ½ (0, Δφ) ⊗ q (not normalized)."""
    qu = (q[1], q[2], q[3])
    u = _add(qu, _mul(0.5, _add(_mul(q[0], dphi), _cross(dphi, qu))))
    return (q[0] - 0.5 * _dot(dphi, qu), u[0], u[1], u[2])


@numba.njit(cache=True)
def _quat_integrate_vjp(q, dphi, g):
    qu, gu = (q[1], q[2], q[3]), (g[1], g[2], g[3])
    g_u = _add(gu, _mul(0.5, _add(_mul(-g[0], dphi), _cross(gu, dphi))))
    g_dphi = _mul(0.5, _add(_add(_mul(-g[0], qu), _mul(q[0], gu)), _cross(qu, gu)))
    return (g[0] + 0.5 * _dot(dphi, gu), g_u[0], g_u[1], g_u[2]), g_dphi


# -- bodies and their cotangents ----------------------------------------------------------


@numba.njit(cache=True)
def _body_at(s, link, x, q):
    """The body tuple of ``link`` at centre of mass x and orientation q (tuples)."""
    if link < 0:
        return (_ZERO3, _EYE, _ZERO9, 0.0)
    r = _quat_matrix(q)
    return (x, r, _mm(_mm(r, _row9(s.inv_inertia, link)), _mt(r)), s.inv_mass[link])


@numba.njit(cache=True)
def _body(s, link, x, q):
    if link < 0:
        return _body_at(s, link, _ZERO3, (1.0, 0.0, 0.0, 0.0))
    return _body_at(s, link, _row3(x, link), _row4(q, link))


@numba.njit(cache=True)
def _body_grad_add(a, b):
    return (_add(a[0], b[0]), _madd(a[1], b[1]), _madd(a[2], b[2]), a[3] + b[3])


@numba.njit(cache=True)
def _add_body(s, wk, link, q, grad):
    """Route a body's cotangent to the link's x, q, inverse inertia and inverse mass."""
    if link < 0:
        return
    r = _quat_matrix(q)
    inv = _row9(s.inv_inertia, link)
    g_a = grad[2]
    g_r = _madd(_madd(grad[1], _mm(_mm(g_a, r), _mt(inv))), _mm(_mm(_mt(g_a), r), inv))
    _acc3(wk.g_x, link, grad[0])
    _acc4(wk.g_q, link, _quat_matrix_vjp(q, g_r))
    _acc9(wk.g_inv_inertia, link, _mm(_mm(_mt(r), g_a), r))
    wk.g_inv_mass[link] += grad[3]


@numba.njit(cache=True)
def _response(bp, bc, corr):
    """(Δx_p, Δφ_p, Δx_c, Δφ_c) of a correction (p, τ_c, τ_p, Δλ)."""
    return (_mul(-bp[3], corr[0]), _neg(_mv(bp[2], corr[2])), _mul(bc[3], corr[0]),
            _mv(bc[2], corr[1]))


@numba.njit(cache=True)
def _response_vjp(bp, bc, corr, g_dx_p, g_dphi_p, g_dx_c, g_dphi_c):
    """(g_p, g_τ_c, g_τ_p) of the correction, body gradients of parent and child."""
    g_corr = (_sub(_mul(bc[3], g_dx_c), _mul(bp[3], g_dx_p)), _mtv(bc[2], g_dphi_c),
              _neg(_mtv(bp[2], g_dphi_p)))
    grad_p = (_ZERO3, _ZERO9, _mscale(-1.0, _outer(g_dphi_p, corr[2])), -_dot(g_dx_p, corr[0]))
    grad_c = (_ZERO3, _ZERO9, _outer(g_dphi_c, corr[1]), _dot(g_dx_c, corr[0]))
    return g_corr, grad_p, grad_c


@numba.njit(cache=True)
def _move(x, q, link, dx, dphi):
    if link >= 0:
        _put3(x, link, _add(_row3(x, link), dx))
        _put4(q, link, _quat_normalize(_quat_integrate(_row4(q, link), dphi)))


@numba.njit(cache=True)
def _move_vjp(wk, link, q, dphi):
    """(g_dx, g_dφ) of :func:`_move`; wk.g_q[link] becomes the input's cotangent."""
    if link < 0:
        return _ZERO3, _ZERO3
    g_raw = _quat_normalize_vjp(_quat_integrate(q, dphi), _row4(wk.g_q, link))
    g_q, g_dphi = _quat_integrate_vjp(q, dphi, g_raw)
    _put4(wk.g_q, link, g_q)
    return _row3(wk.g_x, link), g_dphi


# -- joint kinematics ---------------------------------------------------------------------


@numba.njit(cache=True)
def _jacobian(s, j, x_p, r_p, x_c, r_c):
    """(lin, ang_c, ang_p): joint j's rate Jacobian (kinematics.joint_jacobian)."""
    axis = _mv(r_p, _row3(s.parent_axis, j))
    if not s.prismatic[j]:
        return _ZERO3, axis, axis
    lever_c = _mv(r_c, _row3(s.joint_child_x, j))
    lever_p = _sub(_add(x_c, lever_c), x_p)
    return axis, _cross(lever_c, axis), _cross(lever_p, axis)


@numba.njit(cache=True)
def _jacobian_vjp(s, j, x_p, r_p, x_c, r_c, g_lin, g_ang_c, g_ang_p):
    """Cotangents (x_p, r_p, x_c, r_c, joint_child_x) of :func:`_jacobian`."""
    parent_axis = _row3(s.parent_axis, j)
    if not s.prismatic[j]:
        return _ZERO3, _outer(_add(g_ang_c, g_ang_p), parent_axis), _ZERO3, _ZERO9, _ZERO3
    child_x = _row3(s.joint_child_x, j)
    axis = _mv(r_p, parent_axis)
    lever_c = _mv(r_c, child_x)
    lever_p = _sub(_add(x_c, lever_c), x_p)
    g_axis = _add(_add(g_lin, _cross(g_ang_c, lever_c)), _cross(g_ang_p, lever_p))
    g_lever_p = _cross(axis, g_ang_p)
    g_lever_c = _add(_cross(axis, g_ang_c), g_lever_p)
    return (_neg(g_lever_p), _outer(g_axis, parent_axis), g_lever_p, _outer(g_lever_c, child_x),
            _mtv(r_c, g_lever_c))


@numba.njit(cache=True)
def _coordinate(s, j, bp, bc):
    """Joint j's position [rad or m] (kinematics.joint_coordinate)."""
    x_p, r_p = bp[0], bp[1]
    x_c, r_c = bc[0], bc[1]
    axis = _mv(r_p, _row3(s.parent_axis, j))
    if s.prismatic[j]:
        gap = _sub(_sub(_add(x_c, _mv(r_c, _row3(s.joint_child_x, j))), x_p),
                   _mv(r_p, _row3(s.joint_parent_x, j)))
        return _dot(axis, gap)
    e_p = _mv(r_p, _row3(s.parent_normal, j))
    e_c = _mv(r_c, _row3(s.child_normal, j))
    return math.atan2(_dot(axis, _cross(e_p, e_c)), _dot(e_p, e_c))


@numba.njit(cache=True)
def _coordinate_vjp(s, j, bp, bc, g):
    """Cotangents (x_p, r_p, x_c, r_c, joint_parent_x, joint_child_x) of
    :func:`_coordinate`."""
    x_p, r_p = bp[0], bp[1]
    x_c, r_c = bc[0], bc[1]
    parent_axis = _row3(s.parent_axis, j)
    axis = _mv(r_p, parent_axis)
    if s.prismatic[j]:
        parent_x, child_x = _row3(s.joint_parent_x, j), _row3(s.joint_child_x, j)
        gap = _sub(_sub(_add(x_c, _mv(r_c, child_x)), x_p), _mv(r_p, parent_x))
        g_axis, g_gap = _mul(g, gap), _mul(g, axis)
        g_rp = _madd(_mscale(-1.0, _outer(g_gap, parent_x)), _outer(g_axis, parent_axis))
        return (_neg(g_gap), g_rp, g_gap, _outer(g_gap, child_x), _neg(_mtv(r_p, g_gap)),
                _mtv(r_c, g_gap))
    parent_normal, child_normal = _row3(s.parent_normal, j), _row3(s.child_normal, j)
    e_p, e_c = _mv(r_p, parent_normal), _mv(r_c, child_normal)
    cross = _cross(e_p, e_c)
    sin, cos = _dot(axis, cross), _dot(e_p, e_c)
    scale = g / (sin * sin + cos * cos)
    g_sin, g_cos = scale * cos, -scale * sin
    g_axis, g_cross = _mul(g_sin, cross), _mul(g_sin, axis)
    g_rp = _madd(_outer(_add(_cross(e_c, g_cross), _mul(g_cos, e_c)), parent_normal),
                 _outer(g_axis, parent_axis))
    g_rc = _outer(_add(_cross(g_cross, e_p), _mul(g_cos, e_p)), child_normal)
    return _ZERO3, g_rp, _ZERO3, g_rc, _ZERO3, _ZERO3


@numba.njit(cache=True)
def _joint_mass(s, j, bp, bc):
    """(lin, ang_c, ang_p, w): the rate Jacobian and the generalized inverse mass along it
    (constraints.joint_mass)."""
    lin, ang_c, ang_p = _jacobian(s, j, bp[0], bp[1], bc[0], bc[1])
    w = ((bc[3] + bp[3]) * _dot(lin, lin) + _dot(ang_c, _mv(bc[2], ang_c))
         + _dot(ang_p, _mv(bp[2], ang_p)))
    return lin, ang_c, ang_p, w


@numba.njit(cache=True)
def _joint_mass_vjp(s, j, bp, bc, g_lin, g_ang_c, g_ang_p, g_w):
    """(body gradient of parent, of child, g_joint_child_x) of :func:`_joint_mass`."""
    lin, ang_c, ang_p = _jacobian(s, j, bp[0], bp[1], bc[0], bc[1])
    fill = bc[3] + bp[3]
    g_lin = _add(g_lin, _mul(2.0 * g_w * fill, lin))
    g_ang_c = _add(g_ang_c, _mul(g_w, _mv(_madd(bc[2], _mt(bc[2])), ang_c)))
    g_ang_p = _add(g_ang_p, _mul(g_w, _mv(_madd(bp[2], _mt(bp[2])), ang_p)))
    g_x_p, g_r_p, g_x_c, g_r_c, g_child_x = _jacobian_vjp(s, j, bp[0], bp[1], bc[0], bc[1],
                                                         g_lin, g_ang_c, g_ang_p)
    g_mass = g_w * _dot(lin, lin)
    return ((g_x_p, g_r_p, _mscale(g_w, _outer(ang_p, ang_p)), g_mass),
            (g_x_c, g_r_c, _mscale(g_w, _outer(ang_c, ang_c)), g_mass), g_child_x)


# -- projections (constraints.py) ---------------------------------------------------------


@numba.njit(cache=True)
def _lever_term(lever, a):
    """[r]×ᵀ A [r]×."""
    sk = _skew(lever)
    return _mm(_mm(_mt(sk), a), sk)


@numba.njit(cache=True)
def _lever_term_vjp(lever, a, g):
    sk = _skew(lever)
    return (_vee(_madd(_mm(_mm(a, sk), _mt(g)), _mm(_mm(_mt(a), sk), g))),
            _mm(_mm(sk, g), _mt(sk)))


@numba.njit(cache=True)
def _block_matrix(k, axis, has_axis, fill, compliance):
    if not has_axis:
        return _madd(k, _mscale(compliance, _EYE)), _EYE
    proj = _msub(_EYE, _outer(axis, axis))
    matrix = _madd(_madd(_mm(_mm(proj, k), proj), _mscale(compliance, proj)),
                   _mscale(fill, _outer(axis, axis)))
    return matrix, proj


@numba.njit(cache=True)
def _block(k, axis, has_axis, fill, compliance, e):
    """Δλ of the (projected) block system (constraints._block)."""
    matrix, proj = _block_matrix(k, axis, has_axis, fill, compliance)
    return _neg(_mv(_inverse(matrix), _mv(proj, e)))


@numba.njit(cache=True)
def _block_vjp(k, axis, has_axis, fill, compliance, e, g_dlam):
    """(g_k, g_axis, g_compliance, g_e) of :func:`_block` (constraints._block_vjp)."""
    matrix, proj = _block_matrix(k, axis, has_axis, fill, compliance)
    inverse = _inverse(matrix)
    dlam = _neg(_mv(inverse, _mv(proj, e)))
    y = _mtv(inverse, g_dlam)
    g_matrix = _mscale(-1.0, _outer(y, dlam))
    if not has_axis:
        return g_matrix, _ZERO3, _trace(g_matrix), _neg(y)
    g_rhs = _neg(y)
    g_proj = _madd(_madd(_madd(_outer(g_rhs, e), _mm(_mm(g_matrix, proj), _mt(k))),
                         _mm(_mm(_mt(k), proj), g_matrix)), _mscale(compliance, g_matrix))
    g_outer = _msub(_mscale(fill, g_matrix), g_proj)
    g_axis = _mv(_madd(g_outer, _mt(g_outer)), axis)
    g_compliance = 0.0
    for i in range(9):
        g_compliance += g_matrix[i] * proj[i]
    return _mm(_mm(proj, g_matrix), proj), g_axis, g_compliance, _mv(proj, g_rhs)


@numba.njit(cache=True)
def _positional_parts(s, j, bp, bc):
    x_p, r_p, a_p, im_p = bp
    x_c, r_c, a_c, im_c = bc
    lever_c = _mv(r_c, _row3(s.joint_child_x, j))
    origin_c = _add(x_c, lever_c)
    lever_pj = _mv(r_p, _row3(s.joint_parent_x, j))
    gap = _sub(_sub(origin_c, x_p), lever_pj)
    fill = im_c + im_p
    prismatic = s.prismatic[j]
    if prismatic:
        axis = _mv(r_p, _row3(s.parent_axis, j))
        lever_p = _sub(origin_c, x_p)
    else:
        axis = _ZERO3
        lever_p = lever_pj
    k = _madd(_madd(_mscale(fill, _EYE), _lever_term(lever_c, a_c)), _lever_term(lever_p, a_p))
    return lever_c, lever_p, gap, fill, prismatic, axis, k


@numba.njit(cache=True)
def _positional(s, j, bp, bc, lam):
    lever_c, lever_p, gap, fill, prismatic, axis, k = _positional_parts(s, j, bp, bc)
    compliance = s.compliance[j]
    dlam = _block(k, axis, prismatic, fill, compliance, _add(gap, _mul(compliance, lam)))
    return (dlam, _cross(lever_c, dlam), _cross(lever_p, dlam), dlam)


@numba.njit(cache=True)
def _positional_vjp(s, wk, j, bp, bc, lam, g_corr):
    """Body gradients of parent and child; adds the joint origins', compliance's and
    multiplier's cotangents to ``wk``."""
    lever_c, lever_p, gap, fill, prismatic, axis, k = _positional_parts(s, j, bp, bc)
    compliance = s.compliance[j]
    e = _add(gap, _mul(compliance, lam))
    dlam = _block(k, axis, prismatic, fill, compliance, e)
    g_p, g_tau_c, g_tau_p, g_dl = g_corr
    g_dlam = _add(_add(_add(g_p, g_dl), _cross(g_tau_c, lever_c)), _cross(g_tau_p, lever_p))
    g_lever_c = _cross(dlam, g_tau_c)
    g_lever_p = _cross(dlam, g_tau_p)
    g_k, g_axis, g_compliance, g_e = _block_vjp(k, axis, prismatic, fill, compliance, e, g_dlam)
    _acc3(wk.g_lam[_POS], j, _mul(compliance, g_e))
    wk.g_compliance[j] += g_compliance + _dot(g_e, lam)
    g_fill = _trace(g_k)
    d_lever_c, g_a_c = _lever_term_vjp(lever_c, bc[2], g_k)
    d_lever_p, g_a_p = _lever_term_vjp(lever_p, bp[2], g_k)
    g_lever_c = _add(g_lever_c, d_lever_c)
    g_lever_p = _add(g_lever_p, d_lever_p)
    g_x_p = _neg(g_e)
    g_origin_c = g_e
    g_lever_pj = _neg(g_e)
    g_r_p = _ZERO9
    if prismatic:
        g_origin_c = _add(g_origin_c, g_lever_p)
        g_x_p = _sub(g_x_p, g_lever_p)
        g_r_p = _outer(g_axis, _row3(s.parent_axis, j))
    else:
        g_lever_pj = _add(g_lever_pj, g_lever_p)
    g_lever_c = _add(g_lever_c, g_origin_c)
    parent_x, child_x = _row3(s.joint_parent_x, j), _row3(s.joint_child_x, j)
    g_r_p = _madd(g_r_p, _outer(g_lever_pj, parent_x))
    _acc3(wk.g_parent_x, j, _mtv(bp[1], g_lever_pj))
    _acc3(wk.g_child_x, j, _mtv(bc[1], g_lever_c))
    return ((g_x_p, g_r_p, g_a_p, g_fill),
            (g_origin_c, _outer(g_lever_c, child_x), g_a_c, g_fill))


@numba.njit(cache=True)
def _angular_parts(s, j, bp, bc):
    """(error, has_axis, parent world axis, child world axis, parent and child joint
    frames): the revolute's axes or the prismatic's frames (constraints._angular_error)."""
    r_p, r_c = bp[1], bc[1]
    if s.prismatic[j]:
        frame_p = _mm(r_p, _row9(s.parent_rotation, j))
        frame_c = _mm(r_c, _row9(s.child_rotation, j))
        error = _mul(0.5, _vee(_mm(frame_c, _mt(frame_p))))
        return error, False, _ZERO3, _ZERO3, frame_p, frame_c
    axis_p = _mv(r_p, _row3(s.parent_axis, j))
    axis_c = _mv(r_c, _row3(s.child_axis, j))
    return _cross(axis_p, axis_c), True, axis_p, axis_c, _ZERO9, _ZERO9


@numba.njit(cache=True)
def _angular(s, j, bp, bc, lam):
    error, has_axis, axis, _, _, _ = _angular_parts(s, j, bp, bc)
    k = _madd(bc[2], bp[2])
    compliance = s.compliance[j]
    dlam = _block(k, axis, has_axis, _trace(k) / 3.0, compliance,
                  _add(error, _mul(compliance, lam)))
    return (_ZERO3, dlam, dlam, dlam)


@numba.njit(cache=True)
def _angular_vjp(s, wk, j, bp, bc, lam, g_corr):
    error, has_axis, axis, axis_c, frame_p, frame_c = _angular_parts(s, j, bp, bc)
    k = _madd(bc[2], bp[2])
    compliance = s.compliance[j]
    e = _add(error, _mul(compliance, lam))
    g_dlam = _add(_add(g_corr[1], g_corr[2]), g_corr[3])
    g_k, g_axis, g_compliance, g_e = _block_vjp(k, axis, has_axis, _trace(k) / 3.0, compliance,
                                                e, g_dlam)
    wk.g_compliance[j] += g_compliance + _dot(g_e, lam)
    _acc3(wk.g_lam[_ANG], j, _mul(compliance, g_e))
    if has_axis:
        g_axis = _add(g_axis, _cross(axis_c, g_e))
        g_r_p = _outer(g_axis, _row3(s.parent_axis, j))
        g_r_c = _outer(_cross(g_e, axis), _row3(s.child_axis, j))
    else:
        g_relative = _mscale(0.5, _skew(g_e))
        g_r_c = _mm(_mm(g_relative, frame_p), _mt(_row9(s.child_rotation, j)))
        g_r_p = _mm(_mm(_mt(g_relative), frame_c), _mt(_row9(s.parent_rotation, j)))
    return (_ZERO3, g_r_p, g_k, 0.0), (_ZERO3, g_r_c, g_k, 0.0)


@numba.njit(cache=True)
def _limit(s, j, bp, bc, bound):
    value = _coordinate(s, j, bp, bc)
    lin, ang_c, ang_p, w = _joint_mass(s, j, bp, bc)
    dlam = -(value - bound) / w
    return (_mul(dlam, lin), _mul(dlam, ang_c), _mul(dlam, ang_p), _ZERO3)


@numba.njit(cache=True)
def _limit_vjp(s, wk, j, bp, bc, bound, g_corr):
    value = _coordinate(s, j, bp, bc)
    lin, ang_c, ang_p, w = _joint_mass(s, j, bp, bc)
    violation = value - bound
    dlam = -violation / w
    g_dlam = _dot(lin, g_corr[0]) + _dot(ang_c, g_corr[1]) + _dot(ang_p, g_corr[2])
    grad_p, grad_c, g_child_x = _joint_mass_vjp(
        s, j, bp, bc, _mul(dlam, g_corr[0]), _mul(dlam, g_corr[1]), _mul(dlam, g_corr[2]),
        g_dlam * violation / (w * w))
    g_x_p, g_r_p, g_x_c, g_r_c, g_parent_x, g_child_x2 = _coordinate_vjp(s, j, bp, bc,
                                                                         -g_dlam / w)
    _acc3(wk.g_parent_x, j, g_parent_x)
    _acc3(wk.g_child_x, j, _add(g_child_x, g_child_x2))
    return (_body_grad_add(grad_p, (g_x_p, g_r_p, _ZERO9, 0.0)),
            _body_grad_add(grad_c, (g_x_c, g_r_c, _ZERO9, 0.0)))


@numba.njit(cache=True)
def _project(s, kind, j, bound, bp, bc, lam):
    if kind == _POS:
        return _positional(s, j, bp, bc, lam)
    if kind == _ANG:
        return _angular(s, j, bp, bc, lam)
    return _limit(s, j, bp, bc, bound)


@numba.njit(cache=True)
def _project_vjp(s, wk, kind, j, bound, bp, bc, lam, g_corr):
    if kind == _POS:
        return _positional_vjp(s, wk, j, bp, bc, lam, g_corr)
    if kind == _ANG:
        return _angular_vjp(s, wk, j, bp, bc, lam, g_corr)
    return _limit_vjp(s, wk, j, bp, bc, bound, g_corr)


@numba.njit(cache=True)
def _violated_bound(s, j, bp, bc):
    """(projected, bound): whether joint j is past a limit, and which."""
    if not s.limited[j]:
        return False, 0.0
    value = _coordinate(s, j, bp, bc)
    if value < s.lower[j]:
        return True, s.lower[j]
    if value > s.upper[j]:
        return True, s.upper[j]
    return False, 0.0


@numba.njit(cache=True)
def _multiplier(wk_lam, kind, j):
    if kind == _LIM:
        return _ZERO3
    return _row3(wk_lam[kind], j)


# -- solvers --------------------------------------------------------------------------------


@numba.njit(cache=True)
def _gauss_seidel_apply(s, x, q, lam, kind, j, bound, record, tape, sub, it, slot):
    p, c = s.parent[j], s.child[j]
    bp, bc = _body(s, p, x, q), _body(s, c, x, q)
    lam_j = _multiplier(lam, kind, j)
    if record:
        pose = tape.pose[sub, it, slot]
        pose[0] = 0.0
        if p >= 0:
            pose[0, :3] = x[p]
            pose[0, 3:] = q[p]
        pose[1, :3] = x[c]
        pose[1, 3:] = q[c]
        _put3(tape.lam[sub, it], slot, lam_j)
    corr = _project(s, kind, j, bound, bp, bc, lam_j)
    dx_p, dphi_p, dx_c, dphi_c = _response(bp, bc, corr)
    _move(x, q, c, dx_c, dphi_c)
    _move(x, q, p, dx_p, dphi_p)
    if kind != _LIM:
        _put3(lam[kind], j, _add(lam_j, corr[3]))


@numba.njit(cache=True)
def _gauss_seidel_pass(s, x, q, lam, record, tape, sub, it):
    m = len(s.order)
    for k in range(m):
        j = s.order[k]
        _gauss_seidel_apply(s, x, q, lam, _POS, j, 0.0, record, tape, sub, it, 2 * k)
        _gauss_seidel_apply(s, x, q, lam, _ANG, j, 0.0, record, tape, sub, it, 2 * k + 1)
    for k in range(m):
        j = s.order[k]
        active, bound = _violated_bound(s, j, _body(s, s.parent[j], x, q),
                                        _body(s, s.child[j], x, q))
        if record:
            tape.active[sub, it, k] = active
            tape.bound[sub, it, k] = bound
        if active:
            _gauss_seidel_apply(s, x, q, lam, _LIM, j, bound, record, tape, sub, it, 2 * m + k)


@numba.njit(cache=True)
def _taped_body(s, link, pose):
    return _body_at(s, link, (pose[0], pose[1], pose[2]), (pose[3], pose[4], pose[5], pose[6]))


@numba.njit(cache=True)
def _gauss_seidel_apply_vjp(s, wk, kind, j, bound, pose, lam_j):
    p, c = s.parent[j], s.child[j]
    bp, bc = _taped_body(s, p, pose[0]), _taped_body(s, c, pose[1])
    q_p = (pose[0, 3], pose[0, 4], pose[0, 5], pose[0, 6])
    q_c = (pose[1, 3], pose[1, 4], pose[1, 5], pose[1, 6])
    corr = _project(s, kind, j, bound, bp, bc, lam_j)
    _, dphi_p, _, dphi_c = _response(bp, bc, corr)
    g_dx_c, g_dphi_c = _move_vjp(wk, c, q_c, dphi_c)
    g_dx_p, g_dphi_p = _move_vjp(wk, p, q_p, dphi_p)
    g_corr, grad_p, grad_c = _response_vjp(bp, bc, corr, g_dx_p, g_dphi_p, g_dx_c, g_dphi_c)
    g_full = (g_corr[0], g_corr[1], g_corr[2], _multiplier(wk.g_lam, kind, j))
    more_p, more_c = _project_vjp(s, wk, kind, j, bound, bp, bc, lam_j, g_full)
    _add_body(s, wk, p, q_p, _body_grad_add(grad_p, more_p))
    _add_body(s, wk, c, q_c, _body_grad_add(grad_c, more_c))


@numba.njit(cache=True)
def _gauss_seidel_pass_vjp(s, wk, tape, sub, it):
    m = len(s.order)
    for k in range(m - 1, -1, -1):
        if tape.active[sub, it, k]:
            _gauss_seidel_apply_vjp(s, wk, _LIM, s.order[k], tape.bound[sub, it, k],
                                    tape.pose[sub, it, 2 * m + k], _ZERO3)
    for k in range(m - 1, -1, -1):
        j = s.order[k]
        for kind in (_ANG, _POS):
            slot = 2 * k + kind
            _gauss_seidel_apply_vjp(s, wk, kind, j, 0.0, tape.pose[sub, it, slot],
                                    _row3(tape.lam[sub, it], slot))


@numba.njit(cache=True)
def _jacobi_active(s, wk, x, q):
    """Marks the pass's violated limits in wk.active/bound and counts the constraints on
    each link in wk.count."""
    wk.count[:] = 0.0
    for k in range(len(s.order)):
        j = s.order[k]
        p, c = s.parent[j], s.child[j]
        active, bound = _violated_bound(s, j, _body(s, p, x, q), _body(s, c, x, q))
        wk.active[k] = active
        wk.bound[k] = bound
        touching = 3.0 if active else 2.0
        wk.count[c] += touching
        if p >= 0:
            wk.count[p] += touching


@numba.njit(cache=True)
def _jacobi_scale(s, wk, j):
    p = s.parent[j]
    return 1.0 / max(wk.count[s.child[j]], wk.count[p] if p >= 0 else 0.0)


@numba.njit(cache=True)
def _scaled(factor, corr):
    return (_mul(factor, corr[0]), _mul(factor, corr[1]), _mul(factor, corr[2]),
            _mul(factor, corr[3]))


@numba.njit(cache=True)
def _jacobi_pass(s, wk, x, q, lam, record, tape, sub, it):
    if record:
        tape.pass_x[sub, it] = x
        tape.pass_q[sub, it] = q
        tape.pass_lam[sub, it] = lam
    _jacobi_active(s, wk, x, q)
    wk.dx[:] = 0.0
    wk.dphi[:] = 0.0
    for k in range(len(s.order)):
        j = s.order[k]
        if record:
            tape.active[sub, it, k] = wk.active[k]
            tape.bound[sub, it, k] = wk.bound[k]
        p, c = s.parent[j], s.child[j]
        bp, bc = _body(s, p, x, q), _body(s, c, x, q)
        scale = _jacobi_scale(s, wk, j)
        for kind in (_POS, _ANG, _LIM):
            if kind == _LIM and not wk.active[k]:
                continue
            lam_j = _multiplier(lam, kind, j)
            corr = _scaled(scale, _project(s, kind, j, wk.bound[k], bp, bc, lam_j))
            dx_p, dphi_p, dx_c, dphi_c = _response(bp, bc, corr)
            _acc3(wk.dx, c, dx_c)
            _acc3(wk.dphi, c, dphi_c)
            if p >= 0:
                _acc3(wk.dx, p, dx_p)
                _acc3(wk.dphi, p, dphi_p)
            if kind != _LIM:  # read by no other constraint of this pass
                _put3(lam[kind], j, _add(lam_j, corr[3]))
    for i in range(len(x)):
        _move(x, q, i, _row3(wk.dx, i), _row3(wk.dphi, i))


@numba.njit(cache=True)
def _jacobi_pass_vjp(s, wk, tape, sub, it):
    x, q, lam = tape.pass_x[sub, it], tape.pass_q[sub, it], tape.pass_lam[sub, it]
    _jacobi_active(s, wk, x, q)
    m = len(s.order)
    wk.dphi[:] = 0.0
    for k in range(m):
        j = s.order[k]
        p, c = s.parent[j], s.child[j]
        bp, bc = _body(s, p, x, q), _body(s, c, x, q)
        scale = _jacobi_scale(s, wk, j)
        for kind in (_POS, _ANG, _LIM):
            if kind == _LIM and not wk.active[k]:
                continue
            corr = _scaled(scale, _project(s, kind, j, wk.bound[k], bp, bc,
                                           _multiplier(lam, kind, j)))
            for f in range(4):
                _put3(wk.corr[3 * k + kind], f, corr[f])
            _, dphi_p, _, dphi_c = _response(bp, bc, corr)
            _acc3(wk.dphi, c, dphi_c)
            if p >= 0:
                _acc3(wk.dphi, p, dphi_p)
    # every link moved: g_dx is g_x, g_dφ through the normalized update
    for i in range(len(x)):
        _, g_dphi = _move_vjp(wk, i, _row4(q, i), _row3(wk.dphi, i))
        _put3(wk.g_dphi, i, g_dphi)
    wk.body_grad[:] = 0.0
    for k in range(m):
        j = s.order[k]
        p, c = s.parent[j], s.child[j]
        bp, bc = _body(s, p, x, q), _body(s, c, x, q)
        scale = _jacobi_scale(s, wk, j)
        g_dx_p = _row3(wk.g_x, p) if p >= 0 else _ZERO3
        g_dphi_p = _row3(wk.g_dphi, p) if p >= 0 else _ZERO3
        for kind in (_POS, _ANG, _LIM):
            if kind == _LIM and not wk.active[k]:
                continue
            slot = wk.corr[3 * k + kind]
            corr = (_row3(slot, 0), _row3(slot, 1), _row3(slot, 2), _row3(slot, 3))
            g_corr, grad_p, grad_c = _response_vjp(bp, bc, corr, g_dx_p, g_dphi_p,
                                                   _row3(wk.g_x, c), _row3(wk.g_dphi, c))
            g_full = _scaled(scale, (g_corr[0], g_corr[1], g_corr[2],
                                     _multiplier(wk.g_lam, kind, j)))
            more_p, more_c = _project_vjp(s, wk, kind, j, wk.bound[k], bp, bc,
                                          _multiplier(lam, kind, j), g_full)
            _add_body_grad(wk.body_grad, c, _body_grad_add(grad_c, more_c))
            if p >= 0:
                _add_body_grad(wk.body_grad, p, _body_grad_add(grad_p, more_p))
    for i in range(len(x)):
        row = wk.body_grad[i]
        grad = ((row[0], row[1], row[2]),
                (row[3], row[4], row[5], row[6], row[7], row[8], row[9], row[10], row[11]),
                (row[12], row[13], row[14], row[15], row[16], row[17], row[18], row[19],
                 row[20]), row[21])
        _add_body(s, wk, i, _row4(q, i), grad)


@numba.njit(cache=True)
def _add_body_grad(rows, i, grad):
    for d in range(3):
        rows[i, d] += grad[0][d]
    for d in range(9):
        rows[i, 3 + d] += grad[1][d]
        rows[i, 12 + d] += grad[2][d]
    rows[i, 21] += grad[3]


# -- velocity-level terms ------------------------------------------------------------------


@numba.njit(cache=True)
def _velocity_of(v, link):
    return _row3(v, link) if link >= 0 else _ZERO3


@numba.njit(cache=True)
def _joint_impulse(s, j, bp, bc, v_p, w_p, v_c, w_c):
    """(lin, ang_c, ang_p, weight, rate, denominator, damped_rate, sliding, impulse) of
    joint j's implicit damping and Coulomb friction (step._joint_impulse)."""
    lin, ang_c, ang_p, weight = _joint_mass(s, j, bp, bc)
    rate = _dot(lin, _sub(v_c, v_p)) + _dot(ang_c, w_c) - _dot(ang_p, w_p)
    bh = s.damping[j] * s.h
    denominator = 1.0 + bh * weight
    impulse = -bh * rate / denominator
    damped_rate = rate / denominator
    target = -damped_rate / weight
    cap = s.friction[j] * s.h
    sliding = abs(target) >= cap
    impulse += min(max(target, -cap), cap)
    return lin, ang_c, ang_p, weight, rate, denominator, damped_rate, sliding, impulse


@numba.njit(cache=True)
def _joint_velocity_terms(s, x, q, v, w, record, tape, sub):
    for k in range(len(s.order)):
        j = s.order[k]
        p, c = s.parent[j], s.child[j]
        v_p, w_p = _velocity_of(v, p), _velocity_of(w, p)
        v_c, w_c = _row3(v, c), _row3(w, c)
        if record:
            rows = tape.joint_v[sub, k]
            _put3(rows, 0, v_p)
            _put3(rows, 1, w_p)
            _put3(rows, 2, v_c)
            _put3(rows, 3, w_c)
        bp, bc = _body(s, p, x, q), _body(s, c, x, q)
        lin, ang_c, ang_p, _, _, _, _, _, impulse = _joint_impulse(s, j, bp, bc, v_p, w_p, v_c,
                                                                   w_c)
        corr = (_mul(impulse, lin), _mul(impulse, ang_c), _mul(impulse, ang_p), _ZERO3)
        dv_p, dw_p, dv_c, dw_c = _response(bp, bc, corr)
        _acc3(v, c, dv_c)
        _acc3(w, c, dw_c)
        if p >= 0:
            _acc3(v, p, dv_p)
            _acc3(w, p, dw_p)


@numba.njit(cache=True)
def _joint_velocity_vjp(s, wk, tape, sub, k):
    j = s.order[k]
    p, c = s.parent[j], s.child[j]
    x, q, rows = tape.x0[sub], tape.q0[sub], tape.joint_v[sub, k]
    v_p, w_p, v_c, w_c = _row3(rows, 0), _row3(rows, 1), _row3(rows, 2), _row3(rows, 3)
    bp, bc = _body(s, p, x, q), _body(s, c, x, q)
    lin, ang_c, ang_p, weight, rate, den, damped_rate, sliding, impulse = _joint_impulse(
        s, j, bp, bc, v_p, w_p, v_c, w_c)
    corr = (_mul(impulse, lin), _mul(impulse, ang_c), _mul(impulse, ang_p), _ZERO3)
    g_corr, grad_p, grad_c = _response_vjp(bp, bc, corr, _velocity_of(wk.g_v, p),
                                           _velocity_of(wk.g_w, p), _row3(wk.g_v, c),
                                           _row3(wk.g_w, c))
    g_impulse = _dot(lin, g_corr[0]) + _dot(ang_c, g_corr[1]) + _dot(ang_p, g_corr[2])
    g_lin = _mul(impulse, g_corr[0])
    g_ang_c = _mul(impulse, g_corr[1])
    g_ang_p = _mul(impulse, g_corr[2])
    g_weight = 0.0
    g_damped = 0.0
    if not sliding:
        g_damped = -g_impulse / weight
        g_weight += g_impulse * damped_rate / weight**2
    h, b = s.h, s.damping[j]
    den2 = den**2
    g_rate = -b * h * g_impulse / den + g_damped / den
    wk.g_damping[j] += -h * rate * g_impulse / den2 - rate * h * weight * g_damped / den2
    g_weight += (b * h) ** 2 * rate * g_impulse / den2 - rate * b * h * g_damped / den2
    g_lin = _add(g_lin, _mul(g_rate, _sub(v_c, v_p)))
    g_ang_c = _add(g_ang_c, _mul(g_rate, w_c))
    g_ang_p = _sub(g_ang_p, _mul(g_rate, w_p))
    _acc3(wk.g_v, c, _mul(g_rate, lin))
    _acc3(wk.g_w, c, _mul(g_rate, ang_c))
    if p >= 0:
        _acc3(wk.g_v, p, _mul(-g_rate, lin))
        _acc3(wk.g_w, p, _mul(-g_rate, ang_p))
    more_p, more_c, g_child_x = _joint_mass_vjp(s, j, bp, bc, g_lin, g_ang_c, g_ang_p,
                                                g_weight)
    _acc3(wk.g_child_x, j, g_child_x)
    if p >= 0:
        _add_body(s, wk, p, _row4(q, p), _body_grad_add(grad_p, more_p))
    _add_body(s, wk, c, _row4(q, c), _body_grad_add(grad_c, more_c))


# -- prediction (gravity, actuation, gyroscopic term) ------------------------------------------


@numba.njit(cache=True)
def _pose_of(x, q, link):
    """(x, rotation matrix) of a link, the world's for -1."""
    if link < 0:
        return _ZERO3, _EYE
    return _row3(x, link), _quat_matrix(_row4(q, link))


@numba.njit(cache=True)
def _forces(s, wk, x, q, action):
    """Actuation forces and torques on the links into wk.force, wk.torque."""
    wk.force[:] = 0.0
    wk.torque[:] = 0.0
    for j in range(len(action)):
        p, c = s.parent[j], s.child[j]
        x_p, r_p = _pose_of(x, q, p)
        x_c, r_c = _pose_of(x, q, c)
        lin, ang_c, ang_p = _jacobian(s, j, x_p, r_p, x_c, r_c)
        _acc3(wk.force, c, _mul(action[j], lin))
        _acc3(wk.torque, c, _mul(action[j], ang_c))
        if p >= 0:
            _acc3(wk.force, p, _mul(-action[j], lin))
            _acc3(wk.torque, p, _mul(-action[j], ang_p))


@numba.njit(cache=True)
def _spin(s, i, r, w, torque):
    """(w_body, momentum, torque_body, w_body_new) of link i's gyroscopic update."""
    w_body = _mtv(r, w)
    torque_body = _mtv(r, torque)
    momentum = _mv(_row9(s.inertia, i), w_body)
    rhs = _sub(torque_body, _cross(w_body, momentum))
    w_body_new = _add(w_body, _mul(s.h, _mv(_row9(s.inv_inertia, i), rhs)))
    return w_body, momentum, torque_body, w_body_new


@numba.njit(cache=True)
def _accelerate(s, wk, x, q, v, w, action, v_out, w_out):
    """Velocities after gravity, actuation and the gyroscopic term over one substep."""
    _forces(s, wk, x, q, action)
    gravity = (s.gravity[0], s.gravity[1], s.gravity[2])
    for i in range(len(x)):
        _put3(v_out, i, _add(_row3(v, i), _mul(s.h, _add(gravity, _mul(
            s.inv_mass[i], _row3(wk.force, i))))))
        r = _quat_matrix(_row4(q, i))
        _, _, _, w_body_new = _spin(s, i, r, _row3(w, i), _row3(wk.torque, i))
        _put3(w_out, i, _mv(r, w_body_new))


@numba.njit(cache=True)
def _accelerate_vjp(s, wk, x, q, w, action):
    """g_v, g_w of the predicted velocities -> of the substep's start; adds the
    positions', orientations', action's and parameters' cotangents."""
    _forces(s, wk, x, q, action)
    h = s.h
    n = len(x)
    g_matrix = wk.g_matrix
    g_matrix[:] = 0.0
    for i in range(n):
        r = _quat_matrix(_row4(q, i))
        w_i, torque = _row3(w, i), _row3(wk.torque, i)
        w_body, momentum, torque_body, w_body_new = _spin(s, i, r, w_i, torque)
        g_w_new = _row3(wk.g_w, i)
        g_wb_new = _mtv(r, g_w_new)
        g_r = _outer(g_w_new, w_body_new)
        rhs = _sub(torque_body, _cross(w_body, momentum))
        g_rhs = _mul(h, _mtv(_row9(s.inv_inertia, i), g_wb_new))
        _acc9(wk.g_inv_inertia, i, _mscale(h, _outer(g_wb_new, rhs)))
        g_wb = _add(g_wb_new, _cross(momentum, _neg(g_rhs)))
        g_momentum = _cross(_neg(g_rhs), w_body)
        _acc9(wk.g_inertia, i, _outer(g_momentum, w_body))
        g_wb = _add(g_wb, _mtv(_row9(s.inertia, i), g_momentum))
        _put3(wk.torque, i, _mv(r, g_rhs))  # now the torque's cotangent
        g_r = _madd(_madd(g_r, _outer(torque, g_rhs)), _outer(w_i, g_wb))
        _put3(wk.g_w, i, _mv(r, g_wb))
        _acc9(g_matrix, i, g_r)
        # the force's cotangent, h m⁻¹ g_v, replaces the force
        g_v = _row3(wk.g_v, i)
        wk.g_inv_mass[i] += h * _dot(g_v, _row3(wk.force, i))
        _put3(wk.force, i, _mul(h * s.inv_mass[i], g_v))
    for j in range(len(action)):
        p, c = s.parent[j], s.child[j]
        x_p, r_p = _pose_of(x, q, p)
        x_c, r_c = _pose_of(x, q, c)
        lin, ang_c, ang_p = _jacobian(s, j, x_p, r_p, x_c, r_c)
        g_f = _sub(_row3(wk.force, c), _velocity_of(wk.force, p))
        g_t_c = _row3(wk.torque, c)
        g_t_p = _velocity_of(wk.torque, p)
        wk.g_action[j] += _dot(lin, g_f) + _dot(ang_c, g_t_c) - _dot(ang_p, g_t_p)
        a = action[j]
        g_xp, g_rp, g_xc, g_rc, g_child_x = _jacobian_vjp(s, j, x_p, r_p, x_c, r_c,
                                                          _mul(a, g_f), _mul(a, g_t_c),
                                                          _mul(-a, g_t_p))
        _acc3(wk.g_child_x, j, g_child_x)
        _acc3(wk.g_x, c, g_xc)
        _acc9(g_matrix, c, g_rc)
        if p >= 0:
            _acc3(wk.g_x, p, g_xp)
            _acc9(g_matrix, p, g_rp)
    for i in range(n):
        _acc4(wk.g_q, i, _quat_matrix_vjp(_row4(q, i), _row9(g_matrix, i)))


# -- substeps and entry points ---------------------------------------------------------------


@numba.njit(cache=True)
def _system(model, params, h):
    (parent, child, order, prismatic, parent_axis, child_axis, parent_normal, child_normal,
     parent_rotation, child_rotation, lower, upper, limited, friction, gravity) = model
    mass, inertia, parent_x, child_x, damping, compliance = params
    n = len(mass)
    sym = np.empty((n, 3, 3))
    inv = np.empty((n, 3, 3))
    for i in range(n):
        for r in range(3):
            for c in range(3):
                sym[i, r, c] = 0.5 * (inertia[i, r, c] + inertia[i, c, r])
        inverse = _inverse(_row9(sym, i))
        for r in range(3):
            for c in range(3):
                inv[i, r, c] = inverse[3 * r + c]
    return _System(parent, child, order, prismatic, parent_axis, child_axis, parent_normal,
                   child_normal, parent_rotation, child_rotation, lower, upper, limited,
                   friction, gravity, 1.0 / mass, sym, inv, parent_x, child_x, damping,
                   compliance / (h * h), h)


@numba.njit(cache=True)
def _work(n, m, reverse):
    r = n if reverse else 0
    rm = m if reverse else 0
    return _Work(
        x0=np.empty((n, 3)), q0=np.empty((n, 4)), force=np.empty((n, 3)),
        torque=np.empty((n, 3)), lam=np.zeros((2, m, 3)), dx=np.empty((n, 3)),
        dphi=np.empty((n, 3)), count=np.empty(n), active=np.zeros(m, dtype=np.bool_),
        bound=np.empty(m), corr=np.empty((3 * rm, 4, 3)), body_grad=np.empty((r, 22)),
        g_dphi=np.empty((r, 3)), g_matrix=np.empty((r, 3, 3)),
        g_x=np.empty((r, 3)), g_q=np.empty((r, 4)), g_v=np.empty((r, 3)),
        g_w=np.empty((r, 3)), g_x0=np.empty((r, 3)), g_q0=np.empty((r, 4)),
        g_lam=np.zeros((2, rm, 3)), g_inv_mass=np.zeros(r), g_inertia=np.zeros((r, 3, 3)),
        g_inv_inertia=np.zeros((r, 3, 3)), g_parent_x=np.zeros((rm, 3)),
        g_child_x=np.zeros((rm, 3)), g_damping=np.zeros(rm), g_compliance=np.zeros(rm),
        g_action=np.zeros(rm))


@numba.njit(cache=True)
def _tape(n, m, substeps, iterations, jacobi, record):
    ss = substeps if record else 0
    gs = ss if not jacobi else 0
    jc = ss if jacobi else 0
    return _Tape(
        x0=np.empty((ss, n, 3)), q0=np.empty((ss, n, 4)), v0=np.empty((ss, n, 3)),
        w0=np.empty((ss, n, 3)), v_pred=np.empty((ss, n, 3)), w_pred=np.empty((ss, n, 3)),
        q_end=np.empty((ss, n, 4)), joint_v=np.empty((ss, m, 4, 3)),
        pose=np.empty((gs, iterations, 3 * m, 2, 7)), lam=np.empty((gs, iterations, 3 * m, 3)),
        pass_x=np.empty((jc, iterations, n, 3)), pass_q=np.empty((jc, iterations, n, 4)),
        pass_lam=np.empty((jc, iterations, 2, m, 3)),
        active=np.zeros((ss, iterations, m), dtype=np.bool_),
        bound=np.zeros((ss, iterations, m)))


@numba.njit(cache=True)
def _start(q_in, x, q):
    """Copies the unit orientations of ``q_in`` into q; returns the first link whose
    orientation has no direction (norm 0 or NaN), or -1."""
    for i in range(len(x)):
        raw = _row4(q_in, i)
        norm2 = raw[0] * raw[0] + raw[1] * raw[1] + raw[2] * raw[2] + raw[3] * raw[3]
        if not norm2 > 0.0:
            return i
        _put4(q, i, _quat_normalize(raw))
    return -1


@numba.njit(cache=True)
def _substep(s, wk, x, q, v, w, action, iterations, jacobi, record, tape, sub):
    """One substep in place on x, q, v, w (n, 3|4)."""
    h = s.h
    if record:
        tape.x0[sub] = x
        tape.q0[sub] = q
        tape.v0[sub] = v
        tape.w0[sub] = w
    wk.x0[:] = x
    wk.q0[:] = q
    # the predicted velocities replace v, w (row by row, each read before it is written)
    _accelerate(s, wk, wk.x0, wk.q0, v, w, action, v, w)
    _joint_velocity_terms(s, wk.x0, wk.q0, v, w, record, tape, sub)
    if record:
        tape.v_pred[sub] = v
        tape.w_pred[sub] = w
    for i in range(len(x)):
        _put3(x, i, _add(_row3(wk.x0, i), _mul(h, _row3(v, i))))
        _put4(q, i, _quat_normalize(_quat_integrate(_row4(wk.q0, i), _mul(h, _row3(w, i)))))
    wk.lam[:] = 0.0
    for it in range(iterations):
        if jacobi:
            _jacobi_pass(s, wk, x, q, wk.lam, record, tape, sub, it)
        else:
            _gauss_seidel_pass(s, x, q, wk.lam, record, tape, sub, it)
    if record:
        tape.q_end[sub] = q
    for i in range(len(x)):
        _put3(v, i, _over(_sub(_row3(x, i), _row3(wk.x0, i)), h))
        delta = _quat_multiply(_row4(q, i), _conjugate(_row4(wk.q0, i)))
        _put3(w, i, _mul((2.0 / h) * math.copysign(1.0, delta[0]), (delta[1], delta[2],
                                                                      delta[3])))


@numba.njit(cache=True)
def _conjugate(q):
    return (q[0], -q[1], -q[2], -q[3])


@numba.njit(cache=True)
def _substep_vjp(s, wk, tape, sub, action, iterations, jacobi):
    """The cotangents in wk.g_* of the substep's end state -> of its start state."""
    h = s.h
    n = len(wk.g_x)
    wk.g_lam[:] = 0.0
    for i in range(n):
        g_v = _row3(wk.g_v, i)
        _put3(wk.g_x0, i, _over(_neg(g_v), h))
        _acc3(wk.g_x, i, _over(g_v, h))
        conj = _conjugate(_row4(tape.q0[sub], i))
        q_end = _row4(tape.q_end[sub], i)
        delta = _quat_multiply(q_end, conj)
        g_u = _mul((2.0 / h) * math.copysign(1.0, delta[0]), _row3(wk.g_w, i))
        g_q, g_conj = _quat_multiply_vjp(q_end, conj, (0.0, g_u[0], g_u[1], g_u[2]))
        _acc4(wk.g_q, i, g_q)
        _put4(wk.g_q0, i, _conjugate(g_conj))
    wk.g_v[:] = 0.0
    wk.g_w[:] = 0.0
    for it in range(iterations - 1, -1, -1):
        if jacobi:
            _jacobi_pass_vjp(s, wk, tape, sub, it)
        else:
            _gauss_seidel_pass_vjp(s, wk, tape, sub, it)
    # the prediction x + h v, normalize(q + ½ h (0, ω) ⊗ q)
    for i in range(n):
        q0 = _row4(tape.q0[sub], i)
        dphi = _mul(h, _row3(tape.w_pred[sub], i))
        g_raw = _quat_normalize_vjp(_quat_integrate(q0, dphi), _row4(wk.g_q, i))
        g_q, g_dphi = _quat_integrate_vjp(q0, dphi, g_raw)
        _put4(wk.g_q, i, g_q)
        _put3(wk.g_w, i, _mul(h, g_dphi))
        _put3(wk.g_v, i, _mul(h, _row3(wk.g_x, i)))
    for k in range(len(s.order) - 1, -1, -1):
        _joint_velocity_vjp(s, wk, tape, sub, k)
    _accelerate_vjp(s, wk, tape.x0[sub], tape.q0[sub], tape.w0[sub], action)
    for i in range(n):
        _acc3(wk.g_x, i, _row3(wk.g_x0, i))
        _acc4(wk.g_q, i, _row4(wk.g_q0, i))


@numba.njit(cache=True)
def _forward(s, wk, x_in, q_in, v_in, w_in, action, substeps, iterations, jacobi, tape,
             record):
    n = len(x_in)
    x, q, v, w = x_in.copy(), np.empty((n, 4)), v_in.copy(), w_in.copy()
    bad = _start(q_in, x, q)
    if bad >= 0:
        return x, q, v, w, bad
    for sub in range(substeps):
        _substep(s, wk, x, q, v, w, action, iterations, jacobi, record, tape, sub)
    return x, q, v, w, -1


@numba.njit(cache=True)
def step(model, params, x, q, v, w, action, h, substeps, iterations, jacobi):
    """The state after ``substeps`` substeps of length h [s] (see :mod:`sim_pbd.step`):
    (x (n, 3), q (n, 4), v, w (n, 3), bad), bad the first link whose orientation cannot be
    normalized (the state then is not stepped) or -1. ``model`` and ``params`` are
    :class:`ModelArrays` and :class:`Params` as plain tuples; ``jacobi`` picks the solver."""
    s = _system(model, params, h)
    n, m = len(x), len(action)
    wk = _work(n, m, False)
    tape = _tape(n, m, substeps, iterations, jacobi, False)
    return _forward(s, wk, x, q, v, w, action, substeps, iterations, jacobi, tape, False)


@numba.njit(cache=True)
def step_vjp(model, params, x, q, v, w, action, h, substeps, iterations, jacobi, g_x, g_q,
             g_v, g_w):
    """The cotangents of the step's inputs given those of its output state ``g_*``:
    (g_x, g_q, g_v, g_w, g_action, g_mass, g_inertia, g_parent_x, g_child_x, g_damping,
    g_compliance, bad), g_inertia symmetric, bad as in :func:`step`."""
    s = _system(model, params, h)
    n, m = len(x), len(action)
    wk = _work(n, m, True)
    tape = _tape(n, m, substeps, iterations, jacobi, True)
    _, _, _, _, bad = _forward(s, wk, x, q, v, w, action, substeps, iterations, jacobi, tape,
                               True)
    wk.g_x[:] = g_x
    wk.g_q[:] = g_q
    wk.g_v[:] = g_v
    wk.g_w[:] = g_w
    if bad < 0:
        for sub in range(substeps - 1, -1, -1):
            _substep_vjp(s, wk, tape, sub, action, iterations, jacobi)
    g_q_in = np.empty((n, 4))
    for i in range(n):
        _put4(g_q_in, i, _quat_normalize_vjp(_row4(q, i), _row4(wk.g_q, i)) if bad < 0
              else (0.0, 0.0, 0.0, 0.0))
    mass = params[0]
    g_mass = -wk.g_inv_mass / mass**2
    g_inertia = np.empty((n, 3, 3))
    for i in range(n):
        inv = _row9(s.inv_inertia, i)
        total = _msub(_row9(wk.g_inertia, i),
                      _mm(_mm(_mt(inv), _row9(wk.g_inv_inertia, i)), _mt(inv)))
        total = _mscale(0.5, _madd(total, _mt(total)))
        for r in range(3):
            for c in range(3):
                g_inertia[i, r, c] = total[3 * r + c]
    return (wk.g_x, g_q_in, wk.g_v, wk.g_w, wk.g_action, g_mass, g_inertia, wk.g_parent_x,
            wk.g_child_x, wk.g_damping, wk.g_compliance / (h * h), bad)
