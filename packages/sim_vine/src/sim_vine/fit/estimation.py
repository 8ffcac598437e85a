"""Joint state and parameter estimation from keypoints (Jitosho et al. 2023, Section III).

One nonlinear program over the whole trajectory: the decision variables are the poses
``q_k`` (k = 0 … K) and velocities ``v_k`` (k = 1 … K) at every model step, the constraint
impulses and the model parameters; the dynamics enter as residuals weighted by a trust R
rather than as hard constraints, so both the model and the video may be wrong:

    min  Σ_frames ‖p(q_f) − p̂_f‖² + R Σ_k (‖r^q_k‖² + ‖r^v_k‖²)
    s.t. r^q_k = q_{k+1} − q_k − Δt v_{k+1}                    (k = 0 … K−1)
         r^v_k = momentum of the simulator's step k             (k = 1 … K−1)
         J(q_k) v_{k+1} Δt + c(q_k) = 0                        (joints, k = 0 … K−1)
         G(q_k) v_{k+1} = (u_k + offset) w_growth               (growth)
         (N + s μ T)·v_c,k+1 Δt + Φ(q_k) = 0, impulse ≥ 0        (known contacts)
         c(q_0) = 0, extensions(q_0) = w_growth e_0             (a vine at the start)

The momentum residual is the simulator's own step (:mod:`sim_vine.step`), ``M(v' − v) +
Δt c_g M v' − Δt R τ' − Δt m g − Jᵀλ − Gᵀw − Σ impulses`` with the implicit (or explicit)
spring-damper torque about the rest angles φ0, ``τ = −K(φ − φ0) − Cφ̇``, and the implicit
viscous ground friction c_g. The constraints are written in the step's linearized form, so
a trajectory of the simulator is exactly feasible with zero residual
(``tests/test_estimation_warm_start.py``); the paper writes ``c(q) = 0`` and ``Φ(q) = 0``,
which differ from these by O(Δt²). Masses that grow with the everted length
(``linear_density``) are M(q_k) in step k's momentum, the masses and inertias of
:mod:`sim_vine.everted_mass` as CasADi expressions of the poses. Not modelled: the everting
vine (``growth: evert``, slot joints instead of prismatic pairs): refused, fit it by
shooting.

Start: poses fitted to each frame's keypoints, linear in time between frames, with contacts
detected on them; or a warm start (:mod:`sim_vine.fit.warm_start`), a simulated trajectory
such as a shooting fit's rollout with its velocities, impulses, design and the simulator's
own active contacts.

Why it is posed this way (each found on a simulated wall run, where IPOPT used to leave
the exact solution and stop at its iteration limit):

- ``q_0`` is a configuration of the model: joints closed and the prismatic extensions
  shared as the growth mode shares them (``e_0`` a variable). Otherwise a start pose that
  breaks a joint where no keypoint sees it (a child's proximal end), or shares the
  extensions differently, is repaired by the first steps' impulses at no cost.
- Step 0 has no momentum residual and no ``v_0``: ``v_0`` would appear there only, next
  to step 0's impulses, so its components along the joints are free (a null space of the
  reduced Hessian as wide as the joint and growth rows). The velocity before step 0 that
  :class:`Estimate` reports is the one step 0's momentum implies with no constraint
  impulse; the simulator's next step does not depend on its components along the joints.
- IPOPT gets a Gauss-Newton Hessian (see :func:`_solve_ipopt`), the variables are scaled
  to millimetres (:mod:`sim_vine._transcription`), and the contact schedule is updated
  from the estimated trajectory (``contact_rounds``): a schedule from poses cannot see a
  bounce shorter than a frame.

Known contacts: ``contacts[k, pair]`` is 0 (free), +1 or −1 (in contact, the friction
impulse along the cone edge N ± μT, the simulator's polyhedral cone for a sliding contact);
see :mod:`sim_vine.fit.contact_schedule`. After a solve, contacts whose impulse stayed at zero
are dropped and points that ended inside an obstacle are added, and the problem is solved
again from the previous solution, until the schedule stops changing.

Units: the variables, residuals and rows are in millimetres, so the trust R is
dimensionless: R = 1 weighs a 1 mm model deviation per step like a 1 mm keypoint error per
frame.

Frames and steps: model step k = f × substeps is video frame f (see
:func:`sim_vine.fit.shooting.frame_schedule`); frames without keypoints are left out.

Solvers: IPOPT through CasADi (the ``fit`` extra: ``pip install sim_vine[fit]``; exact
gradients and Gauss-Newton Hessians by automatic differentiation), or SciPy's
``trust-constr`` (exact Hessians) on the same CasADi functions for comparison. The package
README gives the measurements behind the default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..model import VineModel
from ..state import VineState
from ._transcription import FreeParameter, Program, StartPoint, transcribe
from .contact_schedule import detect_contacts, update_contacts
from .shooting import (
    FrameSchedule,
    ShootingFit,
    VideoRecording,
    frame_schedule,
    simulate_keypoints,
    tip_errors_mm,
)
from .start_pose import start_pose_from_keypoints
from .warm_start import WarmStart, warm_start_from_fit

__all__ = [
    "EstimationError",
    "Estimate",
    "casadi_available",
    "estimate",
    "ESTIMATED_PARAMETERS",
]

ESTIMATED_PARAMETERS = ("joint.stiffness", "joint.damping", "joint.rest_angle", "contact.friction",
                        "ground.friction", "growth.offset")
"""Design parameters the estimation can fit; the others stay at the simulator's design."""

