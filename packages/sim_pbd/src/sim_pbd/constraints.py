"""One XPBD constraint projection of one joint, and its VJP.

A projection reads the two links as :class:`Body` records (the world: zero inverse mass and
inertia) and returns a :class:`Correction`, the impulse that moves them: the child's centre
of mass moves by ``m_c⁻¹ p`` and turns by ``A_c τ_c`` (A = R I⁻¹ Rᵀ, the world-frame inverse
inertia), the parent by ``-m_p⁻¹ p`` and ``-A_p τ_p`` (:func:`response`). The same response
maps velocity-level impulses (damping, friction, actuation) to velocity changes.

Constraints (XPBD, Müller et al. 2020, with the paper's joint constraints, Eqs. 1 and 11):

- positional: the joint origins coincide, c = p_c - p_p (prismatic: the part of c
  perpendicular to the axis);
- angular: revolute axes aligned, c = a_p × a_c; prismatic frames equal,
  c = vee(R_rel - R_relᵀ)/2 (sin of the error angle times its axis);
- limit: the joint coordinate inside [lower, upper], projected only when violated.

The positional and angular constraints are solved as 3-vector blocks with the full effective
mass matrix K = Σ (m⁻¹ 1 + [r]×ᵀ A [r]×) instead of Müller's scalar form along n = c/|c|:
along any direction n, nᵀKn is his generalized inverse mass w = m⁻¹ + (r×n)ᵀ A (r×n), but the
block form has no c/|c| (whose derivative blows up as c -> 0, exactly where a converged
joint sits) and corrects an isolated joint in one projection. Where a direction is free (a
revolute joint's axis, a prismatic joint's axis for the positional block) the block is
solved in the plane perpendicular to the axis a: (P K P + α̃ P + k a aᵀ) Δλ = -P (c + α̃ λ),
P = 1 - a aᵀ; k > 0 only fills the null direction (Δλ·a = 0 whatever k). XPBD compliance
α̃ = α / h² with the multiplier λ accumulated over the iterations of a substep.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .kinematics import (
    JointFrames,
    joint_coordinate,
    joint_coordinate_vjp,
    joint_jacobian,
    joint_jacobian_vjp,
)
from .rotations import skew, skew_vjp

__all__ = [
    "MAX_DAMPING_PER_SUBSTEP",
    "Body",
    "BodyGrad",
    "Correction",
    "world_body",
    "response",
    "response_vjp",
    "positional",
    "positional_vjp",
    "angular",
    "angular_vjp",
    "limit",
    "limit_vjp",
    "damper",
    "damper_vjp",
    "velocity_positional",
    "velocity_positional_vjp",
    "velocity_angular",
    "velocity_angular_vjp",
    "joint_mass",
    "joint_mass_vjp",
]


MAX_DAMPING_PER_SUBSTEP = 1.5
"""The cap on k w of a joint's damping impulse -k ċ (:mod:`sim_pbd.step`): the share of the
joint's rate one substep's impulse removes from the two free links (explicit damping
diverges beyond 2)."""


class Body(NamedTuple):
    """A link as a projection reads it: centre of mass x [m] (3,), rotation r (3, 3), world
    inverse inertia a [1/(kg m²)] (3, 3), inverse mass [1/kg]."""

    x: np.ndarray
    r: np.ndarray
    a: np.ndarray
    inv_mass: float


class BodyGrad(NamedTuple):
    """Cotangents of a :class:`Body`'s fields."""

    x: np.ndarray
    r: np.ndarray
    a: np.ndarray
    inv_mass: float

    def __add__(self, other):
        return BodyGrad(self.x + other.x, self.r + other.r, self.a + other.a,
                        self.inv_mass + other.inv_mass)


class Correction(NamedTuple):
    """An impulse pair: linear p (3,) at the levers, angular τ_c, τ_p (3,) (the child turns by
    A_c τ_c, the parent by -A_p τ_p) and the multiplier increment Δλ (3,) (zeros where the
    constraint keeps no multiplier)."""

    p: np.ndarray
    tau_c: np.ndarray
    tau_p: np.ndarray
    dlam: np.ndarray

    def scaled(self, factor: float) -> Correction:
        """Every field times ``factor`` (Jacobi averaging)."""
        return Correction(*(factor * field for field in self))


