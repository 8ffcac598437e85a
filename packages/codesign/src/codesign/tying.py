"""Tied design parameters: a simulator seen through fewer, shared parameters.

A simulator's design space often holds per-entity fields (a Young's modulus per particle, a
stiffness per joint); identifying them from a few trajectories, or designing one body's
material, needs a handful of shared values instead. :class:`TiedSimulator` wraps a simulator
and exposes each :class:`Tie` as one value shared by every entry of a wrapped parameter
(shape ``()``) or one value per group of entries (shape ``(k,)``); every other parameter
passes through. A *start* may replace the initial state by one that depends on design
parameters of its own (a fitted start pose per recording): an object with ``parameters``
(the :class:`~codesign.design.Parameter` it adds), ``state(design)`` and
``state_vjp(design, g_state) -> dict`` (∂L/∂its parameters).

The expansion θ_entry = θ_tied[group_of(entry)] is linear, so its VJP sums the per-entry
gradients of each group: ∂L/∂θ_tied[j] = Σ_{i in group j} ∂L/∂θ_entry[i].
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .design import DesignSpace, Parameter

__all__ = ["Tie", "TiedSimulator"]


@dataclasses.dataclass(frozen=True)
class Tie:
    """One parameter of the wrapped simulator exposed as shared values.

    Attributes:
        source: the wrapped parameter, e.g. ``"particle.youngs_modulus"``.
        name: the exposed parameter (default: ``source``); it takes the source's place.
        groups: a group label per entry of ``source`` (flattened); the exposed parameter
            has one value per label present, in ascending order, shape (k,). ``None``: one
            scalar for every entry, shape ().
        entity: what one exposed value describes (e.g. ``"particle_group"``), or ``None``.
    """

    source: str
    name: str = ""
    groups: Any = None
    entity: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "name", self.name or self.source)


class _Grouping:
    """The index of one tie: entry i of the source takes exposed value ``index[i]``."""

    def __init__(self, tie: Tie, parameter: Parameter):
        size = int(np.prod(parameter.shape))
        groups = np.zeros(size) if tie.groups is None else np.asarray(tie.groups).reshape(-1)
        if groups.shape != (size,):
            raise ValueError(f"tie of {tie.source!r}: groups has {groups.size} labels for "
                             f"{size} entries")
        present, self.index = np.unique(groups, return_inverse=True)
        self.labels = present.tolist()
        self.shape = () if tie.groups is None else (len(present),)
        self.source, self.source_shape = tie.source, parameter.shape

    def expand(self, value) -> np.ndarray:
        """Exposed values spread over the source's entries, shape of the source."""
        return np.asarray(value, dtype=np.float64).reshape(-1)[self.index].reshape(
            self.source_shape)

    def reduce(self, gradient) -> np.ndarray:
        """Per-entry gradients summed per group (the VJP of :meth:`expand`)."""
        weights = np.asarray(gradient, dtype=np.float64).reshape(-1)
        return np.bincount(self.index, weights=weights, minlength=len(self.labels)).reshape(
            self.shape)