_RELEASE = 1e-3
"""A contact impulse below this many scaled units (it moves the mean body less than 1 µm in
a step) does not push: IPOPT leaves an impulse at its bound about 1e-4 units above it."""


class EstimationError(RuntimeError):
    """The estimation could not be set up or solved; the message says why and what to try."""


def casadi_available() -> bool:
    """True when CasADi (with its bundled IPOPT) can be imported."""
    try:
        import casadi  # noqa: F401
    except ImportError:
        return False
    return True


def _casadi():
    try:
        import casadi
    except ImportError as exc:
        raise EstimationError(
            "joint state and parameter estimation needs CasADi (bundled IPOPT); install the "
            "fit extra: pip install ./packages/codesign './packages/sim_vine[fit]' from a "
            "checkout (or pip install casadi)") from exc
    return casadi


@dataclasses.dataclass(frozen=True)
class Estimate:
    """What :func:`estimate` found.

    Attributes:
        fitted: fitted value of each free parameter (scalars unless fitted per joint).
        design: the simulator design with the fitted values (per-pin arrays).
        body_q, body_qd: estimated states at every model step, shape (K + 1, N, 3).
        predicted: keypoints of a simulation with the fitted parameters from the estimated
            initial state [m], (frames, n, 2).
        tip_error_mm: tip errors of ``predicted`` against the video (the paper's metric).
        contacts: the contact modes of the last solve, shape (K, pairs).
        contact_impulse: normal impulses of the scheduled contacts [N s], shape (K, pairs);
            NaN at step 0 (no momentum residual there) and 0 where free.
        contact_rounds: solves made while updating the contact schedule.
        status: the last solve's return status; iterations: solver iterations over all
        solves.
    """

    fitted: dict[str, np.ndarray]
    design: dict[str, np.ndarray]
    body_q: np.ndarray
    body_qd: np.ndarray
    predicted: np.ndarray
    tip_error_mm: dict[str, float]
    contacts: np.ndarray
    contact_impulse: np.ndarray
    contact_rounds: int
    status: str
    iterations: int


