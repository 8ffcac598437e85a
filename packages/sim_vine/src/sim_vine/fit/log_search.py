"""The one-dimensional search behind the estimates a recording's dynamics fix (its frame rate,
:mod:`~sim_vine.fit.frame_rate`; its length scale, :mod:`~sim_vine.fit.length_scale`).

Each candidate value costs a whole fit, whose loss is smooth in the value near its minimum
but may fail (raise) far from it. :func:`search_log_range` fits at :data:`GRID_POINTS`
values spread evenly in log over the range, then runs SciPy's bounded Brent search between
the best one's neighbours, and returns the value with the lowest loss among all it tried.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from codesign import SimulationError

from .shooting import FitError

__all__ = ["GRID_POINTS", "LogSearch", "search_log_range"]

GRID_POINTS = 5
"""Values tried across the range before the bounded search."""


@dataclasses.dataclass(frozen=True)
class LogSearch:
    """The value a search found and what it tried.

    Attributes:
        best: the value with the lowest loss tried.
        losses: every value tried with its loss (inf where the fit failed), in the order
            tried; the first :data:`GRID_POINTS` are the grid, low to high.
    """

    best: float
    losses: list[tuple[float, float]]

    @property
    def grid(self) -> list[tuple[float, float]]:
        """The grid's values and losses, low to high."""
        return self.losses[:GRID_POINTS]


def search_log_range(loss: Callable[[float], float], *, low: float, high: float,
                     what: str, unit: str = "", tolerance: float = 2e-3,
                     check_grid: Callable[[list[tuple[float, float]]], None] | None = None
                     ) -> LogSearch:
    """The value in [``low``, ``high``] with the lowest ``loss``.

    Args:
        loss: value -> loss (e.g. a fit's loss at it); a :class:`codesign.SimulationError`
            or :class:`~sim_vine.fit.shooting.FitError` counts as an infinite loss.
        low, high: the range, 0 < low < high.
        what, unit: what the value is and its unit, for the messages ("frame rate", "fps").
        tolerance: the search stops when the value is known to this fraction.
        check_grid: called with the grid's (value, loss) pairs before the bounded search; it
            raises to refuse them (e.g. a loss too flat to fix the value).

    Raises:
        FitError: a bad range, or no value in it could be fitted.
    """
    if not (0 < low < high and math.isfinite(high)):
        raise FitError(f"the {what} range must be 0 < low < high, got [{low}, {high}]")
    losses: list[tuple[float, float]] = []

    def loss_at(log_value: float) -> float:
        value = float(math.exp(log_value))
        try:
            result = float(loss(value))
        except (SimulationError, FitError):
            result = math.inf
        losses.append((value, result))
        # Brent's parabolas need finite values: a failed value ranks above every fitted one
        finite = [v for _, v in losses if math.isfinite(v)]
        return result if math.isfinite(result) else 2.0 * max(finite, default=0.0) + 1.0

    grid = np.linspace(math.log(low), math.log(high), GRID_POINTS)
    values = [loss_at(float(v)) for v in grid]
    if not any(math.isfinite(v) for _, v in losses):
        raise FitError(f"no {what} in [{low:g}, {high:g}]{' ' + unit if unit else ''} could "
                       "be fitted")
    if check_grid is not None:
        check_grid(list(losses))
    best = int(np.argmin(values))
    from scipy.optimize import minimize_scalar

    minimize_scalar(loss_at, method="bounded",
                    bounds=(grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]),
                    options={"xatol": tolerance})
    # the best value tried (Brent's last point is not always its best)
    return LogSearch(best=min(losses, key=lambda item: item[1])[0], losses=losses)
