"""Fitting stiffness and damping to keypoints: shooting and joint state-parameter estimation.

A small cantilever released from a bent pose is simulated with known K and C; its keypoints
at 30 fps (model at 90 Hz) are the recording. Both fits start away from the truth.
"""

import numpy as np
import pytest

from codesign.testing import gradcheck
from sim_vine.fit.estimation import EstimationError, casadi_available, estimate
from sim_vine.fit.shooting import (
    FitError,
    VideoRecording,
    check_gradient,
    fit_shooting,
    frame_schedule,
    growth_rates,
    simulate_keypoints,
    simulate_states,
    tip_errors_mm,
)
from sim_vine.kinematics import keypoints
from sim_vine.scene import make_simulator
from sim_vine.terms import KeypointObserver
from sim_vine.vision.keypoints import Keypoints

TRUTH = {"joint.stiffness": 0.05, "joint.damping": 0.0005}
FRAMES, POINTS = 16, 6


def cantilever(bodies=4):
    return make_simulator(bodies=bodies, length=0.2, stiffness=0.05, damping=0.0005,
                          initial_angles=0.15)


@pytest.fixture(scope="module")
def recording():
    sim = cantilever()
    times = np.arange(FRAMES) / 30.0
    schedule = frame_schedule(times, model_rate=90.0)
    design = sim.design_space().defaults()
    points = simulate_keypoints(sim, design, initial_state=sim.initial_state(design),
                                growth_rate=0.0, schedule=schedule, frames=FRAMES,
                                points=POINTS)
    return VideoRecording(keypoints=Keypoints(times=times, points=points), name="release")


def test_a_broken_gradient_stops_the_fit_with_a_message(recording):
    check_gradient(np.array([3.0, -1e9]), 0.5, np.zeros(2))  # steep, not broken
    with pytest.raises(FitError, match=r"entry 1 is nan .* at the scaled point \[1\. 2\.\]"):
        check_gradient(np.array([1.0, np.nan]), 0.5, np.array([1.0, 2.0]))
    with pytest.raises(FitError, match="entry 0 is 1e\\+40"):
        check_gradient(np.array([1e40, 1.0]), 0.5, np.zeros(2))
    # through a fit on the adjoint gradient (L-BFGS-B's): a step VJP that blows up (as the
    # adjoint of a singular contact system did) ends the fit with the message instead of a
    # "converged" starting point
    sim = cantilever()
    exact_vjp = sim.step_vjp

    def broken_vjp(*args):
        g_state, g_action, g_design = exact_vjp(*args)
        return g_state, g_action, {k: 1e40 * v for k, v in g_design.items()}

    sim.step_vjp = broken_vjp
    with pytest.raises(FitError, match="the loss gradient broke down"):
        fit_shooting(sim, [recording], max_iterations=3, method="lbfgsb",
                     overrides={"joint.stiffness": {"init": 0.035}})


def test_frames_align_with_model_steps():
    schedule = frame_schedule(np.arange(5) / 30.0, model_rate=90.0)
    assert schedule.substeps == 3 and schedule.dt == pytest.approx(1 / 90)
    # times written to the microsecond (0.033333, ...: 29.999998 fps) keep 3 substeps; they
    # used to get 4, a 120 Hz model fitted to a 90 Hz truth (its damping 3.4 % off)
    assert frame_schedule(np.round(np.arange(27) / 30.0, 6), model_rate=90.0).substeps == 3
    assert frame_schedule(np.arange(5) / 29.0, model_rate=90.0).substeps == 4
    with pytest.raises(FitError):
        frame_schedule(np.array([0.0, 0.1, 0.15]), model_rate=90.0)


def test_simulated_states_start_from_the_given_state_and_give_the_keypoints():
    sim = cantilever()
    design = sim.design_space().defaults()
    q = sim.initial_state(design).body_q
    start = type(sim.initial_state(design))(body_q=q, body_qd=np.full_like(q, 0.01))
    schedule = frame_schedule(np.arange(4) / 30.0, model_rate=90.0)
    states = simulate_states(sim, design, initial_state=start, growth_rate=0.0, frames=4,
                             substeps=schedule.substeps, dt=schedule.dt)
    assert len(states) == 4
    np.testing.assert_array_equal(states[0].body_qd, start.body_qd)
    points = simulate_keypoints(sim, design, initial_state=start, growth_rate=0.0,
                                schedule=schedule, frames=4, points=POINTS)
    np.testing.assert_array_equal(points[-1], keypoints(sim.model, states[-1].body_q, POINTS))


def test_keypoint_observer_gradients():
    sim = cantilever()
    observer = KeypointObserver(simulator=sim, count=POINTS)
    design = sim.design_space().defaults()
    state = sim.initial_state(design)
    w = np.random.default_rng(0).standard_normal(observer.size)
    g_state, _ = observer.observe_vjp(state, design, w)
    report = gradcheck(lambda d: float(w @ observer.observe(d["s"], design)), {"s": state},
                       {"s": g_state})
    assert report.passed, str(report)


