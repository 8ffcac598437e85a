"""Rollouts and their reverse sweep with √N checkpointing.

The core owns time. A rollout of ``steps`` control steps, each of ``substeps`` simulator
substeps of length ``dt``, evaluates at control step t:

    o_t = observe(s_t, θ),   a_t = act(o_t, t; w),   s_{t+1} = step^substeps(s_t, a_t, θ, dt)

and accumulates ``f = g(s_T, θ) + Σ_t h(s_t, a_t)`` for an objective and any constraints.
The reverse sweep stores every k-th substep state (k ≈ √N for N substeps) and recomputes
one segment at a time on the way back, so at most about 2√N states are held at once.
Running it with ``checkpoint_every=1`` stores every state and gives identical gradients.

A simulator with the optional ``simulate`` and ``simulate_vjp`` hooks (many steps in one
call, :class:`codesign.simulator.Trajectory`) runs an open-loop rollout (no observer: the
actions do not depend on the states) in one call forward and one back instead: the actions
of every control step come first, the terms read the trajectory's states, and the reverse
sweep hands the simulator every state's term gradients at once. It holds all N + 1 states,
which such a simulator declares affordable; the values and gradients are the step-by-step
ones.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .backend import to_host
from .controllers import Controller
from .observers import NullObserver, Observer
from .simulator import SimulationError, Trajectory
from .terms import Constraint, Objective
from .tree import tree_add, tree_scale, tree_to_host

__all__ = ["Rollout", "RolloutResult", "Gradient", "default_checkpoint_interval"]


def default_checkpoint_interval(total_substeps: int) -> int:
    """k = ⌈√N⌉: N/k stored checkpoints plus a k-state segment, about 2√N states."""
    return max(1, math.ceil(math.sqrt(total_substeps)))


@dataclasses.dataclass(frozen=True)
class Gradient:
    """Gradient of one scalar rollout function.

    Attributes:
        design: ∂f/∂θ for every simulator design parameter, name -> array.
        weights: ∂f/∂w for every controller weight, name -> array.
        initial_state: ∂f/∂s0, a state tree (for fitting initial-state offsets).
    """

    design: dict[str, np.ndarray]
    weights: dict[str, np.ndarray]
    initial_state: Any


@dataclasses.dataclass(frozen=True)
class RolloutResult:
    """What one forward rollout produced.

    Attributes:
        values: the objective's value followed by each constraint's, shape (1 + m,).
        final_state: s_T.
        actions: a_t for every control step, shape (steps, action_size).
        states: host copies of s_0 … s_T when ``record=True``, else ``None``.
        peak_states_held: most simulator states held at once by the checkpoint store
            (forward and reverse), the quantity √N checkpointing bounds.
    """

    values: np.ndarray
    final_state: Any
    actions: np.ndarray
    states: list | None = None
    peak_states_held: int = 0


def _add(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return tree_add(a, b)


def _add_dict(acc: dict, g: dict | None) -> None:
    if not g:
        return
    for name, value in g.items():
        if value is not None:
            acc[name] = value if name not in acc else acc[name] + value


class Rollout:
    """A differentiable rollout of a simulator under a controller.

    Args:
        simulator: an object satisfying :class:`codesign.Simulator`.
        controller: maps observations to actions (see :mod:`codesign.controllers`).
        observer: reads observations from states; default none (open loop).
        steps: number of control steps T.
        substeps: simulator substeps per control step.
        dt: substep length [s].
        checkpoint_every: store every k-th substep state in the reverse sweep; ``None``
            chooses k = ⌈√N⌉, 1 stores every state.
    """

    def __init__(
        self,
        simulator,
        *,
        controller: Controller,
        observer: Observer | None = None,
        steps: int,
        substeps: int = 1,
        dt: float,
        checkpoint_every: int | None = None,
    ):
        if int(steps) < 1 or int(substeps) < 1:
            raise ValueError(f"steps and substeps must be >= 1, got {steps} and {substeps}")
        if not (np.isfinite(dt) and dt > 0):
            raise ValueError(f"dt must be a positive number of seconds, got {dt}")
        self.simulator = simulator
        self.controller = controller
        self.observer = observer if observer is not None else NullObserver()
        self.steps, self.substeps, self.dt = int(steps), int(substeps), float(dt)
        if controller.action_size != simulator.action_size:
            raise ValueError(
                f"the controller produces {controller.action_size} action(s) but the simulator "
                f"takes {simulator.action_size}"
            )
        if controller.observation_size != self.observer.size:
            raise ValueError(
                f"the controller expects {controller.observation_size} observation(s) but the "
                f"observer provides {self.observer.size}"
            )
        total = self.steps * self.substeps
        self.checkpoint_every = int(checkpoint_every or default_checkpoint_interval(total))
        if self.checkpoint_every < 1:
            raise ValueError("checkpoint_every must be >= 1")
        self.whole_trajectory = (self.observer.size == 0
                                 and getattr(simulator, "simulate", None) is not None
                                 and getattr(simulator, "simulate_vjp", None) is not None)
        """Whether forward and reverse run as one ``simulate`` / ``simulate_vjp`` call (the
        module docstring): open loop, and the simulator has both hooks."""

    @property
    def total_substeps(self) -> int:
        """N = steps × substeps."""
        return self.steps * self.substeps

    # -- forward --------------------------------------------------------------------------

    def _initial_state(self, design, initial_offset, initial_state):
        check = getattr(self.simulator, "check_time_step", None)
        if check is not None:
            check(design, self.dt)
        state = self.simulator.initial_state(design) if initial_state is None else initial_state
        return _add(state, initial_offset)

    @staticmethod
    def _terms(objective: Objective, constraints: Sequence[Constraint]) -> tuple[int, list, list]:
        """How many functions (the objective, then each constraint) and their ``(function
        index, weight, term)`` entries evaluated at each control step and at the end."""
        kinds = {"running": [], "final": [], "trajectory": []}
        functions = [objective, *(c.objective for c in constraints)]
        for index, function in enumerate(functions):
            for wt in function.terms:
                kinds[wt.term.kind].append((index, wt.weight, wt.term))
        return (len(functions), kinds["running"] + kinds["trajectory"],
                kinds["final"] + kinds["trajectory"])

    @staticmethod
    def _add_step_values(values, at_step, state, action, design, control_step) -> None:
        """Add the per-step terms' weighted values at ``state`` to ``values``."""
        for index, weight, term in at_step:
            values[index] += weight * term.value(
                state, action if term.kind == "running" else None, design, control_step)

    def _forward(self, design, weights, objective, constraints, initial_offset, initial_state, *,
                 store, record):
        """(values, s_T, actions, what the reverse sweep needs: the checkpoints or the
        :class:`Trajectory`, the recorded states or None)."""
        state = self._initial_state(design, initial_offset, initial_state)
        count, at_step, at_end = self._terms(objective, constraints)
        values = np.zeros(count)
        if self.whole_trajectory:
            state, actions, kept, states = self._forward_whole(state, design, weights, values,
                                                               at_step, record=record)
        else:
            state, actions, kept, states = self._forward_steps(state, design, weights, values,
                                                               at_step, store=store,
                                                               record=record)
        for index, weight, term in at_end:
            values[index] += weight * term.value(state, None, design, self.steps)
        if not np.all(np.isfinite(values)):
            raise SimulationError(
                f"the rollout produced non-finite objective values {values.tolist()}; "
                "the simulation diverged: reduce dt or check the design"
            )
        return values, state, actions, kept, states

    def _forward_whole(self, state, design, weights, values, at_step, *, record):
        """The open-loop rollout as one ``simulate`` call: (s_T, actions, the trajectory,
        the recorded states or None); adds the per-step terms to ``values``."""
        sim, substeps = self.simulator, self.substeps
        observation = self.observer.observe(state, design)  # open loop: empty
        actions = np.zeros((self.steps, sim.action_size))
        for c in range(self.steps):
            actions[c] = np.asarray(self.controller.act(observation, c, weights), dtype=float)
        trajectory = sim.simulate(state, np.repeat(actions, substeps, axis=0), design, self.dt)
        states = trajectory.states
        if len(states) != self.total_substeps + 1:
            raise ValueError(f"simulate returned {len(states)} states for "
                             f"{self.total_substeps} steps; it must return N + 1, the start "
                             f"first")
        check_state = getattr(sim, "check_state", None)
        for c in range(self.steps):
            if check_state is not None:
                check_state(states[(c + 1) * substeps], (c + 1) * substeps)
            self._add_step_values(values, at_step, states[c * substeps], actions[c], design, c)
        recorded = [tree_to_host(s) for s in states[::substeps]] if record else None
        return states[-1], actions, trajectory, recorded

    def _forward_steps(self, state, design, weights, values, at_step, *, store, record):
        """The rollout step by step: (s_T, actions, the √N checkpoints when ``store``, the
        recorded states or None); adds the per-step terms to ``values``."""
        sim, ctrl, obs, dt = self.simulator, self.controller, self.observer, self.dt
        k, substeps = self.checkpoint_every, self.substeps
        check_state = getattr(sim, "check_state", None)
        actions = np.zeros((self.steps, sim.action_size))
        checkpoints: dict[int, Any] = {}
        states = [] if record else None
        for c in range(self.steps):
            if record:
                states.append(tree_to_host(state))
            action = np.asarray(ctrl.act(obs.observe(state, design), c, weights), dtype=float)
            actions[c] = action
            self._add_step_values(values, at_step, state, action, design, c)
            for j in range(substeps):
                i = c * substeps + j
                if store and i % k == 0:
                    checkpoints[i] = state
                state = sim.step(state, action, design, dt)
            if check_state is not None:
                check_state(state, (c + 1) * substeps)
        if record:
            states.append(tree_to_host(state))
        return state, actions, checkpoints, states

    def forward(
        self,
        design: dict[str, Any],
        weights: dict[str, Any],
        objective: Objective,
        constraints: Sequence[Constraint] = (),
        *,
        initial_offset=None,
        initial_state=None,
        record: bool = False,
    ) -> RolloutResult:
        """Run the rollout and return objective and constraint values (no gradients).

        ``initial_state`` (a state tree) starts the rollout there in place of
        ``simulator.initial_state(design)`` (a recording that starts from a measured state);
        ``initial_offset`` is added to the start either way."""
        values, final, actions, _, states = self._forward(
            design, weights, objective, constraints, initial_offset, initial_state,
            store=False, record=record)
        return RolloutResult(values=values, final_state=final, actions=actions, states=states)

    # -- reverse --------------------------------------------------------------------------

    def value_and_grad(
        self,
        design: dict[str, Any],
        weights: dict[str, Any],
        objective: Objective,
        constraints: Sequence[Constraint] = (),
        *,
        initial_offset=None,
        initial_state=None,
    ) -> tuple[RolloutResult, list[Gradient]]:
        """Forward rollout, then one reverse sweep for the objective and every constraint.

        The segments recomputed from checkpoints are shared by all functions; each function
        carries its own adjoint state through ``step_vjp``. A given ``initial_state`` (see
        :meth:`forward`) does not depend on the design: the design gradient stops there
        (``initial_state_vjp`` is not called; ``Gradient.initial_state`` is still ∂f/∂s0).
        """
        values, final, actions, kept, _ = self._forward(
            design, weights, objective, constraints, initial_offset, initial_state, store=True,
            record=False)
        m, at_step, at_end = self._terms(objective, constraints)
        weight_space = self.controller.parameter_space()
        g_weights = [{n: np.zeros(p.shape) for n, p in zip(
            weight_space.names, weight_space, strict=True)} for _ in range(m)]
        g_design: list[dict] = [{} for _ in range(m)]
        if isinstance(kept, Trajectory):
            g_state = self._reverse_whole(kept, actions, design, weights, at_step, at_end,
                                          g_design, g_weights)
            peak = len(kept.states)
        else:
            g_state, peak = self._reverse_steps(kept, final, actions, design, weights, at_step,
                                                at_end, g_design, g_weights)
        gradients = []
        for f in range(m):
            if g_state[f] is not None and initial_state is None:
                _add_dict(g_design[f], self.simulator.initial_state_vjp(design, g_state[f]))
            full_design = {n: to_host(g_design[f][n]) if n in g_design[f] else np.zeros_like(
                np.asarray(v, dtype=float)) for n, v in design.items()}
            gradients.append(Gradient(design=full_design, weights=g_weights[f],
                                      initial_state=g_state[f]))
        result = RolloutResult(values=values, final_state=final, actions=actions,
                               peak_states_held=peak)
        return result, gradients

    def _reverse_steps(self, checkpoints, final, actions, design, weights, at_step, at_end,
                       g_design, g_weights) -> tuple[list, int]:
        """The reverse sweep step by step from the √N checkpoints: (∂L/∂s_0 per function,
        the most states held at once); adds to ``g_design`` and ``g_weights``."""
        sim, ctrl, obs, dt = self.simulator, self.controller, self.observer, self.dt
        k, substeps, n_total = self.checkpoint_every, self.substeps, self.total_substeps
        m = len(g_design)
        g_state: list[Any] = [None] * m
        g_action: list[Any] = [None] * m
        self._add_term_grads(at_end, final, None, design, self.steps, g_state, g_action,
                             g_design)
        peak = len(checkpoints) + 1

        for seg_start in reversed(range(0, n_total, k)):
            seg_end = min(seg_start + k, n_total)
            segment = [checkpoints[seg_start]]
            for i in range(seg_start, seg_end - 1):
                segment.append(sim.step(segment[-1], actions[i // substeps], design, dt))
            peak = max(peak, len(checkpoints) + len(segment))
            for i in reversed(range(seg_start, seg_end)):
                state, c = segment.pop(), i // substeps
                action = actions[c]
                for f in range(m):
                    if g_state[f] is None:
                        continue
                    gs, ga, gd = sim.step_vjp(state, action, design, dt, g_state[f])
                    g_state[f] = gs
                    g_action[f] = _add(g_action[f], None if ga is None else to_host(ga))
                    _add_dict(g_design[f], gd)
                if i % substeps == 0:
                    self._add_term_grads(at_step, state, action, design, c,
                                         g_state, g_action, g_design)
                    observation = obs.observe(state, design)
                    for f in range(m):
                        if g_action[f] is None:
                            continue
                        g_obs = ctrl.act_vjp(observation, c, weights, g_action[f], g_weights[f])
                        g_action[f] = None
                        if obs.size:
                            gs_obs, gd_obs = obs.observe_vjp(state, design, g_obs)
                            g_state[f] = _add(g_state[f], gs_obs)
                            _add_dict(g_design[f], gd_obs)
            del checkpoints[seg_start]
        return g_state, peak

    def _reverse_whole(self, trajectory, actions, design, weights, at_step, at_end, g_design,
                       g_weights) -> list:
        """The reverse sweep as one ``simulate_vjp`` call per function (open loop): every
        state's term gradients first, then the simulator's sweep, then the controller's
        VJP per control step; returns ∂L/∂s_0 per function and adds to ``g_design`` and
        ``g_weights``."""
        sim, substeps, steps = self.simulator, self.substeps, self.steps
        states, m = trajectory.states, len(g_design)
        g_states = [[None] * len(states) for _ in range(m)]
        g_actions = np.zeros((m, steps, sim.action_size))
        for c in range(steps + 1):
            state_grads, action_grads = [None] * m, [None] * m
            if c < steps:
                self._add_term_grads(at_step, states[c * substeps], actions[c], design, c,
                                     state_grads, action_grads, g_design)
            else:
                self._add_term_grads(at_end, states[-1], None, design, steps, state_grads,
                                     action_grads, g_design)
            for f in range(m):
                g_states[f][c * substeps] = state_grads[f]
                if action_grads[f] is not None:
                    g_actions[f, c] += to_host(action_grads[f])
        observation = self.observer.observe(states[0], design)  # open loop: empty
        per_substep = np.repeat(actions, substeps, axis=0)
        g_start = []
        for f in range(m):
            if all(g is None for g in g_states[f]):
                g_start.append(None)
            else:
                g_s0, g_substeps, gd = sim.simulate_vjp(trajectory, per_substep, design,
                                                        self.dt, g_states[f])
                g_start.append(g_s0)
                _add_dict(g_design[f], gd)
                g_actions[f] += to_host(g_substeps).reshape(steps, substeps, -1).sum(axis=1)
            for c in reversed(range(steps)):
                if np.any(g_actions[f, c]):
                    self.controller.act_vjp(observation, c, weights, g_actions[f, c],
                                            g_weights[f])
        return g_start

    @staticmethod
    def _add_term_grads(entries, state, action, design, control_step, g_state, g_action,
                        g_design):
        for index, weight, term in entries:
            gs, ga, gd = term.grad(state, action if term.kind == "running" else None, design,
                                   control_step)
            if gs is not None:
                g_state[index] = _add(g_state[index], tree_scale(gs, weight))
            if ga is not None:
                g_action[index] = _add(g_action[index], weight * np.asarray(ga))
            if gd:
                _add_dict(g_design[index], {n: weight * v for n, v in gd.items()})

