"""Build an experiment's parts from a validated config and the plugin registry.

This is phase two of validation: it constructs the simulator, checks the design section
against the simulator's design space, constructs the observer, objective terms, constraints,
controller and optimizer (an identification experiment: the measurement, the recordings
and the :class:`~codesign.identification.IdentificationProblem`), and checks the initial
design, all before any run directory exists. Every problem is reported with its YAML path
and line in one :class:`ConfigError` (a :class:`DesignConfigError` when design values are at
fault).
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import Executor
from typing import Any

import numpy as np

from .config import (
    CONTROLLER_SIZING,
    ConfigError,
    ConfigIssue,
    DesignConfigError,
    ExperimentConfig,
)
from .design import DesignError
from .executors import get_executor, unshare
from .identification import IdentificationProblem, Recording
from .optim.adam import Adam
from .options import accepts_keyword
from .problem import DesignOverrideError, RolloutProblem, apply_overrides
from .rollout import Rollout
from .simulator import UnstableTimeStepError
from .terms import Constraint, Objective, WeightedTerm

__all__ = ["Experiment", "IdentificationExperiment", "build_experiment", "check_initial_design",
           "executor_from_spec"]


@dataclasses.dataclass(kw_only=True)
class _BuiltExperiment:
    """What every built experiment holds; closing it (or leaving its ``with`` block) shuts
    its executor down.

    Attributes:
        config: the validated experiment.
        simulator: the constructed simulator.
        problem: the vector problem the optimizer minimizes (:mod:`codesign.problem`).
        optimizer: the constructed optimizer.
        iterations: the optimizer's iteration budget (per start).
        starts: starting points of the optimizer (``optimizer.starts``), run as one batch.
        seed: ``run.seed``: draws the extra starting points (and an identification's
            minibatches).
        executor: the executor of batched evaluations, or ``None`` for inline.
        owns_executor: whether closing shuts ``executor`` down (False for an executor the
            caller passed in and keeps using: a sweep's, shared by its points).
    """

    config: ExperimentConfig
    simulator: Any
    problem: Any
    optimizer: Any
    iterations: int
    starts: int = 1
    seed: int = 0
    executor: Executor | None = None
    owns_executor: bool = True

    def close(self) -> None:
        """Shut down the executor's workers if this experiment started them; otherwise let
        the executor forget this experiment's problem (it stays up for its owner)."""
        if self.executor is None:
            return
        if self.owns_executor:
            self.executor.shutdown(wait=True, cancel_futures=True)
        else:
            unshare(self.executor, self.problem)
        self.executor = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclasses.dataclass(kw_only=True)
class Experiment(_BuiltExperiment):
    """Everything a co-design run needs, built from one config.

    Attributes (besides config, simulator, optimizer, iterations and executor):
        observer, controller: the constructed components.
        objective: what the optimizer minimizes.
        constraints: rollout constraints (possibly empty).
        rollout: the :class:`Rollout` (steps, substeps, dt, checkpointing).
        problem: the :class:`RolloutProblem` over the free design parameters (the keys of the
            design section) and, unless ``controller.optimize`` is false, the controller weights.
    """

    observer: Any
    controller: Any
    objective: Objective
    constraints: tuple[Constraint, ...]
    rollout: Rollout


@dataclasses.dataclass(kw_only=True)
class IdentificationExperiment(_BuiltExperiment):
    """Everything an identification run needs, built from one config.

    Attributes (besides config, simulator, optimizer and executor):
        measurement: the observer mapping simulated states to measurements.
        recordings: the recordings the source delivered.
        truth: ``parameter -> value`` behind the recordings when the source knows it
            (``RecordingSet.truth``), else ``None``.
        problem: the :class:`IdentificationProblem` over the design section's parameters.
        iterations: the optimizer's iteration budget (minibatch steps when stochastic).
        batch_size: recordings per stochastic step, or ``None`` for full batch.
    """

    measurement: Any
    recordings: list
    truth: dict[str, np.ndarray] | None
    batch_size: int | None

    @property
    def stochastic(self) -> bool:
        """Whether each optimizer step fits a minibatch of the recordings."""
        return self.batch_size is not None and self.batch_size < len(self.recordings)


def _describe_exception(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, ValueError | TypeError | LookupError):
        return text
    return f"{type(exc).__name__}: {text}"


class _Builder:
    """Constructs components, turning their exceptions into located issues."""

    def __init__(self, config: ExperimentConfig, registry):
        self.config, self.registry = config, registry
        self.issues: list[ConfigIssue] = []
        self.design_fault = False
        self.first_exception: BaseException | None = None

    def fail(self, path: tuple, exc: BaseException | str, *, design: bool = False) -> None:
        """Record an issue at ``path``; a DesignError (or ``design``) makes it a design fault."""
        self.design_fault |= design or isinstance(exc, DesignError)
        message = exc if isinstance(exc, str) else _describe_exception(exc)
        if isinstance(exc, BaseException) and self.first_exception is None:
            self.first_exception = exc
        self.issues.append(self.config.issue(path, message))

    def construct(self, kind: str, section: dict, path: tuple, **injected):
        """The component of a validated ``{name (term, source), options}`` section at YAML
        ``path``, given the ``injected`` arguments its factory takes; None (an issue) if it
        fails."""
        name = next(section[key] for key in ("term", "source", "name") if key in section)
        factory = self.registry.get(kind, name).factory
        arguments = {k: v for k, v in injected.items() if accepts_keyword(factory, k)}
        try:
            return factory(**arguments, **section["options"])
        except Exception as exc:  # a plugin's own validation error, reported at its YAML path
            self.fail((*path, "options") if section["options"] else path, exc)
            return None

    def raise_if_any(self) -> None:
        if not self.issues:
            return
        error_type = DesignConfigError if self.design_fault else ConfigError
        raise error_type(self.issues, source=self.config.source) from self.first_exception


def _design_overrides(builder: _Builder, simulator, design: dict) -> dict:
    """The design section's overrides that fit the simulator; misfits become issues."""
    try:
        space = simulator.design_space()
    except Exception as exc:  # the simulator's own parameters are invalid
        builder.fail(("simulator", "options"), exc)
        return {}
    overrides = {}
    for name, changes in design.items():
        if name not in space:
            listing = ", ".join(f"{p.name} {list(p.shape)}" for p in space) or "none"
            builder.fail(("design", name), f"unknown design parameter {name!r} of simulator "
                                           f"{builder.config.data['simulator']['name']!r}; "
                                           f"its parameters: {listing}")
            continue
        shape = space[name].shape
        misfits = [key for key in ("init", "lower", "upper") if key in changes
                   and not _broadcasts(changes[key], shape)]
        for key in misfits:
            builder.fail(("design", name, key), f"a value {_shape_of(changes[key])} "
                                                f"does not fit parameter {name!r} of shape "
                                                f"{shape}; give a scalar or a nested list of "
                                                "that shape", design=True)
        if misfits:
            continue
        try:
            apply_overrides(space, {name: changes})
        except DesignOverrideError as exc:  # reported at the key at fault
            builder.fail(("design", name, *(() if exc.key is None else (exc.key,))),
                         exc.detail, design=True)
            continue
        overrides[name] = changes
    return overrides


def _shape_of(value) -> str:
    """``of shape (2, 3)``, or ``of ragged shape`` for nested lists of unequal lengths."""
    try:
        return f"of shape {np.shape(value)}"
    except ValueError:  # NumPy refuses a ragged nesting
        return "of ragged shape"


def _broadcasts(value, shape: tuple[int, ...]) -> bool:
    try:
        np.broadcast_to(np.asarray(value, dtype=np.float64), shape)
    except ValueError:
        return False
    return True


def executor_from_spec(spec: str | dict, registry, *, workers: int | None = None
                       ) -> Executor | None:
    """The executor a resolved ``run.executor`` names: a kind (with ``workers``) or a mapping
    ``{kind, <options>}``; ``None`` for inline (batches run in the calling thread)."""
    options = dict(spec) if isinstance(spec, dict) else {"kind": spec}
    kind = options.pop("kind")
    if kind == "inline":
        return None
    workers = options.pop("workers", workers)
    return get_executor(kind, max_workers=workers, registry=registry, **options)


def check_initial_design(problem: RolloutProblem) -> None:
    """Raise :class:`DesignError` if the starting point has a wrong shape or NaN/inf entries."""
    x0 = problem.x0()
    if x0.shape != (problem.size,):
        raise DesignError(f"the initial parameter vector has shape {x0.shape}, expected "
                          f"({problem.size},)")
    _, weights = problem.split(x0)
    for name, value in weights.items():
        if not np.all(np.isfinite(value)):
            raise DesignError(f"controller weight {name!r} has non-finite initial values; "
                              "check the controller options")
    if np.any(x0 < problem.lower) or np.any(x0 > problem.upper):
        names = [p.name for p in problem.space]
        raise DesignError(f"the initial design lies outside its bounds (parameters: "
                          f"{', '.join(names)}); move init inside [lower, upper]")


def build_experiment(config: ExperimentConfig, registry, *,
                     executor: str | dict | Executor | None = None
                     ) -> Experiment | IdentificationExperiment:
    """Construct every component of ``config``; raise ConfigError/DesignError before running.

    Each factory receives, of the arguments the run supplies for its kind (listed in
    :mod:`codesign.hookspecs`), those its signature accepts. An identification experiment
    (``config.identification``) becomes an :class:`IdentificationExperiment`. ``executor``
    (a kind or ``{kind, <options>}``, e.g. from ``--executor``) replaces ``run.executor``;
    the executor is started last, once everything else is built. A running
    :class:`~concurrent.futures.Executor` instance is used as it is and left running when
    the experiment closes (the caller shuts it down).
    """
    data, run = config.data, config.data["run"]
    builder = _Builder(config, registry)
    simulator = builder.construct("simulators", data["simulator"], ("simulator",),
                                  base_dir=config.base_dir)
    builder.raise_if_any()
    overrides = _design_overrides(builder, simulator, data["design"])
    check = getattr(simulator, "check_time_step", None)
    if check is not None and not builder.issues:
        space = apply_overrides(simulator.design_space(), overrides)
        try:
            check(space.defaults(), run["dt"])
        except UnstableTimeStepError as exc:
            builder.fail(("run", "dt"), exc)
    kind, build_parts = (IdentificationExperiment, _identification_parts) \
        if config.identification else (Experiment, _codesign_parts)
    parts = build_parts(builder, simulator, overrides)
    owned = not isinstance(executor, Executor)
    pool = executor_from_spec(run["executor"] if executor is None else executor, registry,
                              workers=run["workers"]) if owned else executor
    parts["problem"].executor = pool
    return kind(config=config, simulator=simulator, iterations=data["optimizer"]["iterations"],
                starts=data["optimizer"]["starts"], seed=run["seed"], executor=pool,
                owns_executor=owned, **parts)


def _codesign_parts(builder: _Builder, simulator, overrides: dict) -> dict[str, Any]:
    """The fields of an :class:`Experiment` but the shared ones."""
    config = builder.config
    data, run = config.data, config.data["run"]
    observer = builder.construct("observers", data["observer"], ("observer",),
                                 simulator=simulator)

    def weighted_terms(entries: list, path: tuple) -> list[WeightedTerm]:
        terms = []
        for index, entry in enumerate(entries):
            term = builder.construct("terms", entry, (*path, index), simulator=simulator,
                                     dt=run["dt"], substeps=run["substeps"],
                                     base_dir=config.base_dir)
            if term is not None:
                terms.append(WeightedTerm(term, entry["weight"], entry["name"]))
        return terms

    objective_path = ("objective", "terms") if isinstance(config.tree.get("objective"), dict) \
        else ("objective",)
    objective_terms = weighted_terms(data["objective"]["terms"], objective_path)
    constraints = []
    for index, entry in enumerate(data["objective"]["constraints"]):
        path = ("objective", "constraints", index)
        terms = weighted_terms(entry["terms"], (*path, "terms"))
        lower = entry.get("at_least", entry.get("equals", -np.inf))
        upper = entry.get("at_most", entry.get("equals", np.inf))
        try:
            constraints.append(Constraint(Objective(tuple(terms)), lower, upper, entry["name"]))
        except ValueError as exc:
            builder.fail(path, exc)

    sizing = {}
    if observer is not None and simulator is not None:
        sizing = dict(zip(CONTROLLER_SIZING, (
            int(observer.size), int(simulator.action_size), run["steps"],
            run["dt"] * run["substeps"]), strict=True))
    controller = builder.construct("controllers", data["controller"], ("controller",),
                                   simulator=simulator, **sizing) if sizing else None
    if controller is not None:
        try:
            controller.parameter_space()
        except DesignError as exc:  # e.g. a NaN initial value among the options
            builder.fail(("controller", "options"), exc)
    optimizer = builder.construct("optimizers", data["optimizer"], ("optimizer",))
    builder.raise_if_any()

    try:
        objective = Objective(tuple(objective_terms))
    except ValueError as exc:  # a term with an invalid kind or weight
        builder.fail(("objective",), exc)
    try:
        rollout = Rollout(simulator, controller=controller, observer=observer,
                          steps=run["steps"], substeps=run["substeps"], dt=run["dt"],
                          checkpoint_every=run["checkpoint_every"])
    except ValueError as exc:  # controller, observer and simulator sizes disagree
        builder.fail(("controller",), exc)
    builder.raise_if_any()
    try:
        problem = RolloutProblem(rollout, objective, constraints, free=list(overrides),
                                 overrides=overrides,
                                 optimize_controller=data["controller"]["optimize"])
        check_initial_design(problem)
    except DesignError as exc:
        builder.fail(("design",) if overrides else ("controller", "options"), exc)
        builder.raise_if_any()
    if problem.size == 0 and getattr(optimizer, "needs_parameters", True):
        builder.fail(("design",), "nothing to optimize: list design parameters under design, "
                                  "set controller.optimize: true, or only simulate with "
                                  "optimizer: {name: none}")
        builder.raise_if_any()
    return {"observer": observer, "controller": controller, "objective": objective,
            "constraints": tuple(constraints), "rollout": rollout, "problem": problem,
            "optimizer": optimizer}


def _identification_parts(builder: _Builder, simulator, overrides: dict) -> dict[str, Any]:
    """The fields of an :class:`IdentificationExperiment` but the shared ones.

    A recording set that says ``actions_unknown`` (its actions are placeholders, e.g. the
    ``holding_poses`` source's ``torques: zero``) needs ``identification.fit_actions``."""
    config = builder.config
    data, run = config.data, config.data["run"]
    section = data["identification"]
    path = ("identification",)
    measurement = builder.construct("observers", section["measurement"],
                                    (*path, "measurement"), simulator=simulator)
    optimizer = builder.construct("optimizers", data["optimizer"], ("optimizer",))
    builder.raise_if_any()
    source = section["recordings"]
    recordings = builder.construct(
        "recordings", source, (*path, "recordings"), simulator=simulator,
        measurement=measurement, dt=run["dt"], substeps=run["substeps"], base_dir=config.base_dir)
    builder.raise_if_any()
    if not isinstance(recordings, list) or not recordings or not all(
            isinstance(r, Recording) for r in recordings):
        builder.fail((*path, "recordings", "source"),
                     f"recording source {source['source']!r} must return a non-empty list of "
                     f"codesign.identification.Recording, got {type(recordings).__name__}")
        builder.raise_if_any()
    if not overrides and not section["fit_initial_state"] and not section["fit_actions"]:
        # at the design section when the file has one, else where its line can be named
        builder.fail(("design",) if "design" in config.tree else path,
                     "nothing to identify: list the parameters to fit under design (init: the "
                     "starting guess, lower, upper) or set identification.fit_initial_state: "
                     "true or identification.fit_actions: true")
    if getattr(recordings, "actions_unknown", False) and not section["fit_actions"]:
        builder.fail((*path, "fit_actions"), f"recording source {source['source']!r} gives "
                                             "placeholder actions to be fitted (see its "
                                             "options); set identification.fit_actions: true "
                                             "or have the source give its recorded actions")
    scale = section.get("action_scale", 1.0)
    if isinstance(scale, list) and len(scale) != simulator.action_size:
        builder.fail((*path, "action_scale"), f"{len(scale)} scales for the simulator's "
                                              f"{simulator.action_size} action components; "
                                              "give one number, or one per component")
    batch_size = section["batch_size"]
    if batch_size is not None and batch_size < len(recordings) and optimizer is not None \
            and not isinstance(optimizer, Adam):
        builder.fail((*path, "batch_size"), f"stochastic identification (batch_size "
                                            f"{batch_size} < {len(recordings)} recordings) "
                                            "steps with Adam; set optimizer.name: adam or "
                                            "remove batch_size")
    builder.raise_if_any()
    try:
        problem = IdentificationProblem(
            simulator, recordings, measurement=measurement, free=list(overrides),
            overrides=overrides, fit_initial_state=section["fit_initial_state"],
            fit_actions=section["fit_actions"], action_scale=scale,
            substeps=run["substeps"], dt=run["dt"], checkpoint_every=run["checkpoint_every"])
    except ValueError as exc:  # recordings that do not fit the simulator or measurement
        builder.fail((*path, "recordings"), exc)
        builder.raise_if_any()
    truth = getattr(recordings, "truth", None)
    return {"measurement": measurement, "recordings": recordings,
            "truth": None if not truth else dict(truth), "problem": problem,
            "optimizer": optimizer, "batch_size": batch_size}
