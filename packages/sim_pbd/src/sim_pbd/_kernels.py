"""Compiled (numba) XPBD step of an articulated robot and its adjoint, equal to the NumPy
reference in :mod:`sim_pbd.step` (and :mod:`.constraints`, :mod:`.kinematics`,
:mod:`.rotations`, whose formulas these transcribe) to round-off.

One call runs a whole step: every substep, iteration and constraint, in either scheme
(``second``: step.py's ``scheme="second_order"``, else "first_order"). :func:`step_vjp`
replays the forward pass recording a tape (:class:`_Tape`, flat arrays sized from the
model: each substep's start state, predicted velocities and end orientations; the links'
velocities before each joint's damping and friction; the two links' poses and the
multiplier before each Gauss-Seidel projection, or the state and multipliers at the start of
each Jacobi pass; in the second order also the start velocities, the poses and damper
multiplier μ before each damper projection, the states the two half kicks act at, and the
links' velocities before each closing velocity projection), then runs the local adjoints in
reverse, recomputing each projection from its taped inputs.

The second order projects along the substep's start bodies, which stay fixed over its
iterations: each substep first builds a directions table (:class:`_Directions`, one row per
joint: the block maps N = -M⁻¹P with Δλ = N e of the positional and angular blocks, the
turn maps A [lever]× and A, the rate Jacobian and its inverse mass for the limit and the
damper, the start's joint angle and rate), so a projection reads only the current poses'
positions and rotations (:func:`_frame`: no inverse inertias, effective masses or inverses)
and applies a few matrix-vector products (:func:`_shake`, :func:`_damper`). The reverse
accumulates the cotangents of the table's entries over the substep's iterations (a
cotangent table of the same layout: Σ g_Δλ eᵀ for N, Σ g_Δφ Δλᵀ for the turn maps, ...) and
maps them to the start state and the parameters once per substep
(:func:`_directions_table_vjp`); the damper's start rate sends its share to the start
velocities.

The second order's closing half kick ends with ``iterations`` Gauss-Seidel passes of the
joints' velocity constraints (RATTLE's velocity stage, :func:`_velocity_passes`): per joint
in tree order the positional block on the relative velocity of the joint's origins, then the
angular block on ω_c - ω_p, both through the end poses' bodies (no compliance), applied at
once as velocity changes with :func:`_response`. The poses do not move over these passes, so
their reverse (:func:`_velocity_passes_vjp`) sums the bodies' cotangents over every pass and
sends them to the end poses and the parameters once; it reads the velocities taped before
each projection (an (I, 2m, 4, 3) array, 24 I m floats; recovering them by replay would
redo the stage's earlier projections for each one).

Layout, for speed: the per-constraint code is pure functions of scalar records (a joint's
constants as a :class:`_Joint`, links as :class:`_Body`, 3-vectors as tuples of three
floats, 3×3 matrices as row-major tuples of nine, quaternions (w, x, y, z) as tuples of
four), which live in registers. Arrays are read and written only by the loop functions,
called once per substep, and each gets only the arrays it uses: numba counts references
to every array a call receives (records of arrays included), an atomic operation that cost
more than the arithmetic when the first version passed records of arrays to every
projection. The model's and the parameters' constants are packed into one joint table and
one link table per call (``_J_*``, ``_L_*`` columns); cotangents of the parameters
accumulate in tables of the same kind.

The entry points take :class:`ModelArrays` and :class:`Params` as plain tuples (numba types
a named tuple by its field names on every call; a plain tuple costs as little as separate
arguments).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

from .constraints import MAX_DAMPING_PER_SUBSTEP

__all__ = ["ModelArrays", "Params", "step", "step_vjp"]

_POS, _ANG, _LIM = 0, 1, 2
_ZERO3 = (0.0, 0.0, 0.0)
_ZERO9 = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
_EYE = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)

# columns of the joint table (m, _JOINT_WIDTH): indices, flags, limits, friction, damping,
# compliance α/h², axes and normals (3), frame rotations (9), origins (3)
(_J_PARENT, _J_CHILD, _J_PRISMATIC, _J_LIMITED, _J_LOWER, _J_UPPER, _J_FRICTION, _J_DAMPING,
 _J_COMPLIANCE) = range(9)
_J_PARENT_AXIS, _J_CHILD_AXIS, _J_PARENT_NORMAL, _J_CHILD_NORMAL = 9, 12, 15, 18
_J_PARENT_ROTATION, _J_CHILD_ROTATION, _J_PARENT_X, _J_CHILD_X = 21, 30, 39, 42
_JOINT_WIDTH = 45
# columns of the link table (n, _LINK_WIDTH) and of its cotangent table: inverse mass,
# inverse inertia (9), inertia (9, the symmetric part)
_L_INV_MASS, _L_INV_INERTIA, _L_INERTIA, _LINK_WIDTH = 0, 1, 10, 19
# columns of the joints' cotangent table (m, _JOINT_GRAD_WIDTH)
_G_PARENT_X, _G_CHILD_X, _G_COMPLIANCE, _G_DAMPING, _JOINT_GRAD_WIDTH = 0, 3, 6, 7, 8


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


class _Joint(NamedTuple):
    """One joint's constants (a row of the joint table)."""

    parent: int
    child: int
    prismatic: bool
    limited: bool
    lower: float
    upper: float
    friction: float
    damping: float
    compliance: float  # α / h²
    parent_axis: tuple
    child_axis: tuple
    parent_normal: tuple
    child_normal: tuple
    parent_rotation: tuple
    child_rotation: tuple
    parent_x: tuple
    child_x: tuple


class _Body(NamedTuple):
    """A link as a projection reads it: centre of mass, rotation, world inverse inertia
    r I⁻¹ rᵀ, inverse mass (constraints.Body). The world is (0, 1, 0, 0)."""

    x: tuple
    r: tuple
    a: tuple
    inv_mass: float


class _BodyGrad(NamedTuple):
    x: tuple
    r: tuple
    a: tuple
    inv_mass: float


class _Correction(NamedTuple):
    """Impulse p, τ_c, τ_p and multiplier increment Δλ (constraints.Correction)."""

    p: tuple
    tau_c: tuple
    tau_p: tuple
    dlam: tuple


class _Tape(NamedTuple):
    """What the reverse sweep reads, by substep s, iteration i, tree position k (the k-th
    joint of ``order``) and link; the solver not used has arrays of size zero, and a forward
    step without a VJP records nothing (one substep of scratch)."""

    x0: np.ndarray  # (S, n, 3) substep start
    q0: np.ndarray  # (S, n, 4)
    w0: np.ndarray  # (S, n, 3)
    w_pred: np.ndarray  # (S, n, 3) after damping and friction
    q_end: np.ndarray  # (S, n, 4) after the projections
    joint_v: np.ndarray  # (S, m, 4, 3) v_p, w_p, v_c, w_c before joint k's damping
    pose: np.ndarray  # (S, I, 3m, 2, 7) Gauss-Seidel: (x, q) of parent and child before
    lam: np.ndarray  # (S, I, 3m, 3) Gauss-Seidel: the multiplier before
    pass_x: np.ndarray  # (S, I, n, 3) Jacobi: pass start
    pass_q: np.ndarray  # (S, I, n, 4)
    pass_lam: np.ndarray  # (S, I, 2m, 3)
    active: np.ndarray  # (S, I, m) bool: joint k's limit projected
    bound: np.ndarray  # (S, I, m) the violated limit
    # the second order's (inner sizes zero in the first order)
    v0: np.ndarray  # (S, n, 3) substep start
    damper_pose: np.ndarray  # (S, I, m, 2, 7) (x, q) of parent and child before damper k
    damper_mu: np.ndarray  # (S, I, m) its multiplier before
    kick_x: np.ndarray  # (2, n, 3) where the half kicks before and after the substeps act
    kick_q: np.ndarray  # (2, n, 4)
    kick_w: np.ndarray  # (2, n, 3) the angular velocities before them
    velocity_v: np.ndarray  # (I, 2m, 4, 3) v_p, w_p, v_c, w_c before each closing velocity
    # projection (pass i, slot 2k + kind)


class _Work(NamedTuple):
    """Scratch of one call, and the reverse sweep's cotangent accumulators (g_*); the
    latter have size zero in a forward step."""

    x0: np.ndarray  # (n, 3)
    q0: np.ndarray  # (n, 4)
    force: np.ndarray  # (n, 3)
    torque: np.ndarray  # (n, 3)
    lam: np.ndarray  # (2m, 3) row kind·m + j
    dx: np.ndarray  # (n, 3) Jacobi sums
    dphi: np.ndarray  # (n, 3)
    count: np.ndarray  # (n,) Jacobi: constraints on each link
    active: np.ndarray  # (m,) bool
    bound: np.ndarray  # (m,)
    corr: np.ndarray  # (3m, 4, 3) Jacobi corrections in the reverse sweep
    body_grad: np.ndarray  # (n, 22) Jacobi and the closing velocity passes: x, r, a,
    # inv_mass cotangents per link
    g_dphi: np.ndarray  # (n, 3) Jacobi: the turns' cotangents
    g_matrix: np.ndarray  # (n, 3, 3) the rotation matrices' cotangents in the prediction
    g_x: np.ndarray  # (n, 3)
    g_q: np.ndarray  # (n, 4)
    g_v: np.ndarray  # (n, 3)
    g_w: np.ndarray  # (n, 3)
    g_x0: np.ndarray  # (n, 3)
    g_q0: np.ndarray  # (n, 4)
    g_lam: np.ndarray  # (2m, 3)
    g_links: np.ndarray  # (n, _LINK_WIDTH)
    g_joints: np.ndarray  # (m, _JOINT_GRAD_WIDTH)
    g_action: np.ndarray  # (m,)
    # the second order's
    table: np.ndarray  # (m, _DIRECTIONS_WIDTH) the substep's directions
    mu: np.ndarray  # (m,) the dampers' multipliers
    g_table: np.ndarray  # (m, _DIRECTIONS_WIDTH) the directions' cotangents
    g_mu: np.ndarray  # (m,)
    g_v0: np.ndarray  # (n, 3) the start velocities' cotangents through the dampers' rates
    g_w0: np.ndarray  # (n, 3)


# -- 3-vectors, 3×3 matrices, quaternions ---------------------------------------------------


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
def _acc_joint(a, b, p, c, a_p, b_p, a_c, b_c):
    """A joint's pair of 3-vectors added to its links' rows: (a_c, b_c) to rows ``c`` of
    ``a`` and ``b``, (a_p, b_p) to rows ``p`` unless the parent is the world (p < 0)."""
    _acc3(a, c, a_c)
    _acc3(b, c, b_c)
    if p >= 0:
        _acc3(a, p, a_p)
        _acc3(b, p, b_p)


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


@numba.njit(cache=True)
def _vec3(a, i, k):
    """Columns k..k+2 of row i."""
    return (a[i, k], a[i, k + 1], a[i, k + 2])


@numba.njit(cache=True)
def _vec9(a, i, k):
    return (a[i, k], a[i, k + 1], a[i, k + 2], a[i, k + 3], a[i, k + 4], a[i, k + 5],
            a[i, k + 6], a[i, k + 7], a[i, k + 8])


@numba.njit(cache=True)
def _add_to(a, i, k, v):
    """Row i, columns k.. += v (a tuple)."""
    for d in range(len(v)):
        a[i, k + d] += v[d]


@numba.njit(cache=True)
def _conjugate(q):
    return (q[0], -q[1], -q[2], -q[3])


# -- records --------------------------------------------------------------------------------


@numba.njit(cache=True)
def _joint(joints, j):
    """Joint j's constants from the joint table."""
    return _Joint(int(joints[j, _J_PARENT]), int(joints[j, _J_CHILD]),
                  joints[j, _J_PRISMATIC] != 0.0, joints[j, _J_LIMITED] != 0.0,
                  joints[j, _J_LOWER], joints[j, _J_UPPER], joints[j, _J_FRICTION],
                  joints[j, _J_DAMPING], joints[j, _J_COMPLIANCE],
                  _vec3(joints, j, _J_PARENT_AXIS), _vec3(joints, j, _J_CHILD_AXIS),
                  _vec3(joints, j, _J_PARENT_NORMAL), _vec3(joints, j, _J_CHILD_NORMAL),
                  _vec9(joints, j, _J_PARENT_ROTATION), _vec9(joints, j, _J_CHILD_ROTATION),
                  _vec3(joints, j, _J_PARENT_X), _vec3(joints, j, _J_CHILD_X))


@numba.njit(cache=True)
def _link(links, x, q, link):
    """(x, q, inverse inertia, inverse mass) of a link, the world's for -1."""
    if link < 0:
        return _ZERO3, (1.0, 0.0, 0.0, 0.0), _ZERO9, 0.0
    return (_row3(x, link), _row4(q, link), _vec9(links, link, _L_INV_INERTIA),
            links[link, _L_INV_MASS])


@numba.njit(cache=True)
def _body(link):
    """The :class:`_Body` of a link read by :func:`_link`."""
    x, q, inv_inertia, inv_mass = link
    if inv_mass == 0.0:  # the world (every link has a positive mass)
        return _Body(x, _EYE, _ZERO9, 0.0)
    r = _quat_matrix(q)
    return _Body(x, r, _mm(_mm(r, inv_inertia), _mt(r)), inv_mass)


@numba.njit(cache=True)
def _body_grad_add(a, b):
    return _BodyGrad(_add(a.x, b.x), _madd(a.r, b.r), _madd(a.a, b.a), a.inv_mass + b.inv_mass)


@numba.njit(cache=True)
def _body_cotangent(q, inv_inertia, grad):
    """(g_x, g_q, g_inverse_inertia, g_inverse_mass) of a link from its body's cotangent."""
    r = _quat_matrix(q)
    g_r = _madd(_madd(grad.r, _mm(_mm(grad.a, r), _mt(inv_inertia))),
                _mm(_mm(_mt(grad.a), r), inv_inertia))
    return grad.x, _quat_matrix_vjp(q, g_r), _mm(_mm(_mt(r), grad.a), r), grad.inv_mass


@numba.njit(cache=True)
def _add_body_cotangent(g_x, g_q, g_links, link, cotangent):
    if link >= 0:
        g_xi, g_qi, g_inv_inertia, g_inv_mass = cotangent
        _acc3(g_x, link, g_xi)
        _acc4(g_q, link, g_qi)
        _add_to(g_links, link, _L_INV_INERTIA, g_inv_inertia)
        g_links[link, _L_INV_MASS] += g_inv_mass


