"""Finger Reach: the finger robot of the YAML (`robot: {finger: ...}`), the example's quick
run and the Table IV metric of its run directory (sim_rigid.reach)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from codesign.plugins import get_registry
from codesign.runs import run_experiment
from sim_rigid import morphology as mo
from sim_rigid.reach import fingertip_distances, main, reach_metric
from sim_rigid.scene import SceneError, make_simulator
from sim_rigid.terms import ReachTargets

EXAMPLES = Path(__file__).parents[1] / "src" / "sim_rigid" / "examples"


def test_a_finger_robot_is_the_assembled_finger_at_rest():
    model = make_simulator(robot={"finger": {"phalanges": 3, "damping": 0.05}}).model
    finger = mo.assemble_finger(3)
    expected = make_simulator(robot=mo.description(finger, finger.parameter_defaults,
                                                   damping=0.05)).model
    assert model.link_names == expected.link_names
    np.testing.assert_array_equal(model.joint_origin, expected.joint_origin)
    np.testing.assert_array_equal(model.link_inertia, expected.link_inertia)
    np.testing.assert_array_equal(model.joint_damping, [0.05] * 3)
    with pytest.raises(SceneError, match="robot.finger: .*takes assemble_finger's keywords"):
        make_simulator(robot={"finger": {"phalanges": 3, "knuckles": 2}})
    with pytest.raises(SceneError, match="robot.finger: a finger needs phalanges >= 1"):
        make_simulator(robot={"finger": {"phalanges": 0}})
    with pytest.raises(SceneError, match="robot.finger must be a mapping"):
        make_simulator(robot={"finger": 4})


def test_distances_at_every_step_meet_the_term_at_control_steps():
    simulator = make_simulator(robot={"finger": {"phalanges": 2}})
    term = ReachTargets(simulator=simulator, targets=[[0.1, 0.0, 0.1], [0.1, 0.0, 0.0]],
                        start_times=[0.0, 0.02], point=[0.025, 0.0, 0.0], dt=0.005,
                        substeps=3)
    design = simulator.design_space().defaults()
    actions = np.array([[0.01, -0.01], [0.02, 0.0]])
    distances = fingertip_distances(term, simulator, design, actions, substeps=3, dt=0.005)
    assert distances.shape == (6,)
    state = simulator.initial_state(design)
    for action in actions:
        for _ in range(3):
            state = simulator.step(state, action, design, 0.005)
    assert distances[-1] == pytest.approx(term.value(state, None, design, 2), abs=1e-15)


@pytest.mark.parametrize("example", ["finger_reach", "finger_reach_codesign", "finger_reach_cage"])
def test_the_metric_of_a_quick_run(example, tmp_path, capsys):
    out = tmp_path / "run"
    run_experiment(EXAMPLES / f"{example}.yaml", get_registry(), out=out, quick=True,
                   progress=False, log=lambda message: None)
    metric = reach_metric(out)
    assert metric["initial"] > 0.05  # the hanging finger is centimetres off its targets
    assert metric["final"] < metric["initial"]  # one L-BFGS-B step already gets closer
    assert metric["normalized"] == pytest.approx(metric["final"] / metric["initial"])
    main([str(out)])
    assert f"normalized {metric['normalized']:.3f}" in capsys.readouterr().out


def test_the_metric_refuses_a_run_without_a_reach_term(tmp_path):
    out = tmp_path / "run"
    run_experiment(EXAMPLES / "finger_reach.yaml", get_registry(), out=out, quick=True,
                   progress=False, log=lambda message: None,
                   settings={"objective": [{"term": "action_l2", "weight": 1.0}]})
    with pytest.raises(ValueError, match="needs one reach_targets term"):
        reach_metric(out)
