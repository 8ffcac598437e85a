import dataclasses

import numpy as np
import pytest

from codesign.testing import gradcheck


def quadratic(inputs):
    x = inputs["x"]
    return float(np.sum(x**3) + 2.0 * np.sum(inputs["y"]["a"] * x[:2]))


def quadratic_grad(inputs):
    x, a = inputs["x"], inputs["y"]["a"]
    gx = 3 * x**2
    gx[:2] += 2 * a
    return {"x": gx, "y": {"a": 2 * x[:2]}}


def test_exact_gradients_pass_for_every_group_and_leaf():
    inputs = {"x": np.array([0.3, -1.2, 2.0]), "y": {"a": np.array([1.5, -0.5])}}
    report = gradcheck(quadratic, inputs, quadratic_grad(inputs))
    assert report.passed, str(report)
    assert set(report.errors) == {"x", "y.a"}


def test_a_small_error_in_one_entry_is_caught():
    inputs = {"x": np.array([0.3, -1.2, 2.0]), "y": {"a": np.array([1.5, -0.5])}}
    grads = quadratic_grad(inputs)
    grads["y"]["a"] = grads["y"]["a"] * (1 + 1e-4)
    report = gradcheck(quadratic, inputs, grads)
    assert not report.passed
    assert report.errors["y.a"] > 1e-6 and report.errors["x"] <= 1e-6
    with pytest.raises(AssertionError, match="y.a"):
        report.assert_ok()


def test_true_zero_gradient_is_not_flagged_by_round_off():
    inputs = {"x": np.array([1.0, 2.0]), "unused": np.array([3.0])}
    report = gradcheck(lambda d: float(np.sum(np.sin(d["x"]))), inputs,
                       {"x": np.cos(inputs["x"]), "unused": None})
    assert report.passed, str(report)


def test_missing_gradient_for_a_used_input_fails():
    inputs = {"x": np.array([1.0, 2.0])}
    assert not gradcheck(lambda d: float(np.sum(d["x"] ** 2)), inputs, {}).passed


@dataclasses.dataclass(frozen=True)
class S:
    q: np.ndarray
    ids: np.ndarray  # integer leaves are not perturbed


def test_dataclass_trees_with_integer_leaves():
    s = S(q=np.array([0.5, 1.5]), ids=np.array([1, 2]))
    report = gradcheck(lambda d: float(np.sum(d["s"].q ** 2)), {"s": s},
                       {"s": S(q=2 * s.q, ids=np.zeros(2))}, stencil=2)
    assert report.passed and set(report.errors) == {"s.q"}


def test_options_are_validated():
    with pytest.raises(ValueError, match="stencil"):
        gradcheck(quadratic, {"x": np.ones(3)}, {}, stencil=3)
    with pytest.raises(KeyError, match="no input group"):
        gradcheck(quadratic, {"x": np.ones(3)}, {}, groups=["z"])
