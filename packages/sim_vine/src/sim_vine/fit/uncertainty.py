"""Standard errors of fitted parameters from the Gauss-Newton (Fisher) approximation at a fit.

For keypoint residuals r(θ) [mm] (every coordinate of every measured point of every frame,
m of them) and p fitted parameter entries θ, with J = ∂r/∂θ at the fit (central finite
differences of whole rollouts: few parameters, and the rollout's piecewise-smooth contact
steps make a one-sided step unreliable),

    σ² = ‖r‖² / (m − p),    Cov(θ) ≈ σ² (JᵀJ)⁻¹,    SE_i = √Cov_ii,

which assumes independent residuals of equal variance. Consecutive frames' errors are
correlated in practice (a scale error, a model that cannot follow the vine, a tracker's bias
that drifts), and then these errors are a lower bound. :attr:`ParameterErrors.correlated_errors`
allow for it: the sandwich (Newey-West) covariance over frames,

    Cov_c = H⁻¹ S H⁻¹,   H = JᵀJ,
    S = Σ_f g_f g_fᵀ + Σ_{l=1}^{L} (1 − l/(L+1)) Σ_f (g_f g_{f+l}ᵀ + g_{f+l} g_fᵀ),

with ``g_f = J_fᵀ r_f`` a frame's score (its rows of J and r) within each recording and the
lag L = ⌈√F⌉ for F measured frames (errors correlated over a few frames count as such;
frames missing from the recording are skipped, so a lag counts measured frames). For
independent residuals it agrees with ``σ² H⁻¹`` on average; where the residuals are
systematic it is larger, though no standard error covers a bias shared by every frame
(a scale error in every length). The data cannot determine an entry
when its relative standard error exceeds ``undetermined_relative`` or when it takes part in a
direction of the relative-change Fisher matrix ``J_relᵀ J_rel`` (``J_rel = J · |θ|``) whose
eigenvalue is below ``1e-10`` of the largest; :attr:`ParameterErrors.condition_number` is that
matrix's condition number.

The start poses of a fit (``fit_start``) and its growth rates (fitted with ``fit_growth``)
are held at their fitted values: the errors are conditional on them. A frame rate estimated
from the dynamics (the pipeline's ``frame_rate_range``) is not: with ``frame_rate=True`` it
is one more entry, ``frame_rate_fps``, whose column of J moves the model's step with the
rate (the frames stay where they are), so the other entries' errors include what not
knowing it costs them (the damping's, mostly: both set how fast a swing dies out).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ..state import VineState
from .shooting import FrameSchedule, ShootingFit, VideoRecording, simulate_keypoints

__all__ = ["FRAME_RATE", "ParameterErrors", "frame_correlated_covariance",
           "keypoint_residuals_mm", "parameter_errors"]

NULL_EIGENVALUE = 1e-10
"""Eigenvalues of the relative-change Fisher matrix below this share of the largest are
directions the data does not see."""


@dataclasses.dataclass(frozen=True)
class ParameterErrors:
    """What the data says about each fitted parameter entry.

    Attributes:
        names: entry labels, ``joint.stiffness`` for a scalar, ``joint.damping[2]`` for an
            entry of a per-joint parameter.
        values: fitted values, shape (p,).
        standard_errors: shape (p,), in the parameters' units; inf where undetermined by a
            null direction.
        condition_number: of the relative-change Fisher matrix (inf when singular).
        undetermined: entries the data cannot determine, each with the reason.
        residual_rms_mm: RMS keypoint coordinate residual at the fit [mm].
        residual_count: m, the number of residuals.
        correlated_errors: standard errors that allow for residuals correlated over
            consecutive frames (the module's ``Cov_c``), shape (p,); inf where undetermined
            by a null direction.
    """

    names: list[str]
    values: np.ndarray
    standard_errors: np.ndarray
    condition_number: float
    undetermined: dict[str, str]
    residual_rms_mm: float
    residual_count: int
    correlated_errors: np.ndarray

    @property
    def relative_errors(self) -> np.ndarray:
        """Standard error over |value|, shape (p,)."""
        return self.standard_errors / np.maximum(np.abs(self.values), 1e-300)


def keypoint_residuals_mm(predicted: Sequence[np.ndarray],
                          recordings: Sequence[VideoRecording]) -> np.ndarray:
    """Predicted minus measured keypoint coordinates [mm] over the measured frames of every
    recording, flattened, shape (m,)."""
    parts = []
    for simulated, recording in zip(predicted, recordings, strict=True):
        measured = recording.keypoints.points
        seen = np.all(np.isfinite(measured), axis=(1, 2))
        parts.append(1e3 * (np.asarray(simulated)[seen] - measured[seen]).ravel())
    return np.concatenate(parts)


def frame_correlated_covariance(jacobian: np.ndarray, residuals: np.ndarray,
                                frame_sizes: Sequence[Sequence[int]]) -> np.ndarray:
    """The Newey-West sandwich covariance of the module (``Cov_c``), shape (p, p).

    Args:
        jacobian: ∂r/∂θ at the fit, shape (m, p).
        residuals: r at the fit, shape (m,).
        frame_sizes: per recording, the number of residuals of each measured frame in
            order (their sum over every recording is m).
    """
    jacobian = np.asarray(jacobian, dtype=np.float64)
    residuals = np.asarray(residuals, dtype=np.float64)
    bounds = np.cumsum([0, *(size for sizes in frame_sizes for size in sizes)])
    if bounds[-1] != residuals.size:
        raise ValueError(f"frame_sizes cover {bounds[-1]} residuals, not {residuals.size}")
    p = jacobian.shape[1]
    frame_scores = np.array([jacobian[a:b].T @ residuals[a:b]
                             for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
                            ).reshape(-1, p)
    meat = np.zeros((p, p))
    first = 0
    for sizes in frame_sizes:  # frames correlate within a recording, not across
        scores = frame_scores[first:first + len(sizes)]
        first += len(sizes)
        meat += scores.T @ scores
        lags = int(np.ceil(np.sqrt(len(scores))))
        for lag in range(1, min(lags, len(scores) - 1) + 1):
            cross = scores[:-lag].T @ scores[lag:]
            meat += (1.0 - lag / (lags + 1.0)) * (cross + cross.T)
    bread = np.linalg.pinv(jacobian.T @ jacobian)
    return bread @ meat @ bread


def _frame_sizes(recordings: Sequence[VideoRecording]) -> list[list[int]]:
    """Residuals per measured frame of every recording (every coordinate of its points)."""
    sizes = []
    for recording in recordings:
        measured = recording.keypoints.points
        seen = np.all(np.isfinite(measured), axis=(1, 2))
        sizes.append([2 * recording.keypoints.point_count] * int(seen.sum()))
    return sizes


def _entries(fit: ShootingFit) -> list[tuple[str, str, int | None]]:
    """(label, parameter, index or None for a tied or scalar parameter) per fitted entry."""
    entries = []
    for name, value in fit.fitted.items():
        value = np.asarray(value)
        if value.ndim == 0:
            entries.append((name, name, None))
        else:
            entries += [(f"{name}[{i}]", name, i) for i in range(value.size)]
    return entries


def _with(fit: ShootingFit, name: str, index: int | None, value: float) -> dict:
    """The fit's full design with one fitted entry set to ``value``."""
    design = {k: np.array(v, dtype=np.float64) for k, v in fit.design.items()}
    if index is None:
        design[name] = np.full_like(design[name], value)  # tied: every pin shares it
    else:
        design[name].reshape(-1)[index] = value
    return design


FRAME_RATE = "frame_rate_fps"
"""The label of the frame rate's entry (``frame_rate=True``) [frames/s]."""


def _at_frame_rate(schedule: FrameSchedule, fps: float) -> FrameSchedule:
    """``schedule`` with the frames ``1 / fps`` [s] apart, as many model steps each."""
    interval = 1.0 / fps
    return FrameSchedule(frame_interval=interval, substeps=schedule.substeps,
                         dt=interval / schedule.substeps)


def parameter_errors(simulator, fit: ShootingFit, recordings: Sequence[VideoRecording], *,
                     schedule: FrameSchedule, relative_step: float = 1e-3,
                     undetermined_relative: float = 0.5,
                     frame_rate: bool = False) -> ParameterErrors:
    """Standard errors and undetermined parameters at a shooting fit (see the module).

    Args:
        simulator: the vine simulator the fit used (not a tied wrapper).
        fit: the result of :func:`~sim_vine.fit.shooting.fit_shooting`.
        recordings: the recordings it was fitted to.
        schedule: the fit's frames-to-steps schedule.
        relative_step: finite-difference step, relative to each entry's value (to its
            parameter's scale where the value is 0).
        undetermined_relative: relative standard error above which an entry counts as not
            determined by the data.
        frame_rate: the recording's frame rate was estimated from the dynamics: add it as
            the entry ``frame_rate_fps`` (see the module).
    """
    model = simulator.model
    space = simulator.design_space()
    starts = [VineState(body_q=p.body_q(model), body_qd=np.zeros_like(p.body_q(model)))
              for p in fit.start_poses]
    points = recordings[0].keypoints.point_count

    def predict(design, at=schedule):
        return [simulate_keypoints(simulator, design, initial_state=start, growth_rate=rate,
                                   schedule=at, frames=r.keypoints.frame_count,
                                   points=points)
                for start, rate, r in zip(starts, fit.growth_rates, recordings, strict=True)]

    residuals = keypoint_residuals_mm(fit.predicted, recordings)
    entries = _entries(fit)
    values = [float(np.asarray(fit.fitted[name]).reshape(-1)[index or 0])
              for _, name, index in entries]
    columns = []
    for (_, name, index), value in zip(entries, values, strict=True):
        step = relative_step * (abs(value) or float(space[name].scale or 1.0))
        plus = keypoint_residuals_mm(predict(_with(fit, name, index, value + step)), recordings)
        minus = keypoint_residuals_mm(predict(_with(fit, name, index, value - step)), recordings)
        columns.append((plus - minus) / (2 * step))
    if frame_rate:
        fps = 1.0 / schedule.frame_interval
        step = relative_step * fps
        plus, minus = (keypoint_residuals_mm(predict(fit.design, _at_frame_rate(schedule, f)),
                                             recordings) for f in (fps + step, fps - step))
        columns.append((plus - minus) / (2 * step))
        entries.append((FRAME_RATE, FRAME_RATE, None))
        values.append(fps)
    values = np.array(values)
    jacobian = np.stack(columns, axis=1)
    m, p = residuals.size, len(entries)
    variance = float(residuals @ residuals) / max(m - p, 1)
    relative = jacobian * np.where(values != 0, np.abs(values), 1.0)
    eigenvalues, vectors = np.linalg.eigh(relative.T @ relative)
    largest = float(eigenvalues[-1])
    null = eigenvalues <= NULL_EIGENVALUE * largest if largest > 0 else np.ones(p, bool)
    condition = float(largest / eigenvalues[0]) if eigenvalues[0] > 0 and largest > 0 \
        else float("inf")
    covariance = variance * np.linalg.pinv(jacobian.T @ jacobian)
    errors = np.sqrt(np.maximum(np.diag(covariance), 0.0))
    correlated = np.sqrt(np.maximum(np.diag(frame_correlated_covariance(
        jacobian, residuals, _frame_sizes(recordings))), 0.0))
    undetermined = {}
    for k in np.flatnonzero(null):
        involved = np.flatnonzero(np.abs(vectors[:, k]) > 0.3)
        for i in involved:
            others = [entries[j][0] for j in involved if j != i]
            undetermined[entries[i][0]] = (
                "the recording does not change when it moves"
                + (f" together with {', '.join(others)}" if others else "")
                + " (a null direction of the Fisher matrix)")
            errors[i] = correlated[i] = np.inf
    for i, (label, _, _) in enumerate(entries):
        rel = errors[i] / max(abs(values[i]), 1e-300)
        if label not in undetermined and rel > undetermined_relative:
            undetermined[label] = (f"standard error {100 * rel:.0f} % of its value "
                                   f"(> {100 * undetermined_relative:.0f} %)")
    return ParameterErrors(names=[e[0] for e in entries], values=values,
                           standard_errors=errors, condition_number=condition,
                           undetermined=undetermined,
                           residual_rms_mm=float(np.sqrt(np.mean(residuals ** 2))),
                           residual_count=m, correlated_errors=correlated)
