"""A fit's result bundle: the numbers, the errors over time, a plot and an overlay video.

:func:`write_bundle` writes into one folder:

- ``summary.json``: fitted parameters with standard errors and the entries the data cannot
  determine (:mod:`sim_vine.fit.uncertainty`), the Fisher condition number, the loss as an
  RMS keypoint distance [mm], tip and shape errors [mm], the growth rate per frame interval
  the rollout used (fitted with ``fit_growth``) [m/s], the optimizer's message passed on
  whole, iterations, evaluations, why it stopped, time, what the dynamics estimated before
  the fit (``estimates``: the frame rate, the length scale), the reader's notes and the
  scene check's warnings, and the comparison of candidate models when the fit was chosen
  from several (``models``);
- ``errors_<i>.csv`` per recording: ``time, tip_error_mm, shape_error_mm`` per frame (empty
  fields for frames without a measurement);
- ``paths_<i>.png``: measured (blue) and fitted (red) tip paths and shapes at a few frames,
  over the recording's last video frame when the recording is a video (its
  :class:`~sim_vine.fit.video_file.Footage`), else over the scene's obstacles drawn on white;
- ``overlay_<i>.avi``: every frame with the measured keypoints (blue dots) and the fitted
  vine and tip (red, on top), over the recorded video frame or the drawn scene
  (:func:`overlay_frames`).

Shape error: the mean distance [mm] between measured and fitted keypoints of a frame.
"""

from __future__ import annotations

import collections
import itertools
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from ..vision.keypoints import Calibration
from ..vision.video import write_video
from .shooting import ShootingFit, VideoRecording
from .synthetic import draw_obstacles
from .uncertainty import ParameterErrors
from .video_file import Footage

__all__ = ["frame_errors_mm", "loss_mm", "overlay_frames", "write_bundle"]

MEASURED_BGR = (200, 90, 20)
FITTED_BGR = (30, 30, 220)
OBSTACLE_BGR = (170, 170, 170)


def loss_mm(loss_mm2: float, points: int) -> float:
    """A shooting fit's loss (mean over frames of squared keypoint distances summed over
    ``points`` points [mm²]) as the RMS keypoint distance [mm]."""
    return float(math.sqrt(max(loss_mm2, 0.0) / points))


def frame_errors_mm(predicted, measured) -> tuple[np.ndarray, np.ndarray]:
    """Per frame, the tip distance and the mean keypoint distance [mm] between ``predicted``
    and ``measured`` keypoints (frames, points, 2) [m]; NaN for unmeasured frames."""
    distance = 1e3 * np.linalg.norm(np.asarray(predicted) - np.asarray(measured), axis=2)
    return distance[:, -1], distance.mean(axis=1)


def _canvas(model, arrays: Sequence[np.ndarray], *, width: int, height: int
            ) -> tuple[np.ndarray, Calibration]:
    """A white image framing the ``arrays`` (…, 2) [m] and the base, with the obstacles."""
    points = np.concatenate([np.asarray(a, dtype=np.float64).reshape(-1, 2) for a in arrays]
                            + [np.asarray(model.base[:2])[None]])
    points = points[np.all(np.isfinite(points), axis=1)]
    low, high = points.min(axis=0), points.max(axis=0)
    middle, span = 0.5 * (low + high), np.maximum(high - low, 1e-3) * 1.2
    mpp = float(max(span[0] / width, span[1] / height))
    origin = np.array([width / 2 - middle[0] / mpp, height / 2 + middle[1] / mpp])
    calibration = Calibration.from_scale(mpp, origin)
    image = np.full((height, width, 3), 255, np.uint8)
    draw_obstacles(image, model.obstacles, calibration, OBSTACLE_BGR)
    bar = 10 ** math.floor(math.log10(0.3 * width * mpp))  # a round length ≤ 30 % of the width
    cv2.line(image, (10, height - 12), (10 + int(round(bar / mpp)), height - 12), (0, 0, 0), 2)
    cv2.putText(image, f"{100 * bar:g} cm", (12, height - 18), cv2.FONT_HERSHEY_SIMPLEX, 0.4,
                (0, 0, 0), 1, cv2.LINE_AA)
    return image, calibration


