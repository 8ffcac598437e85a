"""YAML experiments: safe loading with line numbers, and validation before anything runs.

An experiment file has the sections ``simulator``, ``design``, ``controller``, ``observer``,
``objective``, ``optimizer``, ``run`` and optionally ``quick`` (a partial experiment merged
over the rest by ``--quick``). An identification experiment has an ``identification``
section instead of ``controller``, ``observer`` and ``objective`` (see below).
:func:`load_config` parses the file with a :class:`yaml.SafeLoader` subclass that records
the line of every key and list item; :func:`validate_config` checks the structure, the
types, the component names against the plugin registry and every ``options`` mapping against
its factory's signature. Every problem is collected and reported together in one
:class:`ConfigError`, each naming its YAML path, line and what is allowed. Checks that need
the built simulator (design parameter names, shapes) happen when the
experiment is built (:mod:`codesign.experiment`).

The sections (``*`` marks required keys; defaults in parentheses)::

    simulator:  {name*, options}              # options: the factory's keyword arguments
    design:     {<parameter>: {init, lower, upper, scale}}   # the free parameters; all optional
    controller: {name*, options, optimize (true)}            # sizes are supplied by the run
    observer:   {name ("none"), options}
    objective:  [{term*, weight (1), options, name}, ...]
                or {terms*: [...], constraints: [{terms*, equals | at_most / at_least, name}]}
    optimizer:  {name*, options, iterations (100)}
    run:        {steps*, dt* [s], substeps (1), seed (0), checkpoint_every (√N), executor
                 ("inline" | "process"), workers, video: {fps (30), width (480), height (360),
                 every (1)}}
    quick:      a partial experiment merged over the rest by --quick
    identification: {recordings*: {source*, options}, measurement*: {name*, options},
                     batch_size (null: every recording), fit_initial_state (false)}

An identification experiment fits the parameters named in ``design`` (their ``init`` is the
starting guess) to recorded trajectories: ``identification.recordings`` names a recording
source (``file``, ``synthetic`` or one a plugin registers) and its options,
``identification.measurement`` the observer that maps simulated states to the measured
values. Each recording's actions are replayed open loop, one per control step of
``run.substeps`` substeps of ``run.dt`` seconds; ``run.steps`` is optional there and, when
given, is the default ``steps`` option of a source that takes one (the ``synthetic``
trajectory length), as ``run.seed`` is the default ``seed`` of sources, controllers and
optimizers. ``batch_size`` below the number of recordings makes the fit stochastic over
recordings (minibatches drawn with ``run.seed``; Adam only).

``run.seed`` is the default ``seed`` option of the controller and optimizer factories that
take one, so a run is reproducible (and resumable) unless a seed is set explicitly.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import inspect
import math
import re
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from .design import DesignError
from .executors import EXECUTOR_KINDS

__all__ = [
    "ConfigError",
    "ConfigIssue",
    "DesignConfigError",
    "ExperimentConfig",
    "RECORDING_INJECTED",
    "RawConfig",
    "SECTIONS",
    "check_options",
    "deep_merge",
    "format_path",
    "load_config",
    "parse_config",
    "validate_config",
]

SECTIONS = ("simulator", "design", "controller", "observer", "objective", "optimizer", "run",
            "identification", "quick")
_REQUIRED_SECTIONS = ("simulator", "controller", "objective", "optimizer", "run")
_IDENTIFICATION_REQUIRED = ("simulator", "optimizer", "run")
_NOT_IN_IDENTIFICATION = ("controller", "observer", "objective")
RECORDING_INJECTED = ("simulator", "measurement", "dt", "substeps", "base_dir")
"""Arguments of a recording source that the run supplies (not settable in YAML)."""
_DESIGN_KEYS = ("init", "lower", "upper", "scale")
CONTROLLER_SIZING = ("observation_size", "action_size", "control_steps", "control_dt")


# -- errors -----------------------------------------------------------------------------------


def format_path(path: Sequence[str | int]) -> str:
    """``("objective", "terms", 0, "term")`` -> ``"objective.terms[0].term"``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


