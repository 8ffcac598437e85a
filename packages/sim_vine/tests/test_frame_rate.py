"""A recording's frame rate estimated by fitting it at candidate rates."""

import math

import pytest

from codesign import SimulationError
from sim_vine.fit.frame_rate import GRID_POINTS, estimate_frame_rate
from sim_vine.fit.shooting import FitError


def test_the_rate_with_the_lowest_fitted_loss_is_found_past_rates_that_fail():
    def fitted_loss(fps):
        if fps > 38.0:
            raise SimulationError("step 5: OSQP primal infeasible")
        return (math.log(fps / 30.0)) ** 2 + 4.0

    estimate = estimate_frame_rate(fitted_loss, low=20.0, high=40.0)
    assert estimate.fps == pytest.approx(30.0, rel=3e-3)
    assert estimate.losses[GRID_POINTS - 1] == (pytest.approx(40.0), math.inf)  # failed
    assert len(estimate.losses) > GRID_POINTS
    assert min(loss for _, loss in estimate.losses) == fitted_loss(estimate.fps)


def test_a_bad_range_or_a_range_without_a_fit_is_refused():
    with pytest.raises(FitError, match="0 < low < high"):
        estimate_frame_rate(lambda fps: 0.0, low=30.0, high=20.0)

    def fails(fps):
        raise FitError("the fit's starting point cannot be simulated")

    with pytest.raises(FitError, match=r"no frame rate in \[20, 40\] fps could be fitted"):
        estimate_frame_rate(fails, low=20.0, high=40.0)
