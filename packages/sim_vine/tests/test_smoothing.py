"""Smoothed contact (``contact_smoothing`` κ > 0): gradients that hold across contact events.

With hard contact a step is only piecewise smooth: its VJP is the exact derivative of the
piece it is on, but over a trajectory with contact changes the loss is a staircase of such
pieces, and finite differences at the steps a fit takes disagree with it, even in sign. With
κ > 0 every step is a smooth function of its inputs.
"""

import numpy as np
import pytest

from codesign.testing import check_step_gradients, gradcheck
from sim_vine import make_simulator
from sim_vine.contact_events import NAMES, SlidingTrajectory, contact_event_rows
from sim_vine.step import build_problem

RATE = np.array([0.1])


def _trajectory_check(kappa: float):
    """Gradcheck a keypoint loss summed over 2.5 s of a 20-body vine sliding through the
    cluttered scene (μ 0.3; contacts made, broken and switching between stick and slip)
    in the relative change of K, C and μ, at a 1 % finite-difference step."""
    trajectory = SlidingTrajectory(kappa)
    zero = {name: np.asarray(0.0) for name in NAMES}
    gradient = {name: np.asarray(value) for name, value in trajectory.gradient().items()}
    return gradcheck(lambda x: trajectory.loss(x["relative"]), {"relative": zero},
                     {"relative": gradient}, eps=1e-2, tolerance=1e-3, split="leaf")


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



def test_the_contact_event_rows_give_the_adjoint_and_the_differences_that_miss_it():
    # the README's table (examples/vine/contact_events.py), two of its steps: with hard
    # contact a 10 % step of K lands 8x below the adjoint's slope while a 1e-4 step agrees;
    # smoothed, both agree
    hard, smoothed = contact_event_rows((0.0, 1e-6), relative_steps=(1e-1, 1e-4))
    assert (hard["contact_smoothing"], smoothed["contact_smoothing"]) == (0.0, 1e-6)
    for row in (hard, smoothed):
        for name in NAMES:
            assert row["differences"][name][1] == pytest.approx(row["gradient"][name],
                                                                rel=1e-3)
    stiffness = hard["gradient"]["joint.stiffness"]
    assert abs(hard["differences"]["joint.stiffness"][0]) < 0.2 * abs(stiffness)
    assert smoothed["differences"]["joint.stiffness"][0] == pytest.approx(
        smoothed["gradient"]["joint.stiffness"], rel=0.1)
    with pytest.raises(ValueError, match="name must be one of"):
        SlidingTrajectory(0.0, steps=2).central_difference("joint.mass", 1e-2)
