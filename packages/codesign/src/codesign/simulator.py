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

Recording sources may use ``state_at_joints(design, joint_q, joint_qd) -> state``: the state
at measured joint positions and rates, where a recording measured mid-motion starts
(sim_pbd offers it; ros_bridge's ``rosbag`` source cuts bags into segments with it).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from .design import DesignSpace

__all__ = ["Simulator", "SimulationError", "UnstableTimeStepError", "OPTIONAL_HOOKS"]

OPTIONAL_HOOKS = ("check_time_step", "check_state", "render", "render_sequence")


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