@numba.njit(cache=True)
def _response(bp, bc, corr):
    """(Δx_p, Δφ_p, Δx_c, Δφ_c) of a correction."""
    return (_mul(-bp.inv_mass, corr.p), _neg(_mv(bp.a, corr.tau_p)), _mul(bc.inv_mass, corr.p),
            _mv(bc.a, corr.tau_c))


@numba.njit(cache=True)
def _response_vjp(bp, bc, corr, g_dx_p, g_dphi_p, g_dx_c, g_dphi_c):
    """(g_p, g_τ_c, g_τ_p) of the correction, body gradients of parent and child."""
    g_corr = (_sub(_mul(bc.inv_mass, g_dx_c), _mul(bp.inv_mass, g_dx_p)), _mtv(bc.a, g_dphi_c),
              _neg(_mtv(bp.a, g_dphi_p)))
    grad_p = _BodyGrad(_ZERO3, _ZERO9, _mscale(-1.0, _outer(g_dphi_p, corr.tau_p)),
                       -_dot(g_dx_p, corr.p))
    grad_c = _BodyGrad(_ZERO3, _ZERO9, _outer(g_dphi_c, corr.tau_c), _dot(g_dx_c, corr.p))
    return g_corr, grad_p, grad_c


@numba.njit(cache=True)
def _moved(x, q, dx, dphi):
    """A link's pose after a move Δx and turn Δφ."""
    return _add(x, dx), _quat_normalize(_quat_integrate(q, dphi))


@numba.njit(cache=True)
def _moved_vjp(q, dphi, g_q):
    """(g_q, g_Δφ) of :func:`_moved` (x passes its cotangent to x and Δx unchanged)."""
    return _quat_integrate_vjp(q, dphi, _quat_normalize_vjp(_quat_integrate(q, dphi), g_q))


# -- joint kinematics -------------------------------------------------------------------------


@numba.njit(cache=True)
def _jacobian(jd, x_p, r_p, x_c, r_c):
    """(lin, ang_c, ang_p): the joint's rate Jacobian (kinematics.joint_jacobian)."""
    axis = _mv(r_p, jd.parent_axis)
    if not jd.prismatic:
        return _ZERO3, axis, axis
    lever_c = _mv(r_c, jd.child_x)
    lever_p = _sub(_add(x_c, lever_c), x_p)
    return axis, _cross(lever_c, axis), _cross(lever_p, axis)


@numba.njit(cache=True)
def _jacobian_vjp(jd, x_p, r_p, x_c, r_c, g_lin, g_ang_c, g_ang_p):
    """Cotangents (x_p, r_p, x_c, r_c, joint_child_x) of :func:`_jacobian`."""
    if not jd.prismatic:
        return _ZERO3, _outer(_add(g_ang_c, g_ang_p), jd.parent_axis), _ZERO3, _ZERO9, _ZERO3
    axis = _mv(r_p, jd.parent_axis)
    lever_c = _mv(r_c, jd.child_x)
    lever_p = _sub(_add(x_c, lever_c), x_p)
    g_axis = _add(_add(g_lin, _cross(g_ang_c, lever_c)), _cross(g_ang_p, lever_p))
    g_lever_p = _cross(axis, g_ang_p)
    g_lever_c = _add(_cross(axis, g_ang_c), g_lever_p)
    return (_neg(g_lever_p), _outer(g_axis, jd.parent_axis), g_lever_p,
            _outer(g_lever_c, jd.child_x), _mtv(r_c, g_lever_c))


@numba.njit(cache=True)
def _coordinate(jd, bp, bc):
    """The joint's position [rad or m] (kinematics.joint_coordinate)."""
    axis = _mv(bp.r, jd.parent_axis)
    if jd.prismatic:
        gap = _sub(_sub(_add(bc.x, _mv(bc.r, jd.child_x)), bp.x), _mv(bp.r, jd.parent_x))
        return _dot(axis, gap)
    e_p = _mv(bp.r, jd.parent_normal)
    e_c = _mv(bc.r, jd.child_normal)
    return math.atan2(_dot(axis, _cross(e_p, e_c)), _dot(e_p, e_c))


@numba.njit(cache=True)
def _coordinate_vjp(jd, bp, bc, g):
    """Cotangents (x_p, r_p, x_c, r_c, joint_parent_x, joint_child_x) of
    :func:`_coordinate`."""
    axis = _mv(bp.r, jd.parent_axis)
    if jd.prismatic:
        gap = _sub(_sub(_add(bc.x, _mv(bc.r, jd.child_x)), bp.x), _mv(bp.r, jd.parent_x))
        g_axis, g_gap = _mul(g, gap), _mul(g, axis)
        g_rp = _madd(_mscale(-1.0, _outer(g_gap, jd.parent_x)), _outer(g_axis, jd.parent_axis))
        return (_neg(g_gap), g_rp, g_gap, _outer(g_gap, jd.child_x), _neg(_mtv(bp.r, g_gap)),
                _mtv(bc.r, g_gap))
    e_p, e_c = _mv(bp.r, jd.parent_normal), _mv(bc.r, jd.child_normal)
    cross = _cross(e_p, e_c)
    sin, cos = _dot(axis, cross), _dot(e_p, e_c)
    scale = g / (sin * sin + cos * cos)
    g_sin, g_cos = scale * cos, -scale * sin
    g_axis, g_cross = _mul(g_sin, cross), _mul(g_sin, axis)
    g_rp = _madd(_outer(_add(_cross(e_c, g_cross), _mul(g_cos, e_c)), jd.parent_normal),
                 _outer(g_axis, jd.parent_axis))
    g_rc = _outer(_add(_cross(g_cross, e_p), _mul(g_cos, e_p)), jd.child_normal)
    return _ZERO3, g_rp, _ZERO3, g_rc, _ZERO3, _ZERO3


@numba.njit(cache=True)
def _joint_mass(jd, bp, bc):
    """(lin, ang_c, ang_p, w): the rate Jacobian and the generalized inverse mass along it
    (constraints.joint_mass)."""
    lin, ang_c, ang_p = _jacobian(jd, bp.x, bp.r, bc.x, bc.r)
    w = ((bc.inv_mass + bp.inv_mass) * _dot(lin, lin) + _dot(ang_c, _mv(bc.a, ang_c))
         + _dot(ang_p, _mv(bp.a, ang_p)))
    return lin, ang_c, ang_p, w


@numba.njit(cache=True)
def _joint_mass_vjp(jd, bp, bc, g_lin, g_ang_c, g_ang_p, g_w):
    """(body gradient of parent, of child, g_joint_child_x) of :func:`_joint_mass`."""
    lin, ang_c, ang_p = _jacobian(jd, bp.x, bp.r, bc.x, bc.r)
    fill = bc.inv_mass + bp.inv_mass
    g_lin = _add(g_lin, _mul(2.0 * g_w * fill, lin))
    g_ang_c = _add(g_ang_c, _mul(g_w, _mv(_madd(bc.a, _mt(bc.a)), ang_c)))
    g_ang_p = _add(g_ang_p, _mul(g_w, _mv(_madd(bp.a, _mt(bp.a)), ang_p)))
    g_x_p, g_r_p, g_x_c, g_r_c, g_child_x = _jacobian_vjp(jd, bp.x, bp.r, bc.x, bc.r, g_lin,
                                                         g_ang_c, g_ang_p)
    g_mass = g_w * _dot(lin, lin)
    return (_BodyGrad(g_x_p, g_r_p, _mscale(g_w, _outer(ang_p, ang_p)), g_mass),
            _BodyGrad(g_x_c, g_r_c, _mscale(g_w, _outer(ang_c, ang_c)), g_mass), g_child_x)


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
def _positional_parts(jd, bp, bc):
    lever_c = _mv(bc.r, jd.child_x)
    origin_c = _add(bc.x, lever_c)
    lever_pj = _mv(bp.r, jd.parent_x)
    gap = _sub(_sub(origin_c, bp.x), lever_pj)
    fill = bc.inv_mass + bp.inv_mass
    if jd.prismatic:
        axis = _mv(bp.r, jd.parent_axis)
        lever_p = _sub(origin_c, bp.x)
    else:
        axis = _ZERO3
        lever_p = lever_pj
    k = _madd(_madd(_mscale(fill, _EYE), _lever_term(lever_c, bc.a)), _lever_term(lever_p, bp.a))
    return lever_c, lever_p, gap, fill, axis, k


@numba.njit(cache=True)
def _positional(jd, bp, bc, lam):
    lever_c, lever_p, gap, fill, axis, k = _positional_parts(jd, bp, bc)
    dlam = _block(k, axis, jd.prismatic, fill, jd.compliance,
                  _add(gap, _mul(jd.compliance, lam)))
    return _Correction(dlam, _cross(lever_c, dlam), _cross(lever_p, dlam), dlam)


@numba.njit(cache=True)
def _positional_block_vjp(lever_c, lever_p, axis, has_axis, k, fill, compliance, e, g_corr):
    """(g_k, g_axis, g_compliance, g_e, g_lever_c, g_lever_p) of the positional block's
    correction (Δλ, lever_c × Δλ, lever_p × Δλ, Δλ), Δλ = :func:`_block` of e, given its
    cotangent (constraints._positional_block_vjp)."""
    dlam = _block(k, axis, has_axis, fill, compliance, e)
    g_dlam = _add(_add(_add(g_corr.p, g_corr.dlam), _cross(g_corr.tau_c, lever_c)),
                  _cross(g_corr.tau_p, lever_p))
    g_k, g_axis, g_compliance, g_e = _block_vjp(k, axis, has_axis, fill, compliance, e, g_dlam)
    return g_k, g_axis, g_compliance, g_e, _cross(dlam, g_corr.tau_c), _cross(dlam, g_corr.tau_p)


@numba.njit(cache=True)
def _positional_levers_vjp(jd, bp, bc, lever_c, lever_p, g_k, g_axis, g_lever_c, g_lever_p):
    """(body gradient of parent, of child, g_joint_parent_x, g_joint_child_x) of the
    positional block's levers, free axis and K (:func:`_positional_parts`, the inverse masses
    of K's fill included) given their cotangents (constraints._positional_direction_vjp)."""
    d_lever_c, g_a_c = _lever_term_vjp(lever_c, bc.a, g_k)
    d_lever_p, g_a_p = _lever_term_vjp(lever_p, bp.a, g_k)
    g_lever_c = _add(g_lever_c, d_lever_c)
    g_lever_p = _add(g_lever_p, d_lever_p)
    g_x_p, g_x_c, g_lever_pj, g_r_p = _ZERO3, _ZERO3, _ZERO3, _ZERO9
    if jd.prismatic:  # lever_p = x_c + lever_c - x_p, axis = R_p a
        g_x_c = g_lever_p
        g_lever_c = _add(g_lever_c, g_lever_p)
        g_x_p = _neg(g_lever_p)
        g_r_p = _outer(g_axis, jd.parent_axis)
    else:
        g_lever_pj = g_lever_p
    g_r_p = _madd(g_r_p, _outer(g_lever_pj, jd.parent_x))
    g_fill = _trace(g_k)
    return (_BodyGrad(g_x_p, g_r_p, g_a_p, g_fill),
            _BodyGrad(g_x_c, _outer(g_lever_c, jd.child_x), g_a_c, g_fill),
            _mtv(bp.r, g_lever_pj), _mtv(bc.r, g_lever_c))


@numba.njit(cache=True)
def _positional_vjp(jd, bp, bc, lam, g_corr):
    """(body gradient of parent, of child, g_joint_parent_x, g_joint_child_x,
    g_compliance, g_lam) of :func:`_positional` (constraints.positional_vjp)."""
    lever_c, lever_p, gap, fill, axis, k = _positional_parts(jd, bp, bc)
    compliance = jd.compliance
    e = _add(gap, _mul(compliance, lam))
    g_k, g_axis, g_compliance, g_e, g_lever_c, g_lever_p = _positional_block_vjp(
        lever_c, lever_p, axis, jd.prismatic, k, fill, compliance, e, g_corr)
    grad_p, grad_c, g_parent_x, g_child_x = _positional_levers_vjp(
        jd, bp, bc, lever_c, lever_p, g_k, g_axis, g_lever_c, g_lever_p)
    g_x_p, g_r_p, g_x_c, g_r_c, gap_parent_x, gap_child_x = _error_vjp(_POS, jd, bp, bc, g_e)
    return (_body_grad_add(grad_p, _BodyGrad(g_x_p, g_r_p, _ZERO9, 0.0)),
            _body_grad_add(grad_c, _BodyGrad(g_x_c, g_r_c, _ZERO9, 0.0)),
            _add(g_parent_x, gap_parent_x), _add(g_child_x, gap_child_x),
            g_compliance + _dot(g_e, lam), _mul(compliance, g_e))


@numba.njit(cache=True)
def _angular_parts(jd, bp, bc):
    """(error, has_axis, parent world axis, child world axis, parent and child joint
    frames): the revolute's axes or the prismatic's frames (constraints._angular_error)."""
    if jd.prismatic:
        frame_p = _mm(bp.r, jd.parent_rotation)
        frame_c = _mm(bc.r, jd.child_rotation)
        error = _mul(0.5, _vee(_mm(frame_c, _mt(frame_p))))
        return error, False, _ZERO3, _ZERO3, frame_p, frame_c
    axis_p = _mv(bp.r, jd.parent_axis)
    axis_c = _mv(bc.r, jd.child_axis)
    return _cross(axis_p, axis_c), True, axis_p, axis_c, _ZERO9, _ZERO9


@numba.njit(cache=True)
def _angular(jd, bp, bc, lam):
    error, has_axis, axis, _, _, _ = _angular_parts(jd, bp, bc)
    k = _madd(bc.a, bp.a)
    dlam = _block(k, axis, has_axis, _trace(k) / 3.0, jd.compliance,
                  _add(error, _mul(jd.compliance, lam)))
    return _Correction(_ZERO3, dlam, dlam, dlam)