def _keypoint_poses(model: VineModel, recording: VideoRecording, schedule: FrameSchedule,
                    fit_length: bool) -> np.ndarray:
    """Poses at every model step (K + 1, N, 3): the keypoints' poses, linear in time."""
    points = recording.keypoints.points
    frames = len(points)
    seen = [f for f in range(frames) if np.all(np.isfinite(points[f]))]
    if 0 not in seen:
        raise EstimationError("frame 0 has no keypoints; the first frame must show the vine")
    frame_q = np.stack([start_pose_from_keypoints(model, points[f], fit_length=fit_length)
                        .body_q(model) for f in seen])
    frame_q[:, :, 2] = np.unwrap(frame_q[:, :, 2], axis=0)
    t_steps = np.arange((frames - 1) * schedule.substeps + 1) / schedule.substeps
    columns = frame_q.reshape(len(seen), -1).T
    q = np.stack([np.interp(t_steps, seen, column) for column in columns], axis=1)
    return q.reshape(len(t_steps), model.body_count, 3)


def _check_warm_start(warm_start: WarmStart, model: VineModel, steps: int, pairs: int):
    """Refuse a warm start that does not cover the recording's model steps."""
    n = model.body_count
    expected = {"body_q": (steps + 1, n, 3), "body_qd": (steps + 1, n, 3),
                "contacts": (steps, pairs), "contact_impulse": (steps, pairs)}
    wrong = {name: np.shape(getattr(warm_start, name)) for name, shape in expected.items()
             if np.shape(getattr(warm_start, name)) != shape}
    if wrong or len(warm_start.joint_impulse) != steps:
        raise EstimationError(
            f"the warm start does not cover the recording's {steps} model steps of {n} bodies "
            f"and {pairs} contact pairs (shapes {wrong or 'of joint_impulse'} differ): "
            "simulate it with the recording's growth rates, schedule and this simulator")


def _free_parameters(space, design, free, per_joint, bounds):
    """The free parameters' places and scaled starting values."""
    items, starts = [], []
    for name in free:
        p = space[name]
        value = np.asarray(design[name], dtype=np.float64)
        start = value.reshape(-1) if name in per_joint else np.array([float(np.mean(value))])
        low, high = (bounds or {}).get(name, (float(np.max(p.lower_array())),
                                              float(np.min(p.upper_array()))))
        scale = max(float(np.max(np.abs(start))), p.scale)
        index = slice(len(starts), len(starts) + len(start))
        starts.extend(start / scale)
        items.append(FreeParameter(name, index, scale, float(low), float(high),
                                   name in per_joint))
    return items, np.asarray(starts, dtype=np.float64)


def _solve_ipopt(ca, program: Program, max_iterations, tolerance, verbose):
    options = {"ipopt.max_iter": int(max_iterations), "ipopt.tol": tolerance,
               "ipopt.print_level": 5 if verbose else 0, "print_time": bool(verbose),
               "ipopt.sb": "yes", "ipopt.mu_strategy": "adaptive"}
    # Gauss-Newton: the objective's Hessian without the residuals' curvature (2 JᵀJ,
    # positive semidefinite) and without the rows' curvature. The exact Hessian is
    # indefinite away from the solution (the bilinear K φ, C φ̇ and impulse-Jacobian terms
    # weighted by large residuals and multipliers), so IPOPT regularized it at almost every
    # iteration and crawled; its optimality test still uses exact gradients.
    jac = ca.jacobian(program.weighted, program.x)
    sigma, lam_g = ca.SX.sym("sigma"), ca.SX.sym("lam_g", program.rows.shape[0])
    options["hess_lag"] = ca.Function(
        "nlp_hess_l", [program.x, ca.SX.sym("p", 0), sigma, lam_g],
        [ca.triu(2 * sigma * ca.mtimes(jac.T, jac))])
    nlp = ca.nlpsol("estimate", "ipopt", {"x": program.x, "f": ca.sumsqr(program.weighted),
                                          "g": program.rows}, options)
    solution = nlp(x0=program.x0, lbx=program.lower, ubx=program.upper, lbg=0.0, ubg=0.0)
    stats = nlp.stats()
    status, iterations = str(stats["return_status"]), int(stats["iter_count"])
    if not stats["success"] and status != "Solved_To_Acceptable_Level":
        raise EstimationError(
            f"IPOPT did not solve the estimation ({status} after {iterations} iterations); "
            "try a better starting design, a smaller trust, more max_iterations, or check "
            "the contact schedule")
    return np.asarray(solution["x"]).reshape(-1), status, iterations


