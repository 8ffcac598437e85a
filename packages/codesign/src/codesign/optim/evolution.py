"""Gradient-free baselines: CMA-ES and the (1+1)-ES with the 1/5 success rule.

Both work in the problem's scaled coordinates, never ask for gradients, and draw every
random number from ``numpy.random.default_rng(seed)`` in an order that does not depend on
the losses, so the same evaluation results always give the same iterates.

Bounds: candidates are sampled unconstrained and clipped to ``[lower, upper]`` before
evaluation; CMA-ES ranks a candidate by its loss plus ``bound_penalty · ‖y − clip(y)‖²`` so
the search distribution is pulled back inside.

Failed simulations: a candidate whose rollout raises :class:`codesign.SimulationError` (a
step that does not converge, a state that leaves the model's domain) gets an infinite loss
and is ranked last, as a non-finite loss is, instead of ending the search: wide samples
of a contact-rich task hit such states. The result's message counts them and quotes the
first. Only the start of the (1+1)-ES must simulate.
"""

from __future__ import annotations

import math
from typing import Annotated

import numpy as np

from ..limits import MAX_POPULATION
from ..options import Range
from ..simulator import SimulationError
from .base import Callback, IterationInfo, ObjectiveFunction, OptimizeResult

__all__ = ["CMAES", "OnePlusOneES"]


def _finite_or_inf(loss: float) -> float:
    return float(loss) if np.isfinite(loss) else np.inf


def _losses(function: ObjectiveFunction, points: list[np.ndarray], failures: list[str]
            ) -> np.ndarray:
    """Losses of ``points`` (k,), non-finite ones and failed simulations as inf; appends each
    failure's message to ``failures``. A batch with a failure is evaluated again point by
    point (an executor returns all of a batch or raises)."""
    try:
        return np.array([_finite_or_inf(e.loss)
                         for e in function.evaluate_many(points, grad=False)])
    except SimulationError:
        losses = []
        for x in points:
            try:
                losses.append(_finite_or_inf(function.evaluate(x, grad=False).loss))
            except SimulationError as error:
                losses.append(np.inf)
                failures.append(str(error))
        return np.array(losses)


def _with_failures(message: str, failures: list[str], evaluations: int) -> str:
    if not failures:
        return message
    return (f"{message}; {len(failures)} of {evaluations} candidates failed in the simulation "
            f"and were ranked last (first: {failures[0]})")


class CMAES:
    """Covariance matrix adaptation evolution strategy (Hansen, "The CMA Evolution Strategy:
    A Tutorial", 2016): weighted recombination, cumulative step-size adaptation, rank-one and
    rank-μ covariance updates. One iteration is one generation of ``population_size``
    candidates, evaluated together through ``function.evaluate_many`` (the problem's executor).

    Args:
        population_size: λ; 0 chooses Hansen's default ``4 + ⌊3 ln n⌋``.
        sigma0: initial step size σ in scaled coordinates.
        seed: seed of the sampler.
        bound_penalty: weight of the squared distance outside the bounds in the ranking.
        tolerance: stop (converged) when ``σ · √(largest eigenvalue of C)`` falls below this.
    """

    def __init__(self, *, population_size: Annotated[int, Range(0, MAX_POPULATION)] = 0,
                 sigma0: float = 0.3, seed: int = 0,
                 bound_penalty: float = 1.0, tolerance: float = 1e-10):
        if population_size < 0 or population_size == 1:
            raise ValueError(f"CMAES: population_size must be 0 (default) or >= 2, "
                             f"got {population_size}")
        if not sigma0 > 0 or bound_penalty < 0 or tolerance < 0:
            raise ValueError("CMAES: sigma0 > 0, bound_penalty >= 0 and tolerance >= 0 "
                             "are required")
        self.population_size, self.sigma0, self.seed = population_size, sigma0, seed
        self.bound_penalty, self.tolerance = bound_penalty, tolerance

    def minimize(self, function: ObjectiveFunction, x0: np.ndarray, *, max_iterations: int,
                 callback: Callback | None = None) -> OptimizeResult:
        """Run up to ``max_iterations`` generations; returns the best candidate evaluated."""
        lower, upper = np.asarray(function.lower, float), np.asarray(function.upper, float)
        mean = np.clip(np.asarray(x0, dtype=float), lower, upper)
        n = mean.size
        if n == 0:
            raise ValueError("CMAES: the problem has no free parameters")
        rng = np.random.default_rng(self.seed)

        # Strategy parameters, tutorial Table 1 (positive recombination weights only).
        lam = self.population_size or 4 + int(3 * math.log(n))
        mu = lam // 2
        raw = math.log((lam + 1) / 2) - np.log(np.arange(1, mu + 1))
        weights = raw / raw.sum()
        mu_eff = 1.0 / np.sum(weights**2)
        c_sigma = (mu_eff + 2) / (n + mu_eff + 5)
        d_sigma = 1 + 2 * max(0.0, math.sqrt((mu_eff - 1) / (n + 1)) - 1) + c_sigma
        c_c = (4 + mu_eff / n) / (n + 4 + 2 * mu_eff / n)
        c_1 = 2 / ((n + 1.3) ** 2 + mu_eff)
        c_mu = min(1 - c_1, 2 * (mu_eff - 2 + 1 / mu_eff) / ((n + 2) ** 2 + mu_eff))
        chi_n = math.sqrt(n) * (1 - 1 / (4 * n) + 1 / (21 * n**2))  # E‖N(0, I)‖

        sigma = self.sigma0
        p_sigma, p_c = np.zeros(n), np.zeros(n)
        cov, basis, scales = np.eye(n), np.eye(n), np.ones(n)
        best_x, best_loss = mean, np.inf
        history: list[float] = []
        failures: list[str] = []
        evaluations = 0
        converged, message = False, "reached max_iterations"
        for generation in range(1, max_iterations + 1):
            z = rng.standard_normal((lam, n))
            y = (z * scales) @ basis.T  # y_k = B D z_k ~ N(0, C)
            candidates = mean + sigma * y
            clipped = np.clip(candidates, lower, upper)
            losses = _losses(function, list(clipped), failures)
            evaluations += lam
            if not np.any(np.isfinite(losses)):
                failed = f" (a failed simulation: {failures[-1]})" if failures else ""
                raise FloatingPointError("CMAES: every candidate of a generation has a "
                                         "non-finite loss; reduce sigma0 or check the "
                                         f"problem{failed}")
            fitness = losses + self.bound_penalty * np.sum((candidates - clipped) ** 2, axis=1)
            order = np.argsort(fitness, kind="stable")
            winner = int(np.argmin(losses))
            if losses[winner] < best_loss:
                best_x, best_loss = clipped[winner], float(losses[winner])
            history.append(float(losses[winner]))

            # Recombination, cumulation and adaptation (tutorial Eqs. 41-47).
            y_w = weights @ y[order[:mu]]
            mean = mean + sigma * y_w
            c_inv_sqrt_y_w = basis @ ((basis.T @ y_w) / scales)
            p_sigma = ((1 - c_sigma) * p_sigma
                       + math.sqrt(c_sigma * (2 - c_sigma) * mu_eff) * c_inv_sqrt_y_w)
            norm_p_sigma = float(np.linalg.norm(p_sigma))
            h_sigma = float(norm_p_sigma / math.sqrt(1 - (1 - c_sigma) ** (2 * generation))
                            < (1.4 + 2 / (n + 1)) * chi_n)
            p_c = (1 - c_c) * p_c + h_sigma * math.sqrt(c_c * (2 - c_c) * mu_eff) * y_w
            y_mu = y[order[:mu]]
            rank_mu = (y_mu * weights[:, None]).T @ y_mu
            cov = ((1 - c_1 - c_mu + (1 - h_sigma) * c_1 * c_c * (2 - c_c)) * cov
                   + c_1 * np.outer(p_c, p_c) + c_mu * rank_mu)
            cov = 0.5 * (cov + cov.T)
            sigma *= math.exp((c_sigma / d_sigma) * (norm_p_sigma / chi_n - 1))
            eigenvalues, basis = np.linalg.eigh(cov)
            scales = np.sqrt(np.maximum(eigenvalues, 1e-300))

            info = IterationInfo(iteration=generation, x=clipped[winner],
                                 loss=float(losses[winner]), evaluations=evaluations)
            stop = callback is not None and bool(callback(info))
            if sigma * float(scales.max()) < self.tolerance:
                converged, message = True, "step size below tolerance"
                break
            if stop:
                message = "stopped by callback"
                break
        return OptimizeResult(x=best_x, loss=float(best_loss), iterations=len(history),
                              evaluations=evaluations, converged=converged,
                              message=_with_failures(message, failures, evaluations),
                              history=history)


