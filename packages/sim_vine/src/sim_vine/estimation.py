"""Joint state and parameter estimation from keypoints (Jitosho et al. 2023, Section III).

One nonlinear program over the whole trajectory: the decision variables are the state
``(q_k, v_k)`` at every model step, the constraint impulses of every step and the model
parameters; the dynamics enter as residuals weighted by a trust matrix R rather than as
hard constraints, so both the model and the video may be wrong:

    min  Σ_frames ‖p(q_f) − p̂_f‖² + Σ_k r_kᵀ R r_k
    s.t. r_k = Z_{k+1} − f(Z_k, θ; impulses_k)        (dynamics residual, k = 0 … K−1)
         J(q_k) v_{k+1} Δt + c(q_k) = 0              (joints)
         G(q_k) v_{k+1} = (u_k + offset) w_growth     (growth)
         (N + s μ T)·v_c,k+1 Δt + Φ(q_k) = 0           (known contacts, impulse ≥ 0)

f is the simulator's own step (:mod:`sim_vine.step`): momentum ``M(v' − v) = Δt R τ' +
Δt m g + Jᵀλ + Gᵀw + Σ impulses`` with the implicit (or explicit) spring-damper torque, and
``q' = q + Δt v'``. The constraints are written in the step's linearized form, so a
trajectory of the simulator is exactly feasible with zero residual; the paper writes
``c(q) = 0`` and ``Φ(q) = 0``, which differ from these by O(Δt²).

Residual units: the momentum residual is turned into the displacement it causes over one
step, ``Δt M⁻¹ r``, and rotations are multiplied by the body half-length, so every residual
and every keypoint error is in millimetres and R (``trust``) is dimensionless: R = 1 weighs
a 1 mm model deviation per step like a 1 mm keypoint error per frame.

Known contacts: ``contacts[k, pair]`` is 0 (free), +1 or −1 (in contact, sliding so that the
friction impulse lies along the cone edge N ± μT, the simulator's polyhedral cone for a
sliding contact). :func:`detect_contacts` derives them from poses (video keypoints' poses
or a simulated trajectory). The contact geometry (a face or a corner) is the one nearest the
contact point in the initial guess.

Frames and steps: model step k = f × substeps is video frame f (see
:func:`sim_vine.fitting.frame_schedule`); frames without keypoints are left out.

Solvers: IPOPT through CasADi (the ``fit`` extra: ``pip install sim_vine[fit]``; exact
Hessians by automatic differentiation), or SciPy's ``trust-constr`` on the same CasADi
functions for comparison. The package README gives the measurements behind the default.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .fitting import (
    FrameSchedule,
    VideoRecording,
    frame_schedule,
    pose_from_keypoints,
    simulate_keypoints,
    tip_errors_mm,
)
from .kinematics import keypoints as model_keypoints
from .model import VineModel
from .obstacles import Circle, Polygon, Wall
from .state import VineState

__all__ = [
    "EstimationError",
    "Estimate",
    "casadi_available",
    "detect_contacts",
    "estimate",
    "ESTIMATED_PARAMETERS",
]

ESTIMATED_PARAMETERS = ("joint.stiffness", "joint.damping", "contact.friction", "growth.offset")
"""Design parameters the estimation can fit; the others stay at the simulator's design."""

_MM = 1e3


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
            "fit extra: pip install 'sim_vine[fit]' (or pip install casadi)") from exc
    return casadi


# --------------------------------------------------------------------------------------------
# contacts


def _pair_points(model: VineModel, q) -> np.ndarray:
    """Contact point positions repeated per obstacle, pair order (point-major), (P, 2)."""
    return np.repeat(model.contact_positions(q), len(model.obstacles), axis=0)


