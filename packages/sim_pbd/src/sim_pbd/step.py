"""One XPBD step of an articulated robot, and its hand-derived adjoint.

Each of the ``substeps`` substeps (h = dt / substeps) runs, after Müller et al. 2020 and the
paper's Algorithm 1 (``scheme="first_order"``; the second-order scheme below changes it):

1. predict: gravity and the joint actuation (``action``: one torque [N m] per revolute
   joint, force [N] per prismatic joint, applied equal and opposite on the joint's two links,
   :func:`sim_pbd.kinematics.joint_jacobian`) and the gyroscopic term ``-ω × Iω`` integrate
   the velocities (symplectic Euler); joint damping and Coulomb friction then act on them as
   velocity impulses along each joint, in tree order: damping explicit, J = -k ċ with
   k = min(b h, :data:`~sim_pbd.constraints.MAX_DAMPING_PER_SUBSTEP` / w), then friction
   removes at most μ h of impulse and never more than stops the joint (w the joint's
   generalized inverse mass, its two links as free bodies); the
   velocities move the positions, x̃ = x + h v, q̃ = normalize(q + ½ h (0, ω) ⊗ q);
2. project: ``iterations`` passes over the joints, each projecting every joint's positional
   and angular constraint with its compliance, then the violated joint limits
   (:mod:`sim_pbd.constraints`). ``gauss_seidel`` applies each correction at once;
   ``jacobi`` computes every correction of a pass from the state at the pass's start and
   applies their sum, each correction scaled by 1 / max(n_p, n_c), n the number of the
   pass's constraints touching that link, so the impulses stay equal and opposite and λ
   accumulates exactly what was applied (both solvers have the same fixed point);
3. update velocities from positions, v = (x - x₀)/h, ω = 2 vec(q q₀⁻¹)/h (the shorter
   rotation).

``scheme="second_order"`` changes four things, after which the step converges at second
order in h (the three asymmetries that each keep XPBD first order, and the damping made
consistent with them; ``python benchmarks/pbd_accuracy.py`` measures both schemes):

- half kicks: gravity and actuation over -h/2 before the first substep and +h/2 after the
  last (no gyroscopic term), so the substeps run a leapfrog on half-step velocities and the
  step's state stays synchronous (the kicks cancel between steps);
- projections along the substep's start (SHAKE): every correction follows the levers, axes,
  inverse inertias and joint Jacobians of the links' poses at the substep's start, the
  constraint errors read from the current iterate (:mod:`sim_pbd.constraints`' direction
  bodies), instead of the current iterate's;
- the angular velocity read back as ω = 2 vec(δq) / (h δq_w), δq = q q₀⁻¹, the inverse of
  the orientation update q̃ = normalize(q + ½ h (0, ω) ⊗ q);
- joint damping as a midpoint damper solved in the projection loop after each pass
  (:func:`sim_pbd.constraints.damper`, along the start's joint Jacobian, Gauss-Seidel in
  tree order for both solvers) instead of the explicit velocity impulse; friction stays a
  velocity impulse.

Damping and friction act before the projection (Müller et al. apply them after the velocity
update): the projection then carries their impulses through the joints, as it does the
actuation's, where applied after it they would move the child alone against its joint
(a 3 % error in a friction-limited acceleration and 0.2 % in a damped decay here).

Damping is explicit because the projection turns an impulse on the two free links into the
articulated response w_art J (w_art, the joint-space inverse inertia, is below the free-body
w): an impulse per unit rate of b h, whatever w_art, leaves the joint rate a damped motion
settles at, ċ = τ / b, right, where the implicit form -b h ċ / (1 + b h w) settled at
(1 + b h w) τ / b and halved the damping of Baxter's light wrist (b h w ≈ 1.45 at 1 ms
substeps): 8× the joint-angle error of a damped swing. Explicit damping diverges once
b h w_art > 2 (Baxter's wrist: at b h w ≈ 2.3); capping k w at 1.5 keeps every substep
stable (a joint's rate shrinks each substep, overshooting zero by at most half) and only
weakens damping too stiff for the substep (b h w > 1.5: Baxter's arm at fewer than 10
substeps of 10 ms).

:func:`step_vjp` replays the forward pass recording each operation's inputs (per substep,
iteration and constraint) and runs the operations' hand-written adjoints in reverse.

``kernels`` picks the implementation: ``"numba"`` (default) runs the whole step, or its VJP,
in one compiled call (:mod:`sim_pbd.kernels`); ``"numpy"`` runs this module's code, the
readable reference the compiled kernels equal to round-off.

``params`` is a dict with the entries of :data:`sim_pbd.model.PARAMETERS` (the model's
values or a design's): ``link_mass`` (n,) [kg], ``link_inertia`` (n, 3, 3) [kg m²] (its
symmetric part is used), ``joint_parent_x``, ``joint_child_x`` (m, 3) [m], ``joint_damping``
(m,), ``joint_compliance`` (m,). Orientations of the input state are normalized first.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import kernels as compiled
from .constraints import (
    MAX_DAMPING_PER_SUBSTEP,
    Body,
    BodyGrad,
    Correction,
    angular,
    angular_vjp,
    damper,
    damper_vjp,
    joint_mass,
    joint_mass_vjp,
    limit,
    limit_vjp,
    positional,
    positional_vjp,
    response,
    response_vjp,
    velocity_angular,
    velocity_angular_vjp,
    velocity_positional,
    velocity_positional_vjp,
    world_body,
)
from .kinematics import (
    JointFrames,
    joint_coordinate,
    joint_frames,
    joint_jacobian,
    joint_jacobian_vjp,
    joint_positions,
    joint_positions_vjp,
)
from .model import PARAMETERS, PBDModel
from .options import KERNELS, SCHEMES, SOLVERS
from .rotations import (
    quat_conjugate,
    quat_integrate,
    quat_integrate_vjp,
    quat_multiply,
    quat_multiply_vjp,
    quat_normalize,
    quat_normalize_vjp,
    quat_to_matrix,
    quat_to_matrix_vjp,
)
from .safety import check_step_inputs
from .state import PBDState

__all__ = ["step", "step_vjp"]

_POS, _ANG, _LIM = 0, 1, 2


class _Setup(NamedTuple):
    model: PBDModel
    frames: JointFrames
    parent: np.ndarray
    child: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    limited: np.ndarray
    friction: np.ndarray
    gravity: np.ndarray
    h: float
    inv_mass: np.ndarray
    inertia: np.ndarray
    inv_inertia: np.ndarray
    joint_parent_x: np.ndarray
    joint_child_x: np.ndarray
    damping: np.ndarray
    compliance: np.ndarray
    second_order: bool


def _checked(model: PBDModel, state: PBDState, action, params, dt, substeps, iterations,
             solver, kernels, scheme) -> np.ndarray:
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    if kernels not in KERNELS:
        raise ValueError(f"kernels must be one of {KERNELS}, got {kernels!r}")
    for name, value in (("substeps", substeps), ("iterations", iterations)):
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if not (np.isfinite(dt) and dt > 0):
        raise ValueError(f"dt must be a positive finite time step [s], got {dt!r}")
    action = check_step_inputs(model, state, action)
    missing = [name for name in PARAMETERS if name not in params]
    if missing:
        raise ValueError(f"params lacks {missing}; pass model.parameters() or a design "
                         "holding every entry of sim_pbd.PARAMETERS")
    if np.any(np.asarray(params["link_mass"]) <= 0):
        raise ValueError(f"link_mass must be positive, got {params['link_mass']}")
    return action


def _setup(model: PBDModel, params, dt: float, substeps: int, scheme: str) -> _Setup:
    h = float(dt) / int(substeps)
    mass = np.asarray(params["link_mass"], dtype=np.float64)
    inertia = np.asarray(params["link_inertia"], dtype=np.float64)
    inertia = 0.5 * (inertia + np.swapaxes(inertia, 1, 2))
    lower = np.asarray(model.joint_lower, dtype=np.float64)
    upper = np.asarray(model.joint_upper, dtype=np.float64)
    return _Setup(
        model=model, frames=joint_frames(model), parent=np.asarray(model.joint_parent),
        child=np.asarray(model.joint_child), lower=lower, upper=upper,
        limited=np.isfinite(lower) | np.isfinite(upper),
        friction=np.asarray(model.joint_friction, dtype=np.float64),
        gravity=np.asarray(model.gravity, dtype=np.float64), h=h, inv_mass=1.0 / mass,
        inertia=inertia, inv_inertia=np.linalg.inv(inertia),
        joint_parent_x=np.asarray(params["joint_parent_x"], dtype=np.float64),
        joint_child_x=np.asarray(params["joint_child_x"], dtype=np.float64),
        damping=np.asarray(params["joint_damping"], dtype=np.float64),
        compliance=np.asarray(params["joint_compliance"], dtype=np.float64) / (h * h),
        second_order=scheme == "second_order")


def _body(setup: _Setup, link: int, x, q) -> Body:
    if link < 0:
        return world_body()
    r = quat_to_matrix(q[link])
    return Body(x[link], r, r @ setup.inv_inertia[link] @ r.T, float(setup.inv_mass[link]))


def _bodies(setup: _Setup, j: int, x, q) -> tuple[Body, Body]:
    return _body(setup, setup.parent[j], x, q), _body(setup, setup.child[j], x, q)


def _directions(setup: _Setup, j: int, body_p: Body, body_c: Body, start) -> tuple[Body, Body]:
    """The bodies joint j's corrections follow: the substep's start ``start`` = (x0, q0) in
    the second-order scheme, else the current ``body_p``, ``body_c``."""
    if setup.second_order:
        return _bodies(setup, j, *start)
    return body_p, body_c


def _project(setup: _Setup, kind: int, j: int, bound: float, bodies, lam) -> Correction:
    """Joint j's projection of ``kind``; ``bodies`` = (body_p, body_c, dir_p, dir_c)."""
    if kind == _POS:
        return positional(setup.frames, j, *bodies, setup.joint_parent_x[j],
                          setup.joint_child_x[j], setup.compliance[j], lam)
    if kind == _ANG:
        return angular(setup.frames, j, *bodies, setup.compliance[j], lam)
    return limit(setup.frames, j, *bodies, setup.joint_parent_x[j], setup.joint_child_x[j],
                 bound)


