"""Optimizers over a problem's scaled parameter vector, all behind one interface.

Gradient-based: :class:`Adam` (projected, with bounds), :class:`LBFGSB`; constrained:
:class:`SLSQP`, :class:`TrustConstr`; gradient-free baselines: :class:`CMAES`,
:class:`OnePlusOneES`. Every optimizer is deterministic given its options and the
evaluation results, and calls the callback after every iteration.
"""

from .adam import Adam, AdamState
from .base import (
    Callback,
    Evaluation,
    IterationInfo,
    ObjectiveFunction,
    Optimizer,
    OptimizeResult,
)
from .evolution import CMAES, OnePlusOneES
from .scipy_optimizers import LBFGSB, SLSQP, EvaluationCache, TrustConstr

__all__ = [
    "CMAES",
    "LBFGSB",
    "SLSQP",
    "Adam",
    "AdamState",
    "Callback",
    "Evaluation",
    "EvaluationCache",
    "IterationInfo",
    "ObjectiveFunction",
    "OnePlusOneES",
    "OptimizeResult",
    "Optimizer",
    "TrustConstr",
]
