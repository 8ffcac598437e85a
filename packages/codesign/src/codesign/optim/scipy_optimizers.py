"""SciPy's gradient-based optimizers behind the :class:`~codesign.optim.base.Optimizer` interface.

SciPy asks for the loss, its gradient and each constraint's value and Jacobian through
separate calls. One :meth:`ObjectiveFunction.evaluate` returns all of them from a single
forward and reverse sweep, so the adapters cache evaluations by ``x``: every distinct point
costs one sweep however many pieces SciPy asks for.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np

from .base import Callback, Evaluation, IterationInfo, ObjectiveFunction, OptimizeResult

if TYPE_CHECKING:
    import scipy.optimize

__all__ = ["LBFGSB", "SLSQP", "TrustConstr", "EvaluationCache"]


class EvaluationCache:
    """Evaluations of ``function`` (with gradients) keyed by the exact bytes of ``x``.

    Args:
        function: the problem.
        size: how many recent points to keep; SciPy revisits only the last few.
    """

    def __init__(self, function: ObjectiveFunction, *, size: int = 8):
        self.function, self.size = function, size
        self.evaluations = 0
        self._store: OrderedDict[bytes, Evaluation] = OrderedDict()

    def __call__(self, x: np.ndarray) -> Evaluation:
        """The evaluation at ``x``, computed once."""
        x = np.asarray(x, dtype=float)
        key = x.tobytes()
        if key in self._store:
            self._store.move_to_end(key)
            return self._store[key]
        evaluation = self.function.evaluate(x.copy(), grad=True)
        self.evaluations += 1
        self._store[key] = evaluation
        if len(self._store) > self.size:
            self._store.popitem(last=False)
        return evaluation

    def loss(self, x: np.ndarray) -> float:
        """f(x)."""
        return float(self(x).loss)

    def grad(self, x: np.ndarray) -> np.ndarray:
        """∂f/∂x."""
        return np.asarray(self(x).grad, dtype=float)

    def constraints(self, x: np.ndarray) -> np.ndarray:
        """c(x), shape (m,)."""
        return np.asarray(self(x).constraints, dtype=float)

    def constraint_jac(self, x: np.ndarray) -> np.ndarray:
        """∂c/∂x, shape (m, n)."""
        return np.asarray(self(x).constraint_jac, dtype=float).reshape(-1, np.size(x))


class _Stop(Exception):
    """Raised inside SciPy's callback to end the run (the callback asked, or max_iterations)."""


def _scipy_optimize():
    """scipy.optimize, imported on first use: it takes half a second, which a run with
    another optimizer need not pay before its first iteration."""
    import scipy.optimize

    return scipy.optimize


def _bounds(function: ObjectiveFunction) -> scipy.optimize.Bounds:
    return _scipy_optimize().Bounds(np.asarray(function.lower, float),
                                 np.asarray(function.upper, float))


class _ScipyOptimizer:
    """Shared driver: evaluation cache, per-iteration callback, stopping and the result."""

    method = ""

    def _options(self) -> dict:
        return {}

    def _constraints(self, function: ObjectiveFunction, cache: EvaluationCache):
        return ()

    def _extra(self) -> dict:
        return {}

    def minimize(self, function: ObjectiveFunction, x0: np.ndarray, *, max_iterations: int,
                 callback: Callback | None = None) -> OptimizeResult:
        """Run SciPy's method for up to ``max_iterations`` iterations."""
        cache = EvaluationCache(function)
        lower, upper = np.asarray(function.lower, float), np.asarray(function.upper, float)
        x_start = np.clip(np.asarray(x0, dtype=float), lower, upper)
        history: list[float] = []
        last = {"x": x_start}

        def on_iteration(xk, *_):
            xk = np.clip(np.array(xk, dtype=float), lower, upper)
            evaluation = cache(xk)
            history.append(float(evaluation.loss))
            last["x"] = xk
            info = IterationInfo(iteration=len(history), x=xk, loss=float(evaluation.loss),
                                 evaluations=cache.evaluations,
                                 grad_norm=float(np.linalg.norm(evaluation.grad)))
            if callback is not None and callback(info):
                raise _Stop("stopped by callback")
            if len(history) >= max_iterations:
                raise _Stop("reached max_iterations")

        if max_iterations < 1:
            raise ValueError(f"max_iterations must be >= 1, got {max_iterations}")
        try:
            result = _scipy_optimize().minimize(
                cache.loss, x_start, jac=cache.grad, method=self.method,
                bounds=_bounds(function), constraints=self._constraints(function, cache),
                callback=on_iteration, options={"maxiter": max_iterations, **self._options()},
                **self._extra())
        except _Stop as stop:
            converged, message, x = False, str(stop), last["x"]
        else:
            converged, message = bool(result.success), str(result.message)
            x = np.clip(np.asarray(result.x, dtype=float), lower, upper)
        return OptimizeResult(x=x, loss=cache.loss(x), iterations=len(history),
                              evaluations=cache.evaluations, converged=converged,
                              message=message, history=history)