def _violated_bound(setup: _Setup, j: int, body_p: Body, body_c: Body):
    """The limit joint j violates (lower or upper), or None."""
    if not setup.limited[j]:
        return None
    value = joint_coordinate(setup.frames, j, body_p.x, body_p.r, body_c.x, body_c.r,
                             setup.joint_parent_x[j], setup.joint_child_x[j])
    if value < setup.lower[j]:
        return float(setup.lower[j])
    if value > setup.upper[j]:
        return float(setup.upper[j])
    return None


def _move(x, q, link: int, dx, dphi) -> None:
    if link >= 0:
        x[link] = x[link] + dx
        q[link] = quat_normalize(quat_integrate(q[link], dphi))


def _move_joint(setup: _Setup, j: int, x, q, dir_p: Body, dir_c: Body,
                corr: Correction) -> None:
    """Joint j's links moved in place by the correction ``corr`` along the direction bodies
    (:func:`_moved_joint_vjp` is its adjoint)."""
    dx_p, dphi_p, dx_c, dphi_c = response(dir_p, dir_c, corr)
    _move(x, q, setup.child[j], dx_c, dphi_c)
    _move(x, q, setup.parent[j], dx_p, dphi_p)


def _gauss_seidel_pass(setup: _Setup, x, q, start, lam, tape):
    def apply(kind, j, bound):
        body_p, body_c = _bodies(setup, j, x, q)
        bodies = (body_p, body_c, *_directions(setup, j, body_p, body_c, start))
        lam_j = lam[kind, j] if kind != _LIM else np.zeros(3)
        if tape is not None:
            tape.append(("gauss_seidel", kind, j, bound, x.copy(), q.copy(), lam_j.copy()))
        corr = _project(setup, kind, j, bound, bodies, lam_j)
        _move_joint(setup, j, x, q, bodies[2], bodies[3], corr)
        if kind != _LIM:
            lam[kind, j] = lam_j + corr.dlam

    for j in setup.frames.order:
        apply(_POS, j, 0.0)
        apply(_ANG, j, 0.0)
    for j in setup.frames.order:
        bound = _violated_bound(setup, j, *_bodies(setup, j, x, q))
        if bound is not None:
            apply(_LIM, j, bound)


