"""YAML experiments: the sections, their errors, loading (the first stage of a run).

:func:`load_config` parses an experiment file with a :class:`yaml.SafeLoader` subclass that
records the line of every key and list item; :func:`codesign.validation.validate_config`
checks it and returns an :class:`ExperimentConfig`; checks that need the built simulator
(design parameter names, shapes) happen when the experiment is built
(:mod:`codesign.experiment`). Every problem is reported in one :class:`ConfigError`, each
naming its YAML path, line and what is allowed.

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

An identification experiment has the ``identification`` section instead of ``controller``,
``observer`` and ``objective``, and fits the parameters named in ``design`` (their ``init``
is the starting guess) to recorded trajectories: ``identification.recordings`` names a
recording source (``file``, ``synthetic`` or one a plugin registers) and its options,
``identification.measurement`` the observer that maps simulated states to the measured
values. Each recording's actions are replayed open loop, one per control step of
``run.substeps`` substeps of ``run.dt`` seconds; ``run.steps`` is optional there and, when
given, is the default ``steps`` option of a source that takes one (the ``synthetic``
trajectory length). ``batch_size`` below the number of recordings makes the fit stochastic
over recordings (minibatches drawn with ``run.seed``; Adam only).

``run.seed`` is the default ``seed`` option of the controller, optimizer and recording-source
factories that take one, so a run is reproducible (and resumable) unless a seed is set
explicitly.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from .design import DesignError
from .options import type_name

__all__ = [
    "CONTROLLER_SIZING",
    "ConfigError",
    "ConfigIssue",
    "DesignConfigError",
    "ExperimentConfig",
    "RECORDING_INJECTED",
    "REQUIRED_SECTIONS",
    "RawConfig",
    "SECTIONS",
    "deep_merge",
    "format_path",
    "line_of",
    "load_config",
    "parse_config",
    "source_folder",
    "without",
]

SECTIONS = ("simulator", "design", "controller", "observer", "objective", "optimizer", "run",
            "identification", "quick")
REQUIRED_SECTIONS = ("simulator", "controller", "objective", "optimizer", "run")
"""The sections a co-design experiment needs (an identification experiment needs fewer)."""
RECORDING_INJECTED = ("simulator", "measurement", "dt", "substeps", "base_dir")
"""Arguments of a recording source that the run supplies (not settable in YAML)."""
CONTROLLER_SIZING = ("observation_size", "action_size", "control_steps", "control_dt")
"""Arguments of a controller factory that the run supplies from the simulator and observer."""


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
        prefix = f"{source}: " if source else ""
        lines = "\n".join(f"  - {issue}" for issue in self.errors)
        super().__init__(f"{prefix}{self.errors[0]}" if len(self.errors) == 1 else
                         f"{prefix}{len(self.errors)} problems in the experiment:\n{lines}")


class DesignConfigError(ConfigError, DesignError):
    """A design value in the experiment has a wrong shape, a non-finite entry or bad bounds."""


# -- loading with line numbers ----------------------------------------------------------------


class _LineMapping(dict):
    """A dict that remembers the 1-based line of each key (``lines``) and of itself."""

    def __init__(self, items=(), *, line: int | None = None, lines: dict[Any, int] | None = None):
        super().__init__(items)
        self.line, self.lines = line, dict(lines or {})


class _LineSequence(list):
    """A list that remembers the 1-based line of each item (``lines``) and of itself."""

    line: int  # both set by _construct_sequence, the only maker of these lists
    lines: list[int]


class _LineLoader(yaml.SafeLoader):
    """SafeLoader recording positions, refusing duplicate keys, reading ``1e-8`` as a float."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode):
    loader.flatten_mapping(node)
    result = _LineMapping(line=node.start_mark.line + 1)
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
    return _LineMapping(((k, v) for k, v in tree.items() if k != key),
                        line=getattr(tree, "line", None),
                        lines={k: v for k, v in getattr(tree, "lines", {}).items() if k != key})


def deep_merge(base: Any, override: Any) -> Any:
    """Merge ``override`` over ``base``: mappings key by key, anything else replaced.

    Line records travel with the values, so errors point at the line the value came from.
    """
    if isinstance(base, dict) and isinstance(override, dict):
        merged = _LineMapping(base, line=getattr(base, "line", None),
                              lines=getattr(base, "lines", {}))
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
                                       f"the sections {', '.join(REQUIRED_SECTIONS)}")],
                          source=source)
    if not isinstance(tree, dict):
        raise ConfigError([ConfigIssue("(file)", 1, "an experiment must be a mapping of "
                                       f"sections, got {type_name(tree)}")], source=source)
    base = tree
    if quick:
        overlay = tree.get("quick")
        if overlay is None:
            raise ConfigError([ConfigIssue("quick", None, "--quick was given but the "
                                           "experiment has no quick section")], source=source)
        if isinstance(overlay, dict):
            tree = deep_merge(without(tree, "quick"), overlay)
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


def source_folder(source: str) -> Path:
    """The folder of an experiment file named ``source`` (the working directory for text
    that came from no file): relative paths in the experiment start there."""
    path = Path(source)
    return path.parent if path.suffix else Path.cwd()


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

    def issue(self, path: Sequence[str | int], message: str) -> ConfigIssue:
        """A :class:`ConfigIssue` at ``path`` with its line."""
        return ConfigIssue(format_path(path), line_of(self.tree, path), message)

    @property
    def identification(self) -> bool:
        """Whether this is an identification experiment (it has that section)."""
        return "identification" in self.data

    @property
    def base_dir(self) -> Path:
        """The folder of the experiment file (relative data paths start here)."""
        return source_folder(self.source)

    def to_yaml(self) -> str:
        """The resolved experiment as YAML text (what a run directory's config.yaml holds)."""
        return yaml.safe_dump(self.data, sort_keys=False, default_flow_style=None)