def _polyline(image, calibration: Calibration, points, colour, thickness: int) -> None:
    points = np.asarray(points, dtype=np.float64)
    points = points[np.all(np.isfinite(points), axis=1)]
    if len(points) > 1:
        pixels = np.round(calibration.to_pixels(points) * 16).astype(np.int32)
        cv2.polylines(image, [pixels], False, colour, thickness, cv2.LINE_AA, 4)


def _legend(image, lines: Sequence[tuple[str, tuple[int, int, int]]]) -> None:
    for row, (text, colour) in enumerate(lines):
        cv2.putText(image, text, (10, 18 + 16 * row), cv2.FONT_HERSHEY_SIMPLEX, 0.45, colour,
                    1, cv2.LINE_AA)


def _background(model, footage: Footage | None, arrays: Sequence[np.ndarray], *,
                width: int, height: int) -> tuple[Iterator[np.ndarray], Calibration]:
    """The images to draw on, one per frame, and their pixels-to-metres map: the recorded
    frames, or the same drawn scene framing ``arrays`` [m] for every frame."""
    if footage is not None:
        return footage.images(), footage.calibration
    image, calibration = _canvas(model, arrays, width=width, height=height)
    return itertools.repeat(image), calibration


def _paths_plot(model, measured, predicted, *, footage: Footage | None = None,
                shapes: int = 6) -> np.ndarray:
    images, calibration = _background(model, footage, [measured, predicted], width=800,
                                      height=600)
    # over a video, the last frame: the vine at its longest
    image = (collections.deque(images, maxlen=1)[0] if footage is not None
             else next(images)).copy()
    for f in np.unique(np.linspace(0, len(measured) - 1, shapes).round().astype(int)):
        _polyline(image, calibration, measured[f], MEASURED_BGR, 1)
        _polyline(image, calibration, predicted[f], FITTED_BGR, 1)
    _polyline(image, calibration, measured[:, -1], MEASURED_BGR, 2)
    _polyline(image, calibration, predicted[:, -1], FITTED_BGR, 2)
    _legend(image, [("measured tip path and shapes", MEASURED_BGR),
                    ("fitted tip path and shapes", FITTED_BGR)])
    return image


def overlay_frames(model, recording: VideoRecording, predicted, tip_mm, *,
                   footage: Footage | None = None) -> Iterator[np.ndarray]:
    """The overlay video's frames: per frame, the measured and fitted tip paths so far, the
    measured keypoints (:data:`MEASURED_BGR` dots of radius 4 px) and on top the fitted vine
    through its keypoints (:data:`FITTED_BGR`, 3 px) with a dot of radius 3 px at its tip,
    and a legend in the top left corner.

    Args:
        model: the fitted vine's model (its obstacles, drawn when there is no footage).
        recording: what was fitted; its keypoints (frames, points, 2) [m] and times [s].
        predicted: the fitted keypoints (frames, points, 2) [m].
        tip_mm: the tip error per frame [mm], NaN where not measured.
        footage: the recorded video: draw over its frames (mapped through its calibration);
            ``None`` draws over the scene's obstacles on white, framed around the vine.

    Yields:
        BGR uint8 images, one per frame of the recording.
    """
    measured = recording.keypoints.points
    backgrounds, calibration = _background(model, footage, [measured, predicted], width=640,
                                           height=480)
    for f in range(len(measured)):
        image = next(backgrounds).copy()
        _polyline(image, calibration, measured[:f + 1, -1], MEASURED_BGR, 1)
        _polyline(image, calibration, predicted[:f + 1, -1], FITTED_BGR, 1)
        for point in calibration.to_pixels(measured[f][np.all(np.isfinite(measured[f]), 1)]):
            cv2.circle(image, _fixed(point), 4 << 4, MEASURED_BGR, -1, cv2.LINE_AA, 4)
        _polyline(image, calibration, predicted[f], FITTED_BGR, 3)
        cv2.circle(image, _fixed(calibration.to_pixels(predicted[f, -1])), 3 << 4, FITTED_BGR,
                   -1, cv2.LINE_AA, 4)
        error = "not measured" if np.isnan(tip_mm[f]) else f"tip error {tip_mm[f]:.2f} mm"
        _legend(image, [(f"frame {f}  t = {recording.keypoints.times[f]:.3f} s  {error}",
                         (0, 0, 0)), ("measured keypoints", MEASURED_BGR),
                        ("fitted vine", FITTED_BGR)])
        yield image


