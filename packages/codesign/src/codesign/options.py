"""Component options: simulators declare theirs once; YAML values are checked against them.

A simulator declares its options as a frozen keyword-only dataclass deriving from
:class:`Options`, each field made by :func:`option`::

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class SpringOptions(Options):
        stiffness: float = option(10.0, unit="N/m", lower=0.0, doc="spring constant k")
        solver: str = option("direct", choices=("direct", "iterative"), doc="linear solver")

Everything else comes from that one declaration: :func:`options_factory` turns a builder
``build(options) -> Simulator`` into the keyword factory a plugin registers (its signature is
the declaration, so the YAML validator checks names and types against it, and constructing
the declaration checks the bounds and choices); :meth:`Options.parameter` makes the design
parameter an option provides the default of (same unit, bounds and doc); and
:func:`format_options` is the listing of ``codesign options <simulator>``.

Bounds are inclusive and physical: a YAML ``design:`` section may narrow them, never widen
them (:func:`codesign.problem.apply_overrides`). A bound applies to every number of a value
(a list of per-joint stiffnesses, say); ``None`` values are not checked.

:func:`check_options` checks YAML option values against any factory's keyword signature and
annotations (``int``, ``float | None``, ``Literal[...]``, ``Sequence[float]``...), filling in
every default YAML can hold; a declared factory then gets its declaration's bounds and
choices. The small value predicates (:func:`type_name`, :func:`is_number`...) are shared with
the section checks of :mod:`codesign.validation`, so every message describes values in the
same words.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import difflib
import functools
import inspect
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .design import Parameter
from .limits import MAX_ECHO_CHARS, MAX_UNKNOWN_KEYS_LISTED

__all__ = ["OptionSpec", "Options", "OptionsError", "Range", "accepts_keyword", "bounded_repr",
           "check_options", "format_options", "is_integer", "is_number", "option",
           "options_factory", "suggest", "type_name"]


class OptionsError(ValueError):
    """Option values outside their choices or physical bounds; ``problems`` holds
    ``(option name, message)`` pairs."""

    def __init__(self, problems: Iterable[tuple[str, str]]):
        self.problems = list(problems)
        super().__init__("; ".join(f"option {name!r}: {message}"
                                   for name, message in self.problems))


def option(default: Any, *, doc: str, unit: str = "", lower: float | None = None,
           upper: float | None = None, choices: Iterable[Any] | None = None) -> Any:
    """Declare one option (a dataclass field) of an :class:`Options` subclass.

    Args:
        default: the value when none is given; lists and dicts are copied per instance.
        doc: one line saying what the option is.
        unit: SI unit, e.g. ``"Pa"``.
        lower, upper: inclusive physical bounds of every number in the value.
        choices: the values allowed (for names such as a material model).
    """
    metadata = {"doc": doc, "unit": unit, "lower": lower, "upper": upper,
                "choices": None if choices is None else tuple(choices)}
    if isinstance(default, list | dict):
        return dataclasses.field(default_factory=functools.partial(copy.deepcopy, default),
                                 metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def _numbers(value: Any) -> list[float]:
    """Every int or float inside ``value`` (nested lists and dicts), bools excluded."""
    if isinstance(value, int | float | np.number) and not isinstance(value, bool):
        return [float(value)]
    if isinstance(value, Mapping):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list | tuple | np.ndarray):
        return [n for v in value for n in _numbers(v)]
    return []


@dataclasses.dataclass(frozen=True)
class Range:
    """Inclusive sane range of a plain factory's numeric keyword (a count, a size), read by
    :func:`check_options` from its annotation: ``count: Annotated[int, Range(1, 10_000)]``.
    It applies to every number of the value, like a declared option's bounds."""

    lower: float
    upper: float

    def problem(self, value: Any) -> str | None:
        """Why ``value`` lies outside the range, or None if it does not."""
        outside = [n for n in _numbers(value) if not self.lower <= n <= self.upper]
        if not outside:
            return None
        return (f"{outside[0]:g} lies outside [{self.lower:g}, {self.upper:g}], codesign's "
                "limit for it")


