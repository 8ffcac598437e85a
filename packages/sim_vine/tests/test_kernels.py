"""The compiled assembly equals the NumPy reference."""

import numpy as np
import pytest

from sim_vine import VineModel, VineSimulator, rectangle
from sim_vine._kernels import rows_times_fast
from sim_vine.constraints import rows_times
from sim_vine.obstacles import Circle, Polygon, Wall
from sim_vine.step import build_problem

OBSTACLES = (Circle([0.12, 0.1], 0.05), rectangle([0.1, -0.1], [0.1, 0.05], 0.4),
             Polygon([[0.2, 0.0], [0.3, 0.05], [0.25, 0.1]]), Wall([0.3, -0.2], [0.2, 0.2]))


@pytest.mark.parametrize("implicit", [True, False])
@pytest.mark.parametrize("friction", [0.0, 0.3])
def test_compiled_problem_equals_reference(implicit, friction, assembly_matches):
    model = VineModel(body_count=9, length=0.2, obstacles=OBSTACLES, gravity=(0.3, -9.8),
                      implicit_springs=implicit, growth="tip")
    sim = VineSimulator(model)
    rng = np.random.default_rng(0)
    q = model.configuration(rng.uniform(-0.4, 0.4, model.pin_count),
                            rng.uniform(0, 0.03, model.prismatic_count))
    q = q + 1e-3 * rng.standard_normal(q.shape)
    v = rng.standard_normal(q.shape)
    design = sim.design_space().defaults()
    design["joint.stiffness"] = rng.uniform(0.01, 0.1, model.pin_count)
    design["contact.friction"] = np.asarray(friction)
    design["joint.rest_angle"] = np.random.default_rng(7).uniform(-0.5, 0.5, model.pin_count)
    design["ground.friction"] = np.random.default_rng(8).uniform(0.0, 5.0, model.body_count)
    params, _ = sim._parameters(design)
    fast, reference = assembly_matches(sim, q, v, 0.07, params, 0.01)
    np.testing.assert_allclose(rows_times_fast(sim.layout.row_bodies, fast.row_values, v),
                               rows_times(sim.layout.row_bodies, reference.row_values, v),
                               rtol=1e-13, atol=1e-13)