def detect_contacts(model: VineModel, body_q, *, tolerance: float = 1e-3,
                    dt: float | None = None) -> np.ndarray:
    """Contact modes per step from a sequence of poses.

    Step k is in contact at a pair (contact point, obstacle) when the point lies within
    ``tolerance`` of the obstacle at pose k + 1; the mode's sign is the cone edge the
    friction impulse lies on, opposite to the point's tangential slip from k to k + 1.

    Args:
        model: the vine model with its obstacles.
        body_q: poses, shape (K + 1, N, 3).
        tolerance: contact distance [m].
        dt: unused for the mode; present so callers can pass their step for clarity.

    Returns:
        Modes in {−1, 0, +1}, shape (K, pairs).
    """
    from .obstacles import signed_distance

    body_q = np.asarray(body_q, dtype=np.float64)
    if body_q.ndim != 3 or body_q.shape[1:] != (model.body_count, 3):
        raise EstimationError(f"poses must have shape (steps, {model.body_count}, 3), got "
                              f"{body_q.shape}")
    n_obs = len(model.obstacles)
    modes = np.zeros((len(body_q) - 1, model.contact_count * n_obs), dtype=np.int64)
    if n_obs == 0:
        return modes
    for k in range(len(body_q) - 1):
        before = model.contact_positions(body_q[k])
        after = model.contact_positions(body_q[k + 1])
        for j, obstacle in enumerate(model.obstacles):
            phi, normal, _ = signed_distance(obstacle, after)
            tangent = np.stack([-normal[:, 1], normal[:, 0]], axis=1)
            slip = np.sum((after - before) * tangent, axis=1)
            touching = phi < tolerance
            # friction opposes slip: the impulse lies on the edge N − sign(slip) μ T
            sign = np.where(slip > 0, -1, 1)
            modes[k, j::n_obs] = np.where(touching, sign, 0)
    return modes


def _feature(obstacle, point: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, float]:
    """(kind, anchor, normal, radius) of the obstacle feature nearest ``point``.

    kind 0: a face, ``Φ = normal·(p − anchor) − radius``; kind 1: a corner or a circle,
    ``Φ = |p − anchor| − radius``.
    """
    def segment(a, b):
        ab = b - a
        t = float(np.clip((point - a) @ ab / (ab @ ab), 0.0, 1.0))
        return a + t * ab, 0.0 < t < 1.0

    if isinstance(obstacle, Circle):
        return 1.0, obstacle.center, np.zeros(2), float(obstacle.radius)
    if isinstance(obstacle, Wall):
        closest, interior = segment(obstacle.start, obstacle.end)
        radius = 0.5 * obstacle.thickness
        if interior:
            direction = obstacle.end - obstacle.start
            normal = np.array([-direction[1], direction[0]]) / np.linalg.norm(direction)
            if normal @ (point - closest) < 0:
                normal = -normal
            return 0.0, obstacle.start, normal, radius
        return 1.0, closest, np.zeros(2), radius
    if isinstance(obstacle, Polygon):
        v = obstacle.vertices
        edges = np.roll(v, -1, axis=0) - v
        normals = np.stack([edges[:, 1], -edges[:, 0]], axis=1)
        normals /= np.linalg.norm(normals, axis=1)[:, None]
        heights = np.sum((point - v) * normals, axis=1)
        if np.all(heights <= 0):  # inside: the nearest face
            face = int(np.argmax(heights))
            return 0.0, v[face], normals[face], 0.0
        nearest = min(range(len(v)), key=lambda k: np.linalg.norm(
            point - segment(v[k], v[(k + 1) % len(v)])[0]))
        closest, interior = segment(v[nearest], v[(nearest + 1) % len(v)])
        if interior:
            return 0.0, v[nearest], normals[nearest], 0.0
        return 1.0, closest, np.zeros(2), 0.0
    raise EstimationError(f"unknown obstacle type {type(obstacle).__name__}")


# --------------------------------------------------------------------------------------------
# the model in CasADi


