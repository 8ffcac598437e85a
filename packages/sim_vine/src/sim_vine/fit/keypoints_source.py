"""The ``vine_keypoints`` recording source: identification data from a keypoints file.

A YAML identification run names it under ``identification.recordings``::

    identification:
      recordings:
        source: vine_keypoints
        options:
          path: trial3.csv            # relative to the YAML file's folder
          units: px                   # m, mm or px
          scale: {pixels: [[102, 40], [598, 44]], distance: 0.508}   # pegboard holes
          origin_px: [80, 310]        # the base's pixel
          fps: 30                     # needed only when the file numbers frames
          growth_rate: 0.1
      measurement: {name: keypoints, options: {count: 8}}

The file is read and checked by :func:`sim_vine.fit.keypoints_file.read_keypoints_file`, the
scene's obstacles are checked against the recorded path
(:func:`sim_vine.fit.scene_check.check_scene`: errors stop the run, warnings are printed),
and the frames are placed on the control steps as for the ``vine_video`` source.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from codesign.recordings import RecordingSet, RecordingSourceError

from ..vision.keypoints import Keypoints
from .keypoints_file import KeypointsFileError, read_keypoints_file
from .scene_check import SceneMismatchError, check_scene, obstacle_tolerance
from .video_source import keypoint_recordings

__all__ = ["keypoints_recordings"]


def keypoints_recordings(
    *,
    simulator,
    measurement,
    dt: float,
    substeps: int,
    base_dir: Path,
    path: str,
    units: str = "m",
    scale: dict | None = None,
    origin_px: Sequence[float] | None = None,
    flip_y: bool = True,
    fps: float | None = None,
    growth_rate: float | str = 0.0,
    initial_pose_tolerance_mm: float = 3.0,
    obstacle_tolerance_mm: float | None = None,
    frames: int | None = None,
    truth: dict[str, Any] | None = None,
) -> RecordingSet:
    """One recording from a keypoints file (the ``vine_keypoints`` source).

    Args:
        simulator, measurement, dt, substeps, base_dir: supplied by the run; the
            measurement must be the ``keypoints`` observer with ``count`` equal to the file's
            points per frame (tip included).
        path: the ``.csv`` or ``.npz`` file, relative to ``base_dir``.
        units, scale, origin_px, flip_y, fps: how to read it, see
            :func:`~sim_vine.fit.keypoints_file.read_keypoints_file`.
        growth_rate: commanded growth rate during the recording [m/s], or ``estimate``
            (the slope of the keypoints' arc length over time).
        initial_pose_tolerance_mm: largest distance [mm] between the simulator's initial
            keypoints and the first frame's.
        obstacle_tolerance_mm: how deep [mm] the recorded vine may dip into an obstacle;
            default 2 mm or two of the file's pixels, whichever is more
            (:func:`~sim_vine.fit.scene_check.obstacle_tolerance`).
        frames: use only the first ``frames`` frames; default all.
        truth: the parameters behind a synthetic recording, for the run's report.
    """
    count = getattr(measurement, "count", None)
    if count is None or measurement.size != 2 * count:
        raise RecordingSourceError("the vine_keypoints source measures keypoints: set "
                                   "identification.measurement to {name: keypoints, options: "
                                   "{count: n}}")
    file = Path(path) if Path(path).is_absolute() else Path(base_dir) / path
    try:
        read = read_keypoints_file(file, units=units, scale=scale, origin_px=origin_px,
                                   flip_y=flip_y, fps=fps, points=int(count))
        keypoints = read.keypoints
        if frames is not None:
            if int(frames) < 2:
                raise RecordingSourceError(f"frames must be at least 2, got {frames}")
            keypoints = Keypoints(keypoints.times[:int(frames)], keypoints.points[:int(frames)],
                                  reasons=keypoints.reasons)
        tolerance, tolerance_notes = obstacle_tolerance(obstacle_tolerance_mm,
                                                       read.metres_per_pixel)
        check = check_scene(simulator.model, keypoints, tolerance=tolerance)
    except (KeypointsFileError, SceneMismatchError) as exc:
        raise RecordingSourceError(str(exc)) from None
    for line in (*read.notes, *tolerance_notes, *check.warnings):
        print(f"vine_keypoints {file.name}: {line}")
    return keypoint_recordings(simulator=simulator, measurement=measurement,
                               keypoints=keypoints, dt=dt, substeps=substeps,
                               growth_rate=growth_rate,
                               initial_pose_tolerance_mm=initial_pose_tolerance_mm,
                               name=file.name, truth=truth)
