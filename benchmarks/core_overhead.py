"""The core's own cost per control step: rollout loop, checkpoint store, controller, observer.

A trivial simulator (one scalar state, one action) makes the simulator's cost negligible;
its bare step/step_vjp cost, timed in a plain loop, is subtracted so the figures are the
core's alone. Targets (issue 2): at most 20 µs per step forward and 40 µs backward.

    python benchmarks/core_overhead.py [--steps 10000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np

from codesign import DesignSpace, Objective, OpenLoopController, Parameter, Rollout


@dataclasses.dataclass(frozen=True)
class ScalarState:
    """x [m], shape (1,)."""

    x: np.ndarray


class TrivialSimulator:
    """x' = x + dt · gain · a."""

    action_size = 1

    def design_space(self):
        return DesignSpace([Parameter("gain", (), 1.0)])

    def initial_state(self, design):
        return ScalarState(x=np.zeros(1))

    def initial_state_vjp(self, design, g_state):
        return {}

    def step(self, state, action, design, dt):
        return ScalarState(x=state.x + dt * design["gain"] * action)

    def step_vjp(self, state, action, design, dt, g_next):
        g = g_next.x
        return ScalarState(x=g), dt * design["gain"] * g, {"gain": dt * g * action}


class FinalX:
    kind = "final"

    def value(self, state, action, design, control_step):
        return float(state.x[0])

    def grad(self, state, action, design, control_step):
        return ScalarState(x=np.ones(1)), None, None


class ScalarObserver:
    """Observes x (exercises the observer and its VJP on every step)."""

    size = 1

    def observe(self, state, design):
        return state.x

    def observe_vjp(self, state, design, g_observation):
        return ScalarState(x=np.asarray(g_observation)), None


class AffineController:
    """a = k o + table[t]: one observation-dependent weight plus an open-loop row."""

    observation_size, action_size = 1, 1

    def __init__(self, steps):
        self._table = OpenLoopController(observation_size=1, action_size=1,
                                         control_steps=steps)

    def parameter_space(self):
        return self._table.parameter_space().concat(DesignSpace([Parameter("k", (), 0.1)]))

    def act(self, observation, control_step, weights):
        return weights["k"] * observation + weights["table"][control_step]

    def act_vjp(self, observation, control_step, weights, g_action, g_weights):
        g_weights["table"][control_step] += g_action
        g_weights["k"] += float(g_action @ observation)
        return g_action * weights["k"]


def best_of(repeats, fn):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    n = args.steps
    sim = TrivialSimulator()
    controller = AffineController(n)
    rollout = Rollout(sim, controller=controller, observer=ScalarObserver(), steps=n, dt=1e-3)
    design = sim.design_space().defaults()
    weights = controller.parameter_space().defaults()
    objective = Objective.of(FinalX())

    state, action = sim.initial_state(design), np.zeros(1)

    def bare_forward():
        s = state
        for _ in range(n):
            s = sim.step(s, action, design, 1e-3)

    def bare_backward():
        g = ScalarState(x=np.ones(1))
        for _ in range(n):
            g, _, _ = sim.step_vjp(state, action, design, 1e-3, g)

    t_sim_f = best_of(args.repeats, bare_forward)
    t_sim_b = best_of(args.repeats, bare_backward)
    t_fwd = best_of(args.repeats, lambda: rollout.forward(design, weights, objective))
    t_both = best_of(args.repeats, lambda: rollout.value_and_grad(design, weights, objective))
    result, _ = rollout.value_and_grad(design, weights, objective)

    # value_and_grad = checkpointed forward + reverse (segment recompute, VJPs): the reverse
    # pays one extra simulator step per substep for the recompute.
    core_fwd = (t_fwd - t_sim_f) / n * 1e6
    core_bwd = (t_both - t_fwd - t_sim_b - t_sim_f) / n * 1e6
    print(f"steps: {n}, checkpoint every {rollout.checkpoint_every}, "
          f"peak states held {result.peak_states_held} (2√N = {2 * int(np.sqrt(n))})")
    print(f"simulator alone:   step {t_sim_f / n * 1e6:6.2f} µs, "
          f"step_vjp {t_sim_b / n * 1e6:6.2f} µs")
    print(f"core forward:  {core_fwd:6.2f} µs/step  (target ≤ 20)  "
          f"{'ok' if core_fwd <= 20 else 'OVER'}")
    print(f"core backward: {core_bwd:6.2f} µs/step  (target ≤ 40)  "
          f"{'ok' if core_bwd <= 40 else 'OVER'}")


if __name__ == "__main__":
    main()
