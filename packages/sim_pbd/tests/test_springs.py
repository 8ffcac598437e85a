"""Joint-space springs (Eq. 31): torque from the energy, VJPs, the simulator's gradients
through them, a static balance against gravity, bad entries."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from codesign.testing import gradcheck, run_conformance
from sim_pbd.kinematics import joint_positions
from sim_pbd.scene import SceneError, make_simulator
from sim_pbd.simulator import PBDSimulator
from sim_pbd.springs import spring_torques, spring_torques_vjp, springs_from

SPRING = {"joint": "joint0", "stiffness": 400.0, "rest_length": 0.2, "lever_parent": 0.3,
          "lever_child": 0.25, "angle": 0.4, "offset": 0.1}


def _springs(names=("joint0", "joint1"), **changes):
    return springs_from([{**SPRING, **changes}], list(names), [True] * len(names))


def test_the_torque_is_minus_the_energy_gradient():
    springs = _springs()
    k, offset = springs.stiffness, springs.offset

    def energy(theta):
        gamma = np.pi - springs.angle - offset - theta
        l1, l2 = springs.lever_parent, springs.lever_child
        x = np.sqrt(l1**2 + l2**2 - 2 * l1 * l2 * np.cos(gamma))
        return float(0.5 * k @ (x - springs.rest_length) ** 2)

    for theta in (-0.8, 0.0, 0.6):
        h = 1e-6
        expected = -(energy(theta + h) - energy(theta - h)) / (2 * h)
        tau = spring_torques(springs, np.array([theta, 0.3]), k, offset)
        assert tau[0] == pytest.approx(expected, rel=1e-7)
        assert tau[1] == 0.0


def test_the_torque_vjp_matches_finite_differences():
    springs = _springs()
    inputs = {"q": np.array([0.5, -0.2]), "k": springs.stiffness, "offset": springs.offset}
    weights = np.array([1.3, -0.7])

    def loss(values):
        return float(weights @ spring_torques(springs, values["q"], values["k"],
                                              values["offset"]))

    g_q, g_k, g_offset = spring_torques_vjp(springs, inputs["q"], inputs["k"], inputs["offset"],
                                            weights)
    gradcheck(loss, inputs, {"q": g_q, "k": g_k, "offset": g_offset}).assert_ok()


@pytest.fixture
def sprung_pendulum(models):
    model = models.chain_3d()
    model = dataclasses.replace(model, joint_damping=np.full(model.joint_count, 0.3))
    # a soft spring: the finite-difference step scales with the design's RMS value
    springs = springs_from([{**SPRING, "stiffness": 4.0}], model.joint_names,
                           [True] * model.joint_count)
    return PBDSimulator(model, substeps=3, iterations=2, springs=springs)


def test_a_long_control_step_swings_as_short_ones_do(models):
    # the same 0.5 ms substeps, grouped 20 to a 10 ms control step or one to each: the torque
    # held over a step is taken at the step's midpoint angle, so the grouping changes the
    # swing by the step's second-order error (held at the step's start angle: 0.93 rad)
    model = models.pendulum(length=0.5)
    springs = springs_from([SPRING], model.joint_names, [True])
    final = []
    for dt, substeps in ((0.01, 20), (0.0005, 1)):
        sim = PBDSimulator(model, substeps=substeps, iterations=4, springs=springs)
        design = sim.design_space().defaults()
        state = sim.initial_state(design)
        for _ in range(int(round(0.5 / dt))):
            state = sim.step(state, np.zeros(1), design, dt)
        final.append(joint_positions(model, model.parameters(), state)[0][0])
    assert abs(final[1]) > 1.0  # the spring swings it far
    assert final[0] == pytest.approx(final[1], abs=5e-3)


def test_the_simulator_differentiates_through_its_springs(sprung_pendulum):
    sim = sprung_pendulum
    design = sim.design_space().defaults()
    assert design["spring.stiffness"].shape == (1,)
    del design["joint.compliance"]  # checked with its own step in test_gradients
    del design["spring.stiffness"]  # its effect is small here: checked with a stiff spring below
    state = sim.initial_state(design)
    # the spring reads the joint rates (its midpoint angle), whose round-off central
    # differences divide by the step: 2e-5 balances it against the truncation (3e-5 and 4e-5
    # leave 1-3e-6; Richardson-extrapolated differences agree with the VJP to 1e-8)
    run_conformance(sim, dt=0.01, state=state, action=np.linspace(-0.5, 0.5, sim.action_size),
                    design=design,
                    steps=(1, 3), rollout_steps=3, substeps=2, eps=2e-5)


def test_step_gradients_of_a_stiff_spring(models):
    model = dataclasses.replace(models.chain_3d(), joint_damping=np.full(3, 0.3))
    springs = springs_from([SPRING], model.joint_names, [True] * model.joint_count)
    sim = PBDSimulator(model, substeps=3, iterations=2, springs=springs)
    design = sim.design_space().defaults()
    start = sim.initial_state(design)
    weights = [np.linspace(-1.0, 1.0, np.size(getattr(start, f))).reshape(np.shape(
        getattr(start, f))) for f in ("link_x", "link_q", "link_v", "link_w")]
    action = np.zeros(sim.action_size)

    def rollout(values):
        states = [start]
        for _ in range(3):
            states.append(sim.step(states[-1], action, {**design, **values}, 0.01))
        return states

    def loss(values):
        final = rollout({**springs_design, **values["spring"]})[-1]
        return float(sum(np.sum(w * v) for w, v in zip(weights, vars(final).values(),
                                                          strict=True)))

    springs_design = {name: design[name] for name in ("spring.stiffness", "spring.offset")}
    states = rollout(springs_design)
    g_state = type(start)(*weights)
    total = {name: 0.0 for name in springs_design}
    for k in range(3, 0, -1):
        g_state, _, g_design = sim.step_vjp(states[k - 1], action, design, 0.01, g_state)
        for name in total:
            total[name] = total[name] + g_design[name]
    # a step for each in its own units: the loss (about 10) carries 3e-13 of round-off and
    # its derivative in k (about 2e3 N/m) is 5e-6 per N/m, so k needs steps of 1e-1 N/m
    # (1e-2: 2.2e-6 off); α₂'s derivative is 0.26 per rad, steps of 1e-3 rad
    for name, eps in (("spring.stiffness", 1e-1), ("spring.offset", 1e-3)):
        gradcheck(loss, {"spring": {name: springs_design[name]}},
                  {"spring": {name: total[name]}}, eps=eps, relative_step=False).assert_ok()


def test_a_sprung_pendulum_comes_to_rest_where_the_spring_holds_gravity(models):
    model = models.pendulum(length=0.5, damping=2.0)
    springs = springs_from([{**SPRING, "stiffness": 2000.0}], model.joint_names, [True])
    sim = PBDSimulator(model, springs=springs)
    design = sim.design_space().defaults()
    state = sim.initial_state(design)
    for _ in range(800):
        state = sim.step(state, np.zeros(1), design, 0.01)
    params = model.parameters()
    (theta,), (rate,) = joint_positions(model, params, state)
    assert abs(rate) < 1e-4
    spring = spring_torques(springs, np.array([theta]), springs.stiffness, springs.offset)[0]
    held = sim.step(state, spring * np.ones(1), {**design, "spring.stiffness": np.zeros(1)},
                    0.01)
    moved = joint_positions(model, params, held)[0][0] - theta
    assert abs(spring) > 0.5 and abs(moved) < 1e-4  # the spring's torque alone holds it


def test_bad_springs_are_refused_naming_the_key():
    with pytest.raises(SceneError, match=r"springs\[0\].joint: unknown joint 'left_x'"):
        make_simulator(urdf="double_pendulum", springs=[{**SPRING, "joint": "left_x"}])
    with pytest.raises(ValueError, match=r"springs\[0\]: missing \['offset'\]"):
        springs_from([{k: v for k, v in SPRING.items() if k != "offset"}], ["joint0"], [True])
    with pytest.raises(ValueError, match=r"springs\[0\].lever_child must be positive"):
        _springs(lever_child=0.0)
