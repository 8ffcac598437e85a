"""An objective that survives points where the simulation fails (codesign.optim.guarded), and
the design runs that use it (codesign.multistart.Solver)."""

import numpy as np
import pytest

from codesign import SimulationError
from codesign.multistart import Solver
from codesign.optim import (
    CMAES,
    LBFGSB,
    Evaluation,
    GuardedProblem,
    OptimizeResult,
    best_result,
)


class Fragile:
    """(x − 3)² on [−10, 10] whose simulation fails beyond x = 5; counts batch calls."""

    size, lower, upper = 1, np.array([-10.0]), np.array([10.0])

    def __init__(self):
        self.batches = 0

    def evaluate(self, x, *, grad=True):
        if x[0] > 5.0:
            raise SimulationError(f"step 7: Newton's method did not converge at x = {x[0]}")
        return Evaluation(loss=(x[0] - 3.0) ** 2, grad=np.array([2 * (x[0] - 3.0)]))

    def evaluate_many(self, xs, *, grad=False):
        self.batches += 1
        return [self.evaluate(x, grad=grad) for x in xs]


def test_a_failed_point_is_penalized_and_the_best_point_kept():
    guarded = GuardedProblem(Fragile())
    assert guarded.evaluate(np.array([0.0])).loss == 9.0
    penalized = guarded.evaluate(np.array([6.0]))
    assert penalized.loss == 19.0 and np.all(penalized.grad == 0)  # 2 × worst + 1
    assert len(guarded.failures) == 1 and "did not converge" in guarded.failures[0].message
    assert guarded.best_loss == 9.0
    # L-BFGS-B's first trial (x = 6) fails; it backtracks and still finds the minimum
    guarded = GuardedProblem(Fragile())
    result = LBFGSB().minimize(guarded, np.array([0.0]), max_iterations=20)
    assert guarded.failures and result.converged and result.x[0] == pytest.approx(3.0)


def test_a_batch_with_a_failure_is_evaluated_point_by_point():
    problem = Fragile()
    guarded = GuardedProblem(problem)
    losses = [e.loss for e in guarded.evaluate_many([np.array([1.0]), np.array([2.0])])]
    assert losses == [4.0, 1.0] and problem.batches == 1 and not guarded.failures
    losses = [e.loss for e in guarded.evaluate_many([np.array([2.0]), np.array([8.0])])]
    assert losses == [1.0, 9.0] and problem.batches == 2  # 9 = 2 × 4 + 1
    assert [f.x[0] for f in guarded.failures] == [8.0]


def test_best_result_returns_the_best_point_and_counts_the_failures():
    guarded = GuardedProblem(Fragile())
    guarded.evaluate(np.array([2.5]))
    guarded.evaluate(np.array([7.0]))
    stopped = OptimizeResult(x=np.array([7.0]), loss=19.0, iterations=1, evaluations=2,
                             converged=False, message="ABNORMAL_TERMINATION_IN_LNSRCH")
    result = best_result(stopped, guarded)
    assert result.x[0] == 2.5 and result.loss == 0.25
    assert "1 of" in result.message and "returned the best point evaluated" in result.message
    nothing = GuardedProblem(Fragile())
    nothing.evaluate(np.array([9.0]))
    with pytest.raises(SimulationError, match=r"did not converge at x = 9.0 \(every one of "
                                              r"the 1 evaluations failed"):
        best_result(stopped, nothing)


def test_a_problem_with_constraints_is_not_guarded():
    problem = Fragile()
    problem.constraint_lower, problem.constraint_upper = np.zeros(1), np.ones(1)
    with pytest.raises(ValueError, match="constraints cannot be guarded"):
        GuardedProblem(problem)


def test_residuals_are_guarded_only_where_the_problem_has_them():
    assert not hasattr(GuardedProblem(Fragile()), "residuals")
    assert not hasattr(GuardedProblem(Fragile()), "jacobian")


@pytest.mark.parametrize(("optimizer", "start"), [(LBFGSB(), 0.0),
                                                  (CMAES(sigma0=3.0, seed=0), 4.0)])
def test_a_design_run_survives_failed_trial_points(optimizer, start):
    result = Solver(optimizer, 60)(Fragile(), np.array([start]), None)
    assert result.x[0] == pytest.approx(3.0, abs=1e-4)
    assert "failed in the simulation" in result.message