def _fixed(pixel) -> tuple[int, int]:
    """A pixel position (x, y) in OpenCV's 4 fractional bits."""
    return tuple(int(round(16 * c)) for c in pixel)


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def write_bundle(folder: str | Path, *, simulator, fit: ShootingFit,
                 recordings: Sequence[VideoRecording], errors: ParameterErrors,
                 stop_reason: str | None = None, time_s: float | None = None,
                 notes: Sequence[str] = (), warnings: Sequence[str] = (),
                 estimates: Mapping[str, float] | None = None, video: bool = True,
                 footage: Sequence[Footage | None] = (),
                 models: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write a fit's result bundle (see the module) into ``folder`` and return the summary.

    Args:
        folder: created if missing.
        simulator: the vine simulator the fit used (its model draws the obstacles).
        fit, recordings: the fit and what it was fitted to.
        errors: :func:`~sim_vine.fit.uncertainty.parameter_errors` at the fit.
        stop_reason: why a :class:`~sim_vine.fit.stopping.FitStop` ended the fit, if it did.
        time_s: the fit's wall-clock time [s].
        notes, warnings: lines from reading the recording and checking the scene.
        estimates: what the dynamics estimated before the fit, by name
            (``frame_rate_fps`` [frames/s], ``length_scale`` [recording m per true m]).
        video: write the overlay videos.
        footage: per recording, the recorded video to draw the plot and the overlay over
            (``None`` or missing: the drawn scene).
        models: the comparison of candidate models the fit was chosen from
            (:mod:`sim_vine.fit.model_selection`), written as the summary's ``models``.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model = simulator.model
    points = recordings[0].keypoints.point_count
    per_recording = []
    footage = list(footage) + [None] * (len(recordings) - len(footage))
    for index, (recording, predicted, frames) in enumerate(zip(recordings, fit.predicted,
                                                               footage, strict=True)):
        measured = recording.keypoints.points
        tip_mm, shape_mm = frame_errors_mm(predicted, measured)
        table = np.column_stack([recording.keypoints.times, tip_mm, shape_mm])
        np.savetxt(folder / f"errors_{index}.csv", table, delimiter=",", fmt="%.6g",
                   header="time,tip_error_mm,shape_error_mm", comments="")
        cv2.imwrite(str(folder / f"paths_{index}.png"),
                    _paths_plot(model, measured, predicted, footage=frames))
        if video:
            write_video(overlay_frames(model, recording, predicted, tip_mm, footage=frames),
                        folder / f"overlay_{index}.avi",
                        fps=1.0 / float(np.diff(recording.keypoints.times).mean()))
        per_recording.append({
            "name": recording.name, "frames": recording.keypoints.frame_count,
            "missing_frames": recording.keypoints.missing_frames,
            "tip_error_mm": fit.tip_error_mm[index],
            "growth_rate": fit.growth_rates[index].tolist(),
            "shape_error_mm": {"mean": float(np.nanmean(shape_mm)),
                               "max": float(np.nanmax(shape_mm))}})
    optimization = fit.optimization
    summary = {
        "parameters": {
            name: {"value": float(value), "standard_error": _finite(error),
                   "relative_error": _finite(error / abs(value)) if value else None,
                   "standard_error_correlated": _finite(correlated),
                   "determined": name not in errors.undetermined}
            for name, value, error, correlated in zip(
                errors.names, errors.values, errors.standard_errors, errors.correlated_errors,
                strict=True)},
        "undetermined": errors.undetermined,
        "fisher_condition_number": _finite(errors.condition_number),
        "loss_mm": loss_mm(fit.loss, points),
        "initial_loss_mm": loss_mm(fit.initial_loss, points),
        "loss_note": "RMS distance between measured and fitted keypoints over measured frames",
        "residual_rms_mm": errors.residual_rms_mm,
        "recordings": per_recording,
        "optimizer": {"message": optimization.message, "converged": optimization.converged,
                      "iterations": optimization.iterations,
                      "evaluations": optimization.evaluations, "stop_reason": stop_reason},
        "time_s": time_s,
        "start_poses": [{"angles": p.angles.tolist(), "extension": p.extension}
                        for p in fit.start_poses],
        "estimates": {name: float(value) for name, value in (estimates or {}).items()},
        "notes": list(notes),
        "warnings": list(warnings),
    }
    if models is not None:
        summary["models"] = dict(models)
    (folder / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary
