"""The interface between rollout problems and optimizers.

Optimizers see a flat vector ``x`` in *scaled* coordinates (each parameter divided by its
``scale``) with box bounds, and call ``evaluate(x)`` for the loss, its gradient, and any
constraint values with their Jacobian, all from one forward and one reverse sweep.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = [
    "Evaluation",
    "IterationInfo",
    "OptimizeResult",
    "ObjectiveFunction",
    "Optimizer",
    "Callback",
]


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """One evaluation of a problem at a point.

    Attributes:
        loss: objective value f(x).
        grad: ∂f/∂x, shape (n,), or ``None`` when not requested.
        constraints: constraint function values, shape (m,).
        constraint_jac: ∂c/∂x, shape (m, n), or ``None``.
    """

    loss: float
    grad: np.ndarray | None = None
    constraints: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    constraint_jac: np.ndarray | None = None


@dataclasses.dataclass(frozen=True)
class IterationInfo:
    """What an optimizer reports after each iteration."""

    iteration: int
    x: np.ndarray
    loss: float
    evaluations: int
    grad_norm: float = float("nan")


Callback = Callable[[IterationInfo], bool | None]
"""Called after every iteration; returning True stops the optimizer."""


@dataclasses.dataclass(frozen=True)
class OptimizeResult:
    """Outcome of an optimization.

    Attributes:
        x: best point found (scaled coordinates).
        loss: its objective value.
        iterations: iterations performed.
        evaluations: problem evaluations performed.
        converged: whether the optimizer's own convergence test passed.
        message: the optimizer's account of why it stopped.
        history: loss after each iteration.
    """

    x: np.ndarray
    loss: float
    iterations: int
    evaluations: int
    converged: bool
    message: str
    history: Sequence[float] = ()


@runtime_checkable
class ObjectiveFunction(Protocol):
    """What optimizers minimize: a loss over a bounded vector, with optional constraints.

    ``constraint_lower <= c(x) <= constraint_upper`` elementwise (equal bounds: equality).
    """

    size: int
    lower: np.ndarray
    upper: np.ndarray
    constraint_lower: np.ndarray
    constraint_upper: np.ndarray

    def evaluate(self, x: np.ndarray, *, grad: bool = True) -> Evaluation:
        """Loss (and gradient, constraints, Jacobian) at ``x``."""
        ...

    def evaluate_many(self, xs: Sequence[np.ndarray], *, grad: bool = False) -> list[Evaluation]:
        """Evaluate a batch (population members) through the problem's executor."""
        ...


@runtime_checkable
class Optimizer(Protocol):
    """Minimizes an :class:`ObjectiveFunction` from a starting point."""

    def minimize(self, function: ObjectiveFunction, x0: np.ndarray, *, max_iterations: int,
                 callback: Callback | None = None) -> OptimizeResult:
        """Run up to ``max_iterations`` iterations; call ``callback`` after each."""
        ...