def world_body() -> Body:
    """The world as a parent: fixed, infinite mass."""
    return Body(np.zeros(3), np.eye(3), np.zeros((3, 3)), 0.0)


def response(body_p: Body, body_c: Body, corr: Correction):
    """(Δx_p, Δφ_p, Δx_c, Δφ_c), each (3,): the links' moves [m] and turns [rad] (or velocity
    changes for a velocity-level impulse) under ``corr``."""
    return (-body_p.inv_mass * corr.p, -(body_p.a @ corr.tau_p),
            body_c.inv_mass * corr.p, body_c.a @ corr.tau_c)


def response_vjp(body_p: Body, body_c: Body, corr: Correction, g_dx_p, g_dphi_p, g_dx_c,
                 g_dphi_c):
    """(∂L/∂corr as a Correction with zero dlam, BodyGrad of the parent, of the child)."""
    g_corr = Correction(body_c.inv_mass * g_dx_c - body_p.inv_mass * g_dx_p,
                        body_c.a.T @ g_dphi_c, -(body_p.a.T @ g_dphi_p), np.zeros(3))
    g_p = BodyGrad(np.zeros(3), np.zeros((3, 3)), -np.outer(g_dphi_p, corr.tau_p),
                   -float(g_dx_p @ corr.p))
    g_c = BodyGrad(np.zeros(3), np.zeros((3, 3)), np.outer(g_dphi_c, corr.tau_c),
                   float(g_dx_c @ corr.p))
    return g_corr, g_p, g_c


def _lever_term(lever, a):
    """[r]×ᵀ A [r]×: the rotational part of the effective inverse mass at lever r."""
    s = skew(lever)
    return s.T @ a @ s


def _lever_term_vjp(lever, a, g):
    s = skew(lever)
    return skew_vjp(a @ s @ g.T + a.T @ s @ g), s @ g @ s.T


def _block(k, axis, fill: float, compliance: float, e):
    """Δλ solving the (projected) block system; ``axis`` None for a full 3D block."""
    if axis is None:
        return -np.linalg.solve(k + compliance * np.eye(3), e)
    proj = np.eye(3) - np.outer(axis, axis)
    matrix = proj @ k @ proj + compliance * proj + fill * np.outer(axis, axis)
    return -np.linalg.solve(matrix, proj @ e)


def _block_vjp(k, axis, fill: float, compliance: float, e, g_dlam):
    """(g_k, g_axis or None, g_compliance, g_e) of :func:`_block` (``fill`` is a constant:
    the result does not depend on it)."""
    if axis is None:
        matrix = k + compliance * np.eye(3)
        dlam = -np.linalg.solve(matrix, e)
        y = np.linalg.solve(matrix.T, g_dlam)
        g_matrix = -np.outer(y, dlam)
        return g_matrix, None, float(np.trace(g_matrix)), -y
    proj = np.eye(3) - np.outer(axis, axis)
    matrix = proj @ k @ proj + compliance * proj + fill * np.outer(axis, axis)
    dlam = -np.linalg.solve(matrix, proj @ e)
    y = np.linalg.solve(matrix.T, g_dlam)
    g_rhs = -y
    g_matrix = -np.outer(y, dlam)
    g_proj = (np.outer(g_rhs, e) + g_matrix @ proj @ k.T + k.T @ proj @ g_matrix
              + compliance * g_matrix)
    g_outer = fill * g_matrix - g_proj
    g_axis = (g_outer + g_outer.T) @ axis
    return (proj @ g_matrix @ proj, g_axis, float(np.sum(g_matrix * proj)), proj @ g_rhs)


def positional(frames: JointFrames, j: int, body_p: Body, body_c: Body, dir_p: Body,
               dir_c: Body, joint_parent_x, joint_child_x, compliance: float,
               lam) -> Correction:
    """The positional projection of joint j: the gap between the joint origins of the current
    bodies ``body_p``, ``body_c`` corrected along the levers, axis and inverse inertias of the
    direction bodies ``dir_p``, ``dir_c`` (the same bodies, or the substep's start for the
    second-order scheme); ``joint_parent_x``, ``joint_child_x`` the origins in the two body
    frames [m] (3,), ``compliance`` α̃ = α/h², ``lam`` its multiplier so far in the substep
    (3,). Apply the result with ``response(dir_p, dir_c, ·)``."""
    gap = (body_c.x + body_c.r @ joint_child_x) - body_p.x - body_p.r @ joint_parent_x
    lever_c, lever_p, axis, k, fill = _positional_direction(frames, j, dir_p, dir_c,
                                                            joint_parent_x, joint_child_x)
    dlam = _block(k, axis, fill, compliance, gap + compliance * lam)
    return Correction(dlam, np.cross(lever_c, dlam), np.cross(lever_p, dlam), dlam)


