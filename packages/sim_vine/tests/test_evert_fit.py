"""Shooting fits of a vine that everts (``growth: evert``): the start pose's everted length
and bends fitted with the parameters, by least squares and by L-BFGS-B through the start
pose's VJP."""

import numpy as np
import pytest

from sim_vine.fit.shooting import VideoRecording, fit_shooting, simulate_states
from sim_vine.kinematics import keypoints, vine_length
from sim_vine.scene import make_simulator
from sim_vine.vision.keypoints import Keypoints

FRAMES = 12
# 8 bodies of 0.0625 m; 0.26 m out at frame 0 (bodies 0-3 out, bent, body 4 emerging)
VINE = {"bodies": 8, "max_length": 0.5, "growth": "evert", "gravity": [0.0, -9.81],
        "damping": 0.002}
TRUE_LENGTH, TRUE_STIFFNESS = 0.26, 0.03


@pytest.fixture(scope="module")
def everting():
    """A recording of an everting vine released bent and growing at 0.3 m/s, 30 fps."""
    sim = make_simulator(**VINE, length=TRUE_LENGTH, stiffness=TRUE_STIFFNESS,
                         initial_angles=[0.3, -0.2, 0.25, 0.15, 0.0, 0.0, 0.0, 0.0])
    design = sim.design_space().defaults()
    states = simulate_states(sim, design, initial_state=sim.initial_state(design),
                             growth_rate=0.3, frames=FRAMES, substeps=3, dt=1 / 90)
    points = np.stack([keypoints(sim.model, s.body_q, 6) for s in states])
    return VideoRecording(Keypoints(times=np.arange(FRAMES) / 30.0, points=points),
                          growth_rate=0.3)


@pytest.mark.parametrize("method", ["least_squares", "lbfgsb"])
def test_an_everting_vine_is_fitted_with_its_start_length_and_bends(everting, method):
    # the model's length is 4 cm short of the recording's: the start pose's extension
    # takes it up (one body fewer would be out at the model's length)
    sim = make_simulator(**VINE, length=0.22, stiffness=0.021)
    fit = fit_shooting(sim, [everting], free=["joint.stiffness"], fit_start=True,
                       fit_length=True, method=method, max_iterations=60)
    (pose,) = fit.start_poses
    assert pose.extension == pytest.approx(TRUE_LENGTH - 0.22, abs=2e-4)
    assert vine_length(sim.model, pose.body_q(sim.model)) == pytest.approx(TRUE_LENGTH,
                                                                           abs=2e-4)
    np.testing.assert_allclose(pose.angles[:4], [0.3, -0.2, 0.25, 0.15], atol=5e-3)
    assert float(fit.fitted["joint.stiffness"]) == pytest.approx(TRUE_STIFFNESS, rel=0.01)
    assert fit.tip_error_mm[0]["mae"] < 0.1


def test_the_joint_estimation_refuses_an_everting_vine_naming_the_shooting_fit(everting):
    from sim_vine.fit.estimation import EstimationError, casadi_available, estimate

    if not casadi_available():
        pytest.skip("joint estimation needs casadi (sim_vine[fit])")
    # it went on to IPOPT and stopped on NaN gradients of its prismatic joint rows
    with pytest.raises(EstimationError, match=r"growth: evert\): fit it by shooting"):
        estimate(make_simulator(**VINE, length=0.26), everting)