@dataclasses.dataclass(frozen=True)
class OptionSpec:
    """One declared option, read from an :class:`Options` field."""

    name: str
    annotation: Any
    default: Any
    unit: str
    lower: float | None
    upper: float | None
    choices: tuple[Any, ...] | None
    doc: str

    def bounds_text(self) -> str:
        """``"[0, 0.49]"``, ``">= 1e-06"``, ``"one of a, b"`` or ``""``."""
        if self.choices is not None:
            return "one of " + ", ".join(map(str, self.choices))
        if self.lower is not None and self.upper is not None:
            return f"[{self.lower:g}, {self.upper:g}]"
        if self.lower is not None:
            return f">= {self.lower:g}"
        if self.upper is not None:
            return f"<= {self.upper:g}"
        return ""

    def problem(self, value: Any) -> str | None:
        """Why ``value`` breaks this option's choices or bounds, or None if it does not."""
        if value is None:
            return None
        if self.choices is not None and value not in self.choices:
            return (f"{bounded_repr(value)} is not one of its choices: "
                    f"{', '.join(map(repr, self.choices))}")
        numbers = _numbers(value)
        if any(not np.isfinite(n) for n in numbers):
            return f"{bounded_repr(value)} is not finite"
        outside = [n for n in numbers if (self.lower is not None and n < self.lower)
                   or (self.upper is not None and n > self.upper)]
        if outside:
            unit = f" {self.unit}" if self.unit else ""
            return (f"{outside[0]:g}{unit} lies outside its physical bounds "
                    f"{self.bounds_text()}{unit}")
        return None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Options:
    """Base of a simulator's option declaration (see the module docstring).

    Construction checks every value against its choices and bounds and raises
    :class:`OptionsError` naming each offending option.
    """

    def __post_init__(self):
        problems = self.problems({spec.name: getattr(self, spec.name) for spec in self.specs()})
        if problems:
            raise OptionsError(problems)

    @classmethod
    def problems(cls, values: Mapping[str, Any]) -> list[tuple[str, str]]:
        """``(name, message)`` for every declared option in ``values`` that breaks its choices
        or bounds (names not declared are ignored)."""
        return [(spec.name, message) for spec in cls.specs() if spec.name in values
                and (message := spec.problem(values[spec.name])) is not None]

    @classmethod
    def specs(cls) -> tuple[OptionSpec, ...]:
        """Every declared option in declaration order."""
        return _specs(cls)

    @classmethod
    def spec(cls, name: str) -> OptionSpec:
        """The declared option ``name``."""
        for spec in cls.specs():
            if spec.name == name:
                return spec
        raise KeyError(f"{cls.__name__} declares no option {name!r}")

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> Options:
        """The options of a factory call; subclasses may merge other sources first (a scene
        file) before the given values."""
        return cls(**values)

    @classmethod
    def parameter(cls, option_name: str, *, name: str, shape: tuple[int, ...], default: Any,
                  scale: float, entity: str | None = None, doc: str | None = None) -> Parameter:
        """The design parameter whose default this option gives: unit, physical bounds and
        doc (unless ``doc`` says what one entry is) come from the declaration; ``default`` is
        the option's value spread to ``shape``.
        """
        spec = cls.spec(option_name)
        return Parameter(name, shape, default,
                         lower=-np.inf if spec.lower is None else spec.lower,
                         upper=np.inf if spec.upper is None else spec.upper,
                         unit=spec.unit, scale=scale, entity=entity,
                         doc=spec.doc if doc is None else doc)


@functools.cache
def _specs(cls: type[Options]) -> tuple[OptionSpec, ...]:
    hints = typing.get_type_hints(cls)
    specs = []
    for field in dataclasses.fields(cls):
        if "doc" not in field.metadata:
            raise TypeError(f"{cls.__name__}.{field.name} is not declared with option()")
        default = (field.default_factory() if field.default is dataclasses.MISSING
                   else field.default)
        specs.append(OptionSpec(field.name, hints[field.name], default, **field.metadata))
    return tuple(specs)


