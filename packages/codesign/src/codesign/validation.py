"""Validation, phase one: an experiment's sections checked before any component is built.

:func:`validate_config` walks the parsed tree (:class:`~codesign.config.RawConfig`) and
checks the structure, the types, the component names against the plugin registry and every
``options`` mapping against its factory's signature
(:func:`~codesign.options.check_options`), filling in every default. Every problem is
collected and reported together in one :class:`~codesign.config.ConfigError`, each naming
its YAML path, line and what is allowed.
Phase two, which needs the built simulator, is :func:`codesign.experiment.build_experiment`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .config import (
    CONTROLLER_INJECTED,
    RECORDING_INJECTED,
    REQUIRED_SECTIONS,
    SECTIONS,
    TERM_INJECTED,
    ConfigError,
    ConfigIssue,
    ExperimentConfig,
    RawConfig,
    deep_merge,
    issue_at,
    source_folder,
    with_stage,
    without,
)
from .limits import (
    MAX_BATCH_SIZE,
    MAX_DT,
    MAX_ITERATIONS,
    MAX_STAGES,
    MAX_STARTS,
    MAX_UNKNOWN_KEYS_LISTED,
    RUN_RANGES,
    VIDEO_RANGES,
)
from .options import (
    bounded_repr,
    check_options,
    is_integer,
    is_number,
    suggest,
    type_name,
)

__all__ = ["validate_config"]

_IDENTIFICATION_REQUIRED = ("simulator", "optimizer", "run")
_NOT_IN_IDENTIFICATION = ("controller", "observer", "objective")
_DESIGN_KEYS = ("init", "lower", "upper", "scale")


class _Checker:
    """Collects issues while walking the parsed tree."""

    def __init__(self, tree: dict, registry):
        self.tree, self.registry = tree, registry
        self.issues: list[ConfigIssue] = []

    def error(self, path: Sequence[str | int], message: str) -> None:
        self.issues.append(issue_at(self.tree, path, message))

    def mapping(self, value: Any, path: tuple, allowed: Sequence[str], *,
                required: Sequence[str] = (), what: str = "this section") -> dict | None:
        """Check that ``value`` is a mapping with only ``allowed`` keys and all ``required``."""
        if value is None:
            value = {}
        if not isinstance(value, dict):
            self.error(path, f"{what} must be a mapping with keys {', '.join(allowed)}, got "
                             f"{type_name(value)}")
            return None
        self.unknown([key for key in value if key not in allowed], path, allowed, "key")
        for key in required:
            if key not in value:
                self.error(path, f"missing required key {key!r} in {what}")
        return value

    def unknown(self, keys: list[str], path: tuple, allowed: Sequence[str], what: str) -> None:
        """Issues for the ``keys`` of the mapping at ``path`` not in ``allowed``: one each
        (with a suggestion) for the first ``MAX_UNKNOWN_KEYS_LISTED``, one for the rest."""
        for key in keys[:MAX_UNKNOWN_KEYS_LISTED]:
            self.error((*path, key), f"unknown {what} {bounded_repr(key)}"
                                     f"{suggest(key, allowed)}; allowed here: {', '.join(allowed)}")
        rest = keys[MAX_UNKNOWN_KEYS_LISTED:]
        if rest:
            self.error(path, f"{len(rest)} more unknown {what}s: {bounded_repr(rest)}; allowed "
                             f"here: {', '.join(allowed)}")

    def number(self, value: Any, path: tuple, *, integer: bool = False, minimum=None,
               maximum=None, positive: bool = False) -> Any:
        """``value`` as an int (``integer``) or float if it is a finite number within
        ``minimum``, ``maximum`` (a limit of :mod:`codesign.limits`) and, with
        ``positive``, above zero; else None with an issue at ``path``."""
        if not is_number(value):
            problem = f"must be {'an integer' if integer else 'a number'}, got " \
                      f"{type_name(value)} {bounded_repr(value)}"
        elif not math.isfinite(value):
            problem = f"must be a finite number, got {value}"
        elif positive and not value > 0:
            problem = f"must be positive, got {value}"
        elif minimum is not None and value < minimum:
            problem = f"must be at least {minimum}, got {value}"
        elif maximum is not None and value > maximum:
            problem = f"must be at most {maximum} (codesign's limit), got {value}"
        elif integer and not is_integer(value):
            problem = f"must be an integer, got {type_name(value)} {value}"
        else:
            return float(value) if not integer else int(value)
        self.error(path, problem)
        return None

    def flag(self, value: Any, path: tuple) -> bool:
        """``value`` if it is a boolean, else False with an issue at ``path``."""
        if not isinstance(value, bool):
            self.error(path, f"must be true or false, got {type_name(value)}")
        return value is True

    def component(self, node: Any, path: tuple, kind: str, *, injected: Sequence[str],
                  name_key: str = "name", default_name: str | None = None,
                  extra_keys: Sequence[str] = (), defaults: dict[str, Any] | None = None,
                  supplied: dict[str, Any] | None = None) -> dict:
        """Check a ``{name, options}`` section against the registry and the factory.

        ``defaults`` and ``supplied`` are :func:`~codesign.options.check_options`'s.
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
                                           f"{type_name(options)}")
            options = {}
        if name is None and name_key not in section:  # the missing key is reported above
            return resolved
        if not isinstance(name, str):
            self.error((*path, name_key), f"must be a string, got {type_name(name)}")
            return resolved
        available = self.registry.names(kind)
        if name not in available:
            listing = ", ".join(available) or "none installed"
            self.error((*path, name_key), f"unknown {kind[:-1]} {bounded_repr(name)}"
                                        f"{suggest(name, available)}; available: {listing}")
            resolved["options"] = dict(options)
            return resolved
        checked, problems = check_options(self.registry.get(kind, name).factory, options,
                                          injected=injected, defaults=defaults,
                                          supplied=supplied,
                                          what=f"{kind[:-1]} {bounded_repr(name)}")
        for sub_path, message in problems:
            self.error((*path, "options", *sub_path), message)
        resolved["options"] = checked
        return resolved


