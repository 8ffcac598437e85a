"""The simulator contract every plugin implements.

A simulator is a differentiable discrete-time system ``s' = step(s, a, θ, dt)``. The core
owns time (control steps, substeps, checkpointing); a simulator supplies one step forward
and back, plus the initial state and its VJP.

States are frozen dataclasses of arrays (see :mod:`codesign.tree`); actions are 1-D float
arrays of length ``action_size``; designs are dicts ``name -> array`` described by
``design_space()``. Gradient dicts may omit parameters whose gradient is zero.

Optional methods the core uses when present:

- ``check_time_step(design, dt)``: raise :class:`UnstableTimeStepError` for an unstable ``dt``.
- ``check_state(state, step_index)``: raise :class:`SimulationError` for a diverged state.
- ``render(state, design, *, width, height, action=None) -> uint8 array (height, width,
  3)``: one video frame; ``action`` is the action applied from this state on (None for the
  final state), for drawing actuation.
- ``render_sequence(states, design, *, width, height, actions) -> list of such frames``: a
  whole motion's frames at once (``actions`` as above, one per state), for a simulator that
  draws history (a trace); the core uses it in place of ``render`` when present.

Many steps in one call, for simulators whose states are small enough to keep every one
(the core then holds the whole trajectory instead of √N checkpoints, and calls the pair
below in place of ``step`` and ``step_vjp`` for open-loop rollouts):

- ``simulate(state, actions, design, dt) -> Trajectory``: ``actions`` (N, action_size), one
  per step; the same states as N calls of ``step``.
- ``simulate_vjp(trajectory, actions, design, dt, g_states) -> (∂L/∂s_0, ∂L/∂actions (N,
  action_size), ∂L/∂θ)`` given ``g_states``, N + 1 entries: ∂L/∂s_i taken at each state
  directly (a state tree, or None for none), s_0 first.

Recording sources may use ``state_at_joints(design, joint_q, joint_qd) -> state``: the state
at measured joint positions and rates, where a recording measured mid-motion starts
(sim_pbd offers it; ros_bridge's ``rosbag`` source cuts bags into segments with it).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, runtime_checkable

from .design import DesignSpace

__all__ = ["Simulator", "SimulationError", "Trajectory", "UnstableTimeStepError",
           "OPTIONAL_HOOKS"]

OPTIONAL_HOOKS = ("check_time_step", "check_state", "render", "render_sequence", "simulate",
                  "simulate_vjp")


@dataclasses.dataclass(frozen=True)
class Trajectory:
    """Many steps simulated in one call (the optional ``simulate`` hook).

    Attributes:
        states: s_0 … s_N, the start first (N + 1 states).
        record: what the simulator keeps for its ``simulate_vjp`` (its solver's data), opaque
            to the core.
    """

    states: list
    record: Any = None


class SimulationError(RuntimeError):
    """A simulation diverged or left its domain; the message names the step and the cause."""


class UnstableTimeStepError(SimulationError, ValueError):
    """The requested time step is unstable; the message states the largest safe value."""


@runtime_checkable
class Simulator(Protocol):
    """The contract between a simulator plugin and the codesign core."""

    @property
    def action_size(self) -> int:
        """Length of the 1-D action vector ``step`` takes."""
        ...

    def design_space(self) -> DesignSpace:
        """Named differentiable parameters θ with shapes, defaults and bounds."""
        ...

    def initial_state(self, design: dict[str, Any]) -> Any:
        """The state at time zero, s0(θ)."""
        ...

    def initial_state_vjp(self, design: dict[str, Any], g_state: Any) -> dict[str, Any]:
        """∂L/∂θ through ``initial_state`` given ∂L/∂s0."""
        ...

    def step(self, state: Any, action: Any, design: dict[str, Any], dt: float) -> Any:
        """Advance one substep of length ``dt`` [s]; pure, never mutates its inputs."""
        ...

    def step_vjp(
        self, state: Any, action: Any, design: dict[str, Any], dt: float, g_next: Any
    ) -> tuple[Any, Any, dict[str, Any]]:
        """Return (∂L/∂s, ∂L/∂a, ∂L/∂θ) given ∂L/∂s' for ``s' = step(s, a, θ, dt)``."""
        ...
