"""A fit's objective that survives points where the simulation fails.

On real recordings a line search can try a point whose rollout has no solution (OSQP primal
infeasible in one step: growth forced into a wall inside the friction cone, a start pose
pushed into an obstacle). That raised :class:`codesign.SimulationError` through the
optimizer and ended the whole fit. :class:`GuardedProblem` answers such a point with a
penalty instead, so that the line search backtracks, remembers the best point it has seen
and lists the failures.

The penalty: ``2 × (largest loss seen) + 1`` with a zero gradient. Measured with SciPy's
L-BFGS-B (1.17) on a quadratic whose first trial point failed: an infinite or 1e30 loss
made it report "converged" at its starting point (its interpolation then asks for a
vanishing step); a penalty of the order of the losses seen makes it backtrack and go on.

A least-squares problem (``residuals``, ``jacobian``: :mod:`codesign.optim.least_squares`)
gets NaN residuals at a failed point instead: SciPy's ``trf`` then shrinks its trust region
and tries a shorter step; the Jacobian's differences take a failed side from the other.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from codesign import SimulationError
from codesign.optim import Evaluation, OptimizeResult

__all__ = ["FailedEvaluation", "GuardedProblem", "best_result"]


@dataclasses.dataclass(frozen=True)
class FailedEvaluation:
    """One evaluation whose simulation failed.

    Attributes:
        x: the scaled point, shape (n,).
        message: the simulator's error message (it names the step and the cause).
    """

    x: np.ndarray
    message: str


class GuardedProblem:
    """Wrap an objective (``evaluate``, ``size``, ``lower``, ``upper``) so that a
    :class:`codesign.SimulationError` at a point becomes a penalized evaluation.

    Attributes:
        failures: every failed evaluation, in order.
        best_x, best_loss: the lowest-loss point evaluated without failure (``None`` and
            inf before the first).
    """

    def __init__(self, problem):
        self.problem = problem
        self.size, self.lower, self.upper = problem.size, problem.lower, problem.upper
        self.constraint_lower = np.zeros(0)
        self.constraint_upper = np.zeros(0)
        self.failures: list[FailedEvaluation] = []
        self.best_x: np.ndarray | None = None
        self.best_loss = float("inf")
        self._worst_loss = 0.0

    def evaluate(self, x, *, grad: bool = True) -> Evaluation:
        """The wrapped evaluation, or the penalty where the simulation fails."""
        x = np.array(x, dtype=np.float64)
        try:
            evaluation = self.problem.evaluate(x, grad=grad)
        except SimulationError as error:
            self.failures.append(FailedEvaluation(x=x, message=str(error)))
            penalty = 2.0 * self._worst_loss + 1.0
            return Evaluation(loss=penalty, grad=np.zeros(self.size) if grad else None,
                              constraint_jac=np.zeros((0, self.size)) if grad else None)
        self._remember(x, float(evaluation.loss))
        return evaluation

    def _remember(self, x: np.ndarray, loss: float) -> None:
        self._worst_loss = max(self._worst_loss, abs(loss))
        if loss < self.best_loss:
            self.best_x, self.best_loss = x, loss

    def residuals(self, x) -> np.ndarray:
        """The wrapped problem's residuals (loss ``‖r‖²``), or NaN ones (shape
        ``(residual_count,)``) where the simulation fails."""
        x = np.array(x, dtype=np.float64)
        try:
            residuals = self.problem.residuals(x)
        except SimulationError as error:
            self.failures.append(FailedEvaluation(x=x, message=str(error)))
            return np.full(self.problem.residual_count, np.nan)
        self._remember(x, float(residuals @ residuals))
        return residuals

    def jacobian(self, x, at) -> np.ndarray:
        """The wrapped problem's Jacobian at ``x`` (residuals ``at``); its perturbed
        rollouts that fail are recorded (they are not candidates for the best point: a
        step of 1e-6 is no progress); it raises :class:`codesign.SimulationError` where
        both sides of an entry failed."""

        def probe(moved):
            try:
                return self.problem.residuals(moved)
            except SimulationError as error:
                self.failures.append(FailedEvaluation(x=np.array(moved), message=str(error)))
                raise

        return self.problem.jacobian(np.array(x, dtype=np.float64), at, residuals=probe)

    def evaluate_many(self, xs, *, grad: bool = False):
        """:meth:`evaluate` at each point."""
        return [self.evaluate(x, grad=grad) for x in xs]


def best_result(result: OptimizeResult, guarded: GuardedProblem) -> OptimizeResult:
    """``result``, or the best point ``guarded`` saw where that is lower (the optimizer
    stopped at a failed point or after a worse one); the message says which and how many
    evaluations failed."""
    if guarded.best_x is None:
        raise SimulationError(
            "every evaluation of the fit failed; the first: "
            + (guarded.failures[0].message if guarded.failures else "no evaluation ran"))
    message = result.message
    if guarded.failures:
        message += (f"; {len(guarded.failures)} of {result.evaluations} evaluations failed "
                    "in the simulation and were penalized")
    if result.loss <= guarded.best_loss and not _failed_at(guarded, result.x):
        return dataclasses.replace(result, message=message)
    return dataclasses.replace(result, x=guarded.best_x.copy(), loss=guarded.best_loss,
                               message=message + "; returned the best point evaluated")


def _failed_at(guarded: GuardedProblem, x) -> bool:
    return any(np.array_equal(failure.x, x) for failure in guarded.failures)
