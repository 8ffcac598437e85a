"""The ``joint_impedance`` controller (Eq. 28 as a run's controller) and the ``joint_goal``
term: known answers, their VJPs against finite differences, bad options, the report's PD
twin, and the impedance example run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from codesign import Objective, Rollout
from codesign.cli import main
from codesign.impedance import NetTorqueMap
from codesign.run_directory import ReportContext
from codesign.testing import gradcheck
from sim_pbd.impedance_controller import JointImpedanceController
from sim_pbd.kinematics import joint_positions
from sim_pbd.scene import ROBOT_DIRECTORY, make_simulator
from sim_pbd.state import PBDState
from sim_pbd.terms import JointGoal, JointObserver

GOAL = -0.45
DT = 0.01
PUSHES = [[0.05, 0.15, 5.0], [0.1, 0.2, 2.0]]


def _s1(**options):
    return make_simulator(urdf="baxter", joints=["left_s1"],
                          initial_positions={"left_s1": GOAL}, gravity=[0.0, 0.0, 0.0],
                          substeps=4, iterations=2, scheme="first_order", **options)


def _controller(sim, **options) -> JointImpedanceController:
    return JointImpedanceController(simulator=sim, observation_size=2, action_size=1,
                                    control_dt=DT, goal=GOAL, **options)


def _curved_map(path) -> str:
    """A one-joint map, not linear in its keys, saved to ``path``."""
    rng = np.random.default_rng(1)
    net = NetTorqueMap(joints=["left_s1"], angle_steps=[-0.01, -0.002, 0.004, 0.01],
                       rates=[-0.5, 0.1, 0.5], torques=rng.normal(0.0, 50.0, (1, 4, 3)),
                       dt=DT, goal=[GOAL])
    return str(net.save(path))


def test_the_law_is_pd_plus_the_scaled_map_plus_the_pushes(tmp_path):
    sim = _s1()
    path = _curved_map(tmp_path / "map.npz")
    controller = _controller(sim, net_torque=path, scale=0.6, pushes=PUSHES)
    net = NetTorqueMap.load(path)
    weights = controller.parameter_space().defaults()
    assert weights == {"stiffness": pytest.approx([30.0]), "damping": pytest.approx([0.01])}
    q, qd = GOAL - 0.003, 0.2
    expected = 30.0 * 0.003 - 0.01 * qd + 0.6 * net([q], [qd], [GOAL])[0]
    for step, push in ((0, 0.0), (5, 5.0), (12, 7.0), (17, 2.0), (20, 0.0)):
        assert controller.act(np.array([q, qd]), step, weights) == pytest.approx(
            [expected + push], abs=1e-12)
    pd = _controller(sim, net_torque="none")
    assert pd.act(np.array([q, qd]), 0, weights) == pytest.approx([30.0 * 0.003 - 0.002])


@pytest.mark.parametrize("source", ["map_file", "none"])
def test_act_vjp_matches_finite_differences(tmp_path, source):
    sim = _s1()
    controller = _controller(sim, net_torque=_curved_map(tmp_path / "m.npz")
                             if source == "map_file" else "none", scale=0.8, pushes=PUSHES)
    weights = {"stiffness": np.array([27.0]), "damping": np.array([0.3])}
    observation = np.array([GOAL + 0.0013, -0.17])  # inside a cell of the map
    g_action = np.array([1.7])

    def loss(inputs):
        return float(g_action @ controller.act(inputs["observation"], 8, inputs["weights"]))

    g_weights = {name: np.zeros(1) for name in weights}
    g_observation = controller.act_vjp(observation, 8, weights, g_action, g_weights)
    gradcheck(loss, {"observation": observation, "weights": weights},
              {"observation": g_observation, "weights": g_weights}, eps=1e-7,
              relative_step=False).assert_ok()


def test_bad_options_name_the_problem(tmp_path):
    sim = _s1()
    with pytest.raises(ValueError, match="observer: {name: joints}"):
        JointImpedanceController(simulator=sim, observation_size=3, action_size=1,
                                 control_dt=DT)
    with pytest.raises(ValueError, match="start < end"):
        _controller(sim, pushes=[[1.0, 0.5, 2.0]])
    with pytest.raises(ValueError, match=r"one torque per joint \(1\)"):
        _controller(sim, pushes=[[1.0, 2.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match="each push is"):
        _controller(sim, pushes=[[1.0, 2.0], [1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match="stiffness must be one finite value"):
        _controller(sim, stiffness=[1.0, 2.0])
    with pytest.raises(ValueError, match="damping must be finite and >= 0"):
        _controller(sim, damping=-1.0)
    with pytest.raises(ValueError, match="angle_points"):
        _controller(sim, angle_points=1)
    with pytest.raises(FileNotFoundError, match="no net-torque map file"):
        _controller(sim, net_torque=str(tmp_path / "missing.npz"))
    arm = make_simulator(urdf="baxter", joints=["left_s1", "left_e1"])
    with pytest.raises(ValueError, match="builds a one-joint map"):
        JointImpedanceController(simulator=arm, observation_size=4, action_size=2,
                                 control_dt=DT)
    with pytest.raises(ValueError, match="is of joints"):
        JointImpedanceController(simulator=arm, observation_size=4, action_size=2,
                                 control_dt=DT, net_torque=_curved_map(tmp_path / "m.npz"))


def test_the_report_draws_the_run_against_its_pd_twin(tmp_path):
    sim = _s1()
    controller = _controller(sim, net_torque=_curved_map(tmp_path / "m.npz"), pushes=PUSHES)
    observer = JointObserver(simulator=sim)
    steps = 25
    rollout = Rollout(sim, controller=controller, observer=observer, steps=steps, dt=DT)
    design = sim.design_space().defaults()
    weights = controller.parameter_space().defaults()
    objective = Objective.of(JointGoal(simulator=sim, goal=GOAL))
    result = rollout.forward(design, weights, objective, record=True)
    context = ReportContext(simulator=sim, initial_design=design, design=design,
                            states=list(result.states), actions=result.actions,
                            controller_weights=weights)
    numbers = controller.report(tmp_path, context)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "impedance_control.png", "m.npz", "net_torque_map.npz", "net_torque_map.png"]
    # the PD twin is the run of the same law with no map: check it against a rollout of it
    pd = _controller(sim, net_torque="none", pushes=PUSHES)
    pd_rollout = Rollout(sim, controller=pd, observer=observer, steps=steps, dt=DT)
    pd_run = pd_rollout.forward(design, weights, objective, record=True)
    params = sim.parameters(design)
    pd_q = np.array([joint_positions(sim.model, params, s)[0] for s in pd_run.states])
    first = numbers["pushes"][0]
    window = slice(5, 16)
    assert first["PD"]["largest_error_rad"] == pytest.approx(
        [np.abs(pd_q[window] - GOAL).max()], rel=1e-9)
    assert first["start_s"] == pytest.approx(0.05) and first["end_s"] == pytest.approx(0.15)
    assert first["torque_n_m"] == [5.0]
    assert NetTorqueMap.load(tmp_path / "net_torque_map.npz").torques == pytest.approx(
        NetTorqueMap.load(tmp_path / "m.npz").torques)


def test_joint_goal_is_the_weighted_distance_from_rest_at_the_goal_and_its_vjp():
    sim = _s1()
    design = sim.design_space().defaults()
    state = sim.step(sim.initial_state(design), np.array([40.0]), design, DT)
    term = JointGoal(simulator=sim, goal=GOAL + 0.01, angle_weight=2.0, rate_weight=0.5)
    q, qd = JointObserver(simulator=sim).observe(state, design)
    assert term.value(state, None, design, 0) == pytest.approx(
        2.0 * (q - GOAL - 0.01) ** 2 + 0.5 * qd ** 2, rel=1e-12)

    def loss(inputs):
        return term.value(PBDState(**inputs["state"]), None, design, 0)

    g_state, g_action, _ = term.grad(state, None, design, 0)
    assert g_action is None
    gradcheck(loss, {"state": dict(vars(state))}, {"state": dict(vars(g_state))}, eps=1e-6,
              relative_step=False).assert_ok()
    with pytest.raises(ValueError, match="goal must be one finite value"):
        JointGoal(simulator=sim, goal=[1.0, 2.0])
    with pytest.raises(ValueError, match="rate_weight must be >= 0"):
        JointGoal(simulator=sim, rate_weight=-1.0)


def test_the_impedance_example_holds_the_joint_far_closer_than_pd(tmp_path):
    out = tmp_path / "run"
    path = ROBOT_DIRECTORY / "baxter_impedance_control.yaml"
    assert main(["run", str(path), "--quick", "--out", str(out), "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["iterations"] == 0 and summary["evaluations"] == 1
    pushes = summary["reports"]["joint_impedance"]["pushes"]
    assert len(pushes) == 2
    for push in pushes:
        assert push["impedance"]["largest_error_rad"][0] < 1e-3
        assert push["PD"]["largest_error_rad"][0] > 100 * push["impedance"][
            "largest_error_rad"][0]
    assert {"net_torque_map.npz", "impedance_control.png", "net_torque_map.png"} <= set(
        summary["files"])
    net = NetTorqueMap.load(out / "net_torque_map.npz")
    assert net.joints == ("left_s1",) and net.goal == pytest.approx([GOAL])
