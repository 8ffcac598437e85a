"""Objective terms with gradients, and the weighted sums (objectives, constraints) built from them.

A term is evaluated by the rollout at control steps:

- ``kind = "running"``: h(s_t, a_t) at t = 0 … T-1 (with the action),
- ``kind = "final"``: g(s_T, θ) once at the end (action ``None``),
- ``kind = "trajectory"``: at every state t = 0 … T (action ``None`` at T).

``grad`` returns ``(∂/∂s or None, ∂/∂a or None, ∂/∂θ dict or None)``; ``None`` means zero.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "Term",
    "WeightedTerm",
    "Objective",
    "Constraint",
    "ActionL2",
    "ParameterRegularizer",
    "TrajectoryTracking",
    "TERM_KINDS",
]

TERM_KINDS = ("running", "final", "trajectory")


@runtime_checkable
class Term(Protocol):
    """One differentiable contribution to an objective."""

    kind: str

    def value(self, state, action, design: dict[str, Any], control_step: int) -> float:
        """Scalar value of the term at this control step."""
        ...

    def grad(self, state, action, design, control_step) -> tuple[Any, Any, dict | None]:
        """(∂/∂s, ∂/∂a, ∂/∂θ) of ``value``; ``None`` entries are zero."""
        ...


@dataclasses.dataclass(frozen=True)
class WeightedTerm:
    """A term with its weight and the name it was configured under."""

    term: Any
    weight: float = 1.0
    name: str = ""


@dataclasses.dataclass(frozen=True)
class Objective:
    """``f = Σ_i weight_i · term_i`` accumulated over a rollout (ChainQueen Eq. 1)."""

    terms: tuple[WeightedTerm, ...]

    def __post_init__(self):
        object.__setattr__(self, "terms", tuple(self.terms))
        for wt in self.terms:
            if getattr(wt.term, "kind", None) not in TERM_KINDS:
                raise ValueError(
                    f"term {wt.name or wt.term!r} has kind {getattr(wt.term, 'kind', None)!r}; "
                    f"it must be one of {TERM_KINDS}"
                )
            if not np.isfinite(wt.weight):
                raise ValueError(f"term {wt.name!r} has a non-finite weight {wt.weight}")

    @classmethod
    def of(cls, *terms, weights: Sequence[float] | None = None) -> Objective:
        """Build from bare terms (weights default to 1)."""
        weights = weights or [1.0] * len(terms)
        return cls(tuple(WeightedTerm(t, float(w)) for t, w in zip(terms, weights, strict=True)))


@dataclasses.dataclass(frozen=True)
class Constraint:
    """A rollout constraint ``lower <= f <= upper`` on an objective ``f``.

    ``lower == upper`` is an equality. Either bound may be infinite.
    """

    objective: Objective
    lower: float = -np.inf
    upper: float = np.inf
    name: str = ""

    def __post_init__(self):
        if not (self.lower <= self.upper):
            raise ValueError(f"constraint {self.name!r}: lower {self.lower} > upper {self.upper}")
        if not (np.isfinite(self.lower) or np.isfinite(self.upper)):
            raise ValueError(f"constraint {self.name!r} needs a finite lower or upper bound")


class ActionL2:
    """Running actuation cost ``Σ_j a_j²``."""

    kind = "running"

    def __init__(self, *, simulator=None):
        pass

    def value(self, state, action, design, control_step):
        return float(np.dot(action, action))

    def grad(self, state, action, design, control_step):
        return None, 2.0 * np.asarray(action), None


class ParameterRegularizer:
    """Final term ``Σ ((θ - θ_ref) / scale)²`` over chosen design parameters.

    ``reference`` defaults to each parameter's default; ``scale`` to each parameter's scale.
    """

    kind = "final"

    def __init__(self, *, simulator, names: list[str] | None = None,
                 reference: dict[str, Any] | None = None):
        space = simulator.design_space()
        self.names = list(names) if names is not None else space.names
        for name in self.names:
            space[name]  # unknown names raise a DesignError listing the known ones
        reference = reference or {}
        self.reference = {n: np.asarray(reference.get(n, space[n].default_array()), float)
                          for n in self.names}
        self.scale = {n: space[n].scale for n in self.names}

    def value(self, state, action, design, control_step):
        return float(sum(np.sum(((design[n] - self.reference[n]) / self.scale[n]) ** 2)
                         for n in self.names))

    def grad(self, state, action, design, control_step):
        g = {n: 2.0 * (design[n] - self.reference[n]) / self.scale[n] ** 2 for n in self.names}
        return None, None, g


class TrajectoryTracking:
    """``Σ_t w_t ‖obs(s_t) − y_t‖²`` through a measurement map (an observer).

    Args:
        observer: measurement map with ``observe`` / ``observe_vjp``.
        targets: recorded measurements, shape (T + 1, observer.size), one row per control
            step; rows that are all NaN are skipped (missing frames).
        weights: per-step weights, shape (T + 1,); defaults to ``1 / (number of rows)``.
    """

    kind = "trajectory"

    def __init__(self, *, observer, targets, weights=None):
        self.observer = observer
        self.targets = np.asarray(targets, dtype=np.float64)
        if self.targets.ndim != 2 or self.targets.shape[1] != observer.size:
            raise ValueError(
                f"tracking targets must have shape (steps + 1, {observer.size}), "
                f"got {self.targets.shape}"
            )
        present = ~np.all(np.isnan(self.targets), axis=1)
        if weights is None:
            weights = present / max(1, int(present.sum()))
        self.weights = np.where(present, np.asarray(weights, dtype=np.float64), 0.0)

    def _residual(self, state, design, control_step):
        if control_step >= len(self.targets) or self.weights[control_step] == 0.0:
            return None
        residual = self.observer.observe(state, design) - self.targets[control_step]
        return np.nan_to_num(residual)  # NaN entries inside a frame are missing points

    def value(self, state, action, design, control_step):
        r = self._residual(state, design, control_step)
        return 0.0 if r is None else float(self.weights[control_step] * np.dot(r, r))

    def residuals(self, states, design) -> np.ndarray:
        """The weighted residuals ``√w_t (obs(s_t) − y_t)`` of the rows with weight, one
        after another (missing points 0), so that their squares sum to the term's value over
        ``states`` (s_0 … s_T, one per control step)."""
        rows = [np.sqrt(self.weights[t]) * r for t, state in enumerate(states)
                if (r := self._residual(state, design, t)) is not None]
        return np.concatenate(rows) if rows else np.zeros(0)

    def grad(self, state, action, design, control_step):
        r = self._residual(state, design, control_step)
        if r is None:
            return None, None, None
        g_obs = 2.0 * self.weights[control_step] * r
        g_state, g_design = self.observer.observe_vjp(state, design, g_obs)
        return g_state, None, g_design
