"""``identify``: a bag and a YAML experiment in, the fitted design file out; the live
mode's command line and the errors it gives before touching ROS (its recording is tested
with rclpy in tests_ros/test_identify_live.py)."""

import math
import sys
import textwrap

import joint_plugin
import numpy as np
import pytest
from test_recording_source import EXPERIMENT, TRUTH, record, simulate

import ros_bridge.identify
import ros_bridge.plugin
from codesign.plugins import get_plugin_manager, get_registry
from ros_bridge.identify import identify, identify_live, live_bag_path, main, parse_settings
from ros_bridge.live_recording import LiveRecordingError, LiveWindow, record_window
from ros_bridge.messages import FLOAT64_ARRAY, JOINT_STATE


def registry():
    manager = get_plugin_manager(load_entry_points=False)
    manager.register(joint_plugin, name="two_joint")
    manager.register(ros_bridge.plugin, name="rosbag")
    return get_registry(manager)


def test_identify_fits_the_bag_given_on_the_command_line_and_writes_the_design(tmp_path):
    record(tmp_path / "robot.mcap", *simulate(steps=120, seed=0))
    experiment = tmp_path / "identify.yaml"
    experiment.write_text(textwrap.dedent(EXPERIMENT))  # it names other bags: --bag wins
    fitted = identify(experiment, out=tmp_path / "run", design=tmp_path / "design.npz",
                      bag=tmp_path / "robot.mcap", registry=registry())
    with np.load(tmp_path / "design.npz") as saved:
        for name, truth in TRUTH.items():
            np.testing.assert_allclose(saved[name], fitted[name])
            np.testing.assert_allclose(saved[name], truth, rtol=1e-3)


def test_a_relative_bag_is_read_from_the_working_directory(tmp_path, monkeypatch):
    record(tmp_path / "robot.mcap", *simulate(steps=120, seed=0))
    (tmp_path / "experiments").mkdir()
    experiment = tmp_path / "experiments" / "identify.yaml"
    experiment.write_text(textwrap.dedent(EXPERIMENT))
    monkeypatch.chdir(tmp_path)
    identify(experiment, out="run", design="design.npz", bag="robot.mcap",
             registry=registry(), settings={"optimizer.iterations": 1})
    assert str(tmp_path / "robot.mcap") in (tmp_path / "run" / "config.yaml").read_text()

def test_settings_from_the_command_line_are_yaml_values():
    assert parse_settings(["a.b=2.5", 'c={"left_s0": 0.1}', "d=[1, 2]"]) == {
        "a.b": 2.5, "c": {"left_s0": 0.1}, "d": [1, 2]}
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_settings(["no_equals"])


def test_identify_applies_settings(tmp_path):
    record(tmp_path / "robot.mcap", *simulate(steps=120, seed=0))
    experiment = tmp_path / "identify.yaml"
    experiment.write_text(textwrap.dedent(EXPERIMENT))
    identify(experiment, out=tmp_path / "run", design=tmp_path / "design.npz",
             bag=tmp_path / "robot.mcap", registry=registry(),
             settings={"optimizer.iterations": 1})
    assert "iterations: 1" in (tmp_path / "run" / "config.yaml").read_text()


def experiment_file(tmp_path):
    experiment = tmp_path / "identify.yaml"
    experiment.write_text(textwrap.dedent(EXPERIMENT))
    return experiment


BOTH_TOPICS = LiveWindow(topics=("/joint_states", "/effort/commands"),
                         types=(JOINT_STATE, FLOAT64_ARRAY), duration=1.0)


@pytest.mark.parametrize("changes, message", [
    ({"duration": 0.0}, "--duration must be a positive, finite number of seconds, got 0.0"),
    ({"duration": -1.0}, "--duration must be a positive"),
    ({"duration": math.nan}, "--duration must be a positive"),
    ({"duration": math.inf}, "--duration must be a positive"),
    ({"wait": 0.0}, "--wait must be a positive"),
    ({"topics": ()}, "at least one topic"),
    ({"topics": ("/joint_states", "/effort/commands")}, r"one message type per topic: 2 topic"),
    ({"storage": "bag"}, "unknown bag storage 'bag'"),
])
def test_a_bad_live_window_is_named(changes, message):
    with pytest.raises(ValueError, match=message):
        LiveWindow(**{"duration": 1.0} | changes)