def _to_plain(value: Any) -> Any:
    """Recursively turn the loader's line-recording containers into plain dicts and lists."""
    if isinstance(value, dict):
        return {k: _to_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_plain(v) for v in value]
    return value


def _check_design(ck: _Checker, node: Any) -> dict:
    if node is None:
        return {}
    if not isinstance(node, dict):
        ck.error(("design",), "design must map simulator parameter names to "
                              f"{{{', '.join(_DESIGN_KEYS)}}}, got {type_name(node)}")
        return {}
    resolved = {}
    for name, entry in node.items():
        path = ("design", name)
        entry = ck.mapping(entry, path, _DESIGN_KEYS,
                           what=f"design parameter {bounded_repr(name)}")
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
                                       f"{type_name(value)} {bounded_repr(value)}")
            elif key == "init" and not all(math.isfinite(v) for v in flat):
                ck.error((*path, key), "init must be finite (no NaN or inf); give a finite "
                                       "starting value")
            elif any(math.isnan(v) for v in flat):
                ck.error((*path, key), f"{key} must not be NaN; use .inf / -.inf for no bound")
            else:
                out[key] = value
        if "scale" in entry:
            scale = ck.number(entry["scale"], (*path, "scale"), positive=True)
            if scale is not None:
                out["scale"] = scale
        resolved[name] = out
    return resolved


def _flatten_numbers(value: Any) -> list[float] | None:
    """Every number of a number or non-empty (nested) list of numbers, else ``None``."""
    if is_number(value):
        return [float(value)]
    parts = [_flatten_numbers(item) for item in value] if isinstance(value, list) else []
    return None if not parts or None in parts else [n for part in parts for n in part]


