"""Options of a component factory: what its signature accepts, checked before anything runs.

:func:`check_options` reads a factory's keyword parameters and their annotations
(``int``, ``float | None``, ``Literal[...]``, ``Sequence[float]``...) and checks YAML option
values against them, filling in every default YAML can hold; a factory declared with
:func:`codesign.options.options_factory` then gets its declaration's bounds and choices. The
small value predicates (:func:`type_name`, :func:`is_number`...) are shared with the section
checks of :mod:`codesign.validation`, so every message describes values in the same words.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from .options import OptionsError

__all__ = [
    "accepts_keyword",
    "check_options",
    "is_integer",
    "is_number",
    "suggest",
    "type_name",
]


_TYPE_WORDS = ((bool, "a boolean"), (int, "an integer"), (float, "a number"), (str, "a string"),
               (list, "a list"), (dict, "a mapping"))
"""YAML value types in words, bool before int (a bool is an int to isinstance)."""


def type_name(value: Any) -> str:
    """A YAML value's type in words for messages: ``"null"``, ``"an integer"``, ``"a list"``..."""
    if value is None:
        return "null"
    return next((words for kind, words in _TYPE_WORDS if isinstance(value, kind)),
                type(value).__name__)


def is_integer(value: Any) -> bool:
    """Whether ``value`` is an integer (booleans are not)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """Whether ``value`` is an integer or float (booleans are not)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def suggest(word: str, choices: Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices``, or ``""``."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


_TAGS = {
    "int": (is_integer, "an integer"),
    "float": (is_number, "a number"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "list": (lambda v: isinstance(v, list), "a list"),
    "dict": (lambda v: isinstance(v, dict), "a mapping"),
    "none": (lambda v: v is None, "null"),
}
"""Simple YAML types an annotation may name: test and words, in the order messages list them."""


@dataclasses.dataclass(frozen=True)
class _Expected:
    """What an option accepts: simple type tags (None: anything), choices, list item type."""

    tags: frozenset[str] | None
    choices: tuple | None = None
    item: _Expected | None = None

    def accepts(self, value: Any) -> bool:
        if self.choices is not None:
            return value in self.choices
        if self.tags is None:
            return True
        if not any(_TAGS[tag][0](value) for tag in self.tags):
            return False
        if isinstance(value, list) and "list" in self.tags and self.item is not None:
            return all(self.item.accepts(v) for v in value)
        return True

    def describe(self) -> str:
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.tags is None:
            return "any value"
        parts = []
        for tag, (_, words) in _TAGS.items():
            if tag in self.tags and not (tag == "int" and "float" in self.tags):
                if tag == "list" and self.item is not None and self.item.tags is not None:
                    words += f" of {self.item.describe().removeprefix('a ').removeprefix('an ')}"
                parts.append(words)
        return " or ".join(parts)

    def with_none(self) -> _Expected:
        if self.tags is None or self.choices is not None:
            return self
        return dataclasses.replace(self, tags=self.tags | {"none"})


_ANYTHING = _Expected(None)
_SIMPLE_TAGS = {bool: "bool", int: "int", float: "float", str: "str", list: "list",
                tuple: "list", dict: "dict", type(None): "none"}


def _expected(annotation: Any) -> _Expected:
    """What a resolved annotation accepts (an unresolved, textual one: anything)."""
    if annotation is None or annotation in _SIMPLE_TAGS:
        return _Expected(frozenset({_SIMPLE_TAGS[type(None) if annotation is None
                                                 else annotation]}))
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return _Expected(None, choices=tuple(args))
    if origin is typing.Union or origin is types.UnionType:
        members = [_expected(a) for a in args]
        if any(m.tags is None for m in members):
            return _ANYTHING
        items = {m.item for m in members if m.item is not None}
        return _Expected(frozenset().union(*(m.tags for m in members)),
                         item=items.pop() if len(items) == 1 else None)
    if not isinstance(origin, type):
        return _ANYTHING
    if issubclass(origin, Sequence | set) and origin is not str:
        item_args = [a for a in args if a is not Ellipsis]
        item = _expected(item_args[0]) if len(set(item_args)) == 1 else None
        return _Expected(frozenset({"list"}), item=item if item and item.tags else None)
    return _Expected(frozenset({"dict"})) if issubclass(origin, Mapping) else _ANYTHING


def _signature(factory: Any) -> tuple[dict[str, inspect.Parameter], bool, dict[str, Any]]:
    """Keyword parameters of a factory, whether it takes ``**kwargs``, and resolved hints."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return {}, True, {}
    try:
        hints = typing.get_type_hints(factory.__init__ if inspect.isclass(factory) else factory)
    except Exception:  # an unresolvable string annotation: those options accept anything
        hints = {}
    parameters = {
        name: p for name, p in signature.parameters.items()
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    }
    takes_any = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    return parameters, takes_any, hints


def accepts_keyword(factory: Any, name: str) -> bool:
    """Whether ``factory`` takes keyword ``name`` (by name or through ``**kwargs``)."""
    parameters, takes_any, _ = _signature(factory)
    return name in parameters or takes_any


def _plain_copy(value: Any) -> tuple[bool, Any]:
    """``(True, yaml-safe copy)`` for YAML-representable defaults, else ``(False, None)``."""
    if value is None or isinstance(value, bool | int | float | str):
        return True, value
    if isinstance(value, list | tuple):
        items = [_plain_copy(v) for v in value]
        return all(ok for ok, _ in items), [v for _, v in items]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        items = {k: _plain_copy(v) for k, v in value.items()}
        return all(ok for ok, _ in items.values()), {k: v for k, (_, v) in items.items()}
    return False, None


def check_options(factory: Any, options: Mapping[str, Any], *, injected: Sequence[str] = (),
                  defaults: Mapping[str, Any] | None = None,
                  supplied: Mapping[str, Any] | None = None,
                  what: str = "component") -> tuple[dict[str, Any], list[tuple[tuple, str]]]:
    """Check ``options`` against ``factory``'s keyword signature.

    Returns ``(resolved, problems)``: ``resolved`` holds the given options plus every
    YAML-representable default (for a factory declared with an options class: the
    declaration's values, which checks bounds and choices); each problem is
    ``(sub_path, message)`` relative to the options mapping. ``injected`` names arguments the
    run supplies (``simulator``, sizes); they may not be set in YAML; ``defaults``
    (``run.seed``...) fill options the factory names and ``options`` leaves out; ``supplied``
    gives the values of injected arguments a factory's options declaration reads while
    resolving (``base_dir``: where a scene file's path starts).
    """
    parameters, takes_any, hints = _signature(factory)
    settable = {n: p for n, p in parameters.items() if n not in injected}
    options = {**{k: v for k, v in (defaults or {}).items() if k in settable}, **options}
    expected = {n: _expected(hints.get(n, p.annotation)) for n, p in settable.items()}
    resolved: dict[str, Any] = {}
    problems: list[tuple[tuple, str]] = []
    for name, value in options.items():
        if name in injected:
            problems.append(((name,), f"{name!r} is set by the run, not in the options of a "
                                      f"{what}; remove it"))
        elif name in settable:
            accepts = expected[name].with_none() if settable[name].default is None \
                else expected[name]
            if not accepts.accepts(value):
                problems.append(((name,), f"option {name!r} of {what} must be "
                                          f"{accepts.describe()}, got {type_name(value)} "
                                          f"{value!r}"))
            else:
                convert = accepts.tags == frozenset({"float"}) and is_integer(value)
                resolved[name] = float(value) if convert else value
        elif takes_any:
            resolved[name] = value
        else:
            accepted = ", ".join(f"{n} ({expected[n].describe()}"
                                 f"{'' if p.default is p.empty else f' = {p.default!r}'})"
                                 for n, p in settable.items()) or "none"
            problems.append(((name,), f"unknown option {name!r} for {what}"
                                      f"{suggest(name, list(settable))}; accepted: {accepted}"))
    for name, p in settable.items():
        if name in options:
            continue
        if p.default is p.empty:
            problems.append(((), f"{what} needs option {name!r} ({expected[name].describe()}); "
                                 "add it under options"))
        elif (plain := _plain_copy(p.default))[0]:
            resolved[name] = plain[1]
    declared = getattr(factory, "options", None)  # an options_factory's declaration
    if declared is None or problems:
        return resolved, problems
    try:  # bounds and choices, and what other sources (a scene file) fill in
        given = {**options, **{k: v for k, v in (supplied or {}).items() if k in parameters}}
        values = dataclasses.asdict(declared.from_values(given))
    except OptionsError as exc:
        return resolved, [((name,), f"option {name!r} of {what}: {message}")
                          for name, message in exc.problems]
    except ValueError as exc:
        return resolved, [((), f"{what}: {exc}")]
    return {k: v for k, v in values.items() if k not in injected}, []
