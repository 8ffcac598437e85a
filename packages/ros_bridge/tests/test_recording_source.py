"""The ``rosbag`` recording source: resampling, actions, errors, and a YAML identification."""

import textwrap
from pathlib import Path

import joint_plugin
import numpy as np
import pytest

import ros_bridge.plugin
from codesign.observers import StateFieldObserver
from codesign.plugins import get_plugin_manager, get_registry
from codesign.recordings import RecordingSourceError, smooth_random_actions
from codesign.runs import run_experiment
from codesign.testing import run_conformance
from ros_bridge.bags import JointTrajectory, write_bag
from ros_bridge.messages import (
    FLOAT64_ARRAY,
    JOINT_STATE,
    float64_array_message,
    joint_state_message,
)
from ros_bridge.recording_source import resample_joint_states, rosbag_recordings

JOINTS = ["elbow", "shoulder"]
TRUTH = {"stiffness": np.array([6.0, 2.5]), "damping": np.array([0.4, 0.15])}
DT = 0.01


def simulate(steps=120, seed=0):
    """The two-joint truth trajectory: actions (steps, 2), positions and rates (steps+1, 2)."""
    sim = joint_plugin.TwoJoint()
    actions = smooth_random_actions(np.random.default_rng(seed), steps, 2, knots=6,
                                    low=-2.0, high=2.0)
    state = sim.initial_state(TRUTH)
    q, qd = [state.joint_q], [state.joint_qd]
    for action in actions:
        state = sim.step(state, action, TRUTH, DT)
        q.append(state.joint_q)
        qd.append(state.joint_qd)
    return actions, np.array(q), np.array(qd)


def record(path, actions, q, qd, *, storage="mcap", commands=True, jitter=0.0):
    """A bag as a robot driver and an effort controller would leave it: joint states in a
    shuffled order with an extra joint, commands in the ``JOINTS`` order (``jitter`` [s]:
    each command stamped up to that much late, a clock's round-off)."""
    rng = np.random.default_rng(1)
    late = np.random.default_rng(2).uniform(0.0, jitter, len(q))
    late[0] = 0.0  # the window starts at the first command
    messages = []
    for k in range(len(q)):
        names = [*JOINTS, "gripper"]
        order = rng.permutation(3)
        position = np.r_[q[k], 0.0][order]
        velocity = np.r_[qd[k], 0.0][order]
        effort = np.r_[actions[min(k, len(actions) - 1)], 0.0][order]
        messages.append(("/joint_states", JOINT_STATE, round(k * DT * 1e9), joint_state_message(
            [names[i] for i in order], stamp=k * DT, position=position, velocity=velocity,
            effort=effort)))
        if commands and k < len(actions):
            messages.append(("/effort/commands", FLOAT64_ARRAY,
                             round((k * DT + late[k]) * 1e9), float64_array_message(actions[k])))
    return write_bag(path, messages, storage=storage)


def source(tmp_path, *, fields=("joint_q",), dt=DT, substeps=1, **options):
    sim = joint_plugin.TwoJoint()
    measurement = StateFieldObserver(simulator=sim, fields=list(fields))
    options = {"path": "bag", "joints": JOINTS,
               "topics": {"joint_states": "/joint_states", "commands": "/effort/commands"},
               **options}
    return rosbag_recordings(simulator=sim, measurement=measurement, dt=dt, substeps=substeps,
                             base_dir=tmp_path, **options)


def test_the_test_simulator_conforms():
    run_conformance(joint_plugin.TwoJoint(), dt=DT)


def test_resampling_interpolates_and_marks_gaps_and_nan_samples_missing():
    trajectory = JointTrajectory(
        time=np.array([0.0, 1.0, 2.0, 5.0, 6.0]),
        position=np.array([[0.0], [1.0], [2.0], [5.0], [np.nan]]),
        velocity=np.array([[1.0], [1.0], [1.0], [1.0], [1.0]]),
        effort=np.full((5, 1), np.nan))
    rows = resample_joint_states(trajectory, np.array([0.0, 0.5, 2.0, 3.0, 5.0, 5.5]),
                                 fields=["position", "velocity"], max_gap=1.5)
    np.testing.assert_allclose(rows[:3], [[0.0, 1.0], [0.5, 1.0], [2.0, 1.0]])
    assert np.all(np.isnan(rows[3]))  # 3 s lies in a 3 s gap
    np.testing.assert_allclose(rows[4], [5.0, 1.0])  # a sample exactly on the step
    assert np.all(np.isnan(rows[5]))  # next to a NaN sample


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_a_bag_gives_the_recorded_trajectory_on_the_control_steps(tmp_path, storage):
    actions, q, qd = simulate(steps=40)
    record(tmp_path / "bag", actions, q, qd, storage=storage)
    (recording,) = source(tmp_path)
    np.testing.assert_allclose(recording.actions, actions, atol=1e-12)
    np.testing.assert_allclose(recording.measurements, q, atol=1e-9)
    # two substeps per control step: every other sample, the commands held
    (coarse,) = source(tmp_path, dt=DT / 2, substeps=4, measure=["position", "velocity"],
                       fields=("joint_q", "joint_qd"))
    np.testing.assert_allclose(coarse.measurements, np.c_[q, qd][::2], atol=1e-9)
    np.testing.assert_allclose(coarse.actions, actions[::2], atol=1e-12)


