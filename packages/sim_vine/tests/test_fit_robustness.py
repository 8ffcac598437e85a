"""Fits that survive real data: failed evaluations, scaling and identifiability."""

import numpy as np
import pytest

from codesign import SimulationError
from sim_vine.fit.identifiability import identifiability, residual_jacobian
from sim_vine.fit.shooting import (
    METHODS,
    FitError,
    VideoRecording,
    fit_shooting,
    frame_schedule,
    simulate_keypoints,
    unit_scales,
)
from sim_vine.scene import make_simulator
from sim_vine.state import VineState
from sim_vine.vision.keypoints import Keypoints

TRUTH = {"joint.stiffness": 0.05, "joint.damping": 0.0005}


def cantilever():
    return make_simulator(bodies=4, length=0.2, stiffness=0.05, damping=0.0005,
                          initial_angles=0.15)


@pytest.fixture(scope="module")
def release():
    """16 frames at 30 fps of the cantilever released from a bent pose (6 keypoints)."""
    sim = cantilever()
    times = np.arange(16) / 30.0
    design = sim.design_space().defaults()
    points = simulate_keypoints(sim, design, initial_state=sim.initial_state(design),
                                growth_rate=0.0, schedule=frame_schedule(times, model_rate=90.0),
                                frames=16, points=6)
    return VideoRecording(keypoints=Keypoints(times=times, points=points), name="release")


@pytest.mark.parametrize("method", METHODS)
def test_an_infeasible_rollout_in_a_line_search_does_not_abort_the_fit(release, method):
    sim = cantilever()
    exact_step = sim.step
    designs = []

    def step(state, action, design, dt):
        # the second design the fit tries (L-BFGS-B's first line-search trial, the first
        # Jacobian column's forward step of the least-squares method) has no solution, as a
        # real rollout whose QP is primal infeasible in one step
        key = tuple(np.round(np.concatenate([design["joint.stiffness"],
                                             design["joint.damping"]]), 12))
        if key not in designs:
            designs.append(key)
        if designs.index(key) == 1:
            raise SimulationError("step 3 since initial_state: OSQP status primal infeasible")
        return exact_step(state, action, design, dt)

    sim.step = step
    fit = fit_shooting(sim, [release], max_iterations=30, method=method,
                       overrides={"joint.stiffness": {"init": 0.035},
                                  "joint.damping": {"init": 0.0008}})
    assert len(fit.failed_evaluations) == 1
    assert "primal infeasible" in fit.failed_evaluations[0].message
    assert "1 of" in fit.optimization.message and "failed in the simulation" in \
        fit.optimization.message
    for name, truth in TRUTH.items():
        assert float(np.mean(fit.fitted[name])) == pytest.approx(truth, rel=0.02), name
    assert fit.loss < fit.initial_loss


def test_a_fit_whose_start_cannot_be_simulated_says_so(release):
    sim = cantilever()

    def step(*args):
        raise SimulationError("step 0 since initial_state: OSQP status primal infeasible")

    sim.step = step
    with pytest.raises(FitError, match="starting point cannot be simulated: step 0"):
        fit_shooting(sim, [release], max_iterations=3)


def test_identifiability_of_a_linear_least_squares_problem():
    # r = A x − b: H = AᵀA, covariance σ² H⁻¹ (scaled), errors × scales (physical)
    a = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    jacobian = residual_jacobian(lambda x: a @ x - 1.0, np.array([0.5, 0.5]),
                                 lower=[-1, -1], upper=[1, 1])
    np.testing.assert_allclose(jacobian, a, atol=1e-9)
    report = identifiability(a, np.zeros(3), names=["p", "q"], values=[4.0, 0.005],
                             scales=[4.0, 0.02], noise_mm=0.5)
    covariance = 0.25 * np.linalg.inv(a.T @ a)
    np.testing.assert_allclose(report.standard_errors,
                               np.sqrt(np.diag(covariance)) * [4.0, 0.02])
    assert report.condition_number == pytest.approx(np.linalg.cond(a.T @ a))
    assert report.undetermined == ["q"]  # p: 4 ± 1.49 (37 %), q: 0.005 ± 0.0047 (94 %)
    # a parameter the residuals do not see: a singular direction, infinite error
    blind = identifiability(a * [1.0, 0.0], np.ones(3), names=["p", "q"], values=[10.0, 1.0],
                            scales=[1.0, 1.0])
    assert blind.condition_number == np.inf and blind.undetermined == ["q"]
    assert np.isfinite(blind.standard_errors[0]) and blind.standard_errors[1] == np.inf
    assert "q = 1 ± inf" in blind.summary() and "NOT DETERMINED" in blind.summary()


