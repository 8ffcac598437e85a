"""Fit vine model parameters to video keypoints by shooting through the differentiable simulator.

The measurement map is :class:`sim_vine.terms.KeypointObserver`: n points evenly spaced by
arc length along the simulated vine (base, pins, tip), the model side of the keypoints that
:mod:`sim_vine.vision.keypoints` extracts from video. The fit minimizes the mean squared
keypoint error over every frame of every recording,

    L(θ) = mean_recordings mean_frames Σ_points ‖p_j(q_f(θ)) − p̂_fj‖²   [mm²],

by rolling the simulator out from each recording's first frame with the recorded growth
input (open loop). It uses the core's :mod:`codesign.identification` (one
:class:`~codesign.identification.IdentificationProblem` per recording, averaged) for the
parameter vector and, with ``method="lbfgsb"``, the loss gradient through every step's QP
for L-BFGS-B; the default ``method="least_squares"`` hands the keypoint residuals and their
Jacobian by forward differences of rollouts to SciPy's trust-region reflective method
(:mod:`codesign.optim.least_squares`), which converges in a few Gauss-Newton iterations where
L-BFGS-B ran to its iteration limit.

Per-frame growth (``fit_growth``): the growth rate of every frame interval becomes a free
parameter (the core's ``fit_actions``, bounded below by zero), with an optional penalty on
the steps between consecutive rates (:class:`GrowthSmoothing`).

Frames and model steps: one control step of the rollout is one video frame interval, split
into ``substeps`` model steps of ``dt = frame_interval / substeps`` with ``substeps =
ceil(frame_interval × model_rate)``. A 90 Hz model and a 30 fps video align exactly (3
substeps of 1/90 s); otherwise the model step is shortened slightly so that every frame
falls on a model step (never lengthened, which could destabilize it), and the schedule
reports the step it used. Frames where the vine was not found (NaN rows) are left out of the
loss.

Initial state: each recording starts at rest in the pose that best matches its first frame's
keypoints (:func:`sim_vine.fit.start_pose.start_pose_from_keypoints`, a small least-squares
fit of the pin angles and, with ``fit_length``, the length); with ``fit_start`` that pose is
fitted to every frame together with the parameters, so that one frame's keypoint errors
(the extracted tip's length bias, 0.4 px on the synthetic wall videos) do not set it.

Scalar or per-joint parameters: the core's :class:`~codesign.tying.TiedSimulator` exposes
chosen per-pin parameters as one scalar shared by every pin (the paper's scalar K and C),
summing their gradients.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from codesign import Objective, OpenLoopController, Rollout
from codesign.identification import IdentificationProblem, Recording
from codesign.optim import (
    LBFGSB,
    Evaluation,
    FailedEvaluation,
    GuardedProblem,
    OptimizeResult,
    ResidualProblem,
    TrustRegionLeastSquares,
    best_result,
)
from codesign.tying import Tie, TiedSimulator

from ..state import VineState
from ..terms import KeypointObserver
from ..vision.keypoints import Keypoints, check_point_counts
from .identifiability import Identifiability, LeastSquaresPoint, residual_jacobian
from .start_pose import (
    FixedStart,
    StartPose,
    StartPoses,
    can_fit_length,
    start_pose_from_keypoints,
)

__all__ = [
    "FitError",
    "FrameSchedule",
    "frame_schedule",
    "VideoRecording",
    "growth_rates",
    "ShootingFit",
    "KeypointResiduals",
    "METHODS",
    "fit_shooting",
    "simulate_states",
    "simulate_keypoints",
    "tip_errors_mm",
    "unit_scales",
    "check_gradient",
    "growth_scale",
    "GrowthSmoothing",
]

METHODS = ("least_squares", "lbfgsb")
"""The optimizers :func:`fit_shooting` offers (its ``method``)."""

LOSS_SCALE = 1e6
"""The fit's loss is in mm² (m² × 1e6) so that optimizer tolerances are meaningful."""


GRADIENT_LIMIT = 1e10
"""Largest loss gradient a fit accepts, per unit of a scaled parameter and relative to
``1 + loss`` [mm²]: a parameter's scale (its typical size) changing the loss by 1e10 times
itself is a broken step gradient, not a slope."""


class FitError(ValueError):
    """A fit's inputs are inconsistent (keypoint counts, frame timing, parameter names), or
    its gradient broke down."""