def _positional_direction(frames: JointFrames, j: int, dir_p: Body, dir_c: Body,
                          joint_parent_x, joint_child_x):
    """(lever_c, lever_p, free axis or None, effective inverse mass K, the inverse masses'
    sum filling its diagonal) of joint j's positional block at the direction bodies."""
    lever_c = dir_c.r @ joint_child_x
    if frames.prismatic[j]:
        axis = dir_p.r @ frames.parent_axis[j]
        lever_p = dir_c.x + lever_c - dir_p.x
    else:
        axis, lever_p = None, dir_p.r @ joint_parent_x
    fill = dir_c.inv_mass + dir_p.inv_mass
    k = fill * np.eye(3) + _lever_term(lever_c, dir_c.a) + _lever_term(lever_p, dir_p.a)
    return lever_c, lever_p, axis, k, fill


def positional_vjp(frames: JointFrames, j: int, body_p: Body, body_c: Body, dir_p: Body,
                   dir_c: Body, joint_parent_x, joint_child_x, compliance: float, lam,
                   g_corr: Correction):
    """(BodyGrad of body_p, body_c, dir_p, dir_c, g_joint_parent_x, g_joint_child_x,
    g_compliance, g_lam) of :func:`positional` given the Correction's cotangent."""
    gap = (body_c.x + body_c.r @ joint_child_x) - body_p.x - body_p.r @ joint_parent_x
    direction = _positional_direction(frames, j, dir_p, dir_c, joint_parent_x, joint_child_x)
    g_k, g_axis, g_compliance, g_e, g_lever_c, g_lever_p = _positional_block_vjp(
        *direction, compliance, gap + compliance * lam, g_corr)
    g_compliance += float(g_e @ lam)
    grad_dir_p, grad_dir_c, g_parent_x, g_child_x = _positional_direction_vjp(
        frames, j, dir_p, dir_c, joint_parent_x, joint_child_x, direction, g_k, g_axis,
        g_lever_c, g_lever_p)
    zero = np.zeros((3, 3))
    grad_p = BodyGrad(-g_e, -np.outer(g_e, joint_parent_x), zero, 0.0)
    grad_c = BodyGrad(g_e, np.outer(g_e, joint_child_x), zero, 0.0)
    return (grad_p, grad_c, grad_dir_p, grad_dir_c, g_parent_x - body_p.r.T @ g_e,
            g_child_x + body_c.r.T @ g_e, g_compliance, compliance * g_e)


def _positional_block_vjp(lever_c, lever_p, axis, k, fill: float, compliance: float, e,
                          g_corr: Correction):
    """(g_k, g_axis, g_compliance, g_e, g_lever_c, g_lever_p) of the positional block's
    Correction (Δλ, lever_c × Δλ, lever_p × Δλ, Δλ) given its cotangent."""
    dlam = _block(k, axis, fill, compliance, e)
    g_dlam = (g_corr.p + g_corr.dlam + np.cross(g_corr.tau_c, lever_c)
              + np.cross(g_corr.tau_p, lever_p))
    g_k, g_axis, g_compliance, g_e = _block_vjp(k, axis, fill, compliance, e, g_dlam)
    return (g_k, g_axis, g_compliance, g_e, np.cross(dlam, g_corr.tau_c),
            np.cross(dlam, g_corr.tau_p))


