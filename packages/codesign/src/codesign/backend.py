"""Array backends: NumPy by default, CuPy when requested and importable.

Simulators take their array module from here so that one code path serves CPU and GPU.
The scatter and gather helpers hide the one place where NumPy and CuPy differ in spelling
(unbuffered indexed addition).
"""

from __future__ import annotations

import os
from types import ModuleType

import numpy as np

__all__ = [
    "BackendError",
    "get_array_module",
    "array_module_of",
    "is_gpu_available",
    "scatter_add",
    "gather",
    "to_host",
    "to_backend",
]

_BACKEND_NAMES = ("numpy", "cupy")


class BackendError(RuntimeError):
    """Raised when a requested array backend cannot be used."""


def get_array_module(name: str | None = None) -> ModuleType:
    """Return the array module for ``name`` ("numpy" or "cupy").

    With ``name=None`` the environment variable ``CODESIGN_BACKEND`` decides, defaulting to
    NumPy. Asking for CuPy on a machine without it (or without a CUDA device) raises
    :class:`BackendError` that says how to fix it.
    """
    name = (name or os.environ.get("CODESIGN_BACKEND") or "numpy").lower()
    if name not in _BACKEND_NAMES:
        raise BackendError(
            f"unknown array backend {name!r}; choose one of {', '.join(_BACKEND_NAMES)}"
        )
    if name == "numpy":
        return np
    try:
        import cupy
    except ImportError as exc:
        raise BackendError(
            "backend 'cupy' was requested but CuPy is not installed; install it with "
            "`pip install './packages/codesign[gpu]'` (from a checkout) on a machine with CUDA, "
            "or use backend 'numpy'"
        ) from exc
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CuPy raises its own CUDARuntimeError subclasses
        raise BackendError(
            f"backend 'cupy' was requested but no CUDA device is usable ({exc}); "
            "use backend 'numpy'"
        ) from exc
    return cupy


def is_gpu_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    try:
        get_array_module("cupy")
    except BackendError:
        return False
    return True


def array_module_of(*arrays) -> ModuleType:
    """Return the array module (NumPy or CuPy) that owns ``arrays``."""
    for array in arrays:
        module = type(array).__module__
        if module.startswith("cupy"):
            import cupy

            return cupy
    return np


def scatter_add(target, index, values):
    """Add ``values`` into ``target`` at ``index`` with repeated indices accumulating.

    ``target`` is modified in place and returned. ``index`` is an integer array (or tuple of
    arrays for multi-dimensional targets), exactly as for ``numpy.add.at``.
    """
    xp = array_module_of(target)
    if xp is np:
        np.add.at(target, index, values)
    else:
        import cupyx

        cupyx.scatter_add(target, index, values)
    return target


def gather(source, index):
    """Return ``source[index]`` (a new array), for integer index arrays on either backend."""
    return source[index]


def to_host(array) -> np.ndarray:
    """Return ``array`` as a NumPy array (copying from the GPU when needed)."""
    if hasattr(array, "get") and array_module_of(array) is not np:
        return array.get()
    return np.asarray(array)


def to_backend(array, xp: ModuleType):
    """Return ``array`` as an array of module ``xp``."""
    if xp is np:
        return to_host(array)
    return xp.asarray(array)