def check_gradient(grad, loss: float, x) -> None:
    """Raise :class:`FitError` when the loss gradient ``grad`` (n,) at the scaled point
    ``x`` (n,) holds NaN or inf or exceeds :data:`GRADIENT_LIMIT` · (1 + ``loss``).

    Such a gradient (the adjoint of a singular contact KKT system gave 1e40) makes L-BFGS-B
    report convergence at its starting point; the fit stops with this message instead.
    """
    grad = np.asarray(grad, dtype=np.float64)
    finite = np.isfinite(grad)
    worst = int(np.argmax(np.where(finite, np.abs(grad), np.inf)))
    limit = GRADIENT_LIMIT * (1.0 + abs(float(loss)))
    if finite.all() and abs(grad[worst]) <= limit:
        return
    point = np.array2string(np.asarray(x, dtype=np.float64), precision=6)
    raise FitError(
        f"the loss gradient broke down: entry {worst} is {grad[worst]:.3g} (loss "
        f"{float(loss):.6g} mm², limit {limit:.3g}) at the scaled point {point}; the "
        "simulator's step gradient is not usable there (NaN, or a singular contact system); "
        "the fit stops rather than let the optimizer report convergence")


# --------------------------------------------------------------------------------------------
# time


@dataclasses.dataclass(frozen=True)
class FrameSchedule:
    """How video frames map onto model steps.

    Attributes:
        frame_interval: time between frames [s].
        substeps: model steps per frame interval.
        dt: model step [s] (``frame_interval / substeps``).
    """

    frame_interval: float
    substeps: int
    dt: float


SUBSTEP_SLACK = 1e-4
"""A frame interval times the model rate within this fraction of a whole number of model
steps is that number (:func:`frame_schedule`)."""


def frame_schedule(times, *, model_rate: float, tolerance: float = 0.01) -> FrameSchedule:
    """Choose model substeps so that every video frame falls on a model step: the fewest
    that give at least ``model_rate`` steps per second.

    Args:
        times: frame timestamps [s], shape (frames >= 2,), evenly spaced.
        model_rate: desired model steps per second [Hz], e.g. 90.
        tolerance: largest relative deviation of a frame interval from the mean.

    Raises:
        FitError: the timestamps are not evenly spaced (dropped frames should be NaN rows,
            not removed) or the rate is not positive.
    """
    times = np.asarray(times, dtype=np.float64)
    if times.ndim != 1 or len(times) < 2:
        raise FitError(f"a fit needs at least two frame timestamps, got shape {times.shape}")
    if not (np.isfinite(model_rate) and model_rate > 0):
        raise FitError(f"model_rate must be a positive number of steps per second, got "
                       f"{model_rate}")
    intervals = np.diff(times)
    interval = float(np.mean(intervals))
    if interval <= 0 or np.max(np.abs(intervals - interval)) > tolerance * interval:
        raise FitError(
            f"frame timestamps are not evenly spaced (intervals {intervals.min():.6g} to "
            f"{intervals.max():.6g} s); keep frames without the vine as NaN rows instead of "
            "dropping them, or resample the recording to a fixed frame rate")
    # timestamps written to the microsecond give a frame rate a hair off (29.999998 fps for
    # 30): a ratio that close to a whole number is that number, not the next one up, which
    # would change the model's step (and so its numerical damping) by a whole substep
    ratio = interval * model_rate
    nearest = round(ratio)
    substeps = max(1, nearest if abs(ratio - nearest) <= SUBSTEP_SLACK * ratio
                   else math.ceil(ratio))
    return FrameSchedule(frame_interval=interval, substeps=substeps, dt=interval / substeps)


# --------------------------------------------------------------------------------------------
# recordings and the fit


@dataclasses.dataclass(frozen=True)
class VideoRecording:
    """One video's keypoints with the growth input that was commanded during it.

    Attributes:
        keypoints: extracted keypoints; frame 0 must show the vine.
        growth_rate: commanded growth rate [m/s], a number or one value per frame interval,
            shape (frames − 1,).
        name: label for reports.
    """

    keypoints: Keypoints
    growth_rate: Any = 0.0
    name: str = ""

    def growth_table(self) -> np.ndarray:
        """The growth rate per frame interval as actions, shape (frames − 1, 1)."""
        return growth_rates(self.growth_rate, self.keypoints.frame_count,
                            where=f"recording {self.name!r}: ")[:, None]