def test_commands_stamped_a_little_late_still_act_on_their_steps(tmp_path):
    actions, q, qd = simulate(steps=30)
    record(tmp_path / "bag", actions, q, qd, jitter=3e-7)
    (recording,) = source(tmp_path)
    np.testing.assert_allclose(recording.actions, actions, atol=1e-12)


def test_without_a_command_topic_the_measured_efforts_are_the_actions(tmp_path):
    actions, q, qd = simulate(steps=20)
    record(tmp_path / "bag", actions, q, qd, commands=False)
    (recording,) = source(tmp_path, topics={"joint_states": "/joint_states"})
    np.testing.assert_allclose(recording.actions, actions, atol=1e-12)


def test_start_and_duration_cut_a_window(tmp_path):
    actions, q, qd = simulate(steps=40)
    record(tmp_path / "bag", actions, q, qd)
    (recording,) = source(tmp_path, start=0.1, duration=0.2)
    assert recording.steps == 20
    np.testing.assert_allclose(recording.measurements, q[10:31], atol=1e-9)
    with pytest.raises(RecordingSourceError, match="after the last joint state"):
        source(tmp_path, start=0.1, duration=5.0)


def test_segments_start_from_their_measured_states_and_replay_the_recording(tmp_path):
    actions, q, qd = simulate(steps=45)
    record(tmp_path / "bag", actions, q, qd)
    fields = ("joint_q", "joint_qd")
    segments = source(tmp_path, fields=fields, measure=["position", "velocity"],
                      segment=0.2)
    assert [r.steps for r in segments] == [20, 20, 5]
    assert [r.name for r in segments] == ["bag[0:20]", "bag[20:40]", "bag[40:45]"]
    sim = joint_plugin.TwoJoint()
    for first, recording in zip((0, 20, 40), segments, strict=True):
        np.testing.assert_allclose(recording.initial_state.joint_q, q[first], atol=1e-12)
        np.testing.assert_allclose(recording.initial_state.joint_qd, qd[first], atol=1e-12)
        state = recording.initial_state  # the truth replays each segment from its start
        for k, action in enumerate(recording.actions, start=1):
            state = sim.step(state, action, TRUTH, DT)
            np.testing.assert_allclose(np.r_[state.joint_q, state.joint_qd],
                                       recording.measurements[k], atol=1e-9)
    with pytest.raises(RecordingSourceError, match=r"measure: \[position, velocity\]"):
        source(tmp_path, segment=0.2)
    with pytest.raises(RecordingSourceError, match="shorter than one control step"):
        source(tmp_path, fields=fields, measure=["position", "velocity"], segment=0.001)
    with pytest.raises(RecordingSourceError, match="options.segment"):
        source(tmp_path, fields=fields, measure=["position", "velocity"], segment=-1.0)


def test_compare_keeps_the_rates_for_the_segment_starts_only(tmp_path):
    actions, q, qd = simulate(steps=45)
    record(tmp_path / "bag", actions, q, qd)
    fields = ("joint_q", "joint_qd")
    segments = source(tmp_path, fields=fields, measure=["position", "velocity"],
                      segment=0.2, compare=["position"])
    for first, recording in zip((0, 20, 40), segments, strict=True):
        np.testing.assert_allclose(recording.initial_state.joint_qd, qd[first], atol=1e-12)
        np.testing.assert_allclose(recording.measurements[:, :2],
                                   q[first:first + recording.steps + 1], atol=1e-9)
        assert np.all(np.isnan(recording.measurements[:, 2:]))
    with pytest.raises(RecordingSourceError, match=r"options.compare must list fields of "
                                                   r"options.measure \['position'\]"):
        source(tmp_path, compare=["velocity"])