def _jacobi_constraints(setup: _Setup, x, q):
    """[(kind, j, bound, scale)] of one Jacobi pass, from the pass-start state."""
    active = []
    for j in setup.frames.order:
        active += [(_POS, j, 0.0), (_ANG, j, 0.0)]
        bound = _violated_bound(setup, j, *_bodies(setup, j, x, q))
        if bound is not None:
            active.append((_LIM, j, bound))
    count = np.zeros(len(x))
    for _, j, _ in active:
        count[setup.child[j]] += 1
        if setup.parent[j] >= 0:
            count[setup.parent[j]] += 1
    return [(kind, j, bound, 1.0 / max(count[setup.child[j]],
                                       count[setup.parent[j]] if setup.parent[j] >= 0 else 0))
            for kind, j, bound in active]


def _jacobi_corrections(setup: _Setup, x, q, start, lam, active):
    """[((body_p, body_c, dir_p, dir_c), scaled correction)] and the summed moves (dx, dphi),
    (n, 3) each."""
    dx, dphi = np.zeros_like(x), np.zeros_like(x)
    out = []
    for kind, j, bound, scale in active:
        body_p, body_c = _bodies(setup, j, x, q)
        bodies = (body_p, body_c, *_directions(setup, j, body_p, body_c, start))
        lam_j = lam[kind, j] if kind != _LIM else np.zeros(3)
        corr = _project(setup, kind, j, bound, bodies, lam_j).scaled(scale)
        _add_response(setup, j, bodies[2], bodies[3], corr, dx, dphi)
        out.append((bodies, corr))
    return out, dx, dphi


def _jacobi_pass(setup: _Setup, x, q, start, lam, tape):
    active = _jacobi_constraints(setup, x, q)
    if tape is not None:
        tape.append(("jacobi", active, x.copy(), q.copy(), lam.copy()))
    corrections, dx, dphi = _jacobi_corrections(setup, x, q, start, lam, active)
    for (kind, j, _, _), (_, corr) in zip(active, corrections, strict=True):
        if kind != _LIM:
            lam[kind, j] += corr.dlam
    for i in range(len(x)):
        _move(x, q, i, dx[i], dphi[i])


def _forces(setup: _Setup, x, matrices, action):
    """Actuation forces and torques on the links, (n, 3) each, and the per-joint Jacobians."""
    force, torque = np.zeros_like(x), np.zeros_like(x)
    jacobians = []
    for j in range(len(action)):
        p, c = setup.parent[j], setup.child[j]
        x_p, r_p = (np.zeros(3), np.eye(3)) if p < 0 else (x[p], matrices[p])
        lin, ang_c, ang_p = joint_jacobian(setup.frames, j, x_p, r_p, x[c], matrices[c],
                                           setup.joint_child_x[j])
        force[c] += lin * action[j]
        torque[c] += ang_c * action[j]
        if p >= 0:
            force[p] -= lin * action[j]
            torque[p] -= ang_p * action[j]
        jacobians.append((x_p, r_p, lin, ang_c, ang_p))
    return force, torque, jacobians


class _Acceleration(NamedTuple):
    matrices: np.ndarray
    force: np.ndarray
    torque: np.ndarray
    jacobians: list
    w_body: np.ndarray
    momentum: np.ndarray
    torque_body: np.ndarray
    w_body_new: np.ndarray
    v: np.ndarray
    w: np.ndarray


def _accelerate(setup: _Setup, x, q, v, w, action, h: float,
                gyroscopic: bool) -> _Acceleration:
    """Velocities after gravity, actuation and (``gyroscopic``) the gyroscopic term over a
    time ``h`` [s] (a substep, or ±h/2 for the second-order scheme's half kicks)."""
    matrices = np.array([quat_to_matrix(qi) for qi in q])
    force, torque, jacobians = _forces(setup, x, matrices, action)
    v_new = v + h * (setup.gravity + setup.inv_mass[:, None] * force)
    w_body = np.einsum("nji,nj->ni", matrices, w)
    torque_body = np.einsum("nji,nj->ni", matrices, torque)
    momentum = (np.einsum("nij,nj->ni", setup.inertia, w_body) if gyroscopic
                else np.zeros_like(w))
    w_body_new = w_body + h * np.einsum("nij,nj->ni", setup.inv_inertia,
                                        torque_body - np.cross(w_body, momentum))
    w_new = np.einsum("nij,nj->ni", matrices, w_body_new)
    return _Acceleration(matrices, force, torque, jacobians, w_body, momentum, torque_body,
                         w_body_new, v_new, w_new)


def _advance(setup: _Setup, x, q, v, w):
    """Predicted positions x + h v and orientations normalize(q + ½ h (0, ω) ⊗ q)."""
    q_new = np.array([quat_normalize(quat_integrate(q[i], setup.h * w[i]))
                      for i in range(len(q))])
    return x + setup.h * v, q_new.reshape(-1, 4)


def _velocities(setup: _Setup, x0, q0, x, q):
    """(v, ω) read back from the substep's motion: ω = 2 vec(δq) / (h δq_w), δq = q q₀⁻¹, the
    inverse of the Cayley-like orientation update, in the second-order scheme; else the
    shorter rotation's 2 vec(δq) / h."""
    w = np.zeros_like(x)
    for i in range(len(q)):
        delta = quat_multiply(q[i], quat_conjugate(q0[i]))
        w[i] = (2.0 / setup.h) * delta[1:] * _readout_scale(setup, delta[0])
    return (x - x0) / setup.h, w


def _readout_scale(setup: _Setup, delta_w: float) -> float:
    return 1.0 / delta_w if setup.second_order else float(np.copysign(1.0, delta_w))


class _JointImpulse(NamedTuple):
    lin: np.ndarray
    ang_c: np.ndarray
    ang_p: np.ndarray
    weight: float
    rate: float
    gain: float
    capped: bool
    sliding: bool
    impulse: float


def _velocity(v, link: int):
    return np.zeros(3) if link < 0 else v[link]