def growth_rates(growth_rate, frames: int, *, where: str = "") -> np.ndarray:
    """The growth rate per frame interval [m/s], shape (frames − 1,), from a number or that
    shape; ``where`` starts the error message."""
    rate = np.asarray(growth_rate, dtype=np.float64)
    rate = np.full(frames - 1, float(rate)) if rate.ndim == 0 else rate
    if rate.shape != (frames - 1,):
        raise FitError(f"{where}growth_rate must be a number or one value per frame interval "
                       f"({frames - 1}), got shape {rate.shape}")
    if not np.all(np.isfinite(rate)):
        raise FitError(f"{where}growth_rate holds NaN or inf")
    return rate


@dataclasses.dataclass(frozen=True)
class ShootingFit:
    """What :func:`fit_shooting` found.

    Attributes:
        design: the full design of the wrapped simulator (tied parameters broadcast).
        fitted: fitted value of each free parameter (scalars for tied ones).
        loss: mean squared keypoint error at the result [mm² summed over points].
        initial_loss: the same at the starting guess.
        predicted: per recording, simulated keypoints at every frame [m], (frames, n, 2).
        tip_error_mm: per recording, tip errors (see :func:`tip_errors_mm`).
        start_poses: per recording, the start pose (fitted with ``fit_start``).
        optimization: the optimizer's account (history, iterations, evaluations); its
            message also counts the evaluations whose simulation failed.
        failed_evaluations: the points where a rollout failed (penalized for the line
            search, see :mod:`codesign.optim.guarded`) with the simulator's messages.
        least_squares: the keypoint residuals [mm] and their Jacobian in the fitted
            parameters at the result (:meth:`identifiability` reads them).
        growth_rates: per recording, the growth rate of every frame interval the result's
            rollout used [m/s] (before ``growth.offset``), shape (frames − 1,): fitted with
            ``fit_growth``, else the recording's.
    """

    design: dict[str, np.ndarray]
    fitted: dict[str, np.ndarray]
    loss: float
    initial_loss: float
    predicted: list[np.ndarray]
    tip_error_mm: list[dict[str, float]]
    start_poses: list[StartPose]
    optimization: OptimizeResult
    failed_evaluations: list[FailedEvaluation] = dataclasses.field(default_factory=list)
    least_squares: LeastSquaresPoint | None = None
    growth_rates: list[np.ndarray] = dataclasses.field(default_factory=list)

    def identifiability(self, *, noise_mm: float | None = None,
                        relative_limit: float = 0.5) -> Identifiability:
        """Gauss-Newton conditioning, standard errors and the parameters the data cannot
        determine at the result (see :mod:`sim_vine.fit.identifiability`).

        Args:
            noise_mm: keypoint noise σ [mm]; ``None`` estimates it from the residuals.
            relative_limit: standard error, as a fraction of the value, above which a
                parameter is reported as undetermined.
        """
        return self.least_squares.identifiability(noise_mm=noise_mm,
                                                  relative_limit=relative_limit)


class GrowthSmoothing:
    """Rows ``λ (a_{t+1} − a_t)`` [mm] over consecutive fitted growth rates ``a`` [m/s] of a
    fit's vector (``fit_growth``): added to the loss, a rate step of ``1 / λ`` m/s costs as
    much as 1 mm of keypoint error. No rows without fitted rates or with ``λ = 0``.

    Args:
        weight: λ [mm s/m].
        first: the vector's index of the first fitted rate; count: how many rates.
        scale: rate per scaled unit [m/s].
        size: the vector's length.
    """

    def __init__(self, *, weight: float, first: int, count: int, scale: float, size: int):
        rows = count - 1 if weight > 0 and count > 1 else 0
        self.jacobian = np.zeros((rows, size))
        for row in range(rows):
            self.jacobian[row, first + row : first + row + 2] = [-weight * scale,
                                                                 weight * scale]

    def __call__(self, x) -> np.ndarray:
        """The rows at the scaled point ``x``, shape (rows,)."""
        return self.jacobian @ np.asarray(x, dtype=np.float64)


