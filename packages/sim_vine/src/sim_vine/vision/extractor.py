"""The ``vine_centerline`` keypoint extractor: one image in, keypoints along the vine out.

The per-frame half of :func:`sim_vine.vision.keypoints.extract_keypoints`, for a live camera
(ros_bridge's ``keypoints`` node finds it through the core's
``codesign_register_keypoint_extractors`` hook).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .keypoints import Calibration, KeypointError, Segmentation, resample_polyline, trace_centerline

__all__ = ["vine_centerline_extractor"]


def vine_centerline_extractor(
    *,
    base_px: Sequence[float],
    points: int,
    metres_per_pixel: float | None = None,
    origin_px: Sequence[float] | None = None,
    reference_pixels: Sequence[Sequence[float]] | None = None,
    reference_world: Sequence[Sequence[float]] | None = None,
    segmentation: dict | None = None,
    base_radius_px: float = 10.0,
    base_direction: Sequence[float] | None = None,
    min_area_px: int = 20,
    tip_trim_px: float | None = None,
) -> Callable[[np.ndarray], np.ndarray]:
    """An extractor of ``points`` keypoints [m] evenly spaced from the vine's base to its tip.

    Args:
        base_px: where the vine leaves its base, (x, y) [px].
        points: keypoints per image, >= 2.
        metres_per_pixel, origin_px: a scale calibration (:meth:`Calibration.from_scale`),
            or ``reference_pixels`` and ``reference_world`` (four or more points each) for a
            homography (:meth:`Calibration.from_reference_points`).
        segmentation: :class:`~sim_vine.vision.keypoints.Segmentation` options.
        base_radius_px, base_direction, min_area_px, tip_trim_px: as
            :func:`~sim_vine.vision.keypoints.trace_centerline`.

    Returns:
        ``extract(image)``: a BGR uint8 image (height, width, 3) to keypoints (points, 2)
        [m], all NaN when the vine is not found.
    """
    if int(points) < 2:
        raise KeypointError(f"points must be >= 2, got {points}")
    if reference_pixels is not None and reference_world is not None:
        calibration = Calibration.from_reference_points(reference_pixels, reference_world)
    elif metres_per_pixel is not None and origin_px is not None:
        calibration = Calibration.from_scale(metres_per_pixel, origin_px)
    else:
        raise KeypointError("the vine_centerline extractor needs a calibration: "
                            "metres_per_pixel and origin_px, or reference_pixels and "
                            "reference_world")
    segment = Segmentation(**(segmentation or {}))

    def extract(image: np.ndarray) -> np.ndarray:
        centerline, _ = trace_centerline(
            segment.mask(image), base_px, base_radius_px=base_radius_px,
            base_direction=base_direction, min_area_px=min_area_px, tip_trim_px=tip_trim_px)
        if centerline is None:
            return np.full((int(points), 2), np.nan)
        return resample_polyline(calibration.to_world(centerline), int(points))

    return extract