def _positional_direction_vjp(frames: JointFrames, j: int, dir_p: Body, dir_c: Body,
                              joint_parent_x, joint_child_x, direction, g_k, g_axis, g_lever_c,
                              g_lever_p):
    """(BodyGrad dir_p, BodyGrad dir_c, g_joint_parent_x, g_joint_child_x) of
    :func:`_positional_direction` (``direction`` its result) and of the inverse masses in
    the block's fill."""
    lever_c, lever_p, axis, _, _ = direction
    g_fill = float(np.trace(g_k))
    d_lever_c, g_a_c = _lever_term_vjp(lever_c, dir_c.a, g_k)
    d_lever_p, g_a_p = _lever_term_vjp(lever_p, dir_p.a, g_k)
    g_lever_c = g_lever_c + d_lever_c
    g_lever_p = g_lever_p + d_lever_p
    g_x_p = np.zeros(3)
    g_x_c = np.zeros(3)
    g_r_p = np.zeros((3, 3))
    g_parent_x = np.zeros(3)
    if axis is None:
        g_r_p += np.outer(g_lever_p, joint_parent_x)
        g_parent_x = dir_p.r.T @ g_lever_p
    else:
        g_x_c = g_lever_p.copy()
        g_lever_c = g_lever_c + g_lever_p
        g_x_p = -g_lever_p
        g_r_p += np.outer(g_axis, frames.parent_axis[j])
    return (BodyGrad(g_x_p, g_r_p, g_a_p, g_fill),
            BodyGrad(g_x_c, np.outer(g_lever_c, joint_child_x), g_a_c, g_fill), g_parent_x,
            dir_c.r.T @ g_lever_c)


def velocity_positional(frames: JointFrames, j: int, body_p: Body, body_c: Body, joint_parent_x,
                        joint_child_x, velocities) -> Correction:
    """The impulse that stops joint j's origins moving apart: the relative velocity of the
    child's origin and the parent's point under it, ``velocities`` = (v_p, ω_p, v_c, ω_c)
    [m/s, rad/s] (3,) each, zero for the world, corrected through the positional block of
    the bodies (a prismatic joint's slide along its axis kept). Apply it with
    ``response(body_p, body_c, ·)`` as velocity changes."""
    lever_c, lever_p, axis, k, fill = _positional_direction(frames, j, body_p, body_c,
                                                            joint_parent_x, joint_child_x)
    dlam = _block(k, axis, fill, 0.0, _relative_velocity(lever_c, lever_p, velocities))
    return Correction(dlam, np.cross(lever_c, dlam), np.cross(lever_p, dlam), np.zeros(3))


def _relative_velocity(lever_c, lever_p, velocities):
    """Velocity [m/s] (3,) of the child's point at ``lever_c`` relative to the parent's at
    ``lever_p``; ``velocities`` = (v_p, ω_p, v_c, ω_c)."""
    v_p, w_p, v_c, w_c = velocities
    return v_c + np.cross(w_c, lever_c) - v_p - np.cross(w_p, lever_p)


def velocity_positional_vjp(frames: JointFrames, j: int, body_p: Body, body_c: Body,
                            joint_parent_x, joint_child_x, velocities, g_corr: Correction):
    """(BodyGrad parent, BodyGrad child, g_joint_parent_x, g_joint_child_x, cotangents of
    ``velocities``) of :func:`velocity_positional`."""
    direction = _positional_direction(frames, j, body_p, body_c, joint_parent_x, joint_child_x)
    lever_c, lever_p = direction[:2]
    _, w_p, _, w_c = velocities
    g_k, g_axis, _, g_e, g_lever_c, g_lever_p = _positional_block_vjp(
        *direction, 0.0, _relative_velocity(lever_c, lever_p, velocities), g_corr)
    g_lever_c = g_lever_c + np.cross(g_e, w_c)
    g_lever_p = g_lever_p - np.cross(g_e, w_p)
    grad_p, grad_c, g_parent_x, g_child_x = _positional_direction_vjp(
        frames, j, body_p, body_c, joint_parent_x, joint_child_x, direction, g_k, g_axis,
        g_lever_c, g_lever_p)
    return (grad_p, grad_c, g_parent_x, g_child_x,
            (-g_e, -np.cross(lever_p, g_e), g_e, np.cross(lever_c, g_e)))


def velocity_angular(frames: JointFrames, j: int, body_p: Body, body_c: Body,
                     velocities) -> Correction:
    """The impulse that stops joint j's links turning against each other (about the free
    axis of a revolute joint they still may): the angular block of the bodies on
    ω_c - ω_p; ``velocities`` as in :func:`velocity_positional`."""
    k = body_c.a + body_p.a
    dlam = _block(k, _free_axis(frames, j, body_p), float(np.trace(k)) / 3.0, 0.0,
                  velocities[3] - velocities[1])
    return Correction(np.zeros(3), dlam, dlam, np.zeros(3))