@dataclasses.dataclass(frozen=True)
class ConfigIssue:
    """One problem in an experiment: where (YAML path and line) and what is wrong."""

    path: str
    line: int | None
    message: str

    def __str__(self) -> str:
        if self.path == "(file)":  # the file as a whole: unreadable, empty or malformed
            return self.message if self.line is None else f"line {self.line}: {self.message}"
        where = self.path if self.line is None else f"{self.path} (line {self.line})"
        return f"{where}: {self.message}"


class ConfigError(ValueError):
    """An experiment file is malformed or invalid; ``errors`` lists every problem found."""

    def __init__(self, errors: Sequence[ConfigIssue], *, source: str | None = None):
        self.errors = list(errors)
        self.source = source
        super().__init__(self._format())

    def _format(self) -> str:
        prefix = f"{self.source}: " if self.source else ""
        if len(self.errors) == 1:
            return f"{prefix}{self.errors[0]}"
        lines = "\n".join(f"  - {issue}" for issue in self.errors)
        return f"{prefix}{len(self.errors)} problems in the experiment:\n{lines}"


class DesignConfigError(ConfigError, DesignError):
    """A design value in the experiment has a wrong shape, a non-finite entry or bad bounds."""


# -- loading with line numbers ----------------------------------------------------------------


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


def _without_quick(tree: dict) -> dict:
    """The tree without its quick section, keeping line records."""
    out = _LineMapping((k, v) for k, v in tree.items() if k != "quick")
    out.line = getattr(tree, "line", None)
    out.lines = {k: v for k, v in getattr(tree, "lines", {}).items() if k != "quick"}
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


@dataclasses.dataclass
class RawConfig:
    """A parsed experiment before validation.

    Attributes:
        tree: the parsed mapping (with line records), ``quick`` merged in when requested.
        source: the file name for messages.
        quick: whether the ``quick`` section was merged.
        base: the tree without the quick merge (used to check ``quick`` itself).
    """

    tree: dict
    source: str
    quick: bool
    base: dict


def parse_config(text: str, *, source: str = "<experiment>", quick: bool = False) -> RawConfig:
    """Parse experiment YAML text (safe loader only); ``quick`` merges the ``quick`` section."""
    try:
        tree = yaml.load(text, Loader=_LineLoader)  # noqa: S506 - _LineLoader is a SafeLoader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        context = getattr(exc, "context", None)
        message = f"malformed YAML: {problem}" + (f" ({context})" if context else "")
        raise ConfigError([ConfigIssue("(file)", None if mark is None else mark.line + 1,
                                       message + "; fix the syntax at that line")],
                          source=source) from None
    if tree is None:
        raise ConfigError([ConfigIssue("(file)", None, "the experiment file is empty; it needs "
                                       f"the sections {', '.join(_REQUIRED_SECTIONS)}")],
                          source=source)
    if not isinstance(tree, dict):
        raise ConfigError([ConfigIssue("(file)", 1, "an experiment must be a mapping of "
                                       f"sections, got {_type_name(tree)}")], source=source)
    base = tree
    if quick:
        overlay = tree.get("quick")
        if overlay is None:
            raise ConfigError([ConfigIssue("quick", None, "--quick was given but the "
                                           "experiment has no quick section")], source=source)
        if isinstance(overlay, dict):
            tree = deep_merge(_without_quick(tree), overlay)
    return RawConfig(tree=tree, source=source, quick=quick, base=base)


