"""The holding_poses recording source, the joint_tracking term and their reports."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import sim_pbd
from codesign import Objective, OpenLoopController, Rollout
from codesign.config import ConfigError, load_config
from codesign.experiment import build_experiment
from codesign.outputs import read_npz, write_npz
from codesign.plugins import get_registry
from codesign.recordings import RecordingSourceError
from codesign.run_directory import ReportContext
from codesign.runs import run_experiment
from codesign.validation import validate_config
from sim_pbd.holding_poses import holding_pose_recordings, read_holding_poses
from sim_pbd.kinematics import joint_positions
from sim_pbd.reports import holding_torque_report
from sim_pbd.scene import make_simulator
from sim_pbd.terms import JointObserver, JointTracking

EXAMPLES = Path(sim_pbd.__file__).parent / "examples"
LEFT_ARM = ["left_s0", "left_s1", "left_e0", "left_e1", "left_w0", "left_w1", "left_w2"]
SPRING = {"joint": "left_s1", "stiffness": 2000.0, "rest_length": 0.2, "lever_parent": 0.35,
          "lever_child": 0.08, "angle": 3.9, "offset": 0.25}
POSES = np.array([[0.1, -0.5, 0.3, 1.0, -0.2, 0.8, 0.0],
                  [-0.3, -0.2, -0.4, 0.6, 0.5, 1.2, 0.3]])
TORQUES = np.array([[0.5, -30.0, 1.0, -5.0, 0.1, -1.0, 0.0],
                    [0.2, -25.0, -1.0, -4.0, 0.3, -1.2, 0.05]])


@pytest.fixture(scope="module")
def sim():
    return make_simulator(urdf="baxter", joints=LEFT_ARM, joint_limits=False, substeps=10,
                          iterations=2, springs=[SPRING])


def write_poses(path, names=LEFT_ARM, joint_q=POSES, torques=TORQUES, **extra):
    return write_npz(path, {"joint_names": np.array(names), "joint_q": joint_q,
                            "torques": torques, **extra})


def test_a_csv_and_an_npz_read_alike_in_the_simulators_joint_order(tmp_path, sim):
    order = [3, 0, 6, 1, 5, 2, 4]
    names = [LEFT_ARM[i] for i in order]
    csv = tmp_path / "poses.csv"
    header = ",".join([f"q.{n}" for n in names] + [f"tau.{n}" for n in names])
    rows = [",".join(f"{v:.17g}" for v in [*np.degrees(q[order]), *t[order]])
            for q, t in zip(POSES, TORQUES, strict=True)]
    csv.write_text("# poses in degrees\n" + header + "\n" + "\n".join(rows) + "\n")
    revolute = np.ones(7, bool)
    from_csv = read_holding_poses(csv, joint_names=LEFT_ARM, revolute=revolute,
                                  angle_unit="deg")
    npz = write_poses(tmp_path / "poses.npz", names, POSES[:, order], TORQUES[:, order],
                      **{"truth.spring.stiffness": np.array([2000.0])})
    from_npz = read_holding_poses(npz, joint_names=LEFT_ARM, revolute=revolute)
    for read in (from_csv, from_npz):
        np.testing.assert_allclose(read.joint_q, POSES, rtol=1e-14)
        np.testing.assert_array_equal(read.torques, TORQUES)
    assert from_npz.truth == {"spring.stiffness": np.array([2000.0])}


@pytest.mark.parametrize(("arrays", "options", "message"), [
    ({"names": LEFT_ARM[:6], "joint_q": POSES[:, :6], "torques": TORQUES[:, :6]}, {},
     r"missing \['left_w2'\]"),
    ({"names": [*LEFT_ARM[:6], "right_s0"]}, {}, r"unknown \['right_s0'\]"),
    ({"joint_q": np.where(np.eye(2, 7, 3) > 0, np.nan, POSES)}, {},
     r"joint_q of row 0, joint 'left_e1' is nan"),
    ({"torques": TORQUES[:1]}, {}, "one row per pose"),
    ({"joint_q": np.degrees(POSES)}, {}, "set options.angle_unit: deg"),
    ({}, {"angle_unit": "grad"}, "angle_unit 'grad' is not one of"),
    ({}, {"poses": 3}, r"options.poses must lie in 1 … 2"),
])
def test_bad_holding_pose_files_get_errors_naming_the_fix(tmp_path, sim, arrays, options,
                                                          message):
    path = write_poses(tmp_path / "poses.npz", arrays.get("names", LEFT_ARM),
                       arrays.get("joint_q", POSES), arrays.get("torques", TORQUES))
    with pytest.raises(RecordingSourceError, match=message):
        holding_pose_recordings(simulator=sim, measurement=JointObserver(simulator=sim),
                                dt=0.01, substeps=1, base_dir=tmp_path, path=path.name,
                                **options)


def test_each_pose_is_a_one_step_recording_starting_at_rest_at_the_pose(tmp_path, sim):
    path = write_poses(tmp_path / "poses.npz")
    with pytest.raises(RecordingSourceError, match="set identification.measurement"):
        holding_pose_recordings(simulator=sim, measurement=type("M", (), {"size": 7})(),
                                dt=0.01, substeps=1, base_dir=tmp_path, path=path.name)
    recordings = holding_pose_recordings(
        simulator=sim, measurement=JointObserver(simulator=sim), dt=0.01, substeps=1,
        base_dir=tmp_path, path=path.name, truth={"spring.stiffness": 2000.0})
    assert len(recordings) == 2 and recordings.truth == {"spring.stiffness": [2000.0]}
    params = sim.parameters(sim.design_space().defaults())
    for recording, pose, torque in zip(recordings, POSES, TORQUES, strict=True):
        np.testing.assert_array_equal(recording.actions, [torque])
        still = np.concatenate([pose, np.zeros(7)])
        np.testing.assert_array_equal(recording.measurements, [still, still])
        q, qd = joint_positions(sim.model, params, recording.initial_state)
        np.testing.assert_allclose(q, pose, atol=1e-12)
        assert np.all(qd == 0.0)


def test_the_holding_report_measures_the_motion_and_draws_the_spring(tmp_path, sim):
    recordings = holding_pose_recordings(
        simulator=sim, measurement=JointObserver(simulator=sim), dt=0.01, substeps=1,
        base_dir=tmp_path, path=write_poses(tmp_path / "poses.npz").name)
    design = sim.design_space().defaults()
    numbers = recordings.report(tmp_path, ReportContext(sim, design, design, [], np.zeros(0)))
    moved = []
    for recording, pose in zip(recordings, POSES, strict=True):
        after = sim.step(recording.initial_state, recording.actions[0], design, 0.01)
        moved.append(np.abs(joint_positions(sim.model, sim.parameters(design), after)[0]
                            - pose).max())
    assert numbers["largest_angle_change_rad"] == pytest.approx(max(moved), rel=1e-12)
    assert numbers["plot"] == "spring_torque.png" and (tmp_path / "spring_torque.png").is_file()


def driven(sim, steps=4):
    """Joint angles and rates (steps + 1, 7) of ``sim`` driven by known torques (steps, 7)."""
    torques = np.tile(np.linspace(-2.0, 2.0, 7), (steps, 1)) + np.arange(steps)[:, None]
    rollout = Rollout(sim, controller=OpenLoopController(observation_size=0, action_size=7,
                                                         control_steps=steps),
                      steps=steps, dt=0.01)
    design = sim.design_space().defaults()
    states = rollout.forward(design, {"table": torques}, Objective(()), record=True).states
    q, qd = zip(*(joint_positions(sim.model, sim.parameters(design), s) for s in states),
                strict=True)
    return np.array(q), np.array(qd), torques, states


def test_joint_tracking_is_zero_along_the_recording_and_reports_the_torque_error(tmp_path):
    sim = make_simulator(urdf="baxter", joints=LEFT_ARM, joint_limits=False, substeps=10,
                         iterations=2, initial_positions=list(POSES[0]))
    q, qd, torques, states = driven(sim)
    write_npz(tmp_path / "run.npz", {"joint_names": np.array(LEFT_ARM),
                                            "time": 0.01 * np.arange(5), "joint_q": q,
                                            "joint_qd": qd, "torques": torques})
    term = JointTracking(simulator=sim, dt=0.01, base_dir=tmp_path, path="run.npz",
                         rate_weight=0.5)
    design = sim.design_space().defaults()
    assert all(term.value(s, None, design, t) == 0.0 for t, s in enumerate(states))
    moved = JointTracking(simulator=sim, dt=0.01, base_dir=tmp_path, path="run.npz",
                          angle_weight=2.0, rate_weight=0.5)
    moved.targets = moved.targets + moved.observer.scale * 0.1
    assert moved.value(states[1], None, design, 1) == pytest.approx(
        (2.0 * 7 * 0.01 + 0.5 * 7 * 0.01) / 5)
    numbers = term.report(tmp_path, ReportContext(sim, design, design, states, torques + 1.0))
    assert numbers["rmse_all_joints_n_m"] == pytest.approx(1.0)
    assert numbers["largest_angle_gap_rad"] == pytest.approx(0.0, abs=1e-12)
    assert (tmp_path / numbers["plot"]).is_file()


def test_joint_tracking_refuses_a_recording_the_run_does_not_fit(tmp_path):
    sim = make_simulator(urdf="baxter", joints=LEFT_ARM, joint_limits=False, substeps=10,
                         iterations=2)
    q, qd, torques, _ = driven(sim)
    write_npz(tmp_path / "run.npz", {"joint_names": np.array(LEFT_ARM),
                                     "time": 0.01 * np.arange(5), "joint_q": q + 0.5,
                                     "joint_qd": qd})
    with pytest.raises(ValueError, match=r"set the simulator's initial_positions to \{left_s0"):
        JointTracking(simulator=sim, dt=0.01, base_dir=tmp_path, path="run.npz")
    with pytest.raises(ValueError, match="sampled every 0.01 s but a control step lasts"):
        JointTracking(simulator=sim, dt=0.01, substeps=2, base_dir=tmp_path, path="run.npz")
    write_npz(tmp_path / "bad.npz", {"joint_names": np.array(LEFT_ARM), "joint_q": q,
                                     "joint_qd": qd[:3]})
    with pytest.raises(ValueError, match="one row per pose or sample"):
        JointTracking(simulator=sim, dt=0.01, base_dir=tmp_path, path="bad.npz")
    with pytest.raises(ValueError, match="not found"):
        JointTracking(simulator=sim, dt=0.01, base_dir=tmp_path, path="missing.npz")


def test_zero_torques_are_unknowns_and_the_report_compares_fitted_ones_with_the_file(tmp_path,
                                                                                    sim):
    path = write_poses(tmp_path / "poses.npz")
    options = {"simulator": sim, "measurement": JointObserver(simulator=sim), "dt": 0.01,
               "substeps": 1, "base_dir": tmp_path, "path": path.name}
    with pytest.raises(RecordingSourceError, match=r"options.torques must be one of \['file', "
                                                   r"'zero'\], got 'gravity'"):
        holding_pose_recordings(**options, torques="gravity")
    assert not holding_pose_recordings(**options).actions_unknown
    recordings = holding_pose_recordings(**options, torques="zero")
    assert recordings.actions_unknown
    assert all(np.array_equal(r.actions, np.zeros((1, 7))) for r in recordings)
    design = sim.design_space().defaults()
    fitted = [TORQUES[0][None] + 0.5, TORQUES[1][None] - np.arange(7.0)]
    numbers = recordings.report(tmp_path, ReportContext(sim, design, design, [], np.zeros(0),
                                                        fitted_actions=fitted))
    torques = numbers["torques"]
    assert torques["plot"] == "holding_torques.png"
    assert (tmp_path / "holding_torques.png").is_file()
    s1 = torques["joints"]["left_s1"]
    assert s1["mae_n_m"] == pytest.approx((0.5 + 1.0) / 2)
    assert s1["mean_n_m"] == pytest.approx((-29.5 - 26.0) / 2)
    assert (s1["max_n_m"], s1["min_n_m"]) == (-26.0, -29.5)
    assert s1["paper"] == {"mean_n_m": -29.0, "max_n_m": -11.6, "min_n_m": -39.1,
                           "mae_n_m": 0.669}
    assert "paper" not in torques["joints"]["left_s0"]
    assert torques["largest_error_n_m"] == pytest.approx(6.0)
    # how still the robot stays is measured under the fitted torques, not the file's
    after = sim.step(recordings[1].initial_state, fitted[1][0], design, 0.01)
    moved = np.abs(joint_positions(sim.model, sim.parameters(design), after)[0] - POSES[1])
    assert numbers["largest_angle_change_rad"] >= moved.max()
    without = recordings.report(tmp_path, ReportContext(sim, design, design, [], np.zeros(0)))
    assert "torques" not in without


def test_holding_torque_report_refuses_tables_of_other_shapes(tmp_path):
    with pytest.raises(ValueError, match=r"must both have shape \(poses, joints\)"):
        holding_torque_report(tmp_path, joint_names=LEFT_ARM, estimated=TORQUES,
                              reference=TORQUES[:1])


GRAVITY_YAML = """\
simulator:
  name: pbd
  options: {urdf: baxter, joints: [left_s0, left_s1, left_e0, left_e1, left_w0, left_w1,
            left_w2], joint_limits: false, substeps: 10, iterations: 2}
