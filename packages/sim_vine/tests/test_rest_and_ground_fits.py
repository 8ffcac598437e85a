"""Rest angles and ground friction are design parameters a shooting fit can free.

A 4-body vine lying on the ground (no gravity) is released from a bent pose; its springs
pull it toward rest angles it keeps and the ground slows it. Its keypoints at 30 fps are the
recording; the fit starts from a straight rest and a third of the true friction.
"""

import numpy as np
import pytest

from sim_vine.fit.shooting import VideoRecording, fit_shooting, frame_schedule, simulate_keypoints
from sim_vine.scene import make_simulator
from sim_vine.vision.keypoints import Keypoints

REST, GROUND = 0.08, 6.0
FRAMES, POINTS = 16, 6


def _vine(rest_angle, ground_friction):
    return make_simulator(bodies=4, length=0.2, stiffness=0.05, damping=0.0005,
                          initial_angles=0.25, rest_angle=rest_angle,
                          ground_friction=ground_friction)


def test_a_shooting_fit_recovers_rest_angle_and_ground_friction():
    truth = _vine(REST, GROUND)
    times = np.arange(FRAMES) / 30.0
    schedule = frame_schedule(times, model_rate=90.0)
    design = truth.design_space().defaults()
    points = simulate_keypoints(truth, design, initial_state=truth.initial_state(design),
                                growth_rate=0.0, schedule=schedule, frames=FRAMES,
                                points=POINTS)
    recording = VideoRecording(keypoints=Keypoints(times=times, points=points), name="lying")
    fit = fit_shooting(_vine(0.0, GROUND / 3), [recording],
                       free=("joint.rest_angle", "ground.friction"), max_iterations=60)
    assert fit.initial_loss > 1.0  # mm²: the straight rest and weak friction are visibly off
    assert float(fit.fitted["joint.rest_angle"]) == pytest.approx(REST, rel=1e-5)
    assert float(fit.fitted["ground.friction"]) == pytest.approx(GROUND, rel=1e-5)