class _MeanProblem:
    """Mean of per-recording identification problems (same free parameters), loss in mm²,
    plus the ``smoothing`` rows' sum of squares."""

    def __init__(self, problems: Sequence[IdentificationProblem], smoothing: GrowthSmoothing,
                 *, lower):
        self.problems = list(problems)
        self.smoothing = smoothing
        first = self.problems[0]
        self.size, self.lower, self.upper = first.size, lower, first.upper
        self.constraint_lower = np.zeros(0)
        self.constraint_upper = np.zeros(0)

    def evaluate(self, x, *, grad: bool = True) -> Evaluation:
        parts = [p.evaluate(x, grad=grad) for p in self.problems]
        scale = LOSS_SCALE / len(parts)
        rows = self.smoothing(x)
        loss = scale * sum(e.loss for e in parts) + float(rows @ rows)
        if not grad:
            return Evaluation(loss=loss)
        grad = scale * sum(e.grad for e in parts) + 2.0 * self.smoothing.jacobian.T @ rows
        check_gradient(grad, loss, x)
        return Evaluation(loss=loss, grad=grad, constraint_jac=np.zeros((0, self.size)))

    def evaluate_many(self, xs, *, grad: bool = False):
        return [self.evaluate(x, grad=grad) for x in xs]


def unit_scales(space, free: Sequence[str],
                overrides: Mapping[str, Mapping[str, Any]] | None) -> dict[str, dict[str, Any]]:
    """``overrides`` with a ``scale`` for every ``free`` parameter that has none: the mean
    magnitude of its starting value (its ``init``, else its default in ``space``).

    The optimizer works in ``value / scale``. The design space's scales are the simulator's
    defaults, which on a real recording can be orders of magnitude from the starting guess
    (a damping default of 1e-6 N m s/rad and a guess of 8e-4 put the damping at 800 scaled
    units next to a stiffness near 1); scaled by the guess, every parameter starts at about
    one. A parameter whose start is zero keeps the space's scale.
    """
    result = {name: dict(changes) for name, changes in (overrides or {}).items()}
    for name in free:
        changes = result.setdefault(name, {})
        if "scale" in changes:
            continue
        start = np.asarray(changes.get("init", space[name].default_array()), dtype=np.float64)
        magnitude = float(np.mean(np.abs(start)))
        if np.isfinite(magnitude) and magnitude > 0:
            changes["scale"] = magnitude
    return {name: changes for name, changes in result.items() if changes}


def simulate_states(simulator, design, *, initial_state: VineState, growth_rate, frames: int,
                    substeps: int, dt: float) -> list[VineState]:
    """The states of a run at every frame, open loop from ``initial_state`` whatever the design.

    Args:
        simulator: a vine simulator (or a :class:`~codesign.tying.TiedSimulator`) and its
            ``design``.
        initial_state: the state at frame 0.
        growth_rate: growth rate per frame interval [m/s], a number or shape (frames − 1,).
        frames: number of frames.
        substeps: model steps per frame; dt: model step [s].
    """
    rate = growth_rates(growth_rate, frames)
    rollout = Rollout(TiedSimulator(simulator, start=FixedStart(simulator, initial_state)),
                      controller=OpenLoopController(observation_size=0, action_size=1,
                                                    control_steps=frames - 1),
                      steps=frames - 1, substeps=int(substeps), dt=float(dt))
    return rollout.forward(design, {"table": rate[:, None]}, Objective(()), record=True).states


def simulate_keypoints(simulator, design, *, initial_state: VineState, growth_rate,
                       schedule: FrameSchedule, frames: int, points: int) -> np.ndarray:
    """Keypoints of a simulated run at every frame [m], shape (frames, points, 2); the run
    as :func:`simulate_states` with the ``schedule``'s substeps and step."""
    observer = KeypointObserver(simulator=simulator, count=points)
    states = simulate_states(simulator, design, initial_state=initial_state,
                             growth_rate=growth_rate, frames=frames,
                             substeps=schedule.substeps, dt=schedule.dt)
    return np.stack([observer.observe(s, design).reshape(points, 2) for s in states])