class TiedSimulator:
    """A simulator with some design parameters tied and, optionally, a parametrized start.

    An exposed parameter's default is the mean of the wrapped defaults over each group; its
    bounds are the tightest of the wrapped bounds (so every entry stays inside its own), its
    unit and scale are the wrapped ones.

    Args:
        inner: the wrapped simulator.
        ties: the parameters to tie.
        start: the initial state and its parameters (default: the wrapped initial state).
    """

    def __init__(self, inner, *, ties: Sequence[Tie] = (), start=None):
        self.inner, self.start = inner, start
        self.action_size = inner.action_size
        base = inner.design_space()
        self.groupings = {tie.name: _Grouping(tie, base[tie.source]) for tie in ties}
        exposed = {tie.source: self._tied_parameter(tie, base[tie.source]) for tie in ties}
        parameters = [exposed.get(p.name, p) for p in base]
        self._start_names = tuple(p.name for p in start.parameters) if start else ()
        self._space = DesignSpace([*parameters, *(start.parameters if start else ())])

    def _tied_parameter(self, tie: Tie, p: Parameter) -> Parameter:
        grouping = self.groupings[tie.name]
        shared = (f"one value per {tie.entity}" if tie.entity
                  else f"one value for every {p.entity or 'entry'}")
        sizes = grouping.reduce(np.ones(p.shape))
        return p.replace(name=tie.name, shape=grouping.shape,
                         default=grouping.reduce(p.default_array()) / sizes,
                         lower=float(np.max(p.lower_array())),
                         upper=float(np.min(p.upper_array())), entity=tie.entity,
                         doc=f"{p.doc} ({shared})")

    @property
    def model(self):
        """The wrapped simulator's model (for simulators that have one)."""
        return self.inner.model

    def design_space(self) -> DesignSpace:
        """The wrapped space with tied parameters exposed, then the start's parameters."""
        return self._space

    def expand(self, design: Mapping[str, Any]) -> dict:
        """The wrapped simulator's design: tied values spread over their entries (absent
        ones take their defaults), the start's parameters left out."""
        out = {k: v for k, v in design.items()
               if k not in self.groupings and k not in self._start_names}
        for name, grouping in self.groupings.items():
            value = np.asarray(design[name] if name in design
                               else self._space[name].default_array(), dtype=np.float64)
            if value.shape != grouping.shape:
                raise ValueError(f"{name} must have shape {grouping.shape} (one value per tie), "
                                 f"got {value.shape}")
            out[grouping.source] = grouping.expand(value)
        return out

    def reduce_gradient(self, g_design: Mapping[str, Any] | None) -> dict:
        """Wrapped design gradients with per-entry ones summed per tie (the VJP of
        :meth:`expand`)."""
        g_design = g_design or {}
        sources = {grouping.source for grouping in self.groupings.values()}
        out = {k: v for k, v in g_design.items() if k not in sources}
        for name, grouping in self.groupings.items():
            if g_design.get(grouping.source) is not None:
                out[name] = grouping.reduce(g_design[grouping.source])
        return out

    def initial_state(self, design):
        """The start's state, or the wrapped initial state of the expanded design."""
        if self.start is not None:
            return self.start.state(design)
        return self.inner.initial_state(self.expand(design))

    def initial_state_vjp(self, design, g_state) -> dict:
        """∂L/∂design through the initial state (tied gradients summed)."""
        if self.start is not None:
            return self.start.state_vjp(design, g_state)
        return self.pull_back(self.inner.initial_state_vjp(self.expand(design), g_state),
                              design)

    def step(self, state, action, design, dt: float):
        """One step of the wrapped simulator with the expanded design; pure."""
        return self.inner.step(state, action, self.expand(design), dt)

    def step_vjp(self, state, action, design, dt: float, g_next):
        """(∂L/∂state, ∂L/∂action, ∂L/∂design) with tied gradients summed per tie."""
        g_state, g_action, g_design = self.inner.step_vjp(state, action, self.expand(design),
                                                          dt, g_next)
        return g_state, g_action, self.pull_back(g_design, design)

    def pull_back(self, g_design, design) -> dict:
        """∂L/∂design from the wrapped simulator's ∂L/∂(expanded design) at ``design``: the
        VJP of :meth:`expand` (here :meth:`reduce_gradient`; a nonlinear expansion needs
        ``design``)."""
        return self.reduce_gradient(g_design)

    # many steps in one call (codesign.simulator's optional hooks): offered exactly when the
    # wrapped simulator offers them, so a property that raises AttributeError otherwise

    @property
    def simulate(self):
        """The wrapped simulator's ``simulate`` on the expanded design."""
        inner = getattr(self.inner, "simulate", None)
        if inner is None:
            raise AttributeError(f"{type(self.inner).__name__} has no simulate")

        def simulate(state, actions, design, dt: float):
            return inner(state, actions, self.expand(design), dt)
        return simulate

    @property
    def simulate_vjp(self):
        """The wrapped simulator's ``simulate_vjp`` with the design gradient pulled back."""
        inner = getattr(self.inner, "simulate_vjp", None)
        if inner is None:
            raise AttributeError(f"{type(self.inner).__name__} has no simulate_vjp")

        def simulate_vjp(trajectory, actions, design, dt: float, g_states):
            g_start, g_actions, g_design = inner(trajectory, actions, self.expand(design), dt,
                                                 g_states)
            return g_start, g_actions, self.pull_back(g_design, design)
        return simulate_vjp

    # the optional hooks (codesign.simulator.OPTIONAL_HOOKS): a check the inner lacks passes

    def check_time_step(self, design, dt: float) -> None:
        """The wrapped simulator's time-step check on the expanded design."""
        check = getattr(self.inner, "check_time_step", None)
        if check is not None:
            check(self.expand(design), dt)

    def check_state(self, state, step_index: int) -> None:
        """The wrapped simulator's state check."""
        check = getattr(self.inner, "check_state", None)
        if check is not None:
            check(state, step_index)

    def render(self, state, design, *, width: int, height: int, action=None) -> np.ndarray:
        """The wrapped simulator's video frame, uint8 (height, width, 3)."""
        return self.inner.render(state, self.expand(design), width=width, height=height,
                                 action=action)

    def render_sequence(self, states, design, *, width: int, height: int, actions) -> list:
        """The wrapped simulator's frames of a motion (its ``render_sequence``, else its
        ``render`` per state)."""
        inner = self.expand(design)
        sequence = getattr(self.inner, "render_sequence", None)
        if sequence is not None:
            return sequence(states, inner, width=width, height=height, actions=actions)
        return [self.inner.render(state, inner, width=width, height=height, action=action)
                for state, action in zip(states, actions, strict=True)]
