"""YAML experiments: the sections, their errors, loading (the first stage of a run).

:func:`load_config` parses an experiment file with a safe loader (PyYAML's safe constructor)
that records the line of every key and list item, supports merge keys (``<<: *base``) and
refuses duplicate keys and documents past the limits of :mod:`codesign.limits` (nesting,
values with aliases expanded, integer size); :func:`codesign.validation.validate_config`
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
    optimizer:  {name*, options, iterations (100), starts (1)}
    run:        {steps*, dt* [s], substeps (1), seed (0), checkpoint_every (√N), executor
                 ("inline" | "process" | "dask" | {kind*, <the kind's options>}), workers,
                 video: {fps (30), width (480), height (360), every (1)}}
    quick:      a partial experiment merged over the rest by --quick
    stages:     [{set*: {<dotted key>: value, ...}}, ...]   # a run of several stages
    identification: {recordings*: {source*, options}, measurement*: {name*, options},
                     batch_size (null: every recording), fit_initial_state (false),
                     fit_actions (false), action_scale (1: a number or one per action)}

An identification experiment has the ``identification`` section instead of ``controller``,
``observer`` and ``objective``, and fits the parameters named in ``design`` (their ``init``
is the starting guess) to recorded trajectories: ``identification.recordings`` names a
recording source (``file``, ``synthetic`` or one a plugin registers) and its options,
``identification.measurement`` the observer that maps simulated states to the measured
values. Each recording's actions are replayed open loop, one per control step of
``run.substeps`` substeps of ``run.dt`` seconds; ``run.steps`` is optional there and, when
given, is the default ``steps`` option of a source that takes one (the ``synthetic``
trajectory length). ``batch_size`` below the number of recordings makes the fit stochastic
over recordings (minibatches drawn with ``run.seed``; Adam only). ``fit_actions`` fits each
recording's actions too, from the recorded ones (e.g. the torques that hold a robot at
measured poses), ``action_scale`` their size in the optimizer's vector
(:mod:`codesign.identification`).

``optimizer.starts`` above 1 runs the optimizer from that many starting points (the
experiment's, then random ones drawn with ``run.seed``) as one batch on the executor and
keeps the best (:mod:`codesign.multistart`); every start is recorded in history.json.

``run.executor`` names the engine that runs batches (population members, recordings,
starts): a registered executor kind, with ``run.workers``, or a mapping of the kind and its
options, e.g. ``{kind: dask, address: tcp://host:8786, workers: 4}`` (:mod:`codesign.executors`).

``stages`` makes the run a sequence of optimizations (a continuation, e.g. the contact forces
scaled 0.01, 0.1, then 1): stage k is the experiment with its ``set`` keys set (dotted keys,
as ``codesign sweep --set``: ``simulator.options.contact_scale``, ``optimizer.iterations``),
started from stage k - 1's result (:mod:`codesign.stages`).

``run.seed`` is the default ``seed`` option of the controller, optimizer and recording-source
factories that take one, so a run is reproducible (and resumable) unless a seed is set
explicitly.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from .design import DesignError
from .limits import (
    MAX_ECHO_CHARS,
    MAX_MESSAGE_CHARS,
    MAX_REPORTED_ISSUES,
    YAML_MAX_DEPTH,
    YAML_MAX_INTEGER,
    YAML_MAX_NODES,
)
from .options import bounded_repr, type_name

__all__ = [
    "CONTROLLER_INJECTED",
    "CONTROLLER_SIZING",
    "ConfigError",
    "ConfigIssue",
    "DesignConfigError",
    "ExperimentConfig",
    "RECORDING_INJECTED",
    "REQUIRED_SECTIONS",
    "RawConfig",
    "SECTIONS",
    "TERM_INJECTED",
    "deep_merge",
    "format_path",
    "issue_at",
    "line_of",
    "load_config",
    "parse_config",
    "source_folder",
    "with_settings",
    "with_stage",
    "without",
]

SECTIONS = ("simulator", "design", "controller", "observer", "objective", "optimizer", "run",
            "identification", "quick", "stages")
REQUIRED_SECTIONS = ("simulator", "controller", "objective", "optimizer", "run")
"""The sections a co-design experiment needs (an identification experiment needs fewer)."""
RECORDING_INJECTED = ("simulator", "measurement", "dt", "substeps", "base_dir")
"""Arguments of a recording source that the run supplies (not settable in YAML)."""
TERM_INJECTED = ("simulator", "dt", "substeps", "base_dir")
"""Arguments of a term factory that the run supplies: the simulator, the substep length [s],
the substeps per control step and the experiment's folder, where a term's relative file
paths start (a term may take any of them)."""
CONTROLLER_SIZING = ("observation_size", "action_size", "control_steps", "control_dt")
"""Arguments of a controller factory that the run supplies from the simulator and observer."""
CONTROLLER_INJECTED = (*CONTROLLER_SIZING, "simulator")
"""Every argument of a controller factory that the run supplies: the sizes, and the simulator
(for a law whose model is built through it)."""


# -- errors -----------------------------------------------------------------------------------


def format_path(path: Sequence[str | int]) -> str:
    """``("objective", "terms", 0, "term")`` -> ``"objective.terms[0].term"``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
        if len(text) > MAX_ECHO_CHARS:  # a path through long keys or deep nesting
            return text[:MAX_ECHO_CHARS] + "…"
    return text or "(top level)"


