"""Robot descriptions into models, and every malformed description refused by name."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from sim_rigid.description import DescriptionError, load_description, rpy_matrix
from sim_rigid.model import JOINT_TYPES


def test_the_mixed_tree_loads_in_tree_order(models):
    description = models.mixed_tree_description()
    # listed children first: the loader must put parents before children
    description["joints"] = description["joints"][::-1]
    model = load_description(description)
    assert model.link_names[0] == "torso"
    assert all(parent < i for i, parent in enumerate(model.joint_parent))
    assert model.coordinate_count == 6 + 1 + 1 + 1
    names = model.coordinate_names
    assert names[:6] == ("float.x", "float.y", "float.z", "float.rz", "float.ry", "float.rx")
    # breadth first from the world: the torso, then what hangs from it, then the rest
    assert model.joint_names == ("float", "mount", "shoulder", "hinge", "extend")
    assert [names[k] for k in model.actuated] == ["shoulder", "hinge", "extend"]
    assert JOINT_TYPES[model.joint_type[model.joint_names.index("mount")]] == "fixed"
    np.testing.assert_array_equal(model.joint_rest[:6], [0.05, -0.02, 0.1, 0.3, -0.4, 0.2])
    np.testing.assert_array_equal(model.joint_damping[:6], np.full(6, 0.1))


def test_unactuated_joints_and_gears(models):
    description = models.mixed_tree_description()
    description["joints"][4]["actuated"] = False       # the flap's hinge: moved by nothing
    description["joints"][2]["gear"] = 3.0             # the slider: 3 N per unit of action
    model = load_description(description)
    assert [model.coordinate_names[k] for k in model.actuated] == ["shoulder", "extend"]
    assert model.actuated_gear.tolist() == [1.0, 3.0]
    assert model.coordinate_count == 9                  # the hinge keeps its coordinate


def test_a_yaml_file_loads(tmp_path, models):
    import yaml

    path = tmp_path / "robot.yaml"
    path.write_text(yaml.safe_dump(models.mixed_tree_description()))
    assert load_description(path).link_count == 5
    with pytest.raises(DescriptionError, match="is not a file"):
        load_description(tmp_path / "missing.yaml")
    path.write_text("links: [unclosed")
    with pytest.raises(DescriptionError, match="is not valid YAML"):
        load_description(path)


def test_rpy_is_urdfs_convention():
    roll, pitch, yaw = 0.3, -0.4, 1.1

    def about(axis, angle):
        c, s = np.cos(angle), np.sin(angle)
        i, j = [k for k in range(3) if k != axis]
        out = np.eye(3)
        out[i, i], out[i, j], out[j, i], out[j, j] = c, -s, s, c
        if axis == 1:  # Ry's sines sit the other way round
            out[i, j], out[j, i] = s, -s
        return out

    expected = about(2, yaw) @ about(1, pitch) @ about(0, roll)
    np.testing.assert_allclose(rpy_matrix([roll, pitch, yaw]), expected, atol=1e-15)


def _broken(models, change):
    description = copy.deepcopy(models.mixed_tree_description())
    change(description)
    return description


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["joints"][1].update(parent="nowhere"),
     r"'shoulder'.*parent 'nowhere' is not a link or world"),
    (lambda d: d["joints"][1].update(child="ghost"), r"child 'ghost' is not a link"),
    (lambda d: d["joints"].append({"name": "again", "type": "fixed", "parent": "world",
                                   "child": "flap"}),
     r"link 'flap' is the child of two joints, 'hinge' and 'again'"),
    (lambda d: d["links"].append({"name": "loose", "mass": 1.0, "inertia": [1, 1, 1]}),
     r"links \['loose'\] are the child of no joint"),
    (lambda d: (d["joints"][0].update(parent="slider")),
     r"joints \['extend', 'float', 'hinge', 'mount', 'shoulder'\] form a cycle"),
    (lambda d: d["joints"][1].update(type="ball"), r"type 'ball' is not one of"),
    (lambda d: d["joints"][1].update(axis=[0, 0, 0]), r"'shoulder' has a zero axis"),
    (lambda d: d["joints"][1].update(limit=1.0), r"unknown keys \['limit'\]"),
    (lambda d: d["links"][0].update(inertia=[1.0, 1.0, 3.0]), r"'torso'.*triangle"),
    (lambda d: d["links"][0].update(mass=0.0), r"'torso' is 0.0 kg: masses must be > 0"),
    (lambda d: d["joints"][0].update(damping=[0.1, 0.2]), r"'float' damping needs 6 value"),
    (lambda d: d["joints"][1].update(origin=[0.0, 1.0]), r"'shoulder' origin must be a list "
                                                         r"of 3 numbers"),
    (lambda d: d["joints"][1].update(damping=-1.0), r"joint_damping.*outside"),
    (lambda d: d.update(wheels=[]), r"unknown description keys \['wheels'\]"),
    (lambda d: d.update(links=[]), r"non-empty list 'links'"),
    (lambda d: d["joints"][3].update(actuated=True),
     r"'mount' is fixed: \['actuated'\] apply to revolute and prismatic joints only"),
    (lambda d: d["joints"][0].update(gear=2.0), r"'float' is free: \['gear'\] apply"),
    (lambda d: d["joints"][4].update(actuated="no"), r"'hinge' actuated must be true or false"),
    (lambda d: d["joints"][2].update(gear=0.0), r"'extend' gear must be a number > 0"),
])
def test_bad_descriptions_get_clear_errors(models, change, message):
    with pytest.raises(DescriptionError, match=message):
        load_description(_broken(models, change))


def test_a_description_must_be_a_mapping():
    with pytest.raises(DescriptionError, match="a mapping with 'links' and 'joints'"):
        load_description(["links"])
