import numpy as np
import pytest

from codesign.backend import (
    BackendError,
    array_module_of,
    gather,
    get_array_module,
    is_gpu_available,
    scatter_add,
    to_backend,
    to_host,
)


def test_numpy_is_the_default(monkeypatch):
    monkeypatch.delenv("CODESIGN_BACKEND", raising=False)
    assert get_array_module() is np
    assert array_module_of(np.zeros(2)) is np


def test_unknown_backend_names_the_choices():
    with pytest.raises(BackendError, match="numpy, cupy"):
        get_array_module("jax")


@pytest.mark.skipif(is_gpu_available(), reason="CuPy with a GPU is present")
def test_cupy_without_gpu_gives_a_clear_error():
    with pytest.raises(BackendError, match="use backend 'numpy'"):
        get_array_module("cupy")


def test_scatter_add_accumulates_repeated_indices_and_gather_reads():
    target = np.zeros(4)
    scatter_add(target, np.array([0, 2, 2, 3]), np.array([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_array_equal(target, [1, 0, 5, 4])
    np.testing.assert_array_equal(gather(target, np.array([2, 0])), [5, 1])
    grid = np.zeros((2, 2))
    scatter_add(grid, (np.array([0, 0, 1]), np.array([1, 1, 0])), np.array([1.0, 1.0, 2.0]))
    np.testing.assert_array_equal(grid, [[0, 2], [2, 0]])


def test_host_roundtrip():
    a = np.arange(3.0)
    assert to_host(a) is not None and np.array_equal(to_backend(a, np), a)


@pytest.mark.skipif(not is_gpu_available(), reason="needs CuPy and a CUDA device")
def test_cupy_scatter_add_matches_numpy():
    cp = get_array_module("cupy")
    target = cp.zeros(4)
    scatter_add(target, cp.asarray([0, 2, 2, 3]), cp.asarray([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_array_equal(to_host(target), [1, 0, 5, 4])