def velocity_angular_vjp(frames: JointFrames, j: int, body_p: Body, body_c: Body, velocities,
                         g_corr: Correction):
    """(BodyGrad parent, BodyGrad child, cotangents of ``velocities``) of
    :func:`velocity_angular`."""
    k = body_c.a + body_p.a
    axis = _free_axis(frames, j, body_p)
    g_k, g_axis, _, g_e = _block_vjp(k, axis, float(np.trace(k)) / 3.0, 0.0,
                                     velocities[3] - velocities[1],
                                     g_corr.tau_c + g_corr.tau_p)
    zero3 = np.zeros(3)
    g_r_p = np.zeros((3, 3)) if axis is None else np.outer(g_axis, frames.parent_axis[j])
    return (BodyGrad(zero3, g_r_p, g_k, 0.0), BodyGrad(zero3, np.zeros((3, 3)), g_k, 0.0),
            (zero3, -g_e, zero3, g_e))


def _angular_error(frames: JointFrames, j: int, body_p: Body, body_c: Body):
    """(c, parent world axis or None, child world axis or relative rotation)."""
    if frames.prismatic[j]:
        frame_p = body_p.r @ frames.parent_rotation[j]
        frame_c = body_c.r @ frames.child_rotation[j]
        relative = frame_c @ frame_p.T
        return 0.5 * skew_vjp(relative), None, (frame_p, frame_c)
    axis_p = body_p.r @ frames.parent_axis[j]
    axis_c = body_c.r @ frames.child_axis[j]
    return np.cross(axis_p, axis_c), axis_p, axis_c


def _free_axis(frames: JointFrames, j: int, dir_p: Body):
    """A revolute joint's axis in the world at the parent direction body (None: prismatic)."""
    return None if frames.prismatic[j] else dir_p.r @ frames.parent_axis[j]


def angular(frames: JointFrames, j: int, body_p: Body, body_c: Body, dir_p: Body,
            dir_c: Body, compliance: float, lam) -> Correction:
    """The angular projection of joint j: the error of the current bodies corrected along
    the direction bodies' axis and inverse inertias (α̃ ``compliance``, multiplier so far
    ``lam``); see :func:`positional`."""
    error, _, _ = _angular_error(frames, j, body_p, body_c)
    k = dir_c.a + dir_p.a
    dlam = _block(k, _free_axis(frames, j, dir_p), float(np.trace(k)) / 3.0, compliance,
                  error + compliance * lam)
    return Correction(np.zeros(3), dlam, dlam, dlam)


def angular_vjp(frames: JointFrames, j: int, body_p: Body, body_c: Body, dir_p: Body,
                dir_c: Body, compliance: float, lam, g_corr: Correction):
    """(BodyGrad of body_p, body_c, dir_p, dir_c, g_compliance, g_lam) of :func:`angular`."""
    error, axis_p, other = _angular_error(frames, j, body_p, body_c)
    axis = _free_axis(frames, j, dir_p)
    k = dir_c.a + dir_p.a
    e = error + compliance * lam
    g_dlam = g_corr.tau_c + g_corr.tau_p + g_corr.dlam
    g_k, g_axis, g_compliance, g_e = _block_vjp(k, axis, float(np.trace(k)) / 3.0,
                                                compliance, e, g_dlam)
    g_compliance += float(g_e @ lam)
    zero3 = np.zeros(3)
    if axis is None:
        frame_p, frame_c = other
        g_relative = 0.5 * skew(g_e)
        g_r_c = (g_relative @ frame_p) @ frames.child_rotation[j].T
        g_r_p = (g_relative.T @ frame_c) @ frames.parent_rotation[j].T
        g_dir_r_p = np.zeros((3, 3))
    else:
        g_r_p = np.outer(np.cross(other, g_e), frames.parent_axis[j])
        g_r_c = np.outer(np.cross(g_e, axis_p), frames.child_axis[j])
        g_dir_r_p = np.outer(g_axis, frames.parent_axis[j])
    zero = np.zeros((3, 3))
    return (BodyGrad(zero3, g_r_p, zero, 0.0), BodyGrad(zero3, g_r_c, zero, 0.0),
            BodyGrad(zero3, g_dir_r_p, g_k, 0.0), BodyGrad(zero3, zero, g_k, 0.0),
            g_compliance, compliance * g_e)


