"""State trees: frozen dataclasses (possibly nested) and dicts whose leaves are arrays.

The core treats simulator states and gradients as trees and never looks inside. These
functions are pure: they return new trees and never modify their inputs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .backend import array_module_of, to_host

__all__ = [
    "tree_map",
    "tree_leaves",
    "tree_add",
    "tree_scale",
    "tree_axpy",
    "tree_zeros_like",
    "tree_copy",
    "tree_to_host",
    "tree_vdot",
    "tree_all_finite",
    "tree_describe",
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


def tree_axpy(alpha: float, x, y):
    """Leafwise ``alpha * x + y``."""
    return tree_map(lambda xi, yi: alpha * xi + yi, x, y)


def tree_zeros_like(tree):
    """A tree of zeros with the shapes and dtypes of ``tree``."""
    return tree_map(lambda x: array_module_of(x).zeros_like(x), tree)


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


def tree_all_finite(tree) -> bool:
    """True when no leaf holds NaN or infinity."""
    return all(bool(np.all(np.isfinite(to_host(x)))) for x in tree_leaves(tree))


def tree_describe(tree) -> dict[str, Any]:
    """Leaf paths mapped to ``(shape, dtype)``, for error messages and conformance checks."""
    out: dict[str, Any] = {}

    def visit(node, path):
        if node is None:
            return
        if dataclasses.is_dataclass(node) and not isinstance(node, type):
            for f in dataclasses.fields(node):
                visit(getattr(node, f.name), f"{path}.{f.name}" if path else f.name)
        elif isinstance(node, dict):
            for key, value in node.items():
                visit(value, f"{path}.{key}" if path else str(key))
        elif isinstance(node, tuple | list):
            for i, value in enumerate(node):
                visit(value, f"{path}[{i}]")
        else:
            out[path] = (tuple(np.shape(node)), str(getattr(node, "dtype", type(node).__name__)))

    visit(tree, "")
    return out
