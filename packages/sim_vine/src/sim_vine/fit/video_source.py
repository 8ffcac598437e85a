"""The ``vine_video`` recording source: identification data from a video of a vine.

A YAML identification run names it under ``identification.recordings``::

    identification:
      recordings:
        source: vine_video
        options:
          video: oscillation.avi              # relative to the YAML file's folder
          base_px: [23.0, 190.0]
          calibration: {pixels: [[u, v], ...4], world: [[x, y], ...4]}
          growth_rate: 0.0
      measurement: {name: keypoints, options: {count: 6}}

It extracts keypoints from every frame (:func:`sim_vine.vision.keypoints.extract_keypoints`),
puts frame f at the control step its timestamp falls on
(:func:`codesign.recordings.frame_steps`; control steps last ``dt × substeps`` of the run
section; steps without a frame get NaN rows, which the fit skips) and replays the commanded
growth rate as the action (``growth_rate: estimate``: the slope of the keypoints' arc
length over time, :func:`sim_vine.fit.growth.growth_rate_from_keypoints`). Frames where
the vine is not found are NaN rows (``on_missing: nan``, listed in the report) or stop the
run (``on_missing: raise``).

The simulator starts from its own initial pose (the scene's ``initial_angles`` and
``length``); the source checks it against the first frame and, when they differ by more
than ``initial_pose_tolerance_mm``, stops with the ``initial_angles`` that fit the frame.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

from codesign.identification import Recording
from codesign.recordings import RecordingSet, RecordingSourceError, frame_steps, truth_design

from ..kinematics import keypoints as model_keypoints
from ..vision.keypoints import Calibration, Keypoints, Segmentation, extract_keypoints
from ..vision.video import read_frames
from .growth import GrowthError, growth_rate_from_keypoints
from .start_pose import start_pose_from_keypoints

__all__ = ["calibration_from_options", "extract_video_keypoints", "keypoint_recordings",
           "video_recordings"]


def calibration_from_options(spec: dict) -> Calibration:
    """The pixels-to-metres map of a ``calibration`` option: ``{pixels, world}`` (four or more
    reference points [px] and [m], a homography) or ``{metres_per_pixel, origin_px, flip_y}``."""
    keys = set(spec) if isinstance(spec, dict) else set()
    if keys == {"pixels", "world"}:
        return Calibration.from_reference_points(spec["pixels"], spec["world"])
    if {"metres_per_pixel", "origin_px"} <= keys <= {"metres_per_pixel", "origin_px", "flip_y"}:
        return Calibration.from_scale(spec["metres_per_pixel"], spec["origin_px"],
                                      flip_y=bool(spec.get("flip_y", True)))
    raise RecordingSourceError(
        f"calibration must be {{pixels: [[u, v] x4+], world: [[x, y] x4+]}} (a homography from "
        f"reference points) or {{metres_per_pixel: s, origin_px: [u, v], flip_y: true}}; got "
        f"keys {sorted(keys)}")


def _first_frames(source: Path, fps: float | None, count: int) -> tuple[list, float]:
    """The first ``count`` BGR frames of a video or image sequence and its frame rate."""
    frames = list(itertools.islice(read_frames(source, fps=fps), count))
    if len(frames) < 2:
        raise RecordingSourceError(f"{source} has {len(frames)} frame(s); a fit needs two")
    return [f.image for f in frames], 1.0 / (frames[1].time - frames[0].time)


def _check_growth_rate(growth_rate) -> None:
    """Refuse a growth rate that is neither a non-negative number of m/s nor ``estimate``."""
    if growth_rate == "estimate":
        return
    if not (isinstance(growth_rate, int | float) and not isinstance(growth_rate, bool)
            and np.isfinite(growth_rate) and growth_rate >= 0):
        raise RecordingSourceError(f"growth_rate must be a non-negative number of m/s or "
                                   f"'estimate' (from the keypoints), got {growth_rate!r}")


def _check_initial_pose(simulator, measurement, keypoints: Keypoints, tolerance_mm: float):
    model = simulator.model
    design = simulator.design_space().defaults()
    start = np.asarray(measurement.observe(simulator.initial_state(design), design))
    first = keypoints.points[0]
    error = 1e3 * float(np.max(np.linalg.norm(start.reshape(-1, 2) - first, axis=1)))
    if error <= tolerance_mm:
        return
    measured_length = float(np.sum(np.linalg.norm(np.diff(first, axis=0), axis=1)))
    pose = start_pose_from_keypoints(model, first)
    fitted = model_keypoints(model, pose.body_q(model), len(first))
    residual = 1e3 * float(np.max(np.linalg.norm(fitted - first, axis=1)))
    raise RecordingSourceError(
        f"the simulator's initial pose is {error:.2f} mm from the video's first frame "
        f"(> initial_pose_tolerance_mm = {tolerance_mm:g}); the vine in the frame is "
        f"{measured_length:.4f} m long (the model: {model.length:.4f} m). Set the simulator "
        f"options initial_angles: [{', '.join(f'{a:.4f}' for a in pose.angles)}] (they fit the "
        f"frame within {residual:.2f} mm) and length: {measured_length:.4f}, or raise the "
        "tolerance")


def video_recordings(
    *,
    simulator,
    measurement,
    dt: float,
    substeps: int,
    base_dir: Path,
    video: str,
    calibration: dict,
    base_px: list[float],
    fps: float | None = None,
    growth_rate: float | str = 0.0,
    segmentation: dict | None = None,
    base_direction: list[float] | None = None,
    base_radius_px: float = 10.0,
    min_area_px: int = 20,
    tip_trim_px: float | None = None,
    on_missing: str = "nan",
    initial_pose_tolerance_mm: float = 3.0,
    frames: int | None = None,
    truth: dict | None = None,
) -> RecordingSet:
    """One recording from a vine video (the ``vine_video`` source).

    Args:
        simulator, measurement, dt, substeps, base_dir: supplied by the run; the
            measurement must be the ``keypoints`` observer (its ``count`` sets the points
            per frame).
        video: a video file, image folder or glob, relative to ``base_dir``.
        calibration: ``{pixels, world}`` (four or more reference points [px] and [m]) or
            ``{metres_per_pixel, origin_px, flip_y}``.
        base_px: where the vine leaves its base in the image (x, y) [px].
        fps: frame rate; default the video file's (required for image sequences).
        growth_rate: commanded growth rate during the video [m/s], or ``estimate``.
        segmentation: :class:`~sim_vine.vision.keypoints.Segmentation` options (``method``,
            ``lower``, ``upper``, ``threshold``, ``open_px``, ``close_px``; ``background``
            as a path relative to ``base_dir``).
        base_direction, base_radius_px, min_area_px, tip_trim_px: tracing options, see
            :func:`sim_vine.vision.keypoints.trace_centerline`.
        on_missing: ``"nan"`` (frames without the vine become NaN rows, the fit skips
            them) or ``"raise"`` (stop, naming the frames).
        initial_pose_tolerance_mm: largest distance [mm] between the simulator's initial
            keypoints and the first frame's.
        frames: use only the first ``frames`` frames (a quick run); default all.
        truth: the parameters the video was made with, when known (synthetic videos), for
            the run's truth-against-recovered report; it is not used by the fit.
    """
    points = getattr(measurement, "count", None)
    if points is None or measurement.size != 2 * points:
        raise RecordingSourceError("the vine_video source measures keypoints: set "
                                   "identification.measurement to {name: keypoints, options: "
                                   "{count: n}}")
    _check_growth_rate(growth_rate)
    source = Path(video) if Path(video).is_absolute() else Path(base_dir) / video
    keypoints = extract_video_keypoints(
        source, base_dir=Path(base_dir), calibration=calibration_from_options(calibration),
        base_px=base_px, points=int(points), fps=fps, segmentation=segmentation,
        base_direction=base_direction, base_radius_px=base_radius_px, min_area_px=min_area_px,
        tip_trim_px=tip_trim_px, on_missing=on_missing, frames=frames)
    if keypoints.missing_frames:
        print(f"vine_video {source.name}: {keypoints.report()}")
    return keypoint_recordings(simulator=simulator, measurement=measurement,
                               keypoints=keypoints, dt=dt, substeps=substeps,
                               growth_rate=growth_rate,
                               initial_pose_tolerance_mm=initial_pose_tolerance_mm,
                               name=source.name, truth=truth)


def extract_video_keypoints(
    source: Path,
    *,
    base_dir: Path,
    calibration: Calibration,
    base_px: list[float],
    points: int,
    fps: float | None = None,
    segmentation: dict | None = None,
    base_direction: list[float] | None = None,
    base_radius_px: float = 10.0,
    min_area_px: int = 20,
    tip_trim_px: float | None = None,
    on_missing: str = "nan",
    frames: int | None = None,
) -> Keypoints:
    """Keypoints [m] of every frame of a vine video, the extraction the ``vine_video`` source
    and the pipeline's ``video:`` section share.

    Args:
        source: a video file, image folder or glob (already resolved).
        base_dir: the folder a relative ``segmentation.background`` path starts in.
        calibration: pixels to metres.
        base_px, points, fps: the base pixel (x, y), keypoints per frame (tip included),
            the frame rate (default the video file's; required for image sequences).
        segmentation: :class:`~sim_vine.vision.keypoints.Segmentation` options.
        base_direction, base_radius_px, min_area_px, tip_trim_px, on_missing: as
            :func:`sim_vine.vision.keypoints.extract_keypoints`.
        frames: use only the first ``frames`` frames; default all.

    Returns:
        Keypoints, (frames, points, 2) [m], NaN rows for frames without the vine.

    Raises:
        RecordingSourceError: bad segmentation options, fewer than 2 frames, or a first
            frame without the vine (the fit starts there).
    """
    options = dict(segmentation or {})
    background = options.get("background")
    if isinstance(background, str) and not Path(background).is_absolute():
        options["background"] = str(Path(base_dir) / background)
    try:
        segmenter = Segmentation(**options)
    except TypeError as exc:
        raise RecordingSourceError(f"segmentation options: {exc}") from None
    if frames is not None and int(frames) < 2:
        raise RecordingSourceError(f"frames must be at least 2, got {frames}")
    images, rate = (source, fps) if frames is None else _first_frames(source, fps, int(frames))
    keypoints = extract_keypoints(
        images, segmentation=segmenter, base_px=base_px, calibration=calibration,
        points=int(points), fps=rate, base_radius_px=base_radius_px,
        base_direction=base_direction, min_area_px=min_area_px, tip_trim_px=tip_trim_px,
        on_missing=on_missing)
    if 0 in keypoints.missing_frames:
        raise RecordingSourceError(f"{source}: the first frame has no vine "
                                   f"({keypoints.reasons.get(0)}); the simulation starts "
                                   "there, so trim the video to start with the vine visible")
    return keypoints


def keypoint_recordings(*, simulator, measurement, keypoints: Keypoints, dt: float,
                        substeps: int, growth_rate: float | str, initial_pose_tolerance_mm: float,
                        name: str, truth: dict | None) -> RecordingSet:
    """One recording from keypoints [m]: frames placed on the run's control steps (NaN rows
    between and for missing frames), the growth rate [m/s] as the action, the simulator's
    initial pose checked against the first frame; ``truth`` as in :func:`video_recordings`.
    ``growth_rate: estimate`` takes the rate from the keypoints' arc length over time.
    Shared by the ``vine_video`` and ``vine_keypoints`` sources."""
    _check_growth_rate(growth_rate)
    if growth_rate == "estimate":
        try:
            growth_rate = growth_rate_from_keypoints(keypoints)
        except GrowthError as exc:
            raise RecordingSourceError(f"{name}: {exc}") from None
        print(f"{name}: growth rate {growth_rate:.4g} m/s estimated from the keypoints' arc "
              "length over time")
    points = keypoints.point_count
    _check_initial_pose(simulator, measurement, keypoints, initial_pose_tolerance_mm)
    steps = frame_steps(keypoints.times, float(dt) * int(substeps))
    measurements = np.full((int(steps[-1]) + 1, 2 * int(points)), np.nan)
    measurements[steps] = keypoints.points.reshape(keypoints.frame_count, -1)
    actions = np.full((int(steps[-1]), 1), float(growth_rate))
    recording = Recording(actions, measurements, name=name)
    known = None
    if truth:
        design = truth_design(simulator.design_space(), truth)
        known = {name: design[name] for name in truth}
    return RecordingSet([recording], truth=known)
