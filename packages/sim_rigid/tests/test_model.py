"""RigidModel construction checks and its coordinate bookkeeping."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sim_rigid.model import ModelError


def test_coordinates_of_each_joint(models):
    model = models.mixed_tree()
    # float, shoulder, mount (fixed), extend, hinge
    assert model.joint_coordinates.tolist() == [6, 1, 0, 1, 1]
    assert model.joint_first.tolist() == [0, 6, 7, 7, 8]
    assert model.actuated.tolist() == [6, 7, 8]
    assert len(model.coordinate_names) == model.coordinate_count == 9


@pytest.mark.parametrize(("field", "value", "message"), [
    ("joint_parent", [-1, 0, 3, 2], r"'elbow' \(index 2\) has parent link 3: links must be "
                                    r"in tree order"),
    ("link_mass", [1.0, -1.0, 1.0, 1.0], r"'link2' is -1.0 kg"),
    ("joint_axis", np.ones((4, 3)), r"joint_axis of joint 'yaw' has norm"),
    ("joint_rotation", np.tile(np.diag([1.0, 1.0, -1.0]), (4, 1, 1)),
     r"joint_rotation of joint 'yaw' is not a rotation matrix"),
    ("joint_damping", [0.1, -0.1, 0.0, 0.0], r"joint_damping: .*outside"),
    ("joint_rest", np.zeros(3), r"joint_rest must have shape \(4,\)"),
    ("link_com", np.full((4, 3), np.nan), r"link_com\[0, 0\] is nan"),
    ("joint_type", [0, 1, 7, 0], r"joint_type of joint 'elbow' is 7"),
    ("joint_names", ["a", "b", "b", "c"], r"joint_names must be unique; repeated: \['b'\]"),
    ("joint_gear", [1.0, -2.0, 1.0, 1.0], r"joint_gear of joint 'shoulder' is -2.0"),
    ("joint_actuated", [1, 1, 1, 1], r"joint_actuated must be one bool per joint"),
])
def test_bad_fields_get_clear_errors(models, field, value, message):
    with pytest.raises(ModelError, match=message):
        dataclasses.replace(models.arm4(), **{field: value})


def test_only_one_coordinate_joints_take_actions(models):
    with pytest.raises(ModelError, match=r"joint 'float' is free and cannot be actuated"):
        dataclasses.replace(models.mixed_tree(), joint_actuated=np.ones(5, dtype=bool))


def test_links_and_joints_pair_up(models):
    with pytest.raises(ModelError, match="4 links need 4 joints"):
        dataclasses.replace(models.arm4(), joint_names=("a", "b", "c"))


@pytest.mark.parametrize(("fields", "message"), [
    ({"contact_link": [4], "contact_point": np.zeros((1, 3))},
     r"contact_link\[0\] is 4: a link index in \[0, 4\)"),
    ({"contact_link": [0], "contact_point": np.zeros((2, 3))},
     r"contact_point must have shape \(1, 3\)"),
    ({"obstacle_type": [5], "obstacle_center": np.zeros((1, 3)),
      "obstacle_rotation": np.eye(3)[None], "obstacle_half_extents": np.ones((1, 3))},
     r"obstacle_type\[0\] is 5"),
    ({"obstacle_type": [1], "obstacle_center": np.zeros((1, 3)),
      "obstacle_rotation": 2 * np.eye(3)[None], "obstacle_half_extents": np.ones((1, 3))},
     r"obstacle_rotation\[0\] is not a rotation matrix"),
    ({"obstacle_type": [1], "obstacle_center": np.zeros((1, 3)),
      "obstacle_rotation": np.eye(3)[None], "obstacle_half_extents": np.zeros((1, 3))},
     r"obstacle 0 is a box with half extents \[0.0, 0.0, 0.0\] m"),
    ({"friction": -0.5}, r"friction: .*outside"),
])
def test_bad_contact_fields_get_clear_errors(models, fields, message):
    with pytest.raises(ModelError, match=message):
        dataclasses.replace(models.arm4(), **fields)