@numba.njit(cache=True)
def _angular_vjp(jd, bp, bc, lam, g_corr):
    """As :func:`_positional_vjp` for :func:`_angular` (no joint origins)."""
    error, has_axis, axis, axis_c, frame_p, frame_c = _angular_parts(jd, bp, bc)
    k = _madd(bc.a, bp.a)
    compliance = jd.compliance
    e = _add(error, _mul(compliance, lam))
    g_dlam = _add(_add(g_corr.tau_c, g_corr.tau_p), g_corr.dlam)
    g_k, g_axis, g_compliance, g_e = _block_vjp(k, axis, has_axis, _trace(k) / 3.0, compliance,
                                                e, g_dlam)
    if has_axis:
        g_axis = _add(g_axis, _cross(axis_c, g_e))
        g_r_p = _outer(g_axis, jd.parent_axis)
        g_r_c = _outer(_cross(g_e, axis), jd.child_axis)
    else:
        g_relative = _mscale(0.5, _skew(g_e))
        g_r_c = _mm(_mm(g_relative, frame_p), _mt(jd.child_rotation))
        g_r_p = _mm(_mm(_mt(g_relative), frame_c), _mt(jd.parent_rotation))
    return (_BodyGrad(_ZERO3, g_r_p, g_k, 0.0), _BodyGrad(_ZERO3, g_r_c, g_k, 0.0), _ZERO3,
            _ZERO3, g_compliance + _dot(g_e, lam), _mul(compliance, g_e))


@numba.njit(cache=True)
def _limit(jd, bp, bc, bound):
    value = _coordinate(jd, bp, bc)
    lin, ang_c, ang_p, w = _joint_mass(jd, bp, bc)
    dlam = -(value - bound) / w
    return _Correction(_mul(dlam, lin), _mul(dlam, ang_c), _mul(dlam, ang_p), _ZERO3)


@numba.njit(cache=True)
def _limit_vjp(jd, bp, bc, bound, g_corr):
    """As :func:`_positional_vjp` for :func:`_limit` (no compliance, no multiplier)."""
    value = _coordinate(jd, bp, bc)
    lin, ang_c, ang_p, w = _joint_mass(jd, bp, bc)
    violation = value - bound
    dlam = -violation / w
    g_dlam = _dot(lin, g_corr.p) + _dot(ang_c, g_corr.tau_c) + _dot(ang_p, g_corr.tau_p)
    grad_p, grad_c, g_child_x = _joint_mass_vjp(
        jd, bp, bc, _mul(dlam, g_corr.p), _mul(dlam, g_corr.tau_c), _mul(dlam, g_corr.tau_p),
        g_dlam * violation / (w * w))
    g_x_p, g_r_p, g_x_c, g_r_c, g_parent_x, g_child_x2 = _coordinate_vjp(jd, bp, bc,
                                                                         -g_dlam / w)
    return (_body_grad_add(grad_p, _BodyGrad(g_x_p, g_r_p, _ZERO9, 0.0)),
            _body_grad_add(grad_c, _BodyGrad(g_x_c, g_r_c, _ZERO9, 0.0)), g_parent_x,
            _add(g_child_x, g_child_x2), 0.0, _ZERO3)


@numba.njit(cache=True)
def _project(kind, jd, bound, bp, bc, lam):
    if kind == _POS:
        return _positional(jd, bp, bc, lam)
    if kind == _ANG:
        return _angular(jd, bp, bc, lam)
    return _limit(jd, bp, bc, bound)


@numba.njit(cache=True)
def _project_vjp(kind, jd, bound, bp, bc, lam, g_corr):
    if kind == _POS:
        return _positional_vjp(jd, bp, bc, lam, g_corr)
    if kind == _ANG:
        return _angular_vjp(jd, bp, bc, lam, g_corr)
    return _limit_vjp(jd, bp, bc, bound, g_corr)


@numba.njit(cache=True)
def _violated_bound(jd, bp, bc):
    """(projected, bound): whether the joint is past a limit, and which."""
    if not jd.limited:
        return False, 0.0
    value = _coordinate(jd, bp, bc)
    if value < jd.lower:
        return True, jd.lower
    if value > jd.upper:
        return True, jd.upper
    return False, 0.0


@numba.njit(cache=True)
def _scaled(factor, corr):
    return _Correction(_mul(factor, corr.p), _mul(factor, corr.tau_c), _mul(factor, corr.tau_p),
                       _mul(factor, corr.dlam))


@numba.njit(cache=True)
def _slot(slot, m):
    """(kind, tree position) of a Gauss-Seidel slot: positional and angular of each joint
    in tree order, then the limits."""
    if slot < 2 * m:
        return slot % 2, slot // 2
    return _LIM, slot - 2 * m


# -- velocity-level terms: damping and friction ----------------------------------------------


@numba.njit(cache=True)
def _joint_impulse(jd, h, explicit, bp, bc, v_p, w_p, v_c, w_c):
    """(lin, ang_c, ang_p, weight, rate, gain, capped, sliding, impulse) of the joint's
    explicit damping (gain 0 unless ``explicit``: the second order damps in the projection
    loop) and Coulomb friction (step._joint_impulse)."""
    lin, ang_c, ang_p, weight = _joint_mass(jd, bp, bc)
    rate = _dot(lin, _sub(v_c, v_p)) + _dot(ang_c, w_c) - _dot(ang_p, w_p)
    bh = jd.damping * h if explicit else 0.0
    capped = bh * weight > MAX_DAMPING_PER_SUBSTEP
    gain = MAX_DAMPING_PER_SUBSTEP / weight if capped else bh
    impulse = -gain * rate
    target = gain * rate - rate / weight
    cap = jd.friction * h
    sliding = abs(target) >= cap
    impulse += min(max(target, -cap), cap)
    return lin, ang_c, ang_p, weight, rate, gain, capped, sliding, impulse


@numba.njit(cache=True)
def _impulse_correction(lin, ang_c, ang_p, impulse):
    return _Correction(_mul(impulse, lin), _mul(impulse, ang_c), _mul(impulse, ang_p), _ZERO3)


@numba.njit(cache=True)
def _joint_impulse_vjp(jd, h, explicit, bp, bc, v_p, w_p, v_c, w_c, g_v_p, g_w_p, g_v_c,
                       g_w_c):
    """The cotangents the joint's velocity impulse adds: (to g_v_p, g_w_p, g_v_c, g_w_c,
    body gradient of parent, of child, g_joint_child_x, g_damping) given the velocities'
    cotangents after it (step._joint_velocity_vjp)."""
    lin, ang_c, ang_p, weight, rate, gain, capped, sliding, impulse = _joint_impulse(
        jd, h, explicit, bp, bc, v_p, w_p, v_c, w_c)
    corr = _impulse_correction(lin, ang_c, ang_p, impulse)
    g_corr, grad_p, grad_c = _response_vjp(bp, bc, corr, g_v_p, g_w_p, g_v_c, g_w_c)
    g_p, g_tau_c, g_tau_p = g_corr
    g_impulse = _dot(lin, g_p) + _dot(ang_c, g_tau_c) + _dot(ang_p, g_tau_p)
    g_rate = -gain * g_impulse
    g_gain = -rate * g_impulse
    g_weight = 0.0
    if not sliding:  # the friction impulse is the target
        g_rate += g_impulse * (gain - 1.0 / weight)
        g_gain += g_impulse * rate
        g_weight = g_impulse * rate / weight**2
    g_damping = 0.0
    if capped:
        g_weight -= g_gain * MAX_DAMPING_PER_SUBSTEP / weight**2
    elif explicit:
        g_damping = g_gain * h
    g_lin = _add(_mul(impulse, g_p), _mul(g_rate, _sub(v_c, v_p)))
    g_ang_c = _add(_mul(impulse, g_tau_c), _mul(g_rate, w_c))
    g_ang_p = _sub(_mul(impulse, g_tau_p), _mul(g_rate, w_p))
    more_p, more_c, g_child_x = _joint_mass_vjp(jd, bp, bc, g_lin, g_ang_c, g_ang_p, g_weight)
    return (_mul(-g_rate, lin), _mul(-g_rate, ang_p), _mul(g_rate, lin), _mul(g_rate, ang_c),
            _body_grad_add(grad_p, more_p), _body_grad_add(grad_c, more_c), g_child_x,
            g_damping)


@numba.njit(cache=True)
def _joint_velocity_terms(joints, links, order, h, explicit, x, q, v, w, record, joint_v):
    """Damping (where ``explicit``) and friction of every joint in tree order on the
    velocities v, w (in place), at poses x, q; with ``record``, joint_v (m, 4, 3) takes v_p,
    w_p, v_c, w_c before each."""
    for k in range(len(order)):
        jd = _joint(joints, order[k])
        p, c = jd.parent, jd.child
        v_p, w_p = (_row3(v, p), _row3(w, p)) if p >= 0 else (_ZERO3, _ZERO3)
        v_c, w_c = _row3(v, c), _row3(w, c)
        if record:
            for row, value in enumerate((v_p, w_p, v_c, w_c)):
                _put3(joint_v[k], row, value)
        bp, bc = _body(_link(links, x, q, p)), _body(_link(links, x, q, c))
        lin, ang_c, ang_p, _, _, _, _, _, impulse = _joint_impulse(jd, h, explicit, bp, bc, v_p,
                                                                   w_p, v_c, w_c)
        dv_p, dw_p, dv_c, dw_c = _response(bp, bc, _impulse_correction(lin, ang_c, ang_p,
                                                                       impulse))
        _acc_joint(v, w, p, c, dv_p, dw_p, dv_c, dw_c)


@numba.njit(cache=True)
def _joint_velocity_terms_vjp(joints, links, order, h, explicit, x, q, joint_v, g_x, g_q, g_v,
                              g_w, g_links, g_joints):
    """The reverse of :func:`_joint_velocity_terms` on the velocities' cotangents g_v, g_w
    (in place); adds the poses' and parameters' cotangents."""
    for k in range(len(order) - 1, -1, -1):
        j = order[k]
        jd = _joint(joints, j)
        p, c = jd.parent, jd.child
        link_p, link_c = _link(links, x, q, p), _link(links, x, q, c)
        bp, bc = _body(link_p), _body(link_c)
        rows = joint_v[k]
        g_v_p, g_w_p = (_row3(g_v, p), _row3(g_w, p)) if p >= 0 else (_ZERO3, _ZERO3)
        (d_v_p, d_w_p, d_v_c, d_w_c, grad_p, grad_c, g_child_x, g_damping) = _joint_impulse_vjp(
            jd, h, explicit, bp, bc, _row3(rows, 0), _row3(rows, 1), _row3(rows, 2),
            _row3(rows, 3), g_v_p, g_w_p, _row3(g_v, c), _row3(g_w, c))
        _acc_joint(g_v, g_w, p, c, d_v_p, d_w_p, d_v_c, d_w_c)
        if p >= 0:
            _add_body_cotangent(g_x, g_q, g_links, p, _body_cotangent(link_p[1], link_p[2],
                                                                      grad_p))
        _add_body_cotangent(g_x, g_q, g_links, c, _body_cotangent(link_c[1], link_c[2], grad_c))
        _add_to(g_joints, j, _G_CHILD_X, g_child_x)
        g_joints[j, _G_DAMPING] += g_damping


# -- prediction: gravity, actuation, gyroscopic term -----------------------------------------


@numba.njit(cache=True)
def _pose(x, q, link):
    """(x, rotation matrix) of a link, the world's for -1."""
    if link < 0:
        return _ZERO3, _EYE
    return _row3(x, link), _quat_matrix(_row4(q, link))


@numba.njit(cache=True)
def _forces(joints, x, q, action, force, torque):
    """The actuation's forces and torques on the links into force, torque (n, 3)."""
    force[:] = 0.0
    torque[:] = 0.0
    for j in range(len(action)):
        jd = _joint(joints, j)
        p, c = jd.parent, jd.child
        x_p, r_p = _pose(x, q, p)
        x_c, r_c = _pose(x, q, c)
        lin, ang_c, ang_p = _jacobian(jd, x_p, r_p, x_c, r_c)
        _acc_joint(force, torque, p, c, _mul(-action[j], lin), _mul(-action[j], ang_p),
                   _mul(action[j], lin), _mul(action[j], ang_c))


@numba.njit(cache=True)
def _spin(inertia, inv_inertia, h, r, w, torque, gyroscopic):
    """(w_body, momentum, torque_body, w_body_new) of a link's update over ``h`` by the
    torque and (``gyroscopic`` 1.0; 0.0 without) the gyroscopic term."""
    w_body = _mtv(r, w)
    torque_body = _mtv(r, torque)
    momentum = _mul(gyroscopic, _mv(inertia, w_body))
    rhs = _sub(torque_body, _cross(w_body, momentum))
    return w_body, momentum, torque_body, _add(w_body, _mul(h, _mv(inv_inertia, rhs)))


@numba.njit(cache=True)
def _accelerate(joints, links, gravity, h, x, q, v, w, action, force, torque, gyroscopic):
    """v, w (in place) after gravity, actuation and (``gyroscopic`` 1.0) the gyroscopic term
    over ``h`` [s]: a substep, or the second order's half kicks (±h/2, 0.0)."""
    _forces(joints, x, q, action, force, torque)
    for i in range(len(x)):
        _put3(v, i, _add(_row3(v, i), _mul(h, _add(gravity, _mul(links[i, _L_INV_MASS],
                                                                 _row3(force, i))))))
        r = _quat_matrix(_row4(q, i))
        _, _, _, w_body_new = _spin(_vec9(links, i, _L_INERTIA), _vec9(links, i, _L_INV_INERTIA),
                                    h, r, _row3(w, i), _row3(torque, i), gyroscopic)
        _put3(w, i, _mv(r, w_body_new))


@numba.njit(cache=True)
def _accelerate_vjp(joints, links, h, x, q, w, action, gyroscopic, force, torque, g_matrix,
                    g_x, g_q, g_v, g_w, g_links, g_joints, g_action):
    """The reverse of :func:`_accelerate` at start state x, q, w: g_w (in place) becomes
    the start's (g_v passes unchanged); adds the poses', action's and parameters'
    cotangents. force, torque, g_matrix are scratch."""
    _forces(joints, x, q, action, force, torque)
    g_matrix[:] = 0.0
    for i in range(len(x)):
        r = _quat_matrix(_row4(q, i))
        inertia, inv_inertia = _vec9(links, i, _L_INERTIA), _vec9(links, i, _L_INV_INERTIA)
        w_i, torque_i = _row3(w, i), _row3(torque, i)
        w_body, momentum, torque_body, w_body_new = _spin(inertia, inv_inertia, h, r, w_i,
                                                          torque_i, gyroscopic)
        g_w_new = _row3(g_w, i)
        g_wb_new = _mtv(r, g_w_new)
        rhs = _sub(torque_body, _cross(w_body, momentum))
        g_rhs = _mul(h, _mtv(inv_inertia, g_wb_new))
        _add_to(g_links, i, _L_INV_INERTIA, _mscale(h, _outer(g_wb_new, rhs)))
        g_momentum = _mul(gyroscopic, _cross(_neg(g_rhs), w_body))
        _add_to(g_links, i, _L_INERTIA, _outer(g_momentum, w_body))
        g_wb = _add(_add(g_wb_new, _cross(momentum, _neg(g_rhs))), _mtv(inertia, g_momentum))
        _put3(torque, i, _mv(r, g_rhs))  # the torque's cotangent from here on
        _acc9(g_matrix, i, _madd(_madd(_outer(g_w_new, w_body_new), _outer(torque_i, g_rhs)),
                                 _outer(w_i, g_wb)))
        _put3(g_w, i, _mv(r, g_wb))
        g_v_i = _row3(g_v, i)
        g_links[i, _L_INV_MASS] += h * _dot(g_v_i, _row3(force, i))
        _put3(force, i, _mul(h * links[i, _L_INV_MASS], g_v_i))  # the force's cotangent
    _forces_vjp(joints, x, q, action, force, torque, g_matrix, g_x, g_q, g_joints, g_action)


