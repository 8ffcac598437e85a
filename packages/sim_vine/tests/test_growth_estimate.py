"""The growth rate a recording shows, from its keypoints' arc length over time."""

import numpy as np
import pytest

from sim_vine.fit.growth import GrowthError, arc_lengths, growth_rate_from_keypoints
from sim_vine.fit.shooting import (
    METHODS,
    GrowthSmoothing,
    VideoRecording,
    fit_shooting,
    frame_schedule,
    growth_scale,
    simulate_keypoints,
)
from sim_vine.scene import make_simulator
from sim_vine.vision.keypoints import Keypoints

FRAMES = 13


def growing(rate):
    """Keypoints (6 points) of a slightly bent 6-body vine growing at ``rate`` [m/s] (a
    number or one per frame interval), 30 fps, model at 90 Hz."""
    sim = make_simulator(bodies=6, length=0.2, initial_angles=0.05, stiffness=0.05,
                         damping=0.002)
    design = sim.design_space().defaults()
    times = np.arange(FRAMES) / 30.0
    points = simulate_keypoints(sim, design, initial_state=sim.initial_state(design),
                                growth_rate=rate, schedule=frame_schedule(times, model_rate=90),
                                frames=FRAMES, points=6)
    return sim, Keypoints(times=times, points=points)


# The measured rate is the model's: as the springs straighten the growing vine, its
# keypoint chords lengthen and its linearized growth over-extends (a swinging pair), up to
# 0.8 % of 0.1 m/s here; the estimate is asserted within 1 %.


def test_a_constant_growth_rate_from_the_arc_length():
    _, keypoints = growing(0.2)
    assert arc_lengths(keypoints)[0] == pytest.approx(0.2, rel=2e-3)  # chords of the bend
    assert growth_rate_from_keypoints(keypoints) == pytest.approx(0.2, rel=0.01)
    keypoints.points[4] = np.nan  # a frame without the vine is left out
    assert growth_rate_from_keypoints(keypoints) == pytest.approx(0.2, rel=0.01)


def test_a_varying_growth_rate_per_frame():
    rate = np.where(np.arange(FRAMES - 1) < 6, 0.1, 0.3)
    _, keypoints = growing(rate)
    np.testing.assert_allclose(growth_rate_from_keypoints(keypoints, per_frame=True), rate,
                               rtol=0.01)
    keypoints.points[3] = np.nan  # interpolated: its two intervals share their mean rate
    estimate = growth_rate_from_keypoints(keypoints, per_frame=True)
    np.testing.assert_allclose(estimate[2:4], 0.1, rtol=0.01)
    with pytest.raises(GrowthError, match="found in 1 of 13"):
        keypoints.points[1:] = np.nan
        growth_rate_from_keypoints(keypoints)


def test_a_commanded_rate_that_is_off_is_fitted_as_the_growth_offset():
    sim, keypoints = growing(0.2)
    # told 0.15 m/s where the vine grew at 0.2: the fit finds the missing 0.05 m/s
    recording = VideoRecording(keypoints=keypoints, growth_rate=0.15)
    fit = fit_shooting(sim, [recording], free=("growth.offset",), max_iterations=30)
    assert float(fit.fitted["growth.offset"]) == pytest.approx(0.05, rel=0.01)
    assert fit.optimization.converged and fit.tip_error_mm[0]["mae"] < 0.1


@pytest.mark.parametrize("method", METHODS)
def test_per_frame_growth_rates_are_fitted_with_their_smoothing(method):
    # exact keypoints of a vine slowing from 0.2 to 0.1 m/s after frame 6, fitted from a
    # constant 0.15 m/s: both methods find the rates; the loss left is the smoothing row
    # of the one step, (λ × 0.1 m/s)² with λ = 0.1 mm s/m
    truth = np.r_[np.full(6, 0.2), np.full(FRAMES - 7, 0.1)]
    sim, keypoints = growing(truth)
    fit = fit_shooting(sim, [VideoRecording(keypoints, growth_rate=0.15)],
                       free=["joint.stiffness"], fit_growth=True, growth_smoothing=0.1,
                       method=method, max_iterations=100)
    assert fit.optimization.converged, fit.optimization.message
    np.testing.assert_allclose(fit.growth_rates[0], truth, atol=1e-3)
    assert fit.loss == pytest.approx((0.1 * 0.1) ** 2, rel=0.05)
    assert fit.least_squares.names[-1] == f"growth.rate[{FRAMES - 2}]"
    np.testing.assert_allclose(fit.least_squares.values[-len(truth):], fit.growth_rates[0])


def test_growth_smoothing_rows_are_weighted_rate_steps():
    smoothing = GrowthSmoothing(weight=2.0, first=1, count=3, scale=0.5, size=4)
    x = np.array([7.0, 1.0, 3.0, 2.0])  # rates 0.5, 1.5, 1.0 m/s
    np.testing.assert_allclose(smoothing(x), [2.0 * 1.0, 2.0 * -0.5])
    assert GrowthSmoothing(weight=0.0, first=1, count=3, scale=0.5, size=4)(x).shape == (0,)
    assert growth_scale([0.2, -0.4]) == pytest.approx(0.3) and growth_scale([0.0]) == 0.1
