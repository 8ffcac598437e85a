"""PBDModel construction: coercion, and a clear error for every unphysical field."""

import dataclasses

import numpy as np
import pytest

from sim_pbd.model import ModelError, PBDModel


def fields(**changes) -> dict:
    """A two-link pendulum on a fixed base (link 1 hangs from link 0), with ``changes``."""
    values = dict(
        link_names=("upper", "lower"), link_mass=[1.0, 2.0],
        link_inertia=[np.diag([0.1, 0.1, 0.01]), np.diag([0.2, 0.2, 0.02])],
        joint_names=("shoulder", "elbow"), joint_type=[0, 1], joint_parent=[-1, 0],
        joint_child=[0, 1], joint_parent_x=[[0, 0, 1], [0, 0, -0.5]],
        joint_parent_q=[[1, 0, 0, 0], [1, 0, 0, 0]], joint_child_x=[[0, 0, 0.5], [0, 0, 0.5]],
        joint_child_q=[[1, 0, 0, 0], [0, 1, 0, 0]], joint_axis=[[0, 1, 0], [0, 0, 1]],
        joint_lower=[-np.inf, -0.1], joint_upper=[np.inf, 0.1], joint_damping=[0.7, 0.0],
        joint_friction=[0.0, 0.1], joint_compliance=[0.0, 1e-6], joint_rest=[0.2, 0.0],
        gravity=[0, 0, -9.81])
    return {**values, **changes}


def test_fields_become_arrays_of_the_documented_kinds():
    model = PBDModel(**fields())
    assert model.link_count == 2 and model.joint_count == 2
    assert model.link_mass.dtype == np.float64 and model.link_inertia.shape == (2, 3, 3)
    assert model.joint_parent.dtype == np.int64
    np.testing.assert_array_equal(model.joint_lower, [-np.inf, -0.1])
    assert set(model.parameters()) >= {"link_mass", "joint_damping"}
    single = PBDModel(**fields(link_mass=np.array([1.0, 2.0], dtype=np.float32)))
    assert single.link_mass.dtype == np.float32  # float32 stays float32


def test_floating_base_has_a_root_without_joint():
    base = dict(link_names=("root", "upper", "lower"), link_mass=[5.0, 1.0, 2.0],
                link_inertia=[np.eye(3), np.diag([0.1, 0.1, 0.01]), np.diag([0.2, 0.2, 0.02])],
                joint_parent=[0, 1], joint_child=[1, 2], floating_base=True)
    model = PBDModel(**fields(**base))
    assert model.floating_base and model.link_count == 3
    with pytest.raises(ModelError, match="joint 'shoulder' attaches link 1 to the world, but "
                                         "a floating-base model"):
        PBDModel(**fields(**{**base, "joint_parent": [-1, 1]}))


def test_replacing_a_parameter_checks_it_again():
    model = PBDModel(**fields())
    heavier = dataclasses.replace(model, link_mass=np.array([3.0, 4.0]))
    np.testing.assert_array_equal(heavier.link_mass, [3.0, 4.0])
    with pytest.raises(ModelError, match="link_mass of link 'lower'"):
        dataclasses.replace(model, link_mass=np.array([3.0, 0.0]))


BAD_FIELDS = [
    ({"link_mass": [1.0]}, r"link_mass must have shape \(2,\)"),
    ({"link_mass": ["a", "b"]}, "link_mass must hold numbers"),
    ({"joint_parent_x": [[0, 0, np.nan], [0, 0, 0]]}, r"joint_parent_x\[0, 2\] is nan"),
    ({"gravity": [0, 0, np.inf]}, "gravity.* every entry must be finite"),
    ({"joint_lower": [np.nan, 0]}, r"joint_lower\[0\] is nan"),
    ({"link_mass": [1.0, -2.0]}, r"link_mass of link 'lower' is -2.0 kg: masses must be > 0"),
    ({"link_inertia": [np.diag([0.1, 0.1, 0.0]), np.eye(3)]},
     "link_inertia of link 'upper': the inertia is not positive definite"),
    ({"link_inertia": [np.eye(3), [[1, 0.5, 0], [0, 1, 0], [0, 0, 1]]]},
     "link_inertia of link 'lower': .* not symmetric"),
    ({"link_inertia": [np.diag([1.0, 1.0, 2.5]), np.eye(3)]}, "triangle inequality"),
    ({"joint_axis": [[0, 2, 0], [0, 0, 1]]}, "joint_axis of joint 'shoulder' has norm 2.0"),
    ({"joint_child_q": [[1, 0, 0, 0], [1, 1, 0, 0]]}, "joint_child_q of joint 'elbow'"),
    ({"joint_parent_q": [[0, 0, 0, 0], [1, 0, 0, 0]]}, "joint_parent_q of joint 'shoulder'"),
    ({"joint_type": [0, 2]}, r"joint_type of joint 'elbow' is 2: an index into \("),
    ({"joint_parent": [-1.0, 0.0]}, "joint_parent must be an integer array"),
    ({"joint_parent": [-1, 1]}, "joint 'elbow' joins link 1 to link 1: .* tree order"),
    ({"joint_child": [1, 1]}, r"every link but none must be the child of exactly one joint; "
                              r"joints per link: \{'upper': 0, 'lower': 2\}"),
    ({"joint_child": [0, 0], "joint_parent": [-1, -1]}, "child of exactly one joint"),
    ({"joint_lower": [0.5, -0.1], "joint_upper": [0.2, 0.1]},
     r"joint 'shoulder' has limits \[0.5, 0.2\]"),
    ({"joint_lower": [np.inf, -0.1], "joint_upper": [np.inf, 0.1]}, "has limits \\[inf, inf\\]"),
    ({"joint_damping": [0.7, -1.0]}, "joint_damping: -1 N m s/rad or N s/m lies outside its "
                                     "physical bounds"),
    ({"joint_compliance": [-1e-3, 0.0]}, "joint_compliance: -0.001"),
    ({"joint_friction": [0.0, -0.1]}, "joint_friction of joint 'elbow' is -0.1"),
    ({"link_names": ("upper", "upper")}, r"link_names must be unique; repeated: \['upper'\]"),
    ({"joint_names": ("shoulder", "")}, "joint_names must be non-empty strings"),
    ({"floating_base": "yes"}, "floating_base must be true or false"),
]


@pytest.mark.parametrize("changes, message", BAD_FIELDS)
def test_bad_fields_raise_naming_the_field(changes, message):
    with pytest.raises(ModelError, match=message):
        PBDModel(**fields(**changes))
