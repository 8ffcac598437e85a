"""A NumPy prototype of a second-order XPBD step for sim_pbd, measured against Pinocchio
(the "Where the first order comes from" paragraph of the sim_pbd README).

It reuses ``sim_pbd.step``'s private NumPy pieces and changes three things, each switchable:

- ``--kick``: half kicks of gravity and actuation before and after the substeps, so the
  substeps run a leapfrog on half-step velocities (they cancel exactly between steps);
- ``--cayley``: the angular velocity read back as 2 vec(δq) / (h δq_w), the inverse of the
  Cayley orientation update;
- ``--shake``: projections along the levers, axes and inverse inertias of the substep's
  start (SHAKE) instead of the current iterate;

and ``--damping midpoint`` solves joint damping in the projection loop (a damper whose
impulse is -b h (ċ_in + ċ_new) / 2, along the start configuration's joint Jacobian with
``--shake``) instead of the package's explicit impulse. Not the package's step: no compiled
kernels, no adjoint.

Usage: ``python benchmarks/pbd_second_order_prototype.py --substeps 10 20 --duration 2
--damping-coefficient 0.7 --kick --cayley --shake --damping midpoint --iterations 4``
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

import sim_pbd.constraints as constraints
import sim_pbd.step as reference_step
from sim_pbd.kinematics import joint_coordinate, joint_positions
from sim_pbd.scene import make_simulator
from sim_pbd.state import PBDState

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pbd_step import DT, LEFT_ARM, POSE, load_reference  # noqa: E402

S = reference_step
WINDOWS = (0.1, 0.25, 0.5, 1.0, 2.0)  # [s] over which the largest error is printed


def _joint(setup, j, x, q):
    """(body_p, body_c, lin, ang_c, ang_p, w) of joint j at poses x, q."""
    body_p, body_c = S._bodies(setup, j, x, q)
    lin, ang_c, ang_p, w = constraints.joint_mass(setup.frames, j, body_p, body_c,
                                                  setup.joint_child_x[j])
    return body_p, body_c, lin, ang_c, ang_p, w


def _angle(setup, j, x, q):
    body_p, body_c = S._bodies(setup, j, x, q)
    return joint_coordinate(setup.frames, j, body_p.x, body_p.r, body_c.x, body_c.r,
                            setup.joint_parent_x[j], setup.joint_child_x[j])


def _rate(setup, j, x, q, v, w):
    _, _, lin, ang_c, ang_p, _ = _joint(setup, j, x, q)
    p, c = setup.parent[j], setup.child[j]
    return float(lin @ (v[c] - S._velocity(v, p)) + ang_c @ w[c] - ang_p @ S._velocity(w, p))


def _apply(setup, j, x, q, body_p, body_c, corr):
    dx_p, dphi_p, dx_c, dphi_c = constraints.response(body_p, body_c, corr)
    S._move(x, q, setup.child[j], dx_c, dphi_c)
    S._move(x, q, setup.parent[j], dx_p, dphi_p)


def _shake_pass(setup, x, q, x0, q0):
    """One Gauss-Seidel pass with every correction along the substep's start (x0, q0)."""
    for j in setup.frames.order:
        now_p, now_c = S._bodies(setup, j, x, q)
        start_p, start_c = S._bodies(setup, j, x0, q0)
        lever_c = start_c.r @ setup.joint_child_x[j]
        lever_p = start_p.r @ setup.joint_parent_x[j]
        gap = (now_c.x + now_c.r @ setup.joint_child_x[j] - now_p.x
               - now_p.r @ setup.joint_parent_x[j])
        fill = start_c.inv_mass + start_p.inv_mass
        k = (fill * np.eye(3) + constraints._lever_term(lever_c, start_c.a)
             + constraints._lever_term(lever_p, start_p.a))
        dlam = constraints._block(k, None, fill, 0.0, gap)
        corr = constraints.Correction(dlam, np.cross(lever_c, dlam), np.cross(lever_p, dlam),
                                      dlam)
        _apply(setup, j, x, q, start_p, start_c, corr)
        now_p, now_c = S._bodies(setup, j, x, q)
        error, _, _ = constraints._angular_error(setup.frames, j, now_p, now_c)
        _, axis, _ = constraints._angular_error(setup.frames, j, start_p, start_c)
        k = start_c.a + start_p.a
        dlam = constraints._block(k, axis, float(np.trace(k)) / 3.0, 0.0, error)
        _apply(setup, j, x, q, start_p, start_c,
               constraints.Correction(np.zeros(3), dlam, dlam, dlam))


def _damper_pass(setup, x, q, x0, q0, angle0, rate0, lam, shake):
    """Joint damping as a constraint: impulse -b h (ċ_in + ċ_new) / 2 per joint."""
    h = setup.h
    for j in setup.frames.order:
        b = setup.damping[j]
        if b == 0:
            continue
        angle = _angle(setup, j, x, q)
        body_p, body_c, lin, ang_c, ang_p, w = _joint(setup, j, x0 if shake else x,
                                                      q0 if shake else q)
        dlam = -(0.5 * b * h * (angle - angle0[j]) + 0.5 * b * h * h * rate0[j] + lam[j]) / (
            1.0 + 0.5 * b * h * w)
        lam[j] += dlam
        _apply(setup, j, x, q, body_p, body_c,
               constraints.Correction(lin * dlam, ang_c * dlam, ang_p * dlam, np.zeros(3)))


