"""Simulator options declared once: name, type, unit, default, physical bounds, one-line doc.

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
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from .design import Parameter

__all__ = ["OptionSpec", "Options", "OptionsError", "format_options", "option",
           "options_factory"]


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
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return []
    if isinstance(value, int | float | np.number):
        return [float(value)]
    if isinstance(value, Mapping):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list | tuple | np.ndarray):
        return [n for v in value for n in _numbers(v)]
    return []


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
            return (f"{value!r} is not one of its choices: "
                    f"{', '.join(map(repr, self.choices))}")
        numbers = _numbers(value)
        if any(not np.isfinite(n) for n in numbers):
            return f"{value!r} is not finite"
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
        problems = [(spec.name, message) for spec in self.specs()
                    if (message := spec.problem(getattr(self, spec.name))) is not None]
        if problems:
            raise OptionsError(problems)

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