class LBFGSB(_ScipyOptimizer):
    """SciPy L-BFGS-B: quasi-Newton with box bounds (Byrd, Lu, Nocedal & Zhu 1995).

    Args:
        memory: number of correction pairs kept (``maxcor``).
        function_tolerance: stop when the relative loss reduction falls below this (``ftol``).
        gradient_tolerance: stop when the projected gradient's ∞-norm is at most this (``gtol``).
    """

    method = "L-BFGS-B"

    def __init__(self, *, memory: int = 10, function_tolerance: float = 1e-12,
                 gradient_tolerance: float = 1e-8):
        if memory < 1 or function_tolerance < 0 or gradient_tolerance < 0:
            raise ValueError("LBFGSB: memory >= 1 and non-negative tolerances are required")
        self.memory = memory
        self.function_tolerance, self.gradient_tolerance = function_tolerance, gradient_tolerance

    def _options(self) -> dict:
        return {"maxcor": self.memory, "ftol": self.function_tolerance,
                "gtol": self.gradient_tolerance}


class SLSQP(_ScipyOptimizer):
    """SciPy SLSQP: sequential least squares QP with equality and inequality constraints.

    Constraints come from the problem: ``constraint_lower <= c(x) <= constraint_upper``,
    equal bounds meaning equality.

    Args:
        tolerance: SLSQP's accuracy goal on the loss and constraints (``ftol``).
    """

    method = "SLSQP"

    def __init__(self, *, tolerance: float = 1e-10):
        if not tolerance > 0:
            raise ValueError(f"SLSQP: tolerance must be positive, got {tolerance}")
        self.tolerance = tolerance

    def _options(self) -> dict:
        return {"ftol": self.tolerance}

    def _constraints(self, function, cache):
        low = np.asarray(function.constraint_lower, float)
        high = np.asarray(function.constraint_upper, float)

        def rows(kind, mask, sign, bound):  # SLSQP's form: sign (c - bound) = 0 (eq) or >= 0
            i = np.flatnonzero(mask)
            return [{"type": kind, "fun": lambda x: sign * (cache.constraints(x)[i] - bound[i]),
                     "jac": lambda x: sign * cache.constraint_jac(x)[i]}] if i.size else []

        ranged = low != high
        return [*rows("eq", ~ranged, 1.0, low), *rows("ineq", ranged & np.isfinite(low), 1.0, low),
                *rows("ineq", ranged & np.isfinite(high), -1.0, high)]


class TrustConstr(_ScipyOptimizer):
    """SciPy trust-constr: trust-region SQP / interior point with BFGS Hessian approximations.

    Args:
        gradient_tolerance: stop when the Lagrangian gradient's ∞-norm is at most this.
        constraint_tolerance: largest accepted constraint violation at convergence.
        step_tolerance: stop when the trust radius falls below this (``xtol``).
    """

    method = "trust-constr"

    def __init__(self, *, gradient_tolerance: float = 1e-10, constraint_tolerance: float = 1e-10,
                 step_tolerance: float = 1e-12):
        if min(gradient_tolerance, constraint_tolerance, step_tolerance) <= 0:
            raise ValueError("TrustConstr: tolerances must be positive")
        self.gradient_tolerance = gradient_tolerance
        self.constraint_tolerance = constraint_tolerance
        self.step_tolerance = step_tolerance

    def _options(self) -> dict:
        return {"gtol": self.gradient_tolerance, "barrier_tol": self.constraint_tolerance,
                "xtol": self.step_tolerance}

    def _extra(self) -> dict:
        return {"hess": _scipy_optimize().BFGS()}

    def _constraints(self, function, cache):
        low = np.asarray(function.constraint_lower, float)
        if low.size == 0:
            return ()
        optimize = _scipy_optimize()
        return [optimize.NonlinearConstraint(
            cache.constraints, low, np.asarray(function.constraint_upper, float),
            jac=cache.constraint_jac, hess=optimize.BFGS())]
