"""Checks of the array and name fields a simulator builds its static model and views from,
shared by the simulators (sim_rigid's and sim_pbd's): each returns the field in its checked
form or raises the simulator's own error class naming the field and what it must be."""

from __future__ import annotations

import numpy as np

__all__ = ["float_array", "index_array", "unique_names", "view_window"]


def float_array(name: str, value, shape: tuple[int, ...], *, error: type[Exception],
                finite: bool = True, keep_float: bool = False) -> np.ndarray:
    """``value`` as a float64 array of ``shape`` (with ``keep_float``, a floating array keeps
    its dtype, float32 say), every entry finite (with ``finite=False``: not NaN, ±inf
    allowed).

    Raises ``error`` naming ``name`` for non-numbers, a wrong shape or the first bad entry.
    """
    array = np.asarray(value)
    if array.dtype.kind not in "fiu" or array.dtype == np.bool_:
        raise error(f"{name} must hold numbers, got dtype {array.dtype}")
    if not (keep_float and array.dtype.kind == "f"):
        array = array.astype(np.float64)
    if array.shape != shape:
        raise error(f"{name} must have shape {shape}, got {array.shape}")
    bad = ~np.isfinite(array) if finite else np.isnan(array)
    if bad.any():
        index = tuple(np.argwhere(bad)[0].tolist())
        raise error(f"{name}{list(index)} is {array[index]}: every entry must be "
                    f"{'finite' if finite else 'a number (±inf allowed)'}")
    return array


def index_array(name: str, value, count: int, *, error: type[Exception]) -> np.ndarray:
    """``value`` as an int64 array of shape (count,); raises ``error`` naming ``name`` when
    it has another shape or holds non-integers (an empty array of any dtype passes)."""
    array = np.asarray(value)
    if array.shape != (count,) or (array.size and array.dtype.kind not in "iu"):
        raise error(f"{name} must be an integer array of shape ({count},), got "
                    f"{array.dtype} {array.shape}")
    return array.astype(np.int64)


def unique_names(field: str, value, *, error: type[Exception]) -> tuple[str, ...]:
    """``value`` as a tuple of non-empty, distinct strings; raises ``error`` naming
    ``field`` and the repeated names otherwise."""
    names = tuple(value)
    if not all(isinstance(name, str) and name for name in names):
        raise error(f"{field} must be non-empty strings, got {names!r}")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise error(f"{field} must be unique; repeated: {repeated}")
    return names


def view_window(window, *, error: type[Exception]) -> tuple[float, float, float, float] | None:
    """The ``view_window`` option [u_min, u_max, v_min, v_max] [m] as floats (None: framed
    automatically); raises ``error`` unless it holds four values with min < max."""
    if window is None:
        return None
    values = np.asarray(window, dtype=np.float64)
    if values.shape != (4,) or not (values[0] < values[1] and values[2] < values[3]):
        raise error(f"view_window must be [u_min, u_max, v_min, v_max] with min < max, "
                    f"got {window!r}")
    return tuple(float(v) for v in values)