def _solve_trust_constr(ca, program: Program, max_iterations, tolerance, verbose):
    """SciPy trust-constr on the same NLP, with CasADi's exact derivatives."""
    import scipy.optimize
    import scipy.sparse

    x, g, objective = program.x, program.rows, ca.sumsqr(program.weighted)
    multipliers = ca.SX.sym("mult", g.shape[0])
    f_fn = ca.Function("f", [x], [objective, ca.gradient(objective, x)])
    g_fn = ca.Function("g", [x], [g, ca.jacobian(g, x)])
    h_fn = ca.Function("h", [x, multipliers], [ca.hessian(ca.dot(multipliers, g), x)[0]])
    h_obj = ca.Function("ho", [x], [ca.hessian(objective, x)[0]])

    def csc(matrix):
        return scipy.sparse.csc_matrix(matrix.sparse() if hasattr(matrix, "sparse") else matrix)

    def fun(z):
        value, grad = f_fn(z)
        return float(value), np.asarray(grad).reshape(-1)

    constraint = scipy.optimize.NonlinearConstraint(
        lambda z: np.asarray(g_fn(z)[0]).reshape(-1), 0.0, 0.0,
        jac=lambda z: csc(g_fn(z)[1]),
        hess=lambda z, mult: csc(h_fn(z, mult)))
    lower, upper = program.lower, program.upper
    finite = np.isfinite(lower) | np.isfinite(upper)
    result = scipy.optimize.minimize(
        fun, np.clip(program.x0, lower, upper), jac=True, hess=lambda z: csc(h_obj(z)),
        method="trust-constr", constraints=[constraint],
        bounds=scipy.optimize.Bounds(lower, upper) if np.any(finite) else None,
        options={"maxiter": int(max_iterations), "gtol": tolerance, "xtol": 1e-14,
                 "verbose": 2 if verbose else 0})
    if result.status not in (1, 2):
        raise EstimationError(f"trust-constr did not solve the estimation ({result.message}); "
                              "use solver='ipopt'")
    return np.asarray(result.x), str(result.message), int(result.nit)


