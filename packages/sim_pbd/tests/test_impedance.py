"""Impedance control in the simulator (``sim_pbd.impedance``): the robot moving at joint
rates, the net-torque map built through the simulator, and the closed loop against PD (the
map's interpolation, its file and the law are the core's: codesign/tests/test_impedance.py)."""

import numpy as np
import pytest

from codesign.impedance import ImpedanceController, zero_net_torque
from sim_pbd.impedance import build_net_torque_map, closed_loop
from sim_pbd.kinematics import joint_positions
from sim_pbd.scene import make_simulator
from sim_pbd.simulator import PBDSimulator
from sim_pbd.torque_estimation import holding_torque

GOAL = -0.45
DT = 0.01


def _s1(**options) -> PBDSimulator:
    """Baxter's joint s1 alone (the rest of the robot frozen), at the goal."""
    return make_simulator(urdf="baxter", joints=["left_s1"],
                          initial_positions={"left_s1": GOAL}, **options)


def test_state_at_joints_gives_the_joint_rates(any_model, models):
    sim = PBDSimulator(any_model)
    design = sim.design_space().defaults()
    m = any_model.joint_count
    joint_q, joint_qd = np.linspace(-0.3, 0.4, m), np.linspace(0.5, -0.8, m)
    state = sim.state_at_joints(design, joint_q, joint_qd)
    expected = models.state_at(any_model, joint_q, joint_qd)
    for name in ("link_x", "link_q", "link_v", "link_w"):
        assert getattr(state, name) == pytest.approx(getattr(expected, name), abs=1e-8)
    q, qd = joint_positions(any_model, sim.parameters(design), state)
    assert q == pytest.approx(joint_q, abs=1e-12)
    assert qd == pytest.approx(joint_qd, abs=1e-12)
    with pytest.raises(ValueError, match="one value per joint"):
        sim.state_at_joints(design, joint_q, joint_qd[:-1])


def test_the_built_map_takes_the_joint_to_the_goal_in_one_step():
    sim = _s1()
    design = sim.design_space().defaults()
    net = build_net_torque_map(sim, design, goal=GOAL, angle_steps=[-0.00625, 0.0, 0.00625],
                               rates=[-0.5, 0.0, 0.5], dt=DT)
    assert net.torques.shape == (1, 3, 3) and net.joints == ("left_s1",)
    params = sim.parameters(design)
    for a, angle_step in enumerate(net.angle_steps):
        for w, rate in enumerate(net.rates):
            start = sim.state_at_joints(design, [GOAL - angle_step], [rate])
            after = sim.step(start, net.torques[0, a, w:w + 1], design, DT)
            assert joint_positions(sim.model, params, after)[0][0] == pytest.approx(GOAL,
                                                                                    abs=1e-10)
    # at rest at the goal the map holds the arm against gravity: the holding torque
    assert net.torques[0, 1, 1] == pytest.approx(
        holding_torque(sim, design, [GOAL], dt=DT, weights=(1.0, 0.0))[0], abs=1e-8)
    # moving the arm faster toward the goal takes more torque; arriving faster, less
    assert np.all(np.diff(net.torques, axis=1) > 0) and np.all(np.diff(net.torques, axis=2) < 0)


def test_the_map_is_of_one_joint():
    sim = make_simulator(urdf="baxter", joints=["left_s0", "left_s1"])
    with pytest.raises(ValueError, match="joints=\\[<the joint>\\]"):
        build_net_torque_map(sim, sim.design_space().defaults(), goal=GOAL,
                             angle_steps=[0.0, 0.001], rates=[0.0, 0.1])


def test_impedance_holds_the_goal_better_than_pd_under_an_external_torque():
    """Gravity off (the robot's own model compensates it for both controllers, as in the
    paper); 10 N m pushes s1 from 0.5 s on. PD settles at τ/K = 0.33 rad off the goal;
    the map anticipates each step's motion, leaving the push's one-step effect."""
    sim = _s1(gravity=[0.0, 0.0, 0.0])
    design = sim.design_space().defaults()
    net = build_net_torque_map(sim, design, goal=GOAL, angle_steps=np.linspace(-0.00625,
                                                                               0.00625, 5),
                               rates=np.linspace(-0.5, 0.5, 5), dt=DT)
    impedance, pd = ImpedanceController(net), ImpedanceController(zero_net_torque)

    def push(t):
        return np.array([10.0 if t >= 0.5 else 0.0])

    runs = {name: closed_loop(sim, design, law, joint_q=[GOAL], steps=200, dt=DT,
                              external=push)
            for name, law in (("impedance", lambda q, qd: impedance(q, qd, [GOAL])),
                              ("pd", lambda q, qd: pd(q, qd, [GOAL])))}
    error = {name: np.abs(run.joint_q[:, 0] - GOAL) for name, run in runs.items()}
    assert runs["pd"].joint_q.shape == (201, 1) and runs["pd"].torques.shape == (200, 1)
    assert error["impedance"][:50].max() < 1e-9 and error["pd"][:50].max() < 1e-9
    assert error["impedance"].max() < 1e-3
    assert error["pd"].max() > 0.3
    assert error["impedance"][-50:].max() < 1e-2 * error["pd"][-50:].min()
