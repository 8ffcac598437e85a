"""``identify``: a bag and a YAML experiment in, the fitted design file out."""

import textwrap

import joint_plugin
import numpy as np
import pytest
from test_recording_source import EXPERIMENT, TRUTH, record, simulate

import ros_bridge.plugin
from codesign.plugins import get_plugin_manager, get_registry
from ros_bridge.identify import identify, parse_settings


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
