"""A recording's frame rate estimated from the vine's dynamics.

A keypoints file whose times are written at the wrong rate (a camera's nominal rate where it
ran at another, frame numbers read with a wrong ``fps``) stretches every motion in time.
Gravity sets the vine's own time scale (a pendulum's √(L/g)), which no fitted K, C or
growth offset can stretch with it (a stretch by s needs K s², C s and gravity g s²), so
the fitted loss has its minimum at the true rate. :func:`estimate_frame_rate` fits the
recording at candidate rates and returns the one with the lowest fitted loss: the loss at
:data:`~sim_vine.fit.log_search.GRID_POINTS` rates spread evenly in log over the given range,
then SciPy's bounded Brent search between the best one's neighbours
(:func:`~sim_vine.fit.log_search.search_log_range`, shared with the length scale's
estimate).

Measured on the harder synthetic recording written at 25 fps where the camera ran at 30
(`tests/test_pipeline.py`): the fitted loss is 35.5 mm² at the file's 25 fps and 4.4 mm² at
30 fps (tip MAE 2.9 and 0.7 mm).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from .log_search import GRID_POINTS, search_log_range

__all__ = ["GRID_POINTS", "FrameRateEstimate", "estimate_frame_rate"]


@dataclasses.dataclass(frozen=True)
class FrameRateEstimate:
    """The frame rate a recording's dynamics fit best.

    Attributes:
        fps: the estimate [frames/s].
        losses: every rate tried [frames/s] with its fitted loss [mm²] (inf where the fit
            failed), in the order tried.
    """

    fps: float
    losses: list[tuple[float, float]]


def estimate_frame_rate(fitted_loss: Callable[[float], float], *, low: float, high: float,
                        tolerance: float = 2e-3) -> FrameRateEstimate:
    """The rate in [``low``, ``high``] [frames/s] whose fit leaves the lowest loss.

    Args:
        fitted_loss: fps -> the loss [mm²] of a fit with the recording's times at that rate
            (e.g. :func:`~sim_vine.fit.shooting.fit_shooting`'s ``loss``); a
            :class:`codesign.SimulationError` or :class:`~sim_vine.fit.shooting.FitError`
            counts as an infinite loss.
        low, high: the range [frames/s], 0 < low < high.
        tolerance: the search stops when the rate is known to this fraction.

    Raises:
        FitError: a bad range, or no rate in it could be fitted.
    """
    search = search_log_range(fitted_loss, low=low, high=high, what="frame rate", unit="fps",
                              tolerance=tolerance)
    return FrameRateEstimate(fps=search.best, losses=search.losses)