@numba.njit(cache=True)
def _forces_vjp(joints, x, q, action, g_force, g_torque, g_matrix, g_x, g_q, g_joints,
                g_action):
    """The reverse of :func:`_forces` given the forces' and torques' cotangents (n, 3) and
    the rotation matrices' so far (g_matrix, (n, 3, 3)): adds the poses', action's and joint
    origins' cotangents."""
    for j in range(len(action)):
        jd = _joint(joints, j)
        p, c = jd.parent, jd.child
        x_p, r_p = _pose(x, q, p)
        x_c, r_c = _pose(x, q, c)
        lin, ang_c, ang_p = _jacobian(jd, x_p, r_p, x_c, r_c)
        g_f_p, g_t_p = (_row3(g_force, p), _row3(g_torque, p)) if p >= 0 else (_ZERO3, _ZERO3)
        g_f = _sub(_row3(g_force, c), g_f_p)
        g_t_c = _row3(g_torque, c)
        g_action[j] += _dot(lin, g_f) + _dot(ang_c, g_t_c) - _dot(ang_p, g_t_p)
        a = action[j]
        g_xp, g_rp, g_xc, g_rc, g_child_x = _jacobian_vjp(jd, x_p, r_p, x_c, r_c, _mul(a, g_f),
                                                          _mul(a, g_t_c), _mul(-a, g_t_p))
        _add_to(g_joints, j, _G_CHILD_X, g_child_x)
        _acc3(g_x, c, g_xc)
        _acc9(g_matrix, c, g_rc)
        if p >= 0:
            _acc3(g_x, p, g_xp)
            _acc9(g_matrix, p, g_rp)
    for i in range(len(x)):
        _acc4(g_q, i, _quat_matrix_vjp(_row4(q, i), _row9(g_matrix, i)))


# -- the second-order scheme: start directions (SHAKE), dampers, half kicks --------------------


@numba.njit(cache=True)
def _frame(x_i, q_i):
    """A pose as the second-order scheme's constraint values read it: position and rotation
    (no inertia: the directions come from the substep's start). The world: (0, 1)."""
    return _Body(x_i, _quat_matrix(q_i), _ZERO9, 0.0)


@numba.njit(cache=True)
def _block_map(k, axis, has_axis, fill, compliance):
    """N = -M⁻¹ P, the matrix of :func:`_block`: Δλ = N e."""
    matrix, proj = _block_matrix(k, axis, has_axis, fill, compliance)
    return _mscale(-1.0, _mm(_inverse(matrix), proj))


@numba.njit(cache=True)
def _block_map_vjp(k, axis, has_axis, fill, compliance, g_map):
    """(g_k, g_axis, g_compliance) of :func:`_block_map` given N's cotangent (``fill`` a
    constant, as in :func:`_block_vjp`)."""
    matrix, proj = _block_matrix(k, axis, has_axis, fill, compliance)
    inverse = _inverse(matrix)
    # N = -M⁻¹ P: g_M = M⁻ᵀ g_N Pᵀ M⁻ᵀ, g_P = -M⁻ᵀ g_N
    g_matrix = _mm(_mm(_mt(inverse), _mm(g_map, proj)), _mt(inverse))
    if not has_axis:
        return g_matrix, _ZERO3, _trace(g_matrix)
    g_proj = _madd(_madd(_madd(_mscale(-1.0, _mm(_mt(inverse), g_map)),
                               _mm(_mm(g_matrix, proj), _mt(k))),
                         _mm(_mm(_mt(k), proj), g_matrix)), _mscale(compliance, g_matrix))
    g_outer = _msub(_mscale(fill, g_matrix), g_proj)
    g_axis = _mv(_madd(g_outer, _mt(g_outer)), axis)
    g_compliance = 0.0
    for i in range(9):
        g_compliance += g_matrix[i] * proj[i]
    return _mm(_mm(proj, g_matrix), proj), g_axis, g_compliance


class _Directions(NamedTuple):
    """What a joint's second-order projections take from the substep's start bodies, constant
    over the substep (a row of the directions table, ``_D_*`` columns; its cotangent has the
    same fields). Positional: Δλ = n_pos e, the links turn by t_c Δλ and -t_p Δλ
    (t = A [lever]×); angular: Δλ = n_ang e, turns a_c Δλ, -a_p Δλ; limit and damper: the
    joint's rate Jacobian lin, turns phi_c Δλ, -phi_p Δλ (phi = A ang), generalized inverse
    mass ``weight``; inverse masses; the joint's angle and rate at the start (the damper's)."""

    n_pos: tuple
    t_c: tuple
    t_p: tuple
    n_ang: tuple
    a_c: tuple
    a_p: tuple
    lin: tuple
    phi_c: tuple
    phi_p: tuple
    weight: float
    inv_mass_c: float
    inv_mass_p: float
    angle0: float
    rate0: float


(_D_N_POS, _D_T_C, _D_T_P, _D_N_ANG, _D_A_C, _D_A_P) = (0, 9, 18, 27, 36, 45)
(_D_LIN, _D_PHI_C, _D_PHI_P, _D_WEIGHT, _D_INV_MASS_C, _D_INV_MASS_P, _D_ANGLE0,
 _D_RATE0, _DIRECTIONS_WIDTH) = (54, 57, 60, 63, 64, 65, 66, 67, 68)


@numba.njit(cache=True)
def _directions(jd, bp, bc, v_p, w_p, v_c, w_c):
    """The joint's :class:`_Directions` from the start bodies bp, bc and velocities."""
    lever_c, lever_p, _, fill, axis, k = _positional_parts(jd, bp, bc)
    _, has_axis, axis_a, _, _, _ = _angular_parts(jd, bp, bc)
    k_a = _madd(bc.a, bp.a)
    lin, ang_c, ang_p, weight = _joint_mass(jd, bp, bc)
    return _Directions(
        _block_map(k, axis, jd.prismatic, fill, jd.compliance), _mm(bc.a, _skew(lever_c)),
        _mm(bp.a, _skew(lever_p)),
        _block_map(k_a, axis_a, has_axis, _trace(k_a) / 3.0, jd.compliance), bc.a, bp.a, lin,
        _mv(bc.a, ang_c), _mv(bp.a, ang_p), weight, bc.inv_mass, bp.inv_mass,
        _coordinate(jd, bp, bc), _dot(lin, _sub(v_c, v_p)) + _dot(ang_c, w_c) - _dot(ang_p, w_p))


@numba.njit(cache=True)
def _directions_vjp(jd, bp, bc, v_p, w_p, v_c, w_c, g):
    """(body gradient of parent, of child, g_joint_parent_x, g_joint_child_x, g_compliance,
    g_v_p, g_w_p, g_v_c, g_w_c) of :func:`_directions` given its cotangent ``g``."""
    lever_c, lever_p, _, fill, axis, k = _positional_parts(jd, bp, bc)
    g_k, g_axis, g_compliance = _block_map_vjp(k, axis, jd.prismatic, fill, jd.compliance,
                                               g.n_pos)
    # t = A [lever]×
    pos_p, pos_c, g_parent_x, g_child_x = _positional_levers_vjp(
        jd, bp, bc, lever_c, lever_p, g_k, g_axis, _vee(_mm(_mt(bc.a), g.t_c)),
        _vee(_mm(_mt(bp.a), g.t_p)))
    g_a_c = _mm(g.t_c, _mt(_skew(lever_c)))
    g_a_p = _mm(g.t_p, _mt(_skew(lever_p)))
    _, has_axis, axis_a, _, _, _ = _angular_parts(jd, bp, bc)
    k_a = _madd(bc.a, bp.a)
    g_k_a, g_axis_a, g_compliance_a = _block_map_vjp(k_a, axis_a, has_axis, _trace(k_a) / 3.0,
                                                     jd.compliance, g.n_ang)
    g_a_c = _madd(g_a_c, _madd(g_k_a, g.a_c))
    g_a_p = _madd(g_a_p, _madd(g_k_a, g.a_p))
    g_r_p = _outer(g_axis_a, jd.parent_axis) if has_axis else _ZERO9
    lin, ang_c, ang_p, _ = _joint_mass(jd, bp, bc)
    g_a_c = _madd(g_a_c, _outer(g.phi_c, ang_c))
    g_a_p = _madd(g_a_p, _outer(g.phi_p, ang_p))
    more_p, more_c, g_child_x2 = _joint_mass_vjp(
        jd, bp, bc, _add(g.lin, _mul(g.rate0, _sub(v_c, v_p))),
        _add(_mtv(bc.a, g.phi_c), _mul(g.rate0, w_c)),
        _sub(_mtv(bp.a, g.phi_p), _mul(g.rate0, w_p)), g.weight)
    c_x_p, c_r_p, c_x_c, c_r_c, c_parent_x, c_child_x = _coordinate_vjp(jd, bp, bc, g.angle0)
    grad_p = _body_grad_add(_body_grad_add(pos_p, more_p),
                            _BodyGrad(c_x_p, _madd(g_r_p, c_r_p), g_a_p, g.inv_mass_p))
    grad_c = _body_grad_add(_body_grad_add(pos_c, more_c),
                            _BodyGrad(c_x_c, c_r_c, g_a_c, g.inv_mass_c))
    return (grad_p, grad_c, _add(g_parent_x, c_parent_x),
            _add(_add(g_child_x, g_child_x2), c_child_x), g_compliance + g_compliance_a,
            _mul(-g.rate0, lin), _mul(-g.rate0, ang_p), _mul(g.rate0, lin),
            _mul(g.rate0, ang_c))


@numba.njit(cache=True)
def _read_directions(table, j):
    """Row j of a directions table (or of its cotangents) as a :class:`_Directions`."""
    return _Directions(
        _vec9(table, j, _D_N_POS), _vec9(table, j, _D_T_C), _vec9(table, j, _D_T_P),
        _vec9(table, j, _D_N_ANG), _vec9(table, j, _D_A_C), _vec9(table, j, _D_A_P),
        _vec3(table, j, _D_LIN), _vec3(table, j, _D_PHI_C), _vec3(table, j, _D_PHI_P),
        table[j, _D_WEIGHT], table[j, _D_INV_MASS_C], table[j, _D_INV_MASS_P],
        table[j, _D_ANGLE0], table[j, _D_RATE0])


@numba.njit(cache=True)
def _joint_velocities(v, w, p, c):
    """(v_p, w_p, v_c, w_c) of a joint's links, the world's zero for -1."""
    v_p, w_p = (_row3(v, p), _row3(w, p)) if p >= 0 else (_ZERO3, _ZERO3)
    return v_p, w_p, _row3(v, c), _row3(w, c)


@numba.njit(cache=True)
def _fill_directions(joints, links, x0, q0, v0, w0, table):
    """table (m, _DIRECTIONS_WIDTH) <- every joint's :class:`_Directions` at the substep's
    start x0, q0 moving with v0, w0."""
    for j in range(len(table)):
        jd = _joint(joints, j)
        p, c = jd.parent, jd.child
        d = _directions(jd, _body(_link(links, x0, q0, p)), _body(_link(links, x0, q0, c)),
                        *_joint_velocities(v0, w0, p, c))
        for column, field in ((_D_N_POS, d.n_pos), (_D_T_C, d.t_c), (_D_T_P, d.t_p),
                              (_D_N_ANG, d.n_ang), (_D_A_C, d.a_c), (_D_A_P, d.a_p)):
            for e in range(9):
                table[j, column + e] = field[e]
        for column, field in ((_D_LIN, d.lin), (_D_PHI_C, d.phi_c), (_D_PHI_P, d.phi_p)):
            for e in range(3):
                table[j, column + e] = field[e]
        table[j, _D_WEIGHT] = d.weight
        table[j, _D_INV_MASS_C] = d.inv_mass_c
        table[j, _D_INV_MASS_P] = d.inv_mass_p
        table[j, _D_ANGLE0] = d.angle0
        table[j, _D_RATE0] = d.rate0


@numba.njit(cache=True)
def _directions_table_vjp(joints, links, x0, q0, v0, w0, g_table, g_x0, g_q0, g_v0, g_w0,
                          g_links, g_joints):
    """The reverse of :func:`_fill_directions`: adds the start poses' cotangents to g_x0,
    g_q0 and the parameters'; g_v0, g_w0 <- the start velocities' (the damper's rate)."""
    g_v0[:] = 0.0
    g_w0[:] = 0.0
    for j in range(len(g_table)):
        jd = _joint(joints, j)
        p, c = jd.parent, jd.child
        link_p, link_c = _link(links, x0, q0, p), _link(links, x0, q0, c)
        (grad_p, grad_c, g_parent_x, g_child_x, g_compliance, g_v_p, g_w_p, g_v_c,
         g_w_c) = _directions_vjp(jd, _body(link_p), _body(link_c),
                                  *_joint_velocities(v0, w0, p, c),
                                  _read_directions(g_table, j))
        _add_to(g_joints, j, _G_PARENT_X, g_parent_x)
        _add_to(g_joints, j, _G_CHILD_X, g_child_x)
        g_joints[j, _G_COMPLIANCE] += g_compliance
        _acc_joint(g_v0, g_w0, p, c, g_v_p, g_w_p, g_v_c, g_w_c)
        if p >= 0:
            _add_body_cotangent(g_x0, g_q0, g_links, p, _body_cotangent(link_p[1], link_p[2],
                                                                        grad_p))
        _add_body_cotangent(g_x0, g_q0, g_links, c, _body_cotangent(link_c[1], link_c[2],
                                                                    grad_c))


@numba.njit(cache=True)
def _moves_along(d, dlam):
    """(Δx_p, Δφ_p, Δx_c, Δφ_c) of a scalar Δλ along the joint's rate Jacobian."""
    return (_mul(-d.inv_mass_p * dlam, d.lin), _mul(-dlam, d.phi_p),
            _mul(d.inv_mass_c * dlam, d.lin), _mul(dlam, d.phi_c))