@dataclasses.dataclass(frozen=True)
class ConfigIssue:
    """One problem in an experiment: where (YAML path and line) and what is wrong."""

    path: str
    line: int | None
    message: str

    def __str__(self) -> str:
        message = self.message
        if len(message) > MAX_MESSAGE_CHARS:  # a plugin's exception quoting a whole value
            message = f"{message[:MAX_MESSAGE_CHARS]}… (cut at {MAX_MESSAGE_CHARS} of " \
                      f"{len(message)} characters)"
        if self.path == "(file)":  # the file as a whole: unreadable, empty or malformed
            return message if self.line is None else f"line {self.line}: {message}"
        where = self.path if self.line is None else f"{self.path} (line {self.line})"
        return f"{where}: {message}"


class ConfigError(ValueError):
    """An experiment file is malformed or invalid; ``errors`` lists every problem found (the
    message lists the first ``MAX_REPORTED_ISSUES``)."""

    def __init__(self, errors: Sequence[ConfigIssue], *, source: str | None = None):
        self.errors = list(errors)
        self.source = source
        prefix = f"{source}: " if source else ""
        lines = "\n".join(f"  - {issue}" for issue in self.errors[:MAX_REPORTED_ISSUES])
        if len(self.errors) > MAX_REPORTED_ISSUES:
            lines += f"\n  ... and {len(self.errors) - MAX_REPORTED_ISSUES} more"
        super().__init__(f"{prefix}{self.errors[0]}" if len(self.errors) == 1 else
                         f"{prefix}{len(self.errors)} problems in the experiment:\n{lines}")


class DesignConfigError(ConfigError, DesignError):
    """A design value in the experiment has a wrong shape, a non-finite entry or bad bounds."""


# -- loading with line numbers ----------------------------------------------------------------


class _LineMapping(dict):
    """A dict that remembers the 1-based line of each key (``lines``) and of itself, and the
    section a merge brought a key's line from (``origins``, see :func:`deep_merge`)."""

    def __init__(self, items=(), *, line: int | None = None, lines: dict[Any, int] | None = None,
                 origins: dict[Any, str | None] | None = None):
        super().__init__(items)
        self.line, self.lines, self.origins = line, dict(lines or {}), dict(origins or {})


class _LineSequence(list):
    """A list that remembers the 1-based line of each item (``lines``) and of itself."""

    line: int  # both set by _construct_sequence, the only maker of these lists
    lines: list[int]


class _Refused(yaml.MarkedYAMLError):
    """A document the loader refuses (a limit, a duplicate key, an unreadable value) at
    ``path`` (the YAML path where it happened) and ``problem_mark``."""

    def __init__(self, path: Sequence[str | int], mark, problem: str):
        super().__init__(problem=problem, problem_mark=mark)
        self.path = tuple(path)


