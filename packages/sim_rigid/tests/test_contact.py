"""Penalty frictional contact: the signed distances, the force law, a box resting on and
sliding along a plane (penetration m g / kn, deceleration μ g), a point resting on a box
obstacle, gradients through contact, and bad obstacles."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from codesign.testing import gradcheck
from codesign.tree import tree_vdot
from sim_rigid import RigidState
from sim_rigid.contact import contact_force, signed_distance
from sim_rigid.description import DescriptionError, load_description, load_obstacles
from sim_rigid.scene import make_simulator
from sim_rigid.step import step, step_vjp

GRAVITY = 9.81
# Finite-difference steps per input of the gradient checks through contact: about 1e-4 of
# each coefficient's value (kn and kd are 1e4: their derivatives are small, so a tiny step
# leaves only the solves' round-off), 1e-7 for the state and the contact points (mm deep
# contacts, stiff forces: larger steps see the force's curvature).
CONTACT_EPS = {"contact_stiffness": 1.0, "contact_damping": 1.0, "friction": 1e-5,
               "friction_stiffness": 1e-3, "joint_damping": 1e-5, "link_mass": 1e-5}


def _with_obstacles(model, obstacles, **coefficients):
    return dataclasses.replace(model, **load_obstacles(obstacles), **coefficients)


def test_signed_distances_of_a_plane_and_a_box(models):
    model = _with_obstacles(models.arm4(), [
        {"type": "plane", "point": [0, 0, 1], "normal": [0, 0, 2]},
        {"type": "box", "center": [1, 0, 0], "half_extents": [0.5, 0.2, 0.1],
         "rpy": [0, 0, np.pi / 2]}])
    distance, normal = signed_distance(model, 0, [3.0, -2.0, 0.7])
    assert distance == pytest.approx(-0.3) and np.allclose(normal, [0, 0, 1])
    # turned a quarter about z, the box's long side lies along y: nearest face +x at 0.2
    distance, normal = signed_distance(model, 1, [1.15, 0.1, 0.0])
    assert distance == pytest.approx(-0.05) and np.allclose(normal, [1, 0, 0])
    distance, _ = signed_distance(model, 1, [1.0, 0.0, 0.4])
    assert distance == pytest.approx(0.3)


def test_the_force_is_continuous_at_first_contact_and_friction_at_the_slip_switch(models):
    model = _with_obstacles(models.arm4(), [{"type": "plane"}])

    coefficients = np.array([[1e4, 1e3, 0.5, 100.0]])  # kn, kd, μ, kt

    def force(z, velocity):
        return contact_force(model, coefficients, np.array([[0.0, 0.0, z]]),
                             np.array([velocity]))[0]

    # approaching fast: the damping, kd d ḋ, vanishes with the depth
    assert np.linalg.norm(force(-1e-9, [0.0, 0.0, -10.0])) < 1e-4
    assert np.all(force(1e-6, [0.0, 0.0, -10.0]) == 0.0)
    # kt |v_t| = μ f_n at the switch: both branches give the same friction
    f_n = 1e4 * 1e-3
    switch = 0.5 * f_n / 100.0
    below, above = force(-1e-3, [switch * (1 - 1e-9), 0, 0]), force(-1e-3,
                                                                     [switch * (1 + 1e-9), 0, 0])
    np.testing.assert_allclose(below, above, atol=1e-8)
    np.testing.assert_allclose(below, [-0.5 * f_n, 0.0, f_n], rtol=1e-8)


def _box(models, **options):
    return make_simulator(robot=models.box_description(), obstacles=[{"type": "plane"}],
                          **options)


def test_a_box_rests_on_a_plane_sunk_by_its_weight_over_the_stiffness(models):
    # the paper's damping grows with the depth, so at a sinking of 0.25 mm it takes kd of
    # 1e5 N s/m² to settle the bounce within the 0.3 s
    sim = _box(models, contact_stiffness=1e4, contact_damping=1e5)
    design = sim.design_space().defaults()
    state = sim.initial_state(design)
    for _ in range(300):
        state = sim.step(state, np.zeros(0), design, 1e-3)
    sinking = 1.0 * GRAVITY / (4 * 1e4)  # four corners share the weight
    assert state.joint_q[2] == pytest.approx(0.1 - sinking, abs=1e-4 * sinking)
    np.testing.assert_allclose(state.joint_qd, 0.0, atol=1e-6)


@pytest.mark.parametrize("mu", [0.2, 0.5])
def test_a_sliding_box_decelerates_at_mu_g(models, mu):
    sim = _box(models, contact_stiffness=1e4, contact_damping=1e5, friction=mu)
    design = sim.design_space().defaults()
    state = sim.initial_state(design)
    for _ in range(100):
        state = sim.step(state, np.zeros(0), design, 1e-3)
    push = np.array([2.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    state = RigidState(state.joint_q, push, state.joint_q, push, np.asarray(0, np.int64))
    speeds = []
    for _ in range(150):
        state = sim.step(state, np.zeros(0), design, 1e-3)
        speeds.append(state.joint_qd[0])
    slope = np.polyfit(np.arange(50, 150) * 1e-3, speeds[50:], 1)[0]
    assert slope == pytest.approx(-mu * GRAVITY, rel=2e-3)


def test_a_point_rests_on_a_box_obstacle(models):
    ball = {"links": [{"name": "ball", "mass": 0.5, "inertia": [1e-4] * 3,
                       "contacts": [[0.0, 0.0, 0.0]]}],
            "joints": [{"name": "drop", "type": "prismatic", "parent": "world",
                        "child": "ball", "axis": [0, 0, 1], "initial": 0.31}]}
    sim = make_simulator(robot=ball, contact_stiffness=1e4, contact_damping=1e6,
                         obstacles=[{"type": "box", "center": [0, 0, 0.15],
                                     "half_extents": [0.2, 0.2, 0.15]}])
    design = sim.design_space().defaults()
    state = sim.initial_state(design)
    for _ in range(500):
        state = sim.step(state, np.zeros(1), design, 1e-3)
    assert state.joint_q[0] == pytest.approx(0.3 - 0.5 * GRAVITY / 1e4, abs=1e-7)


def _gradcheck_box(models, velocity, *, steps, friction_sharpness=0.0):
    model = _with_obstacles(load_description(models.box_description()), [{"type": "plane"}],
                            contact_stiffness=1e4, contact_damping=1e4, friction=0.4,
                            friction_stiffness=50.0, friction_sharpness=friction_sharpness)
    params = {k: np.array(v, dtype=np.float64) for k, v in model.parameters().items()}
    # sunk 1 mm, level but for a small tilt: every bottom corner in contact, no top one
    q = np.array([0.0, 0.0, 0.099, 0.02, 0.01, -0.015])
    state = RigidState(q, velocity, q - 1e-3 * velocity, velocity,
                       np.asarray(0, dtype=np.int64))
    fields = ("joint_q", "joint_qd", "joint_q_prev", "joint_qd_prev")
    trajectory = [state]
    for _ in range(steps):
        trajectory.append(step(model, trajectory[-1], np.zeros(0), params, 1e-3))
    trajectory.pop()
    rng = np.random.default_rng(0)
    weights = RigidState(*(rng.standard_normal(6) for _ in fields), np.asarray(0, np.int64))

    def loss(inputs):
        current = RigidState(*(inputs["state"][f] for f in fields), state.step_count)
        merged = params | {k: v for k, v in inputs.items() if k in params}
        for _ in range(steps):
            current = step(model, current, np.zeros(0), merged, 1e-3)
        return tree_vdot(current, weights)

    g_state, g_params = weights, {k: 0.0 for k in params}
    for before in reversed(trajectory):
        g_state, _, g_p = step_vjp(model, before, np.zeros(0), params, 1e-3, g_state)
        g_params = {k: g_params[k] + g_p[k] for k in params}
    inputs = {"state": {f: getattr(state, f) for f in fields}} | params
    grads = {"state": {f: getattr(g_state, f) for f in fields}} | g_params
    for group in inputs:
        gradcheck(loss, inputs, grads, eps=CONTACT_EPS.get(group, 1e-7), relative_step=False,
                  groups=[group], directions=2).assert_ok()


def test_gradients_through_sliding_contact(models):
    _gradcheck_box(models, np.array([1.0, 0.5, -0.05, 0.3, -0.2, 0.1]), steps=5)


def test_gradients_through_sticking_contact(models):
    # tangential speeds of mm/s: kt |v_t| stays below μ f_n at every corner
    _gradcheck_box(models, np.array([2e-3, -1e-3, -0.01, 0.01, 0.005, -0.01]), steps=5)


@pytest.mark.parametrize(("obstacles", "message"), [
    ([{"type": "cone"}], r"obstacles\[0\] must be a mapping with type one of"),
    ([{"type": "plane", "normal": [0, 0, 0]}], r"obstacles\[0\] \(plane\) has a zero normal"),
    ([{"type": "box", "center": [0, 0, 0], "half_extents": [1, 0, 1]}],
     r"half_extents \[1.0, 0.0, 1.0\] m: each must be > 0"),
    ([{"type": "box", "center": [0, 0, 0], "half_extents": [1, 1, 1], "size": 2}],
     r"unknown keys \['size'\]"),
])
def test_bad_obstacles_get_clear_errors(obstacles, message):
    with pytest.raises(DescriptionError, match=message):
        load_obstacles(obstacles)


def test_bad_contact_points_get_clear_errors(models):
    description = models.box_description()
    description["links"][0]["contacts"] = [[0.0, 0.1]]
    with pytest.raises(DescriptionError, match=r"'box' contacts\[0\] must be a list of 3"):
        load_description(description)


def test_conformance_of_a_box_pressed_into_a_plane(models):
    from codesign.testing import run_conformance

    # sunk 1 mm and tilted: the four bottom corners stay in contact over the suite's steps
    sim = make_simulator(robot=models.box_description(), obstacles=[{"type": "plane"}],
                         contact_damping=1e4, friction_stiffness=50.0,
                         initial_positions=[0.0, 0.0, 0.099, 0.02, 0.01, -0.015])
    # the suite scales its one finite-difference step by the design's size, which kn and kd
    # (1e4) would make millimetres for the contact points: the contact parameters are
    # checked with their own steps by the gradient tests above
    design = {name: value for name, value in sim.design_space().defaults().items()
              if not name.startswith("contact.")}
    run_conformance(sim, dt=1e-3, design=design, steps=(1, 4), rollout_steps=3, substeps=2)


def test_gradients_through_smooth_friction(models):
    # speeds around the switch (kt |v_t| ~ μ f_n): the smooth law's curved part
    _gradcheck_box(models, np.array([0.05, -0.03, -0.01, 0.1, 0.05, -0.1]), steps=3,
                   friction_sharpness=4.0)


def test_smooth_friction_keeps_the_limits_and_gives_2_to_the_minus_1_over_p_at_the_switch(
        models):
    coefficients = np.array([[1e4, 0.0, 0.5, 100.0]])  # kn, kd, μ, kt
    f_n = 1e4 * 1e-3
    switch = 0.5 * f_n / 100.0

    def friction(speed, sharpness):
        model = _with_obstacles(models.arm4(), [{"type": "plane"}],
                                friction_sharpness=sharpness)
        return contact_force(model, coefficients, np.array([[0.0, 0.0, -1e-3]]),
                             np.array([[speed, 0.0, 0.0]]))[0, 0]

    assert friction(switch, 4.0) == pytest.approx(2 ** -0.25 * friction(switch, 0.0), rel=1e-12)
    assert friction(1e-3 * switch, 4.0) == pytest.approx(friction(1e-3 * switch, 0.0),
                                                         rel=1e-11)
    assert friction(1e3 * switch, 4.0) == pytest.approx(friction(1e3 * switch, 0.0),
                                                        rel=1e-11)


def test_compiled_smooth_friction_equals_the_reference(models):
    from sim_rigid import dynamics, kernels

    model = _with_obstacles(load_description(models.box_description()), [{"type": "plane"}],
                            friction_stiffness=100.0, friction_sharpness=4.0)
    q = np.array([0.0, 0.0, 0.099, 0.02, 0.01, -0.015])
    qd = np.array([0.02, 0.01, -0.05, 0.3, -0.2, 0.1])
    rng = np.random.default_rng(2)
    tangents = {"q": rng.standard_normal((3, 6)), "qd": rng.standard_normal((3, 6)),
                "friction": rng.standard_normal(3),
                "friction_stiffness": rng.standard_normal(3)}
    expected = dynamics.inverse_dynamics_tangents(model, model.parameters(), q, qd,
                                                  np.zeros(6), tangents=tangents)
    got = kernels.inverse_dynamics_tangents(model, model.parameters(), q, qd, np.zeros(6),
                                            tangents=tangents)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * np.abs(expected).max())


def test_newton_stalls_at_the_stick_slip_switch_and_converges_with_smooth_friction(models):
    from sim_rigid.step import NewtonError

    # found by random search (300 bouncing, spinning boxes at dt 10 ms, kt 1e4 N s/m):
    # Newton's line search stalls at a residual of 0.78 N across the switch of a corner
    model = _with_obstacles(load_description(models.box_description()), [{"type": "plane"}],
                            contact_stiffness=1e4, contact_damping=1e4, friction=0.4,
                            friction_stiffness=1e4)
    state = RigidState(
        np.array([-0.0006734756127318383, -0.013134989288270052, 0.11082123541366833,
                  0.011619835110730288, -0.010628974715111152, 0.10333423267685206]),
        np.array([-0.010790800837378258, -0.2219664594017656, 0.009164424209840715,
                  0.03260639275711933, -0.2158543337711814, 2.447234504769014]),
        np.array([-0.0005653817345136557, -0.010928476164223235, 0.11027204340235529,
                  0.011271852882617206, -0.008484334895905377, 0.07900355872075368]),
        np.array([-0.010799161012311848, -0.2213382749730144, 0.10569053521067283,
                  0.03768700834489203, -0.21445474858153377, 2.4405274799584062]),
        np.asarray(6, np.int64))
    points = np.array([
        [-0.10037761638129222, -0.09949268606443062, -0.09941061523381424],
        [-0.10103174275385844, -0.09970085434651338, 0.10115640802500545],
        [-0.09824490841490091, 0.0992992051173013, -0.10086420001207928],
        [-0.09994558413087962, 0.09707190982743162, 0.09946896599884912],
        [0.09972902503068788, -0.10045934198753789, -0.10158387322816252],
        [0.09975444889227035, -0.10077660862005569, 0.10075748305845812],
        [0.09908152518257725, 0.09971765487023876, -0.10023294792511842],
        [0.10056757142132453, 0.09745409539963393, 0.09965937506420401]])
    params = model.parameters() | {"contact_point": points}
    with pytest.raises(NewtonError, match="step 6: Newton's method did not converge"):
        step(model, state, np.zeros(0), params, 0.01)
    smooth = dataclasses.replace(model, friction_sharpness=4.0)
    after = step(smooth, state, np.zeros(0), params, 0.01)
    assert np.all(np.isfinite(after.joint_qd))


def test_the_friction_sharpness_is_0_or_at_least_2(models):
    from sim_rigid.model import ModelError

    with pytest.raises(ModelError, match=r"friction_sharpness is 1.0: 0 \(the hard stick-slip "
                                         r"switch\) or an exponent >= 2"):
        dataclasses.replace(models.arm4(), friction_sharpness=1.0)
