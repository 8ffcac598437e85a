"""Small simulators with closed-form answers, used to test the core."""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from codesign import DesignSpace, Parameter, Trajectory
from codesign.tree import tree_add


@dataclasses.dataclass(frozen=True)
class LinearState:
    """State of ``x' = A x + B u``: ``x`` shape (n,)."""

    x: np.ndarray


class LinearSystem:
    """Discrete ``x_{k+1} = x_k + dt (A x_k + diag(b) B u_k)`` with design ``b`` and ``x0``.

    Design: ``gain`` (m,) scales each input column; ``x0`` (n,) the initial state.
    """

    def __init__(self, A, B, *, x0=None):
        self.A, self.B = np.asarray(A, float), np.asarray(B, float)
        self.n, self.m = self.B.shape
        self.x0 = np.zeros(self.n) if x0 is None else np.asarray(x0, float)
        self.action_size = self.m

    def design_space(self):
        return DesignSpace([
            Parameter("gain", (self.m,), 1.0, lower=0.0, upper=10.0),
            Parameter("x0", (self.n,), self.x0, unit="m"),
        ])

    def initial_state(self, design):
        return LinearState(x=np.array(design["x0"], dtype=float))

    def initial_state_vjp(self, design, g_state):
        return {"x0": np.array(g_state.x)}

    def step(self, state, action, design, dt):
        u = design["gain"] * action
        return LinearState(x=state.x + dt * (self.A @ state.x + self.B @ u))

    def step_vjp(self, state, action, design, dt, g_next):
        g = g_next.x
        g_x = g + dt * (self.A.T @ g)
        g_u = dt * (self.B.T @ g)
        return LinearState(x=g_x), g_u * design["gain"], {"gain": g_u * action}


@dataclasses.dataclass(frozen=True)
class SpringState:
    """Position [m] and velocity [m/s] of a point mass, each shape (1,)."""

    q: np.ndarray
    v: np.ndarray


class SpringMass:
    """Damped spring-mass ``m q'' = -k q - c q' + u``, symplectic Euler.

    Design: ``mass`` [kg], ``stiffness`` [N/m], ``damping`` [N s/m]; initial q0 = 1 m.
    """

    action_size = 1

    def __init__(self, *, q0=1.0, v0=0.0):
        self.q0, self.v0 = q0, v0

    def design_space(self):
        return DesignSpace([
            Parameter("mass", (), 1.0, lower=0.1, upper=10.0, unit="kg"),
            Parameter("stiffness", (), 4.0, lower=0.0, upper=100.0, unit="N/m"),
            Parameter("damping", (), 0.1, lower=0.0, upper=10.0, unit="N s/m"),
        ])

    def initial_state(self, design):
        return SpringState(q=np.array([self.q0]), v=np.array([self.v0]))

    def initial_state_vjp(self, design, g_state):
        return {}

    def step(self, state, action, design, dt):
        m, k, c = design["mass"], design["stiffness"], design["damping"]
        force = -k * state.q - c * state.v + action
        v = state.v + dt * force / m
        return SpringState(q=state.q + dt * v, v=v)

    def step_vjp(self, state, action, design, dt, g_next):
        m, k, c = design["mass"], design["stiffness"], design["damping"]
        force = -k * state.q - c * state.v + action
        g_v = g_next.v + dt * g_next.q  # q' = q + dt v', v' feeds q'
        g_force = g_v * dt / m
        g_q = g_next.q - k * g_force
        g_v0 = g_v - c * g_force
        g_design = {
            "mass": np.array(-np.sum(g_v * dt * force / m**2)),
            "stiffness": np.array(-np.sum(g_force * state.q)),
            "damping": np.array(-np.sum(g_force * state.v)),
        }
        return SpringState(q=g_q, v=g_v0), g_force.copy(), g_design


class SlowSpringMass(SpringMass):
    """The spring-mass taking ``delay_s`` seconds longer per rollout (slept at the start), so
    tests of cluster faults can act while a batch is still running."""

    def __init__(self, *, delay_s=0.2, **kwargs):
        super().__init__(**kwargs)
        self.delay_s = delay_s

    def initial_state(self, design):
        time.sleep(self.delay_s)
        return super().initial_state(design)


class WholeTrajectorySpringMass(SpringMass):
    """The spring-mass with the optional ``simulate`` / ``simulate_vjp`` hooks (many steps in
    one call), counting their calls; the same states and gradients as step by step."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.calls = {"simulate": 0, "simulate_vjp": 0}

    def simulate(self, state, actions, design, dt):
        self.calls["simulate"] += 1
        states = [state]
        for action in actions:
            states.append(self.step(states[-1], action, design, dt))
        return Trajectory(states=states, record=len(actions))

    def simulate_vjp(self, trajectory, actions, design, dt, g_states):
        self.calls["simulate_vjp"] += 1
        assert trajectory.record == len(actions) == len(g_states) - 1
        zero = SpringState(q=np.zeros(1), v=np.zeros(1))
        carry = g_states[-1] or zero
        g_actions = np.zeros((len(actions), 1))
        g_design = {name: np.array(0.0) for name in ("mass", "stiffness", "damping")}
        for i in reversed(range(len(actions))):
            g_state, g_actions[i], g_step = self.step_vjp(trajectory.states[i], actions[i],
                                                          design, dt, carry)
            carry = tree_add(g_state, g_states[i] or zero)
            g_design = {name: g_design[name] + g_step[name] for name in g_design}
        return carry, g_actions, g_design