def options_factory(options_class: type[Options]) -> Callable:
    """Decorator: ``build(options) -> simulator`` becomes ``factory(**values)``.

    The factory's signature is the declaration (keyword-only, with types and defaults), so
    Python callers and the YAML validator see the options; ``factory.options`` is the class.
    """

    def decorate(build: Callable[[Options], Any]) -> Callable[..., Any]:
        @functools.wraps(build)
        def factory(**values):
            return build(options_class.from_values(values))

        specs = options_class.specs()
        factory.__signature__ = inspect.Signature(
            [inspect.Parameter(s.name, inspect.Parameter.KEYWORD_ONLY, default=s.default,
                               annotation=s.annotation) for s in specs],
            return_annotation=inspect.signature(build).return_annotation)
        factory.__annotations__ = {s.name: s.annotation for s in specs}
        factory.options = options_class
        return factory

    return decorate


def format_options(options_class: type[Options]) -> str:
    """A table of every option: name, unit, default, bounds and doc (``codesign options``)."""
    rows = [("option", "unit", "default", "bounds", "doc")]
    rows += [(s.name, s.unit, repr(s.default), s.bounds_text(), s.doc)
             for s in options_class.specs()]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths,
                                                                        strict=True))
                     + "  " + row[4] for row in rows)


# -- checking YAML options against a factory's signature -------------------------------------


_TAGS = {int: "an integer", float: "a number", bool: "true or false", str: "a string",
         list: "a list", dict: "a mapping", type(None): "null"}
"""Simple YAML types an annotation may name, in words, in the order messages list them."""
_TYPE_WORDS = {bool: "a boolean"} | {k: w for k, w in _TAGS.items() if k is not bool}
"""YAML value types in words, bool before int (a bool is an int to isinstance)."""


def type_name(value: Any) -> str:
    """A YAML value's type in words for messages: ``"null"``, ``"an integer"``, ``"a list"``..."""
    return next((words for kind, words in _TYPE_WORDS.items() if isinstance(value, kind)),
                type(value).__name__)


def bounded_repr(value: Any, limit: int = MAX_ECHO_CHARS) -> str:
    """``repr(value)`` for a message, cut after ``limit`` characters.

    A cut text ends with ``…`` and the value's type and size (``… (a list of 9 items)``).
    Containers are written lazily, so a value of millions of items (an alias bomb) costs no
    more than the characters shown.
    """
    pieces, length = [], 0
    for piece in _repr_pieces(value, limit):
        pieces.append(piece)
        length += len(piece)
        if length > limit:
            return "".join(pieces)[:limit] + f"… ({_size_words(value)})"
    return "".join(pieces)


def _repr_pieces(value: Any, limit: int) -> Iterable[str]:
    """``repr(value)`` in pieces of at most about ``limit`` characters each."""
    if isinstance(value, Mapping):
        yield "{"
        for index, (key, item) in enumerate(value.items()):
            yield ", " if index else ""
            yield from _repr_pieces(key, limit)
            yield ": "
            yield from _repr_pieces(item, limit)
        yield "}"
    elif isinstance(value, list | tuple):
        yield "["
        for index, item in enumerate(value):
            yield ", " if index else ""
            yield from _repr_pieces(item, limit)
        yield "]"
    elif isinstance(value, str | bytes):
        yield repr(value[:limit + 1])  # one character more than fits, so a cut shows
    elif isinstance(value, int) and value.bit_length() > 4 * limit:  # repr would take long
        yield f"<an integer of {value.bit_length()} bits>"
    else:
        yield repr(value)