try:  # libyaml's event parser when PyYAML has it: five times faster than the Python one
    from yaml.cyaml import CParser as _EventParser
except ImportError:  # a PyYAML built without libyaml
    class _EventParser(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser):
        """PyYAML's pure-Python event parser, with CParser's constructor."""

        def __init__(self, stream):
            yaml.reader.Reader.__init__(self, stream)
            yaml.scanner.Scanner.__init__(self)
            yaml.parser.Parser.__init__(self)


_MERGE_TAG = "tag:yaml.org,2002:merge"
_UNSUPPORTED_TAGS = ("timestamp", "binary", "set", "omap", "pairs")
"""Standard YAML types no experiment holds: refused, so no option meets a date or a set."""


class _LineLoader(yaml.composer.Composer, yaml.constructor.SafeConstructor,
                  yaml.resolver.Resolver, _EventParser):
    """A safe loader recording positions and refusing what no experiment needs.

    It records the line of every key and list item, reads ``1e-8`` as a float and dates as
    strings, supports merge keys (``<<: *base``, explicit keys override merged ones) and
    refuses duplicate keys, nesting deeper than ``YAML_MAX_DEPTH``, documents of more than
    ``YAML_MAX_NODES`` nodes with every alias expanded (an alias bomb: counted as the aliases
    are read, never expanded), recursive aliases and integers beyond 64 bits, each at its
    YAML path (``key_path`` while composing and constructing).
    """

    def __init__(self, stream: str):
        _EventParser.__init__(self, stream)
        yaml.composer.Composer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)
        self.key_path: list[str | int] = []
        self.depth = 0  # mappings and lists open around the node being composed
        self.nodes = 0  # nodes composed so far, those reached through aliases included
        self.open_anchors: set[str | None] = set()  # anchors of the collections being composed
        self.subtree_sizes: dict[int, int] = {}  # id(node) -> nodes in its subtree

    # -- composing: depth, size and the path ----------------------------------------------

    def compose_node(self, parent, index):
        # ``index``: the key node of a mapping value, the position of a sequence item, None
        # for a mapping key and the root. A refusal aborts the load, so the path is left as
        # it was where that happened.
        part = index.value if isinstance(index, yaml.ScalarNode) else index
        if part is not None:
            self.key_path.append(part)
        event = self.peek_event()
        if isinstance(event, yaml.ScalarEvent):
            self._count(1, event)
            node = super().compose_node(parent, index)
        elif isinstance(event, yaml.AliasEvent):
            self._count_alias(event)
            node = super().compose_node(parent, index)
        else:
            if self.depth >= YAML_MAX_DEPTH:
                raise _Refused(self.key_path, event.start_mark, f"the document nests deeper "
                               f"than {YAML_MAX_DEPTH} levels (the limit on nested mappings "
                               "and lists); flatten it")
            self._count(1, event)
            self.depth += 1
            self.open_anchors.add(event.anchor)
            node = super().compose_node(parent, index)
            self.open_anchors.discard(event.anchor)
            self.depth -= 1
        if part is not None:
            self.key_path.pop()
        return node

    def _count(self, nodes: int, event) -> None:
        self.nodes += nodes
        if self.nodes > YAML_MAX_NODES:
            raise _Refused(self.key_path, event.start_mark, f"the document holds more than "
                           f"{YAML_MAX_NODES} values, the limit on keys, values and list items "
                           "(aliases counted expanded); keep large data in a file the "
                           "simulator reads")

    def _count_alias(self, event) -> None:
        if event.anchor in self.open_anchors:
            raise _Refused(self.key_path, event.start_mark, f"alias *{event.anchor} refers to "
                           "its own anchor (a value containing itself); alias a separate value")
        node = self.anchors.get(event.anchor)
        if node is None:  # the composer reports the undefined alias
            return
        size = self._subtree_size(node)
        if self.nodes + size > YAML_MAX_NODES:
            raise _Refused(self.key_path, event.start_mark, f"this alias (*{event.anchor}, "
                           f"{size} values) expands the document past {YAML_MAX_NODES} values, "
                           "the limit on keys, values and list items with aliases expanded; "
                           "write the values out or alias smaller pieces")
        self._count(size, event)

    def _subtree_size(self, node) -> int:
        """Nodes in ``node``'s subtree, aliases expanded (memoized: shared subtrees once)."""
        size = self.subtree_sizes.get(id(node))
        if size is None:
            if isinstance(node, yaml.ScalarNode):
                return 1
            children = node.value if isinstance(node, yaml.SequenceNode) else \
                [child for pair in node.value for child in pair]
            size = 1 + sum(self._subtree_size(child) for child in children)
            self.subtree_sizes[id(node)] = size
        return size

    # -- constructing: unreadable values become refusals at their path --------------------

    def construct_object(self, node, deep=False):
        try:
            return super().construct_object(node, deep=deep)
        except yaml.YAMLError:
            raise
        except Exception as exc:  # noqa: BLE001 - a value Python cannot read (a bad date...)
            tag = node.tag.rpartition(":")[2]
            raise _Refused(self.key_path, node.start_mark,
                           f"cannot read this value as {tag}: {exc}") from None


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode):
    result = _LineMapping(line=node.start_mark.line + 1)
    yield result
    merged, merge_line = _merged_bases(loader, node)
    result.update(merged)
    result.lines.update(merged.lines)
    explicit: dict[str, int] = {} if merge_line is None else {"<<": merge_line}
    for key_node, value_node in node.value:
        if key_node.tag == _MERGE_TAG:
            continue
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if not isinstance(key, str):
            raise _Refused(loader.key_path, key_node.start_mark,
                           f"keys must be strings, found {type_name(key)} "
                           f"{bounded_repr(key)}; quote the key")
        if key in explicit:
            raise _Refused([*loader.key_path, key], key_node.start_mark,
                           f"duplicate key {bounded_repr(key)} (first on line "
                           f"{explicit[key]}); keep one of them")
        explicit[key] = line
        loader.key_path.append(key)
        result[key] = loader.construct_object(value_node, deep=True)
        loader.key_path.pop()
        result.lines[key] = line