class OnePlusOneES:
    """(1+1) evolution strategy with Rechenberg's 1/5 success rule.

    Each iteration draws one child ``x + σ N(0, I)`` (clipped to the bounds) and keeps it when
    its loss is no worse than the parent's. σ grows by ``exp(1/3)`` after a success and
    shrinks by ``exp(-1/12)`` after a failure, which holds still at a success rate of 1/5.

    Args:
        sigma0: initial step size in scaled coordinates.
        seed: seed of the sampler.
        tolerance: stop (converged) when σ falls below this.
    """

    def __init__(self, *, sigma0: float = 0.3, seed: int = 0, tolerance: float = 1e-10):
        if not sigma0 > 0 or tolerance < 0:
            raise ValueError("OnePlusOneES: sigma0 > 0 and tolerance >= 0 are required")
        self.sigma0, self.seed, self.tolerance = sigma0, seed, tolerance

    def minimize(self, function: ObjectiveFunction, x0: np.ndarray, *, max_iterations: int,
                 callback: Callback | None = None) -> OptimizeResult:
        """Run up to ``max_iterations`` iterations (one evaluation each, plus one at x0)."""
        lower, upper = np.asarray(function.lower, float), np.asarray(function.upper, float)
        parent = np.clip(np.asarray(x0, dtype=float), lower, upper)
        parent_loss = _finite_or_inf(function.evaluate(parent, grad=False).loss)
        rng = np.random.default_rng(self.seed)
        sigma = self.sigma0
        history: list[float] = []
        failures: list[str] = []
        converged, message = False, "reached max_iterations"
        for iteration in range(1, max_iterations + 1):
            child = np.clip(parent + sigma * rng.standard_normal(parent.size), lower, upper)
            child_loss = _losses(function, [child], failures)[0]
            if child_loss <= parent_loss:
                parent, parent_loss = child, child_loss
                sigma *= math.exp(1.0 / 3.0)
            else:
                sigma *= math.exp(-1.0 / 12.0)
            history.append(parent_loss)
            info = IterationInfo(iteration=iteration, x=parent, loss=parent_loss,
                                 evaluations=iteration + 1)
            stop = callback is not None and bool(callback(info))
            if sigma < self.tolerance:
                converged, message = True, "step size below tolerance"
                break
            if stop:
                message = "stopped by callback"
                break
        return OptimizeResult(x=parent, loss=float(parent_loss), iterations=len(history),
                              evaluations=len(history) + 1, converged=converged,
                              message=_with_failures(message, failures, len(history) + 1),
                              history=history)