def _joint_impulse(setup: _Setup, j: int, body_p: Body, body_c: Body, v, w) -> _JointImpulse:
    p, c = setup.parent[j], setup.child[j]
    lin, ang_c, ang_p, weight = joint_mass(setup.frames, j, body_p, body_c,
                                           setup.joint_child_x[j])
    rate = float(lin @ (v[c] - _velocity(v, p)) + ang_c @ w[c] - ang_p @ _velocity(w, p))
    # the second-order scheme damps in the projection loop (:func:`_damper_pass`)
    bh = 0.0 if setup.second_order else setup.damping[j] * setup.h
    capped = bh * weight > MAX_DAMPING_PER_SUBSTEP
    gain = MAX_DAMPING_PER_SUBSTEP / weight if capped else bh
    impulse = -gain * rate
    # the friction impulse that stops the joint after damping: -(ċ + w J) / w
    target = gain * rate - rate / weight
    cap = setup.friction[j] * setup.h
    sliding = abs(target) >= cap
    impulse += float(np.clip(target, -cap, cap))
    return _JointImpulse(lin, ang_c, ang_p, weight, rate, gain, capped, sliding, impulse)


def _joint_velocity_terms(setup: _Setup, x, q, v, w, tape):
    for j in setup.frames.order:
        if tape is not None:
            tape.append(("joint_velocity", j, x, q, v.copy(), w.copy()))
        body_p, body_c = _bodies(setup, j, x, q)
        term = _joint_impulse(setup, j, body_p, body_c, v, w)
        corr = Correction(term.lin * term.impulse, term.ang_c * term.impulse,
                          term.ang_p * term.impulse, np.zeros(3))
        _add_response(setup, j, body_p, body_c, corr, v, w)


def _add_response(setup: _Setup, j: int, body_p: Body, body_c: Body, corr: Correction, lin,
                  ang) -> None:
    """Joint j's links' response to ``corr`` added in place to their rows of ``lin`` and
    ``ang`` (n, 3): velocity changes (v, ω) for an impulse, moves (Δx, Δφ) for a Jacobi
    pass's sum."""
    d_lin_p, d_ang_p, d_lin_c, d_ang_c = response(body_p, body_c, corr)
    c, p = setup.child[j], setup.parent[j]
    lin[c] += d_lin_c
    ang[c] += d_ang_c
    if p >= 0:
        lin[p] += d_lin_p
        ang[p] += d_ang_p


def _damper_pass(setup: _Setup, x, q, start, joint_start, mu, tape) -> None:
    """One pass of the second-order scheme's joint dampers (:func:`constraints.damper`), in
    tree order; ``joint_start`` = (angles, rates) (m,) each at the substep's start."""
    for j in setup.frames.order:
        body_p, body_c = _bodies(setup, j, x, q)
        dir_p, dir_c = _bodies(setup, j, *start)
        if tape is not None:
            tape.append(("damper", j, x.copy(), q.copy(), float(mu[j])))
        corr, dmu = damper(setup.frames, j, body_p, body_c, dir_p, dir_c,
                           setup.joint_parent_x[j], setup.joint_child_x[j], setup.damping[j],
                           setup.h, joint_start[0][j], joint_start[1][j], mu[j])
        _move_joint(setup, j, x, q, dir_p, dir_c, corr)
        mu[j] += dmu


def _joint_params(setup: _Setup) -> dict:
    return {"joint_parent_x": setup.joint_parent_x, "joint_child_x": setup.joint_child_x}


def _substep(setup: _Setup, x, q, v, w, action, iterations: int, solver: str, tape):
    if tape is not None:
        tape.append(("accelerate", x, q, v, w))
    accel = _accelerate(setup, x, q, v, w, action, setup.h, True)
    v_pred, w_pred = accel.v, accel.w
    # Damping and friction act on the predicted velocities, so the position projection
    # carries their impulses through the joints like the actuation's (applied after the
    # velocity update they would move one link against the constraints: 3 % slip error).
    _joint_velocity_terms(setup, x, q, v_pred, w_pred, tape)
    if tape is not None:
        tape.append(("advance", x, q, v_pred.copy(), w_pred.copy()))
    x_new, q_new = _advance(setup, x, q, v_pred, w_pred)
    m = len(action)
    lam, mu = np.zeros((2, m, 3)), np.zeros(m)
    joint_start = (joint_positions(setup.model, _joint_params(setup),
                                   PBDState(link_x=x, link_q=q, link_v=v, link_w=w))
                   if setup.second_order else None)
    project = _jacobi_pass if solver == "jacobi" else _gauss_seidel_pass
    for _ in range(iterations):
        project(setup, x_new, q_new, (x, q), lam, tape)
        if setup.second_order:
            _damper_pass(setup, x_new, q_new, (x, q), joint_start, mu, tape)
    if tape is not None:
        tape.append(("velocity", x, q, x_new.copy(), q_new.copy()))
    v_new, w_new = _velocities(setup, x, q, x_new, q_new)
    return x_new, q_new, v_new, w_new


def _start(state: PBDState):
    q = np.array([quat_normalize(qi) for qi in np.asarray(state.link_q, dtype=np.float64)])
    return (np.array(state.link_x, dtype=np.float64), q.reshape(-1, 4),
            np.array(state.link_v, dtype=np.float64), np.array(state.link_w, dtype=np.float64))


def _kick(setup: _Setup, x, q, v, w, action, sign: float):
    """The second-order scheme's half kick: gravity and actuation over ``sign`` h/2 (the
    substeps then run a leapfrog on half-step velocities, synchronous again after the last
    kick)."""
    accel = _accelerate(setup, x, q, v, w, action, sign * 0.5 * setup.h, False)
    return accel.v, accel.w


def _joint_velocities(setup: _Setup, j: int, v, w):
    """(v_p, ω_p, v_c, ω_c) of joint j's links, zeros for the world."""
    p, c = setup.parent[j], setup.child[j]
    return _velocity(v, p), _velocity(w, p), v[c], w[c]


def _velocity_projection(setup: _Setup, kind: int, j: int, body_p: Body, body_c: Body, v, w):
    if kind == _POS:
        return velocity_positional(setup.frames, j, body_p, body_c, setup.joint_parent_x[j],
                                   setup.joint_child_x[j], _joint_velocities(setup, j, v, w))
    return velocity_angular(setup.frames, j, body_p, body_c, _joint_velocities(setup, j, v, w))