def _check_terms(ck: _Checker, node: Any, path: tuple, *, what: str) -> list:
    if not isinstance(node, list) or not node:
        ck.error(path, f"{what} must be a non-empty list of {{term, weight, options}}, got "
                       f"{type_name(node)}")
        return []
    terms = []
    for index, entry in enumerate(node):
        entry_path = (*path, index)
        resolved = ck.component(entry, entry_path, "terms", injected=TERM_INJECTED,
                                name_key="term", extra_keys=("weight", "name"))
        if resolved.get("name") is None:  # not a mapping, or no term (reported above)
            continue
        weight = ck.number(entry.get("weight", 1.0), (*entry_path, "weight"))
        name = entry.get("name", entry.get("term"))
        if not isinstance(name, str):
            ck.error((*entry_path, "name"), f"must be a string, got {type_name(name)}")
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
        ck.error((*path, "constraints"), f"must be a list, got {type_name(raw)}")
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
        if resolved.get("at_least", -math.inf) > resolved.get("at_most", math.inf):
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

    def sized(key: str, value: Any, ranges: dict = RUN_RANGES, parent: tuple = path) -> Any:
        low, high = ranges[key]
        return ck.number(value, (*parent, key), integer=True, minimum=low, maximum=high)

    if identification and "steps" not in section:
        run["steps"] = None  # the recordings set the trajectory lengths
    else:
        run["steps"] = sized("steps", section.get("steps", 1))
    run["substeps"] = sized("substeps", section.get("substeps", 1))
    run["dt"] = ck.number(section.get("dt", 1.0), (*path, "dt"), positive=True, maximum=MAX_DT)
    run["seed"] = sized("seed", section.get("seed", 0))
    for key in ("checkpoint_every", "workers"):
        value = section.get(key)
        run[key] = None if value is None else sized(key, value)
    run["executor"] = _check_executor(ck, section.get("executor", "inline"), run["workers"])
    defaults = {"fps": 30, "width": 480, "height": 360, "every": 1}
    video = ck.mapping(section.get("video"), (*path, "video"), tuple(defaults),
                       what="run.video") or {}
    run["video"] = {key: sized(key, video.get(key, default), VIDEO_RANGES, (*path, "video"))
                    for key, default in defaults.items()}
    return run


def _check_executor(ck: _Checker, node: Any, workers: int | None) -> str | dict:
    """``run.executor``: a kind (``process``, with ``run.workers``) or a mapping ``{kind,
    <the kind's options>}``, e.g. ``{kind: dask, address: tcp://host:8786, workers: 4}``;
    resolved as given (a mapping with every option the factory takes, defaults included)."""
    path = ("run", "executor")
    available = ck.registry.names("executors", ordered=True)
    kind = node.get("kind") if isinstance(node, dict) else node
    if isinstance(node, dict) and "kind" not in node:
        ck.error(path, f"missing required key 'kind' in run.executor; kinds: "
                       f"{', '.join(available)}")
        return dict(node)
    if not isinstance(kind, str) or kind not in available:
        where = (*path, "kind") if isinstance(node, dict) else path
        ck.error(where, f"unknown executor {bounded_repr(kind)}"
                        f"{suggest(kind, available) if isinstance(kind, str) else ''}; "
                        f"available: {', '.join(available)}")
        return node
    if not isinstance(node, dict):
        if kind == "inline" and workers not in (None, 1):
            ck.error(("run", "workers"), "the inline executor runs one rollout at a time; "
                                         "remove workers or set executor: process")
        return kind
    options = {k: v for k, v in node.items() if k != "kind"}
    if workers is not None:
        if "workers" in options:
            ck.error(("run", "workers"), "workers is set both here and in run.executor; keep "
                                         "one")
        options["workers"] = workers
    checked, problems = check_options(ck.registry.get("executors", kind).factory, options,
                                      what=f"executor {bounded_repr(kind)}")
    for sub_path, message in problems:
        ck.error((*path, *sub_path), message)
    return {"kind": kind, **checked}


def _check_controller(ck: _Checker, tree: dict, seed: int) -> dict:
    controller = ck.component(tree.get("controller"), ("controller",), "controllers",
                              injected=CONTROLLER_INJECTED, extra_keys=("optimize",),
                              defaults={"seed": seed}) if "controller" in tree else {}
    controller["optimize"] = ck.flag(tree["controller"].get("optimize", True), (
        "controller", "optimize")) if isinstance(tree.get("controller"), dict) else True
    return controller


def _check_optimizer(ck: _Checker, tree: dict, seed: int) -> dict:
    optimizer = ck.component(tree.get("optimizer"), ("optimizer",), "optimizers", injected=(),
                             extra_keys=("iterations", "starts"), defaults={"seed": seed}) \
        if "optimizer" in tree else {}
    if isinstance(tree.get("optimizer"), dict):
        optimizer["iterations"] = ck.number(tree["optimizer"].get("iterations", 100),
                                            ("optimizer", "iterations"), integer=True, minimum=1,
                                            maximum=MAX_ITERATIONS)
        optimizer["starts"] = ck.number(tree["optimizer"].get("starts", 1),
                                        ("optimizer", "starts"), integer=True, minimum=1,
                                        maximum=MAX_STARTS)
    return optimizer


