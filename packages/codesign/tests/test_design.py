import numpy as np
import pytest

from codesign import DesignError, DesignSpace, Parameter, design_replace


def space():
    return DesignSpace([
        Parameter("material.youngs_modulus", (3,), 1e4, lower=1e3, upper=1e5, unit="Pa",
                  scale=1e4, entity="particle"),
        Parameter("link.length", (), 0.5, lower=0.1, upper=1.0, unit="m"),
    ])


def test_defaults_flatten_unflatten_roundtrip_with_scaling():
    s = space()
    d = s.defaults()
    assert s.size == 4 and s.names == ["material.youngs_modulus", "link.length"]
    v = s.flatten(d, scaled=True)
    np.testing.assert_allclose(v, [1, 1, 1, 0.5])
    back = s.unflatten(v, scaled=True)
    np.testing.assert_allclose(back["material.youngs_modulus"], [1e4] * 3)
    assert back["link.length"].shape == ()


def test_bounds_and_projection():
    s = space()
    lower, upper = s.bounds(scaled=True)
    np.testing.assert_allclose(lower, [0.1, 0.1, 0.1, 0.1])
    np.testing.assert_allclose(upper, [10, 10, 10, 1.0])
    projected = s.project({"material.youngs_modulus": np.array([0.0, 2e4, 1e9]),
                           "link.length": np.array(5.0)})
    np.testing.assert_allclose(projected["material.youngs_modulus"], [1e3, 2e4, 1e5])
    assert projected["link.length"] == 1.0


def test_gradient_flattening_fills_missing_with_zero_and_applies_chain_rule_for_scale():
    s = space()
    g = s.flatten_gradient({"link.length": np.array(2.0)}, scaled=True)
    np.testing.assert_allclose(g, [0, 0, 0, 2.0])
    g = s.flatten_gradient({"material.youngs_modulus": np.ones(3)}, scaled=True)
    np.testing.assert_allclose(g[:3], [1e4] * 3)


@pytest.mark.parametrize("design, message", [
    ({"material.youngs_modulus": np.ones(2), "link.length": 0.5}, "shape"),
    ({"material.youngs_modulus": np.array([1.0, np.nan, 1.0]), "link.length": 0.5}, "non-finite"),
    ({"material.youngs_modulus": np.ones(3)}, "lacks"),
    ({"material.youngs_modulus": np.ones(3), "link.length": 0.5, "bogus": 1.0}, "bogus"),
])
def test_check_rejects_bad_designs_with_named_errors(design, message):
    with pytest.raises(DesignError, match=message):
        space().check(design)


def test_parameter_validation():
    with pytest.raises(DesignError, match="lower bound exceeds"):
        Parameter("p", (), 0.0, lower=1.0, upper=0.0)
    with pytest.raises(DesignError, match="finite"):
        Parameter("p", (), np.nan)
    with pytest.raises(DesignError, match="does not fit"):
        Parameter("p", (2,), [1.0, 2.0, 3.0])
    with pytest.raises(DesignError, match="twice"):
        DesignSpace([Parameter("p", (), 0.0), Parameter("p", (), 1.0)])


def test_subset_prefix_concat_and_overrides():
    s = space()
    sub = s.subset(["link.length"]).prefixed("design")
    assert sub.names == ["design.link.length"]
    joined = sub.concat(DesignSpace([Parameter("w", (2,), 0.0)]))
    assert joined.names == ["design.link.length", "w"]
    changed = s.with_parameter("link.length", default=0.7)
    assert changed["link.length"].default_array() == 0.7
    with pytest.raises(DesignError, match="unknown design parameter 'nope'"):
        s.with_parameter("nope", default=1.0)


def test_design_replace_by_full_name_and_by_prefix():
    d = {"links.stiffness": np.ones(2), "links.damping": np.zeros(2)}
    out = design_replace(d, "links.stiffness", np.full(2, 3.0))
    np.testing.assert_array_equal(out["links.stiffness"], [3, 3])
    np.testing.assert_array_equal(d["links.stiffness"], [1, 1])  # pure
    out = design_replace(d, "links", {"damping": np.ones(2)})
    np.testing.assert_array_equal(out["links.damping"], [1, 1])
    with pytest.raises(DesignError, match="no design parameter at path"):
        design_replace(d, "joints", 1.0)


def test_fields_from_design_puts_the_designs_values_in_a_copy_of_the_fields():
    from codesign.design import fields_from_design

    fields = {"link_mass": np.ones(2), "joint_damping": np.zeros(3)}
    names = {"link.mass": "link_mass", "joint.damping": "joint_damping"}
    out = fields_from_design(fields, {"link.mass": [2, 3], "other": 1.0}, names)
    assert out["link_mass"].dtype == np.float64 and out["link_mass"].tolist() == [2.0, 3.0]
    assert out["joint_damping"] is fields["joint_damping"]
    assert fields["link_mass"].tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match=r"design 'joint.damping' must have shape \(3,\)"):
        fields_from_design(fields, {"joint.damping": np.zeros(2)}, names)
