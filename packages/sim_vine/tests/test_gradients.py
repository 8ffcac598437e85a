"""Step VJPs against central finite differences (codesign.testing), float64, tol 1e-6.

The finite-difference step is 1e-5: the loss ⟨w, s_n⟩ sums terms much larger than itself
(body angular velocities), so its round-off is above the kit's floor estimate at 1e-6.
"""

import numpy as np
import pytest

from codesign.testing import check_step_gradients, gradcheck, run_conformance
from sim_vine import VineModel, VineSimulator, VineState, rectangle
from sim_vine.kinematics import (
    keypoints,
    keypoints_vjp,
    tip_position,
    tip_position_vjp,
    vine_length,
)
from sim_vine.obstacles import Circle, Polygon, Wall

EPS = 1e-5
RATE = np.array([0.1])


def _in_contact(runner, obstacles, friction, growth="every_prismatic", steps=150, **options):
    sim = VineSimulator(VineModel(body_count=8, length=0.2, obstacles=obstacles,
                                  friction=friction, growth=growth, **options))
    states, design = runner(sim, steps, rate=0.1)
    return sim, states[-1], design


def _active_contacts(sim, state, design):
    from sim_vine.step import step
    params, offset = sim._parameters(design)
    _, _, solution, _ = step(sim.arrays, sim.layout, sim.qp, state.body_q,
                             state.body_qd, 0.1 + offset, params, 0.01)
    return int(solution.active[sim.layout.contact].sum())


def test_free_vine_single_and_multi_step(runner, small_vine):
    states, design = runner(small_vine, 5)
    for steps in (1, 5):
        check_step_gradients(small_vine, dt=0.01, steps=steps, state=states[-1], action=RATE,
                             design=design, eps=EPS).assert_ok()


def test_explicit_springs(runner):
    sim = VineSimulator(VineModel(body_count=6, initial_angles=0.2, implicit_springs=False,
                                  stiffness=0.001, damping=1e-5))
    states, design = runner(sim, 3, dt=0.002)
    sim.check_time_step(design, 0.002)
    report = check_step_gradients(sim, dt=0.002, steps=3, state=states[-1], action=RATE,
                                  design=design, eps=EPS)
    # Δt 2 ms: the ground friction's share of this loss is below its finite-difference
    # round-off (test_ground_friction_gradients_free checks it with the tip's loss)
    report.errors.pop("design.ground.friction")
    report.assert_ok()


@pytest.mark.parametrize("obstacles, friction, growth", [
    ((Wall([0.35, -0.2], [0.15, 0.2], 0.02),), 0.2, "every_prismatic"),
    ((Wall([0.35, -0.2], [0.15, 0.2], 0.02),), 0.0, "every_prismatic"),
    ((rectangle([0.32, 0.0], [0.1, 0.1], 0.4),), 0.1, "tip"),
    ((Circle([0.3, 0.03], 0.05),), 0.3, "every_prismatic"),
], ids=["wall-friction", "wall-frictionless", "rectangle-tip-growth", "circle-friction"])
def test_in_contact_single_and_multi_step(runner, obstacles, friction, growth, tip_gradcheck):
    steps_to_contact = 80 if isinstance(obstacles[0], Circle) else 150
    sim, state, design = _in_contact(runner, obstacles, friction, growth, steps_to_contact)
    assert _active_contacts(sim, state, design) >= 1
    report = check_step_gradients(sim, dt=0.01, steps=1, state=state, action=RATE,
                                  design=design, eps=EPS)
    if friction == 0:  # at μ = 0 the gradient is one-sided, checked below
        report.errors.pop("design.contact.friction")
    report.assert_ok()
    report = tip_gradcheck(sim, state, design, steps=4)
    if friction == 0:
        report.errors.pop("design.contact.friction")
    report.assert_ok()
    if friction > 0:  # the friction coefficient matters here
        assert abs(report.pairs["design.contact.friction"][0][0]) > 1e-6


def test_friction_gradient_at_zero_is_the_right_derivative(runner):
    sim, state, design = _in_contact(runner, (Wall([0.35, -0.2], [0.15, 0.2], 0.02),), 0.0)
    w = np.random.default_rng(0).standard_normal(state.body_q.shape)

    def loss(friction):
        changed = {**design, "contact.friction": np.asarray(friction)}
        return float(np.sum(w * sim.step(state, RATE, changed, 0.01).body_q))

    _, _, g = sim.step_vjp(state, RATE, design, 0.01,
                           VineState(body_q=w, body_qd=np.zeros_like(w)))
    h = 1e-5  # μ ≲ 1e-6 makes the two cone edges nearly dependent and the QP ill-posed
    right = (-3 * loss(0.0) + 4 * loss(h) - loss(2 * h)) / (2 * h)
    assert abs(right) > 1e-6
    assert float(g["contact.friction"]) == pytest.approx(right, rel=1e-5)


def test_conformance_suite(runner):
    sim = VineSimulator(VineModel(body_count=6, initial_angles=0.1, gravity=(0.0, -9.81),
                                  friction=0.2,
                                  obstacles=(Polygon([[0.3, -0.1], [0.4, 0.1], [0.3, 0.1]]),)))
    states, design = runner(sim, 3)
    run_conformance(sim, dt=0.01, state=states[-1], action=RATE, design=design, eps=EPS)