def _check_identification(ck: _Checker, node: Any, run: dict, seed: int) -> dict:
    path = ("identification",)
    section = ck.mapping(node, path, ("recordings", "measurement", "batch_size",
                                      "fit_initial_state", "fit_actions", "action_scale"),
                         required=("recordings", "measurement"),
                         what="the identification section")
    if section is None:
        return {}
    defaults = ({} if run.get("steps") is None else {"steps": run["steps"]}) | {"seed": seed}
    out: dict[str, Any] = {}
    recordings = ck.component(section.get("recordings"), (*path, "recordings"), "recordings",
                              injected=RECORDING_INJECTED, name_key="source",
                              defaults=defaults) if "recordings" in section else {}
    # the resolved section keeps the YAML's key, so a run's config.yaml validates again
    out["recordings"] = {"source" if k == "name" else k: v for k, v in recordings.items()}
    out["measurement"] = ck.component(section.get("measurement"), (*path, "measurement"),
                                      "observers", injected=("simulator",)) \
        if "measurement" in section else {}
    batch_size = section.get("batch_size")
    out["batch_size"] = None if batch_size is None else ck.number(
        batch_size, (*path, "batch_size"), integer=True, minimum=1, maximum=MAX_BATCH_SIZE)
    out["fit_initial_state"] = ck.flag(section.get("fit_initial_state", False),
                                       (*path, "fit_initial_state"))
    out["fit_actions"] = ck.flag(section.get("fit_actions", False), (*path, "fit_actions"))
    if "action_scale" in section and not out["fit_actions"]:
        ck.error((*path, "action_scale"), "action_scale sizes the fitted actions; set "
                                          "fit_actions: true or remove action_scale")
    elif out["fit_actions"]:
        out["action_scale"] = _action_scale(ck, section.get("action_scale", 1.0),
                                            (*path, "action_scale"))
    return out


def _action_scale(ck: _Checker, value: Any, path: tuple) -> float | list | None:
    """``identification.action_scale``: a positive number, or a list of them (one per action
    component, counted when the simulator is built)."""
    if not isinstance(value, list):
        return ck.number(value, path, positive=True)
    if not value:
        ck.error(path, "must be a positive number or a non-empty list of them (one per "
                       "action component), got an empty list")
    return [ck.number(item, (*path, k), positive=True) for k, item in enumerate(value)]


def _check_stages(ck: _Checker, node: Any) -> list[dict]:
    """``stages``: a list of ``{set: {<dotted key>: value, ...}}``, each key naming a value of
    the experiment's sections (checked when the stage's experiment is validated)."""
    path = ("stages",)
    example = "[{set: {simulator.options.<name>: value}}, ...]"
    if not isinstance(node, list) or not node:
        ck.error(path, f"stages must be a non-empty list of stages, each {{set: {{<dotted "
                       f"key>: value}}}}, e.g. {example}")
        return []
    if len(node) > MAX_STAGES:
        ck.error(path, f"{len(node)} stages; at most {MAX_STAGES}")
        return []
    stages = []
    for k, stage in enumerate(node):
        section = ck.mapping(stage, (*path, k), ("set",), required=("set",),
                             what="a stage") or {}
        settings = section.get("set")
        if "set" in section and (not isinstance(settings, dict) or not settings):
            ck.error((*path, k, "set"), f"a stage's set must be a non-empty mapping of dotted "
                                        f"keys to values, e.g. {example}")
            continue
        for key in settings or {}:
            section_name = key.split(".")[0] if isinstance(key, str) else None
            if section_name not in SECTIONS or section_name in ("stages", "quick"):
                allowed = [name for name in SECTIONS if name not in ("stages", "quick")]
                ck.error((*path, k, "set", key),
                         f"{key!r} does not name a value of the experiment; a stage sets "
                         f"dotted keys under one of the sections {allowed}, e.g. "
                         f"simulator.options.<name> or optimizer.iterations")
        stages.append({"set": dict(settings or {})})
    return stages


