"""A tip stuck in a corner where two walls meet: redundant active contact rows.

Several active sets fit there (two coordinates, up to four cone edges), and the KKT matrix of
a redundant set is singular. The step must stay exact and a pure function of its inputs, and
its VJP bounded and equal to finite differences.
"""

import numpy as np

from codesign.testing import check_step_gradients
from sim_vine.state import VineState
from sim_vine.step import build_problem, step

EPS = 1e-7
"""Finite-difference step: the stuck tip's unused cone edges bind within about 1e-6 m (a
kink of the step), so the kit's usual 1e-5 steps across it."""


def _tip_rows(sim):
    """The four contact rows of the tip (two walls × two cone edges)."""
    start = sim.layout.contact.start
    return np.arange(start + sim.layout.pair_count * 2 - 4, start + sim.layout.pair_count * 2)


def test_step_in_the_corner_is_exact_and_its_vjp_matches_finite_differences(corner):
    # a fit's calls: the step, then the same step again (a reverse sweep recomputing it
    # from a checkpoint) and its VJP
    sim, states, design, rate = corner
    action = np.array([rate])
    params, _ = sim._parameters(design)
    state = states[0]
    for k in range(len(states) + 2):
        next_state = sim.step(state, action, design, 0.01)
        _, _, solution, _ = step(sim.arrays, sim.layout, sim.qp, state.body_q, state.body_qd,
                                 rate, params, 0.01)
        assert solution.exact  # not OSQP's iterate (accurate to eps 1e-4 only)
        g = VineState(body_q=np.ones_like(state.body_q), body_qd=np.zeros_like(state.body_qd))
        grad = sim.step_vjp(state, action, design, 0.01, g)[0]
        assert max(np.max(np.abs(grad.body_q)), np.max(np.abs(grad.body_qd))) < 1e4
        if k >= len(states) - 1:
            assert solution.active[_tip_rows(sim)].sum() >= 2  # held by both walls
            report = check_step_gradients(sim, dt=0.01, steps=1, state=state,
                                          action=action, design=design, eps=EPS)
            # the stuck vine barely moves: at c_g = 0 the ground friction's share of the
            # loss is below its round-off at this step (checked in test_gradients.py)
            report.errors.pop("design.ground.friction")
            report.assert_ok()
        state = next_state


def test_the_adjoint_of_a_redundant_active_set_is_bounded(corner):
    # all four tip rows held: a singular KKT matrix; the adjoint's velocity part must equal
    # that of an independent subset holding the tip the same way, and stay bounded
    sim, states, design, rate = corner
    state = states[-1]
    params, _ = sim._parameters(design)
    problem = build_problem(sim.arrays, sim.layout, state.body_q, state.body_qd, rate,
                            params, 0.01)
    solution = sim.qp.solve(problem, warm_v=state.body_qd)
    independent = solution.active
    redundant = independent.copy()
    redundant[_tip_rows(sim)] = True
    assert redundant.sum() > independent.sum()
    g_v = np.random.default_rng(0).standard_normal(3 * sim.model.body_count)
    w_ok, z_ok = sim.qp.adjoint(problem, independent, g_v)
    w, z = sim.qp.adjoint(problem, redundant, g_v)
    assert np.all(np.isfinite(z)) and np.max(np.abs(z)) < 1e3 * np.max(np.abs(z_ok))
    np.testing.assert_allclose(w, w_ok, rtol=1e-6, atol=1e-9 * np.max(np.abs(w_ok)))


def test_step_is_a_pure_function_of_its_inputs_in_the_corner(corner):
    # the same state, action and design give the same bits whatever ran before: step_vjp
    # calls (a fit's reverse sweep), other states and designs in between
    sim, plain, design, rate = corner
    action = np.array([rate])
    for _ in range(6):
        plain.append(sim.step(plain[-1], action, design, 0.01))
    other = {**design, "contact.friction": np.asarray(0.6),
             "joint.stiffness": 3 * design["joint.stiffness"]}
    rng = np.random.default_rng(1)
    mixed = [plain[0]]
    for k in range(len(plain) - 1):
        g = VineState(body_q=rng.standard_normal(plain[0].body_q.shape),
                      body_qd=np.zeros_like(plain[0].body_qd))
        sim.step_vjp(mixed[-1], action, design, 0.01, g)
        if k % 5 == 4:
            shaken = VineState(body_q=mixed[-1].body_q, body_qd=mixed[-1].body_qd
                               + 1e-3 * rng.standard_normal(mixed[-1].body_qd.shape))
            sim.step(shaken, action, other, 0.01)
        mixed.append(sim.step(mixed[-1], action, design, 0.01))
    for a, b in zip(plain, mixed, strict=True):
        np.testing.assert_array_equal(a.body_q, b.body_q)
        np.testing.assert_array_equal(a.body_qd, b.body_qd)
