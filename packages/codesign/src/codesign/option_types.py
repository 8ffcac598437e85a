"""Options of a component factory: what its signature accepts, checked before anything runs.

:func:`check_options` reads a factory's keyword parameters and their annotations
(``int``, ``float | None``, ``Literal[...]``, ``Sequence[float]``...) and checks YAML option
values against them, filling in every default YAML can hold. The small value predicates
(:func:`type_name`, :func:`is_number`...) are shared with the section checks of
:mod:`codesign.validation`, so every message describes values in the same words.
"""

from __future__ import annotations

import copy
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
    "explicit_keywords",
    "is_integer",
    "is_number",
    "plain_copy",
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
        checks = {
            "int": is_integer, "float": is_number, "bool": lambda v: isinstance(v, bool),
            "str": lambda v: isinstance(v, str), "dict": lambda v: isinstance(v, dict),
            "none": lambda v: v is None, "list": lambda v: isinstance(v, list),
        }
        if not any(checks[tag](value) for tag in self.tags):
            return False
        if isinstance(value, list) and "list" in self.tags and self.item is not None:
            return all(self.item.accepts(v) for v in value)
        return True

    def describe(self) -> str:
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.tags is None:
            return "any value"
        names = {"int": "an integer", "float": "a number", "bool": "true or false",
                 "str": "a string", "dict": "a mapping", "none": "null", "list": "a list"}
        parts = []
        for tag in ("int", "float", "bool", "str", "list", "dict", "none"):
            if tag in self.tags and not (tag == "int" and "float" in self.tags):
                text = names[tag]
                if tag == "list" and self.item is not None and self.item.tags is not None:
                    text += f" of {self.item.describe().removeprefix('a ').removeprefix('an ')}"
                parts.append(text)
        return " or ".join(parts)

    def with_none(self) -> _Expected:
        if self.tags is None or self.choices is not None:
            return self
        return dataclasses.replace(self, tags=self.tags | {"none"})


_ANYTHING = _Expected(None)
_NAMED_TAGS = {
    "int": "int", "float": "float", "bool": "bool", "str": "str", "None": "none",
    "list": "list", "tuple": "list", "Sequence": "list", "Iterable": "list", "set": "list",
    "dict": "dict", "Mapping": "dict",
}


def _expected_from_string(annotation: str) -> _Expected:
    """Best-effort reading of an annotation that could not be evaluated."""
    tags: set[str] = set()
    depth, part, parts = 0, "", []
    for char in annotation:
        depth += char == "["
        depth -= char == "]"
        if char == "|" and depth == 0:
            parts.append(part)
            part = ""
        else:
            part += char
    parts.append(part)
    for text in parts:
        base = text.strip().split("[", 1)[0].split(".")[-1]
        if base not in _NAMED_TAGS:
            return _ANYTHING
        tags.add(_NAMED_TAGS[base])
    return _Expected(frozenset(tags))


def _expected_from_annotation(annotation: Any) -> _Expected:
    if annotation is inspect.Parameter.empty or annotation is Any:
        return _ANYTHING
    if isinstance(annotation, str):
        return _expected_from_string(annotation)
    if annotation is None or annotation is type(None):
        return _Expected(frozenset({"none"}))
    simple = {bool: "bool", int: "int", float: "float", str: "str", list: "list",
              tuple: "list", dict: "dict"}
    if annotation in simple:
        return _Expected(frozenset({simple[annotation]}))
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return _Expected(None, choices=tuple(args))
    if origin is typing.Union or origin is types.UnionType:
        members = [_expected_from_annotation(a) for a in args]
        if any(m.tags is None for m in members):
            return _ANYTHING
        items = {m.item for m in members if m.item is not None}
        return _Expected(frozenset().union(*(m.tags for m in members)),
                         item=items.pop() if len(items) == 1 else None)
    if origin in (list, tuple, set, Sequence, typing.Sequence) or (
            isinstance(origin, type) and issubclass(origin, Sequence) and origin is not str):
        item_args = [a for a in args if a is not Ellipsis]
        item = _expected_from_annotation(item_args[0]) if len(set(item_args)) == 1 else None
        return _Expected(frozenset({"list"}), item=item if item and item.tags else None)
    if origin in (dict, Mapping) or (isinstance(origin, type) and issubclass(origin, Mapping)):
        return _Expected(frozenset({"dict"}))
    return _ANYTHING


