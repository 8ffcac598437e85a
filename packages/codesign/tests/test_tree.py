import dataclasses

import numpy as np
import pytest

from codesign.tree import (
    is_float_leaf,
    tree_add,
    tree_copy,
    tree_describe,
    tree_leaves,
    tree_map,
    tree_paths,
    tree_scale,
    tree_to_host,
    tree_vdot,
    tree_zeros_like,
    tree_zeros_with,
)


@dataclasses.dataclass(frozen=True)
class Inner:
    a: np.ndarray


@dataclasses.dataclass(frozen=True)
class Outer:
    x: np.ndarray
    inner: Inner
    extra: dict
    label: np.ndarray | None = None


def make():
    return Outer(x=np.arange(3.0), inner=Inner(a=np.ones((2, 2))), extra={"k": np.array([5.0])})


def test_tree_map_visits_nested_dataclasses_and_dicts_and_keeps_none():
    doubled = tree_map(lambda v: 2 * v, make())
    assert isinstance(doubled, Outer) and isinstance(doubled.inner, Inner)
    np.testing.assert_array_equal(doubled.inner.a, 2 * np.ones((2, 2)))
    np.testing.assert_array_equal(doubled.extra["k"], [10.0])
    assert doubled.label is None


def test_arithmetic_is_leafwise_and_pure():
    a, b = make(), make()
    total = tree_add(a, b)
    np.testing.assert_array_equal(total.x, 2 * np.arange(3.0))
    np.testing.assert_array_equal(a.x, np.arange(3.0))  # inputs untouched
    np.testing.assert_array_equal(tree_scale(a, 3.0).inner.a, 3 * np.ones((2, 2)))
    assert tree_vdot(a, b) == pytest.approx(0 + 1 + 4 + 4 + 25)


def test_zeros_copy_host_and_describe():
    a = make()
    zeros = tree_zeros_like(a)
    assert all(np.all(leaf == 0) for leaf in tree_leaves(zeros))
    copied = tree_copy(a)
    copied.x[0] = 99.0
    assert a.x[0] == 0.0
    assert isinstance(tree_to_host(a).x, np.ndarray)
    described = tree_describe(a)
    assert described["inner.a"] == ((2, 2), "float64")
    assert described["extra.k"] == ((1,), "float64")


def test_paths_follow_a_group_name_and_float_leaves_are_recognized():
    a = make()
    paths = tree_paths({"state": a, "pair": [a.x, None]})
    assert list(paths) == [".state.x", ".state.inner.a", ".state.extra.k", ".pair[0]"]
    assert paths[".state.inner.a"] is a.inner.a
    assert tree_paths(a.x) == {"": a.x} and tree_paths(None) == {}
    assert is_float_leaf(np.zeros(2, np.float32))
    assert not is_float_leaf(np.zeros(2, np.int64)) and not is_float_leaf(3.0)


def test_zeros_with_sets_the_given_fields_in_their_dtype():
    state = Outer(x=np.arange(3, dtype=np.float32), inner=Inner(a=np.ones((2, 2))), extra={})
    g = tree_zeros_with(state, x=[1.0, 2.0, 3.0])
    assert g.x.dtype == np.float32 and g.x.tolist() == [1.0, 2.0, 3.0]
    np.testing.assert_array_equal(g.inner.a, np.zeros((2, 2)))
    assert state.x.tolist() == [0.0, 1.0, 2.0]  # pure