def _size_words(value: Any) -> str:
    """``"a list of 9 items"``, ``"a string of 5000 characters"``, ``"an array of shape (3,)"``."""
    if isinstance(value, Mapping):
        return f"a mapping of {len(value)} keys"
    if isinstance(value, list | tuple):
        return f"a list of {len(value)} items"
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape}"
    return type_name(value)


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


def _is_a(value: Any, kind: type) -> bool:
    """Whether a YAML value is of the simple type ``kind`` (ints are numbers, bools neither)."""
    return {int: is_integer, float: is_number}.get(kind, lambda v: isinstance(v, kind))(value)


@dataclasses.dataclass(frozen=True)
class _Expected:
    """What an option accepts: simple type tags (None: anything), choices, list item type."""

    tags: frozenset[type] | None
    choices: tuple | None = None
    item: _Expected | None = None

    def accepts(self, value: Any) -> bool:
        if self.choices is not None:
            return value in self.choices
        if self.tags is None:
            return True
        return any(_is_a(value, tag) for tag in self.tags) and (  # an item implies list
            self.item is None or not isinstance(value, list)
            or all(self.item.accepts(v) for v in value))

    def describe(self) -> str:
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.tags is None:
            return "any value"
        parts = []
        for tag, words in _TAGS.items():
            if tag in self.tags and not (tag is int and float in self.tags):
                if tag is list and self.item is not None:  # an item has tags
                    words += f" of {self.item.describe().removeprefix('a ').removeprefix('an ')}"
                parts.append(words)
        return " or ".join(parts)


_ANYTHING = _Expected(None)


def _expected(annotation: Any) -> _Expected:
    """What a resolved annotation accepts (an unresolved, textual one: anything)."""
    annotation = {None: type(None), tuple: list}.get(annotation, annotation)
    if annotation in _TAGS:
        return _Expected(frozenset({annotation}))
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:  # Annotated[int, Range(...)]: the Range is checked apart
        return _expected(args[0])
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
        return _Expected(frozenset({list}), item=item if item and item.tags else None)
    return _Expected(frozenset({dict})) if issubclass(origin, Mapping) else _ANYTHING


@functools.lru_cache(maxsize=256)  # one experiment checks many entries of one factory
def _signature(factory: Any) -> tuple[dict[str, inspect.Parameter], bool, dict[str, Any]]:
    """Keyword parameters of a factory, whether it takes ``**kwargs``, and resolved hints
    (shared between calls: read, never change them)."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return {}, True, {}
    try:
        hints = typing.get_type_hints(factory.__init__ if inspect.isclass(factory) else factory,
                                      include_extras=True)
    except Exception:  # an unresolvable string annotation: those options accept anything
        hints = {}
    parameters = {
        name: p for name, p in signature.parameters.items()
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    }
    takes_any = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    return parameters, takes_any, hints


@functools.lru_cache(maxsize=256)
def _ranges(factory: Any) -> dict[str, Range]:
    """The :class:`Range` of each keyword parameter of ``factory`` annotated with one."""
    _, _, hints = _signature(factory)
    return {name: extra for name, hint in hints.items()
            if typing.get_origin(hint) is typing.Annotated
            for extra in hint.__metadata__ if isinstance(extra, Range)}


@functools.lru_cache(maxsize=256)
def _expectations(factory: Any) -> dict[str, _Expected]:
    """What each keyword parameter of ``factory`` accepts (shared: read, never change it)."""
    parameters, _, hints = _signature(factory)
    return {n: _expected(hints.get(n, p.annotation)) for n, p in parameters.items()}


def accepts_keyword(factory: Any, name: str) -> bool:
    """Whether ``factory`` takes keyword ``name`` (by name or through ``**kwargs``)."""
    parameters, takes_any, _ = _signature(factory)
    return name in parameters or takes_any


def _plain_copy(value: Any) -> Any:
    """A YAML-safe copy of a YAML-representable default; TypeError for anything else."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_plain_copy(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _plain_copy(v) for k, v in value.items()}
    raise TypeError(f"{type(value).__name__} default has no YAML form")


