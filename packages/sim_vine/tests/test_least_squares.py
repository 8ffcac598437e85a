"""The least-squares fit method with sim_vine's guard: failed points and a Jacobian that
cannot be formed (the method itself: the core's tests/test_optim_least_squares.py)."""

import numpy as np
import pytest

from codesign import SimulationError
from codesign.optim import GuardedProblem, ResidualProblem, TrustRegionLeastSquares, best_result
from sim_vine.fit.shooting import FitError, fit_shooting
from sim_vine.scene import make_simulator

A = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
B = np.array([1.0, 2.0, 3.0])


def linear(x):
    return A @ x - B


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