class KeypointResiduals:
    """A shooting fit's keypoint residuals [mm] by forward rollouts: every measured
    coordinate of every recording's frames, at a scaled point ``x`` of the fit's
    identification ``problems`` (one per recording).

    Attributes:
        weights: per residual, ``1 / √(recordings × measured frames of its recording)``,
            so that ``‖weights ⊙ r‖²`` is the fit's loss [mm²] (a mean over frames and
            recordings), shape (m,).
    """

    def __init__(self, simulator, recordings: Sequence[VideoRecording], problems, *,
                 schedule: FrameSchedule, points: int):
        self.simulator, self.recordings, self.problems = simulator, list(recordings), problems
        self.schedule, self.points = schedule, points
        self.seen = [np.isfinite(r.keypoints.points) for r in self.recordings]
        weights = []
        for seen in self.seen:
            frames = np.count_nonzero(np.any(seen.reshape(len(seen), -1), axis=1))
            weights.append(np.full(np.count_nonzero(seen),
                                   1.0 / math.sqrt(len(self.recordings) * frames)))
        self.weights = np.concatenate(weights)

    def predicted(self, x) -> list[np.ndarray]:
        """Per recording, the simulated keypoints at every frame [m], (frames, points, 2)."""
        result = []
        for recording, part in zip(self.recordings, self.problems, strict=True):
            design = part.design(x)
            result.append(simulate_keypoints(
                self.simulator, part.simulator.expand(design),
                initial_state=part.simulator.initial_state(design),
                growth_rate=part.actions(x, 0)[:, 0],
                schedule=self.schedule, frames=recording.keypoints.frame_count,
                points=self.points))
        return result

    def __call__(self, x) -> np.ndarray:
        """The residuals [mm], shape (m,): simulated minus measured, seen entries only."""
        x = np.asarray(x, dtype=np.float64)
        return np.concatenate([
            1e3 * (simulated - recording.keypoints.points)[seen]
            for simulated, recording, seen in zip(self.predicted(x), self.recordings,
                                                  self.seen, strict=True)])


def _least_squares_point(residuals: KeypointResiduals, x, *, lower,
                         upper) -> LeastSquaresPoint:
    """Keypoint residuals [mm] of every seen frame of every recording at ``x`` and their
    Jacobian in the scaled parameters (central differences of forward rollouts, one-sided
    at the ``lower`` and ``upper`` bounds)."""
    problems = residuals.problems
    names, scales = [], []
    for p in problems[0].free_space:
        label = p.name.removeprefix("design.")
        size = int(np.prod(p.shape, dtype=np.int64))
        names.extend([label] if size == 1 else [f"{label}[{i}]" for i in range(size)])
        scales.extend(np.broadcast_to(np.asarray(p.scale, dtype=np.float64), p.shape).ravel())
    if problems[0].fit_actions:  # fit_growth: the rates of one recording
        count = problems[0].recordings[0].steps
        names.extend(f"growth.rate[{i}]" for i in range(count))
        scales.extend(np.full(count, float(problems[0].action_scale[0])))
    scales = np.asarray(scales)
    jacobian = residual_jacobian(residuals, x, lower=lower, upper=upper)
    return LeastSquaresPoint(jacobian=jacobian, residuals=residuals(np.asarray(x, np.float64)),
                             names=names, values=np.asarray(x, np.float64) * scales,
                             scales=scales)


def tip_errors_mm(predicted, measured) -> dict[str, float]:
    """Tip errors over frames where the tip was measured [mm].

    Returns:
        ``mae`` (mean Euclidean distance), ``mae_x`` and ``mae_y`` (mean absolute error of
        each coordinate, the paper's metric for the wall and oscillation fits) and ``max``.
    """
    predicted = np.asarray(predicted, dtype=np.float64)[:, -1]
    measured = np.asarray(measured, dtype=np.float64)[:, -1]
    if predicted.shape != measured.shape:
        raise FitError(f"predicted and measured keypoints differ in shape: {predicted.shape} "
                       f"vs {measured.shape}")
    seen = np.all(np.isfinite(measured), axis=1)
    diff = 1e3 * (predicted[seen] - measured[seen])
    distance = np.linalg.norm(diff, axis=1)
    return {"mae": float(distance.mean()), "mae_x": float(np.abs(diff[:, 0]).mean()),
            "mae_y": float(np.abs(diff[:, 1]).mean()), "max": float(distance.max())}