def _merged_bases(loader: _LineLoader, node: yaml.MappingNode) -> tuple[_LineMapping, int | None]:
    """The mapping a node's merge key (``<<: *base`` or ``<<: [*a, *b]``) brings in, earlier
    bases winning, and the merge key's line (None without one)."""
    bases, line = [], None
    for key_node, value_node in node.value:
        if key_node.tag != _MERGE_TAG:
            continue
        if line is not None:
            raise _Refused([*loader.key_path, "<<"], key_node.start_mark,
                           f"duplicate merge key << (first on line {line}); merge several "
                           "bases with one list: <<: [*a, *b]")
        line = key_node.start_mark.line + 1
        items = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
        for item in items:
            if not isinstance(item, yaml.MappingNode):
                raise _Refused([*loader.key_path, "<<"], item.start_mark,
                               "a merge key << takes a mapping (an alias such as *base) or a "
                               "list of them")
            bases.append(loader.construct_object(item, deep=True))
    merged = _LineMapping()
    for base in reversed(bases):
        merged.update(base)
        merged.lines.update(base.lines)
    return merged, line


def _construct_sequence(loader: _LineLoader, node: yaml.SequenceNode):
    result = _LineSequence()
    result.line = node.start_mark.line + 1
    yield result
    for index, child in enumerate(node.value):
        loader.key_path.append(index)
        result.append(loader.construct_object(child, deep=True))
        loader.key_path.pop()
    result.lines = [child.start_mark.line + 1 for child in node.value]


def _construct_int(loader: _LineLoader, node: yaml.ScalarNode) -> int:
    digits = node.value.replace("_", "")
    value = None if len(digits) > 80 else loader.construct_yaml_int(node)
    if value is None or abs(value) >= YAML_MAX_INTEGER:
        raise _Refused(loader.key_path, node.start_mark,
                       f"the integer {bounded_repr(node.value)} is beyond the limit of 64 "
                       f"bits (magnitude below {YAML_MAX_INTEGER}); no count or seed needs it")
    return value


