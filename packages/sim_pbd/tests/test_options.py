"""The ``pbd`` options declaration and the model built from options."""

import numpy as np
import pytest

from codesign.options import OptionsError, format_options
from sim_pbd.options import PBDOptions
from sim_pbd.scene import SceneError, build_model, urdf_path

LEFT_ARM = ["left_s0", "left_s1", "left_e0", "left_e1", "left_w0", "left_w1", "left_w2"]

PENDULUM = """<robot name='p'><link name='base'/>
<link name='bob'><inertial><origin xyz='0 0 -1'/><mass value='2'/>
<inertia ixx='0.01' ixy='0' ixz='0' iyy='0.01' iyz='0' izz='0.01'/></inertial></link>
<joint name='pivot' type='revolute'><axis xyz='0 1 0'/><parent link='base'/>
<child link='bob'/><limit lower='-1' upper='1' effort='1' velocity='1'/>
<dynamics damping='0.3'/></joint></robot>"""


def test_every_option_is_declared_with_a_doc_and_listed():
    specs = PBDOptions.specs()
    assert {"urdf", "base_link", "joints", "floating_base", "initial_positions", "gravity",
            "substeps", "iterations", "solver", "scheme", "compliance", "joint_limits", "damping",
            "kernels", "springs", "view", "view_window", "base_dir"} == {s.name for s in specs}
    assert all(spec.doc for spec in specs)
    listing = format_options(PBDOptions)
    assert all(spec.name in listing for spec in specs)
    assert PBDOptions.spec("gravity").unit == "m/s^2"


@pytest.mark.parametrize("values, name", [
    ({"substeps": 0}, "substeps"), ({"iterations": 0}, "iterations"),
    ({"solver": "newton"}, "solver"), ({"kernels": "cuda"}, "kernels"),
    ({"compliance": -1.0}, "compliance"),
    ({"damping": [0.7, -0.1]}, "damping"), ({"view": "back"}, "view"),
    ({"gravity": [0.0, 0.0, float("nan")]}, "gravity"),
])
def test_values_outside_bounds_or_choices_raise(values, name):
    with pytest.raises(OptionsError, match=f"option '{name}'"):
        PBDOptions(**values)


def test_default_options_build_the_whole_baxter():
    model = build_model(PBDOptions())
    assert model.joint_count == 15 and model.joint_names[0] == "head_pan"
    np.testing.assert_allclose(model.gravity, [0, 0, -9.81])


def test_left_arm_with_overrides():
    options = PBDOptions(joints=LEFT_ARM, joint_limits=False, damping=0.1, compliance=1e-7,
                         gravity=[0.0, 0.0, -9.8], initial_positions=[0.0, -0.5, 0, 0, 0, 0, 0])
    model = build_model(options)
    np.testing.assert_array_equal(model.joint_lower, -np.inf)
    np.testing.assert_array_equal(model.joint_upper, np.inf)
    np.testing.assert_allclose(model.joint_damping, 0.1)
    np.testing.assert_allclose(model.joint_compliance, 1e-7)
    np.testing.assert_allclose(model.gravity, [0, 0, -9.8])
    np.testing.assert_allclose(model.joint_rest[1], -0.5)
    per_joint = build_model(PBDOptions(joints=LEFT_ARM, damping=[0.1 * k for k in range(7)]))
    np.testing.assert_allclose(per_joint.joint_damping, np.arange(7) * 0.1)
    with pytest.raises(SceneError, match="damping has 2 values; give one, or one per joint "
                                         r"\(7: \['left_s0'"):
        build_model(PBDOptions(joints=LEFT_ARM, damping=[0.1, 0.2]))


def test_relative_urdf_starts_in_base_dir(tmp_path, monkeypatch):
    (tmp_path / "robots").mkdir()
    (tmp_path / "robots" / "pendulum.urdf").write_text(PENDULUM)
    monkeypatch.chdir(tmp_path / "robots")  # the working directory is not where it starts
    model = build_model(PBDOptions(urdf="robots/pendulum.urdf", base_dir=str(tmp_path),
                                   initial_positions={"pivot": 0.25}))
    assert model.joint_names == ("pivot",)
    np.testing.assert_allclose(model.joint_damping, 0.3)  # the URDF's
    np.testing.assert_allclose(model.joint_rest, 0.25)
    assert urdf_path("double_pendulum").name == "double_pendulum.urdf"


def test_unknown_urdf_names_the_bundled_robots(tmp_path):
    with pytest.raises(SceneError, match=r"neither a file in .* nor a bundled robot; bundled: "
                                         r"\['baxter', 'double_pendulum'\]"):
        urdf_path("baxtr", base_dir=tmp_path)