def test_banded_kkt_solve_equals_the_sparse_reference():
    model = VineModel(body_count=12, length=0.2, obstacles=OBSTACLES, friction=0.2)
    sim = VineSimulator(model)
    rng = np.random.default_rng(1)
    q = model.configuration(rng.uniform(-0.3, 0.3, model.pin_count),
                            rng.uniform(0, 0.02, model.prismatic_count))
    v = rng.standard_normal(q.shape)
    params, _ = sim._parameters(sim.design_space().defaults())
    problem = build_problem(sim.arrays, sim.layout, q, v, 0.1, params, 0.01)
    layout = sim.layout
    active = np.zeros(layout.size, dtype=bool)
    active[: layout.equality_count] = True
    active[layout.contact.start + 2 * rng.choice(layout.pair_count, 3, replace=False)] = True
    Px, Ax, q_lin, lower, _, col_scale, row_scale = sim.qp.scaled_data(problem)
    n = 3 * model.body_count
    rhs = np.concatenate([-q_lin, np.where(active, lower, 0.0)])
    banded = sim.qp._banded.solve(Px, Ax, active, rhs)
    np.testing.assert_allclose(banded, sim.qp._banded.solve_lapack(Px, Ax, active, rhs),
                               rtol=1e-12, atol=1e-14)
    reference = sim.qp.kkt_solver(problem, sim.qp.a_matrix(problem.row_values), active)(
        np.concatenate([problem.rhs.reshape(-1), problem.lower[active]]))
    np.testing.assert_allclose(banded[:n] * col_scale, reference[:n], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose((banded[n:] * row_scale)[active], reference[n:], rtol=1e-9,
                               atol=1e-12)
    np.testing.assert_array_equal(banded[n:][~active], 0.0)
    longer = VineSimulator(VineModel(body_count=24, length=0.2, obstacles=OBSTACLES))
    assert longer.qp._banded.kl == sim.qp._banded.kl  # the band does not grow with N


@pytest.mark.parametrize("friction", [0.0, 0.2])
def test_compiled_active_set_guess_equals_reference(friction):
    from sim_vine._kernels import guess_active
    model = VineModel(body_count=10, length=0.2, obstacles=OBSTACLES, friction=friction)
    sim = VineSimulator(model)
    rng = np.random.default_rng(2)
    q = model.configuration(rng.uniform(-0.3, 0.3, model.pin_count))
    v = rng.standard_normal(q.shape)
    design = sim.design_space().defaults()
    params, _ = sim._parameters(design)
    problem = build_problem(sim.arrays, sim.layout, q, v, 0.1, params, 0.01)
    row_scale = sim.qp.scaled_data(problem)[-1]
    x = rng.standard_normal(q.shape)
    scaled_y = rng.uniform(-2.0, 1.0, sim.layout.size)
    fast = guess_active(sim.layout.row_bodies, problem.row_values, x, problem.lower, row_scale,
                        scaled_y, sim.layout.equality_count, sim.layout.contact.start,
                        friction == 0.0, problem.tangent_rows)
    reference = sim.qp.guess_active_reference(problem, x, row_scale, scaled_y)
    np.testing.assert_array_equal(fast, reference)
    assert 0 < fast[sim.layout.contact].sum() < sim.layout.contact.stop - sim.layout.contact.start


@pytest.mark.parametrize("friction", [0.0, 0.2])
def test_refinement_finds_the_active_set_from_any_guess(runner, friction):
    from sim_vine.step import step
    sim = VineSimulator(VineModel(body_count=8, length=0.2, friction=friction,
                                  obstacles=(Wall([0.35, -0.2], [0.15, 0.2], 0.02),)))
    states, design = runner(sim, 150)
    params, _ = sim._parameters(design)
    state = states[-1]
    _, _, solved, problem = step(sim.arrays, sim.layout, sim.qp, state.body_q,
                                 state.body_qd, 0.1, params, 0.01)
    contact = sim.layout.contact
    assert solved.exact and solved.active[contact].sum() == 1
    for guess_contacts in (False, True):
        guess = np.zeros(sim.layout.size, dtype=bool)
        guess[: sim.layout.equality_count] = True
        guess[contact] = guess_contacts
        refined = sim.qp.refine(problem, guess)
        assert refined is not None and refined.exact
        np.testing.assert_allclose(refined.v, solved.v, rtol=1e-9, atol=1e-12)
        np.testing.assert_array_equal(refined.active, solved.active)
        np.testing.assert_allclose(refined.y, solved.y, rtol=1e-8, atol=1e-14)


@pytest.mark.parametrize("friction", [0.0, 0.1])
def test_compiled_exact_solution_equals_the_reference_steps(runner, friction):
    # exact_at = banded solve + optimality check (+ the μ = 0 edge rule) in one call
    from sim_vine.kkt import exact_at
    from sim_vine.scene import make_simulator

    sim = make_simulator(scene="wall", bodies=8, friction=friction)
    states, design = runner(sim, 90)  # the tip slides along the wall
    params, _ = sim._parameters(design)
    problem = build_problem(sim.arrays, sim.layout, states[-1].body_q, states[-1].body_qd,
                            0.1, params, 0.01)
    solution = sim.qp.solve(problem, warm_v=states[-1].body_qd)
    active = solution.active
    assert active[sim.layout.contact].any()
    Px, Ax, q_lin, lower, _, col_scale, row_scale = sim.qp.scaled_data(problem)
    n = 3 * sim.model.body_count
    reference = sim.qp._banded.solve_lapack(
        Px, Ax, active, np.concatenate([-q_lin, np.where(active, lower, 0.0)]))
    args = (sim.qp._banded.layout, Px, Ax, q_lin, lower, col_scale)
    tail = (sim.layout.row_bodies, problem.row_values, problem.lower,
            sim.layout.contact.start, 1e-9, friction == 0.0, problem.tangent_rows)
    ok, v, scaled_y = exact_at(*args, active, *tail)
    assert ok
    np.testing.assert_allclose(v.reshape(-1), reference[:n] * col_scale, rtol=1e-10,
                               atol=1e-13)
    np.testing.assert_allclose(scaled_y, np.where(active, reference[n:], 0.0), rtol=1e-10,
                               atol=1e-13)
    # without its contact rows the tip would enter the wall: not optimal
    free = active.copy()
    free[sim.layout.contact] = False
    assert not exact_at(*args, free, *tail)[0]
    if friction == 0.0:  # the impulse on the other (coinciding) cone edge breaks the rule
        start = sim.layout.contact.start
        swapped = active.copy()
        swapped[start::2], swapped[start + 1::2] = active[start + 1::2], active[start::2]
        assert not exact_at(*args, swapped, *tail)[0]


@pytest.mark.parametrize("implicit", [True, False])
@pytest.mark.parametrize("friction", [0.0, 0.3])
def test_compiled_step_vjp_equals_reference(implicit, friction, backward_matches):
    model = VineModel(body_count=9, length=0.3, obstacles=OBSTACLES, gravity=(0.3, -9.8),
                      implicit_springs=implicit, friction=friction, contact="bodies")
    sim = VineSimulator(model, check_initial_pose=False)
    rng = np.random.default_rng(1)  # a pose with points in the circle, polygon and wall
    q = model.configuration(rng.uniform(-0.4, 0.4, model.pin_count),
                            rng.uniform(0, 0.03, model.prismatic_count))
    v = rng.standard_normal(q.shape)
    design = sim.design_space().defaults()
    design["joint.stiffness"] = rng.uniform(0.01, 0.1, model.pin_count)
    design["joint.rest_angle"] = np.random.default_rng(7).uniform(-0.5, 0.5, model.pin_count)
    design["ground.friction"] = np.random.default_rng(8).uniform(0.0, 5.0, model.body_count)
    params, _ = sim._parameters(design)
    g_q, g_v = rng.standard_normal(q.shape), rng.standard_normal(q.shape)
    dt = 0.01
    # the compiled backward pass against the NumPy one on the same solution and adjoint,
    # then whole VJPs
    solution, _ = backward_matches(sim, q, v, 0.1, params, dt, g_q, g_v, atol=1e-13)
    assert solution.active[sim.layout.contact].sum() >= 3  # contact curvature exercised