def load_config(path: str | Path, *, quick: bool = False) -> RawConfig:
    """Read and parse an experiment file; missing or unreadable files raise ConfigError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError([ConfigIssue("(file)", None, f"no such file {str(path)!r}; check the "
                                       "path to the experiment YAML")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([ConfigIssue("(file)", None, f"cannot read {str(path)!r}: {exc}")],
                          ) from None
    return parse_config(text, source=str(path), quick=quick)


# -- the validated experiment -----------------------------------------------------------------


@dataclasses.dataclass
class ExperimentConfig:
    """A validated experiment.

    Attributes:
        data: the resolved experiment as plain YAML-safe data: every section present, every
            default filled in (component options include their factories' defaults), the
            quick section already applied and removed.
        tree: the parsed tree with line records, for errors found while building.
        source: the file name for messages.
        quick: whether the quick section was applied.
    """

    data: dict
    tree: dict
    source: str
    quick: bool = False

    def line_of(self, path: Sequence[str | int]) -> int | None:
        """The YAML line of ``path`` (or of its deepest existing parent)."""
        return _line_of(self.tree, path)

    def issue(self, path: Sequence[str | int], message: str) -> ConfigIssue:
        """A :class:`ConfigIssue` at ``path`` with its line."""
        return ConfigIssue(format_path(path), self.line_of(path), message)

    @property
    def identification(self) -> bool:
        """Whether this is an identification experiment (it has that section)."""
        return "identification" in self.data

    @property
    def base_dir(self) -> Path:
        """The folder of the experiment file (relative data paths start here)."""
        path = Path(self.source)
        return path.parent if path.suffix else Path.cwd()

    def to_yaml(self) -> str:
        """The resolved experiment as YAML text (what a run directory's config.yaml holds)."""
        return yaml.safe_dump(self.data, sort_keys=False, default_flow_style=None)


def _line_of(tree: Any, path: Sequence[str | int]) -> int | None:
    line, node = None, tree  # a path absent from the file has no line
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


# -- types and option signatures --------------------------------------------------------------


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
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
            "int": _is_int, "float": _is_number, "bool": lambda v: isinstance(v, bool),
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


def _plain(value: Any) -> tuple[bool, Any]:
    """``(True, yaml-safe copy)`` for YAML-representable defaults, else ``(False, None)``."""
    if value is None or isinstance(value, bool | int | str):
        return True, value
    if isinstance(value, float):
        return True, value
    if isinstance(value, list | tuple):
        items = [_plain(v) for v in value]
        return all(ok for ok, _ in items), [v for _, v in items]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        items = {k: _plain(v) for k, v in value.items()}
        return all(ok for ok, _ in items.values()), {k: v for k, (_, v) in items.items()}
    return False, None


def _to_plain(value: Any) -> Any:
    """Recursively turn the loader's line-recording containers into plain dicts and lists."""
    if isinstance(value, dict):
        return {k: _to_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_plain(v) for v in value]
    return value


def _suggest(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_options(factory: Any, options: Mapping[str, Any], *, injected: Sequence[str] = (),
                  what: str = "component") -> tuple[dict[str, Any], list[tuple[tuple, str]]]:
    """Check ``options`` against ``factory``'s keyword signature.

    Returns ``(resolved, problems)``: ``resolved`` holds the given options plus every
    YAML-representable default; each problem is ``(sub_path, message)`` relative to the
    options mapping. ``injected`` names arguments the run supplies (``simulator``, sizes);
    they may not be set in YAML.
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
                                          f"{_suggest(name, list(settable))}; accepted: "
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
                                      f"{expected.describe()}, got {_type_name(value)} "
                                      f"{value!r}"))
            continue
        if expected.tags == frozenset({"float"}) and _is_int(value):
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
        ok, plain = _plain(p.default)
        if ok:
            resolved[name] = copy.deepcopy(plain)
    return resolved, problems


# -- validation (phase one: no simulator built) -----------------------------------------------


class _Checker:
    """Collects issues while walking the parsed tree."""

    def __init__(self, tree: dict, registry):
        self.tree, self.registry = tree, registry
        self.issues: list[ConfigIssue] = []

    def error(self, path: Sequence[str | int], message: str) -> None:
        self.issues.append(ConfigIssue(format_path(path), _line_of(self.tree, path), message))

    def mapping(self, value: Any, path: tuple, allowed: Sequence[str], *,
                required: Sequence[str] = (), what: str = "this section") -> dict | None:
        """Check that ``value`` is a mapping with only ``allowed`` keys and all ``required``."""
        if value is None:
            value = {}
        if not isinstance(value, dict):
            self.error(path, f"{what} must be a mapping with keys {', '.join(allowed)}, got "
                             f"{_type_name(value)}")
            return None
        for key in value:
            if key not in allowed:
                self.error((*path, key), f"unknown key {key!r}{_suggest(key, allowed)}; "
                                         f"allowed here: {', '.join(allowed)}")
        for key in required:
            if key not in value:
                self.error(path, f"missing required key {key!r} in {what}")
        return value

    def number(self, value: Any, path: tuple, *, integer: bool = False, minimum=None,
               positive: bool = False, finite: bool = True) -> Any:
        kind = "an integer" if integer else "a number"
        if not (_is_int(value) if integer else _is_number(value)):
            self.error(path, f"must be {kind}, got {_type_name(value)} {value!r}")
            return None
        if finite and not math.isfinite(value):
            self.error(path, f"must be a finite number, got {value}")
            return None
        if positive and not value > 0:
            self.error(path, f"must be positive, got {value}")
            return None
        if minimum is not None and value < minimum:
            self.error(path, f"must be at least {minimum}, got {value}")
            return None
        return float(value) if not integer else int(value)

    def component(self, node: Any, path: tuple, kind: str, *, injected: Sequence[str],
                  name_key: str = "name", default_name: str | None = None,
                  extra_keys: Sequence[str] = (), seed: int | None = None,
                  defaults: dict[str, Any] | None = None) -> dict:
        """Check a ``{name, options}`` section against the registry and the factory.

        ``seed`` and ``defaults`` fill options the factory takes and the YAML leaves out.
        Returns ``{"name": ..., "options": resolved options}``, or ``{}`` when the section
        is not a mapping.
        """
        section = self.mapping(node, path, (name_key, "options", *extra_keys),
                               required=() if default_name else (name_key,),
                               what=f"the {kind[:-1]} entry")
        if section is None:
            return {}
        name = section.get(name_key, default_name)
        options = section.get("options") or {}
        resolved: dict[str, Any] = {"name": name}
        if not isinstance(options, dict):
            self.error((*path, "options"), f"options must be a mapping, got "
                                           f"{_type_name(options)}")
            options = {}
        if name is None:
            return resolved
        if not isinstance(name, str):
            self.error((*path, name_key), f"must be a string, got {_type_name(name)}")
            return resolved
        available = self.registry.names(kind)
        if name not in available:
            listing = ", ".join(available) or "none installed"
            self.error((*path, name_key), f"unknown {kind[:-1]} {name!r}"
                                        f"{_suggest(name, available)}; available: {listing}")
            resolved["options"] = dict(options)
            return resolved
        factory = self.registry.get(kind, name).factory
        options = dict(options)
        fill = dict(defaults or {})
        if seed is not None:
            fill["seed"] = seed
        parameters, _, _ = _signature(factory)
        for key, value in fill.items():
            if key not in options and key in parameters:
                options[key] = value
        checked, problems = check_options(factory, options, injected=injected,
                                          what=f"{kind[:-1]} {name!r}")
        for sub_path, message in problems:
            self.error((*path, "options", *sub_path), message)
        resolved["options"] = checked
        return resolved


def _check_design(ck: _Checker, node: Any) -> dict:
    if node is None:
        return {}
    if not isinstance(node, dict):
        ck.error(("design",), "design must map simulator parameter names to "
                              f"{{{', '.join(_DESIGN_KEYS)}}}, got {_type_name(node)}")
        return {}
    resolved = {}
    for name, entry in node.items():
        path = ("design", name)
        entry = ck.mapping(entry, path, _DESIGN_KEYS, what=f"design parameter {name!r}")
        if entry is None:
            continue
        out = {}
        for key in ("init", "lower", "upper"):
            if key not in entry:
                continue
            value = entry[key]
            flat = _flatten_numbers(value)
            if flat is None:
                ck.error((*path, key), f"must be a number or a (nested) list of numbers, got "
                                       f"{_type_name(value)} {value!r}")
            elif key == "init" and not all(math.isfinite(v) for v in flat):
                ck.error((*path, key), "init must be finite (no NaN or inf); give a finite "
                                       "starting value")
            elif any(math.isnan(v) for v in flat):
                ck.error((*path, key), f"{key} must not be NaN; use .inf / -.inf for no bound")
            else:
                out[key] = _plain(value)[1]
        if "scale" in entry:
            scale = ck.number(entry["scale"], (*path, "scale"), positive=True)
            if scale is not None:
                out["scale"] = scale
        resolved[name] = out
    return resolved


def _flatten_numbers(value: Any) -> list[float] | None:
    if _is_number(value):
        return [float(value)]
    if isinstance(value, list) and value:
        flat = []
        for item in value:
            sub = _flatten_numbers(item)
            if sub is None:
                return None
            flat.extend(sub)
        return flat
    return None


def _check_terms(ck: _Checker, node: Any, path: tuple, *, what: str) -> list:
    if not isinstance(node, list) or not node:
        ck.error(path, f"{what} must be a non-empty list of {{term, weight, options}}, got "
                       f"{_type_name(node)}")
        return []
    terms = []
    for index, entry in enumerate(node):
        entry_path = (*path, index)
        resolved = ck.component(entry, entry_path, "terms", injected=("simulator",),
                                name_key="term", extra_keys=("weight", "name"))
        if not resolved:
            continue
        weight = ck.number(entry.get("weight", 1.0), (*entry_path, "weight"))
        name = entry.get("name", entry.get("term"))
        if not isinstance(name, str):
            ck.error((*entry_path, "name"), f"must be a string, got {_type_name(name)}")
        terms.append({"term": resolved["name"], "weight": weight, "name": name,
                      "options": resolved.get("options", {})})
    return terms


def _check_objective(ck: _Checker, node: Any) -> dict:
    path = ("objective",)
    if isinstance(node, list):
        return {"terms": _check_terms(ck, node, path, what="the objective"), "constraints": []}
    section = ck.mapping(node, path, ("terms", "constraints"), required=("terms",),
                         what="the objective")
    if section is None:
        return {"terms": [], "constraints": []}
    terms = _check_terms(ck, section.get("terms"), (*path, "terms"), what="objective.terms") \
        if "terms" in section else []
    constraints = []
    raw = section.get("constraints") or []
    if not isinstance(raw, list):
        ck.error((*path, "constraints"), f"must be a list, got {_type_name(raw)}")
        raw = []
    bounds = ("equals", "at_most", "at_least")
    for index, entry in enumerate(raw):
        entry_path = (*path, "constraints", index)
        entry = ck.mapping(entry, entry_path, ("terms", "name", *bounds), required=("terms",),
                           what="a constraint")
        if entry is None:
            continue
        resolved = {"name": entry.get("name", f"constraint_{index}"),
                    "terms": _check_terms(ck, entry["terms"], (*entry_path, "terms"),
                                          what="a constraint's terms")
                    if "terms" in entry else []}
        given = [b for b in bounds if b in entry]
        if not given or ("equals" in given and len(given) > 1):
            ck.error(entry_path, "a constraint needs either equals, or at_most and/or at_least")
        for bound in given:
            value = ck.number(entry[bound], (*entry_path, bound))
            if value is not None:
                resolved[bound] = value
        if isinstance(entry.get("at_least"), int | float) and isinstance(
                entry.get("at_most"), int | float) and entry["at_least"] > entry["at_most"]:
            ck.error(entry_path, f"at_least {entry['at_least']} exceeds at_most "
                                 f"{entry['at_most']}")
        constraints.append(resolved)
    return {"terms": terms, "constraints": constraints}


def _check_run(ck: _Checker, node: Any, *, identification: bool = False) -> dict:
    path = ("run",)
    keys = ("steps", "substeps", "dt", "seed", "checkpoint_every", "executor", "workers",
            "video")
    section = ck.mapping(node, path, keys, required=("dt",) if identification else
                         ("steps", "dt"), what="the run section")
    if section is None:
        return {}
    run: dict[str, Any] = {}
    if identification and "steps" not in section:
        run["steps"] = None  # the recordings set the trajectory lengths
    else:
        run["steps"] = ck.number(section.get("steps", 1), (*path, "steps"), integer=True,
                                 minimum=1)
    run["substeps"] = ck.number(section.get("substeps", 1), (*path, "substeps"), integer=True,
                                minimum=1)
    run["dt"] = ck.number(section.get("dt", 1.0), (*path, "dt"), positive=True)
    run["seed"] = ck.number(section.get("seed", 0), (*path, "seed"), integer=True, minimum=0)
    for key in ("checkpoint_every", "workers"):
        value = section.get(key)
        run[key] = None if value is None else ck.number(value, (*path, key), integer=True,
                                                        minimum=1)
    executor = section.get("executor", "inline")
    if executor not in EXECUTOR_KINDS:
        ck.error((*path, "executor"), f"unknown executor {executor!r}; available: "
                                      f"{', '.join(EXECUTOR_KINDS)}")
    run["executor"] = executor
    if executor == "inline" and run["workers"] not in (None, 1):
        ck.error((*path, "workers"), "the inline executor runs one rollout at a time; remove "
                                     "workers or set executor: process")
    video = ck.mapping(section.get("video"), (*path, "video"), ("fps", "width", "height", "every"),
                       what="run.video")
    video = video or {}
    defaults = {"fps": 30, "width": 480, "height": 360, "every": 1}
    run["video"] = {key: ck.number(video.get(key, default), (*path, "video", key), integer=True,
                                   minimum=16 if key in ("width", "height") else 1)
                    for key, default in defaults.items()}
    return run


def _check_optimizer(ck: _Checker, tree: dict, seed: int) -> dict:
    optimizer = ck.component(tree.get("optimizer"), ("optimizer",), "optimizers", injected=(),
                             extra_keys=("iterations",), seed=seed) if "optimizer" in tree else {}
    if isinstance(tree.get("optimizer"), dict):
        optimizer["iterations"] = ck.number(tree["optimizer"].get("iterations", 100),
                                            ("optimizer", "iterations"), integer=True, minimum=1)
    return optimizer


def _check_identification(ck: _Checker, node: Any, run: dict, seed: int) -> dict:
    path = ("identification",)
    section = ck.mapping(node, path, ("recordings", "measurement", "batch_size",
                                      "fit_initial_state"),
                         required=("recordings", "measurement"),
                         what="the identification section")
    if section is None:
        return {}
    defaults = {} if run.get("steps") is None else {"steps": run["steps"]}
    out: dict[str, Any] = {}
    out["recordings"] = ck.component(section.get("recordings"), (*path, "recordings"),
                                     "recordings", injected=RECORDING_INJECTED,
                                     name_key="source", seed=seed, defaults=defaults) \
        if "recordings" in section else {}
    out["measurement"] = ck.component(section.get("measurement"), (*path, "measurement"),
                                      "observers", injected=("simulator",)) \
        if "measurement" in section else {}
    batch_size = section.get("batch_size")
    out["batch_size"] = None if batch_size is None else ck.number(
        batch_size, (*path, "batch_size"), integer=True, minimum=1)
    fit = section.get("fit_initial_state", False)
    if not isinstance(fit, bool):
        ck.error((*path, "fit_initial_state"), f"must be true or false, got {_type_name(fit)}")
    out["fit_initial_state"] = fit is True
    return out


def _validate_tree(tree: dict, registry) -> tuple[dict, list[ConfigIssue]]:
    ck = _Checker(tree, registry)
    identification = "identification" in tree
    for key in tree:
        if key not in SECTIONS:
            ck.error((key,), f"unknown section {key!r}{_suggest(key, SECTIONS)}; allowed: "
                             f"{', '.join(SECTIONS)}")
        elif identification and key in _NOT_IN_IDENTIFICATION:
            ck.error((key,), f"an identification experiment has no {key!r} section: the "
                             "recordings' actions are replayed open loop and the loss is the "
                             "tracking error through identification.measurement; remove it")
    for key in _IDENTIFICATION_REQUIRED if identification else _REQUIRED_SECTIONS:
        if key not in tree:
            ck.error((), f"missing required section {key!r}")
    run = _check_run(ck, tree.get("run", {}), identification=identification) \
        if "run" in tree else {}
    seed = run.get("seed") if run.get("seed") is not None else 0
    data: dict[str, Any] = {}
    data["simulator"] = ck.component(tree.get("simulator"), ("simulator",), "simulators",
                                     injected=("base_dir",)) if "simulator" in tree else {}
    data["design"] = _check_design(ck, tree.get("design"))
    if identification:
        data["identification"] = _check_identification(ck, tree["identification"], run, seed)
        data["optimizer"] = _check_optimizer(ck, tree, seed)
        data["run"] = run
        return _to_plain(data), ck.issues
    controller = ck.component(tree.get("controller"), ("controller",), "controllers",
                              injected=CONTROLLER_SIZING, extra_keys=("optimize",), seed=seed) \
        if "controller" in tree else {}
    optimize = (tree.get("controller") or {}).get("optimize", True) \
        if isinstance(tree.get("controller"), dict) else True
    if not isinstance(optimize, bool):
        ck.error(("controller", "optimize"), f"must be true or false, got {_type_name(optimize)}")
    controller["optimize"] = optimize
    data["controller"] = controller
    data["observer"] = ck.component(tree.get("observer"), ("observer",), "observers",
                                    injected=("simulator",), default_name="none")
    data["objective"] = _check_objective(ck, tree.get("objective")) if "objective" in tree \
        else {}
    data["optimizer"] = _check_optimizer(ck, tree, seed)
    data["run"] = run
    return _to_plain(data), ck.issues


def validate_config(raw: RawConfig, registry) -> ExperimentConfig:
    """Phase one: check structure, types, names and options; raise ConfigError listing all.

    Without ``--quick`` the quick section is checked too (merged over the rest), so a typo
    there is found before anyone runs it.
    """
    data, issues = _validate_tree(_without_quick(raw.tree), registry)
    if not raw.quick and isinstance(raw.base.get("quick"), dict):
        merged = deep_merge(_without_quick(raw.base), raw.base["quick"])
        _, quick_issues = _validate_tree(merged, registry)
        seen = {str(i) for i in issues}
        issues += [i for i in quick_issues if str(i) not in seen]
    if "quick" in raw.base and not isinstance(raw.base["quick"], dict | None):
        issues.append(ConfigIssue("quick", _line_of(raw.base, ("quick",)),
                                  "quick must be a mapping (a partial experiment)"))
    if issues:
        issues.sort(key=lambda issue: issue.line or 0)  # file order; whole-file issues first
        raise ConfigError(issues, source=raw.source)
    return ExperimentConfig(data=data, tree=raw.tree, source=raw.source, quick=raw.quick)