class _Symbolic:
    """The vine's kinematics and one step's residuals as CasADi expressions."""

    def __init__(self, ca, model: VineModel):
        self.ca, self.model = ca, model
        self.n = model.body_count
        self.d = model.half_length

    def _body(self, q, i):
        return q[3 * i], q[3 * i + 1], q[3 * i + 2]

    def _frames(self, theta):
        ca = self.ca
        return ca.vertcat(ca.cos(theta), ca.sin(theta)), ca.vertcat(-ca.sin(theta), ca.cos(theta))

    def _xy(self, q, i):
        return self.ca.vertcat(q[3 * i], q[3 * i + 1])

    def joint_residual(self, q):
        """c(q) in the simulator's row order: pins (2 each), then prismatic joints (2 each)."""
        ca, m, d = self.ca, self.model, self.d
        rows = []
        parents, children = m.pins
        for a, b in zip(parents, children, strict=True):
            t_b, _ = self._frames(q[3 * b + 2])
            e_b = self._xy(q, b) - d * t_b
            if a >= 0:
                t_a, _ = self._frames(q[3 * a + 2])
                e_a = self._xy(q, a) + d * t_a
            else:
                e_a = ca.DM(m.base[:2])
            rows.append(e_a - e_b)
        for a, b in zip(*m.prismatics, strict=True):
            _, n_a = self._frames(q[3 * a + 2])
            _, n_b = self._frames(q[3 * b + 2])
            delta = self._xy(q, b) - self._xy(q, a)
            rows.append(ca.vertcat(ca.dot(n_a, delta), ca.dot(n_b, delta)))
        return ca.vertcat(*rows)

    def extensions(self, q):
        """Prismatic extensions t_a·(p_b − p_a) (up to a constant), (n_prismatic,)."""
        ca = self.ca
        rows = []
        for a, b in zip(*self.model.prismatics, strict=True):
            t_a, _ = self._frames(q[3 * a + 2])
            rows.append(ca.dot(t_a, self._xy(q, b) - self._xy(q, a)))
        return ca.vertcat(*rows) if rows else ca.SX(0, 1)

    def joint_angles(self, q):
        ca, m = self.ca, self.model
        parents, children = m.pins
        return ca.vertcat(*[q[3 * b + 2] - (q[3 * a + 2] if a >= 0 else m.base[2])
                            for a, b in zip(parents, children, strict=True)])

    def joint_rates(self, v):
        ca, m = self.ca, self.model
        parents, children = m.pins
        return ca.vertcat(*[v[3 * b + 2] - (v[3 * a + 2] if a >= 0 else 0.0)
                            for a, b in zip(parents, children, strict=True)])

    def spread(self, torque):
        """R τ as a generalized force vector (3N,)."""
        ca, m = self.ca, self.model
        parents, children = m.pins
        out = [ca.SX(0) for _ in range(3 * self.n)]
        for j, (a, b) in enumerate(zip(parents, children, strict=True)):
            out[3 * b + 2] = out[3 * b + 2] + torque[j]
            if a >= 0:
                out[3 * a + 2] = out[3 * a + 2] - torque[j]
        return ca.vertcat(*out)

    def centerline(self, q):
        """Base, pins and tip (n_pins + 1, 2) as a list of 2-vectors (kinematics' order)."""
        n, d = self.n, self.d
        bodies = [0] + list(range(1, n - 1, 2)) + [n - 1]
        offsets = [-d] + [d] * (len(bodies) - 1)
        out = []
        for body, offset in zip(bodies, offsets, strict=True):
            t, _ = self._frames(q[3 * body + 2])
            out.append(self._xy(q, body) + offset * t)
        return out

    def keypoints(self, q, count: int):
        """``count`` points evenly spaced by arc length (the simulator's measurement map)."""
        ca = self.ca
        vertices = self.centerline(q)
        lengths = [ca.norm_2(vertices[i + 1] - vertices[i]) for i in range(len(vertices) - 1)]
        starts = [ca.SX(0)]
        for length in lengths[:-1]:
            starts.append(starts[-1] + length)
        total = starts[-1] + lengths[-1]
        points = []
        last = len(lengths) - 1
        for j in range(count):
            s = total * (j / (count - 1))
            point = ca.SX.zeros(2)
            for i, length in enumerate(lengths):
                # keypoint j lies on segment i when starts[i] <= s < starts[i] + length
                after_start = 1 if i == 0 else (s >= starts[i])
                before_end = 1 if i == last else (s < starts[i] + length)
                along = vertices[i] + (s - starts[i]) / length * (vertices[i + 1] - vertices[i])
                point = point + after_start * before_end * along
            points.append(point)
        return ca.vertcat(*points)

    def contact_point(self, q, body: int, offset: float):
        t, n = self._frames(q[3 * body + 2])
        return self._xy(q, body) + offset * t, n