def test_shooting_recovers_stiffness_and_damping_within_two_percent(recording):
    fit = fit_shooting(cantilever(), [recording], model_rate=90.0, max_iterations=30,
                       overrides={"joint.stiffness": {"init": 0.035},
                                  "joint.damping": {"init": 0.0008}})
    for name, truth in TRUTH.items():
        assert float(np.mean(fit.fitted[name])) == pytest.approx(truth, rel=0.02), name
    assert fit.loss < fit.initial_loss
    assert fit.tip_error_mm[0]["mae"] < 0.1
    assert len(fit.start_poses) == 1 and 1 <= fit.optimization.iterations <= 30
    assert fit.optimization.loss == pytest.approx(fit.loss)


def test_tip_errors_ignore_missing_frames_and_check_shapes():
    measured = np.zeros((3, 2, 2))
    measured[1] = np.nan
    predicted = np.zeros((3, 2, 2))
    predicted[:, -1, 0] = 0.001  # 1 mm off in x
    errors = tip_errors_mm(predicted, measured)
    assert errors["mae"] == pytest.approx(1.0) and errors["mae_y"] == 0.0
    with pytest.raises(FitError, match="differ in shape"):
        tip_errors_mm(predicted[:, :1], measured[:2])


def test_bad_growth_input_is_refused(recording):
    bad = VideoRecording(keypoints=recording.keypoints, growth_rate=[0.1, np.nan])
    with pytest.raises(FitError, match="growth_rate"):
        bad.growth_table()
    np.testing.assert_array_equal(growth_rates(0.2, 4), [0.2, 0.2, 0.2])
    with pytest.raises(FitError, match=r"one value per frame interval \(3\)"):
        growth_rates([0.1, 0.2], 4)


@pytest.mark.skipif(not casadi_available(), reason="joint estimation needs casadi (sim_vine[fit])")
def test_joint_estimation_with_ipopt_recovers_stiffness_and_damping(recording):
    start = dict(cantilever().design_space().defaults())
    start["joint.stiffness"] = np.full_like(start["joint.stiffness"], 0.035)
    start["joint.damping"] = np.full_like(start["joint.damping"], 0.0008)
    result = estimate(cantilever(), recording, design=start, model_rate=90.0)
    assert "Succeeded" in result.status
    for name, truth in TRUTH.items():
        assert float(np.mean(result.fitted[name])) == pytest.approx(truth, rel=0.02), name


@pytest.mark.skipif(not casadi_available(), reason="joint estimation needs casadi (sim_vine[fit])")
def test_joint_estimation_corrects_a_contact_schedule_that_misses_a_bounce(contact_runner):
    # Growing at 0.3 m/s into a slanted wall (no gravity), the tip bounces 0.13 mm off it for
    # one step after the impact; poses fitted to the frames' keypoints cannot see that, and
    # holding the tip on the wall there moved K by 24 %. The contact rounds drop the contact
    # whose impulse stays at zero and recover the simulator's schedule and K, C.
    sim = make_simulator(scene="wall", bodies=6, length=0.25)
    poses, modes = contact_runner(sim, 33, 0.3, 1 / 90)
    recording = VideoRecording(keypoints=Keypoints(
        times=np.arange(12) / 30.0, points=np.stack([keypoints(sim.model, q, POINTS)
                                                     for q in poses[::3]])), growth_rate=0.3)
    start = dict(sim.design_space().defaults())
    start["joint.stiffness"] = np.full(3, 0.035)
    start["joint.damping"] = np.full(3, 0.003)
    kept = estimate(sim, recording, design=start, contact_rounds=0, fit_length=True)
    assert np.count_nonzero(kept.contacts) == np.count_nonzero(modes) + 1
    assert abs(float(kept.fitted["joint.stiffness"]) / 0.05 - 1) > 0.1
    updated = estimate(sim, recording, design=start, fit_length=True)
    assert updated.contact_rounds > 1
    np.testing.assert_array_equal(updated.contacts != 0, modes != 0)
    assert float(updated.fitted["joint.stiffness"]) == pytest.approx(0.05, rel=1e-4)
    assert float(updated.fitted["joint.damping"]) == pytest.approx(0.002, rel=1e-4)


@pytest.mark.skipif(not casadi_available(), reason="joint estimation needs casadi (sim_vine[fit])")
@pytest.mark.parametrize("options, message", [
    ({"free": ("body.mass",)}, "cannot fit"),
    ({"solver": "sqp"}, "solver"),
    ({"trust": 0.0}, "trust"),
    ({"contact_rounds": -1}, "contact_rounds"),
    ({"contacts": np.zeros((3, 1), dtype=int)}, "contacts must have shape"),
])
def test_joint_estimation_refuses_bad_options(recording, options, message):
    with pytest.raises(EstimationError, match=message):
        estimate(cantilever(), recording, **options)