@numba.njit(cache=True)
def _moves_along_vjp(d, dlam, g_dx_p, g_dphi_p, g_dx_c, g_dphi_c):
    """(g_Δλ, g_lin, g_phi_c, g_phi_p, g_inv_mass_c, g_inv_mass_p) of :func:`_moves_along`."""
    g_x = _sub(_mul(d.inv_mass_c, g_dx_c), _mul(d.inv_mass_p, g_dx_p))
    return (_dot(d.lin, g_x) + _dot(d.phi_c, g_dphi_c) - _dot(d.phi_p, g_dphi_p),
            _mul(dlam, g_x), _mul(dlam, g_dphi_c), _mul(-dlam, g_dphi_p),
            dlam * _dot(d.lin, g_dx_c), -dlam * _dot(d.lin, g_dx_p))


@numba.njit(cache=True)
def _error(kind, jd, bp, bc):
    """The positional or angular constraint's value c (3,) at the bodies' poses."""
    if kind == _POS:
        return _sub(_sub(_add(bc.x, _mv(bc.r, jd.child_x)), bp.x), _mv(bp.r, jd.parent_x))
    return _angular_parts(jd, bp, bc)[0]


@numba.njit(cache=True)
def _error_vjp(kind, jd, bp, bc, g_e):
    """(g_x_p, g_r_p, g_x_c, g_r_c, g_joint_parent_x, g_joint_child_x) of :func:`_error`."""
    if kind == _POS:
        return (_neg(g_e), _mscale(-1.0, _outer(g_e, jd.parent_x)), g_e,
                _outer(g_e, jd.child_x), _neg(_mtv(bp.r, g_e)), _mtv(bc.r, g_e))
    _, has_axis, axis_p, axis_c, frame_p, frame_c = _angular_parts(jd, bp, bc)
    if has_axis:
        g_r_p = _outer(_cross(axis_c, g_e), jd.parent_axis)
        g_r_c = _outer(_cross(g_e, axis_p), jd.child_axis)
    else:
        g_relative = _mscale(0.5, _skew(g_e))
        g_r_c = _mm(_mm(g_relative, frame_p), _mt(jd.child_rotation))
        g_r_p = _mm(_mm(_mt(g_relative), frame_c), _mt(jd.parent_rotation))
    return _ZERO3, g_r_p, _ZERO3, g_r_c, _ZERO3, _ZERO3


@numba.njit(cache=True)
def _shake(kind, jd, d, bound, bp, bc, lam, scale):
    """(Δλ (3,), zero for a limit; Δx_p, Δφ_p, Δx_c, Δφ_c) of a second-order projection:
    the constraint's value from the current bodies bp, bc (:func:`_frame`), its directions
    ``d`` from the substep's start; ``scale`` the Jacobi average (1 for Gauss-Seidel)."""
    if kind == _LIM:
        dlam = scale * (-(_coordinate(jd, bp, bc) - bound) / d.weight)
        dx_p, dphi_p, dx_c, dphi_c = _moves_along(d, dlam)
        return _ZERO3, dx_p, dphi_p, dx_c, dphi_c
    e = _add(_error(kind, jd, bp, bc), _mul(jd.compliance, lam))
    if kind == _POS:
        dlam = _mul(scale, _mv(d.n_pos, e))
        return (dlam, _mul(-d.inv_mass_p, dlam), _neg(_mv(d.t_p, dlam)),
                _mul(d.inv_mass_c, dlam), _mv(d.t_c, dlam))
    dlam = _mul(scale, _mv(d.n_ang, e))
    return dlam, _ZERO3, _neg(_mv(d.a_p, dlam)), _ZERO3, _mv(d.a_c, dlam)


@numba.njit(cache=True)
def _shake_vjp(kind, jd, d, bound, bp, bc, lam, scale, g_dx_p, g_dphi_p, g_dx_c, g_dphi_c,
               g_lam):
    """The reverse of :func:`_shake` given the moves' cotangents and the multiplier's after
    (g_lam): (g_x_p, g_r_p, g_x_c, g_r_c of the current bodies, g_joint_parent_x,
    g_joint_child_x, g_compliance, the multiplier's cotangent it adds, and the directions':
    g_n (n_pos or n_ang), g_t_c (t_c or a_c), g_t_p (t_p or a_p), g_lin, g_phi_c, g_phi_p,
    g_weight, g_inv_mass_c, g_inv_mass_p)."""
    if kind == _LIM:
        dlam = -(_coordinate(jd, bp, bc) - bound) / d.weight
        g_scaled, g_lin, g_phi_c, g_phi_p, g_mass_c, g_mass_p = _moves_along_vjp(
            d, scale * dlam, g_dx_p, g_dphi_p, g_dx_c, g_dphi_c)
        g_dlam = scale * g_scaled
        g_x_p, g_r_p, g_x_c, g_r_c, g_parent_x, g_child_x = _coordinate_vjp(
            jd, bp, bc, -g_dlam / d.weight)
        return (g_x_p, g_r_p, g_x_c, g_r_c, g_parent_x, g_child_x, 0.0, _ZERO3,
                (_ZERO9, _ZERO9, _ZERO9, g_lin, g_phi_c, g_phi_p, -g_dlam * dlam / d.weight,
                 g_mass_c, g_mass_p))
    e = _add(_error(kind, jd, bp, bc), _mul(jd.compliance, lam))
    if kind == _POS:
        n, t_c, t_p = d.n_pos, d.t_c, d.t_p
    else:
        n, t_c, t_p = d.n_ang, d.a_c, d.a_p
    scaled = _mul(scale, _mv(n, e))
    # λ after = λ before + Δλ: the multiplier's cotangent also reaches Δλ
    g_scaled = _add(_sub(_mtv(t_c, g_dphi_c), _mtv(t_p, g_dphi_p)), g_lam)
    g_mass_c = g_mass_p = 0.0
    if kind == _POS:
        g_scaled = _add(g_scaled, _sub(_mul(d.inv_mass_c, g_dx_c), _mul(d.inv_mass_p, g_dx_p)))
        g_mass_c, g_mass_p = _dot(g_dx_c, scaled), -_dot(g_dx_p, scaled)
    g_dlam = _mul(scale, g_scaled)
    g_e = _mtv(n, g_dlam)
    g_x_p, g_r_p, g_x_c, g_r_c, g_parent_x, g_child_x = _error_vjp(kind, jd, bp, bc, g_e)
    return (g_x_p, g_r_p, g_x_c, g_r_c, g_parent_x, g_child_x, _dot(g_e, lam),
            _mul(jd.compliance, g_e),
            (_outer(g_dlam, e), _outer(g_dphi_c, scaled), _mscale(-1.0, _outer(g_dphi_p, scaled)),
             _ZERO3, _ZERO3, _ZERO3, 0.0, g_mass_c, g_mass_p))


@numba.njit(cache=True)
def _add_shake_cotangent(g_table, j, kind, g):
    """Adds a :func:`_shake_vjp`'s directions' cotangents (its last result) to joint j's row
    of the directions' cotangent table."""
    g_n, g_t_c, g_t_p, g_lin, g_phi_c, g_phi_p, g_weight, g_mass_c, g_mass_p = g
    if kind == _LIM:
        _add_to(g_table, j, _D_LIN, g_lin)
        _add_to(g_table, j, _D_PHI_C, g_phi_c)
        _add_to(g_table, j, _D_PHI_P, g_phi_p)
        g_table[j, _D_WEIGHT] += g_weight
    elif kind == _POS:
        _add_to(g_table, j, _D_N_POS, g_n)
        _add_to(g_table, j, _D_T_C, g_t_c)
        _add_to(g_table, j, _D_T_P, g_t_p)
    else:
        _add_to(g_table, j, _D_N_ANG, g_n)
        _add_to(g_table, j, _D_A_C, g_t_c)
        _add_to(g_table, j, _D_A_P, g_t_p)
    g_table[j, _D_INV_MASS_C] += g_mass_c
    g_table[j, _D_INV_MASS_P] += g_mass_p


@numba.njit(cache=True)
def _add_frame_cotangent(g_x, g_q, link, q_link, g_x_link, g_r):
    """Routes a :func:`_frame`'s cotangent (position, rotation) to the link's x and q."""
    if link >= 0:
        _acc3(g_x, link, g_x_link)
        _acc4(g_q, link, _quat_matrix_vjp(q_link, g_r))


@numba.njit(cache=True)
def _damper(jd, d, h, bp, bc, mu):
    """(Δμ, Δx_p, Δφ_p, Δx_c, Δφ_c): joint damping b as a constraint solved in the loop, the
    impulse -b h (ċ₀ + ċ)/2 (midpoint in time, ċ = (angle - angle₀)/h from the current
    bodies) along the start's rate Jacobian; μ its multiplier so far in the substep."""
    bh = jd.damping * h
    dlam = -(0.5 * bh * (_coordinate(jd, bp, bc) - d.angle0) + 0.5 * bh * h * d.rate0 + mu) / (
        1.0 + 0.5 * bh * d.weight)
    dx_p, dphi_p, dx_c, dphi_c = _moves_along(d, dlam)
    return dlam, dx_p, dphi_p, dx_c, dphi_c


@numba.njit(cache=True)
def _damper_vjp(jd, d, h, bp, bc, mu, g_dx_p, g_dphi_p, g_dx_c, g_dphi_c, g_mu):
    """The reverse of :func:`_damper` given the moves' and μ after's cotangents:
    (g_x_p, g_r_p, g_x_c, g_r_c of the current bodies, g_joint_parent_x, g_joint_child_x,
    g_damping, μ before's cotangent, and the directions': g_lin, g_phi_c, g_phi_p, g_weight,
    g_inv_mass_c, g_inv_mass_p, g_angle0, g_rate0)."""
    bh = jd.damping * h
    denominator = 1.0 + 0.5 * bh * d.weight
    rise = _coordinate(jd, bp, bc) - d.angle0
    dlam = -(0.5 * bh * rise + 0.5 * bh * h * d.rate0 + mu) / denominator
    g_along, g_lin, g_phi_c, g_phi_p, g_mass_c, g_mass_p = _moves_along_vjp(
        d, dlam, g_dx_p, g_dphi_p, g_dx_c, g_dphi_c)
    # μ after = μ before + Δμ; the numerator's cotangent is -g_Δμ / (1 + ½ b h w)
    g_numerator = -(g_along + g_mu) / denominator
    g_x_p, g_r_p, g_x_c, g_r_c, g_parent_x, g_child_x = _coordinate_vjp(
        jd, bp, bc, 0.5 * bh * g_numerator)
    g_damping = g_numerator * (0.5 * h * rise + 0.5 * h * h * d.rate0 + 0.5 * h * d.weight * dlam)
    return (g_x_p, g_r_p, g_x_c, g_r_c, g_parent_x, g_child_x, g_damping, g_mu + g_numerator,
            g_lin, g_phi_c, g_phi_p, 0.5 * bh * dlam * g_numerator, g_mass_c, g_mass_p,
            -0.5 * bh * g_numerator, 0.5 * bh * h * g_numerator)


@numba.njit(cache=True)
def _xq(x, q, link):
    """(x, q) of a link, the world's for -1."""
    if link < 0:
        return _ZERO3, (1.0, 0.0, 0.0, 0.0)
    return _row3(x, link), _row4(q, link)


@numba.njit(cache=True)
def _move_pair(x, q, p, c, x_p, q_p, x_c, q_c, dx_p, dphi_p, dx_c, dphi_c):
    """Moves a joint's two links (in place) from the poses they had."""
    x_new, q_new = _moved(x_c, q_c, dx_c, dphi_c)
    _put3(x, c, x_new)
    _put4(q, c, q_new)
    if p >= 0:
        x_new, q_new = _moved(x_p, q_p, dx_p, dphi_p)
        _put3(x, p, x_new)
        _put4(q, p, q_new)


@numba.njit(cache=True)
def _record_pose(pose, x_i, q_i):
    """pose (7,) <- x, q."""
    for d in range(3):
        pose[d] = x_i[d]
    for d in range(4):
        pose[3 + d] = q_i[d]


@numba.njit(cache=True)
def _taped_pose(pose):
    return (pose[0], pose[1], pose[2]), (pose[3], pose[4], pose[5], pose[6])


@numba.njit(cache=True)
def _dampers(joints, order, table, h, x, q, mu, record, pose, mu_tape):
    """One damper pass (:func:`_damper`, every joint in tree order) on x, q and the
    multipliers mu (m,) in place; with ``record``, pose (m, 2, 7) and mu_tape (m,) take the
    two links' poses and μ before each."""
    for k in range(len(order)):
        j = order[k]
        jd = _joint(joints, j)
        p, c = jd.parent, jd.child
        x_p, q_p = _xq(x, q, p)
        x_c, q_c = _xq(x, q, c)
        if record:
            _record_pose(pose[k, 0], x_p, q_p)
            _record_pose(pose[k, 1], x_c, q_c)
            mu_tape[k] = mu[j]
        dlam, dx_p, dphi_p, dx_c, dphi_c = _damper(jd, _read_directions(table, j), h,
                                                   _frame(x_p, q_p), _frame(x_c, q_c), mu[j])
        _move_pair(x, q, p, c, x_p, q_p, x_c, q_c, dx_p, dphi_p, dx_c, dphi_c)
        mu[j] += dlam