def test_a_fit_says_damping_is_undetermined_for_a_vine_at_rest():
    # a vine resting in its equilibrium under gravity: a wrong K makes it move, so K is
    # determined, but at the fit nothing moves, so no frame depends on the damping.
    # L-BFGS-B leaves C near its start; the least-squares method's Gauss-Newton steps run it
    # along the flat direction to 1.4 (92× the start, a loss lower by 1e-4 %), where the
    # vine's slower transient leaves K's standard error at 3.8 %: both report C undetermined
    sim = make_simulator(bodies=4, length=0.2, stiffness=0.05, damping=0.01,
                         gravity=[0.0, -9.81])
    design = sim.design_space().defaults()
    state = sim.initial_state(design)
    for _ in range(400):
        state = sim.step(state, np.array([0.0]), design, 0.01)
    rest = VineState(body_q=state.body_q, body_qd=np.zeros_like(state.body_qd))
    times = np.arange(16) / 30.0
    points = simulate_keypoints(sim, design, initial_state=rest, growth_rate=0.0,
                                schedule=frame_schedule(times, model_rate=90.0), frames=16,
                                points=6)
    fit = fit_shooting(sim, [VideoRecording(keypoints=Keypoints(times=times, points=points))],
                       max_iterations=30, method="lbfgsb",
                       overrides={"joint.stiffness": {"init": 0.04},
                                                     "joint.damping": {"init": 0.015}})
    report = fit.identifiability(noise_mm=0.1)
    assert report.names == ["joint.stiffness", "joint.damping"]
    assert report.undetermined == ["joint.damping"]
    assert report.relative_errors[0] < 0.01 and report.relative_errors[1] > 1.0
    assert report.condition_number > 1e6


def test_a_released_vine_determines_stiffness_and_damping(release):
    fit = fit_shooting(cantilever(), [release], max_iterations=30,
                       overrides={"joint.stiffness": {"init": 0.035},
                                  "joint.damping": {"init": 0.0008}})
    report = fit.identifiability(noise_mm=0.1)
    assert report.undetermined == []
    np.testing.assert_allclose(report.values, [np.mean(fit.fitted[n]) for n in TRUTH])
    assert fit.least_squares.jacobian.shape == (16 * 6 * 2, 2)


def test_free_parameters_are_scaled_by_their_starting_values():
    space = make_simulator(bodies=4, stiffness=5.0, damping=1e-6).design_space()
    scales = unit_scales(space, ["joint.stiffness", "joint.damping", "growth.offset"],
                         {"joint.stiffness": {"init": 0.035},
                          "contact.friction": {"scale": 0.3}})
    assert scales == {"joint.stiffness": {"init": 0.035, "scale": 0.035},
                      "joint.damping": {"scale": pytest.approx(1e-6)},
                      "contact.friction": {"scale": 0.3}}  # growth.offset starts at 0


def _far_off_defaults(release):
    """Noisy keypoints (0.3 mm), a simulator whose defaults (the design space's scales) are
    100× and 1/500× the starting guess, that guess, and the overrides that scale K and C
    by those defaults."""
    noisy = VideoRecording(keypoints=Keypoints(
        times=release.keypoints.times,
        points=release.keypoints.points
        + np.random.default_rng(0).normal(0.0, 3e-4, release.keypoints.points.shape)))
    sim = make_simulator(bodies=4, length=0.2, stiffness=5.0, damping=1e-6,
                         initial_angles=0.15)
    start = {"joint.stiffness": {"init": 0.035}, "joint.damping": {"init": 0.0008}}
    by_defaults = {
        name: {**changes, "scale": float(np.mean(sim.design_space()[name].default_array()))}
        for name, changes in start.items()}
    return noisy, sim, start, by_defaults


def test_a_fit_from_far_off_defaults_converges_and_is_better_conditioned(release):
    # scaled by the far-off defaults, L-BFGS-B's fit of K, C and the start pose stopped at
    # its iteration limit, 8.7 mm² from the best fit
    noisy, sim, start, by_defaults_scales = _far_off_defaults(release)
    by_defaults = fit_shooting(sim, [noisy], fit_start=True, max_iterations=50,
                               method="lbfgsb", overrides=by_defaults_scales)
    scaled = fit_shooting(sim, [noisy], fit_start=True, max_iterations=50, method="lbfgsb",
                          overrides=start)
    assert not by_defaults.optimization.converged
    assert scaled.optimization.converged, scaled.optimization.message
    assert scaled.loss < 1.0 < by_defaults.loss
    for name, truth in TRUTH.items():
        assert float(np.mean(scaled.fitted[name])) == pytest.approx(truth, rel=0.02), name
    assert scaled.identifiability().condition_number \
        < 1e-3 * by_defaults.identifiability().condition_number


def test_the_least_squares_fit_converges_from_far_off_defaults_too(release):
    # Gauss-Newton steps do not depend on the parameters' scales the way L-BFGS-B's first
    # steps do: from the same badly scaled start it converges to the best fit
    noisy, sim, start, by_defaults_scales = _far_off_defaults(release)
    fit = fit_shooting(sim, [noisy], fit_start=True, max_iterations=50,
                       method="least_squares", overrides=by_defaults_scales)
    assert fit.optimization.converged, fit.optimization.message
    assert fit.optimization.iterations < 20 and fit.loss < 1.0
    for name, truth in TRUTH.items():
        assert float(np.mean(fit.fitted[name])) == pytest.approx(truth, rel=0.02), name


@pytest.mark.parametrize("options, message", [
    ({"solver": "newton"}, "solver must be 'ipopt' or 'trust-constr'"),
    ({"trust": -1.0}, "trust must be a positive number"),
    ({"contact_rounds": -1}, "contact_rounds must be >= 0"),
])
def test_the_joint_estimation_refuses_bad_options_naming_them(release, options, message):
    # (masses that grow with linear_density it models: test_estimation_warm_start.py)
    from sim_vine.fit.estimation import EstimationError, casadi_available, estimate

    if not casadi_available():
        pytest.skip("joint estimation needs casadi (sim_vine[fit])")
    sim = make_simulator(bodies=4, length=0.2, linear_density=0.05, initial_angles=0.15)
    with pytest.raises(EstimationError, match=message):
        estimate(sim, release, **options)