def test_a_segment_needs_a_simulator_that_starts_at_joint_states(tmp_path):
    actions, q, qd = simulate(steps=10)
    record(tmp_path / "bag", actions, q, qd)

    class Plain(joint_plugin.TwoJoint):
        state_at_joints = None

    sim = Plain()
    measurement = StateFieldObserver(simulator=sim, fields=["joint_q", "joint_qd"])
    with pytest.raises(RecordingSourceError, match="state_at_joints"):
        rosbag_recordings(simulator=sim, measurement=measurement, dt=DT, substeps=1,
                          base_dir=tmp_path, path="bag", joints=JOINTS,
                          topics={"commands": "/effort/commands"},
                          measure=["position", "velocity"], segment=0.05)


def test_a_segment_cannot_start_at_a_missing_state(tmp_path):
    actions, q, qd = simulate(steps=30)
    q[10] = np.nan
    record(tmp_path / "bag", actions, q, qd)
    with pytest.raises(RecordingSourceError, match="control step 10 is missing"):
        source(tmp_path, fields=("joint_q", "joint_qd"), measure=["position", "velocity"],
               segment=0.1)


@pytest.mark.parametrize("options, message", [
    ({"joints": ["elbow", "wrist"]}, r"message 0: the joint state has no joint\(s\) \['wrist'\]"),
    ({"joints": ["elbow", "elbow"]}, "distinct joint names"),
    ({"topics": {"joint_states": "/js", "commands": "/effort/commands"}},
     r"no topic\(s\) \['/js'\]"),
    ({"topics": {"joint_state": "/joint_states"}}, r"unknown topic role\(s\) \['joint_state'\]"),
    ({"measure": ["acceleration"]}, "options.measure"),
    ({"measure": ["position", "velocity"]}, "the measurement reads 2 value"),
    ({"path": "missing"}, "not found"),
    ({"start": -1.0}, "options.start"),
    ({"max_gap": 0.0}, "options.max_gap"),
    ({"stamps": "wall"}, "stamps must be"),
    ({"truth": {"stifness": 1.0}}, "unknown design parameter 'stifness'"),
])
def test_bad_options_and_bags_are_named(tmp_path, options, message):
    actions, q, qd = simulate(steps=10)
    record(tmp_path / "bag", actions, q, qd)
    with pytest.raises(RecordingSourceError, match=message):
        source(tmp_path, **options)


def test_a_corrupt_bag_is_a_recording_source_error(tmp_path):
    actions, q, qd = simulate(steps=10)
    bag = record(tmp_path / "bag", actions, q, qd)
    file = next(bag.glob("*.mcap"))
    file.write_bytes(file.read_bytes()[:100])
    with pytest.raises(RecordingSourceError, match="truncated, corrupt"):
        source(tmp_path)


def test_nan_positions_become_missing_rows(tmp_path):
    actions, q, qd = simulate(steps=20)
    q = q.copy()
    q[7, 1] = np.nan
    record(tmp_path / "bag", actions, q, qd)
    (recording,) = source(tmp_path)
    missing = np.flatnonzero(np.isnan(recording.measurements).any(axis=1))
    np.testing.assert_array_equal(missing, [7])


EXPERIMENT = """\
simulator: {name: two_joint}
design:
  stiffness: {init: [3.0, 3.0]}
  damping: {init: [0.1, 0.1]}
identification:
  recordings:
    source: rosbag
    options:
      path: [run_a, run_b]
      joints: [elbow, shoulder]
      topics: {joint_states: /joint_states, commands: /effort/commands}
      truth: {stiffness: [6.0, 2.5], damping: [0.4, 0.15]}
  measurement: {name: state_fields, options: {fields: [joint_q]}}
optimizer: {name: lbfgsb, iterations: 60}
run: {steps: 100, substeps: 1, dt: 0.01}
"""


def test_a_yaml_identification_recovers_the_parameters_from_bags(tmp_path):
    for name, seed, storage in (("run_a", 0, "mcap"), ("run_b", 1, "sqlite3")):
        record(tmp_path / name, *simulate(steps=120, seed=seed), storage=storage)
    experiment = tmp_path / "identify.yaml"
    experiment.write_text(textwrap.dedent(EXPERIMENT))
    manager = get_plugin_manager(load_entry_points=False)
    manager.register(joint_plugin, name="two_joint")
    manager.register(ros_bridge.plugin, name="rosbag")
    summary = run_experiment(experiment, get_registry(manager), out=tmp_path / "out",
                             progress=False, plugin_manager=manager, log=lambda message: None)
    parameters = summary["identification"]["parameters"]
    for name in ("stiffness", "damping"):
        assert parameters[name]["relative_error"] < 1e-4, parameters[name]
    assert Path(tmp_path / "out" / "summary.json").is_file()