def _velocity_pass(setup: _Setup, x, q, v, w, tape) -> None:
    """One Gauss-Seidel pass of the joints' velocity constraints at the poses (x, q) (the
    second-order scheme's closing half kick, RATTLE's velocity stage), in place on v, w."""
    for j in setup.frames.order:
        body_p, body_c = _bodies(setup, j, x, q)
        for kind in (_POS, _ANG):
            if tape is not None:
                tape.append(("velocity_constraint", kind, j, x, q, v.copy(), w.copy()))
            _add_response(setup, j, body_p, body_c,
                         _velocity_projection(setup, kind, j, body_p, body_c, v, w), v, w)


def _run(setup: _Setup, state: PBDState, action, iterations: int, solver: str, substeps: int,
         tapes):
    """The step's final (x, q, v, w); ``tapes`` None, or a list that receives one tape per
    substep and, in the second-order scheme, the kicks' inputs and the closing velocity
    projections' entries (tuples)."""
    x, q, v, w = _start(state)
    if setup.second_order:
        if tapes is not None:
            tapes.append(("kick", -1.0, x, q, v, w))
        v, w = _kick(setup, x, q, v, w, action, -1.0)
    for _ in range(substeps):
        tape = None if tapes is None else []
        x, q, v, w = _substep(setup, x, q, v, w, action, iterations, solver, tape)
        if tapes is not None:
            tapes.append(tape)
    if setup.second_order:
        if tapes is not None:
            tapes.append(("kick", 1.0, x, q, v, w))
        v, w = _kick(setup, x, q, v, w, action, 1.0)
        # the kick moves the links as free bodies; the constraint impulses of its half step
        # make the velocities the joints allow (the next step's projection, along the same
        # directions, absorbs them: the positions do not change)
        for _ in range(iterations):
            _velocity_pass(setup, x, q, v, w, tapes)
    return x, q, v, w


def step(model: PBDModel, state: PBDState, action, params, dt: float, *, substeps: int,
         iterations: int, solver: str = "gauss_seidel", kernels: str = "numba",
         scheme: str = "second_order") -> PBDState:
    """The state after ``dt`` [s] under joint torques/forces ``action`` (m,) [N m or N].

    ``substeps`` XPBD substeps of ``iterations`` constraint passes each with ``solver``
    (one of :data:`SOLVERS`) in ``scheme`` (one of :data:`SCHEMES`); ``params`` and
    ``kernels`` as in the module docstring."""
    action = _checked(model, state, action, params, dt, substeps, iterations, solver, kernels,
                      scheme)
    if kernels == "numba":
        return compiled.step(model, state, action, params, dt, substeps=substeps,
                             iterations=iterations, solver=solver, scheme=scheme)
    setup = _setup(model, params, dt, substeps, scheme)
    x, q, v, w = _run(setup, state, action, iterations, solver, substeps, None)
    return PBDState(link_x=x, link_q=q, link_v=v, link_w=w)


class _Grads:
    """Cotangent accumulators of one reverse sweep (mutable; local to :func:`step_vjp`)."""

    def __init__(self, setup: _Setup, g_next: PBDState, m: int):
        self.x = np.array(g_next.link_x, dtype=np.float64)
        self.q = np.array(g_next.link_q, dtype=np.float64)
        self.v = np.array(g_next.link_v, dtype=np.float64)
        self.w = np.array(g_next.link_w, dtype=np.float64)
        self.lam = np.zeros((2, m, 3))
        self.mu = np.zeros(m)
        # cotangents of the substep's start poses reached through the direction bodies, and
        # of its start joint angles and rates (the dampers' c₀, ċ₀)
        self.x0 = np.zeros_like(self.x)
        self.q0 = np.zeros_like(self.q)
        self.joint_start = np.zeros((2, m))
        self.inv_mass = np.zeros_like(setup.inv_mass)
        self.inertia = np.zeros_like(setup.inertia)
        self.inv_inertia = np.zeros_like(setup.inertia)
        self.joint_parent_x = np.zeros_like(setup.joint_parent_x)
        self.joint_child_x = np.zeros_like(setup.joint_child_x)
        self.damping = np.zeros(m)
        self.compliance = np.zeros(m)
        self.action = np.zeros(m)


def _add_body(setup: _Setup, grads: _Grads, link: int, q_link, grad: BodyGrad, *,
              start: bool = False) -> None:
    """Route a Body's cotangent to the link's x, q (of the substep's start if ``start``),
    inverse inertia and inverse mass."""
    if link < 0:
        return
    r = quat_to_matrix(q_link)
    inv_inertia = setup.inv_inertia[link]
    g_r = grad.r + grad.a @ r @ inv_inertia.T + grad.a.T @ r @ inv_inertia
    (grads.x0 if start else grads.x)[link] += grad.x
    (grads.q0 if start else grads.q)[link] += quat_to_matrix_vjp(q_link, g_r)
    grads.inv_inertia[link] += r.T @ grad.a @ r
    grads.inv_mass[link] += grad.inv_mass


def _move_vjp(grads: _Grads, link: int, q_link, dphi):
    """(g_dx, g_dphi) of :func:`_move`; grads.q[link] becomes the input's cotangent."""
    if link < 0:
        return np.zeros(3), np.zeros(3)
    g_raw = quat_normalize_vjp(quat_integrate(q_link, dphi), grads.q[link])
    grads.q[link], g_dphi = quat_integrate_vjp(q_link, dphi, g_raw)
    return grads.x[link].copy(), g_dphi


