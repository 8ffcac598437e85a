"""The least-squares fit method: forward-difference Jacobians, SciPy's trust-region
reflective method behind the optimizer interface, failed points, stops and messages."""

import numpy as np
import pytest

from codesign import SimulationError
from sim_vine.fit.guarded import GuardedProblem, best_result
from sim_vine.fit.least_squares import (
    ResidualProblem,
    TrustRegionLeastSquares,
    forward_jacobian,
)
from sim_vine.fit.shooting import FitError, fit_shooting
from sim_vine.scene import make_simulator

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


def test_trust_region_least_squares_converges_past_a_region_that_cannot_be_simulated():
    # the unconstrained least-squares solution lies at x0 = 1.5; points beyond x0 = 3 fail
    def residuals(x):
        if x[0] > 3.0:
            raise SimulationError(f"step 2: OSQP primal infeasible at {x[0]}")
        return linear(x)

    guarded = GuardedProblem(ResidualProblem(residuals, np.ones(3), lower=[-10, -10],
                                             upper=[10, 10]))
    start = np.array([-8.0, 9.0])
    result = best_result(TrustRegionLeastSquares().minimize(guarded, start,
                                                            max_iterations=50), guarded)
    expected = np.linalg.lstsq(A, B, rcond=None)[0]
    assert result.converged, result.message
    np.testing.assert_allclose(result.x, expected, atol=1e-6)
    assert result.loss == pytest.approx(np.sum(linear(expected) ** 2))
    assert len(result.history) == result.iterations >= 1


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


def test_a_jacobian_that_cannot_be_formed_ends_the_fit_at_the_accepted_point():
    def residuals(x):
        if x[0] != 0.25:
            raise SimulationError("step 9: OSQP primal infeasible")
        return linear(x)

    guarded = GuardedProblem(ResidualProblem(residuals, np.ones(3), lower=[-1, -1],
                                             upper=[1, 1]))
    result = TrustRegionLeastSquares().minimize(guarded, np.array([0.25, 0.0]),
                                                max_iterations=10)
    assert not result.converged and result.iterations == 0
    assert result.message.startswith("stopped: the Jacobian's column 0 cannot be formed")
    np.testing.assert_array_equal(result.x, [0.25, 0.0])
    assert guarded.failures and "primal infeasible" in guarded.failures[0].message


def test_an_unknown_fit_method_is_refused():
    with pytest.raises(FitError, match=r"unknown fit method 'newton'; choose one of "
                                       r"\['least_squares', 'lbfgsb'\]"):
        fit_shooting(make_simulator(bodies=3), [object()], method="newton")