def _refuse_tag(loader: _LineLoader, node: yaml.Node):
    raise _Refused(loader.key_path, node.start_mark,
                   f"the YAML type {node.tag.rpartition(':')[2]} is not supported in an "
                   "experiment; write a string, number, list or mapping")


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)
_LineLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
for _tag in _UNSUPPORTED_TAGS:
    _LineLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _refuse_tag)
# Dates read as strings (nothing in an experiment is a date); the class keeps its own copy.
_LineLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if not tag.endswith(":timestamp")]
    for first, resolvers in yaml.resolver.Resolver.yaml_implicit_resolvers.items()}
# YAML 1.1 reads 1e-8 (no dot) as a string; experiments write weights that way.
_LineLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def line_of(tree: Any, path: Sequence[str | int]) -> int | None:
    """The line of ``path`` in ``tree`` (or of its deepest existing parent; the top level's
    own line for the empty path); ``None`` if the path starts outside the tree or the tree
    has no line records."""
    return _located(tree, path)[0]


SETTING_ORIGIN = "--set"
"""The origin :func:`with_settings` gives the values it sets (``codesign sweep --set``)."""


def issue_at(tree: Any, path: Sequence[str | int], message: str) -> ConfigIssue:
    """A :class:`ConfigIssue` at ``path`` of ``tree`` with its line; the path starts with
    ``quick.`` when that line lies in the quick section (merged by :func:`deep_merge`), and
    with ``--set `` (no line: the value is not in the file) when :func:`with_settings` set
    it."""
    line, origin = _located(tree, path)
    if origin == SETTING_ORIGIN:
        return ConfigIssue(f"{SETTING_ORIGIN} {format_path(path)}", None, message)
    return ConfigIssue(format_path((origin, *path) if origin else path), line, message)


def _located(tree: Any, path: Sequence[str | int]) -> tuple[int | None, str | None]:
    """The line of ``path`` as :func:`line_of` finds it, and the section it came from when a
    merge brought it in (``"quick"``), else None."""
    line, origin, node = None if path else getattr(tree, "line", None), None, tree
    for part in path:
        if isinstance(node, dict) and isinstance(part, str) and part in node:
            if part in getattr(node, "lines", {}):
                line, origin = node.lines[part], node.origins.get(part)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            lines = getattr(node, "lines", [])
            line = lines[part] if part < len(lines) else line
            node = node[part]
        else:
            break
    return line, origin


def without(tree: dict, key: str) -> dict:
    """``tree`` without ``key``, keeping line records."""
    return _LineMapping(((k, v) for k, v in tree.items() if k != key),
                        line=getattr(tree, "line", None),
                        lines={k: v for k, v in getattr(tree, "lines", {}).items() if k != key},
                        origins=getattr(tree, "origins", {}))


def deep_merge(base: Any, override: Any, *, origin: str | None = None) -> Any:
    """Merge ``override`` over ``base``: mappings key by key, anything else replaced.

    Line records travel with the values, so errors point at the line the value came from;
    ``origin`` names the section ``override`` came from (``"quick"``), which
    :func:`issue_at` puts in front of the path of an error at one of its lines.
    """
    if isinstance(base, dict) and isinstance(override, dict):
        merged = _LineMapping(base, line=getattr(base, "line", None),
                              lines=getattr(base, "lines", {}),
                              origins=getattr(base, "origins", {}))
        for key, value in override.items():
            merged[key] = deep_merge(base[key], value, origin=origin) if key in base else value
            if key in getattr(override, "lines", {}):
                merged.lines[key] = override.lines[key]
                merged.origins[key] = origin
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
    """Parse experiment YAML text (safe loader only); ``quick`` merges the ``quick`` section.

    Documents past the limits of :mod:`codesign.limits` (nesting, alias expansion, integer
    size), duplicate keys and unreadable values are refused at their YAML path and line.
    """
    loader = _LineLoader(text)
    try:
        tree = loader.get_single_data()
    except _Refused as exc:
        raise ConfigError([ConfigIssue(format_path(exc.path), exc.problem_mark.line + 1,
                                       exc.problem)], source=source) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        context = getattr(exc, "context", None)
        message = f"malformed YAML: {problem}" + (f" ({context})" if context else "")
        raise ConfigError([ConfigIssue("(file)", None if mark is None else mark.line + 1,
                                       message + "; fix the syntax at that line")],
                          source=source) from None
    finally:
        loader.dispose()
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
            raise ConfigError([ConfigIssue("quick", tree.line, "--quick was given but the "
                                           "experiment has no quick section")], source=source)
        if isinstance(overlay, dict):
            tree = deep_merge(without(tree, "quick"), overlay, origin="quick")
    return RawConfig(tree=tree, source=source, quick=quick, base=base)


