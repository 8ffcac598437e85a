"""Conformance checks any simulator plugin runs from its own tests.

Each check raises ``AssertionError`` with a message that names what broke; gradient checks
return their :class:`GradcheckReport` for printing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backend import to_host
from ..controllers import OpenLoopController
from ..design import DesignSpace
from ..rollout import Rollout
from ..simulator import Simulator
from ..terms import Objective, WeightedTerm
from ..tree import tree_copy, tree_describe, tree_leaves, tree_map, tree_vdot, tree_zeros_like
from ._gradcheck import GradcheckReport, gradcheck, random_tree

__all__ = [
    "check_protocol",
    "check_step_is_pure",
    "check_vjp_structure",
    "check_step_gradients",
    "check_initial_state_gradients",
    "check_rollout_gradients",
    "check_simulate_matches_steps",
    "run_conformance",
    "RandomLinearTerm",
]


def _random_cotangent(tree, seed: int):
    return random_tree(tree, np.random.default_rng(seed), keep_dtype=True)


def _defaults(sim, state, action, design):
    design = sim.design_space().defaults() if design is None else design
    state = sim.initial_state(design) if state is None else state
    if action is None:
        action = np.random.default_rng(1).uniform(-0.5, 0.5, sim.action_size)
    return state, np.asarray(action, dtype=np.float64), design


def _assert_trees_equal(a, b, what: str) -> None:
    for path, (x, y) in zip(tree_describe(a), zip(tree_leaves(a), tree_leaves(b), strict=True),
                            strict=True):
        if not np.array_equal(to_host(x), to_host(y), equal_nan=True):
            raise AssertionError(f"{what}: leaf {path!r} differs")


def check_protocol(sim) -> DesignSpace:
    """The object satisfies :class:`codesign.Simulator` and its defaults are valid."""
    if not isinstance(sim, Simulator):
        missing = [m for m in ("action_size", "design_space", "initial_state",
                               "initial_state_vjp", "step", "step_vjp") if not hasattr(sim, m)]
        raise AssertionError(f"{type(sim).__name__} is not a Simulator; missing {missing}")
    space = sim.design_space()
    if not isinstance(space, DesignSpace):
        raise AssertionError("design_space() must return a codesign.DesignSpace")
    space.check(space.defaults())
    return space


def check_step_is_pure(sim, *, dt: float, state=None, action=None, design=None) -> None:
    """``step`` and ``step_vjp`` leave their inputs unchanged and are deterministic."""
    state, action, design = _defaults(sim, state, action, design)
    before = (tree_copy(state), action.copy(), {k: np.copy(v) for k, v in design.items()})
    first = sim.step(state, action, design, dt)
    second = sim.step(state, action, design, dt)
    _assert_trees_equal(first, second, "step is not deterministic")
    g_next = _random_cotangent(first, seed=3)
    vjp_first = sim.step_vjp(state, action, design, dt, g_next)
    vjp_second = sim.step_vjp(state, action, design, dt, g_next)
    _assert_trees_equal(vjp_first[0], vjp_second[0], "step_vjp is not deterministic")
    _assert_trees_equal(state, before[0], "step or step_vjp modified its input state")
    if not np.array_equal(action, before[1]):
        raise AssertionError("step or step_vjp modified its input action")
    for name, value in before[2].items():
        if not np.array_equal(to_host(design[name]), to_host(value)):
            raise AssertionError(f"step or step_vjp modified design parameter {name!r}")


def check_vjp_structure(sim, *, dt: float, state=None, action=None, design=None) -> None:
    """VJP outputs have the shapes and dtypes of the corresponding inputs."""
    state, action, design = _defaults(sim, state, action, design)
    nxt = sim.step(state, action, design, dt)
    g_state, g_action, g_design = sim.step_vjp(state, action, design, dt,
                                               _random_cotangent(nxt, seed=4))
    want, got = tree_describe(state), tree_describe(tree_map(
        lambda x, g: x if g is None else g, state, g_state))
    if want != got:
        raise AssertionError(f"∂L/∂s shapes/dtypes {got} differ from the state's {want}")
    if np.shape(g_action) != np.shape(action):
        raise AssertionError(f"∂L/∂a has shape {np.shape(g_action)}, action {np.shape(action)}")
    space = sim.design_space()
    for name, value in (g_design or {}).items():
        if name not in space:
            raise AssertionError(f"∂L/∂θ names unknown parameter {name!r}")
        if tuple(np.shape(value)) != space[name].shape:
            raise AssertionError(
                f"∂L/∂θ[{name!r}] has shape {np.shape(value)}, expected {space[name].shape}")
    g0 = sim.initial_state_vjp(design, _random_cotangent(state, seed=5))
    for name, value in (g0 or {}).items():
        if name not in space or tuple(np.shape(value)) != space[name].shape:
            raise AssertionError(f"initial_state_vjp returns a bad entry for {name!r}")


def _as_float64_design(design):
    return {k: np.asarray(v, dtype=np.float64) for k, v in design.items()}


def check_step_gradients(
    sim,
    *,
    dt: float,
    steps: int = 1,
    state=None,
    action=None,
    design=None,
    tolerance: float = 1e-6,
    eps: float = 1e-6,
    directions: int = 2,
    seed: int = 0,
    groups: list[str] | None = None,
) -> GradcheckReport:
    """Gradcheck ``L = <w, s_n>`` after ``steps`` substeps with a fixed action.

    Groups: ``state`` (s_0), ``action`` and ``design``.
    """
    state, action, design = _defaults(sim, state, action, design)
    design = _as_float64_design(design)
    trajectory = [state]
    for _ in range(steps):
        trajectory.append(sim.step(trajectory[-1], action, design, dt))
    final = trajectory.pop()
    w = _fill_zeros(_random_cotangent(final, seed=seed + 11), final)

    def loss(inputs):
        s = inputs["state"]
        for _ in range(steps):
            s = sim.step(s, inputs["action"], inputs["design"], dt)
        return tree_vdot(s, w)

    g_state, g_action, g_design = w, np.zeros_like(action), {}
    for s in reversed(trajectory):
        g_state, ga, gd = sim.step_vjp(s, action, design, dt, g_state)
        g_action = g_action + to_host(ga)
        for name, value in (gd or {}).items():
            g_design[name] = g_design.get(name, 0.0) + to_host(value)
    inputs = {"state": state, "action": action, "design": design}
    return gradcheck(loss, inputs, {"state": g_state, "action": g_action, "design": g_design},
                     tolerance=tolerance, eps=eps, directions=directions, seed=seed,
                     groups=groups)


def _fill_zeros(w, like):
    """Cotangent tree with zeros where ``w`` has ``None`` (non-float leaves)."""
    zeros = tree_zeros_like(like)
    return tree_map(lambda z, wi: z if wi is None else wi, zeros, w)


def check_initial_state_gradients(sim, *, design=None, tolerance: float = 1e-6,
                                  eps: float = 1e-6, seed: int = 0) -> GradcheckReport:
    """Gradcheck ``L = <w, s0(θ)>`` through ``initial_state_vjp``."""
    design = _as_float64_design(sim.design_space().defaults() if design is None else design)
    s0 = sim.initial_state(design)
    w = _fill_zeros(_random_cotangent(s0, seed=seed + 21), s0)

    def loss(inputs):
        return tree_vdot(sim.initial_state(inputs["design"]), w)

    g = sim.initial_state_vjp(design, w)
    return gradcheck(loss, {"design": design}, {"design": g or {}}, tolerance=tolerance,
                     eps=eps, seed=seed)


class RandomLinearTerm:
    """Final term ``<w, s_T>`` with a fixed random ``w``: exercises every state leaf."""

    kind = "final"

    def __init__(self, state_like, *, seed: int = 0):
        self.w = _fill_zeros(_random_cotangent(state_like, seed=seed), state_like)

    def value(self, state, action, design, control_step):
        return tree_vdot(state, self.w)

    def grad(self, state, action, design, control_step):
        return self.w, None, None


def _assert_trees_close(a, b, like, what: str, *, rtol: float, atol: float) -> None:
    """Leafwise ``allclose`` of two trees shaped like ``like``; a ``None`` leaf (no gradient)
    counts as zeros."""
    for path, x, y in zip(tree_describe(like), tree_leaves(_fill_zeros(a, like)),
                          tree_leaves(_fill_zeros(b, like)), strict=True):
        x, y = to_host(x), to_host(y)
        if not np.allclose(x, y, rtol=rtol, atol=atol):
            raise AssertionError(f"{what}: leaf {path!r} differs by up to "
                                 f"{np.max(np.abs(x - y)):.3g}")


def check_simulate_matches_steps(sim, *, dt: float, steps: int = 4, state=None, action=None,
                                 design=None, rtol: float = 1e-10) -> None:
    """Where ``sim`` has the optional ``simulate`` and ``simulate_vjp`` hooks: their states
    and gradients equal those of ``step`` and ``step_vjp`` step by step (to ``rtol``), for
    ``steps`` actions about ``action`` and random cotangents at every state."""
    if getattr(sim, "simulate", None) is None and getattr(sim, "simulate_vjp", None) is None:
        return
    if getattr(sim, "simulate", None) is None or getattr(sim, "simulate_vjp", None) is None:
        raise AssertionError("a simulator offers simulate and simulate_vjp together")
    state, action, design = _defaults(sim, state, action, design)
    actions = action * np.linspace(0.5, 1.5, steps)[:, None]
    trajectory = sim.simulate(state, actions, design, dt)
    expected = [state]
    for a in actions:
        expected.append(sim.step(expected[-1], a, design, dt))
    if len(trajectory.states) != steps + 1:
        raise AssertionError(f"simulate returned {len(trajectory.states)} states for {steps} "
                             f"steps; it must return N + 1, the start first")
    for i, (got, want) in enumerate(zip(trajectory.states, expected, strict=True)):
        _assert_trees_close(got, want, want, f"simulate's state {i}", rtol=rtol, atol=1e-14)
    g_states = [_fill_zeros(_random_cotangent(s, seed=30 + i), s) for i, s in enumerate(expected)]
    g_start, g_actions, g_design = sim.simulate_vjp(trajectory, actions, design, dt, g_states)
    carry, want_actions, want_design = g_states[-1], np.zeros_like(actions), {}
    for i in reversed(range(steps)):
        g_state, g_action, gd = sim.step_vjp(expected[i], actions[i], design, dt, carry)
        carry = tree_map(lambda w, g: w if g is None else g + w, g_states[i], g_state)
        want_actions[i] = to_host(g_action)
        for name, value in (gd or {}).items():
            want_design[name] = want_design.get(name, 0.0) + to_host(value)
    _assert_trees_close(g_start, carry, state, "simulate_vjp's ∂L/∂s_0", rtol=rtol,
                        atol=1e-12)
    if not np.allclose(to_host(g_actions), want_actions, rtol=rtol, atol=1e-12):
        raise AssertionError("simulate_vjp's ∂L/∂actions differ from step_vjp's")
    for name in set(want_design) | set(g_design or {}):
        got = to_host((g_design or {}).get(name, 0.0))
        want = want_design.get(name, 0.0)
        scale = max(float(np.max(np.abs(want), initial=0.0)), 1.0)
        if not np.allclose(got, want, rtol=rtol, atol=rtol * scale):
            raise AssertionError(f"simulate_vjp's ∂L/∂θ[{name!r}] differs from step_vjp's")


def check_rollout_gradients(
    rollout: Rollout,
    design: dict[str, Any],
    weights: dict[str, Any],
    objective: Objective,
    *,
    tolerance: float = 1e-6,
    eps: float = 1e-6,
    seed: int = 0,
    groups: list[str] | None = None,
) -> GradcheckReport:
    """Gradcheck a whole rollout for design, controller weights and the initial state."""
    design = _as_float64_design(design)
    offset = tree_zeros_like(rollout.simulator.initial_state(design))

    def loss(inputs):
        return rollout.forward(inputs["design"], inputs["weights"], objective,
                               initial_offset=inputs["initial_state"]).values[0]

    _, (grad,) = rollout.value_and_grad(design, weights, objective, initial_offset=offset)
    inputs = {"design": design, "weights": weights, "initial_state": offset}
    analytic = {"design": grad.design, "weights": grad.weights, "initial_state":
                grad.initial_state}
    return gradcheck(loss, inputs, analytic, tolerance=tolerance, eps=eps, seed=seed,
                     groups=groups)


def run_conformance(
    sim,
    *,
    dt: float,
    state=None,
    action=None,
    design=None,
    steps: tuple[int, ...] = (1, 5),
    rollout_steps: int = 3,
    substeps: int = 2,
    tolerance: float = 1e-6,
    eps: float = 1e-6,
) -> list[GradcheckReport]:
    """Every conformance check in turn; raises AssertionError on the first failure."""
    check_protocol(sim)
    check_step_is_pure(sim, dt=dt, state=state, action=action, design=design)
    check_vjp_structure(sim, dt=dt, state=state, action=action, design=design)
    reports = [check_step_gradients(sim, dt=dt, steps=n, state=state, action=action,
                                    design=design, tolerance=tolerance, eps=eps).assert_ok()
               for n in steps]
    reports.append(check_initial_state_gradients(sim, design=design, tolerance=tolerance,
                                                 eps=eps).assert_ok())
    check_simulate_matches_steps(sim, dt=dt, state=state, action=action, design=design)
    state0, action0, design0 = _defaults(sim, state, action, design)
    controller = OpenLoopController(observation_size=0, action_size=sim.action_size,
                                    control_steps=rollout_steps)
    weights = {"table": np.tile(action0, (rollout_steps, 1))}
    rollout = Rollout(sim, controller=controller, steps=rollout_steps, substeps=substeps,
                      dt=dt, checkpoint_every=2)
    objective = Objective((WeightedTerm(RandomLinearTerm(state0, seed=7)),))
    reports.append(check_rollout_gradients(rollout, design0, weights, objective,
                                           tolerance=tolerance, eps=eps).assert_ok())
    return reports
