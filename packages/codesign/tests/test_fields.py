"""The model field checks: converted fields, and errors of the caller's class naming the
field."""

import numpy as np
import pytest

from codesign.fields import float_array, index_array, unique_names, view_window


class FieldError(ValueError):
    pass


def test_float_array_converts_to_float64_unless_a_float_dtype_is_kept():
    assert float_array("x", [1, 2], (2,), error=FieldError).dtype == np.float64
    assert float_array("x", np.ones(2, np.float32), (2,), error=FieldError).dtype == np.float64
    kept = float_array("x", np.ones(2, np.float32), (2,), error=FieldError, keep_float=True)
    assert kept.dtype == np.float32
    assert float_array("x", [1, 2], (2,), error=FieldError, keep_float=True).dtype == np.float64


@pytest.mark.parametrize("value, shape, finite, message", [
    (["a"], (1,), True, "x must hold numbers"),
    ([True], (1,), True, "x must hold numbers"),
    ([1.0, 2.0], (3,), True, r"x must have shape \(3,\), got \(2,\)"),
    ([[1.0, np.inf]], (1, 2), True, r"x\[0, 1\] is inf: every entry must be finite"),
    ([np.nan], (1,), False, r"x\[0\] is nan: every entry must be a number \(±inf allowed\)"),
])
def test_float_array_names_the_field_and_the_bad_entry(value, shape, finite, message):
    with pytest.raises(FieldError, match=message):
        float_array("x", value, shape, error=FieldError, finite=finite)


def test_float_array_allows_infinities_when_not_finite():
    limits = float_array("limit", [-np.inf, 1.0], (2,), error=FieldError, finite=False)
    np.testing.assert_array_equal(limits, [-np.inf, 1.0])


def test_index_array_gives_int64_and_rejects_floats_and_wrong_lengths():
    assert index_array("i", np.array([1, 2], np.int32), 2, error=FieldError).dtype == np.int64
    assert index_array("i", np.zeros(0), 0, error=FieldError).shape == (0,)
    for value in ([1.0, 2.0], [1, 2, 3]):
        with pytest.raises(FieldError, match=r"i must be an integer array of shape \(2,\)"):
            index_array("i", value, 2, error=FieldError)


def test_unique_names_rejects_empty_non_string_and_repeated_names():
    assert unique_names("names", ["a", "b"], error=FieldError) == ("a", "b")
    for value in (["a", ""], ["a", 3]):
        with pytest.raises(FieldError, match="names must be non-empty strings"):
            unique_names("names", value, error=FieldError)
    with pytest.raises(FieldError, match=r"names must be unique; repeated: \['a'\]"):
        unique_names("names", ["a", "b", "a"], error=FieldError)


def test_view_window_gives_four_floats_or_none_and_rejects_empty_ranges():
    assert view_window(None, error=FieldError) is None
    assert view_window([0, 1, -1, 2], error=FieldError) == (0.0, 1.0, -1.0, 2.0)
    for window in ([1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 1.0, 1.0], [0.0, 1.0]):
        with pytest.raises(FieldError, match="view_window must be"):
            view_window(window, error=FieldError)
