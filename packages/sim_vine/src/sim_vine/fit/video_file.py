"""A user's video read for the pipeline (:mod:`sim_vine.fit.pipeline`'s ``video:`` section).

The vine's keypoints (centreline and tip) are extracted from every frame with the
``vine_video`` source's extraction
(:func:`sim_vine.fit.video_source.extract_video_keypoints`, which runs
:func:`sim_vine.vision.keypoints.extract_keypoints`) and checked as a keypoints file's are:

- the scale is measured in the recording, never assumed: ``scale`` (two image points a known
  ``distance`` apart, such as pegboard holes, or ``metres_per_pixel``) with the ``origin_px``
  of the world origin, or a ``calibration`` homography from four or more reference points
  (a camera at an angle); a scale that makes the vine no vine's size is refused
  (:func:`sim_vine.fit.keypoints_file.check_units`);
- the frame rate is the video file's (its header) or the given ``fps``, which an image
  sequence requires; it is never assumed (``fit.frame_rate_range`` estimates it from the
  dynamics, as for a keypoints file);
- frames where the vine is not found become NaN rows that the fit skips, listed with the
  reason in the notes; a first frame without the vine is an error (the fit starts there).

It returns the keypoints as a :class:`~sim_vine.fit.keypoints_file.KeypointsFile` and the
:class:`Footage` that the bundle (:mod:`sim_vine.fit.bundle`) draws its plot and overlay
video over.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..vision.keypoints import Calibration
from ..vision.video import read_frames
from .keypoints_file import (
    KeypointsFile,
    KeypointsFileError,
    check_units,
    pixel_scale,
    pixel_size,
)
from .video_source import calibration_from_options, extract_video_keypoints

__all__ = ["Footage", "VIDEO_OPTIONS", "read_video_file"]

VIDEO_OPTIONS = ("path", "base_px", "points", "scale", "origin_px", "flip_y", "calibration",
                 "fps", "segmentation", "base_direction", "base_radius_px", "min_area_px",
                 "tip_trim_px", "frames")
"""The options of the pipeline's ``video:`` section (:func:`read_video_file`'s arguments)."""


@dataclasses.dataclass(frozen=True)
class Footage:
    """The recorded frames behind a recording, to draw results over.

    Attributes:
        source: the video file, image folder or glob.
        fps: the frame rate the frames are read at [Hz].
        calibration: maps the frames' pixels to the world's metres.
        frame_count: the frames the keypoints came from (the first ones of ``source``).
    """

    source: Path
    fps: float
    calibration: Calibration
    frame_count: int

    def images(self) -> Iterator[np.ndarray]:
        """The first ``frame_count`` frames, BGR uint8 (height, width, 3), in order."""
        frames = read_frames(self.source, fps=self.fps)
        return (frame.image for frame in itertools.islice(frames, self.frame_count))


def _calibration(scale, origin_px, flip_y: bool, calibration, where: str) -> Calibration:
    """The pixels-to-metres map from a scale and origin, or from a calibration."""
    if calibration is not None:
        if scale is not None or origin_px is not None:
            raise KeypointsFileError(f"{where}: give either scale and origin_px or "
                                     "calibration, not both")
        return calibration_from_options(calibration)
    if scale is None or origin_px is None:
        raise KeypointsFileError(
            f"{where}: a video needs its scale: scale ({{metres_per_pixel: s}} or {{pixels: "
            "[[u, v], [u, v]], distance: d}}, two image points a known distance apart) and "
            "origin_px: [u, v] (the pixel of the world origin), or calibration: {pixels: "
            "[[u, v] x4+], world: [[x, y] x4+]}; a scale is never assumed")
    return Calibration.from_scale(pixel_scale(scale), origin_px, flip_y=flip_y)


def read_video_file(
    path: str | Path,
    *,
    base_px: Sequence[float],
    points: int,
    scale: Mapping[str, Any] | None = None,
    origin_px: Sequence[float] | None = None,
    flip_y: bool = True,
    calibration: Mapping[str, Any] | None = None,
    fps: float | None = None,
    segmentation: Mapping[str, Any] | None = None,
    base_dir: str | Path = ".",
    base_direction: Sequence[float] | None = None,
    base_radius_px: float = 10.0,
    min_area_px: int = 20,
    tip_trim_px: float | None = None,
    frames: int | None = None,
) -> tuple[KeypointsFile, Footage]:
    """Extract and check the keypoints of a vine video (see the module).

    Args:
        path: a video file, a folder of images or a glob such as ``frames/*.png``.
        base_px: where the vine leaves its base in the image, (x, y) [px].
        points: keypoints per frame from the base to the tip (tip included), >= 2.
        scale, origin_px, flip_y: the scale measured in the recording and the pixel of the
            world origin, as for a keypoints file in pixels
            (:func:`~sim_vine.fit.keypoints_file.read_keypoints_file`); or
        calibration: ``{pixels, world}`` (a homography from four or more reference points)
            or ``{metres_per_pixel, origin_px, flip_y}``.
        fps: frame rate [Hz]; default the video file's, required for image sequences.
        segmentation: :class:`~sim_vine.vision.keypoints.Segmentation` options (a
            ``background`` path is relative to ``base_dir``).
        base_dir: the folder relative paths of the options start in.
        base_direction, base_radius_px, min_area_px, tip_trim_px: tracing options, see
            :func:`sim_vine.vision.keypoints.trace_centerline`.
        frames: use only the first ``frames`` frames; default all.

    Returns:
        The keypoints [m] with the frame rate and notes, and the footage they came from.

    Raises:
        KeypointsFileError, VideoError, RecordingSourceError, KeypointError: naming the
            problem and the fix.
    """
    path = Path(path)
    where = str(path)
    mapping = _calibration(scale, origin_px, flip_y, calibration, where)
    sequence = path.is_dir() or any(ch in where for ch in "*?[")
    if fps is None and sequence:
        raise KeypointsFileError(f"{where} is an image sequence, which has no frame rate of "
                                 "its own: give it (fps: 30); a frame rate is never assumed")
    keypoints = extract_video_keypoints(
        path, base_dir=Path(base_dir), calibration=mapping, base_px=list(base_px),
        points=int(points), fps=fps, segmentation=dict(segmentation or {}),
        base_direction=base_direction, base_radius_px=base_radius_px, min_area_px=min_area_px,
        tip_trim_px=tip_trim_px, frames=frames)
    check_units(keypoints.points, "px", where)
    rate = 1.0 / float(np.mean(np.diff(keypoints.times)))
    notes = [f"frame rate {rate:.6g} fps ({'given' if fps is not None else 'video file'}); "
             f"keypoints extracted from {keypoints.frame_count} frames"]
    missing = keypoints.missing_frames
    if missing:
        reasons = "; ".join(f"frame {i}: {keypoints.reasons.get(i, 'not found')}"
                            for i in missing[:10])
        notes.append(f"frames {missing} without the vine (NaN rows, skipped by the fit): "
                     f"{reasons}{' …' if len(missing) > 10 else ''}")
    read = KeypointsFile(keypoints=keypoints, fps=rate,
                         fps_source="given" if fps is not None else "video file",
                         notes=tuple(notes), metres_per_pixel=pixel_size(mapping, keypoints))
    return read, Footage(source=path, fps=rate, calibration=mapping,
                         frame_count=keypoints.frame_count)