def joint_mass(frames: JointFrames, j: int, body_p: Body, body_c: Body, joint_child_x):
    """(lin, ang_c, ang_p, w): joint j's rate Jacobian (:func:`joint_jacobian`) and the
    generalized inverse mass w along it, (m_c⁻¹ + m_p⁻¹)|lin|² + ang_cᵀ A_c ang_c +
    ang_pᵀ A_p ang_p."""
    lin, ang_c, ang_p = joint_jacobian(frames, j, body_p.x, body_p.r, body_c.x, body_c.r,
                                       joint_child_x)
    w = ((body_c.inv_mass + body_p.inv_mass) * (lin @ lin) + ang_c @ body_c.a @ ang_c
         + ang_p @ body_p.a @ ang_p)
    return lin, ang_c, ang_p, float(w)


def joint_mass_vjp(frames: JointFrames, j: int, body_p: Body, body_c: Body, joint_child_x,
                   g_lin, g_ang_c, g_ang_p, g_w: float):
    """(BodyGrad parent, BodyGrad child, g_joint_child_x) of :func:`joint_mass`."""
    lin, ang_c, ang_p = joint_jacobian(frames, j, body_p.x, body_p.r, body_c.x, body_c.r,
                                       joint_child_x)
    fill = body_c.inv_mass + body_p.inv_mass
    g_lin = g_lin + 2.0 * g_w * fill * lin
    g_ang_c = g_ang_c + g_w * ((body_c.a + body_c.a.T) @ ang_c)
    g_ang_p = g_ang_p + g_w * ((body_p.a + body_p.a.T) @ ang_p)
    g_x_p, g_r_p, g_x_c, g_r_c, g_child_x = joint_jacobian_vjp(
        frames, j, body_p.x, body_p.r, body_c.x, body_c.r, joint_child_x, g_lin, g_ang_c,
        g_ang_p)
    g_mass = g_w * float(lin @ lin)
    return (BodyGrad(g_x_p, g_r_p, g_w * np.outer(ang_p, ang_p), g_mass),
            BodyGrad(g_x_c, g_r_c, g_w * np.outer(ang_c, ang_c), g_mass), g_child_x)


def limit(frames: JointFrames, j: int, body_p: Body, body_c: Body, dir_p: Body, dir_c: Body,
          joint_parent_x, joint_child_x, bound: float) -> Correction:
    """The rigid projection of joint j's coordinate (of the current bodies) onto ``bound``
    (the violated limit) along the direction bodies' joint Jacobian; see :func:`positional`."""
    value = joint_coordinate(frames, j, body_p.x, body_p.r, body_c.x, body_c.r, joint_parent_x,
                             joint_child_x)
    lin, ang_c, ang_p, w = joint_mass(frames, j, dir_p, dir_c, joint_child_x)
    dlam = -(value - bound) / w
    return Correction(lin * dlam, ang_c * dlam, ang_p * dlam, np.zeros(3))


def limit_vjp(frames: JointFrames, j: int, body_p: Body, body_c: Body, dir_p: Body,
              dir_c: Body, joint_parent_x, joint_child_x, bound: float, g_corr: Correction):
    """(BodyGrad of body_p, body_c, dir_p, dir_c, g_joint_parent_x, g_joint_child_x) of
    :func:`limit` (the bound is a constant)."""
    value = joint_coordinate(frames, j, body_p.x, body_p.r, body_c.x, body_c.r, joint_parent_x,
                             joint_child_x)
    lin, ang_c, ang_p, w = joint_mass(frames, j, dir_p, dir_c, joint_child_x)
    violation = value - bound
    dlam = -violation / w
    g_dlam = float(lin @ g_corr.p + ang_c @ g_corr.tau_c + ang_p @ g_corr.tau_p)
    grad_dir_p, grad_dir_c, g_child_x = joint_mass_vjp(
        frames, j, dir_p, dir_c, joint_child_x, dlam * g_corr.p, dlam * g_corr.tau_c,
        dlam * g_corr.tau_p, g_dlam * violation / (w * w))
    grad_p, grad_c, g_parent_x, g_child_x2 = _coordinate_vjp(
        frames, j, body_p, body_c, joint_parent_x, joint_child_x, -g_dlam / w)
    return grad_p, grad_c, grad_dir_p, grad_dir_c, g_parent_x, g_child_x + g_child_x2