@numba.njit(cache=True)
def _dampers_vjp(joints, order, table, h, pose, mu_tape, g_x, g_q, g_mu, g_table, g_joints):
    """The reverse of :func:`_dampers` from its tape: g_x, g_q, g_mu (in place) go from the
    pass's end to its start; adds the directions' and parameters' cotangents."""
    for k in range(len(order) - 1, -1, -1):
        j = order[k]
        jd = _joint(joints, j)
        p, c = jd.parent, jd.child
        d = _read_directions(table, j)
        x_p, q_p = _taped_pose(pose[k, 0])  # the world's where p is -1
        x_c, q_c = _taped_pose(pose[k, 1])
        bp, bc = _frame(x_p, q_p), _frame(x_c, q_c)
        _, _, dphi_p, _, dphi_c = _damper(jd, d, h, bp, bc, mu_tape[k])
        g_q_c, g_dphi_c = _moved_vjp(q_c, dphi_c, _row4(g_q, c))
        _put4(g_q, c, g_q_c)
        g_dx_p, g_dphi_p = _ZERO3, _ZERO3
        if p >= 0:
            g_q_p, g_dphi_p = _moved_vjp(q_p, dphi_p, _row4(g_q, p))
            _put4(g_q, p, g_q_p)
            g_dx_p = _row3(g_x, p)
        (g_x_p, g_r_p, g_x_c, g_r_c, g_parent_x, g_child_x, g_damping, g_mu_j, g_lin, g_phi_c,
         g_phi_p, g_weight, g_mass_c, g_mass_p, g_angle0, g_rate0) = _damper_vjp(
            jd, d, h, bp, bc, mu_tape[k], g_dx_p, g_dphi_p, _row3(g_x, c), g_dphi_c, g_mu[j])
        g_mu[j] = g_mu_j
        _add_frame_cotangent(g_x, g_q, p, q_p, g_x_p, g_r_p)
        _add_frame_cotangent(g_x, g_q, c, q_c, g_x_c, g_r_c)
        _add_to(g_joints, j, _G_PARENT_X, g_parent_x)
        _add_to(g_joints, j, _G_CHILD_X, g_child_x)
        g_joints[j, _G_DAMPING] += g_damping
        _add_to(g_table, j, _D_LIN, g_lin)
        _add_to(g_table, j, _D_PHI_C, g_phi_c)
        _add_to(g_table, j, _D_PHI_P, g_phi_p)
        g_table[j, _D_WEIGHT] += g_weight
        g_table[j, _D_INV_MASS_C] += g_mass_c
        g_table[j, _D_INV_MASS_P] += g_mass_p
        g_table[j, _D_ANGLE0] += g_angle0
        g_table[j, _D_RATE0] += g_rate0


# -- the second order's closing velocity stage (RATTLE) -----------------------------------------


@numba.njit(cache=True)
def _relative_velocity(lever_c, lever_p, v_p, w_p, v_c, w_c):
    """The velocity [m/s] of the child's joint origin relative to the parent's point under
    it (levers from the links' centres of mass)."""
    return _sub(_add(v_c, _cross(w_c, lever_c)), _add(v_p, _cross(w_p, lever_p)))


@numba.njit(cache=True)
def _velocity_constraint(kind, jd, bp, bc, v_p, w_p, v_c, w_c):
    """The impulse (a :class:`_Correction`, Δλ zero; apply it with :func:`_response` as
    velocity changes) that stops the joint's links separating (``kind`` _POS: the positional
    block on :func:`_relative_velocity`, a prismatic's slide kept) or turning against each
    other (_ANG: the angular block on ω_c - ω_p, a revolute's axis free), no compliance, at
    the bodies bp, bc moving with v_p, w_p, v_c, w_c (constraints.velocity_positional,
    velocity_angular)."""
    if kind == _POS:
        lever_c, lever_p, _, fill, axis, k = _positional_parts(jd, bp, bc)
        dlam = _block(k, axis, jd.prismatic, fill, 0.0,
                      _relative_velocity(lever_c, lever_p, v_p, w_p, v_c, w_c))
        return _Correction(dlam, _cross(lever_c, dlam), _cross(lever_p, dlam), _ZERO3)
    k = _madd(bc.a, bp.a)
    dlam = _block(k, _mv(bp.r, jd.parent_axis), not jd.prismatic, _trace(k) / 3.0, 0.0,
                  _sub(w_c, w_p))
    return _Correction(_ZERO3, dlam, dlam, _ZERO3)


@numba.njit(cache=True)
def _velocity_constraint_vjp(kind, jd, bp, bc, v_p, w_p, v_c, w_c, g_corr):
    """(body gradient of parent, of child, g_joint_parent_x, g_joint_child_x, g_v_p, g_w_p,
    g_v_c, g_w_c) of :func:`_velocity_constraint` given the impulse's cotangent (g_p, g_τ_c,
    g_τ_p) (constraints.velocity_positional_vjp, velocity_angular_vjp)."""
    if kind == _POS:
        lever_c, lever_p, _, fill, axis, k = _positional_parts(jd, bp, bc)
        g_k, g_axis, _, g_e, g_lever_c, g_lever_p = _positional_block_vjp(
            lever_c, lever_p, axis, jd.prismatic, k, fill, 0.0,
            _relative_velocity(lever_c, lever_p, v_p, w_p, v_c, w_c),
            _Correction(g_corr[0], g_corr[1], g_corr[2], _ZERO3))
        grad_p, grad_c, g_parent_x, g_child_x = _positional_levers_vjp(
            jd, bp, bc, lever_c, lever_p, g_k, g_axis, _add(g_lever_c, _cross(g_e, w_c)),
            _sub(g_lever_p, _cross(g_e, w_p)))
        return (grad_p, grad_c, g_parent_x, g_child_x, _neg(g_e), _neg(_cross(lever_p, g_e)),
                g_e, _cross(lever_c, g_e))
    k = _madd(bc.a, bp.a)
    g_k, g_axis, _, g_e = _block_vjp(k, _mv(bp.r, jd.parent_axis), not jd.prismatic,
                                     _trace(k) / 3.0, 0.0, _sub(w_c, w_p),
                                     _add(g_corr[1], g_corr[2]))
    g_r_p = _ZERO9 if jd.prismatic else _outer(g_axis, jd.parent_axis)
    return (_BodyGrad(_ZERO3, g_r_p, g_k, 0.0), _BodyGrad(_ZERO3, _ZERO9, g_k, 0.0), _ZERO3,
            _ZERO3, _ZERO3, _neg(g_e), _ZERO3, g_e)


@numba.njit(cache=True)
def _velocity_passes(joints, links, order, iterations, x, q, v, w, record, velocities):
    """``iterations`` Gauss-Seidel passes of the joints' velocity constraints
    (:func:`_velocity_constraint`, positional then angular, joints in tree order) on v, w in
    place at the poses x, q: the second order's closing half kick's end (RATTLE's velocity
    stage, step._velocity_pass). With ``record``, velocities (I, 2m, 4, 3) takes v_p, w_p,
    v_c, w_c before each (slot 2k + kind)."""
    for it in range(iterations):
        for k in range(len(order)):
            jd = _joint(joints, order[k])
            p, c = jd.parent, jd.child
            bp, bc = _body(_link(links, x, q, p)), _body(_link(links, x, q, c))
            for kind in (_POS, _ANG):
                v_p, w_p, v_c, w_c = _joint_velocities(v, w, p, c)
                if record:
                    for row, value in enumerate((v_p, w_p, v_c, w_c)):
                        _put3(velocities[it, 2 * k + kind], row, value)
                dv_p, dw_p, dv_c, dw_c = _response(
                    bp, bc, _velocity_constraint(kind, jd, bp, bc, v_p, w_p, v_c, w_c))
                _acc_joint(v, w, p, c, dv_p, dw_p, dv_c, dw_c)


@numba.njit(cache=True)
def _velocity_passes_vjp(joints, links, order, iterations, x, q, velocities, body_grad, g_x,
                         g_q, g_v, g_w, g_links, g_joints):
    """The reverse of :func:`_velocity_passes` from its tape: g_v, g_w (in place) go from
    the passes' end to their start; adds the poses' and parameters' cotangents. The bodies
    stay put over the passes: their cotangents sum in body_grad (n, 22, scratch) and reach
    x, q and the parameters once."""
    body_grad[:] = 0.0
    for it in range(iterations - 1, -1, -1):
        for k in range(len(order) - 1, -1, -1):
            j = order[k]
            jd = _joint(joints, j)
            p, c = jd.parent, jd.child
            bp, bc = _body(_link(links, x, q, p)), _body(_link(links, x, q, c))
            for kind in (_ANG, _POS):
                rows = velocities[it, 2 * k + kind]
                v_p, w_p, v_c, w_c = _row3(rows, 0), _row3(rows, 1), _row3(rows, 2), _row3(rows, 3)
                g_v_p, g_w_p, g_v_c, g_w_c = _joint_velocities(g_v, g_w, p, c)
                g_corr, grad_p, grad_c = _response_vjp(
                    bp, bc, _velocity_constraint(kind, jd, bp, bc, v_p, w_p, v_c, w_c), g_v_p,
                    g_w_p, g_v_c, g_w_c)
                (more_p, more_c, g_parent_x, g_child_x, d_v_p, d_w_p, d_v_c,
                 d_w_c) = _velocity_constraint_vjp(kind, jd, bp, bc, v_p, w_p, v_c, w_c, g_corr)
                _acc_joint(g_v, g_w, p, c, d_v_p, d_w_p, d_v_c, d_w_c)
                _add_body_grad(body_grad, c, _body_grad_add(grad_c, more_c))
                if p >= 0:
                    _add_body_grad(body_grad, p, _body_grad_add(grad_p, more_p))
                _add_to(g_joints, j, _G_PARENT_X, g_parent_x)
                _add_to(g_joints, j, _G_CHILD_X, g_child_x)
    _flush_body_grads(links, q, body_grad, g_x, g_q, g_links)


# -- solvers ------------------------------------------------------------------------------------


@numba.njit(cache=True)
def _gauss_seidel(joints, links, order, x, q, lam, iterations, record, pose, lam_tape, active,
                  bound, second, table, h, mu, damper_pose, damper_mu):
    """``iterations`` Gauss-Seidel passes on x, q and the multipliers lam (2m, 3) in place;
    with ``record``, this substep's tape: pose (I, 3m, 2, 7), lam_tape (I, 3m, 3), active and
    bound (I, m). ``second``: the projections along the directions ``table`` and each pass
    followed by a damper pass (:func:`_dampers`: step h, multipliers mu, tape damper_pose,
    damper_mu)."""
    m = len(order)
    for it in range(iterations):
        for slot in range(3 * m):
            kind, k = _slot(slot, m)
            j = order[k]
            jd = _joint(joints, j)
            p, c = jd.parent, jd.child
            link_p, link_c = _link(links, x, q, p), _link(links, x, q, c)
            if second:
                bp, bc = _frame(link_p[0], link_p[1]), _frame(link_c[0], link_c[1])
            else:
                bp, bc = _body(link_p), _body(link_c)
            limit = 0.0
            if kind == _LIM:
                violated, limit = _violated_bound(jd, bp, bc)
                if record:
                    active[it, k] = violated
                    bound[it, k] = limit
                if not violated:
                    continue
            row = kind * m + j
            lam_j = _row3(lam, row) if kind != _LIM else _ZERO3
            if record:
                _record_pose(pose[it, slot, 0], link_p[0], link_p[1])
                _record_pose(pose[it, slot, 1], link_c[0], link_c[1])
                _put3(lam_tape[it], slot, lam_j)
            if second:
                dlam, dx_p, dphi_p, dx_c, dphi_c = _shake(kind, jd, _read_directions(table, j),
                                                          limit, bp, bc, lam_j, 1.0)
            else:
                corr = _project(kind, jd, limit, bp, bc, lam_j)
                dx_p, dphi_p, dx_c, dphi_c = _response(bp, bc, corr)
                dlam = corr.dlam
            _move_pair(x, q, p, c, link_p[0], link_p[1], link_c[0], link_c[1], dx_p, dphi_p,
                       dx_c, dphi_c)
            if kind != _LIM:
                _put3(lam, row, _add(lam_j, dlam))
        if second:
            _dampers(joints, order, table, h, x, q, mu, record, damper_pose[it], damper_mu[it])


@numba.njit(cache=True)
def _taped_link(links, pose, it, slot, side, link):
    """A link as :func:`_link` read it before a taped Gauss-Seidel projection."""
    if link < 0:
        return _ZERO3, (1.0, 0.0, 0.0, 0.0), _ZERO9, 0.0
    return ((pose[it, slot, side, 0], pose[it, slot, side, 1], pose[it, slot, side, 2]),
            (pose[it, slot, side, 3], pose[it, slot, side, 4], pose[it, slot, side, 5],
             pose[it, slot, side, 6]), _vec9(links, link, _L_INV_INERTIA),
            links[link, _L_INV_MASS])


@numba.njit(cache=True)
def _gauss_seidel_vjp(joints, links, order, iterations, pose, lam_tape, active, bound, g_x,
                      g_q, g_lam, g_links, g_joints, second, table, h, damper_pose, damper_mu,
                      g_mu, g_table):
    """The reverse of :func:`_gauss_seidel` from its tape: g_x, g_q, g_lam (and g_mu) go
    (in place) from the passes' end to their start; adds the parameters' cotangents (and the
    directions', to g_table)."""
    m = len(order)
    for it in range(iterations - 1, -1, -1):
        if second:
            _dampers_vjp(joints, order, table, h, damper_pose[it], damper_mu[it], g_x, g_q,
                         g_mu, g_table, g_joints)
        for slot in range(3 * m - 1, -1, -1):
            kind, k = _slot(slot, m)
            if kind == _LIM and not active[it, k]:
                continue
            j = order[k]
            jd = _joint(joints, j)
            p, c = jd.parent, jd.child
            link_p = _taped_link(links, pose, it, slot, 0, p)
            link_c = _taped_link(links, pose, it, slot, 1, c)
            limit = bound[it, k] if kind == _LIM else 0.0
            row = kind * m + j
            lam_j = _row3(lam_tape[it], slot) if kind != _LIM else _ZERO3
            if second:
                bp, bc = _frame(link_p[0], link_p[1]), _frame(link_c[0], link_c[1])
                d = _read_directions(table, j)
                _, _, dphi_p, _, dphi_c = _shake(kind, jd, d, limit, bp, bc, lam_j, 1.0)
            else:
                bp, bc = _body(link_p), _body(link_c)
                corr = _project(kind, jd, limit, bp, bc, lam_j)
                _, dphi_p, _, dphi_c = _response(bp, bc, corr)
            g_q_c, g_dphi_c = _moved_vjp(link_c[1], dphi_c, _row4(g_q, c))
            _put4(g_q, c, g_q_c)
            g_dx_p, g_dphi_p = _ZERO3, _ZERO3
            if p >= 0:
                g_q_p, g_dphi_p = _moved_vjp(link_p[1], dphi_p, _row4(g_q, p))
                _put4(g_q, p, g_q_p)
                g_dx_p = _row3(g_x, p)
            # λ after = λ before + Δλ: the multiplier's cotangent also reaches Δλ
            g_dlam = _row3(g_lam, row) if kind != _LIM else _ZERO3
            if second:
                (g_x_p, g_r_p, g_x_c, g_r_c, g_parent_x, g_child_x, g_compliance, g_lam_j,
                 g_directions) = _shake_vjp(kind, jd, d, limit, bp, bc, lam_j, 1.0, g_dx_p,
                                             g_dphi_p, _row3(g_x, c), g_dphi_c, g_dlam)
                _add_shake_cotangent(g_table, j, kind, g_directions)
                _add_frame_cotangent(g_x, g_q, p, link_p[1], g_x_p, g_r_p)
                _add_frame_cotangent(g_x, g_q, c, link_c[1], g_x_c, g_r_c)
            else:
                g_corr, grad_p, grad_c = _response_vjp(bp, bc, corr, g_dx_p, g_dphi_p,
                                                       _row3(g_x, c), g_dphi_c)
                more_p, more_c, g_parent_x, g_child_x, g_compliance, g_lam_j = _project_vjp(
                    kind, jd, limit, bp, bc, lam_j, _Correction(g_corr[0], g_corr[1], g_corr[2],
                                                                g_dlam))
                if p >= 0:
                    _add_body_cotangent(g_x, g_q, g_links, p, _body_cotangent(
                        link_p[1], link_p[2], _body_grad_add(grad_p, more_p)))
                _add_body_cotangent(g_x, g_q, g_links, c, _body_cotangent(
                    link_c[1], link_c[2], _body_grad_add(grad_c, more_c)))
            if kind != _LIM:
                _acc3(g_lam, row, g_lam_j)
            _add_to(g_joints, j, _G_PARENT_X, g_parent_x)
            _add_to(g_joints, j, _G_CHILD_X, g_child_x)
            g_joints[j, _G_COMPLIANCE] += g_compliance