def growth_scale(rates) -> float:
    """The fitted growth rates' unit in a fit's vector [m/s]: the mean magnitude of the
    recorded ``rates`` (the rates then start near one), 0.1 m/s where they are all zero."""
    magnitude = float(np.mean(np.abs(np.asarray(rates, dtype=np.float64))))
    return magnitude if magnitude > 0 else 0.1


def _check_growth_options(fit_growth: bool, growth_smoothing: float, free, recordings) -> None:
    if not (np.isfinite(growth_smoothing) and growth_smoothing >= 0):
        raise FitError(f"growth_smoothing must be a non-negative number [mm s/m], got "
                       f"{growth_smoothing!r}")
    if not fit_growth:
        if growth_smoothing:
            raise FitError("growth_smoothing smooths fitted growth rates: set fit_growth=True "
                           "or leave growth_smoothing at 0")
        return
    if "growth.offset" in free:
        raise FitError("fit_growth frees every frame interval's growth rate, which includes "
                       "a constant offset: drop growth.offset from free")
    if len(recordings) != 1:
        raise FitError(f"fit_growth fits one recording's growth rates; got {len(recordings)} "
                       "recordings: fit them one at a time")


def fit_shooting(
    simulator,
    recordings: Sequence[VideoRecording],
    *,
    free: Sequence[str] = ("joint.stiffness", "joint.damping"),
    per_joint: Sequence[str] = (),
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    model_rate: float = 90.0,
    fit_length: bool = False,
    fit_start: bool = False,
    fit_growth: bool = False,
    growth_smoothing: float = 0.0,
    max_iterations: int = 50,
    method: str = "least_squares",
    optimizer=None,
    callback=None,
) -> ShootingFit:
    """Fit design parameters to keypoint recordings by shooting through the simulator.

    Args:
        simulator: a :class:`~sim_vine.simulator.VineSimulator`; its model sets the vine's
            base, bodies and length, and its design defaults the starting guess.
        recordings: one or more :class:`VideoRecording` with the same keypoint count and
            frame rate.
        free: design parameters to fit: ``joint.stiffness``, ``joint.damping``,
            ``contact.friction``, ``growth.offset`` (or ``body.mass``).
        per_joint: the free per-pin parameters fitted per joint; the others in ``free`` are
            fitted as one scalar for every pin (the paper's choice).
        overrides: ``name -> {init, lower, upper, scale}``; for tied parameters these are
            scalars. A free parameter's scale defaults to its starting value's magnitude
            (:func:`unit_scales`).
        model_rate: model steps per second [Hz]; see :func:`frame_schedule`.
        fit_length: fit each recording's initial vine length too (see
            :func:`sim_vine.fit.start_pose.start_pose_from_keypoints`).
        fit_start: fit each recording's start pose (pin angles, and with ``fit_length``
            its extension) to all frames together with ``free``, starting from the pose
            that matches the first frame; otherwise that pose is kept.
        fit_growth: fit the growth rate of every frame interval (per-frame growth) with the
            parameters, starting at the recording's ``growth_rate`` (the core's
            ``fit_actions``; the rates scaled by :func:`growth_scale`). One recording at a
            time, and not with ``growth.offset`` free (the same freedom twice).
        growth_smoothing: λ [mm s/m] of :class:`GrowthSmoothing` on the fitted rates' steps
            (with ``fit_growth``); 0: none.
        max_iterations: optimizer iterations.
        method: ``"least_squares"``: SciPy's trust-region reflective method on the keypoint
            residuals with their Jacobian by forward differences of rollouts
            (:mod:`codesign.optim.least_squares`); ``"lbfgsb"``: L-BFGS-B on the loss with
            its gradient through the simulator's adjoint. The package README compares them.
        optimizer: the method's optimizer with other settings: a
            :class:`~codesign.optim.TrustRegionLeastSquares`, or for
            ``"lbfgsb"`` any :mod:`codesign.optim` optimizer.
        callback: called after every iteration with an ``IterationInfo``.

    Returns:
        A :class:`ShootingFit` with the fitted parameters and tip errors in millimetres.
    """
    recordings = list(recordings)
    if not recordings:
        raise FitError("fit_shooting needs at least one recording")
    if method not in METHODS:
        raise FitError(f"unknown fit method {method!r}; choose one of {list(METHODS)}")
    points = check_point_counts([r.keypoints for r in recordings])
    schedules = [frame_schedule(r.keypoints.times, model_rate=model_rate) for r in recordings]
    schedule = schedules[0]
    if any(abs(s.frame_interval - schedule.frame_interval) > 1e-3 * schedule.frame_interval
           for s in schedules):
        raise FitError("recordings have different frame rates; fit them separately or "
                       "resample them to one rate")
    free = list(free)
    if not free:
        raise FitError("nothing to fit: name design parameters in `free`")
    space = simulator.design_space()
    for name in list(free) + list(per_joint):
        space[name]  # raises a clear error for unknown names
    stray = [name for name in per_joint if name not in free]
    if stray:
        raise FitError(f"per_joint names {stray} are not in free {free}")
    _check_growth_options(fit_growth, growth_smoothing, free, recordings)
    ties = [Tie(name) for name in free if name not in per_joint and space[name].shape != ()]
    overrides = unit_scales(TiedSimulator(simulator, ties=ties).design_space(), free,
                            overrides)
    starts = [start_pose_from_keypoints(simulator.model, r.keypoints.points[0],
                                        fit_length=fit_length) for r in recordings]
    fitted_names = list(free)
    if fit_start:
        fitted_names.append("start.angles")
        if fit_length and can_fit_length(simulator.model):
            fitted_names.append("start.extension")
    problems = []
    for index, recording in enumerate(recordings):
        # without fit_start the start poses are design parameters left at their defaults
        wrapped = TiedSimulator(simulator, ties=ties,
                                start=StartPoses(simulator, starts, index=index))
        measured = recording.keypoints.points.reshape(recording.keypoints.frame_count, -1)
        problems.append(IdentificationProblem(
            wrapped, [Recording(actions=recording.growth_table(), measurements=measured,
                                name=recording.name)],
            measurement=KeypointObserver(simulator=wrapped, count=points), free=fitted_names,
            overrides=overrides, fit_actions=fit_growth,
            action_scale=growth_scale(recording.growth_table()[:, 0]),
            substeps=schedule.substeps, dt=schedule.dt))
    residuals = KeypointResiduals(simulator, recordings, problems, schedule=schedule,
                                  points=points)
    first = problems[0].free_space.size
    smoothing = GrowthSmoothing(weight=growth_smoothing, first=first,
                                count=problems[0].size - first,
                                scale=float(problems[0].action_scale[0]),
                                size=problems[0].size)
    lower = problems[0].lower.copy()
    lower[first:] = 0.0  # fitted growth rates: a vine cannot shrink
    if method == "least_squares":
        rows = len(smoothing(problems[0].x0()))
        problem = GuardedProblem(ResidualProblem(
            lambda x: np.concatenate([residuals(x), smoothing(x)]),
            np.concatenate([residuals.weights, np.ones(rows)]),
            lower=lower, upper=problems[0].upper))
        optimizer = optimizer or TrustRegionLeastSquares()
    else:
        problem = GuardedProblem(_MeanProblem(problems, smoothing, lower=lower))
        optimizer = optimizer or LBFGSB(function_tolerance=1e-12, gradient_tolerance=1e-9)
    x0 = problems[0].x0()
    initial_loss = problem.evaluate(x0, grad=False).loss
    if problem.failures:
        raise FitError(f"the fit's starting point cannot be simulated: "
                       f"{problem.failures[0].message}; start from other values (overrides)")
    result = best_result(optimizer.minimize(problem, x0, max_iterations=max_iterations,
                                            callback=callback), problem)
    design = problems[0].design(result.x)
    full_design = problems[0].simulator.expand(design)
    fitted = {name: np.asarray(design[name]).copy() for name in free}
    predicted = residuals.predicted(result.x)
    tips = [tip_errors_mm(simulated, recording.keypoints.points)
            for simulated, recording in zip(predicted, recordings, strict=True)]
    return ShootingFit(design=full_design, fitted=fitted, loss=float(result.loss),
                       initial_loss=float(initial_loss), predicted=predicted, tip_error_mm=tips,
                       start_poses=[p.simulator.start.pose(design) for p in problems],
                       optimization=result, failed_evaluations=list(problem.failures),
                       least_squares=_least_squares_point(residuals, result.x,
                                                          lower=lower,
                                                          upper=problems[0].upper),
                       growth_rates=[part.actions(result.x, 0)[:, 0].copy()
                                     for part in problems])