identification:
  recordings: {source: holding_poses, options: {path: poses.npz, torques: zero}}
  measurement: {name: joints}
  fit_actions: true
optimizer: {name: lbfgsb, iterations: 2}
run: {steps: 1, dt: 0.01}
"""


def test_zero_torques_need_fit_actions_and_an_unknown_start_is_named(tmp_path):
    write_poses(tmp_path / "poses.npz")
    registry = get_registry()
    path = tmp_path / "gravity.yaml"
    path.write_text(GRAVITY_YAML.replace("  fit_actions: true\n", ""))
    with pytest.raises(ConfigError, match=r"identification.fit_actions \(line 5\): recording "
                                          r"source 'holding_poses' gives placeholder actions "
                                          r"to be fitted"):
        build_experiment(validate_config(load_config(path), registry), registry)
    path.write_text(GRAVITY_YAML.replace("torques: zero", "torques: gravity"))
    with pytest.raises(ConfigError, match=r"identification.recordings.options.torques"):
        validate_config(load_config(path), registry)


def test_the_gravity_compensation_example_fits_torques_and_reports_them(tmp_path):
    out = tmp_path / "run"
    summary = run_experiment(EXAMPLES / "baxter_gravity_compensation.yaml", get_registry(),
                             out=out, quick=True, progress=False, log=lambda message: None)
    assert summary["identification"]["fit_actions"] is True
    assert summary["identification"]["recordings"] == 3
    assert summary["final_loss"] < summary["initial_loss"]
    arrays = read_npz(out / "parameters.npz")
    fitted = np.concatenate([arrays[f"actions.{i}"] for i in range(3)])
    reference = read_npz(EXAMPLES / "pbd_recordings" / "gravity_poses.npz")["torques"][:3]
    torques = summary["reports"]["holding_poses"]["torques"]
    for j, name in enumerate(LEFT_ARM):
        assert torques["joints"][name]["mae_n_m"] == pytest.approx(
            np.abs(fitted[:, j] - reference[:, j]).mean(), rel=1e-12)
    assert (out / "holding_torques.png").is_file()