def estimate(
    simulator,
    recording: VideoRecording,
    *,
    design: Mapping[str, Any] | None = None,
    warm_start: WarmStart | ShootingFit | None = None,
    free: Sequence[str] = ("joint.stiffness", "joint.damping"),
    per_joint: Sequence[str] = (),
    bounds: Mapping[str, tuple[float, float]] | None = None,
    contacts: np.ndarray | None = None,
    contact_tolerance: float = 2e-3,
    contact_rounds: int = 4,
    trust: float = 1e4,
    model_rate: float = 90.0,
    fit_length: bool = True,
    solver: str = "ipopt",
    max_iterations: int = 500,
    tolerance: float | None = None,
    verbose: bool = False,
) -> Estimate:
    """Estimate the trajectory and the model parameters jointly from one recording.

    Args:
        simulator: a :class:`~sim_vine.simulator.VineSimulator`: its model and (unless
            ``design`` is given) its design defaults, which are the starting guess for the
            free parameters and the values of the fixed ones.
        recording: keypoints and commanded growth rate.
        design: the simulator design to start from (default the simulator's defaults, or
            the warm start's).
        warm_start: start from a simulated trajectory instead of the keypoints' poses: a
            :class:`~sim_vine.fit.warm_start.WarmStart`, or the
            :class:`~sim_vine.fit.shooting.ShootingFit` of this recording (its rollout, see
            :func:`~sim_vine.fit.warm_start.warm_start_from_fit`). Its poses, velocities,
            impulses and design are the initial point, and its active contact rows the
            initial contact schedule (unless ``contacts`` is given).
        free: parameters to fit, from :data:`ESTIMATED_PARAMETERS`.
        per_joint: free per-pin or per-body parameters fitted per entry; the others are one
            value shared by every entry.
        bounds: ``name -> (lower, upper)`` for free parameters (default: the design
            space's bounds).
        contacts: contact modes per model step, shape (steps, pairs), see
            :func:`sim_vine.fit.contact_schedule.detect_contacts`; default: the warm start's,
            or detected on the poses fitted to the keypoints with ``contact_tolerance`` [m].
        contact_rounds: solves after the first that may update the schedule from the
            estimated trajectory (:func:`sim_vine.fit.contact_schedule.update_contacts`: drop
            contacts that do not push, add points that penetrate) until it stops changing;
            0 keeps ``contacts`` as given.
        trust: the weight R of the dynamics residuals (dimensionless, see the module).
        model_rate: model steps per second [Hz] (see
            :func:`sim_vine.fit.shooting.frame_schedule`).
        fit_length: fit each frame's vine length in the poses of the initial guess (and of
            the contact detection); ``False`` keeps the model's length, which only suits a
            vine that does not grow. The estimate fits the start's length either way.
            Not used with ``warm_start``.
        solver: ``"ipopt"`` (CasADi's bundled IPOPT) or ``"trust-constr"`` (SciPy).
        max_iterations, tolerance: solver limits per solve. The tolerance is IPOPT's on the
            NLP as IPOPT scales it (variables about millimetres); default 1e-8, and 1e-5
            with ``warm_start``: from the keypoints' poses the objective's gradient is about
            1e10 and IPOPT scales the objective by 100 / that, from a warm start it is about
            1 and unscaled, where the dual infeasibility stalls at 1e-6–1e-5 (the package
            README's measurement) and 1e-8 is never reached.
        verbose: print the solver's progress.
    """
    ca = _casadi()
    model: VineModel = simulator.model
    space = simulator.design_space()
    unknown = [name for name in free if name not in ESTIMATED_PARAMETERS]
    if unknown:
        raise EstimationError(f"the estimation fits {ESTIMATED_PARAMETERS}; cannot fit {unknown}")
    if solver not in ("ipopt", "trust-constr"):
        raise EstimationError(f"solver must be 'ipopt' or 'trust-constr', got {solver!r}")
    if not (np.isfinite(trust) and trust > 0):
        raise EstimationError(f"trust must be a positive number, got {trust}")
    if int(contact_rounds) < 0:
        raise EstimationError(f"contact_rounds must be >= 0, got {contact_rounds}")
    if model.evert:
        raise EstimationError(
            "the joint estimation models prismatic pairs; the simulator's vine everts "
            "(growth: evert): fit it by shooting (fit_shooting), or build the simulator with "
            "growth every_prismatic or tip")
    if warm_start is not None and design is not None:
        raise EstimationError("give the starting design or a warm start, not both: the warm "
                              "start's design is where it starts")
    if isinstance(warm_start, ShootingFit):
        warm_start = warm_start_from_fit(simulator, warm_start, recording,
                                         model_rate=model_rate)
    if warm_start is not None:
        design = warm_start.design
    base_design = space.check(dict(space.defaults() if design is None else design))
    keypoints = recording.keypoints
    schedule = frame_schedule(keypoints.times, model_rate=model_rate)
    steps = (keypoints.frame_count - 1) * schedule.substeps
    if steps < 2:
        raise EstimationError("the estimation needs at least two model steps; use more frames "
                              "or a higher model_rate")
    rates = np.repeat(recording.growth_table()[:, 0], schedule.substeps)
    n_pairs = model.contact_count * len(model.obstacles)
    if warm_start is None:
        q_guess = _keypoint_poses(model, recording, schedule, fit_length)
        if contacts is None:
            contacts = detect_contacts(model, q_guess, tolerance=contact_tolerance)
    else:
        _check_warm_start(warm_start, model, steps, n_pairs)
        if contacts is None:
            contacts = warm_start.contacts
    contacts = np.asarray(contacts, dtype=np.int64)
    if contacts.shape != (steps, n_pairs):
        raise EstimationError(f"contacts must have shape (steps, pairs) = ({steps}, {n_pairs}), "
                              f"got {contacts.shape}")
    items, theta0 = _free_parameters(space, base_design, free, per_joint, bounds)
    solve = _solve_ipopt if solver == "ipopt" else _solve_trust_constr
    if tolerance is None:
        tolerance = 1e-8 if warm_start is None else 1e-5
    start = (StartPoint(theta=theta0, body_q=q_guess) if warm_start is None
             else StartPoint(theta=theta0, body_q=warm_start.body_q,
                             body_qd=warm_start.body_qd[1:],
                             reactions=warm_start.joint_impulse[1:],
                             contact_impulses=warm_start.contact_impulse))
    iterations, rounds = 0, 0
    while True:
        program = transcribe(ca, model, measured=keypoints.points,
                             substeps=schedule.substeps, dt=schedule.dt, rates=rates,
                             contacts=contacts, design=base_design, free=items, start=start,
                             trust=trust)
        x_opt, status, count = solve(ca, program, max_iterations, tolerance, verbose)
        iterations, rounds = iterations + count, rounds + 1
        impulse = program.contact_impulse(x_opt, contacts)
        if rounds > int(contact_rounds):
            break
        updated = update_contacts(model, contacts, program.body_q(x_opt), impulse,
                                  release=_RELEASE * program.impulse_unit)
        if np.array_equal(updated, contacts):
            break
        contacts = updated
        start = program.warm_start(x_opt, schedule.dt, impulse)
    return _result(ca, simulator, recording, program, x_opt, items, base_design, schedule,
                   contacts=contacts, impulse=impulse, rounds=rounds, status=status,
                   iterations=iterations)