@pytest.mark.parametrize("count", [2, 7])
def test_tip_and_keypoint_vjps(count):
    model = VineModel(body_count=7, initial_angles=[0.3, -0.2, 0.4, 0.1])
    q = model.configuration(model.initial_angles, [0.01, 0.02, 0.0])
    rng = np.random.default_rng(0)
    w_tip, w_points = rng.standard_normal(2), rng.standard_normal((count, 2))
    gradcheck(lambda x: float(w_tip @ tip_position(model, x["q"])), {"q": q},
              {"q": tip_position_vjp(model, q, w_tip)}).assert_ok()
    gradcheck(lambda x: float(np.sum(w_points * keypoints(model, x["q"], count))), {"q": q},
              {"q": keypoints_vjp(model, q, count, w_points)}).assert_ok()
    points = keypoints(model, q, count)
    np.testing.assert_allclose(points[0], model.base[:2], atol=1e-15)
    np.testing.assert_allclose(points[-1], tip_position(model, q))
    spacing = np.linalg.norm(np.diff(points, axis=0), axis=1)
    # equal arc-length spacing: a chord is shorter than its arc only where it cuts a corner
    arc = vine_length(model, q) / (count - 1)
    assert np.all(spacing <= arc * (1 + 1e-12))
    if count > 2:
        assert np.max(spacing) == pytest.approx(arc, rel=1e-12)


REST_ANGLES = np.array([0.05, -0.1, 0.08, 0.04])


@pytest.mark.parametrize("implicit", [True, False])
def test_rest_angle_gradients_free(runner, implicit):
    # explicit springs: the soft, lightly damped vine of test_explicit_springs (stable Δt)
    options = ({"body_count": 8} if implicit else
               {"body_count": 6, "stiffness": 0.001, "damping": 1e-5})
    dt = 0.01 if implicit else 0.002
    rest = REST_ANGLES[: 1 + (options["body_count"] - 1) // 2]
    sim = VineSimulator(VineModel(initial_angles=0.1, rest_angle=rest, gravity=(0.0, -9.81),
                                  implicit_springs=implicit, **options))
    states, design = runner(sim, 5, dt=dt)
    sim.check_time_step(design, dt)
    report = check_step_gradients(sim, dt=dt, steps=3, state=states[-1], action=RATE,
                                  design=design, eps=EPS)
    if not implicit:
        report.errors.pop("design.ground.friction")  # as in test_explicit_springs
    report.assert_ok()
    _, _, g_design = sim.step_vjp(states[-1], RATE, design, dt, VineState(
        body_q=np.ones_like(states[-1].body_q), body_qd=np.zeros_like(states[-1].body_q)))
    assert np.all(np.abs(g_design["joint.rest_angle"][1:]) > 1e-8)  # it moves the vine


def test_rest_angle_gradients_in_contact(runner, tip_gradcheck):
    sim, state, design = _in_contact(runner, (Wall([0.35, -0.2], [0.15, 0.2], 0.02),), 0.2,
                                     rest_angle=REST_ANGLES)
    assert _active_contacts(sim, state, design) >= 1
    check_step_gradients(sim, dt=0.01, steps=1, state=state, action=RATE, design=design,
                         eps=EPS).assert_ok()
    report = tip_gradcheck(sim, state, design, steps=4)
    report.assert_ok()
    assert np.max(np.abs(report.pairs["design.joint.rest_angle"][0])) > 1e-6


@pytest.mark.parametrize("implicit", [True, False])
def test_ground_friction_gradients_free(runner, implicit, tip_gradcheck):
    options = ({"body_count": 8} if implicit else
               {"body_count": 6, "stiffness": 0.001, "damping": 1e-5})
    dt = 0.01 if implicit else 0.002
    ground = np.linspace(1.0, 4.0, options["body_count"])
    sim = VineSimulator(VineModel(initial_angles=0.1, ground_friction=ground,
                                  gravity=(0.0, -9.81), implicit_springs=implicit, **options))
    states, design = runner(sim, 5, dt=dt)
    sim.check_time_step(design, dt)
    if implicit:  # the kit's random loss over every state leaf
        check_step_gradients(sim, dt=dt, steps=3, state=states[-1], action=RATE,
                             design=design, eps=EPS).assert_ok()
    # with explicit springs (Δt 2 ms) the ground friction's share of the kit's loss is below
    # that loss's finite-difference round-off (the VJP agrees with differences at steps 1e-3
    # to 1e-9 relative); the tip's position-only loss resolves it
    report = tip_gradcheck(sim, states[-1], design, steps=3, dt=dt)
    report.assert_ok()
    _, _, g_design = sim.step_vjp(states[-1], RATE, design, dt, VineState(
        body_q=np.ones_like(states[-1].body_q), body_qd=np.zeros_like(states[-1].body_q)))
    assert np.all(np.abs(g_design["ground.friction"]) > 1e-10)  # it slows every body


@pytest.mark.parametrize("linear_density", [None, 0.05])
def test_ground_friction_gradients_in_contact(runner, linear_density, tip_gradcheck):
    sim, state, design = _in_contact(runner, (Wall([0.35, -0.2], [0.15, 0.2], 0.02),), 0.2,
                                     ground_friction=2.0, linear_density=linear_density)
    assert _active_contacts(sim, state, design) >= 1
    check_step_gradients(sim, dt=0.01, steps=1, state=state, action=RATE, design=design,
                         eps=EPS).assert_ok()
    report = tip_gradcheck(sim, state, design, steps=4)
    report.assert_ok()
    assert np.max(np.abs(report.pairs["design.ground.friction"][0])) > 1e-8