def _project_vjp(setup: _Setup, grads: _Grads, kind: int, j: int, bound: float, bodies, lam,
                 g_corr: Correction):
    """BodyGrads of ``bodies`` = (body_p, body_c, dir_p, dir_c) of :func:`_project`; the
    parameters' and the multiplier's cotangents go into ``grads``."""
    frames = setup.frames
    if kind == _POS:
        *body_grads, g_parent_x, g_child_x, g_comp, g_lam = positional_vjp(
            frames, j, *bodies, setup.joint_parent_x[j], setup.joint_child_x[j],
            setup.compliance[j], lam, g_corr)
    elif kind == _ANG:
        *body_grads, g_comp, g_lam = angular_vjp(frames, j, *bodies, setup.compliance[j], lam,
                                                 g_corr)
        g_parent_x = g_child_x = np.zeros(3)
    else:
        *body_grads, g_parent_x, g_child_x = limit_vjp(
            frames, j, *bodies, setup.joint_parent_x[j], setup.joint_child_x[j], bound, g_corr)
        g_comp, g_lam = 0.0, None
    grads.joint_parent_x[j] += g_parent_x
    grads.joint_child_x[j] += g_child_x
    grads.compliance[j] += g_comp
    if g_lam is not None:
        grads.lam[kind, j] += g_lam
    return body_grads


def _add_joint_bodies(setup: _Setup, grads: _Grads, j: int, q, start, body_grads) -> None:
    """Route the BodyGrads (parent, child, parent direction, child direction) of joint j's
    projection at orientations ``q``: the directions to the substep's ``start`` in the
    second-order scheme, else to the current poses like the others."""
    p, c = setup.parent[j], setup.child[j]
    q_dir = start[1] if setup.second_order else q
    _add_body(setup, grads, p, q[p] if p >= 0 else None, body_grads[0])
    _add_body(setup, grads, c, q[c], body_grads[1])
    _add_body(setup, grads, p, q_dir[p] if p >= 0 else None, body_grads[2],
              start=setup.second_order)
    _add_body(setup, grads, c, q_dir[c], body_grads[3], start=setup.second_order)


def _with_multiplier_grad(grads: _Grads, kind: int, j: int, g_corr: Correction):
    if kind == _LIM:
        return g_corr
    return g_corr._replace(dlam=grads.lam[kind, j].copy())


def _moved_joint_vjp(setup: _Setup, grads: _Grads, j: int, q, dir_p: Body, dir_c: Body,
                     corr: Correction):
    """(∂L/∂corr, BodyGrad of dir_p, of dir_c) of joint j's correction applied to the poses
    (orientations ``q``) with :func:`_move`; grads.x, grads.q become the inputs'."""
    p, c = setup.parent[j], setup.child[j]
    _, dphi_p, _, dphi_c = response(dir_p, dir_c, corr)
    g_dx_c, g_dphi_c = _move_vjp(grads, c, q[c], dphi_c)
    g_dx_p, g_dphi_p = _move_vjp(grads, p, q[p] if p >= 0 else None, dphi_p)
    return response_vjp(dir_p, dir_c, corr, g_dx_p, g_dphi_p, g_dx_c, g_dphi_c)


def _gauss_seidel_vjp(setup: _Setup, grads: _Grads, entry, start) -> None:
    _, kind, j, bound, x, q, lam_j = entry
    body_p, body_c = _bodies(setup, j, x, q)
    bodies = (body_p, body_c, *_directions(setup, j, body_p, body_c, start))
    corr = _project(setup, kind, j, bound, bodies, lam_j)
    g_corr, grad_dir_p, grad_dir_c = _moved_joint_vjp(setup, grads, j, q, *bodies[2:], corr)
    g_corr = _with_multiplier_grad(grads, kind, j, g_corr)
    body_grads = _project_vjp(setup, grads, kind, j, bound, bodies, lam_j, g_corr)
    body_grads[2] = body_grads[2] + grad_dir_p
    body_grads[3] = body_grads[3] + grad_dir_c
    _add_joint_bodies(setup, grads, j, q, start, body_grads)


def _jacobi_vjp(setup: _Setup, grads: _Grads, entry, start) -> None:
    _, active, x, q, lam = entry
    corrections, _, dphi = _jacobi_corrections(setup, x, q, start, lam, active)
    g_dx = grads.x.copy()
    g_dphi = np.zeros_like(dphi)
    for i in range(len(x)):
        g_dx[i], g_dphi[i] = _move_vjp(grads, i, q[i], dphi[i])
    for (kind, j, bound, scale), (bodies, corr) in zip(active, corrections, strict=True):
        p, c = setup.parent[j], setup.child[j]
        zero = np.zeros(3)
        g_corr, grad_dir_p, grad_dir_c = response_vjp(
            *bodies[2:], corr, g_dx[p] if p >= 0 else zero, g_dphi[p] if p >= 0 else zero,
            g_dx[c], g_dphi[c])
        g_corr = _with_multiplier_grad(grads, kind, j, g_corr).scaled(scale)
        lam_j = lam[kind, j] if kind != _LIM else np.zeros(3)
        body_grads = _project_vjp(setup, grads, kind, j, bound, bodies, lam_j, g_corr)
        body_grads[2] = body_grads[2] + grad_dir_p
        body_grads[3] = body_grads[3] + grad_dir_c
        _add_joint_bodies(setup, grads, j, q, start, body_grads)


def _damper_vjp(setup: _Setup, grads: _Grads, entry, start, joint_start) -> None:
    _, j, x, q, mu_j = entry
    body_p, body_c = _bodies(setup, j, x, q)
    dir_p, dir_c = _bodies(setup, j, *start)
    args = (setup.frames, j, body_p, body_c, dir_p, dir_c, setup.joint_parent_x[j],
            setup.joint_child_x[j], setup.damping[j], setup.h, joint_start[0][j],
            joint_start[1][j], mu_j)
    corr, _ = damper(*args)
    g_corr, grad_dir_p, grad_dir_c = _moved_joint_vjp(setup, grads, j, q, dir_p, dir_c, corr)
    (*body_grads, g_parent_x, g_child_x, g_damping, g_angle0, g_rate0,
     g_mu) = damper_vjp(*args, g_corr, grads.mu[j])
    body_grads[2] = body_grads[2] + grad_dir_p
    body_grads[3] = body_grads[3] + grad_dir_c
    _add_joint_bodies(setup, grads, j, q, start, body_grads)
    grads.joint_parent_x[j] += g_parent_x
    grads.joint_child_x[j] += g_child_x
    grads.damping[j] += g_damping
    grads.joint_start[:, j] += (g_angle0, g_rate0)
    grads.mu[j] += g_mu