# --------------------------------------------------------------------------------------------
# the estimate


@dataclasses.dataclass(frozen=True)
class Estimate:
    """What :func:`estimate` found.

    Attributes:
        fitted: fitted value of each free parameter (scalars when tied).
        design: the simulator design with the fitted values (per-pin arrays).
        body_q, body_qd: estimated states at every model step, shape (K + 1, N, 3).
        smoothed: keypoints of the estimated trajectory at every frame [m], (frames, n, 2).
        predicted: keypoints of a simulation with the fitted parameters from the estimated
            initial state [m], (frames, n, 2).
        tip_error_mm: tip errors of ``predicted`` against the video (the paper's metric).
        smoothed_tip_error_mm: tip errors of the estimated trajectory itself.
        residual_rms_mm: RMS dynamics residual per step [mm].
        schedule: the frame-to-step mapping.
        solver: ``"ipopt"`` or ``"trust-constr"``; ``status``: the solver's return status;
        iterations: solver iterations; seconds: wall-clock time of build and solve [s].
    """

    fitted: dict[str, np.ndarray]
    design: dict[str, np.ndarray]
    body_q: np.ndarray
    body_qd: np.ndarray
    smoothed: np.ndarray
    predicted: np.ndarray
    tip_error_mm: dict[str, float]
    smoothed_tip_error_mm: dict[str, float]
    residual_rms_mm: float
    schedule: FrameSchedule
    solver: str
    status: str
    iterations: int
    seconds: float


def _initial_guess(model: VineModel, recording: VideoRecording, schedule: FrameSchedule,
                   fit_length: bool):
    """Poses at every model step from the keypoints' poses (linear in time), velocities by
    differences."""
    points = recording.keypoints.points
    frames = len(points)
    seen = [f for f in range(frames) if np.all(np.isfinite(points[f]))]
    if 0 not in seen:
        raise EstimationError("frame 0 has no keypoints; the first frame must show the vine")
    poses = {f: pose_from_keypoints(model, points[f], fit_length=fit_length) for f in seen}
    frame_q = np.stack([poses[f] for f in seen])
    frame_q[:, :, 2] = np.unwrap(frame_q[:, :, 2], axis=0)
    steps = (frames - 1) * schedule.substeps
    t_steps = np.arange(steps + 1) / schedule.substeps
    q = np.empty((steps + 1, model.body_count, 3))
    for body in range(model.body_count):
        for k in range(3):
            q[:, body, k] = np.interp(t_steps, seen, frame_q[:, body, k])
    v = np.zeros_like(q)
    v[1:] = np.diff(q, axis=0) / schedule.dt
    return q, v


