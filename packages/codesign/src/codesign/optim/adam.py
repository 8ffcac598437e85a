"""Projected Adam: Adam steps (Kingma & Ba 2015) followed by projection onto box bounds."""

from __future__ import annotations

import dataclasses

import numpy as np

from .base import Callback, IterationInfo, ObjectiveFunction, OptimizeResult

__all__ = ["Adam", "AdamState"]


@dataclasses.dataclass(frozen=True)
class AdamState:
    """Adam's moment estimates after ``step`` updates.

    Attributes:
        first_moment: running mean of gradients m, shape (n,).
        second_moment: running mean of squared gradients v, shape (n,).
        step: number of updates taken so far t.
    """

    first_moment: np.ndarray
    second_moment: np.ndarray
    step: int = 0


class Adam:
    """Projected Adam with bounds; keeps the best point evaluated.

    Each iteration evaluates the loss and gradient at ``x_t`` (one forward + reverse sweep),
    takes the bias-corrected Adam step and clips to ``[lower, upper]``.

    Args:
        learning_rate: step size α in scaled coordinates.
        beta1, beta2: decay rates of the first and second moment estimates.
        eps: ε added to √v̂ to avoid division by zero.
        learning_rate_decay: α is multiplied by this factor after every step (1: constant).
        gradient_tolerance: stop (converged) when the projected gradient's ∞-norm is at most
            this; 0 never stops early.
    """

    def __init__(
        self,
        *,
        learning_rate: float = 0.01,
        beta1: float = 0.9,
        beta2: float = 0.999,
        eps: float = 1e-8,
        learning_rate_decay: float = 1.0,
        gradient_tolerance: float = 0.0,
    ):
        if not learning_rate > 0:
            raise ValueError(f"Adam: learning_rate must be positive, got {learning_rate}")
        if not (0 <= beta1 < 1 and 0 <= beta2 < 1):
            raise ValueError(f"Adam: beta1 and beta2 must lie in [0, 1), got {beta1}, {beta2}")
        if not eps > 0 or not 0 < learning_rate_decay <= 1 or gradient_tolerance < 0:
            raise ValueError("Adam: eps > 0, 0 < learning_rate_decay <= 1 and "
                             "gradient_tolerance >= 0 are required")
        self.learning_rate, self.beta1, self.beta2, self.eps = learning_rate, beta1, beta2, eps
        self.learning_rate_decay = learning_rate_decay
        self.gradient_tolerance = gradient_tolerance

    @staticmethod
    def init_state(size: int) -> AdamState:
        """Zero moments for a vector of ``size`` entries."""
        return AdamState(first_moment=np.zeros(size), second_moment=np.zeros(size))

    def step(self, x: np.ndarray, grad: np.ndarray, state: AdamState, lower: np.ndarray,
             upper: np.ndarray) -> tuple[np.ndarray, AdamState]:
        """One projected Adam update: returns ``(x_next, state_next)``; pure."""
        grad = np.asarray(grad, dtype=float)
        if not np.all(np.isfinite(grad)):
            raise FloatingPointError("Adam: the gradient has NaN or inf entries; the rollout "
                                     "diverged or a VJP is wrong (check with codesign.testing)")
        t = state.step + 1
        m = self.beta1 * state.first_moment + (1.0 - self.beta1) * grad
        v = self.beta2 * state.second_moment + (1.0 - self.beta2) * grad * grad
        m_hat = m / (1.0 - self.beta1**t)
        v_hat = v / (1.0 - self.beta2**t)
        rate = self.learning_rate * self.learning_rate_decay ** state.step
        x_next = np.clip(x - rate * m_hat / (np.sqrt(v_hat) + self.eps), lower, upper)
        return x_next, AdamState(first_moment=m, second_moment=v, step=t)

    def minimize(self, function: ObjectiveFunction, x0: np.ndarray, *, max_iterations: int,
                 callback: Callback | None = None) -> OptimizeResult:
        """Run up to ``max_iterations`` Adam steps; returns the best point evaluated."""
        lower, upper = np.asarray(function.lower, float), np.asarray(function.upper, float)
        x = np.clip(np.asarray(x0, dtype=float), lower, upper)
        state = self.init_state(x.size)
        best_x, best_loss = x, np.inf
        history: list[float] = []
        converged, message = False, "reached max_iterations"
        for iteration in range(1, max_iterations + 1):
            evaluation = function.evaluate(x, grad=True)
            if evaluation.loss < best_loss:
                best_x, best_loss = x, evaluation.loss
            history.append(evaluation.loss)
            projected = x - np.clip(x - evaluation.grad, lower, upper)
            grad_norm = float(np.max(np.abs(projected), initial=0.0))
            info = IterationInfo(iteration=iteration, x=x, loss=evaluation.loss,
                                 evaluations=iteration, grad_norm=grad_norm)
            converged = grad_norm <= self.gradient_tolerance
            if not converged:
                x, state = self.step(x, evaluation.grad, state, lower, upper)
            stop = callback is not None and bool(callback(info))
            if converged:
                message = "projected gradient below gradient_tolerance"
                break
            if stop:
                message = "stopped by callback"
                break
        return OptimizeResult(x=best_x, loss=float(best_loss), iterations=len(history),
                              evaluations=len(history), converged=converged, message=message,
                              history=history)
