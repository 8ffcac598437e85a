"""A recording's length scale estimated from the vine's dynamics.

A scale measured wrong in the recording (two pegboard holes read a few pixels apart from
where they are) makes every length the user measures in it too long or too short by one
factor σ (recording metres per true metre): the keypoints, and the scene drawn over the
same image (obstacles, the base, the vine's length). Gravity does not scale with them:
a pendulum's time scale √(L/g) fixes the absolute length once the frame rate is known, and
no fitted K, C or growth offset makes a vine σ times longer swing like the true one. So
:func:`estimate_length_scale` fits the recording at candidate σ, with the keypoints and
every length of the scene divided by σ (:func:`keypoints_in_true_metres`,
:func:`scene_in_true_metres`), and keeps the σ with the lowest fitted loss (the search of
:func:`~sim_vine.fit.log_search.search_log_range`, shared with the frame rate's).

The losses are compared in the recording's units (the fit's loss in the candidate's metres
times σ²): the measurement noise is fixed in the image, so a candidate that fits exactly as
well (no gravity in the plane) leaves exactly the same loss, where the candidate's own
units would favour the largest σ by 1/σ².

Only ``g T² / L`` is fixed by the dynamics, so a frame rate and a length scale cannot be
estimated together; and where gravity does not act in the image plane (a vine filmed from
above lying on a table) or the vine does not move, the loss is the same at every σ:
:func:`estimate_length_scale` refuses such a recording (:class:`ScaleUndeterminedError`)
rather than return an arbitrary σ; its scale must be measured.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..vision.keypoints import Calibration, Keypoints
from .log_search import search_log_range
from .shooting import FitError
from .video_file import Footage

__all__ = ["LENGTH_OPTIONS", "MIN_LOSS_RISE", "LengthScaleEstimate", "ScaleUndeterminedError",
           "estimate_length_scale", "footage_in_true_metres", "keypoints_in_true_metres",
           "scene_in_true_metres"]

LENGTH_OPTIONS = ("length", "max_length", "gyration_radius", "view", "base", "contact",
                  "contact_gap", "obstacles")
"""The vine options (:class:`~sim_vine.options.VineOptions`) that hold lengths measured in
the recording's scale: the vine's length and size, the base's position (not its angle),
contact offsets along the bodies and their largest gap, the render window and every
obstacle's coordinates and sizes. Masses, linear density, gravity, stiffness, damping,
friction and the commanded growth rate are physical and kept."""

_OBSTACLE_LENGTHS = {"circle": ("center", "radius"), "polygon": ("vertices",),
                     "rectangle": ("center", "size"), "wall": ("start", "end", "thickness")}

MIN_LOSS_RISE = 0.05
"""The least rise of the fitted loss over the grid, relative to its lowest value (plus
:data:`LOSS_FLOOR_MM2`), that a scale estimate accepts. Measured on the harder recording
with a 5 % scale error over [0.9, 1.15] (``tests/test_length_scale.py``, noise seeds 0–2):
with gravity in the image plane the loss rises 144–183 % above its lowest; with gravity off
it varies by 1.5e-8 to 6e-8 (the fits' tolerance)."""

LOSS_FLOOR_MM2 = 1e-3
"""Added to the lowest loss [mm²] before dividing by it, so that an exact (noise-free) flat
recording does not divide round-off by zero."""


class ScaleUndeterminedError(FitError):
    """The recording's fitted loss hardly changes over the scale range: its dynamics do not
    fix its length scale."""


def _scaled(value, factor: float):
    return (np.asarray(value, dtype=np.float64) / factor).tolist()


def _obstacle(spec: Mapping[str, Any], factor: float) -> dict[str, Any]:
    fields = _OBSTACLE_LENGTHS.get(spec.get("type")) if isinstance(spec, Mapping) else None
    if fields is None:  # the simulator's own check names the problem
        return spec
    return {key: _scaled(value, factor) if key in fields else value
            for key, value in spec.items()}


def scene_in_true_metres(options: Mapping[str, Any], *, scale: float) -> dict[str, Any]:
    """Vine options (a scene's merged with the simulator block's, without ``scene``) with
    every length of :data:`LENGTH_OPTIONS` divided by ``scale`` (recording metres per true
    metre); the rest as given."""
    scaled = dict(options)
    for name in ("length", "max_length", "gyration_radius", "view", "contact_gap"):
        if scaled.get(name) is not None:
            scaled[name] = _scaled(scaled[name], scale)
    if scaled.get("base") is not None:
        x, y, *angle = scaled["base"]
        scaled["base"] = [x / scale, y / scale, *angle]
    if isinstance(scaled.get("contact"), list):
        scaled["contact"] = [[body, offset / scale] for body, offset in scaled["contact"]]
    if scaled.get("obstacles"):
        scaled["obstacles"] = [_obstacle(spec, scale) for spec in scaled["obstacles"]]
    return scaled


def keypoints_in_true_metres(keypoints: Keypoints, *, scale: float) -> Keypoints:
    """``keypoints`` with their points [m] divided by ``scale`` (about the world's origin,
    as the scene is)."""
    return dataclasses.replace(keypoints, points=keypoints.points / scale)


def footage_in_true_metres(footage: Footage, *, scale: float) -> Footage:
    """``footage`` whose pixels map to true metres (its calibration's metres over
    ``scale``), so that a fit in true metres is drawn where it was recorded."""
    homography = np.diag([1.0 / scale, 1.0 / scale, 1.0]) @ footage.calibration.homography
    return dataclasses.replace(footage, calibration=Calibration(homography))


@dataclasses.dataclass(frozen=True)
class LengthScaleEstimate:
    """The length scale a recording's dynamics fit best.

    Attributes:
        scale: σ, recording metres per true metre (1.05: every recorded length 5 % long).
        losses: every σ tried with its fitted loss in the recording's units [mm²] (inf
            where the fit failed), in the order tried.
        rise: the loss's rise over the grid relative to its lowest value.
    """

    scale: float
    losses: list[tuple[float, float]]
    rise: float


def _rise(grid: list[tuple[float, float]]) -> float:
    finite = [loss for _, loss in grid if math.isfinite(loss)]
    if len(finite) < 2:
        return 0.0
    return (max(finite) - min(finite)) / (min(finite) + LOSS_FLOOR_MM2)


def estimate_length_scale(fitted_loss: Callable[[float], float], *, low: float, high: float,
                          tolerance: float = 2e-3, min_rise: float = MIN_LOSS_RISE
                          ) -> LengthScaleEstimate:
    """The scale σ in [``low``, ``high``] whose fit leaves the lowest loss.

    Args:
        fitted_loss: σ -> the loss of a fit with the recording's lengths divided by σ, in the
            recording's units (the fit's loss [mm²] times σ²); a
            :class:`codesign.SimulationError` or :class:`~sim_vine.fit.shooting.FitError`
            counts as an infinite loss.
        low, high: the range, 0 < low < high.
        tolerance: the search stops when σ is known to this fraction.
        min_rise: the least rise of the loss over the grid, relative to its lowest value,
            for σ to count as determined.

    Raises:
        ScaleUndeterminedError: the loss rises by less than ``min_rise`` over the grid.
        FitError: a bad range, or no σ in it could be fitted.
    """
    def check_grid(grid: list[tuple[float, float]]) -> None:
        rise = _rise(grid)
        if rise < min_rise:
            raise ScaleUndeterminedError(
                f"the fitted loss changes by only {100 * rise:.3g} % over the length scale "
                f"range [{low:g}, {high:g}] ({len(grid)} fits; at least {100 * min_rise:g} % "
                "is needed): the recording's dynamics do not fix its scale (gravity not in "
                "the image plane, e.g. a vine filmed from above, or a vine that does not "
                "move); measure the scale in the recording (keypoints.scale) and drop "
                "fit.scale_range")

    search = search_log_range(fitted_loss, low=low, high=high, what="length scale",
                              tolerance=tolerance, check_grid=check_grid)
    return LengthScaleEstimate(scale=search.best, losses=search.losses,
                               rise=_rise(search.grid))
