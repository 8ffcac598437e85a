"""YAML that remembers where things are: safe loading with the line of every key and item.

:func:`load_yaml` parses with a :class:`yaml.SafeLoader` subclass whose mappings and lists
record the 1-based line of each key and item, so an error found later (in validation or
while building) can name the line it came from (:func:`line_of`). :func:`deep_merge` and
:func:`without` keep those records.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import yaml

__all__ = ["deep_merge", "line_of", "load_yaml", "without"]


class _LineMapping(dict):
    """A dict that remembers the 1-based line of each key (``lines``) and of itself."""

    line: int | None = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lines: dict[Any, int] = {}


class _LineSequence(list):
    """A list that remembers the 1-based line of each item (``lines``) and of itself."""

    line: int | None = None

    def __init__(self, *args):
        super().__init__(*args)
        self.lines: list[int] = []


class _LineLoader(yaml.SafeLoader):
    """SafeLoader recording positions, refusing duplicate keys, reading ``1e-8`` as a float."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode):
    loader.flatten_mapping(node)
    result = _LineMapping()
    result.line = node.start_mark.line + 1
    yield result
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str):
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark,
                f"keys must be strings, found {key!r}", key_node.start_mark)
        if key in result:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark,
                f"duplicate key {key!r} (first on line {result.lines[key]})", key_node.start_mark)
        result[key] = loader.construct_object(value_node, deep=True)
        result.lines[key] = key_node.start_mark.line + 1


def _construct_sequence(loader: _LineLoader, node: yaml.SequenceNode):
    result = _LineSequence()
    result.line = node.start_mark.line + 1
    yield result
    result.extend(loader.construct_object(child, deep=True) for child in node.value)
    result.lines = [child.start_mark.line + 1 for child in node.value]


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)
# YAML 1.1 reads 1e-8 (no dot) as a string; experiments write weights that way.
_LineLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def load_yaml(text: str) -> Any:
    """Parse YAML ``text`` safely; mappings and lists carry line records.

    Raises :class:`yaml.YAMLError` for malformed text, duplicate keys and non-string keys.
    """
    return yaml.load(text, Loader=_LineLoader)  # noqa: S506 - _LineLoader is a SafeLoader


def line_of(tree: Any, path: Sequence[str | int]) -> int | None:
    """The line of ``path`` in ``tree`` (or of its deepest existing parent); ``None`` if the
    path starts outside the tree or the tree has no line records."""
    line, node = None, tree
    for part in path:
        if isinstance(node, dict) and isinstance(part, str) and part in node:
            line = getattr(node, "lines", {}).get(part, line)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            lines = getattr(node, "lines", [])
            line = lines[part] if part < len(lines) else line
            node = node[part]
        else:
            break
    return line


def without(tree: dict, key: str) -> dict:
    """``tree`` without ``key``, keeping line records."""
    out = _LineMapping((k, v) for k, v in tree.items() if k != key)
    out.line = getattr(tree, "line", None)
    out.lines = {k: v for k, v in getattr(tree, "lines", {}).items() if k != key}
    return out


def deep_merge(base: Any, override: Any) -> Any:
    """Merge ``override`` over ``base``: mappings key by key, anything else replaced.

    Line records travel with the values, so errors point at the line the value came from.
    """
    if isinstance(base, dict) and isinstance(override, dict):
        merged = _LineMapping()
        merged.line = getattr(base, "line", None)
        merged.lines = dict(getattr(base, "lines", {}))
        for key, value in base.items():
            merged[key] = value
        for key, value in override.items():
            merged[key] = deep_merge(base[key], value) if key in base else value
            if key in getattr(override, "lines", {}):
                merged.lines[key] = override.lines[key]
        return merged
    return override
