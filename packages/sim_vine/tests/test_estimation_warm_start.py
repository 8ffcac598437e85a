"""The joint estimation over a whole trial with wall contact, warm-started from a shooting
fit, and with rest angles and ground friction in its dynamics.

The whole trial (:mod:`sim_vine.fit.whole_trial`): the ``wall_vertical`` vine growing for 2 s
(60 frames), swinging, reaching the wall at about 0.6 s and sliding down along it, with
0.3 mm of keypoint noise and three frames missing. The fits start 30 % below K and 50 %
above C.
"""

import numpy as np
import pytest

from sim_vine.fit._transcription import StartPoint, transcribe
from sim_vine.fit.contact_schedule import detect_contacts
from sim_vine.fit.estimation import (
    EstimationError,
    _free_parameters,
    _keypoint_poses,
    casadi_available,
    estimate,
)
from sim_vine.fit.shooting import (
    FitError,
    VideoRecording,
    fit_shooting,
    frame_schedule,
    simulate_keypoints,
)
from sim_vine.fit.warm_start import simulated_warm_start, warm_start_from_fit
from sim_vine.fit.whole_trial import GROWTH_RATE, POINTS, TRUTH, wall_vine, whole_trial
from sim_vine.kinematics import keypoints
from sim_vine.scene import make_simulator
from sim_vine.vision.keypoints import Keypoints

pytestmark = pytest.mark.skipif(not casadi_available(),
                                reason="joint estimation needs casadi (sim_vine[fit])")

DT = 1 / 90


def _guess():
    return wall_vine(stiffness=0.021, damping=0.003)


@pytest.fixture(scope="module")
def trial():
    """(recording, truth's trajectory, shooting fit of the recording from the guess)."""
    recording, truth = whole_trial()
    fit = fit_shooting(_guess(), [recording], fit_length=True, fit_start=True,
                       max_iterations=10)
    return recording, truth, fit


def test_a_warm_started_estimation_fits_a_whole_trial_with_wall_contact(trial):
    recording, truth, fit = trial
    guess = _guess()
    # the simulator's own contacts along the shooting fit's rollout are the schedule: the
    # tip slides along the wall for most of the trial, at the truth's steps
    warm = warm_start_from_fit(guess, fit, recording)
    assert np.count_nonzero(warm.contacts[:, -1]) > 100
    np.testing.assert_array_equal(warm.contacts != 0, truth.contacts != 0)
    result = estimate(guess, recording, warm_start=fit)
    assert result.status == "Solve_Succeeded"
    assert np.all(result.contact_impulse[1:][result.contacts[1:] != 0] > 0)
    for name, value in TRUTH.items():
        assert float(result.fitted[name]) == pytest.approx(value, rel=0.01), name
    assert result.tip_error_mm["mae"] < 1.0
    assert result.tip_error_mm["max"] < 3.0


def test_the_keypoint_poses_without_length_see_no_contact_where_the_warm_start_does(trial):
    # the cold start's schedule: poses fitted to each frame with the model's length never
    # reach the wall (the README measures where that estimation ends)
    recording, truth, _ = trial
    model = wall_vine().model
    schedule = frame_schedule(recording.keypoints.times, model_rate=90.0)
    cold = _keypoint_poses(model, recording, schedule, fit_length=False)
    assert not np.any(detect_contacts(model, cold, tolerance=2e-3))
    assert np.count_nonzero(truth.contacts) > 100


def test_a_warm_start_is_refused_with_a_starting_design_or_other_steps(trial):
    recording, truth, fit = trial
    guess = wall_vine()
    with pytest.raises(EstimationError, match="not both"):
        estimate(guess, recording, warm_start=fit, design=guess.design_space().defaults())
    short = simulated_warm_start(guess, guess.design_space().defaults(),
                                 initial_state=guess.initial_state(
                                     guess.design_space().defaults()),
                                 growth_rate=np.full(5, GROWTH_RATE), dt=DT)
    with pytest.raises(EstimationError, match="does not cover the recording's 177 model steps"):
        estimate(guess, recording, warm_start=short)
    with pytest.raises(FitError, match="index 1"):
        warm_start_from_fit(guess, fit, recording, index=1)


@pytest.mark.parametrize("implicit_springs", [True, False])
def test_a_simulated_trajectory_with_rest_angles_and_ground_friction_is_exactly_feasible(
        implicit_springs):
    # the estimation's NLP at a trajectory of the simulator (its impulses and contacts),
    # with the design it was simulated with: every keypoint error, dynamics residual and
    # row vanishes to round-off, also with rest angles, viscous ground friction and a
    # sliding contact on a wall with friction
    sim = wall_vine(stiffness=0.03, rest_angle=-0.05, ground_friction=0.5, friction=0.2,
                implicit_springs=implicit_springs)
    design = sim.design_space().defaults()
    steps = 3 * 26
    warm = simulated_warm_start(sim, design, initial_state=sim.initial_state(design),
                                growth_rate=np.full(steps, GROWTH_RATE), dt=DT)
    assert np.count_nonzero(warm.contacts) > 10
    free = ["joint.stiffness", "joint.damping", "joint.rest_angle", "ground.friction"]
    weighted, rows = _residuals_at_the_warm_start(sim, design, warm, free, steps)
    # mm (dynamics residuals × √R = 100): the step's own round-off, 1e-13 m
    assert np.max(np.abs(weighted)) < 1e-8
    assert np.max(np.abs(rows)) < 1e-9