def with_settings(raw: RawConfig, settings: Mapping[str, Any], *,
                  origin: str = SETTING_ORIGIN,
                  lines: Mapping[str, int | None] | None = None) -> RawConfig:
    """``raw`` with each ``"dotted.key": value`` of ``settings`` set (``codesign sweep
    --set``), over the quick section too; mappings on the way are created as needed.

    ``origin`` names where the settings came from in errors about them (default ``--set``,
    no line); another origin (``stages[1].set``) is put in front of their paths, with the
    line ``lines`` gives each key.

    Raises ConfigError when a key crosses a value that is not a mapping.
    """
    tree, base = raw.tree, raw.base
    for key, value in settings.items():
        parts = key.split(".")
        if not all(parts):
            raise ConfigError([ConfigIssue(key, None, "a setting needs a dotted key such as "
                                           "optimizer.options.sigma0")], source=raw.source)
        # The set key, and every mapping created on the way to it, lose the file's line:
        # an error there points at the --set argument (_located), not at the file.
        node, in_file = tree, []
        for depth, part in enumerate(parts):
            in_file.append(isinstance(node, dict) and part in node)
            node = node.get(part) if isinstance(node, dict) else None
            if depth < len(parts) - 1 and node is not None and not isinstance(node, dict):
                where = ".".join(parts[:depth + 1])
                raise ConfigError([ConfigIssue(where, line_of(tree, parts[:depth + 1]),
                                               f"cannot set {key}: {where} is not a mapping")],
                                  source=raw.source)
        override: Any = value
        line = (lines or {}).get(key)
        for depth in reversed(range(len(parts))):
            set_here = depth == len(parts) - 1 or not in_file[depth]
            override = _LineMapping({parts[depth]: override},
                                    lines={parts[depth]: line} if set_here else {},
                                    origins={parts[depth]: origin} if set_here else {})
        tree = deep_merge(tree, override, origin=origin)
        base = deep_merge(base, override, origin=origin)
    return dataclasses.replace(raw, tree=tree, base=base)


def with_stage(raw: RawConfig, index: int) -> RawConfig:
    """``raw`` as its stage ``index`` runs: without the ``stages`` section, with that stage's
    ``set`` keys set (:func:`with_settings`; an error about one names it
    ``stages[<index>].set.<key>`` at its line). The section must have been checked
    (:func:`codesign.validation.validate_config`)."""
    settings = raw.tree["stages"][index]["set"]
    staged = dataclasses.replace(raw, tree=without(raw.tree, "stages"),
                                 base=without(raw.base, "stages"))
    return with_settings(staged, settings, origin=f"stages[{index}].set",
                         lines=getattr(settings, "lines", {}))


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
        stages: with a ``stages`` section, each stage's validated experiment (the
            experiment with the stage's ``set`` keys set, :func:`with_stage`), in order;
            empty otherwise.
    """

    data: dict
    tree: dict
    source: str
    quick: bool = False
    stages: list[ExperimentConfig] = dataclasses.field(default_factory=list)

    def issue(self, path: Sequence[str | int], message: str) -> ConfigIssue:
        """A :class:`ConfigIssue` at ``path`` with its line (:func:`issue_at`)."""
        return issue_at(self.tree, path, message)

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
