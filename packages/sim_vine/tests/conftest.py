"""Shared builders for the sim_vine tests."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.testing import gradcheck
from sim_vine import VineModel, VineSimulator, VineState
from sim_vine.kinematics import tip_position, tip_position_vjp


def run(sim, steps: int, rate: float = 0.1, dt: float = 0.01, design=None, state=None):
    """Step ``sim`` ``steps`` times at a constant growth rate; returns (states, design)."""
    design = sim.design_space().defaults() if design is None else design
    state = sim.initial_state(design) if state is None else state
    states = [state]
    for _ in range(steps):
        states.append(sim.step(states[-1], np.array([rate]), design, dt))
    return states, design


@pytest.fixture
def runner():
    """The :func:`run` helper."""
    return run


def tip_position_gradcheck(sim, state, design, *, steps, dt=0.01, rate=(0.1,)):
    """Gradcheck ``w · tip(s_n)`` through ``steps`` steps at growth ``rate`` [m/s] for state,
    action and design.

    A position-only loss: its round-off stays near machine precision, unlike the kit's
    random loss over every state leaf.
    """
    rate = np.asarray(rate, dtype=np.float64)
    w = np.array([0.6, -0.8])

    def loss(inputs):
        s = inputs["state"]
        for _ in range(steps):
            s = sim.step(s, inputs["action"], inputs["design"], dt)
        return float(w @ tip_position(sim.model, s.body_q))

    trajectory = [state]
    for _ in range(steps - 1):
        trajectory.append(sim.step(trajectory[-1], rate, design, dt))
    g_q = tip_position_vjp(sim.model, sim.step(trajectory[-1], rate, design, dt).body_q, w)
    g_state = VineState(body_q=g_q, body_qd=np.zeros_like(g_q))
    g_action, g_design = np.zeros(1), {}
    for s in reversed(trajectory):
        g_state, ga, gd = sim.step_vjp(s, rate, design, dt, g_state)
        g_action = g_action + ga
        for name, value in gd.items():
            g_design[name] = g_design.get(name, 0.0) + value
    return gradcheck(loss, {"state": state, "action": rate, "design": design},
                     {"state": g_state, "action": g_action, "design": g_design})


def assert_assembly_matches(sim, q, v, rate, params, dt):
    """Assert that the compiled QP assembly of ``sim`` at poses ``q`` and velocities ``v``
    (N, 3) equals the NumPy reference's, and its scaled OSQP data too (1e-13); returns
    (compiled, reference) problems."""
    from sim_vine.step import assemble, build_problem

    reference = assemble(sim.model, sim.layout, q, v, rate, params, dt).problem
    fast = build_problem(sim.arrays, sim.layout, q, v, rate, params, dt)
    for field in ("mass_diagonal", "spring_weights", "rhs", "row_values", "lower", "upper",
                  "tangent_rows"):
        np.testing.assert_allclose(getattr(fast, field), getattr(reference, field),
                                   rtol=1e-13, atol=1e-13, err_msg=field)
    for got, want in zip(sim.qp.scaled_data(fast), sim.qp.scaled_data_reference(reference),
                         strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    return fast, reference


@pytest.fixture
def assembly_matches():
    """The :func:`assert_assembly_matches` helper."""
    return assert_assembly_matches


def assert_backward_matches(sim, q, v, rate, params, dt, g_q, g_v, *, atol):
    """Assert that the compiled backward pass of ``sim``'s step at (q, v) (N, 3) equals the
    NumPy one on the same solution and adjoint (each field within ``atol`` × its size; the
    mass and r² cotangents w·(v − v*) cancel, so at the size of their terms), and the whole VJPs
    agree to 1e-8 (the KKT solve amplifies the assemblies' round-off); returns (solution,
    reference gradient)."""
    import dataclasses

    from sim_vine._kernels import step_backward
    from sim_vine.step import _backward, _gyration_sq, assemble, step_vjp, step_vjp_reference

    model = sim.model
    assembly = assemble(model, sim.layout, q, v, rate, params, dt)
    solution = sim.qp.solve(assembly.problem, warm_v=v)
    w, z = sim.qp.adjoint(assembly.problem, solution.active, (g_v + dt * g_q).reshape(-1))
    fast = step_backward(tuple(sim.arrays), q, v, solution.v, solution.y, w.reshape(-1, 3), z,
                         params.stiffness, params.damping, params.rest_angle,
                         float(params.friction), params.mass, _gyration_sq(sim.arrays, params),
                         params.ground_friction, dt, sim.layout.row_bodies,
                         assembly.problem.row_values,
                         sim.layout.contact.start, g_q, rate)
    reference = _backward(model, sim.layout, sim.qp, q, v, params, dt, solution, assembly,
                          g_q, g_v, rate)
    for value, field in zip(fast, dataclasses.fields(reference), strict=True):
        expected = np.asarray(getattr(reference, field.name))
        size = np.max(np.abs(expected))
        if field.name in ("mass", "gyration_sq"):  # w·(v − v*) cancels
            size = np.max(np.abs(v)) * np.max(np.abs(w)) * (
                1.0 if field.name == "mass" else np.max(params.mass))
        np.testing.assert_allclose(value, expected, rtol=0, atol=atol * size,
                                   err_msg=field.name)
    args = (sim.layout, sim.qp, q, v, rate, params, dt, g_q, g_v)
    whole, whole_reference = step_vjp(sim.arrays, *args), step_vjp_reference(model, *args)
    np.testing.assert_allclose(whole.q, whole_reference.q, rtol=0,
                               atol=1e-8 * np.max(np.abs(whole_reference.q)))
    return solution, reference


@pytest.fixture
def backward_matches():
    """The :func:`assert_backward_matches` helper."""
    return assert_backward_matches


@pytest.fixture
def tip_gradcheck():
    """The :func:`tip_position_gradcheck` helper."""
    return tip_position_gradcheck


def run_with_contacts(sim, steps: int, rate: float, dt: float):
    """Poses (steps + 1, N, 3) of ``sim`` at its defaults and the contact modes of its
    active contact rows per step (steps, pairs): +1 / −1 for the edge N ± μT, 0 free."""
    from sim_vine.state import VineState
    from sim_vine.step import step

    params, _ = sim._parameters(sim.design_space().defaults())
    state = sim.initial_state(sim.design_space().defaults())
    poses, modes = [state.body_q], []
    for _ in range(steps):
        q, v, solution, _ = step(sim.arrays, sim.layout, sim.qp, state.body_q,
                                 state.body_qd, rate, params, dt)
        edges = solution.active[sim.layout.contact].reshape(-1, 2)
        modes.append(np.where(edges[:, 0], 1, np.where(edges[:, 1], -1, 0)))
        state = VineState(body_q=q, body_qd=v)
        poses.append(q)
    return np.array(poses), np.array(modes)


@pytest.fixture
def contact_runner():
    """The :func:`run_with_contacts` helper."""
    return run_with_contacts


@pytest.fixture
def small_vine():
    """A 6-body vine without obstacles, slightly bent, under gravity."""
    return VineSimulator(VineModel(body_count=6, length=0.2, initial_angles=0.1,
                                   gravity=(0.0, -9.81)))


@pytest.fixture
def corner():
    """An 8-body vine (μ 0.3, under gravity) hanging toward the corner where two walls meet
    at a right angle, and its state after 49 steps of 10 ms growing at 0.05 m/s: the tip is
    stuck in the corner, where its two coordinates meet up to four cone edges (two walls ×
    two edges), so several active sets fit. Returns (simulator, states from t = 0 (50),
    design, growth rate [m/s])."""
    from sim_vine.obstacles import Wall

    corner = np.array([0.02, -0.23])
    walls = (Wall(corner + [-0.1, 0.1], corner, 0.01), Wall(corner + [0.1, 0.1], corner, 0.01))
    sim = VineSimulator(VineModel(body_count=8, length=0.2, base=(0.0, 0.0, -np.pi / 2),
                                  gravity=(0.0, -9.81), friction=0.3, obstacles=walls,
                                  initial_angles=0.05))
    states, design = run(sim, 49, rate=0.05)
    return sim, states, design, 0.05
