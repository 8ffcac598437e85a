"""One command from a user's recording to a result bundle.

    python -m sim_vine.fit.pipeline trial.yaml --out results/trial

``trial.yaml`` names the recording (a keypoints file, or a video to extract them from:
exactly one of the two), how to read it (units, the scale measured in the recording, the
frame rate when it has none), the scene and the fit::

    keypoints:                      # read by sim_vine.fit.keypoints_file
      path: trial.csv               # relative to this file's folder
      units: px
      scale: {pixels: [[102, 40], [598, 44]], distance: 0.508}   # pegboard holes 0.508 m apart
      origin_px: [80, 310]          # the pixel of the world origin
    # or, instead of keypoints:
    video:                          # read by sim_vine.fit.video_file
      path: trial.avi               # a video file, image folder or glob (relative to here)
      base_px: [80, 310]            # where the vine leaves its base in the image
      points: 8                     # keypoints per frame, base to tip
      scale: {pixels: [[102, 40], [598, 44]], distance: 0.508}   # or calibration: {pixels,
      origin_px: [80, 310]          #   world} (four reference points, a camera at an angle)
      fps: 30                       # default the video file's; required for image folders
      segmentation: {method: hsv, lower: [35, 80, 40], upper: [85, 255, 255]}
      base_direction: [0, -1]       # optional tracing options (sim_vine.vision.keypoints)
    scene: lab.yaml                 # a vine scene file (obstacles, base, bodies); optional
    simulator: {bodies: 10, gravity: [0, -9.81]}   # vine options over the scene's; optional
    growth_rate: 0.1                # commanded growth rate [m/s], a number or one per interval,
                                    # or `estimate`: the slope of the keypoints' arc length
                                    # over time (sim_vine.fit.growth); required, never assumed
    fit:
      free: [joint.stiffness, joint.damping]
      iterations: 50
      time_limit_s: 600             # stop cleanly with the best point so far
      stop_file: STOP               # ... or when this file appears (relative to --out)
      fit_start: true               # fit the start pose with the parameters
      fit_length: true              # and its length (the first frame's, to start with)
      model_rate: 90                # model steps per second
      method: least_squares         # or lbfgsb (sim_vine.fit.shooting.METHODS)
      fit_growth: false             # fit the growth rate of every frame interval
      growth_smoothing: 0           # λ [mm s/m] on the fitted rates' steps
      frame_rate_range: [20, 40]    # estimate the frame rate in this range [fps] from the
                                    # dynamics (sim_vine.fit.frame_rate); else the file's
      scale_range: [0.9, 1.1]       # or (not both: only g T²/L is fixed) estimate the length
                                    # scale σ, recording metres per true metre, in this range
                                    # (sim_vine.fit.length_scale): the keypoints and every
                                    # length of the scene and simulator block are divided by
                                    # it, and the fit is in true metres; needs gravity in the
                                    # image plane (a flat loss is refused: measure the scale)
      models:                       # optional: fit each candidate model, keep the best by
        - {simulator: {growth: every_prismatic}}   # BIC (sim_vine.fit.model_selection);
        - {name: tip, simulator: {growth: tip}}    # simulator: vine options over the
        - {free: [ground.friction]}                # above; free: added to fit.free

It reads and checks the file (or extracts the keypoints from the video and checks them),
checks the scene's obstacles against the recorded path, estimates the frame rate or the
length scale when asked (each a search over whole fits, :mod:`~sim_vine.fit.log_search`;
what it found goes into the notes and the bundle's ``estimates``), fits by shooting
(:func:`~sim_vine.fit.shooting.fit_shooting`, tied scalar parameters), computes
standard errors (:mod:`~sim_vine.fit.uncertainty`) and writes the bundle
(:mod:`~sim_vine.fit.bundle`; from a video, its plot and overlay are drawn over the recorded
frames). SIGINT and SIGTERM end the fit like the stop file.

With ``fit.models`` every candidate is checked against the scene and fitted with the same
settings to the same keypoints (a frame rate estimate, ``frame_rate_range``, is made once,
with the first candidate that passes the scene check; ``time_limit_s`` and the stop file
cover all the fits together); a candidate that fails the scene check or cannot be fitted
(:class:`~sim_vine.fit.shooting.FitError`, ``SimulationError``) is listed with its error,
and only when every one fails is the run an error. The candidate with the lowest BIC (over
the keypoint residuals, :mod:`~sim_vine.fit.model_selection`) gives the standard errors
and the bundle; ``summary.json``'s ``models`` holds every candidate's row (name, options,
free parameters and fitted values, loss, tip MAE, shape error, k, n, BIC, convergence,
iterations, time, or the error) and the notes say which model was chosen by what margin.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from codesign.options import suggest
from codesign.simulator import SimulationError

from ..options import VineOptions
from ..scene import make_simulator
from ..vision.keypoints import Keypoints
from .bundle import loss_mm, write_bundle
from .frame_rate import estimate_frame_rate
from .growth import growth_rate_from_keypoints
from .keypoints_file import KeypointsFile, read_keypoints_file
from .length_scale import (
    ScaleUndeterminedError,
    estimate_length_scale,
    footage_in_true_metres,
    keypoints_in_true_metres,
    scene_in_true_metres,
)
from .model_selection import (
    ModelCandidate,
    ModelsError,
    choice_note,
    failed_row,
    fit_row,
    model_dependent,
    ranked,
    read_models,
)
from .scene_check import SceneMismatchError, check_scene, obstacle_tolerance
from .shooting import METHODS, FitError, ShootingFit, VideoRecording, fit_shooting, frame_schedule
from .stopping import FitStop
from .uncertainty import parameter_errors
from .video_file import VIDEO_OPTIONS, Footage, read_video_file

__all__ = ["PipelineError", "load_recording_file", "main", "run_recording"]

SECTIONS = ("keypoints", "video", "scene", "simulator", "growth_rate", "fit",
            "obstacle_tolerance_mm")
FIT_OPTIONS = {"free": list, "iterations": int, "time_limit_s": (int, float),
               "stop_file": str, "fit_start": bool, "fit_length": bool,
               "model_rate": (int, float), "method": str, "fit_growth": bool,
               "growth_smoothing": (int, float), "frame_rate_range": list,
               "scale_range": list, "models": list}


RANGES = {"frame_rate_range": "frames per second",
          "scale_range": "recording metres per true metre"}
"""The fit options that estimate a value from the dynamics, with the unit of their range."""


class PipelineError(ValueError):
    """A recording file (the pipeline's YAML) is malformed; the message names the fix."""


def _mapping(value, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PipelineError(f"{where} must be a mapping, got {type(value).__name__}")
    return dict(value)


def _checked_fit(spec: dict, where: str) -> dict:
    for key, value in spec.items():
        if key not in FIT_OPTIONS:
            raise PipelineError(f"{where}: unknown fit option {key!r}"
                                f"{suggest(key, list(FIT_OPTIONS))}; known: "
                                f"{sorted(FIT_OPTIONS)}")
        kinds = FIT_OPTIONS[key]
        if isinstance(value, bool) != (kinds is bool) or not isinstance(value, kinds):
            raise PipelineError(f"{where}: fit.{key} must be {kinds}, got "
                                f"{type(value).__name__} {value!r}")
        if key in RANGES and not (
                len(value) == 2 and all(isinstance(v, int | float) and not isinstance(v, bool)
                                        for v in value) and 0 < value[0] < value[1]):
            raise PipelineError(f"{where}: fit.{key} must be [low, high] {RANGES[key]} with "
                                f"0 < low < high, got {value!r}")
        if key == "method" and value not in METHODS:
            raise PipelineError(f"{where}: fit.method {value!r} is unknown"
                                f"{suggest(value, list(METHODS))}; choose one of "
                                f"{list(METHODS)}")
    if all(key in spec for key in RANGES):
        raise PipelineError(
            f"{where}: give fit.frame_rate_range or fit.scale_range, not both: the dynamics "
            "fix only g·T²/L, so a wrong frame rate and a wrong length scale look alike; "
            "measure one (the file's times, or keypoints.scale) and estimate the other")
    return spec


def _check_video(spec: dict, where: str) -> None:
    """Refuse unknown options of the ``video:`` section and missing or malformed required
    ones, before any frame is read."""
    for key in spec:
        if key not in VIDEO_OPTIONS:
            raise PipelineError(f"{where}: unknown video option {key!r}"
                                f"{suggest(key, list(VIDEO_OPTIONS))}; known: "
                                f"{list(VIDEO_OPTIONS)}")
    points = spec.get("points")
    if isinstance(points, bool) or not isinstance(points, int) or points < 2:
        raise PipelineError(f"{where}: video.points must be the keypoints per frame from base "
                            f"to tip (an integer >= 2, e.g. 8), got {points!r}")
    base = spec.get("base_px")
    if not (isinstance(base, list) and len(base) == 2
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in base)):
        raise PipelineError(f"{where}: video.base_px must be the pixel [x, y] where the vine "
                            f"leaves its base, got {base!r}")


def load_recording_file(path: str | Path) -> dict[str, Any]:
    """The pipeline's YAML as a checked mapping (see the module)."""
    path = Path(path)
    if not path.is_file():
        raise PipelineError(f"no recording file at {str(path)!r}")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise PipelineError(f"{path} is not valid YAML: {exc}") from None
    data = _mapping(data, str(path))
    unknown = sorted(set(data) - set(SECTIONS))
    if unknown:
        raise PipelineError(f"{path}: unknown section(s) {unknown}"
                            f"{suggest(unknown[0], list(SECTIONS))}; known: {list(SECTIONS)}")
    given = [name for name in ("keypoints", "video") if data.get(name) is not None]
    if len(given) != 1:
        raise PipelineError(
            f"{path}: give exactly one of keypoints: (a keypoints file) and video: (a video "
            f"to extract them from), got {'both' if given else 'neither'}")
    (source,) = given
    data[source] = _mapping(data[source], f"{path}: {source}")
    if "path" not in data[source]:
        raise PipelineError(f"{path}: {source}.path is required ("
                            + ("the CSV or NPZ file)" if source == "keypoints" else
                               "a video file, image folder or glob)"))
    if source == "video":
        _check_video(data["video"], str(path))
    rate = data.get("growth_rate")
    if rate is None or (isinstance(rate, str) and rate != "estimate"):
        raise PipelineError(
            f"{path}: growth_rate is required, got {rate!r}: the commanded growth rate [m/s] "
            "(a number, or one per frame interval), or 'estimate' to take it from the "
            "keypoints' arc length over time; a vine that does not grow has growth_rate: 0")
    try:  # checked before the recording is read (a video's extraction takes a while)
        obstacle_tolerance(data.get("obstacle_tolerance_mm"), None)
    except SceneMismatchError as exc:
        raise PipelineError(f"{path}: {exc}") from None
    data["simulator"] = _mapping(data.get("simulator"), f"{path}: simulator")
    data["fit"] = _checked_fit(_mapping(data.get("fit"), f"{path}: fit"), str(path))
    if "models" in data["fit"]:
        try:
            data["fit"]["models"] = read_models(
                data["fit"]["models"], where=str(path),
                options=_simulator_options(data, path.parent))
        except ModelsError as exc:
            raise PipelineError(str(exc)) from None
    return data


def _growth_rate(spec_rate, keypoints: Keypoints):
    """The recording's growth rate [m/s]: the YAML's, or with ``estimate`` the slope of the
    ``keypoints``' arc length over their times (which a frame rate estimate rescales)."""
    return growth_rate_from_keypoints(keypoints) if spec_rate == "estimate" else spec_rate


def frame_rate_substeps(model_rate: float, low: float, high: float) -> int:
    """Model steps per frame while a frame rate is searched in [``low``, ``high``] [fps]:
    the count whose model rate is nearest ``model_rate`` [Hz] at the range's geometric
    middle. Held fixed so that the model's step moves smoothly with the candidate rate: with
    the fewest steps reaching ``model_rate`` at each candidate (:func:`frame_schedule`) the
    count jumps (3 to 4 below 30 fps at 90 Hz), the model's numerical damping with it, and the
    fitted loss jumps where it does."""
    return max(1, round(model_rate / math.sqrt(low * high)))


def _with_estimated_frame_rate(simulator, keypoints, growth_rate, frame_rate_range,
                               settings) -> tuple[Keypoints, float, float, str]:
    """``keypoints`` with their times at the frame rate the dynamics fit best in
    ``frame_rate_range`` [fps] (:func:`~sim_vine.fit.frame_rate.estimate_frame_rate`, each
    candidate fitted with ``settings`` at the YAML's ``growth_rate``, see
    :func:`_growth_rate`, and :func:`frame_rate_substeps` model steps per frame), the rate
    [fps], the model rate to fit at it [Hz] and a note saying what it found."""
    times = np.asarray(keypoints.times, dtype=np.float64)
    file_fps = 1.0 / float(np.mean(np.diff(times)))
    low, high = (float(v) for v in frame_rate_range)
    substeps = frame_rate_substeps(settings["model_rate"], low, high)

    def at(fps: float) -> Keypoints:
        return dataclasses.replace(keypoints, times=times[0] + (times - times[0]) * file_fps / fps)

    def fitted_loss(fps: float) -> float:
        candidate = at(fps)
        recording = VideoRecording(candidate, growth_rate=_growth_rate(growth_rate, candidate))
        return fit_shooting(simulator, [recording],
                            **{**settings, "model_rate": substeps * fps}).loss

    estimate = estimate_frame_rate(fitted_loss, low=low, high=high)
    return at(estimate.fps), estimate.fps, substeps * estimate.fps, (
        f"frame rate {estimate.fps:.4g} fps estimated from the dynamics in [{low:g}, "
        f"{high:g}] fps over {len(estimate.losses)} fits at {substeps} model steps per frame "
        f"(the file's times give {file_fps:.4g} fps); the fit uses it, at "
        f"{substeps * estimate.fps:.4g} model steps per second")


def _resolved_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Vine options with their scene file's filled in (the simulator block's over the
    scene's, as :func:`~sim_vine.scene.make_simulator` reads them), without ``scene``."""
    resolved = VineOptions.from_values(options)
    return {field.name: getattr(resolved, field.name) for field in dataclasses.fields(resolved)
            if field.name not in ("scene", "base_dir")}


def _with_estimated_length_scale(options, keypoints, growth_rate, scale_range, settings
                                 ) -> tuple[float, str]:
    """The length scale σ (recording metres per true metre) the dynamics fit best in
    ``scale_range`` (:func:`~sim_vine.fit.length_scale.estimate_length_scale`: each
    candidate fits ``keypoints`` [recording m] and the vine ``options`` (every length
    resolved from the scene) divided by σ, with ``settings`` at the YAML's ``growth_rate``,
    see :func:`_growth_rate`), and a note saying what it found."""
    def fitted_loss(scale: float) -> float:
        simulator = make_simulator(**scene_in_true_metres(options, scale=scale))
        candidate = keypoints_in_true_metres(keypoints, scale=scale)
        recording = VideoRecording(candidate, growth_rate=_growth_rate(growth_rate, candidate))
        # in the recording's units, where the noise is the same at every candidate
        return fit_shooting(simulator, [recording], **settings).loss * scale ** 2

    low, high = (float(v) for v in scale_range)
    try:
        estimate = estimate_length_scale(fitted_loss, low=low, high=high)
    except ScaleUndeterminedError as exc:
        raise PipelineError(f"fit.scale_range: {exc}") from None
    edge = ("; it is at the end of the range, so the scale may lie beyond it: widen "
            "fit.scale_range" if not low * 1.01 < estimate.scale < high / 1.01 else "")
    return estimate.scale, (
        f"length scale {estimate.scale:.4g} recording metres per true metre estimated from "
        f"the dynamics in [{low:g}, {high:g}] over {len(estimate.losses)} fits (across the "
        f"range the fitted loss rises {100 * estimate.rise:.3g} % above its lowest){edge}; "
        "the keypoints and the scene's lengths are divided by it, so the fit is in true "
        "metres")


def _read_recording(spec: dict, base_dir: Path
                    ) -> tuple[KeypointsFile, Footage | None, Path]:
    """The recording's keypoints [m] from its keypoints file or video (paths relative to
    ``base_dir``), the footage behind them (``None`` for a keypoints file) and the file."""
    source = "video" if "video" in spec else "keypoints"
    reading = dict(spec[source])
    file = Path(reading.pop("path"))
    file = file if file.is_absolute() else base_dir / file
    if source == "keypoints":
        return read_keypoints_file(file, **reading), None, file
    return (*read_video_file(file, base_dir=base_dir, **reading), file)


def _simulator_options(spec: dict, base_dir: Path) -> dict[str, Any]:
    """The vine options the YAML's simulator is built from: its simulator block, and its
    scene file (relative to ``base_dir``)."""
    options = {"check_initial_pose": False, **spec["simulator"]}
    if spec.get("scene") is not None:
        options.update(scene=str(spec["scene"]), base_dir=str(base_dir))
    return options


def _fit_settings(fit_options: dict) -> dict[str, Any]:
    """:func:`~sim_vine.fit.shooting.fit_shooting`'s keywords from the YAML's fit block
    (the free parameters: ``fit.free``, or K and C)."""
    return {"free": list(fit_options.get("free", ("joint.stiffness", "joint.damping"))),
            "model_rate": float(fit_options.get("model_rate", 90.0)),
            "fit_start": fit_options.get("fit_start", True),
            "fit_length": fit_options.get("fit_length", True),
            "max_iterations": int(fit_options.get("iterations", 50)),
            "fit_growth": fit_options.get("fit_growth", False),
            "growth_smoothing": float(fit_options.get("growth_smoothing", 0.0)),
            "method": fit_options.get("method", "least_squares")}


@dataclasses.dataclass
class _Trial:
    """One candidate model on the recording: its simulator, fit keywords and scene check,
    and once fitted, its fit, time [s] and why it stopped (or the error that stopped it)."""

    candidate: ModelCandidate
    simulator: Any
    settings: dict[str, Any]
    check: Any = None
    fit: ShootingFit | None = None
    time_s: float = 0.0
    stop_reason: str | None = None
    error: Exception | None = None

    def row(self, recording: VideoRecording) -> dict[str, Any]:
        """Its row of the comparison (:mod:`sim_vine.fit.model_selection`)."""
        free = self.settings["free"]
        if self.error is not None:
            return failed_row(self.candidate, self.error, free=free, time_s=self.time_s)
        return fit_row(self.candidate, self.fit, recording, free=free, time_s=self.time_s)


def _trials(spec: dict, base_dir: Path, keypoints: Keypoints, *, compare: bool,
            tolerance: float) -> list[_Trial]:
    """Per candidate model (``fit.models``, else the YAML's own), its simulator, fit
    keywords and scene check; with ``compare`` a candidate whose scene check fails carries
    the error, without it the error is raised."""
    settings = _fit_settings(spec["fit"])
    options = _simulator_options(spec, base_dir)
    trials = []
    for candidate in spec["fit"].get("models") or [ModelCandidate("as configured")]:
        simulator = make_simulator(**{**options, **candidate.simulator})
        trial = _Trial(candidate, simulator,
                       {**settings, "free": candidate.free_parameters(settings["free"])})
        try:
            trial.check = check_scene(simulator.model, keypoints, tolerance=tolerance)
        except SceneMismatchError as exc:
            if not compare:
                raise
            trial.error = exc
        trials.append(trial)
    return trials


def _fit_trial(trial: _Trial, recordings: list[VideoRecording], stop: FitStop, *,
               compare: bool) -> None:
    """Fit ``trial``'s model to ``recordings`` (in place: its fit, time and stop reason);
    with ``compare`` a fit that fails carries the error, without it the error is raised."""
    started = time.perf_counter()
    try:
        trial.fit = fit_shooting(trial.simulator, recordings, callback=stop, **trial.settings)
    except (FitError, SimulationError) as exc:
        if not compare:
            raise
        trial.error = exc
    trial.time_s, trial.stop_reason = time.perf_counter() - started, stop.reason


def _print_comparison(rows: list[dict], name: str) -> None:
    """The comparison table, one line per candidate, best first."""
    print(f"{name}: models by BIC (best first):")
    for row in rows:
        print(f"  {row['name']}: " + (
            f"failed: {row['error']}" if row["error"] else
            f"BIC {row['bic']:.1f}, k {row['parameters']}, loss {row['loss_mm']:.3f} mm, tip "
            f"MAE {row['tip_mae_mm']:.3f} mm, shape {row['shape_error_mm']:.3f} mm, "
            f"{'converged' if row['converged'] else 'not converged'} in {row['iterations']} "
            f"iterations, {row['time_s']:.1f} s"))


def run_recording(path: str | Path, out: str | Path, *, video: bool = True,
                  stop: FitStop | None = None) -> dict[str, Any]:
    """Run a recording file end to end (see the module) and return the bundle's summary.

    Args:
        path: the pipeline YAML.
        out: the bundle's folder.
        video: write the overlay video.
        stop: a ready :class:`FitStop` (default: from ``fit.time_limit_s`` and
            ``fit.stop_file``).
    """
    path, out = Path(path), Path(out)
    spec = load_recording_file(path)
    base_dir = path.parent
    read, footage, file = _read_recording(spec, base_dir)
    fit_options = spec["fit"]
    compare = "models" in fit_options
    tolerance, tolerance_notes = obstacle_tolerance(spec.get("obstacle_tolerance_mm"),
                                                   read.metres_per_pixel)
    trials = _trials(spec, base_dir, read.keypoints, compare=compare, tolerance=tolerance)
    checked = [t for t in trials if t.error is None]
    if not checked:
        raise PipelineError(f"{file.name}: every candidate model fails the scene check: "
                            + "; ".join(f"{t.candidate.name}: {t.error}" for t in trials))
    for line in (*read.notes, *tolerance_notes, *checked[0].check.warnings):
        print(f"{file.name}: {line}")
    if stop is None:
        stop_file = fit_options.get("stop_file")
        stop = FitStop(time_limit_s=fit_options.get("time_limit_s"),
                       stop_file=None if stop_file is None else out / stop_file)
    keypoints, notes, estimates = read.keypoints, [*read.notes, *tolerance_notes], {}
    started = time.perf_counter()
    if "frame_rate_range" in fit_options:
        keypoints, estimates["frame_rate_fps"], model_rate, note = _with_estimated_frame_rate(
            checked[0].simulator, keypoints, spec["growth_rate"],
            fit_options["frame_rate_range"], checked[0].settings)
        for trial in checked:
            trial.settings = {**trial.settings, "model_rate": model_rate}
        notes.append(note + (f" (estimated with model {checked[0].candidate.name!r})"
                             if compare else ""))
        print(f"{file.name}: {notes[-1]}")
    if "scale_range" in fit_options:
        options = _simulator_options(spec, base_dir)
        scale, note = _with_estimated_length_scale(
            _resolved_options({**options, **checked[0].candidate.simulator}), keypoints,
            spec["growth_rate"], fit_options["scale_range"], checked[0].settings)
        estimates["length_scale"] = scale
        for trial in checked:
            trial.simulator = make_simulator(**scene_in_true_metres(
                _resolved_options({**options, **trial.candidate.simulator}), scale=scale))
        keypoints = keypoints_in_true_metres(keypoints, scale=scale)
        if footage is not None:
            footage = footage_in_true_metres(footage, scale=scale)
        notes.append(note + (f" (estimated with model {checked[0].candidate.name!r})"
                             if compare else ""))
        print(f"{file.name}: {notes[-1]}")
    growth_rate = _growth_rate(spec["growth_rate"], keypoints)
    if spec["growth_rate"] == "estimate":
        note = (f"growth rate {growth_rate:.4g} m/s estimated from the keypoints' arc length "
                "over time")
        notes.append(note)
        print(f"{file.name}: {note}")
    recordings = [VideoRecording(keypoints, growth_rate=growth_rate, name=file.name)]
    for trial in checked:
        _fit_trial(trial, recordings, stop, compare=compare)
    rows = ranked([t.row(recordings[0]) for t in trials])
    if rows[0]["error"] is not None:
        raise PipelineError(f"{file.name}: no candidate model could be fitted: "
                            + "; ".join(f"{r['name']}: {r['error']}" for r in rows))
    (chosen,) = [t for t in trials if t.candidate.name == rows[0]["name"]]
    comparison = None
    if compare:
        _print_comparison(rows, file.name)
        notes.append(choice_note(rows))
        print(f"{file.name}: {notes[-1]}")
        comparison = {"criterion": "BIC = n log(RSS/n) + k log n over the keypoint "
                                   "residuals [mm] (k: fitted entries, start pose included)",
                      "chosen": chosen.candidate.name, "candidates": rows}
    elapsed = time.perf_counter() - started
    fit, simulator = chosen.fit, chosen.simulator
    schedule = frame_schedule(keypoints.times, model_rate=chosen.settings["model_rate"])
    errors = parameter_errors(simulator, fit, recordings, schedule=schedule,
                              frame_rate="frame_rate_range" in fit_options)
    if compare:
        # a value two plausible models disagree on is not the data's, whatever its error
        errors = dataclasses.replace(errors, undetermined={**model_dependent(rows),
                                                           **errors.undetermined})
    summary = write_bundle(out, simulator=simulator, fit=fit, recordings=recordings,
                           errors=errors, stop_reason=chosen.stop_reason, time_s=elapsed,
                           notes=notes, warnings=chosen.check.warnings, estimates=estimates,
                           video=video, footage=[footage], models=comparison)
    points = keypoints.point_count
    print(f"{file.name}: loss {loss_mm(fit.initial_loss, points):.3f} → "
          f"{loss_mm(fit.loss, points):.3f} mm RMS per keypoint, tip MAE "
          f"{fit.tip_error_mm[0]['mae']:.3f} mm; optimizer: {fit.optimization.message}"
          + (f"; {chosen.stop_reason}" if chosen.stop_reason else ""))
    for name, value, error, correlated in zip(errors.names, errors.values,
                                              errors.standard_errors, errors.correlated_errors,
                                              strict=True):
        print(f"  {name} = {value:.6g} ± {error:.2g} (± {correlated:.2g} with frames "
              "correlated)"
              + (f"  (undetermined: {errors.undetermined[name]})"
                 if name in errors.undetermined else ""))
    print(f"bundle written to {out}")
    return summary


def main(argv: list[str] | None = None) -> int:
    """The command line: ``python -m sim_vine.fit.pipeline trial.yaml --out DIR``."""
    parser = argparse.ArgumentParser(prog="python -m sim_vine.fit.pipeline",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("recording", help="the pipeline YAML (keypoints or video, scene, fit)")
    parser.add_argument("--out", required=True, help="folder for the result bundle")
    parser.add_argument("--no-video", action="store_true", help="skip the overlay video")
    args = parser.parse_args(argv)
    spec_fit = load_recording_file(args.recording)["fit"]
    stop_file = spec_fit.get("stop_file")
    stop = FitStop(time_limit_s=spec_fit.get("time_limit_s"),
                   stop_file=None if stop_file is None else Path(args.out) / stop_file)
    previous = stop.on_signals()
    try:
        run_recording(args.recording, args.out, video=not args.no_video, stop=stop)
    except ValueError as exc:  # every input error of the pipeline names its fix
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