def _result(ca, simulator, recording: VideoRecording, program: Program, x_opt, items,
            base_design, schedule: FrameSchedule, *, contacts, impulse, rounds, status,
            iterations) -> Estimate:
    """Unpack a solution into an :class:`Estimate` (with the fitted model's prediction)."""
    model = simulator.model
    keypoints = recording.keypoints
    theta_opt = x_opt[program.theta]
    fitted, fitted_design = {}, dict(base_design)
    for item in items:
        value = theta_opt[item.index] * item.scale
        fitted[item.name] = value.copy() if item.per_joint else np.asarray(float(value[0]))
        fitted_design[item.name] = np.broadcast_to(fitted[item.name],
                                                   np.shape(base_design[item.name])).copy()
    body_q = program.body_q(x_opt)
    body_qd = np.empty_like(body_q)
    body_qd[1:] = program.body_qd(x_opt, schedule.dt)
    body_qd[0] = np.asarray(ca.Function("v0", [program.x], [program.start_velocity])(
        x_opt)).reshape(model.body_count, 3)
    predicted = simulate_keypoints(
        simulator, fitted_design, initial_state=VineState(body_q=body_q[0].copy(),
                                                          body_qd=body_qd[0].copy()),
        growth_rate=recording.growth_table()[:, 0], schedule=schedule,
        frames=keypoints.frame_count, points=keypoints.point_count)
    return Estimate(
        fitted=fitted, design=fitted_design, body_q=body_q, body_qd=body_qd, predicted=predicted,
        tip_error_mm=tip_errors_mm(predicted, keypoints.points), contacts=contacts,
        contact_impulse=impulse, contact_rounds=rounds, status=status, iterations=iterations)
