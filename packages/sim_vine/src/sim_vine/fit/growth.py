"""The growth rate a recording shows: the vine's arc length over time.

On real recordings the commanded growth rate is often unknown or off (the pressure
controller, slack in the spool). The keypoints measure it: the vine's arc length (the
polyline through its keypoints, base to tip) grows at the growth rate. A least-squares line
through the arc lengths of the seen frames gives a constant rate; with ``per_frame`` the
rate of every frame interval is the difference of consecutive lengths (missing frames
interpolated), for growth that varies. The result is a
:class:`~sim_vine.fit.shooting.VideoRecording`'s ``growth_rate``; what is left (a
calibration offset) can be fitted as the design parameter ``growth.offset``.

The polyline is a chord approximation of the arc: for n keypoints on a vine bent evenly by a
total angle Φ its relative shortfall is about Φ² / (24 (n − 1)²), 1.7e-3 for Φ = 1 rad and 6
points, and it cancels in the rate where the bend changes slowly.
"""

from __future__ import annotations

import numpy as np

from ..vision.keypoints import Keypoints

__all__ = ["GrowthError", "arc_lengths", "growth_rate_from_keypoints"]


class GrowthError(ValueError):
    """Too few frames show the vine to estimate its growth."""


def arc_lengths(keypoints: Keypoints) -> np.ndarray:
    """Length of the polyline through each frame's keypoints [m], shape (frames,); NaN
    where the vine was not found."""
    segments = np.diff(np.asarray(keypoints.points, dtype=np.float64), axis=1)
    return np.sum(np.linalg.norm(segments, axis=2), axis=1)


def growth_rate_from_keypoints(keypoints: Keypoints, *, per_frame: bool = False):
    """The growth rate the keypoints show [m/s].

    Args:
        keypoints: a recording's keypoints (NaN rows for frames without the vine).
        per_frame: one rate per frame interval, shape (frames − 1,), from consecutive
            lengths (missing frames' lengths interpolated in time); otherwise one number,
            the slope of the least-squares line through the seen frames' lengths.

    Raises:
        GrowthError: fewer than two frames show the vine.
    """
    times = np.asarray(keypoints.times, dtype=np.float64)
    lengths = arc_lengths(keypoints)
    seen = np.isfinite(lengths)
    if np.count_nonzero(seen) < 2:
        raise GrowthError(f"the growth rate needs the vine in at least two frames; it was "
                          f"found in {np.count_nonzero(seen)} of {len(times)}")
    if not per_frame:
        slope, _ = np.polyfit(times[seen], lengths[seen], 1)
        return float(slope)
    filled = np.interp(times, times[seen], lengths[seen])
    return np.diff(filled) / np.diff(times)