def _signature(factory: Any) -> tuple[dict[str, inspect.Parameter], bool, dict[str, Any]]:
    """Keyword parameters of a factory, whether it takes ``**kwargs``, and resolved hints."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return {}, True, {}
    target = factory.__init__ if inspect.isclass(factory) else factory
    try:
        hints = typing.get_type_hints(target)
    except Exception:  # unresolvable string annotations fall back to textual parsing
        hints = {}
    parameters = {
        name: p for name, p in signature.parameters.items()
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    }
    takes_any = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    return parameters, takes_any, hints


def explicit_keywords(factory: Any) -> frozenset[str]:
    """The keyword parameters ``factory`` names (``**kwargs`` not counted)."""
    return frozenset(_signature(factory)[0])


def accepts_keyword(factory: Any, name: str) -> bool:
    """Whether ``factory`` takes keyword ``name`` (by name or through ``**kwargs``)."""
    parameters, takes_any, _ = _signature(factory)
    return name in parameters or takes_any


def plain_copy(value: Any) -> tuple[bool, Any]:
    """``(True, yaml-safe copy)`` for YAML-representable defaults, else ``(False, None)``."""
    if value is None or isinstance(value, bool | int | str):
        return True, value
    if isinstance(value, float):
        return True, value
    if isinstance(value, list | tuple):
        items = [plain_copy(v) for v in value]
        return all(ok for ok, _ in items), [v for _, v in items]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        items = {k: plain_copy(v) for k, v in value.items()}
        return all(ok for ok, _ in items.values()), {k: v for k, (_, v) in items.items()}
    return False, None


def suggest(word: str, choices: Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices``, or ``""``."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_options(factory: Any, options: Mapping[str, Any], *, injected: Sequence[str] = (),
                  supplied: Mapping[str, Any] | None = None,
                  what: str = "component") -> tuple[dict[str, Any], list[tuple[tuple, str]]]:
    """Check ``options`` against ``factory``'s keyword signature.

    Returns ``(resolved, problems)``: ``resolved`` holds the given options plus every
    YAML-representable default; each problem is ``(sub_path, message)`` relative to the
    options mapping. ``injected`` names arguments the run supplies (``simulator``, sizes);
    they may not be set in YAML; ``supplied`` gives the values of those a factory's options
    declaration reads while resolving (``base_dir``: where a scene file's path starts).
    """
    parameters, takes_any, hints = _signature(factory)
    settable = {n: p for n, p in parameters.items() if n not in injected}
    problems: list[tuple[tuple, str]] = []

    def accepted() -> str:
        parts = []
        for name, p in settable.items():
            expected = _expected_from_annotation(hints.get(name, p.annotation))
            default = "" if p.default is p.empty else f" = {p.default!r}"
            parts.append(f"{name} ({expected.describe()}{default})")
        return ", ".join(parts) or "none"

    resolved: dict[str, Any] = {}
    for name, value in options.items():
        if name in injected:
            problems.append(((name,), f"{name!r} is set by the run, not in the options of a "
                                      f"{what}; remove it"))
            continue
        if name not in settable:
            if not takes_any:
                problems.append(((name,), f"unknown option {name!r} for {what}"
                                          f"{suggest(name, list(settable))}; accepted: "
                                          f"{accepted()}"))
            else:
                resolved[name] = value
            continue
        p = settable[name]
        expected = _expected_from_annotation(hints.get(name, p.annotation))
        if p.default is None:
            expected = expected.with_none()
        if not expected.accepts(value):
            problems.append(((name,), f"option {name!r} of {what} must be "
                                      f"{expected.describe()}, got {type_name(value)} "
                                      f"{value!r}"))
            continue
        if expected.tags == frozenset({"float"}) and is_integer(value):
            value = float(value)
        resolved[name] = value
    for name, p in settable.items():
        if name in resolved or any(problem[0] == (name,) for problem in problems):
            continue
        if p.default is p.empty:
            expected = _expected_from_annotation(hints.get(name, p.annotation))
            problems.append(((), f"{what} needs option {name!r} ({expected.describe()}); add "
                                 "it under options"))
            continue
        ok, plain = plain_copy(p.default)
        if ok:
            resolved[name] = copy.deepcopy(plain)
    declared = getattr(factory, "options", None)  # an options_factory's declaration
    if declared is not None and not problems:
        try:  # bounds and choices, and what other sources (a scene file) fill in
            given = {**options, **{k: v for k, v in (supplied or {}).items() if k in parameters}}
            values = dataclasses.asdict(declared.from_values(given))
            resolved = {k: v for k, v in values.items() if k not in injected}
        except OptionsError as exc:
            problems += [((name,), f"option {name!r} of {what}: {message}")
                         for name, message in exc.problems]
        except ValueError as exc:
            problems.append(((), f"{what}: {exc}"))
    return resolved, problems