@numba.njit(cache=True)
def _jacobi_count(joints, order, active, count):
    """count (n,): the constraints of a Jacobi pass on each link (active: its limits)."""
    count[:] = 0.0
    for k in range(len(order)):
        j = order[k]
        touching = 3.0 if active[k] else 2.0
        count[int(joints[j, _J_CHILD])] += touching
        parent = int(joints[j, _J_PARENT])
        if parent >= 0:
            count[parent] += touching


@numba.njit(cache=True)
def _jacobi_scale(jd, count):
    return 1.0 / max(count[jd.child], count[jd.parent] if jd.parent >= 0 else 0.0)


@numba.njit(cache=True)
def _pass_bodies(links, x, q, jd, second):
    """A joint's two bodies as a pass reads them: :func:`_frame` in the second order."""
    link_p, link_c = _link(links, x, q, jd.parent), _link(links, x, q, jd.child)
    if second:
        return _frame(link_p[0], link_p[1]), _frame(link_c[0], link_c[1])
    return _body(link_p), _body(link_c)


@numba.njit(cache=True)
def _jacobi(joints, links, order, x, q, lam, iterations, dx, dphi, count, record, pass_x,
            pass_q, pass_lam, active, bound, second, table, h, mu, damper_pose, damper_mu):
    """``iterations`` averaged Jacobi passes on x, q, lam in place (step._jacobi_pass); dx,
    dphi, count scratch; active, bound (I, m) always written (the pass reads them), the
    pass-start state into pass_x, pass_q, pass_lam (I, ...) with ``record``; ``second`` as
    in :func:`_gauss_seidel`."""
    m = len(order)
    for it in range(iterations):
        if record:
            pass_x[it] = x
            pass_q[it] = q
            pass_lam[it] = lam
        for k in range(m):
            jd = _joint(joints, order[k])
            bp, bc = _pass_bodies(links, x, q, jd, second)
            violated, limit = _violated_bound(jd, bp, bc)
            active[it, k] = violated
            bound[it, k] = limit
        _jacobi_count(joints, order, active[it], count)
        dx[:] = 0.0
        dphi[:] = 0.0
        for k in range(m):
            j = order[k]
            jd = _joint(joints, j)
            p, c = jd.parent, jd.child
            bp, bc = _pass_bodies(links, x, q, jd, second)
            scale = _jacobi_scale(jd, count)
            for kind in (_POS, _ANG, _LIM):
                if kind == _LIM and not active[it, k]:
                    continue
                row = kind * m + j
                lam_j = _row3(lam, row) if kind != _LIM else _ZERO3
                if second:
                    dlam, dx_p, dphi_p, dx_c, dphi_c = _shake(
                        kind, jd, _read_directions(table, j), bound[it, k], bp, bc, lam_j, scale)
                else:
                    corr = _scaled(scale, _project(kind, jd, bound[it, k], bp, bc, lam_j))
                    dx_p, dphi_p, dx_c, dphi_c = _response(bp, bc, corr)
                    dlam = corr.dlam
                _acc_joint(dx, dphi, p, c, dx_p, dphi_p, dx_c, dphi_c)
                if kind != _LIM:  # read by no other constraint of the pass
                    _put3(lam, row, _add(lam_j, dlam))
        for i in range(len(x)):
            x_i, q_i = _moved(_row3(x, i), _row4(q, i), _row3(dx, i), _row3(dphi, i))
            _put3(x, i, x_i)
            _put4(q, i, q_i)
        if second:
            _dampers(joints, order, table, h, x, q, mu, record, damper_pose[it], damper_mu[it])


@numba.njit(cache=True)
def _jacobi_vjp(joints, links, order, iterations, pass_x, pass_q, pass_lam, active, bound,
                count, dphi, corr_rows, g_dphi, body_grad, g_x, g_q, g_lam, g_links, g_joints,
                second, table, h, damper_pose, damper_mu, g_mu, g_table):
    """The reverse of :func:`_jacobi` from its tape (as :func:`_gauss_seidel_vjp`); count,
    dphi, corr_rows (3m, 4, 3), g_dphi, body_grad (n, 22) scratch."""
    m = len(order)
    n = len(g_x)
    for it in range(iterations - 1, -1, -1):
        if second:
            _dampers_vjp(joints, order, table, h, damper_pose[it], damper_mu[it], g_x, g_q,
                         g_mu, g_table, g_joints)
        x, q, lam = pass_x[it], pass_q[it], pass_lam[it]
        _jacobi_count(joints, order, active[it], count)
        dphi[:] = 0.0
        for k in range(m):
            j = order[k]
            jd = _joint(joints, j)
            p, c = jd.parent, jd.child
            bp, bc = _pass_bodies(links, x, q, jd, second)
            scale = _jacobi_scale(jd, count)
            for kind in (_POS, _ANG, _LIM):
                if kind == _LIM and not active[it, k]:
                    continue
                lam_j = _row3(lam, kind * m + j) if kind != _LIM else _ZERO3
                if second:
                    _, _, dphi_p, _, dphi_c = _shake(kind, jd, _read_directions(table, j),
                                                     bound[it, k], bp, bc, lam_j, scale)
                else:
                    corr = _scaled(scale, _project(kind, jd, bound[it, k], bp, bc, lam_j))
                    rows = corr_rows[3 * k + kind]
                    _put3(rows, 0, corr.p)
                    _put3(rows, 1, corr.tau_c)
                    _put3(rows, 2, corr.tau_p)
                    _put3(rows, 3, corr.dlam)
                    _, dphi_p, _, dphi_c = _response(bp, bc, corr)
                _acc3(dphi, c, dphi_c)
                if p >= 0:
                    _acc3(dphi, p, dphi_p)
        # every link moved by the pass's sums: g_Δx is g_x, g_Δφ through the update
        for i in range(n):
            g_q_i, g_dphi_i = _moved_vjp(_row4(q, i), _row3(dphi, i), _row4(g_q, i))
            _put4(g_q, i, g_q_i)
            _put3(g_dphi, i, g_dphi_i)
        body_grad[:] = 0.0
        for k in range(m):
            j = order[k]
            jd = _joint(joints, j)
            p, c = jd.parent, jd.child
            bp, bc = _pass_bodies(links, x, q, jd, second)
            scale = _jacobi_scale(jd, count)
            g_dx_p, g_dphi_p = ((_row3(g_x, p), _row3(g_dphi, p)) if p >= 0
                                else (_ZERO3, _ZERO3))
            for kind in (_POS, _ANG, _LIM):
                if kind == _LIM and not active[it, k]:
                    continue
                row = kind * m + j
                g_dlam = _row3(g_lam, row) if kind != _LIM else _ZERO3
                lam_j = _row3(lam, row) if kind != _LIM else _ZERO3
                if second:
                    (g_x_p, g_r_p, g_x_c, g_r_c, g_parent_x, g_child_x, g_compliance, g_lam_j,
                     g_directions) = _shake_vjp(kind, jd, _read_directions(table, j),
                                                bound[it, k], bp, bc, lam_j, scale, g_dx_p,
                                                g_dphi_p, _row3(g_x, c), _row3(g_dphi, c),
                                                g_dlam)
                    _add_shake_cotangent(g_table, j, kind, g_directions)
                    grad_c = _BodyGrad(g_x_c, g_r_c, _ZERO9, 0.0)
                    grad_p = _BodyGrad(g_x_p, g_r_p, _ZERO9, 0.0)
                else:
                    rows = corr_rows[3 * k + kind]
                    corr = _Correction(_row3(rows, 0), _row3(rows, 1), _row3(rows, 2),
                                       _row3(rows, 3))
                    g_corr, grad_p, grad_c = _response_vjp(bp, bc, corr, g_dx_p, g_dphi_p,
                                                           _row3(g_x, c), _row3(g_dphi, c))
                    more_p, more_c, g_parent_x, g_child_x, g_compliance, g_lam_j = _project_vjp(
                        kind, jd, bound[it, k], bp, bc, lam_j,
                        _scaled(scale, _Correction(g_corr[0], g_corr[1], g_corr[2], g_dlam)))
                    grad_c = _body_grad_add(grad_c, more_c)
                    grad_p = _body_grad_add(grad_p, more_p)
                if kind != _LIM:
                    _acc3(g_lam, row, g_lam_j)
                _add_to(g_joints, j, _G_PARENT_X, g_parent_x)
                _add_to(g_joints, j, _G_CHILD_X, g_child_x)
                g_joints[j, _G_COMPLIANCE] += g_compliance
                _add_body_grad(body_grad, c, grad_c)
                if p >= 0:
                    _add_body_grad(body_grad, p, grad_p)
        _flush_body_grads(links, q, body_grad, g_x, g_q, g_links)


@numba.njit(cache=True)
def _add_body_grad(rows, i, grad):
    """Row i of a body-gradient table (n, 22: x, r, a, inv_mass) += grad."""
    _add_to(rows, i, 0, grad.x)
    _add_to(rows, i, 3, grad.r)
    _add_to(rows, i, 12, grad.a)
    rows[i, 21] += grad.inv_mass


@numba.njit(cache=True)
def _flush_body_grads(links, q, body_grad, g_x, g_q, g_links):
    """Sends every link's summed body gradient (body_grad, n × 22) at orientations q to
    its x, q and inverse mass and inertia cotangents."""
    for i in range(len(q)):
        grad = _BodyGrad(_vec3(body_grad, i, 0), _vec9(body_grad, i, 3),
                         _vec9(body_grad, i, 12), body_grad[i, 21])
        _add_body_cotangent(g_x, g_q, g_links, i, _body_cotangent(
            _row4(q, i), _vec9(links, i, _L_INV_INERTIA), grad))


# -- tables, substeps and entry points --------------------------------------------------------


@numba.njit(cache=True)
def _tables(model, params, h):
    """(joint table (m, _JOINT_WIDTH), link table (n, _LINK_WIDTH)) of a step."""
    (parent, child, _, prismatic, parent_axis, child_axis, parent_normal, child_normal,
     parent_rotation, child_rotation, lower, upper, limited, friction, _) = model
    mass, inertia, parent_x, child_x, damping, compliance = params
    m, n = len(parent), len(mass)
    joints = np.empty((m, _JOINT_WIDTH))
    for j in range(m):
        joints[j, _J_PARENT] = parent[j]
        joints[j, _J_CHILD] = child[j]
        joints[j, _J_PRISMATIC] = 1.0 if prismatic[j] else 0.0
        joints[j, _J_LIMITED] = 1.0 if limited[j] else 0.0
        joints[j, _J_LOWER] = lower[j]
        joints[j, _J_UPPER] = upper[j]
        joints[j, _J_FRICTION] = friction[j]
        joints[j, _J_DAMPING] = damping[j]
        joints[j, _J_COMPLIANCE] = compliance[j] / (h * h)
        joints[j, _J_PARENT_AXIS:_J_PARENT_AXIS + 3] = parent_axis[j]
        joints[j, _J_CHILD_AXIS:_J_CHILD_AXIS + 3] = child_axis[j]
        joints[j, _J_PARENT_NORMAL:_J_PARENT_NORMAL + 3] = parent_normal[j]
        joints[j, _J_CHILD_NORMAL:_J_CHILD_NORMAL + 3] = child_normal[j]
        joints[j, _J_PARENT_X:_J_PARENT_X + 3] = parent_x[j]
        joints[j, _J_CHILD_X:_J_CHILD_X + 3] = child_x[j]
        joints[j, _J_PARENT_ROTATION:_J_PARENT_ROTATION + 9] = parent_rotation[j].ravel()
        joints[j, _J_CHILD_ROTATION:_J_CHILD_ROTATION + 9] = child_rotation[j].ravel()
    links = np.empty((n, _LINK_WIDTH))
    for i in range(n):
        links[i, _L_INV_MASS] = 1.0 / mass[i]
        for r in range(3):
            for c in range(3):
                links[i, _L_INERTIA + 3 * r + c] = 0.5 * (inertia[i, r, c] + inertia[i, c, r])
        inverse = _inverse(_vec9(links, i, _L_INERTIA))
        for d in range(9):
            links[i, _L_INV_INERTIA + d] = inverse[d]
    return joints, links


@numba.njit(cache=True)
def _work(n, m, reverse):
    r = n if reverse else 0
    rm = m if reverse else 0
    return _Work(
        np.empty((n, 3)), np.empty((n, 4)), np.empty((n, 3)), np.empty((n, 3)),
        np.zeros((2 * m, 3)), np.empty((n, 3)), np.empty((n, 3)), np.empty(n),
        np.zeros(m, dtype=np.bool_), np.zeros(m), np.empty((3 * rm, 4, 3)), np.empty((r, 22)),
        np.empty((r, 3)), np.empty((r, 3, 3)), np.empty((r, 3)), np.empty((r, 4)),
        np.empty((r, 3)), np.empty((r, 3)), np.empty((r, 3)), np.empty((r, 4)),
        np.zeros((2 * rm, 3)), np.zeros((r, _LINK_WIDTH)), np.zeros((rm, _JOINT_GRAD_WIDTH)),
        np.zeros(rm), np.zeros((m, _DIRECTIONS_WIDTH)), np.zeros(m),
        np.zeros((rm, _DIRECTIONS_WIDTH)), np.zeros(rm), np.zeros((r, 3)), np.zeros((r, 3)))