def test_the_default_live_bag_lies_beside_the_run_directory(tmp_path):
    assert live_bag_path(tmp_path / "runs" / "fit") == tmp_path / "runs" / "fit.bag"


def test_live_mode_without_rclpy_names_the_ros_extra_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "rclpy", None)  # as in the main environment
    experiment = experiment_file(tmp_path)
    with pytest.raises(LiveRecordingError, match=r"live mode needs the ros extra \(rclpy\): "
                       r"pip install 'ros_bridge\[ros\]'"):
        identify_live(experiment, out=tmp_path / "run", design=tmp_path / "design.npz",
                      window=BOTH_TOPICS, registry=registry())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["identify.yaml"]


@pytest.mark.parametrize("existing, flag", [("run", "--out"), ("run.partial", "--out"),
                                            ("run.bag", "--bag")])
def test_live_mode_refuses_existing_outputs_before_recording(tmp_path, existing, flag):
    (tmp_path / existing).mkdir()
    with pytest.raises(LiveRecordingError, match=f"already exists; choose another {flag}"):
        identify_live(experiment_file(tmp_path), out=tmp_path / "run",
                      design=tmp_path / "design.npz", window=BOTH_TOPICS, registry=registry())


def test_live_mode_refuses_a_window_without_the_experiments_topics(tmp_path):
    with pytest.raises(LiveRecordingError, match=r"the experiment reads \{'commands': "
                       r"'/effort/commands'\} .* but --topics records only \['/joint_states'\]"):
        identify_live(experiment_file(tmp_path), out=tmp_path / "run",
                      design=tmp_path / "design.npz", window=LiveWindow(duration=1.0),
                      registry=registry())


def test_a_recording_never_replaces_a_bag(tmp_path):
    (tmp_path / "old").mkdir()
    with pytest.raises(LiveRecordingError, match="already exists; choose another --bag"):
        record_window(tmp_path / "old", LiveWindow(duration=1.0))


def test_the_command_line_passes_the_live_window(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(ros_bridge.identify, "identify_live",
                        lambda experiment, **options: calls.append(options) or {"k": 1.0})
    assert main(["exp.yaml", "--live", "--topics", "/joint_states", "/effort/commands",
                 "--types", JOINT_STATE, FLOAT64_ARRAY, "--duration", "2.5", "--wait", "1",
                 "--storage", "sqlite3", "--out", "runs/fit", "--design", "fit.npz",
                 "--set", "optimizer.iterations=3"]) == 0
    assert calls[0]["window"] == LiveWindow(
        topics=("/joint_states", "/effort/commands"), types=(JOINT_STATE, FLOAT64_ARRAY),
        duration=2.5, wait=1.0, storage="sqlite3")
    assert calls[0]["bag"] is None  # identify_live's default: beside --out
    assert calls[0]["settings"] == {"optimizer.iterations": 3}
    main(["exp.yaml", "--live", "--duration", "1", "--bag", "b", "--out", "o", "--design", "d"])
    assert calls[1]["window"] == LiveWindow(duration=1.0)  # /joint_states, JointState, 5 s
    assert calls[1]["bag"] == "b"


@pytest.mark.parametrize("arguments, message", [
    (["--live"], "--live needs --duration SECONDS"),
    (["--live", "--duration", "0"], "--duration must be a positive"),
    (["--live", "--duration", "-2"], "--duration must be a positive"),
    (["--live", "--duration", "1", "--wait", "0"], "--wait must be a positive"),
    (["--live", "--duration", "1", "--topics", "/a", "/b"], "one message type per topic"),
    (["--duration", "1"], "live-mode option(s) --duration given without --live"),
    (["--bag", "b", "--topics", "/a", "--wait", "1"],
     "live-mode option(s) --topics, --wait given without --live"),
    (["--set", "novalue"], "KEY=VALUE"),
])
def test_bad_command_lines_are_named(arguments, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["exp.yaml", "--out", "o", "--design", "d", *arguments])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_a_failed_live_recording_is_one_error_line(monkeypatch, capsys):
    def fail(experiment, **options):
        raise LiveRecordingError("no message arrived on ['/joint_states']")

    monkeypatch.setattr(ros_bridge.identify, "identify_live", fail)
    assert main(["exp.yaml", "--live", "--duration", "1", "--out", "o", "--design", "d"]) == 1
    assert "identify: error: no message arrived on ['/joint_states']" in capsys.readouterr().err