def _joint_velocity_vjp(setup: _Setup, grads: _Grads, entry) -> None:
    _, j, x, q, v, w = entry
    p, c = setup.parent[j], setup.child[j]
    body_p, body_c = _bodies(setup, j, x, q)
    term = _joint_impulse(setup, j, body_p, body_c, v, w)
    corr = Correction(term.lin * term.impulse, term.ang_c * term.impulse,
                      term.ang_p * term.impulse, np.zeros(3))
    zero = np.zeros(3)
    g_corr, grad_p, grad_c = response_vjp(
        body_p, body_c, corr, grads.v[p] if p >= 0 else zero, grads.w[p] if p >= 0 else zero,
        grads.v[c], grads.w[c])
    g_impulse = float(term.lin @ g_corr.p + term.ang_c @ g_corr.tau_c
                      + term.ang_p @ g_corr.tau_p)
    g_lin = term.impulse * g_corr.p
    g_ang_c = term.impulse * g_corr.tau_c
    g_ang_p = term.impulse * g_corr.tau_p
    g_rate = -term.gain * g_impulse
    g_gain = -term.rate * g_impulse
    g_weight = 0.0
    if not term.sliding:  # the friction impulse is the target
        g_rate += g_impulse * (term.gain - 1.0 / term.weight)
        g_gain += g_impulse * term.rate
        g_weight = g_impulse * term.rate / term.weight**2
    if term.capped:
        g_weight -= g_gain * MAX_DAMPING_PER_SUBSTEP / term.weight**2
    elif not setup.second_order:
        grads.damping[j] += g_gain * setup.h
    g_lin = g_lin + g_rate * (v[c] - _velocity(v, p))
    g_ang_c = g_ang_c + g_rate * w[c]
    g_ang_p = g_ang_p - g_rate * _velocity(w, p)
    grads.v[c] += g_rate * term.lin
    grads.w[c] += g_rate * term.ang_c
    if p >= 0:
        grads.v[p] -= g_rate * term.lin
        grads.w[p] -= g_rate * term.ang_p
    more_p, more_c, g_child_x = joint_mass_vjp(setup.frames, j, body_p, body_c,
                                               setup.joint_child_x[j], g_lin, g_ang_c,
                                               g_ang_p, g_weight)
    grads.joint_child_x[j] += g_child_x
    _add_body(setup, grads, p, q[p] if p >= 0 else None, grad_p + more_p)
    _add_body(setup, grads, c, q[c], grad_c + more_c)


def _velocity_constraint_vjp(setup: _Setup, grads: _Grads, entry) -> None:
    _, kind, j, x, q, v, w = entry
    p, c = setup.parent[j], setup.child[j]
    body_p, body_c = _bodies(setup, j, x, q)
    corr = _velocity_projection(setup, kind, j, body_p, body_c, v, w)
    zero = np.zeros(3)
    g_corr, grad_p, grad_c = response_vjp(
        body_p, body_c, corr, grads.v[p] if p >= 0 else zero, grads.w[p] if p >= 0 else zero,
        grads.v[c], grads.w[c])
    velocities = _joint_velocities(setup, j, v, w)
    if kind == _POS:
        more_p, more_c, g_parent_x, g_child_x, g_velocities = velocity_positional_vjp(
            setup.frames, j, body_p, body_c, setup.joint_parent_x[j], setup.joint_child_x[j],
            velocities, g_corr)
        grads.joint_parent_x[j] += g_parent_x
        grads.joint_child_x[j] += g_child_x
    else:
        more_p, more_c, g_velocities = velocity_angular_vjp(setup.frames, j, body_p, body_c,
                                                            velocities, g_corr)
    grads.v[c] += g_velocities[2]
    grads.w[c] += g_velocities[3]
    if p >= 0:
        grads.v[p] += g_velocities[0]
        grads.w[p] += g_velocities[1]
    _add_body(setup, grads, p, q[p] if p >= 0 else None, grad_p + more_p)
    _add_body(setup, grads, c, q[c], grad_c + more_c)


def _velocities_vjp(setup: _Setup, grads: _Grads, entry):
    """Adds the cotangents of the final positions; returns those of the substep's start."""
    _, _, q0, _, q = entry
    h = setup.h
    g_x0 = -grads.v / h
    grads.x += grads.v / h
    g_q0 = np.zeros_like(q0)
    for i in range(len(q)):
        conj = quat_conjugate(q0[i])
        delta = quat_multiply(q[i], conj)
        scale = _readout_scale(setup, delta[0])
        g_delta = np.zeros(4)
        g_delta[1:] = (2.0 / h) * scale * grads.w[i]
        if setup.second_order:  # ∂(1/δq_w)/∂δq_w
            g_delta[0] = -(2.0 / h) * scale * scale * float(delta[1:] @ grads.w[i])
        g_q, g_conj = quat_multiply_vjp(q[i], conj, g_delta)
        grads.q[i] += g_q
        g_q0[i] = quat_conjugate(g_conj)
    grads.v[:] = 0.0
    grads.w[:] = 0.0
    return g_x0, g_q0


def _advance_vjp(setup: _Setup, grads: _Grads, entry) -> None:
    """Turns the cotangents of the predicted positions into those of the substep's start
    positions and the predicted velocities."""
    _, x, q, _, w = entry
    h = setup.h
    g_q = np.zeros_like(q)
    g_w = np.zeros_like(w)
    for i in range(len(q)):
        g_raw = quat_normalize_vjp(quat_integrate(q[i], h * w[i]), grads.q[i])
        g_q[i], g_dphi = quat_integrate_vjp(q[i], h * w[i], g_raw)
        g_w[i] = h * g_dphi
    grads.v = h * grads.x
    grads.w = g_w
    grads.q = g_q