def estimate(
    simulator,
    recording: VideoRecording,
    *,
    design: Mapping[str, Any] | None = None,
    free: Sequence[str] = ("joint.stiffness", "joint.damping"),
    per_joint: Sequence[str] = (),
    bounds: Mapping[str, tuple[float, float]] | None = None,
    contacts: np.ndarray | None = None,
    contact_tolerance: float = 2e-3,
    trust: float = 1e4,
    model_rate: float = 90.0,
    fit_length: bool = False,
    solver: str = "ipopt",
    max_iterations: int = 500,
    tolerance: float = 1e-10,
    verbose: bool = False,
) -> Estimate:
    """Estimate the trajectory and the model parameters jointly from one recording.

    Args:
        simulator: a :class:`~sim_vine.simulator.VineSimulator`: its model and (unless
            ``design`` is given) its design defaults, which are the starting guess for the
            free parameters and the values of the fixed ones.
        recording: keypoints and commanded growth rate.
        design: the simulator design to start from (default the simulator's defaults).
        free: parameters to fit, from :data:`ESTIMATED_PARAMETERS`.
        per_joint: free per-pin parameters fitted per pin; others are one scalar.
        bounds: ``name -> (lower, upper)`` for free parameters (default: the design
            space's bounds).
        contacts: contact modes per model step, shape (steps, pairs), see
            :func:`detect_contacts`; default: detected on the initial guess with
            ``contact_tolerance``.
        trust: the weight R of the dynamics residuals (dimensionless, see the module).
        model_rate: model steps per second [Hz] (see
            :func:`sim_vine.fitting.frame_schedule`).
        fit_length: fit the vine's length in the initial guess's poses.
        solver: ``"ipopt"`` (CasADi's bundled IPOPT) or ``"trust-constr"`` (SciPy).
        max_iterations, tolerance: solver limits.
        verbose: print the solver's progress.
    """
    ca = _casadi()
    started = time.perf_counter()
    model: VineModel = simulator.model
    space = simulator.design_space()
    base_design = space.check(dict(space.defaults() if design is None else design))
    unknown = [name for name in free if name not in ESTIMATED_PARAMETERS]
    if unknown:
        raise EstimationError(f"the estimation fits {ESTIMATED_PARAMETERS}; cannot fit {unknown}")
    if solver not in ("ipopt", "trust-constr"):
        raise EstimationError(f"solver must be 'ipopt' or 'trust-constr', got {solver!r}")
    if not (np.isfinite(trust) and trust > 0):
        raise EstimationError(f"trust must be a positive number, got {trust}")
    keypoints = recording.keypoints
    schedule = frame_schedule(keypoints.times, model_rate=model_rate)
    dt, substeps = schedule.dt, schedule.substeps
    frames, count = keypoints.frame_count, keypoints.point_count
    steps = (frames - 1) * substeps
    n, n_pins = model.body_count, model.pin_count
    rates = np.repeat(recording.growth_table()[:, 0], substeps)

    q_guess, v_guess = _initial_guess(model, recording, schedule, fit_length)
    n_pairs = model.contact_count * len(model.obstacles)
    if contacts is None:
        contacts = detect_contacts(model, q_guess, tolerance=contact_tolerance)
    contacts = np.asarray(contacts, dtype=np.int64)
    if contacts.shape != (steps, n_pairs):
        raise EstimationError(f"contacts must have shape (steps, pairs) = ({steps}, {n_pairs}), "
                              f"got {contacts.shape}")

    # -- parameters: free ones are variables (scaled by their starting value), others fixed
    param_values, param_slices, layout = [], {}, []
    for name in free:
        p = space[name]
        value = np.asarray(base_design[name], dtype=np.float64)
        size = value.size if name in per_joint else 1
        start = value.reshape(-1) if name in per_joint else np.array([float(np.mean(value))])
        low, high = (bounds or {}).get(name, (float(np.max(p.lower_array())),
                                              float(np.min(p.upper_array()))))
        scale = max(float(np.max(np.abs(start))), p.scale)
        param_slices[name] = slice(len(param_values), len(param_values) + size)
        param_values.extend(start)
        layout.append((name, size, scale, low, high))
    n_theta = len(param_values)
    theta = ca.SX.sym("theta", n_theta)

    def parameter(name):
        if name not in param_slices:
            value = np.asarray(base_design[name], dtype=np.float64)
            return ca.DM(value.reshape(-1)) if value.ndim else ca.DM(float(value))
        scale = next(item[2] for item in layout if item[0] == name)
        sl = param_slices[name]
        value = theta[sl] * scale
        if name in ("joint.stiffness", "joint.damping") and sl.stop - sl.start == 1:
            value = ca.repmat(value, n_pins, 1)
        return value

    stiffness, damping = parameter("joint.stiffness"), parameter("joint.damping")
    friction, offset = parameter("contact.friction"), parameter("growth.offset")
    mass = np.asarray(base_design["body.mass"], dtype=np.float64)
    m_diag = np.stack([mass, mass, mass * model.gyration**2], axis=1).reshape(-1)
    half = model.half_length
    to_mm = np.tile([_MM, _MM, _MM * half], n)  # rotations count as arcs at the body's end

    sym = _Symbolic(ca, model)
    q_k, v_k = ca.SX.sym("q", 3 * n), ca.SX.sym("v", 3 * n)
    v_next, q_next = ca.SX.sym("v1", 3 * n), ca.SX.sym("q1", 3 * n)
    n_joint = 2 * (n_pins + model.prismatic_count)
    n_growth = model.prismatic_count
    lam = ca.SX.sym("lam", n_joint + n_growth)
    rate = ca.SX.sym("rate")
    c = sym.joint_residual(q_k)
    ext = sym.extensions(q_k)
    # momentum residual of the simulator's step, without contact impulses (added per contact)
    phi, phi_rate = sym.joint_angles(q_k), sym.joint_rates(v_next)
    if model.implicit_springs:
        torque = -stiffness * (phi + dt * phi_rate) - damping * phi_rate
    else:
        torque = -stiffness * phi - damping * sym.joint_rates(v_k)
    gravity = np.zeros(3 * n)
    gravity[0::3], gravity[1::3] = mass * model.gravity[0], mass * model.gravity[1]
    # impulses are variables in units of (mean body mass × 1 m/s), which keeps them O(1)
    impulse_unit = float(np.mean(mass))
    constraint_force = impulse_unit * ca.jtimes(c, q_k, lam[:n_joint], True)
    if n_growth:
        constraint_force = constraint_force + impulse_unit * ca.jtimes(ext, q_k, lam[n_joint:],
                                                                      True)
    momentum = (m_diag * (v_next - v_k) - dt * sym.spread(torque) - dt * gravity
                - constraint_force)
    joint_rows = ca.jtimes(c, q_k, v_next) * dt + c
    growth_rows = (ca.jtimes(ext, q_k, v_next) - (rate + offset) * model.growth_weights
                   if n_growth else ca.SX(0, 1))
    step_fn = ca.Function("step", [q_k, v_k, q_next, v_next, lam, rate, theta],
                          [momentum, q_next - q_k - dt * v_next, joint_rows, growth_rows])

    # decision variables
    Q = ca.SX.sym("Q", 3 * n, steps + 1)
    V = ca.SX.sym("V", 3 * n, steps + 1)
    L = ca.SX.sym("L", n_joint + n_growth, steps)
    active = np.argwhere(contacts != 0)
    Y = ca.SX.sym("Y", len(active))
    mapped = step_fn.map(steps)
    momentum_all, kinematic_all, joint_all, growth_all = mapped(
        Q[:, :-1], V[:, :-1], Q[:, 1:], V[:, 1:], L, ca.DM(rates).T, ca.repmat(theta, 1, steps))

    # known contacts: an impulse along the cone edge and a row that keeps the point on the face
    bodies_of_pair = np.repeat(model.contact_points[0], len(model.obstacles))
    offsets_of_pair = np.repeat(model.contact_points[1], len(model.obstacles))
    contact_rows, impulses = [], {}
    for index, (k, pair) in enumerate(active):
        obstacle = model.obstacles[pair % len(model.obstacles)]
        body, along = int(bodies_of_pair[pair]), float(offsets_of_pair[pair])
        kind, anchor, face_normal, radius = _feature(
            obstacle, _pair_points(model, q_guess[k])[pair])
        point, body_normal = sym.contact_point(Q[:, k], body, along)
        if kind == 0.0:
            normal = ca.DM(face_normal)
            distance = ca.dot(normal, point - anchor) - radius
        else:
            delta = point - ca.DM(anchor)
            norm = ca.sqrt(ca.dot(delta, delta) + 1e-18)
            normal, distance = delta / norm, norm - radius
        tangent = ca.vertcat(-normal[1], normal[0])
        edge = normal + float(contacts[k, pair]) * friction * tangent
        v_point = V[3 * body:3 * body + 2, k + 1] + along * V[3 * body + 2, k + 1] * body_normal
        contact_rows.append(ca.dot(edge, v_point) * dt + distance)
        generalized = ca.vertcat(edge, along * ca.dot(edge, body_normal))
        impulses.setdefault(k, []).append((body, impulse_unit * generalized * Y[index]))
    momentum_cols = [momentum_all[:, k] for k in range(steps)]
    for k, items in impulses.items():
        extra = [ca.SX(0) for _ in range(3 * n)]
        for body, force in items:
            for axis in range(3):
                extra[3 * body + axis] = extra[3 * body + axis] + force[axis]
        momentum_cols[k] = momentum_cols[k] - ca.vertcat(*extra)
    momentum_all = ca.horzcat(*momentum_cols)

    # objective: keypoint errors at frames plus R-weighted residuals, all in mm
    weights_mm = ca.DM(to_mm)
    displacement = (dt / ca.DM(m_diag)) * weights_mm
    residual = ca.vertcat(ca.vec(ca.repmat(displacement, 1, steps) * momentum_all),
                          ca.vec(ca.repmat(weights_mm, 1, steps) * kinematic_all))
    measured = keypoints.points
    keypoint_fn = ca.Function("kp", [q_k], [sym.keypoints(q_k, count)])
    seen = [f for f in range(frames) if np.all(np.isfinite(measured[f]))]
    kp_all = keypoint_fn.map(len(seen))(Q[:, [f * substeps for f in seen]])
    errors = _MM * (kp_all - ca.DM(measured[seen].reshape(len(seen), -1).T))
    objective = ca.sumsqr(errors) + trust * ca.sumsqr(residual)

    x = ca.vertcat(theta, ca.vec(Q), ca.vec(V), ca.vec(L), Y)
    g = ca.vertcat(ca.vec(joint_all), ca.vec(growth_all), *contact_rows)
    n_x = x.shape[0]
    lower = np.full(n_x, -np.inf)
    upper = np.full(n_x, np.inf)
    for name, _size, scale, low, high in layout:
        sl = param_slices[name]
        lower[sl], upper[sl] = low / scale, high / scale
    lower[n_x - len(active):] = 0.0  # contact impulses push
    # the base is pinned: the first body's proximal end stays at the base (a joint row)
    x0 = np.concatenate([np.asarray(param_values) / np.array(
        [item[2] for item in layout for _ in range(item[1])]),
        q_guess.reshape(-1), v_guess.reshape(-1),
        np.zeros((n_joint + n_growth) * steps), np.zeros(len(active))])

    if solver == "ipopt":
        options = {"ipopt.max_iter": int(max_iterations), "ipopt.tol": tolerance,
                   "ipopt.print_level": 5 if verbose else 0, "print_time": bool(verbose),
                   "ipopt.sb": "yes", "ipopt.mu_strategy": "adaptive"}
        nlp = ca.nlpsol("estimate", "ipopt", {"x": x, "f": objective, "g": g}, options)
        solution = nlp(x0=x0, lbx=lower, ubx=upper, lbg=0.0, ubg=0.0)
        stats = nlp.stats()
        x_opt = np.asarray(solution["x"]).reshape(-1)
        status, iterations = str(stats["return_status"]), int(stats["iter_count"])
        if not stats["success"] and status not in ("Solved_To_Acceptable_Level",):
            raise EstimationError(
                f"IPOPT did not solve the estimation ({status} after {iterations} iterations); "
                "try a better starting design, a smaller trust, more max_iterations, or check "
                "the contact schedule")
    else:
        x_opt, status, iterations = _solve_trust_constr(ca, x, objective, g, x0, lower, upper,
                                                       max_iterations, tolerance, verbose)

    theta_opt = x_opt[:n_theta]
    fitted, fitted_design = {}, dict(base_design)
    for name, _size, scale, _, _ in layout:
        value = theta_opt[param_slices[name]] * scale
        fitted[name] = value.copy() if name in per_joint else np.asarray(float(value[0]))
        shape = np.shape(base_design[name])
        if shape:
            fitted_design[name] = np.broadcast_to(value if name in per_joint else value[0],
                                                  shape).copy()
        else:
            fitted_design[name] = np.asarray(float(value[0]))
    offset_q = n_theta
    body_q = x_opt[offset_q:offset_q + 3 * n * (steps + 1)].reshape(steps + 1, n, 3)
    offset_v = offset_q + 3 * n * (steps + 1)
    body_qd = x_opt[offset_v:offset_v + 3 * n * (steps + 1)].reshape(steps + 1, n, 3)
    residual_value = np.asarray(ca.Function("r", [x], [residual])(x_opt)).reshape(-1)
    smoothed = np.stack([model_keypoints(model, body_q[f * substeps], count)
                         for f in range(frames)])
    start = VineState(body_q=body_q[0].copy(), body_qd=body_qd[0].copy())
    predicted = simulate_keypoints(simulator, fitted_design, initial_state=start,
                                   growth_rate=recording.growth_table()[:, 0],
                                   schedule=schedule, frames=frames, points=count)
    return Estimate(
        fitted=fitted, design=fitted_design, body_q=body_q, body_qd=body_qd, smoothed=smoothed,
        predicted=predicted, tip_error_mm=tip_errors_mm(predicted, measured),
        smoothed_tip_error_mm=tip_errors_mm(smoothed, measured),
        residual_rms_mm=float(np.sqrt(np.mean(residual_value**2))) if residual_value.size else 0.0,
        schedule=schedule, solver=solver, status=status, iterations=iterations,
        seconds=time.perf_counter() - started)