def _validate_stages(raw: RawConfig, registry, issues: list[ConfigIssue]
                     ) -> list[ExperimentConfig]:
    """Each stage's experiment validated (its problems added to ``issues``, those also
    found without the stage once)."""
    configs, seen = [], {str(issue) for issue in issues}
    for k in range(len(raw.tree["stages"])):
        try:
            config = validate_config(with_stage(raw, k), registry)
        except ConfigError as exc:
            issues += [issue for issue in exc.errors if str(issue) not in seen]
            seen |= {str(issue) for issue in exc.errors}
            continue
        where = issue_at(raw.tree, ("stages", k), "")
        if config.identification:
            issues.append(dataclasses.replace(where, message=(
                "stages continue a co-design optimization; an identification experiment "
                "runs in one stage: remove the stages section")))
        elif config.data["optimizer"]["starts"] > 1:
            issues.append(dataclasses.replace(where, message=(
                f"optimizer.starts is {config.data['optimizer']['starts']}: each stage "
                f"continues from the one result of the stage before it, so a run with "
                f"stages has one start; remove optimizer.starts or the stages")))
        configs.append(config)
    return configs


def _validate_tree(tree: dict, registry, base_dir: Path) -> tuple[dict, list[ConfigIssue]]:
    ck = _Checker(tree, registry)
    identification = "identification" in tree
    ck.unknown([key for key in tree if key not in SECTIONS], (), SECTIONS, "section")
    for key in tree:
        if identification and key in _NOT_IN_IDENTIFICATION:
            ck.error((key,), f"an identification experiment has no {key!r} section: the "
                             "recordings' actions are replayed open loop and the loss is the "
                             "tracking error through identification.measurement; remove it")
    for key in _IDENTIFICATION_REQUIRED if identification else REQUIRED_SECTIONS:
        if key not in tree:
            ck.error((), f"missing required section {key!r}")
    run = _check_run(ck, tree.get("run", {}), identification=identification) \
        if "run" in tree else {}
    seed = run.get("seed") if run.get("seed") is not None else 0
    data: dict[str, Any] = {}
    data["simulator"] = ck.component(tree.get("simulator"), ("simulator",), "simulators",
                                     injected=("base_dir",), supplied={"base_dir": base_dir}) \
        if "simulator" in tree else {}
    data["design"] = _check_design(ck, tree.get("design"))
    if identification:
        data["identification"] = _check_identification(ck, tree["identification"], run, seed)
    else:
        data["controller"] = _check_controller(ck, tree, seed)
        data["observer"] = ck.component(tree.get("observer"), ("observer",), "observers",
                                        injected=("simulator",), default_name="none")
        data["objective"] = _check_objective(ck, tree.get("objective")) \
            if "objective" in tree else {}
    data["optimizer"] = _check_optimizer(ck, tree, seed)
    data["run"] = run
    if "stages" in tree:
        data["stages"] = _check_stages(ck, tree["stages"])
    return _to_plain(data), ck.issues


def validate_config(raw: RawConfig, registry) -> ExperimentConfig:
    """Phase one: check structure, types, names and options; raise ConfigError listing all.

    Without ``--quick`` the quick section is checked too (merged over the rest), so a typo
    there is found before anyone runs it.
    """
    base_dir = source_folder(raw.source)
    data, issues = _validate_tree(without(raw.tree, "quick"), registry, base_dir)
    if not raw.quick and isinstance(raw.base.get("quick"), dict):
        merged = deep_merge(without(raw.base, "quick"), raw.base["quick"], origin="quick")
        _, quick_issues = _validate_tree(merged, registry, base_dir)
        seen = {str(i) for i in issues}
        issues += [i for i in quick_issues if str(i) not in seen]
    if "quick" in raw.base and not isinstance(raw.base["quick"], dict | None):
        issues.append(issue_at(raw.base, ("quick",),
                               "quick must be a mapping (a partial experiment)"))
    stages = _validate_stages(raw, registry, issues) if data.get("stages") and not issues \
        else []
    if issues:
        issues.sort(key=lambda issue: issue.line or 0)  # file order; whole-file issues first
        raise ConfigError(issues, source=raw.source)
    return ExperimentConfig(data=data, tree=raw.tree, source=raw.source, quick=raw.quick,
                            stages=stages)