def _coordinate_vjp(frames: JointFrames, j: int, body_p: Body, body_c: Body, joint_parent_x,
                    joint_child_x, g_value: float):
    """(BodyGrad parent, BodyGrad child, g_joint_parent_x, g_joint_child_x) of joint j's
    coordinate."""
    g_x_p, g_r_p, g_x_c, g_r_c, g_parent_x, g_child_x = joint_coordinate_vjp(
        frames, j, body_p.x, body_p.r, body_c.x, body_c.r, joint_parent_x, joint_child_x,
        g_value)
    zero = np.zeros((3, 3))
    return (BodyGrad(g_x_p, g_r_p, zero, 0.0), BodyGrad(g_x_c, g_r_c, zero, 0.0), g_parent_x,
            g_child_x)


def damper(frames: JointFrames, j: int, body_p: Body, body_c: Body, dir_p: Body, dir_c: Body,
           joint_parent_x, joint_child_x, damping: float, h: float, angle0: float,
           rate0: float, mu: float) -> tuple[Correction, float]:
    """Joint j's viscous damper solved as a constraint (the second-order scheme): the
    impulse -b h (ċ₀ + ċ) / 2 of a midpoint damper, ċ₀ = ``rate0`` the joint rate at the
    substep's start [rad/s or m/s] and ċ = (c - ``angle0``) / h - ċ₀ read from the current
    bodies' coordinate c, along the direction bodies' joint Jacobian (w its generalized
    inverse mass): Δμ = -(½ b h (c - c₀) + ½ b h² ċ₀ + μ) / (1 + ½ b h w), ``mu`` the impulse
    [N m s or N s] applied so far in the substep. Returns (the Correction, Δμ)."""
    value = joint_coordinate(frames, j, body_p.x, body_p.r, body_c.x, body_c.r, joint_parent_x,
                             joint_child_x)
    lin, ang_c, ang_p, w = joint_mass(frames, j, dir_p, dir_c, joint_child_x)
    half = 0.5 * damping * h
    dmu = -(half * (value - angle0) + half * h * rate0 + mu) / (1.0 + half * w)
    return Correction(lin * dmu, ang_c * dmu, ang_p * dmu, np.zeros(3)), float(dmu)


def damper_vjp(frames: JointFrames, j: int, body_p: Body, body_c: Body, dir_p: Body,
               dir_c: Body, joint_parent_x, joint_child_x, damping: float, h: float,
               angle0: float, rate0: float, mu: float, g_corr: Correction, g_dmu: float):
    """(BodyGrad of body_p, body_c, dir_p, dir_c, g_joint_parent_x, g_joint_child_x,
    g_damping, g_angle0, g_rate0, g_mu) of :func:`damper` given the cotangents of its
    Correction and Δμ."""
    value = joint_coordinate(frames, j, body_p.x, body_p.r, body_c.x, body_c.r, joint_parent_x,
                             joint_child_x)
    lin, ang_c, ang_p, w = joint_mass(frames, j, dir_p, dir_c, joint_child_x)
    half = 0.5 * damping * h
    numerator = half * (value - angle0) + half * h * rate0 + mu
    denominator = 1.0 + half * w
    dmu = -numerator / denominator
    g_dmu = g_dmu + float(lin @ g_corr.p + ang_c @ g_corr.tau_c + ang_p @ g_corr.tau_p)
    g_numerator = -g_dmu / denominator
    g_denominator = g_dmu * numerator / denominator**2
    g_half = g_numerator * ((value - angle0) + h * rate0) + g_denominator * w
    grad_dir_p, grad_dir_c, g_child_x = joint_mass_vjp(
        frames, j, dir_p, dir_c, joint_child_x, dmu * g_corr.p, dmu * g_corr.tau_c,
        dmu * g_corr.tau_p, g_denominator * half)
    grad_p, grad_c, g_parent_x, g_child_x2 = _coordinate_vjp(
        frames, j, body_p, body_c, joint_parent_x, joint_child_x, g_numerator * half)
    return (grad_p, grad_c, grad_dir_p, grad_dir_c, g_parent_x, g_child_x + g_child_x2,
            0.5 * h * g_half, -g_numerator * half, g_numerator * half * h, g_numerator)
