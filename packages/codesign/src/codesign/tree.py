"""State trees: frozen dataclasses (possibly nested) and dicts whose leaves are arrays.

The core treats simulator states and gradients as trees and never looks inside. These
functions are pure: they return new trees and never modify their inputs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .backend import array_module_of, to_backend, to_host

__all__ = [
    "tree_map",
    "tree_leaves",
    "tree_add",
    "tree_scale",
    "tree_zeros_like",
    "tree_zeros_with",
    "tree_copy",
    "tree_to_host",
    "tree_vdot",
    "tree_describe",
    "tree_paths",
    "is_float_leaf",
]


def tree_map(fn: Callable, tree, *others):
    """Apply ``fn`` leafwise to ``tree`` (and matching ``others``), returning a new tree.

    Nodes are dataclass instances, dicts, tuples and lists; every other object is a leaf.
    ``None`` leaves stay ``None``.
    """
    if tree is None:
        return None
    if dataclasses.is_dataclass(tree) and not isinstance(tree, type):
        changes = {
            f.name: tree_map(fn, getattr(tree, f.name), *(getattr(o, f.name) for o in others))
            for f in dataclasses.fields(tree)
        }
        return dataclasses.replace(tree, **changes)
    if isinstance(tree, dict):
        return {k: tree_map(fn, v, *(o[k] for o in others)) for k, v in tree.items()}
    if isinstance(tree, tuple | list):
        return type(tree)(tree_map(fn, v, *(o[i] for o in others)) for i, v in enumerate(tree))
    return fn(tree, *others)


def tree_leaves(tree) -> Iterator:
    """Yield the non-``None`` leaves of ``tree`` in a deterministic order."""
    if tree is None:
        return
    if dataclasses.is_dataclass(tree) and not isinstance(tree, type):
        for f in dataclasses.fields(tree):
            yield from tree_leaves(getattr(tree, f.name))
    elif isinstance(tree, dict):
        for key in tree:
            yield from tree_leaves(tree[key])
    elif isinstance(tree, tuple | list):
        for value in tree:
            yield from tree_leaves(value)
    else:
        yield tree


def tree_add(a, b):
    """Leafwise ``a + b``."""
    return tree_map(lambda x, y: x + y, a, b)


def tree_scale(tree, factor: float):
    """Leafwise ``factor * tree``."""
    return tree_map(lambda x: x * factor, tree)


def tree_zeros_like(tree):
    """A tree of zeros with the shapes and dtypes of ``tree``."""
    return tree_map(lambda x: array_module_of(x).zeros_like(x), tree)


def tree_zeros_with(state, **fields):
    """A zero tree like the dataclass ``state`` with ``fields`` set: each value (a host or
    backend array) is cast to that field's dtype and put on its backend. Builds the
    gradient of a state that an observer or term reads only a few fields of."""
    zero = tree_zeros_like(state)
    changes = {}
    for name, value in fields.items():
        like = getattr(zero, name)
        changes[name] = to_backend(np.asarray(to_host(value), dtype=like.dtype),
                                   array_module_of(like))
    return dataclasses.replace(zero, **changes)


def tree_copy(tree):
    """A deep copy of the arrays in ``tree``."""
    return tree_map(lambda x: x.copy(), tree)


def tree_to_host(tree):
    """The same tree with every leaf as a NumPy array."""
    return tree_map(to_host, tree)


def tree_vdot(a, b) -> float:
    """Sum over leaves of the inner products ``<a_i, b_i>`` as a Python float."""
    total = 0.0
    for x, y in zip(tree_leaves(a), tree_leaves(b), strict=True):
        total += float(to_host(array_module_of(x).vdot(x, y)))
    return total


def is_float_leaf(leaf) -> bool:
    """Whether ``leaf`` is a floating-point array (what gradients and perturbations touch)."""
    return hasattr(leaf, "dtype") and np.issubdtype(np.dtype(str(leaf.dtype)), np.floating)


def tree_paths(tree, path: str = "") -> dict[str, Any]:
    """The non-``None`` leaves keyed by their path from the root, ``.field``, ``.key`` and
    ``[index]`` joined (``".particle_x"``, ``"[0].q"``), so it can follow a group name."""
    if tree is None:
        return {}
    if dataclasses.is_dataclass(tree) and not isinstance(tree, type):
        items = [(f".{f.name}", getattr(tree, f.name)) for f in dataclasses.fields(tree)]
    elif isinstance(tree, dict):
        items = [(f".{key}", value) for key, value in tree.items()]
    elif isinstance(tree, tuple | list):
        items = [(f"[{i}]", value) for i, value in enumerate(tree)]
    else:
        return {path: tree}
    return {p: leaf for step, value in items for p, leaf in tree_paths(value, path + step).items()}


def tree_describe(tree) -> dict[str, Any]:
    """Leaf paths (without :func:`tree_paths`' leading dot) mapped to ``(shape, dtype)``, for
    error messages and conformance checks."""
    return {path.removeprefix("."): (tuple(np.shape(leaf)),
                                     str(getattr(leaf, "dtype", type(leaf).__name__)))
            for path, leaf in tree_paths(tree).items()}