def _non_finite(value: Any, default: Any) -> str | None:
    """None if every number in ``value`` is finite or ``value`` is its ``default``'s infinity
    (which means no bound, as in a controller's ``lower = -inf``); else the words a message
    adds after "must be finite" (naming the allowed infinity)."""
    numbers = _numbers(value)
    if all(np.isfinite(n) for n in numbers):
        return None
    infinite = is_number(default) and np.isinf(default)
    if infinite and is_number(value) and value == default:
        return None
    return f" or {default} (its default: no bound)" if infinite else " (no NaN or inf)"


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
    parameters, takes_any, _ = _signature(factory)
    settable = {n: p for n, p in parameters.items() if n not in injected}
    options = {**{k: v for k, v in (defaults or {}).items() if k in settable}, **options}
    expected, ranges = _expectations(factory), _ranges(factory)
    resolved: dict[str, Any] = {}
    problems: list[tuple[tuple, str]] = []
    unknown: list[str] = []
    for name, value in options.items():
        if name in injected:
            problems.append(((name,), f"{name!r} is set by the run, not in the options of a "
                                      f"{what}; remove it"))
        elif name in settable:
            accepts = expected[name]
            if settable[name].default is None and accepts.tags is not None:  # None allowed
                accepts = dataclasses.replace(accepts, tags=accepts.tags | {type(None)})
            if not accepts.accepts(value):
                problems.append(((name,), f"option {name!r} of {what} must be "
                                          f"{accepts.describe()}, got {type_name(value)} "
                                          f"{bounded_repr(value)}"))
            elif (infinite := _non_finite(value, settable[name].default)) is not None:
                problems.append(((name,), f"option {name!r} of {what} must be finite"
                                          f"{infinite}, got {bounded_repr(value)}"))
            elif name in ranges and (outside := ranges[name].problem(value)) is not None:
                problems.append(((name,), f"option {name!r} of {what}: {outside}"))
            else:
                convert = accepts.tags == frozenset({float}) and is_integer(value)
                resolved[name] = float(value) if convert else value
        elif takes_any:
            resolved[name] = value
        else:
            unknown.append(name)
    if unknown:
        accepted = ", ".join(
            f"{n} ({expected[n].describe()}"
            f"{'' if p.default is p.empty else f' = {bounded_repr(p.default)}'})"
            for n, p in settable.items()) or "none"
        problems += [((name,), f"unknown option {bounded_repr(name)} for {what}"
                               f"{suggest(name, list(settable))}; accepted: {accepted}")
                     for name in unknown[:MAX_UNKNOWN_KEYS_LISTED]]
        rest = unknown[MAX_UNKNOWN_KEYS_LISTED:]
        if rest:
            problems.append(((), f"{len(rest)} more unknown options for {what}: "
                                 f"{bounded_repr(rest)}; accepted: {accepted}"))
    for name, p in settable.items():
        if name in options:
            continue
        if p.default is p.empty:
            problems.append(((), f"{what} needs option {name!r} ({expected[name].describe()}); "
                                 "add it under options"))
        else:
            with contextlib.suppress(TypeError):
                resolved[name] = _plain_copy(p.default)
    declared = getattr(factory, "options", None)  # an options_factory's declaration
    if declared is None or problems:
        return resolved, problems
    try:  # bounds and choices, and what other sources (a scene file) fill in
        given = {**options, **{k: v for k, v in (supplied or {}).items() if k in parameters}}
        values = dataclasses.asdict(declared.from_values(given))
    except OptionsError as exc:
        return resolved, [((name,), f"option {name!r} of {what}: {message}")
                          for name, message in exc.problems]
    except (ValueError, TypeError, LookupError, OSError, ArithmeticError, MemoryError,
            RecursionError) as exc:  # what reading other sources (a scene file) may raise
        words = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
        return resolved, [((), f"{what}: {words}")]
    return {k: v for k, v in values.items() if k not in injected}, []