def _solve_trust_constr(ca, x, objective, g, x0, lower, upper, max_iterations, tolerance,
                        verbose):
    """SciPy trust-constr on the same NLP, with CasADi's exact derivatives."""
    import scipy.optimize
    import scipy.sparse as sp

    multipliers = ca.SX.sym("mult", g.shape[0])
    f_fn = ca.Function("f", [x], [objective, ca.gradient(objective, x)])
    g_fn = ca.Function("g", [x], [g, ca.jacobian(g, x)])
    h_fn = ca.Function("h", [x, multipliers], [ca.hessian(ca.dot(multipliers, g), x)[0]])
    h_obj = ca.Function("ho", [x], [ca.hessian(objective, x)[0]])

    def csc(matrix):
        return sp.csc_matrix(matrix.sparse() if hasattr(matrix, "sparse") else matrix)

    def fun(z):
        value, grad = f_fn(z)
        return float(value), np.asarray(grad).reshape(-1)

    constraint = scipy.optimize.NonlinearConstraint(
        lambda z: np.asarray(g_fn(z)[0]).reshape(-1), 0.0, 0.0,
        jac=lambda z: csc(g_fn(z)[1]),
        hess=lambda z, mult: csc(h_fn(z, mult)))
    finite = np.isfinite(lower) | np.isfinite(upper)
    result = scipy.optimize.minimize(
        fun, np.clip(x0, lower, upper), jac=True, hess=lambda z: csc(h_obj(z)),
        method="trust-constr", constraints=[constraint],
        bounds=scipy.optimize.Bounds(lower, upper) if np.any(finite) else None,
        options={"maxiter": int(max_iterations), "gtol": tolerance, "xtol": 1e-14,
                 "verbose": 2 if verbose else 0})
    if result.status not in (1, 2):
        raise EstimationError(f"trust-constr did not solve the estimation ({result.message}); "
                              "use solver='ipopt'")
    return np.asarray(result.x), str(result.message), int(result.nit)