def _residuals_at_the_warm_start(sim, design, warm, free, steps):
    """The transcribed program's weighted residuals [mm] and constraint rows at a simulated
    warm start (``free`` parameters at the design), each flattened."""
    import casadi as ca

    items, theta = _free_parameters(sim.design_space(), design, free, (), None)
    program = transcribe(
        ca, sim.model, measured=np.stack([keypoints(sim.model, q, POINTS)
                                          for q in warm.body_q[::3]]),
        substeps=3, dt=DT, rates=np.full(steps, GROWTH_RATE), contacts=warm.contacts, design=design,
        free=items, start=StartPoint(theta=theta, body_q=warm.body_q, body_qd=warm.body_qd[1:],
                                     reactions=warm.joint_impulse[1:],
                                     contact_impulses=warm.contact_impulse), trust=1e4)
    return (np.asarray(value).reshape(-1) for value in ca.Function(
        "at", [program.x], [program.weighted, program.rows])(program.x0))


def test_the_estimation_recovers_rest_angle_and_ground_friction():
    # the vine of tests/test_rest_and_ground_fits.py: lying on the ground, released from a
    # bent pose toward the rest angles it keeps, slowed by the ground
    def vine(rest_angle, ground_friction):
        return make_simulator(bodies=4, length=0.2, stiffness=0.05, damping=0.0005,
                              initial_angles=0.25, rest_angle=rest_angle,
                              ground_friction=ground_friction)

    truth = vine(0.08, 6.0)
    times = np.arange(16) / 30.0
    design = truth.design_space().defaults()
    points = simulate_keypoints(truth, design, initial_state=truth.initial_state(design),
                                growth_rate=0.0, schedule=frame_schedule(times, model_rate=90.0),
                                frames=16, points=POINTS)
    recording = VideoRecording(keypoints=Keypoints(times=times, points=points), name="lying")
    result = estimate(vine(0.0, 2.0), recording, free=("joint.rest_angle", "ground.friction"))
    assert result.status == "Solve_Succeeded"
    assert float(result.fitted["joint.rest_angle"]) == pytest.approx(0.08, rel=1e-4)
    assert float(result.fitted["ground.friction"]) == pytest.approx(6.0, rel=1e-4)


def test_a_simulated_trajectory_with_growing_masses_is_exactly_feasible():
    # linear_density: the estimation's M(q_k) are the simulator's masses and rod inertias
    # at each step's poses (the distal bodies gain most of their mass over the run)
    from sim_vine.everted_mass import everted_masses

    sim = wall_vine(stiffness=0.06, rest_angle=-0.05, ground_friction=0.5, friction=0.2,
                    linear_density=0.02)
    design = sim.design_space().defaults()
    steps = 3 * 36  # on the wall from step 73
    warm = simulated_warm_start(sim, design, initial_state=sim.initial_state(design),
                                growth_rate=np.full(steps, GROWTH_RATE), dt=DT)
    assert np.count_nonzero(warm.contacts) > 10
    grown = everted_masses(sim.model, design["body.mass"], warm.body_q[-1])
    assert np.max(grown / design["body.mass"]) > 1.5
    weighted, rows = _residuals_at_the_warm_start(sim, design, warm,
                                                  ["joint.stiffness", "joint.damping"], steps)
    assert np.max(np.abs(weighted)) < 1e-8
    assert np.max(np.abs(rows)) < 1e-9


def test_a_warm_started_estimation_recovers_k_and_c_of_a_vine_with_growing_masses():
    def vine(stiffness, damping):
        return make_simulator(bodies=6, length=0.15, linear_density=0.05, stiffness=stiffness,
                              damping=damping, initial_angles=0.2, gravity=(0.0, -9.81))

    truth, guess = vine(0.05, 0.002), vine(0.035, 0.003)
    times = np.arange(31) / 30.0
    schedule = frame_schedule(times, model_rate=90.0)
    design = truth.design_space().defaults()
    points = simulate_keypoints(truth, design, initial_state=truth.initial_state(design),
                                growth_rate=0.1, schedule=schedule, frames=31, points=POINTS)
    recording = VideoRecording(keypoints=Keypoints(times=times, points=points),
                               growth_rate=0.1, name="growing")
    start = guess.design_space().defaults()
    warm = simulated_warm_start(guess, start, initial_state=guess.initial_state(start),
                                growth_rate=np.full(3 * 30, 0.1), dt=DT)
    result = estimate(guess, recording, warm_start=warm)
    assert result.status == "Solve_Succeeded"
    assert float(result.fitted["joint.stiffness"]) == pytest.approx(0.05, rel=1e-4)
    assert float(result.fitted["joint.damping"]) == pytest.approx(0.002, rel=1e-4)
