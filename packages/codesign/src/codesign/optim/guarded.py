"""An objective that survives points where the simulation fails.

A line search can try a point whose rollout has no solution: a step whose Newton iteration
does not converge (a finger slammed into a box), a QP that is primal infeasible (a vine's
growth forced into a wall), a state that leaves the model's domain. That raised
:class:`codesign.SimulationError` through the optimizer and ended the whole run.
:class:`GuardedProblem` answers such a point with a penalty instead, so that the line search
backtracks, remembers the best point it has seen and lists the failures; :func:`best_result`
then returns that point where the optimizer stopped at a failed or worse one.

The penalty: ``2 × (largest loss seen) + 1`` with a zero gradient. Measured with SciPy's
L-BFGS-B (1.17) on a quadratic whose first trial point failed: an infinite or 1e30 loss
made it report "converged" at its starting point (its interpolation then asks for a
vanishing step); a penalty of the order of the losses seen makes it backtrack and go on.

A least-squares problem (``residuals``, ``jacobian``: :mod:`codesign.optim.least_squares`)
gets NaN residuals at a failed point instead: SciPy's ``trf`` then shrinks its trust region
and tries a shorter step; the Jacobian's differences take a failed side from the other.

Problems with constraints are not guarded (a failed point has no constraint values that
SLSQP or trust-constr could use): :class:`GuardedProblem` refuses them.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..simulator import SimulationError
from .base import Callback, Evaluation, OptimizeResult

__all__ = ["FailedEvaluation", "GuardedProblem", "best_result", "minimize_guarded"]


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
    """Wrap an objective (``evaluate``, ``evaluate_many``, ``size``, ``lower``, ``upper``) so
    that a :class:`codesign.SimulationError` at a point becomes a penalized evaluation. Other
    attributes are the wrapped problem's; a problem with ``residuals`` and ``jacobian``
    (least squares) has them guarded too.

    Attributes:
        failures: every failed evaluation, in order.
        best_x, best_loss: the lowest-loss point evaluated without failure (``None`` and
            inf before the first).
    """

    def __init__(self, problem):
        if len(getattr(problem, "constraint_lower", ())):
            raise ValueError("GuardedProblem: a problem with constraints cannot be guarded "
                             "(a failed point has no constraint values)")
        self.problem = problem
        self.size, self.lower, self.upper = problem.size, problem.lower, problem.upper
        self.constraint_lower = np.zeros(0)
        self.constraint_upper = np.zeros(0)
        self.failures: list[FailedEvaluation] = []
        self.best_x: np.ndarray | None = None
        self.best_loss = float("inf")
        self._worst_loss = 0.0
        self._residual_count: int | None = None

    def __getattr__(self, name: str):
        if name == "problem":  # not yet set (unpickling): no recursion
            raise AttributeError(name)
        value = getattr(self.problem, name)  # AttributeError where the problem lacks it
        return {"residuals": self._residuals, "jacobian": self._jacobian}.get(name, value)

    def evaluate(self, x, *, grad: bool = True) -> Evaluation:
        """The wrapped evaluation, or the penalty where the simulation fails."""
        x = np.array(x, dtype=np.float64)
        try:
            evaluation = self.problem.evaluate(x, grad=grad)
        except SimulationError as error:
            return self.penalty(x, str(error), grad=grad)
        self.remember(x, float(evaluation.loss))
        return evaluation

    def evaluate_many(self, xs, *, grad: bool = False) -> list[Evaluation]:
        """The wrapped batch (through its executor); a batch with a failure is evaluated
        again point by point (an executor returns all of a batch or raises)."""
        points = [np.array(x, dtype=np.float64) for x in xs]
        try:
            evaluations = self.problem.evaluate_many(points, grad=grad)
        except SimulationError:
            return [self.evaluate(x, grad=grad) for x in points]
        for x, evaluation in zip(points, evaluations, strict=True):
            self.remember(x, float(evaluation.loss))
        return evaluations

    def _residuals(self, x) -> np.ndarray:
        """The wrapped problem's residuals (loss ``‖r‖²``), or NaN ones where the
        simulation fails (as many as the problem's ``residual_count`` or its last
        residuals; before either is known the failure raises)."""
        x = np.array(x, dtype=np.float64)
        try:
            residuals = self.problem.residuals(x)
        except SimulationError as error:
            count = getattr(self.problem, "residual_count", self._residual_count)
            if count is None:  # nothing tells the residuals' length yet
                raise
            self.failures.append(FailedEvaluation(x=x, message=str(error)))
            return np.full(count, np.nan)
        self._residual_count = len(residuals)
        self.remember(x, float(residuals @ residuals))
        return residuals

    def _jacobian(self, x, at) -> np.ndarray:
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

    def penalty(self, x: np.ndarray, message: str, *, grad: bool) -> Evaluation:
        """Record the failure at ``x`` and return the penalized evaluation."""
        self.failures.append(FailedEvaluation(x=x, message=message))
        return Evaluation(loss=2.0 * self._worst_loss + 1.0,
                          grad=np.zeros(self.size) if grad else None,
                          constraint_jac=np.zeros((0, self.size)) if grad else None)

    def remember(self, x: np.ndarray, loss: float) -> None:
        """Note a successful evaluation's loss (the best point and the penalty's scale)."""
        if not np.isfinite(loss):
            return
        self._worst_loss = max(self._worst_loss, abs(loss))
        if loss < self.best_loss:
            self.best_x, self.best_loss = x, loss


def best_result(result: OptimizeResult, guarded: GuardedProblem) -> OptimizeResult:
    """``result``, or the best point ``guarded`` saw where that is lower (the optimizer
    stopped at a failed point or after a worse one); the message says which and how many
    evaluations failed. Raises :class:`codesign.SimulationError` when every evaluation
    failed."""
    if guarded.best_x is None:
        if not guarded.failures:
            raise SimulationError("no evaluation ran")
        raise SimulationError(f"{guarded.failures[0].message} (every one of the "
                              f"{len(guarded.failures)} evaluations failed; this was the first)")
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


def minimize_guarded(optimizer, problem, x0: np.ndarray, *, max_iterations: int,
                     callback: Callback | None = None) -> OptimizeResult:
    """``optimizer.minimize(problem, x0, ...)`` through a :class:`GuardedProblem` and
    :func:`best_result`, or unguarded for a problem with constraints."""
    if len(getattr(problem, "constraint_lower", ())):
        return optimizer.minimize(problem, x0, max_iterations=max_iterations,
                                  callback=callback)
    guarded = GuardedProblem(problem)
    return best_result(optimizer.minimize(guarded, x0, max_iterations=max_iterations,
                                          callback=callback), guarded)