def _accelerate_vjp(setup: _Setup, grads: _Grads, entry, action, h: float,
                    gyroscopic: bool) -> None:
    x, q, v, w = entry[-4:]
    accel = _accelerate(setup, x, q, v, w, action, h, gyroscopic)
    g_matrices = np.zeros_like(accel.matrices)
    g_w = np.zeros_like(w)
    g_torque = np.zeros_like(w)
    for i in range(len(q)):
        r = accel.matrices[i]
        g_w_new = grads.w[i]
        g_wb_new = r.T @ g_w_new
        g_matrices[i] += np.outer(g_w_new, accel.w_body_new[i])
        rhs = accel.torque_body[i] - np.cross(accel.w_body[i], accel.momentum[i])
        g_rhs = h * (setup.inv_inertia[i].T @ g_wb_new)
        grads.inv_inertia[i] += h * np.outer(g_wb_new, rhs)
        g_wb = g_wb_new + np.cross(accel.momentum[i], -g_rhs)
        g_momentum = np.cross(-g_rhs, accel.w_body[i]) if gyroscopic else np.zeros(3)
        grads.inertia[i] += np.outer(g_momentum, accel.w_body[i])
        g_wb += setup.inertia[i].T @ g_momentum
        g_torque[i] = r @ g_rhs
        g_matrices[i] += np.outer(accel.torque[i], g_rhs)
        g_w[i] = r @ g_wb
        g_matrices[i] += np.outer(w[i], g_wb)
    g_v_new = grads.v
    grads.inv_mass += h * np.sum(g_v_new * accel.force, axis=1)
    g_force = h * setup.inv_mass[:, None] * g_v_new
    for j, (x_p, r_p, lin, ang_c, ang_p) in enumerate(accel.jacobians):
        p, c = setup.parent[j], setup.child[j]
        g_f = g_force[c] - (g_force[p] if p >= 0 else 0.0)
        g_t_p = g_torque[p] if p >= 0 else np.zeros(3)
        grads.action[j] += float(lin @ g_f + ang_c @ g_torque[c] - ang_p @ g_t_p)
        g_xp, g_rp, g_xc, g_rc, g_child_x = joint_jacobian_vjp(
            setup.frames, j, x_p, r_p, x[c], accel.matrices[c], setup.joint_child_x[j],
            action[j] * g_f, action[j] * g_torque[c], -action[j] * g_t_p)
        grads.joint_child_x[j] += g_child_x
        grads.x[c] += g_xc
        g_matrices[c] += g_rc
        if p >= 0:
            grads.x[p] += g_xp
            g_matrices[p] += g_rp
    for i in range(len(q)):
        grads.q[i] += quat_to_matrix_vjp(q[i], g_matrices[i])
    grads.v = g_v_new.copy()
    grads.w = g_w


def _substep_vjp(setup: _Setup, grads: _Grads, tape, action) -> None:
    grads.lam[:] = 0.0
    grads.mu[:] = 0.0
    grads.x0[:] = 0.0
    grads.q0[:] = 0.0
    grads.joint_start[:] = 0.0
    _, x0, q0, v0, w0 = tape[0]
    start_state = PBDState(link_x=x0, link_q=q0, link_v=v0, link_w=w0)
    start = (x0, q0)
    joint_start = (joint_positions(setup.model, _joint_params(setup), start_state)
                   if setup.second_order else None)
    start_grads = None
    for entry in reversed(tape):
        kind = entry[0]
        if kind == "velocity":
            start_grads = _velocities_vjp(setup, grads, entry)
        elif kind == "gauss_seidel":
            _gauss_seidel_vjp(setup, grads, entry, start)
        elif kind == "jacobi":
            _jacobi_vjp(setup, grads, entry, start)
        elif kind == "damper":
            _damper_vjp(setup, grads, entry, start, joint_start)
        elif kind == "advance":
            _advance_vjp(setup, grads, entry)
        elif kind == "joint_velocity":
            _joint_velocity_vjp(setup, grads, entry)
        else:
            _accelerate_vjp(setup, grads, entry, action, setup.h, True)
    grads.x += start_grads[0] + grads.x0
    grads.q += start_grads[1] + grads.q0
    if setup.second_order:
        g_start, g_origins = joint_positions_vjp(setup.model, _joint_params(setup), start_state,
                                                 *grads.joint_start)
        grads.x += g_start.link_x
        grads.q += g_start.link_q
        grads.v += g_start.link_v
        grads.w += g_start.link_w
        grads.joint_parent_x += g_origins["joint_parent_x"]
        grads.joint_child_x += g_origins["joint_child_x"]


def step_vjp(model: PBDModel, state: PBDState, action, params, dt: float, g_next: PBDState, *,
             substeps: int, iterations: int, solver: str = "gauss_seidel",
             kernels: str = "numba", scheme: str = "second_order"):
    """(∂L/∂state as a PBDState, ∂L/∂action (m,), ∂L/∂params dict like ``params``) of
    :func:`step` given ∂L/∂(next state) ``g_next``."""
    action = _checked(model, state, action, params, dt, substeps, iterations, solver, kernels,
                      scheme)
    if kernels == "numba":
        return compiled.step_vjp(model, state, action, params, dt, g_next, substeps=substeps,
                                 iterations=iterations, solver=solver, scheme=scheme)
    setup = _setup(model, params, dt, substeps, scheme)
    tapes = []
    _run(setup, state, action, iterations, solver, substeps, tapes)
    grads = _Grads(setup, g_next, model.joint_count)
    for tape in reversed(tapes):
        if tape[0] == "kick":
            _accelerate_vjp(setup, grads, tape, action, tape[1] * 0.5 * setup.h, False)
        elif tape[0] == "velocity_constraint":
            _velocity_constraint_vjp(setup, grads, tape)
        else:
            _substep_vjp(setup, grads, tape, action)
    q_in = np.asarray(state.link_q, dtype=np.float64)
    g_q = np.array([quat_normalize_vjp(q_in[i], grads.q[i]) for i in range(len(q_in))])
    mass = np.asarray(params["link_mass"], dtype=np.float64)
    g_inertia = grads.inertia - np.einsum("nji,njk,nlk->nil", setup.inv_inertia,
                                          grads.inv_inertia, setup.inv_inertia)
    g_params = {
        "link_mass": -grads.inv_mass / mass**2,
        "link_inertia": 0.5 * (g_inertia + np.swapaxes(g_inertia, 1, 2)),
        "joint_parent_x": grads.joint_parent_x,
        "joint_child_x": grads.joint_child_x,
        "joint_damping": grads.damping,
        "joint_compliance": grads.compliance / setup.h**2,
    }
    g_state = PBDState(link_x=grads.x, link_q=g_q.reshape(-1, 4), link_v=grads.v,
                       link_w=grads.w)
    return g_state, grads.action, g_params