def _velocities(setup, x0, q0, x, q, cayley):
    w = np.zeros_like(x)
    for i in range(len(q)):
        d = S.quat_multiply(q[i], S.quat_conjugate(q0[i]))
        w[i] = (2.0 / setup.h) * (d[1:] / d[0] if cayley else np.copysign(1.0, d[0]) * d[1:])
    return (x - x0) / setup.h, w


def _substep(setup, x, q, v, w, action, args):
    m = len(action)
    midpoint = args.damping == "midpoint"
    angle0 = np.array([_angle(setup, j, x, q) for j in range(m)])
    rate0 = np.array([_rate(setup, j, x, q, v, w) for j in range(m)])
    accel = S._accelerate(setup, x, q, v, w, action, setup.h, True)
    v_pred, w_pred = accel.v, accel.w
    velocity_terms = setup._replace(damping=np.zeros(m)) if midpoint else setup
    S._joint_velocity_terms(velocity_terms, x, q, v_pred, w_pred, None)
    x_new, q_new = S._advance(setup, x, q, v_pred, w_pred)
    lam, lam_damper = np.zeros((2, m, 3)), np.zeros(m)
    for _ in range(args.iterations):
        if args.shake:
            _shake_pass(setup, x_new, q_new, x, q)
        else:
            S._gauss_seidel_pass(setup, x_new, q_new, None, lam, None)
        if midpoint:
            _damper_pass(setup, x_new, q_new, x, q, angle0, rate0, lam_damper, args.shake)
    v_new, w_new = _velocities(setup, x, q, x_new, q_new, args.cayley)
    return x_new, q_new, v_new, w_new


def _half_kick(setup, x, q, v, w, action, sign):
    h = setup.h
    matrices = np.array([S.quat_to_matrix(qi) for qi in q])
    force, torque, _ = S._forces(setup, x, matrices, action)
    v = v + sign * 0.5 * h * (setup.gravity + setup.inv_mass[:, None] * force)
    w_body = np.einsum("nji,nj->ni", matrices, w)
    torque_body = np.einsum("nji,nj->ni", matrices, torque)
    w_body = w_body + sign * 0.5 * h * np.einsum("nij,nj->ni", setup.inv_inertia, torque_body)
    return v, np.einsum("nij,nj->ni", matrices, w_body)


def prototype_step(model, state, action, params, dt, args) -> PBDState:
    """One step of the prototype scheme chosen by ``args``."""
    setup = S._setup(model, params, dt, args.substeps_now, "first_order")
    x, q, v, w = S._start(state)
    if args.kick:
        v, w = _half_kick(setup, x, q, v, w, action, -1.0)
    for _ in range(args.substeps_now):
        x, q, v, w = _substep(setup, x, q, v, w, action, args)
    if args.kick:
        v, w = _half_kick(setup, x, q, v, w, action, +1.0)
    return PBDState(link_x=x, link_q=q, link_v=v, link_w=w)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--substeps", type=int, nargs="+", default=[10, 20])
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--duration", type=float, default=2.0)
    parser.add_argument("--damping-coefficient", type=float, default=0.7)
    parser.add_argument("--damping", choices=("explicit", "midpoint"), default="explicit")
    for flag in ("--kick", "--cayley", "--shake"):
        parser.add_argument(flag, action="store_true")
    args = parser.parse_args(argv)
    reference = load_reference()
    if reference is None:
        raise SystemExit("the reference library is missing: pip install pin")
    arm = reference.reduced_baxter(LEFT_ARM)
    truth, _ = reference.release(arm, POSE, damping=args.damping_coefficient,
                                 duration=args.duration)
    windows = [t for t in WINDOWS if t <= args.duration]
    print(f"largest joint-angle error [rad] over the first {windows} s; {vars(args)}")
    for substeps in args.substeps:
        args.substeps_now = substeps
        sim = make_simulator(urdf="baxter", joints=LEFT_ARM, joint_limits=False,
                             initial_positions=POSE, damping=args.damping_coefficient,
                             substeps=substeps, iterations=args.iterations)
        design = sim.design_space().defaults()
        params = sim.parameters(design)
        state = sim.initial_state(design)
        rows = [joint_positions(sim.model, params, state)[0]]
        for _ in range(int(round(args.duration / DT))):
            state = prototype_step(sim.model, state, np.zeros(7), params, DT, args)
            rows.append(joint_positions(sim.model, params, state)[0])
        error = reference.angle_error(np.array(rows), truth).max(axis=1)
        worst = " ".join(f"{error[: int(round(t / DT)) + 1].max():.2e}" for t in windows)
        print(f"{substeps:4d} substeps x {args.iterations} iterations: {worst}", flush=True)


if __name__ == "__main__":
    main()
