"""Least squares on residuals: forward-difference Jacobians, SciPy's trust-region reflective
method behind the optimizer interface (stops, messages), and identification problems'
residuals."""

import numpy as np
import pytest
from systems import SpringMass

from codesign import SimulationError
from codesign.identification import IdentificationProblem, Recording, identify
from codesign.observers import StateFieldObserver
from codesign.optim import LBFGSB, ResidualProblem, TrustRegionLeastSquares, forward_jacobian
from codesign.recordings import smooth_random_actions

A = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
B = np.array([1.0, 2.0, 3.0])


def linear(x):
    return A @ x - B


def test_forward_jacobian_steps_back_at_a_bound_and_where_a_rollout_fails():
    x = np.array([0.5, 1.0])
    np.testing.assert_allclose(forward_jacobian(linear, x, linear(x), lower=[-2, -2],
                                                upper=[2, 1.0]), A, atol=1e-8)

    def fails_forward(z):
        if z[0] > 0.5:
            raise SimulationError("step 4: OSQP primal infeasible")
        return linear(z) if z[1] <= 1.0 else np.full(3, np.nan)

    np.testing.assert_allclose(forward_jacobian(fails_forward, x, linear(x), lower=[-2, -2],
                                                upper=[2, 2]), A, atol=1e-8)

    def fails_both(z):
        if z[0] != 0.5:
            raise SimulationError("step 4: OSQP primal infeasible")
        return linear(z)

    with pytest.raises(SimulationError, match=r"column 0 cannot be formed.*primal infeasible"):
        forward_jacobian(fails_both, x, linear(x), lower=[-2, -2], upper=[2, 2])


def test_residual_problem_loss_is_the_weighted_sum_of_squares_with_its_gradient():
    weights = np.array([0.5, 1.0, 2.0])
    problem = ResidualProblem(linear, weights, lower=[-5, -5], upper=[5, 5])
    x = np.array([0.2, -0.3])
    evaluation = problem.evaluate(x)
    r = weights * linear(x)
    assert evaluation.loss == pytest.approx(r @ r)
    np.testing.assert_allclose(evaluation.grad, 2 * (weights[:, None] * A).T @ r, rtol=1e-5)
    assert problem.evaluate(x, grad=False).grad is None


def test_trust_region_least_squares_stops_on_request_or_at_its_limit_and_says_why():
    def curved(x):
        return np.array([10 * (x[1] - x[0] ** 2), 1 - x[0]])  # Rosenbrock's residuals

    problem = ResidualProblem(curved, np.ones(2), lower=[-5, -5], upper=[5, 5])
    start = np.array([-1.2, 1.0])
    limited = TrustRegionLeastSquares().minimize(problem, start, max_iterations=2)
    assert limited.iterations == 2 and not limited.converged
    assert limited.message == "reached max_iterations"
    seen = []
    stopped = TrustRegionLeastSquares().minimize(
        problem, start, max_iterations=50,
        callback=lambda info: seen.append(info.loss) or info.iteration == 3)
    assert stopped.message == "stopped by callback" and stopped.iterations == 3
    assert seen == list(stopped.history) and stopped.loss == pytest.approx(seen[-1])
    done = TrustRegionLeastSquares().minimize(problem, start, max_iterations=100)
    assert done.converged and "termination condition is satisfied" in done.message
    np.testing.assert_allclose(done.x, [1.0, 1.0], atol=1e-6)
    with pytest.raises(ValueError, match="max_iterations must be >= 1"):
        TrustRegionLeastSquares().minimize(problem, start, max_iterations=0)


def test_an_objective_without_residuals_is_refused():
    class Plain:
        lower, upper = np.full(2, -1.0), np.full(2, 1.0)

    with pytest.raises(TypeError, match="fits residuals.*pick lbfgsb for an optimization"):
        TrustRegionLeastSquares().minimize(Plain(), np.zeros(2), max_iterations=5)


def _problem():
    sim = SpringMass()
    truth = {"mass": 1.0, "stiffness": 9.0, "damping": 0.6}
    recordings = []
    for seed in range(2):
        actions = smooth_random_actions(np.random.default_rng(seed), 40, 1, knots=5,
                                        low=-1.0, high=1.0)
        state, rows = sim.initial_state(truth), []
        rows.append(state.q)
        for action in actions:
            state = sim.step(state, action, truth, 0.02)
            rows.append(state.q)
        measured = np.array(rows).reshape(41, -1)
        measured[7] = np.nan  # a missing frame
        recordings.append(Recording(actions, measured, name=f"run {seed}"))
    problem = IdentificationProblem(sim, recordings,
                                    measurement=StateFieldObserver(simulator=sim, fields=["q"]),
                                    free=["stiffness", "damping"], dt=0.02)
    return problem, truth


def test_identification_residuals_square_to_the_loss_and_least_squares_finds_the_truth():
    problem, truth = _problem()
    x = problem.x0() * 1.3
    r = problem.residuals(x)
    assert r @ r == pytest.approx(problem.evaluate(x, grad=False).loss, rel=1e-12)
    jacobian = problem.jacobian(x, r)
    np.testing.assert_allclose(2 * jacobian.T @ r, problem.evaluate(x).grad, rtol=1e-4)
    fitted = identify(problem, optimizer=TrustRegionLeastSquares(), max_iterations=50)
    assert fitted.optimization.converged, fitted.optimization.message
    for name in problem.free:
        np.testing.assert_allclose(fitted.design[name], truth[name], rtol=1e-6)
    lbfgsb = identify(problem, optimizer=LBFGSB(), max_iterations=fitted.optimization.iterations)
    assert fitted.loss < lbfgsb.loss  # in as many iterations


def test_entries_pinned_by_equal_bounds_keep_their_value():
    problem = ResidualProblem(linear, np.ones(3), lower=[-5, 0.25], upper=[5, 0.25])
    np.testing.assert_array_equal(forward_jacobian(linear, np.array([1.0, 0.25]),
                                                   linear(np.array([1.0, 0.25])),
                                                   lower=[-5, 0.25], upper=[5, 0.25])[:, 1], 0.0)
    result = TrustRegionLeastSquares().minimize(problem, np.array([4.0, 0.25]),
                                                max_iterations=20)
    assert result.converged, result.message
    # min over x0 of (x0 - 1)² + (0.25 - 2)² + (x0 + 0.25 - 3)²: x0 = 1.875
    np.testing.assert_allclose(result.x, [1.875, 0.25], atol=1e-8)
