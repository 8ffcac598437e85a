"""Observers ``o = observe(s, θ)`` with VJPs; the core's own are simulator-agnostic.

``observe_vjp`` returns ``(∂L/∂s, ∂L/∂θ)``; either may be ``None`` for zero.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .backend import to_host
from .tree import tree_zeros_with

__all__ = ["Observer", "NullObserver", "StateFieldObserver"]


@runtime_checkable
class Observer(Protocol):
    """Reads a 1-D observation of length ``size`` from a state."""

    size: int

    def observe(self, state, design: dict[str, Any]) -> np.ndarray:
        """Observation, shape (size,), as a NumPy array."""
        ...

    def observe_vjp(self, state, design, g_observation) -> tuple[Any, dict | None]:
        """(∂L/∂s or None, ∂L/∂θ or None) given ∂L/∂o."""
        ...


class NullObserver:
    """No observation (open-loop control): size 0."""

    size = 0

    def __init__(self, *, simulator=None):
        self._empty = np.zeros(0)

    def observe(self, state, design):
        return self._empty

    def observe_vjp(self, state, design, g_observation):
        return None, None


class StateFieldObserver:
    """Concatenates named state fields, flattened, e.g. ``fields=["joint_q", "joint_qd"]``."""

    def __init__(self, *, simulator, fields: list[str]):
        if not fields:
            raise ValueError("StateFieldObserver needs at least one field name")
        state = simulator.initial_state(simulator.design_space().defaults())
        names = [f.name for f in dataclasses.fields(state)]
        unknown = [f for f in fields if f not in names]
        if unknown:
            raise ValueError(f"unknown state field(s) {unknown}; the state has {names}")
        self.fields = list(fields)
        self._shapes = [np.shape(getattr(state, f)) for f in fields]
        self.size = int(sum(np.prod(s, dtype=np.int64) for s in self._shapes))

    def observe(self, state, design):
        return np.concatenate([to_host(getattr(state, f)).reshape(-1) for f in self.fields])

    def observe_vjp(self, state, design, g_observation):
        offset, changes = 0, {}
        for field, shape in zip(self.fields, self._shapes, strict=True):
            n = int(np.prod(shape, dtype=np.int64))
            changes[field] = np.reshape(g_observation[offset : offset + n], shape)
            offset += n
        return tree_zeros_with(state, **changes), None