@numba.njit(cache=True)
def _tape(n, m, substeps, iterations, jacobi, second, record):
    s = substeps if record else 1
    gs = 0 if jacobi else s
    jc = s if jacobi else 0
    n2, i2 = (n, iterations) if second else (0, 0)
    iv = iterations if second and record else 0
    return _Tape(
        np.empty((s, n, 3)), np.empty((s, n, 4)), np.empty((s, n, 3)), np.empty((s, n, 3)),
        np.empty((s, n, 4)), np.empty((s, m, 4, 3)), np.empty((gs, iterations, 3 * m, 2, 7)),
        np.empty((gs, iterations, 3 * m, 3)), np.empty((jc, iterations, n, 3)),
        np.empty((jc, iterations, n, 4)), np.empty((jc, iterations, 2 * m, 3)),
        np.zeros((s, iterations, m), dtype=np.bool_), np.zeros((s, iterations, m)),
        np.empty((s, n2, 3)), np.empty((s, i2, m, 2, 7)), np.empty((s, i2, m)),
        np.empty((2, n, 3)), np.empty((2, n, 4)), np.empty((2, n, 3)),
        np.empty((iv, 2 * m, 4, 3)))


@numba.njit(cache=True)
def _start(q_in, q):
    """q <- the unit orientations of ``q_in``; returns the first link whose orientation
    has no direction (norm 0 or NaN), or -1."""
    for i in range(len(q)):
        raw = _row4(q_in, i)
        if not (raw[0] * raw[0] + raw[1] * raw[1] + raw[2] * raw[2] + raw[3] * raw[3]) > 0.0:
            return i
        _put4(q, i, _quat_normalize(raw))
    return -1


@numba.njit(cache=True)
def _kicked(joints, links, gravity, h, x, q, v, w, action, wk, tape, record, side, sign):
    """The second order's half kick ``side`` (0 before the substeps, 1 after) on v, w."""
    if record:
        tape.kick_x[side] = x
        tape.kick_q[side] = q
        tape.kick_w[side] = w
    # gravity and actuation over ±h/2, no gyroscopic term
    _accelerate(joints, links, gravity, sign * 0.5 * h, x, q, v, w, action, wk.force, wk.torque,
                0.0)


@numba.njit(cache=True)
def _forward(joints, links, order, gravity, h, x, q, v, w, action, substeps, iterations,
             jacobi, second, wk, tape, record):
    """``substeps`` substeps on x, q, v, w in place (step._substep), in the second order
    between two half kicks, the second followed by the joints' velocity passes."""
    n = len(x)
    if second:
        _kicked(joints, links, gravity, h, x, q, v, w, action, wk, tape, record, 0, -1.0)
    for sub in range(substeps):
        at = sub if record else 0
        wk.x0[:] = x
        wk.q0[:] = q
        if record:
            tape.x0[sub] = x
            tape.q0[sub] = q
            tape.w0[sub] = w
            if second:
                tape.v0[sub] = v
        if second:
            _fill_directions(joints, links, wk.x0, wk.q0, v, w, wk.table)
        # the predicted velocities replace v, w; damping and friction act on them before
        # the projection, which carries their impulses through the joints
        _accelerate(joints, links, gravity, h, wk.x0, wk.q0, v, w, action, wk.force, wk.torque,
                    1.0)
        _joint_velocity_terms(joints, links, order, h, not second, wk.x0, wk.q0, v, w, record,
                              tape.joint_v[at])
        if record:
            tape.w_pred[sub] = w
        for i in range(n):
            x_i, q_i = _moved(_row3(wk.x0, i), _row4(wk.q0, i), _mul(h, _row3(v, i)),
                              _mul(h, _row3(w, i)))
            _put3(x, i, x_i)
            _put4(q, i, q_i)
        wk.lam[:] = 0.0
        wk.mu[:] = 0.0
        if jacobi:
            _jacobi(joints, links, order, x, q, wk.lam, iterations, wk.dx, wk.dphi, wk.count,
                    record, tape.pass_x[at], tape.pass_q[at], tape.pass_lam[at],
                    tape.active[at], tape.bound[at], second, wk.table, h, wk.mu,
                    tape.damper_pose[at], tape.damper_mu[at])
        else:
            _gauss_seidel(joints, links, order, x, q, wk.lam, iterations, record,
                          tape.pose[at], tape.lam[at], tape.active[at], tape.bound[at], second,
                          wk.table, h, wk.mu, tape.damper_pose[at], tape.damper_mu[at])
        if record:
            tape.q_end[sub] = q
        for i in range(n):
            _put3(v, i, _over(_sub(_row3(x, i), _row3(wk.x0, i)), h))
            delta = _quat_multiply(_row4(q, i), _conjugate(_row4(wk.q0, i)))
            # the second order reads ω back as the inverse of the Cayley update that moved q
            scale = 2.0 / (h * delta[0]) if second else (2.0 / h) * math.copysign(1.0, delta[0])
            _put3(w, i, _mul(scale, (delta[1], delta[2], delta[3])))
    if second:
        _kicked(joints, links, gravity, h, x, q, v, w, action, wk, tape, record, 1, 1.0)
        # the kick moves the links as free bodies; the joints' impulses over its half step
        # leave the velocities they allow (the poses stay)
        _velocity_passes(joints, links, order, iterations, x, q, v, w, record, tape.velocity_v)


@numba.njit(cache=True)
def _kick_reverse(joints, links, h, action, wk, tape, side, sign):
    _accelerate_vjp(joints, links, sign * 0.5 * h, tape.kick_x[side], tape.kick_q[side],
                    tape.kick_w[side], action, 0.0, wk.force, wk.torque, wk.g_matrix, wk.g_x,
                    wk.g_q, wk.g_v, wk.g_w, wk.g_links, wk.g_joints, wk.g_action)


@numba.njit(cache=True)
def _reverse(joints, links, order, h, action, substeps, iterations, jacobi, second, wk, tape):
    """The cotangents in wk.g_* of the step's end state -> of its start state, substep by
    substep in reverse."""
    n = len(wk.g_x)
    if second:
        # the closing kick and velocity passes act at the end poses (kick_x, kick_q [1])
        _velocity_passes_vjp(joints, links, order, iterations, tape.kick_x[1], tape.kick_q[1],
                             tape.velocity_v, wk.body_grad, wk.g_x, wk.g_q, wk.g_v, wk.g_w,
                             wk.g_links, wk.g_joints)
        _kick_reverse(joints, links, h, action, wk, tape, 1, 1.0)
    for sub in range(substeps - 1, -1, -1):
        x0, q0 = tape.x0[sub], tape.q0[sub]
        wk.g_lam[:] = 0.0
        if second:
            wk.g_mu[:] = 0.0
            wk.g_table[:] = 0.0
            _fill_directions(joints, links, x0, q0, tape.v0[sub], tape.w0[sub], wk.table)
        # v = (x - x0)/h, ω = 2 vec(q q0⁻¹)/h (second order: 2 vec(δq) / (h δq_w))
        for i in range(n):
            g_v = _row3(wk.g_v, i)
            _put3(wk.g_x0, i, _over(_neg(g_v), h))
            _acc3(wk.g_x, i, _over(g_v, h))
            conj = _conjugate(_row4(q0, i))
            q_end = _row4(tape.q_end[sub], i)
            delta = _quat_multiply(q_end, conj)
            g_w = _row3(wk.g_w, i)
            if second:
                scale = 2.0 / (h * delta[0])
                g_delta = (-scale * _dot((delta[1], delta[2], delta[3]), g_w) / delta[0],
                           scale * g_w[0], scale * g_w[1], scale * g_w[2])
            else:
                g_u = _mul((2.0 / h) * math.copysign(1.0, delta[0]), g_w)
                g_delta = (0.0, g_u[0], g_u[1], g_u[2])
            g_q, g_conj = _quat_multiply_vjp(q_end, conj, g_delta)
            _acc4(wk.g_q, i, g_q)
            _put4(wk.g_q0, i, _conjugate(g_conj))
        wk.g_v[:] = 0.0
        wk.g_w[:] = 0.0
        if jacobi:
            _jacobi_vjp(joints, links, order, iterations, tape.pass_x[sub], tape.pass_q[sub],
                        tape.pass_lam[sub], tape.active[sub], tape.bound[sub], wk.count,
                        wk.dphi, wk.corr, wk.g_dphi, wk.body_grad, wk.g_x, wk.g_q, wk.g_lam,
                        wk.g_links, wk.g_joints, second, wk.table, h, tape.damper_pose[sub],
                        tape.damper_mu[sub], wk.g_mu, wk.g_table)
        else:
            _gauss_seidel_vjp(joints, links, order, iterations, tape.pose[sub], tape.lam[sub],
                              tape.active[sub], tape.bound[sub], wk.g_x, wk.g_q, wk.g_lam,
                              wk.g_links, wk.g_joints, second, wk.table, h,
                              tape.damper_pose[sub], tape.damper_mu[sub], wk.g_mu, wk.g_table)
        if second:
            _directions_table_vjp(joints, links, x0, q0, tape.v0[sub], tape.w0[sub], wk.g_table,
                                  wk.g_x0, wk.g_q0, wk.g_v0, wk.g_w0, wk.g_links, wk.g_joints)
        # the prediction x0 + h v, normalize(q0 + ½ h (0, ω) ⊗ q0)
        for i in range(n):
            g_q, g_dphi = _moved_vjp(_row4(q0, i), _mul(h, _row3(tape.w_pred[sub], i)),
                                     _row4(wk.g_q, i))
            _put4(wk.g_q, i, g_q)
            _put3(wk.g_w, i, _mul(h, g_dphi))
            _put3(wk.g_v, i, _mul(h, _row3(wk.g_x, i)))
        _joint_velocity_terms_vjp(joints, links, order, h, not second, x0, q0, tape.joint_v[sub],
                                  wk.g_x, wk.g_q, wk.g_v, wk.g_w, wk.g_links, wk.g_joints)
        _accelerate_vjp(joints, links, h, x0, q0, tape.w0[sub], action, 1.0, wk.force,
                        wk.torque, wk.g_matrix, wk.g_x, wk.g_q, wk.g_v, wk.g_w, wk.g_links,
                        wk.g_joints, wk.g_action)
        for i in range(n):
            _acc3(wk.g_x, i, _row3(wk.g_x0, i))
            _acc4(wk.g_q, i, _row4(wk.g_q0, i))
            if second:  # the dampers' start rates
                _acc3(wk.g_v, i, _row3(wk.g_v0, i))
                _acc3(wk.g_w, i, _row3(wk.g_w0, i))
    if second:
        _kick_reverse(joints, links, h, action, wk, tape, 0, -1.0)


@numba.njit(cache=True)
def _gravity(model):
    gravity = model[14]
    return (gravity[0], gravity[1], gravity[2])


@numba.njit(cache=True)
def step(model, params, x, q, v, w, action, h, substeps, iterations, jacobi, second):
    """The state after ``substeps`` substeps of length h [s] (see :mod:`sim_pbd.step`):
    (x (n, 3), q (n, 4), v, w (n, 3), bad), bad the first link whose orientation cannot be
    normalized (the state then is not stepped) or -1. ``model`` and ``params`` are
    :class:`ModelArrays` and :class:`Params` as plain tuples; ``jacobi`` picks the solver,
    ``second`` the scheme (True: "second_order")."""
    joints, links = _tables(model, params, h)
    n, m = len(x), len(action)
    x_out, q_out, v_out, w_out = x.copy(), np.empty((n, 4)), v.copy(), w.copy()
    bad = _start(q, q_out)
    if bad < 0:
        _forward(joints, links, model[2], _gravity(model), h, x_out, q_out, v_out, w_out,
                 action, substeps, iterations, jacobi, second, _work(n, m, False),
                 _tape(n, m, substeps, iterations, jacobi, second, False), False)
    return x_out, q_out, v_out, w_out, bad


@numba.njit(cache=True)
def step_vjp(model, params, x, q, v, w, action, h, substeps, iterations, jacobi, second, g_x,
             g_q, g_v, g_w):
    """The cotangents of the step's inputs given those of its output state ``g_*``:
    (g_x, g_q, g_v, g_w, g_action, g_mass, g_inertia, g_parent_x, g_child_x, g_damping,
    g_compliance, bad), g_inertia symmetric, bad as in :func:`step` (the cotangents are
    then zero)."""
    joints, links = _tables(model, params, h)
    n, m = len(x), len(action)
    wk = _work(n, m, True)
    x_now, q_now, v_now, w_now = x.copy(), np.empty((n, 4)), v.copy(), w.copy()
    bad = _start(q, q_now)
    g_q_in = np.zeros((n, 4))
    if bad < 0:
        tape = _tape(n, m, substeps, iterations, jacobi, second, True)
        _forward(joints, links, model[2], _gravity(model), h, x_now, q_now, v_now, w_now,
                 action, substeps, iterations, jacobi, second, wk, tape, True)
        wk.g_x[:] = g_x
        wk.g_q[:] = g_q
        wk.g_v[:] = g_v
        wk.g_w[:] = g_w
        _reverse(joints, links, model[2], h, action, substeps, iterations, jacobi, second, wk,
                 tape)
        for i in range(n):
            _put4(g_q_in, i, _quat_normalize_vjp(_row4(q, i), _row4(wk.g_q, i)))
    else:
        for g in (wk.g_x, wk.g_v, wk.g_w):
            g[:] = 0.0
    mass = params[0]
    g_links, g_joints = wk.g_links, wk.g_joints
    g_inertia = np.empty((n, 3, 3))
    for i in range(n):
        # through I⁻¹ = inv(sym I): -I⁻ᵀ G I⁻ᵀ, then the symmetric part
        inverse = _vec9(links, i, _L_INV_INERTIA)
        total = _msub(_vec9(g_links, i, _L_INERTIA),
                      _mm(_mm(_mt(inverse), _vec9(g_links, i, _L_INV_INERTIA)), _mt(inverse)))
        total = _mscale(0.5, _madd(total, _mt(total)))
        for r in range(3):
            for c in range(3):
                g_inertia[i, r, c] = total[3 * r + c]
    return (wk.g_x, g_q_in, wk.g_v, wk.g_w, wk.g_action, -g_links[:, _L_INV_MASS] / mass**2,
            g_inertia, g_joints[:, _G_PARENT_X:_G_PARENT_X + 3].copy(),
            g_joints[:, _G_CHILD_X:_G_CHILD_X + 3].copy(), g_joints[:, _G_DAMPING].copy(),
            g_joints[:, _G_COMPLIANCE] / (h * h), bad)
