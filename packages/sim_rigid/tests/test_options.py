"""The ``rigid`` options declaration, the model built from options, and the plugin."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.options import OptionsError, format_options
from codesign.plugins import get_plugin_manager
from sim_rigid.options import RigidOptions
from sim_rigid.scene import SceneError, build_model, make_simulator, robot_path


def test_every_option_is_declared_with_a_doc_and_listed():
    specs = RigidOptions.specs()
    assert {"robot", "design_space", "initial_positions", "gravity", "damping", "obstacles",
            "contact_stiffness", "contact_damping", "contact_scale", "friction",
            "friction_stiffness", "friction_sharpness",
            "actuation",
            "servo_stiffness", "servo_damping", "newton_tolerance", "newton_iterations",
            "kernels", "view", "view_window", "base_dir"} == {s.name for s in specs}
    assert all(spec.doc for spec in specs)
    listing = format_options(RigidOptions)
    assert all(spec.name in listing for spec in specs)


@pytest.mark.parametrize(("values", "name"), [
    ({"actuation": "velocity"}, "actuation"), ({"kernels": "cuda"}, "kernels"),
    ({"design_space": "mesh"}, "design_space"),
    ({"damping": -0.1}, "damping"), ({"servo_stiffness": -1.0}, "servo_stiffness"),
    ({"newton_tolerance": 0.1}, "newton_tolerance"), ({"newton_iterations": 0},
                                                      "newton_iterations"),
    ({"view": "back"}, "view"), ({"friction": -0.1}, "friction"),
    ({"contact_stiffness": -1.0}, "contact_stiffness"),
])
def test_values_outside_bounds_or_choices_raise(values, name):
    with pytest.raises(OptionsError, match=f"option '{name}'"):
        RigidOptions(**values)


def test_options_override_the_description(models):
    model = build_model(RigidOptions(robot=models.mixed_tree_description(),
                                     initial_positions={"hinge": 0.7, "float.z": 2.0},
                                     damping=0.3, gravity=[0.0, 0.0, -1.62]))
    names = model.coordinate_names
    assert model.joint_rest[names.index("hinge")] == 0.7
    assert model.joint_rest[names.index("float.z")] == 2.0
    np.testing.assert_array_equal(model.joint_damping, np.full(9, 0.3))
    np.testing.assert_array_equal(model.gravity, [0.0, 0.0, -1.62])
    assert model.contact_link.tolist() == [] and model.friction == 0.5
    listed = build_model(RigidOptions(robot="arm4", initial_positions=[0.1, 0.2, 0.3, 0.4],
                                      obstacles=[{"type": "plane", "point": [0, 0, -1]}],
                                      friction=0.8, contact_stiffness=2e4))
    assert listed.obstacle_type.tolist() == [0] and listed.obstacle_center[0, 2] == -1.0
    assert listed.friction == 0.8 and listed.contact_stiffness == 2e4
    np.testing.assert_array_equal(listed.joint_rest, [0.1, 0.2, 0.3, 0.4])


@pytest.mark.parametrize(("values", "message"), [
    ({"robot": "hand"}, r"robot 'hand' is neither a file .* bundled: \['arm4'\]"),
    ({"initial_positions": {"knee": 1.0}}, r"initial_positions names 'knee', not a "
                                            r"coordinate"),
    ({"initial_positions": [0.0, 1.0]}, r"initial_positions has 2 values; give one per "
                                        r"coordinate \(4"),
    ({"damping": [0.1, 0.2]}, r"damping has 2 values"),
    ({"robot": {"links": []}}, r"robot \(inline\): the description needs a non-empty list"),
    ({"obstacles": [{"type": "plane", "normal": [0, 0, 0]}]}, r"zero normal"),
])
def test_options_that_do_not_fit_the_robot(values, message):
    with pytest.raises(SceneError, match=message):
        build_model(RigidOptions(**values))


def test_a_relative_robot_path_starts_in_the_experiment_folder(tmp_path):
    (tmp_path / "bot.yaml").write_text(robot_path("arm4").read_text())
    assert robot_path("bot.yaml", base_dir=tmp_path) == tmp_path / "bot.yaml"
    sim = make_simulator(robot="bot.yaml", base_dir=str(tmp_path))
    assert sim.model.link_count == 4


def test_view_windows_are_checked():
    with pytest.raises(SceneError, match="view_window"):
        make_simulator(view_window=[1.0, 0.0, 0.0, 1.0])


def test_the_plugin_registers_the_simulator():
    manager = get_plugin_manager()
    simulators = {}
    manager.hook.codesign_register_simulators(
        register=lambda name, factory, **info: simulators.setdefault(name, factory))
    assert simulators["rigid"] is make_simulator
    assert make_simulator.options is RigidOptions


def test_the_friction_sharpness_option_reaches_the_model():
    assert build_model(RigidOptions(robot="arm4", friction_sharpness=4.0)).friction_sharpness \
        == 4.0
