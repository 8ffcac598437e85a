"""Smoothed contact (``contact_smoothing`` κ > 0): gradients that hold across contact events.

With hard contact a step is only piecewise smooth: its VJP is the exact derivative of the
piece it is on, but over a trajectory with contact changes the loss is a staircase of such
pieces, and finite differences at the steps a fit takes disagree with it, even in sign. With
κ > 0 every step is a smooth function of its inputs.
"""

import numpy as np
import pytest

from codesign.testing import check_step_gradients, gradcheck
from sim_vine import VineState, make_simulator
from sim_vine.kinematics import keypoints, keypoints_vjp
from sim_vine.step import build_problem

RATE = np.array([0.1])
NAMES = ("joint.stiffness", "joint.damping", "contact.friction")
STEPS = 250


def _trajectory_check(kappa: float):
    """Gradcheck a keypoint loss summed over 2.5 s of a 20-body vine sliding through the
    cluttered scene (μ 0.3; contacts made, broken and switching between stick and slip)
    in the relative change of K, C and μ, at a 1 % finite-difference step."""
    sim = make_simulator(scene="cluttered", bodies=20, friction=0.3, contact_smoothing=kappa,
                         tie=["joint.stiffness", "joint.damping"])
    design = sim.design_space().defaults()
    weights = np.random.default_rng(0).standard_normal((8, 2))

    def run(relative, record=False):
        changed = {**design, **{name: design[name] * (1.0 + relative[name]) for name in NAMES}}
        state, total, states = sim.initial_state(changed), 0.0, []
        for _ in range(STEPS):
            states.append(state)
            state = sim.step(state, RATE, changed, 0.01)
            total += float(np.sum(weights * keypoints(sim.model, state.body_q, 8)))
        return (total, states + [state]) if record else total

    zero = {name: np.asarray(0.0) for name in NAMES}
    _, states = run(zero, record=True)
    g_next = VineState(body_q=np.zeros_like(states[0].body_q),
                       body_qd=np.zeros_like(states[0].body_qd))
    g_design = {}
    for k in range(STEPS, 0, -1):
        g_q = g_next.body_q + keypoints_vjp(sim.model, states[k].body_q, 8, weights)
        g_next, _, g = sim.step_vjp(states[k - 1], RATE, design, 0.01,
                                    VineState(body_q=g_q, body_qd=g_next.body_qd))
        for name in NAMES:
            g_design[name] = g_design.get(name, 0.0) + g[name] * design[name]
    return gradcheck(lambda x: run(x["relative"]), {"relative": zero},
                     {"relative": g_design}, eps=1e-2, tolerance=1e-3, split="leaf")


def test_smoothed_gradients_match_finite_differences_along_a_trajectory_with_contacts():
    smoothed = _trajectory_check(1e-6)
    smoothed.assert_ok()
    # the same check with hard contact: the piecewise derivative misses what a 1 % step sees
    assert not _trajectory_check(0.0).passed


def test_smoothed_step_and_its_vjp():
    sim = make_simulator(scene="wall", bodies=8, friction=0.1, contact_smoothing=1e-6)
    design = sim.design_space().defaults()
    state = sim.initial_state(design)
    for _ in range(90):  # the tip slides along the wall
        state = sim.step(state, RATE, design, 0.01)
    params, _ = sim._parameters(design)
    problem = build_problem(sim.arrays, sim.layout, state.body_q, state.body_qd, 0.1,
                            params, 0.01)
    solution = sim.qp.solve(problem, warm_v=state.body_qd)
    contact = sim.layout.contact
    # every contact row carries an impulse u > 0 and a slack s > 0 with s u = κ
    slack = sim.qp.a_matrix(problem.row_values) @ solution.v.reshape(-1) - problem.lower
    np.testing.assert_allclose((slack * -solution.y)[contact], 1e-6, rtol=1e-6)
    # the point touching the wall pushes hardest, far more than a point away from it
    phi = sim.model.obstacle_distances(state.body_q)[0].reshape(-1)
    impulse = -solution.y[contact].reshape(-1, 2).sum(axis=1)
    assert phi.min() < 1e-3 and np.argmax(impulse) == np.argmin(phi)
    assert impulse.max() > 10 * impulse.min()
    # a finite-difference step inside the barrier's curvature (the tip floats about
    # κ Δt / u above the wall)
    check_step_gradients(sim, dt=0.01, steps=1, state=state, action=RATE, design=design,
                         eps=1e-6).assert_ok()


def test_contact_smoothing_is_checked():
    with pytest.raises(ValueError, match="contact_smoothing"):
        make_simulator(contact_smoothing=-1.0)
