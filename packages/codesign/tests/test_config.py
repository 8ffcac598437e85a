"""Experiment YAML: safe loading with lines, validation in two phases, options vs signatures."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import pytest
from plugin_fixture import fixtures_plugin

from codesign import DesignError, DesignSpace, OpenLoopController, Parameter
from codesign.config import (
    ConfigError,
    ConfigIssue,
    DesignConfigError,
    deep_merge,
    format_path,
    load_config,
    parse_config,
)
from codesign.experiment import build_experiment, check_initial_design
from codesign.hookspecs import hookimpl
from codesign.limits import (
    MAX_ECHO_CHARS,
    MAX_MESSAGE_CHARS,
    MAX_REPORTED_ISSUES,
    MAX_UNKNOWN_KEYS_LISTED,
    YAML_MAX_DEPTH,
    YAML_MAX_INTEGER,
    YAML_MAX_NODES,
)
from codesign.options import Range, bounded_repr, check_options
from codesign.plugins import get_registry
from codesign.problem import DesignOverrideError, apply_overrides
from codesign.runs import run_experiment
from codesign.validation import validate_config

fx = fixtures_plugin()

BASE = """\
simulator:
  name: spring
design:
  stiffness: {init: 4.0, lower: 0.5, upper: 20.0}
controller:
  name: open_loop
objective:
  - term: final_position
    options: {target: 0.2}
optimizer:
  name: test_gd
  iterations: 3
run:
  steps: 5
  dt: 0.01
"""


@pytest.fixture(scope="module")
def registry():
    return get_registry(fx.plugin_manager())


def validate(text, registry, *, quick=False):
    return validate_config(parse_config(textwrap.dedent(text), source="exp.yaml", quick=quick),
                           registry)


def errors_of(text, registry, *, quick=False, build=False) -> list[str]:
    with pytest.raises(ConfigError) as info:
        config = validate(text, registry, quick=quick)
        if build:
            build_experiment(config, registry).close()
    return [str(e) for e in info.value.errors]


# -- loading ---------------------------------------------------------------------------------


def test_loader_records_lines_reads_exponent_floats_and_refuses_duplicates():
    raw = parse_config("a:\n  b: 1e-3\n  c:\n    - x\n    - 2E+2\n")
    assert raw.tree["a"]["b"] == pytest.approx(1e-3)
    assert raw.tree["a"]["c"] == ["x", 200.0]
    assert raw.tree.lines["a"] == 1 and raw.tree["a"].lines["c"] == 3
    assert raw.tree["a"]["c"].lines == [4, 5]
    with pytest.raises(ConfigError, match=r"duplicate key 'b' \(first on line 2\)"):
        parse_config("a:\n  b: 1\n  b: 2\n")


def test_malformed_yaml_names_the_line():
    with pytest.raises(ConfigError) as info:
        parse_config("simulator:\n  name: [spring\nrun: {}\n", source="bad.yaml")
    message = str(info.value)
    assert message.startswith("bad.yaml: line 3: malformed YAML: ")
    assert message.endswith("; fix the syntax at that line")


def test_safe_loader_refuses_python_tags():
    with pytest.raises(ConfigError, match="malformed YAML"):
        parse_config("simulator: !!python/object/apply:os.system ['echo hi']\n")


def test_empty_missing_and_non_mapping_files(tmp_path):
    with pytest.raises(ConfigError, match="empty"):
        parse_config("")
    with pytest.raises(ConfigError, match="must be a mapping of sections"):
        parse_config("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "missing.yaml")


def test_format_path():
    assert format_path(("objective", "terms", 0, "term")) == "objective.terms[0].term"
    assert format_path(()) == "(top level)"


# -- phase one -------------------------------------------------------------------------------


def test_valid_config_resolves_defaults(registry):
    config = validate(BASE, registry)
    data = config.data
    assert data["simulator"] == {"name": "spring", "options": {"q0": 1.0, "v0": 0.0}}
    assert data["observer"] == {"name": "none", "options": {}}
    assert data["controller"]["options"]["initial"] == 0.0
    assert data["controller"]["optimize"] is True
    assert data["objective"]["terms"][0] == {"term": "final_position", "weight": 1.0,
                                             "name": "final_position",
                                             "options": {"target": 0.2}}
    assert data["run"]["substeps"] == 1 and data["run"]["executor"] == "inline"
    assert data["run"]["video"] == {"fps": 30, "width": 480, "height": 360, "every": 1}
    # the resolved YAML validates to the same data
    again = validate(config.to_yaml(), registry)
    assert again.data == data


def test_unknown_key_names_path_line_and_allowed(registry):
    text = BASE.replace("  dt: 0.01\n", "  dt: 0.01\n  stpes: 3\n")
    (error,) = errors_of(text, registry)
    assert error.startswith("run.stpes (line 16): unknown key 'stpes'")
    assert "did you mean 'steps'" in error and "allowed here: steps, substeps" in error


def test_unknown_section_and_missing_sections(registry):
    errors = errors_of("simulatr:\n  name: spring\n", registry)
    assert any(e.startswith("simulatr (line 1): unknown section") for e in errors)
    for section in ("simulator", "controller", "objective", "optimizer", "run"):
        assert any(f"missing required section {section!r}" in e for e in errors)


def test_unknown_plugins_list_what_is_available(registry):
    text = (BASE.replace("name: spring", "name: mpm")
            .replace("name: open_loop", "name: mlpp")
            .replace("term: final_position", "term: distance")
            .replace("name: test_gd", "name: newton"))
    errors = errors_of(text, registry)
    assert len(errors) == 4, errors
    assert errors[0].startswith("simulator.name (line 2): unknown simulator 'mpm'; "
                                "available: linear, spring")
    assert "controller.name (line 6): unknown controller 'mlpp' (did you mean 'mlp'?)" \
        in errors[1]
    assert errors[2].startswith("objective[0].term (line 8): unknown term 'distance'")
    assert "action_l2" in errors[2]
    assert errors[3].startswith("optimizer.name (line 11): unknown optimizer 'newton'")
    assert "test_gd" in errors[3]


def test_wrong_types_are_reported_together(registry):
    text = (BASE.replace("steps: 5", "steps: ten")
            .replace("dt: 0.01", "dt: -1")
            .replace("iterations: 3", "iterations: 2.5"))
    errors = errors_of(text, registry)
    assert "run.steps (line 14): must be an integer, got a string 'ten'" in errors
    assert "run.dt (line 15): must be positive, got -1" in errors
    assert "optimizer.iterations (line 12): must be an integer, got a number 2.5" in errors


def test_options_are_checked_against_the_factory_signature(registry):
    text = (BASE.replace("options: {target: 0.2}", "options: {target: high, scale: 2}")
            .replace("name: open_loop", "name: open_loop\n  options: {action_size: 3}"))
    errors = errors_of(text, registry)
    assert any(e.startswith("controller.options.action_size (line 7): 'action_size' is set "
                            "by the run") for e in errors)
    assert any(e.startswith("objective[0].options.target (line 10): option 'target' of term "
                            "'final_position' must be a number, got a string 'high'")
               for e in errors)
    assert any("unknown option 'scale' for term 'final_position'; accepted: target (a number "
               "= 0.0)" in e for e in errors)


def test_required_option_without_default(registry):
    text = BASE + "observer:\n  name: state_fields\n"
    (error,) = errors_of(text, registry)
    assert error.startswith("observer.options (line 16): observer 'state_fields' needs option "
                            "'fields' (a list of string); add it under options")


def test_run_seed_is_the_default_seed_of_seeded_factories(registry):
    text = BASE.replace("name: open_loop", "name: mlp\n  options: {hidden: [4]}") \
        .replace("  dt: 0.01\n", "  dt: 0.01\n  seed: 7\n") + "observer:\n  name: state_fields\n" \
        "  options: {fields: [q, v]}\n"
    config = validate(text, registry)
    assert config.data["controller"]["options"]["seed"] == 7
    assert config.data["controller"]["options"]["hidden"] == [4]


def test_objective_mapping_with_constraints(registry):
    text = BASE.replace("""objective:
  - term: final_position
    options: {target: 0.2}
""", """objective:
  terms:
    - term: final_position
  constraints:
    - terms: [{term: action_l2}]
      at_most: 0.5
    - terms: [{term: final_position, weight: 2}]
      equals: 0.1
    - terms: [{term: action_l2}]
""")
    (error,) = errors_of(text, registry)
    assert error.startswith("objective.constraints[2] (line 15): a constraint needs either "
                            "equals, or at_most and/or at_least")
    valid = text.replace("    - terms: [{term: action_l2}]\n      at_most: 0.5\n", "") \
        .replace("    - terms: [{term: action_l2}]\n", "")
    with build_experiment(validate(valid, registry), registry) as experiment:
        (constraint,) = experiment.constraints
        assert constraint.lower == constraint.upper == 0.1
        assert constraint.objective.terms[0].weight == 2.0


def test_design_section_values(registry):
    text = BASE.replace("{init: 4.0, lower: 0.5, upper: 20.0}",
                        "{init: .nan, lower: [a], scale: 0, high: 3}")
    errors = errors_of(text, registry)
    assert len(errors) == 4, errors
    assert any(e.startswith("design.stiffness.high (line 4): unknown key 'high'") for e in errors)
    assert any(e.startswith("design.stiffness.init (line 4): init must be finite") for e in errors)
    assert any(e.startswith("design.stiffness.lower (line 4): must be a number or a (nested) "
                            "list of numbers") for e in errors)
    assert any(e.startswith("design.stiffness.scale (line 4): must be positive") for e in errors)


def test_quick_section_merges_and_is_checked_without_quick(registry):
    text = BASE + "quick:\n  optimizer: {iterations: 1}\n  run: {steps: 2}\n"
    assert validate(text, registry).data["run"]["steps"] == 5
    quick = validate(text, registry, quick=True)
    assert quick.quick and quick.data["run"]["steps"] == 2
    assert quick.data["optimizer"]["iterations"] == 1
    assert quick.data["run"]["dt"] == 0.01
    assert "quick" not in quick.data
    (error,) = errors_of(BASE + "quick:\n  run: {stepz: 2}\n", registry)
    assert error.startswith("quick.run.stepz (line 17): unknown key 'stepz'")
    with pytest.raises(ConfigError, match="--quick was given but the experiment has no quick"):
        validate(BASE, registry, quick=True)


def test_deep_merge_replaces_lists_and_merges_mappings():
    merged = deep_merge({"a": {"b": 1, "c": [1, 2]}, "d": 1}, {"a": {"c": [3]}, "e": 2})
    assert merged == {"a": {"b": 1, "c": [3]}, "d": 1, "e": 2}


def test_inline_executor_with_workers_is_refused(registry):
    (error,) = errors_of(BASE + "  workers: 4\n", registry)
    assert error.startswith("run.workers (line 16): the inline executor runs one rollout")


# -- check_options on its own ----------------------------------------------------------------


def _factory(*, simulator, count: int, rate: float = 0.5, sizes: list[int] | None = None,
             mode: Literal["fast", "slow"] = "fast", flag: bool = False, extra: dict | None = None,
             anything=None):
    """A factory with every annotation style the validator reads."""


def test_check_options_reads_annotations():
    resolved, problems = check_options(_factory, {"count": 2, "rate": 1, "sizes": [1, 2]},
                                       injected=("simulator",))
    assert problems == []
    assert resolved == {"count": 2, "rate": 1.0, "sizes": [1, 2], "mode": "fast",
                        "flag": False, "extra": None, "anything": None}
    assert isinstance(resolved["rate"], float)
    _, problems = check_options(_factory, {"count": True, "sizes": [1, "x"], "mode": "medium",
                                           "flag": 1, "extra": [], "anything": object()},
                                injected=("simulator",))
    messages = dict(problems)
    assert messages[("count",)].endswith("must be an integer, got a boolean True")
    assert "must be a list of integer or null" in messages[("sizes",)]
    assert "must be one of 'fast', 'slow'" in messages[("mode",)]
    assert "must be true or false" in messages[("flag",)]
    assert "must be a mapping or null" in messages[("extra",)]
    assert ("anything",) not in messages


def test_check_options_with_var_keywords_accepts_any_name():
    def factory(*, a: int = 1, **rest):
        """Takes anything."""

    resolved, problems = check_options(factory, {"b": "x"})
    assert problems == [] and resolved == {"b": "x", "a": 1}


# -- phase two (building) --------------------------------------------------------------------


def test_unknown_design_parameter_lists_the_simulators(registry):
    text = BASE.replace("  stiffness: {init", "  stifness: {init")
    errors = errors_of(text, registry, build=True)
    assert errors == ["design.stifness (line 4): unknown design parameter 'stifness' of "
                      "simulator 'spring'; its parameters: mass [], stiffness [], damping []"]


def test_wrong_shape_is_a_design_error_with_line(registry):
    text = BASE.replace("{init: 4.0, lower: 0.5, upper: 20.0}", "{init: [1.0, 2.0]}")
    config = validate(text, registry)
    with pytest.raises(DesignConfigError) as info:
        build_experiment(config, registry)
    assert isinstance(info.value, DesignError)
    assert str(info.value) == ("exp.yaml: design.stiffness.init (line 4): a value of shape (2,) "
                               "does not fit parameter 'stiffness' of shape (); give a scalar "
                               "or a nested list of that shape")


def test_a_ragged_nested_list_is_a_design_error_with_line(registry):
    text = BASE.replace("{init: 4.0, lower: 0.5, upper: 20.0}", "{init: [[1.0, 2.0], [3.0]]}")
    with pytest.raises(DesignConfigError) as info:
        build_experiment(validate(text, registry), registry)
    assert str(info.value) == ("exp.yaml: design.stiffness.init (line 4): a value of ragged "
                               "shape does not fit parameter 'stiffness' of shape (); give a "
                               "scalar or a nested list of that shape")


def test_init_outside_bounds_and_nan_controller_weights_are_design_errors(registry):
    text = BASE.replace("init: 4.0", "init: 40.0")
    with pytest.raises(DesignConfigError, match=r"design.stiffness.init \(line 4\): init 40 "
                                                r"lies outside \[lower, upper\] = \[0.5, 20\]"):
        build_experiment(validate(text, registry), registry)
    text = BASE.replace("name: open_loop", "name: open_loop\n  options: {initial: .nan}")
    (error,) = errors_of(text, registry)  # validation refuses the NaN before any build
    assert error.startswith("controller.options.initial (line 7): option 'initial' of "
                            "controller 'open_loop' must be finite (no NaN or inf), got nan")
    config = validate(text.replace(".nan", "0.0"), registry)
    config.data["controller"]["options"]["initial"] = np.nan  # as a Python caller may pass
    with pytest.raises(DesignConfigError, match=r"controller.options \(line 7\): parameter "
                                                "'table': default must be finite"):
        build_experiment(config, registry)


def test_unstable_time_step_points_at_run_dt(registry):
    errors = errors_of(BASE.replace("dt: 0.01", "dt: 1.5"), registry, build=True)
    assert errors == ["run.dt (line 15): dt = 1.5 s is unstable for the spring; the largest "
                      "stable dt is 1 s"]


def test_factory_errors_are_reported_at_their_options(registry):
    text = BASE.replace("name: test_gd", "name: test_gd\n  options: {learning_rate: -1.0}")
    errors = errors_of(text, registry, build=True)
    assert errors == ["optimizer.options (line 12): learning_rate must be positive, got -1.0"]


def test_mismatched_controller_and_observer_sizes(registry):
    text = BASE.replace("name: open_loop", "name: pd") + \
        "observer:\n  name: state_fields\n  options: {fields: [q]}\n"
    (error,) = errors_of(text, registry, build=True)
    assert error.startswith("controller.options (line 5): the PD controller needs observations")


def test_build_wires_the_experiment(registry):
    with build_experiment(validate(BASE, registry), registry) as experiment:
        problem = experiment.problem
        assert [p.name for p in problem.space] == ["design.stiffness", "controller.table"]
        assert problem.size == 1 + 5
        assert experiment.controller.control_steps == 5
        assert experiment.iterations == 3 and experiment.executor is None
        check_initial_design(problem)
        assert problem.split(problem.x0())[0]["stiffness"] == 4.0
        evaluation = problem.evaluate(problem.x0())
        assert np.isfinite(evaluation.loss) and evaluation.grad.shape == (6,)


class _FolderSpringPlugin:
    """A simulator factory that takes ``base_dir`` and keeps what it was given."""

    CODESIGN_API = (1, 1)
    seen: list = []

    @staticmethod
    def make(*, base_dir: Path, q0: float = 1.0):
        _FolderSpringPlugin.seen.append(base_dir)
        return fx.make_spring(q0=q0)

    @staticmethod
    @hookimpl
    def codesign_register_simulators(register):
        register("folder_spring", _FolderSpringPlugin.make)


def test_a_simulator_factory_receives_the_experiment_folder_as_base_dir(tmp_path):
    manager = fx.plugin_manager()
    manager.register(_FolderSpringPlugin, name="folder")
    registry = get_registry(manager)
    path = tmp_path / "exp.yaml"
    path.write_text(BASE.replace("name: spring", "name: folder_spring"))
    with build_experiment(validate_config(load_config(path), registry), registry):
        assert _FolderSpringPlugin.seen == [tmp_path]
    path.write_text(BASE.replace("name: spring", "name: folder_spring\n  options: {base_dir: x}"))
    with pytest.raises(ConfigError, match="'base_dir' is set by the run"):
        validate_config(load_config(path), registry)


def test_nothing_to_optimize_is_refused(registry):
    text = BASE.replace("design:\n  stiffness: {init: 4.0, lower: 0.5, upper: 20.0}\n", "") \
        .replace("name: open_loop", "name: open_loop\n  optimize: false")
    (error,) = errors_of(text, registry, build=True)
    assert error == ("design: nothing to optimize: list design parameters under "
                     "design, set controller.optimize: true, or only simulate with "
                     "optimizer: {name: none}")


class _SimulatorAwareController:
    """A controller factory that takes ``simulator`` and keeps what it was given."""

    CODESIGN_API = (1, 1)
    seen: list = []

    @staticmethod
    def make(*, simulator, observation_size: int, action_size: int, control_steps: int,
             gain: float = 0.0):
        _SimulatorAwareController.seen.append(simulator)
        return OpenLoopController(observation_size=observation_size, action_size=action_size,
                                  control_steps=control_steps, initial=gain)

    @staticmethod
    @hookimpl
    def codesign_register_controllers(register):
        register("aware", _SimulatorAwareController.make)


def test_only_simulating_runs_once_and_a_controller_may_take_the_simulator(tmp_path):
    manager = fx.plugin_manager()
    manager.register(_SimulatorAwareController, name="aware")
    registry = get_registry(manager)
    text = BASE.replace("design:\n  stiffness: {init: 4.0, lower: 0.5, upper: 20.0}\n", "") \
        .replace("name: open_loop", "name: aware\n  optimize: false\n  options: {gain: 0.5}") \
        .replace("name: test_gd", "name: none")
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    summary = run_experiment(path, registry, out=tmp_path / "run", progress=False)
    assert (summary["iterations"], summary["evaluations"]) == (0, 1)
    assert summary["final_loss"] == summary["initial_loss"] and summary["design"] == {}
    assert len(_SimulatorAwareController.seen) == 1
    assert _SimulatorAwareController.seen[0].action_size == 1
    with pytest.raises(ConfigError, match="'simulator' is set by the run"):
        validate(text.replace("{gain: 0.5}", "{gain: 0.5, simulator: 1}"), registry)


def test_executor_mapping_form_is_checked_against_the_kinds_factory(registry):
    text = BASE + "  executor: {kind: dask, address: 'tcp://10.0.0.5:8786', workers: 4}\n"
    assert validate(text, registry).data["run"]["executor"] == {
        "kind": "dask", "address": "tcp://10.0.0.5:8786", "workers": 4,
        "connect_timeout_s": 5.0}
    assert validate(BASE + "  executor: {kind: process}\n  workers: 2\n",
                    registry).data["run"]["executor"] == {"kind": "process", "workers": 2}
    (wrong_kind,) = errors_of(BASE + "  executor: {kind: process, address: x}\n", registry)
    assert wrong_kind.startswith("run.executor.address (line 16): unknown option 'address' "
                                 "for executor 'process'; accepted: workers")
    (no_kind,) = errors_of(BASE + "  executor: {address: x}\n", registry)
    assert no_kind == ("run.executor (line 16): missing required key 'kind' in run.executor; "
                       "kinds: inline, process, dask")
    (typo,) = errors_of(BASE + "  executor: dsak\n", registry)
    assert typo.startswith("run.executor (line 16): unknown executor 'dsak' (did you mean "
                           "'dask'?); available: inline, process, dask")
    (twice,) = errors_of(BASE + "  executor: {kind: dask, workers: 2}\n  workers: 2\n",
                         registry)
    assert twice.startswith("run.workers (line 17): workers is set both here and in "
                            "run.executor")
    (too_few,) = errors_of(BASE + "  executor: {kind: dask, workers: 0}\n", registry)
    assert too_few.startswith("run.executor.workers (line 16): option 'workers' of executor "
                              "'dask'")


def test_optimizer_starts_is_a_positive_count(registry):
    assert validate(BASE, registry).data["optimizer"]["starts"] == 1
    text = BASE.replace("  iterations: 3\n", "  iterations: 3\n  starts: 4\n")
    assert build_experiment(validate(text, registry), registry).starts == 4
    (error,) = errors_of(text.replace("starts: 4", "starts: 0"), registry)
    assert error == "optimizer.starts (line 13): must be at least 1, got 0"


def test_process_executor_is_built_and_shut_down(registry):
    text = BASE + "  executor: process\n  workers: 2\n"
    experiment = build_experiment(validate(text, registry), registry)
    assert experiment.problem.executor is experiment.executor is not None
    assert experiment.executor._max_workers == 2
    experiment.close()
    assert experiment.executor is None


# -- hostile files: limits, aliases, merge keys, bounded messages -----------------------------


def refusal(text: str, **kwargs) -> str:
    """The one problem :func:`parse_config` finds in ``text``, as printed."""
    with pytest.raises(ConfigError) as info:
        parse_config(textwrap.dedent(text), **kwargs)
    (issue,) = info.value.errors
    return str(issue)


def test_an_alias_bomb_is_refused_at_its_line_naming_the_limit():
    levels = [f'  l0: &l0 [{", ".join(["lol"] * 9)}]']
    levels += [f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 10)]
    text = BASE + "quick:\n" + "\n".join(levels) + "\n"  # 9**10 leaves in 1.4 KB
    assert len(text) < 1500
    message = refusal(text)
    assert message.startswith("quick.l5[0] (line 22): this alias (*l4, 66430 values) expands "
                              f"the document past {YAML_MAX_NODES} values, the limit")


def test_the_node_limit_counts_literal_values_and_values_reached_through_aliases():
    # root + a + its list of 999 + b + its list of 98 aliases (1000 each) + c + its list
    def document(padding: int) -> str:
        return (f"a: &x [{', '.join(['1'] * 999)}]\nb: [{', '.join(['*x'] * 98)}]\n"
                f"c: [{', '.join(['0'] * padding)}]\n")

    assert 5 + 999 + 98 * 1000 + 2 + 994 == YAML_MAX_NODES
    assert len(parse_config(document(994)).tree["b"]) == 98
    assert refusal(document(995)).startswith("c[994] (line 3): the document holds more than "
                                             f"{YAML_MAX_NODES} values")


def test_deep_nesting_is_refused_at_its_path_and_line():
    deepest = parse_config("a: " + "[" * (YAML_MAX_DEPTH - 1) + "]" * (YAML_MAX_DEPTH - 1)).tree
    for _ in range(YAML_MAX_DEPTH - 1):  # the top-level mapping is the first level
        deepest = deepest["a"] if isinstance(deepest, dict) else deepest[0]
    assert deepest == []
    text = "a:\n  b: " + "[" * 5000 + "]" * 5000 + "\n"  # a RecursionError before
    message = refusal(text)
    assert message.startswith("a.b[0][0][0]")
    assert message.endswith(f"(line 2): the document nests deeper than {YAML_MAX_DEPTH} levels "
                            "(the limit on nested mappings and lists); flatten it")


def test_integers_beyond_64_bits_and_unreadable_values_are_refused_at_their_path(registry):
    huge = "1" + "0" * 400  # an OverflowError before
    message = refusal(BASE.replace("dt: 0.01", f"dt: {huge}"))
    assert message.startswith("run.dt (line 15): the integer '1000")
    assert message.endswith(f"… (a string of 401 characters) is beyond the limit of 64 bits "
                            f"(magnitude below {YAML_MAX_INTEGER}); no count or seed needs it")
    assert refusal("a:\n  b: !!float abc\n") == ("a.b (line 2): cannot read this value as "
                                                 "float: could not convert string to float: "
                                                 "'abc'")
    assert refusal("a: [1, !!binary aGk=]\n").startswith("a[1] (line 1): the YAML type binary "
                                                         "is not supported")
    assert parse_config("a: 2001-13-45\nb: 2001-12-14\n").tree == {"a": "2001-13-45",
                                                                    "b": "2001-12-14"}
    assert refusal("a: &x {b: [*x]}\n").startswith("a.b[0] (line 1): alias *x refers to its "
                                                   "own anchor")


def test_merge_keys_with_overrides_work_and_duplicate_keys_are_still_refused(registry):
    text = BASE.replace("run:\n  steps: 5\n  dt: 0.01\n", "run: &run\n  steps: 5\n  dt: 0.01\n")
    config = validate(text + "quick:\n  run: {<<: *run, steps: 2}\n", registry, quick=True)
    assert config.data["run"]["steps"] == 2 and config.data["run"]["dt"] == 0.01
    raw = parse_config("a: &a {x: 1, y: 2}\nb: &b {y: 3, z: 4}\n"
                       "c:\n  <<: [*a, *b]\n  z: 5\n")
    assert raw.tree["c"] == {"x": 1, "y": 2, "z": 5}  # earlier bases win, explicit keys last
    assert raw.tree["c"].lines == {"x": 1, "y": 1, "z": 5}  # merged keys: their base's line
    assert refusal("c:\n  x: 1\n  y: 2\n  x: 3\n") == ("c.x (line 4): duplicate key 'x' "
                                                       "(first on line 2); keep one of them")
    assert refusal("a: &a {x: 1}\nc:\n  <<: *a\n  <<: *a\n").startswith(
        "c.<< (line 4): duplicate merge key << (first on line 3)")
    assert refusal("c: {<<: 3}\n").startswith("c.<< (line 1): a merge key << takes a mapping")


def test_errors_inside_quick_carry_the_quick_prefix_in_both_phases(registry):
    text = BASE + "quick:\n  run: {steps: 1e12}\n  design: {stiffness: {init: 40.0}}\n"
    (error,) = errors_of(text, registry)
    assert error == ("quick.run.steps (line 17): must be at most 1000000 (codesign's limit), "
                     "got 1000000000000.0")
    text = BASE + "quick:\n  design: {stiffness: {init: 40.0}}\n"
    (error,) = errors_of(text, registry, quick=True, build=True)
    assert error.startswith("quick.design.stiffness.init (line 17): init 40 lies outside")


def test_a_design_init_is_reported_at_its_own_key(registry):
    text = BASE.replace("  stiffness: {init: 4.0, lower: 0.5, upper: 20.0}\n",
                        "  stiffness: {init: 4.0}\n  mass:\n    init: -1.0\n")
    (error,) = errors_of(text, registry, build=True)
    assert error == ("design.mass.init (line 6): init -1 lies outside [lower, upper] = "
                     "[0.1, 10]; move init inside the bounds")
    (error,) = errors_of(BASE.replace("init: 4.0, lower: 0.5", "lower: 5.0"), registry,
                         build=True)
    assert error.startswith("design.stiffness.lower (line 4): the default init 4 lies outside "
                            "[lower, upper] = [5, 20]")


@pytest.mark.parametrize("old, new, expected", [
    ("steps: 5", "steps: 1e12", "run.steps (line 14): must be at most 1000000 (codesign's "
                                "limit), got 1000000000000.0"),
    ("steps: 5", "steps: 1000000000000", "run.steps (line 14): must be at most 1000000 "
                                         "(codesign's limit), got 1000000000000"),
    ("dt: 0.01", "dt: 1.0e+308", "run.dt (line 15): must be at most 3600.0 (codesign's limit), "
                                 "got 1e+308"),
    ("dt: 0.01", "dt: .inf", "run.dt (line 15): must be a finite number, got inf"),
    ("dt: 0.01", "dt: .nan", "run.dt (line 15): must be a finite number, got nan"),
    ("dt: 0.01", "dt: 0", "run.dt (line 15): must be positive, got 0"),
])
def test_run_sizes_and_time_steps_are_finite_positive_and_within_limits(registry, old, new,
                                                                        expected):
    assert errors_of(BASE.replace(old, new), registry) == [expected]


def test_video_worker_seed_iteration_and_batch_sizes_state_their_limits(registry):
    text = BASE.replace("  dt: 0.01\n", "  dt: 0.01\n  substeps: 100000\n  seed: -1\n"
                        "  executor: process\n  workers: 100000\n"
                        "  video: {width: 100000, height: 8, fps: 1.0e+9, every: 0}\n")
    errors = errors_of(text.replace("iterations: 3", "iterations: 1000000000"), registry)
    assert errors == [
        "optimizer.iterations (line 12): must be at most 1000000 (codesign's limit), got "
        "1000000000",
        "run.substeps (line 16): must be at most 10000 (codesign's limit), got 100000",
        "run.seed (line 17): must be at least 0, got -1",
        "run.workers (line 19): must be at most 1024 (codesign's limit), got 100000",
        "run.video.fps (line 20): must be at most 1000 (codesign's limit), got 1000000000.0",
        "run.video.width (line 20): must be at most 8192 (codesign's limit), got 100000",
        "run.video.height (line 20): must be at least 16, got 8",
        "run.video.every (line 20): must be at least 1, got 0",
    ]


@pytest.mark.parametrize("options, expected", [
    ("{lower: .nan}", "option 'lower' of controller 'open_loop' must be finite or -inf (its "
                      "default: no bound), got nan"),
    ("{upper: -.inf}", "option 'upper' of controller 'open_loop' must be finite or inf (its "
                       "default: no bound), got -inf"),
    ("{initial: .inf}", "option 'initial' of controller 'open_loop' must be finite (no NaN or "
                        "inf), got inf"),
])
def test_non_finite_controller_options_are_refused(registry, options, expected):
    text = BASE.replace("name: open_loop", f"name: open_loop\n  options: {options}")
    (error,) = errors_of(text, registry)
    assert error.endswith(expected)
    assert validate(BASE.replace("name: open_loop", "name: open_loop\n  options: "
                                 "{lower: -.inf, upper: .inf}"), registry)


def test_nan_targets_and_nan_inside_lists_are_refused():
    def factory(*, target: float = 0.0, points: list[float] | None = None, table: dict | None):
        """Takes numbers, lists and a mapping."""

    _, problems = check_options(factory, {"target": float("nan"), "points": [0.0, float("inf")],
                                          "table": {"a": [1.0, float("nan")]}})
    assert [path for path, _ in problems] == [("target",), ("points",), ("table",)]
    assert problems[1][1] == "option 'points' of component must be finite (no NaN or inf), " \
                             "got [0.0, inf]"


def test_a_null_component_name_is_refused(registry):
    (error,) = errors_of(BASE.replace("name: test_gd", "name: null"), registry)
    assert error == "optimizer.name (line 11): must be a string, got null"


def test_echoed_values_are_bounded_with_type_and_size(registry):
    assert bounded_repr([1, "a", {"b": None}]) == "[1, 'a', {'b': None}]"
    assert bounded_repr("x" * 1000) == "'" + "x" * 199 + "… (a string of 1000 characters)"
    bomb = ["lol"]
    for _ in range(30):  # 2**30 leaves, shared: written only as far as shown
        bomb = [bomb, bomb]
    assert bounded_repr(bomb).endswith("… (a list of 2 items)")
    assert len(bounded_repr(bomb)) < MAX_ECHO_CHARS + 30
    values = ", ".join(["a"] * 50_000)
    (error,) = errors_of(BASE.replace("init: 4.0,", f"init: [{values}],"), registry)
    assert error.endswith("… (a list of 50000 items)") and len(error) < 400


def test_unknown_keys_past_a_few_are_reported_together_and_messages_are_capped(registry):
    text = BASE.replace("  dt: 0.01\n", "  dt: 0.01\n" + "".join(f"  k{i}: 1\n"
                                                                  for i in range(100)))
    with pytest.raises(ConfigError) as info:
        validate(text, registry)
    errors = [str(e) for e in info.value.errors]
    assert len(errors) == MAX_UNKNOWN_KEYS_LISTED + 1
    assert errors[0].startswith("run (line 13): 80 more unknown keys: ['k20', 'k21'")
    assert errors[1].startswith("run.k0 (line 16): unknown key 'k0'")
    many = ConfigError([ConfigIssue("a", i, "bad") for i in range(120)])
    assert str(many).endswith(f"  - a (line {MAX_REPORTED_ISSUES - 1}): bad\n  ... and "
                              f"{120 - MAX_REPORTED_ISSUES} more")
    assert str(ConfigIssue("a", 1, "x" * 10_000)).endswith(
        f"… (cut at {MAX_MESSAGE_CHARS} of 10000 characters)")


def test_apply_overrides_names_the_parameter_and_the_key_at_fault():
    space = DesignSpace([Parameter("stiffness", (3,), 4.0, lower=0.0, upper=100.0)])
    with pytest.raises(DesignOverrideError) as info:
        apply_overrides(space, {"stiffness": {"init": [1.0, -2.0, -3.0]}})
    assert (info.value.name, info.value.key) == ("stiffness", "init")
    assert str(info.value) == ("design.stiffness.init: init -2 (entry 1; 2 of 3 entries) lies "
                               "outside [lower, upper] = [0, 100]; move init inside the bounds")
    with pytest.raises(DesignOverrideError, match="lower bound 5 exceeds upper bound 2"):
        apply_overrides(space, {"stiffness": {"lower": 5.0, "upper": 2.0}})
    with pytest.raises(DesignOverrideError, match=r"design.stiffness.scale: scale must be a "):
        apply_overrides(space, {"stiffness": {"scale": -1.0}})


def test_annotated_ranges_bound_population_sizes_and_other_counts(registry):
    text = BASE.replace("name: test_gd", "name: cmaes\n  options: {population_size: 1000000000}")
    (error,) = errors_of(text, registry)
    assert error == ("optimizer.options.population_size (line 12): option 'population_size' of "
                     "optimizer 'cmaes': 1e+09 lies outside [0, 100000], codesign's limit for it")

    def factory(*, sizes: Annotated[list[int], Range(1, 10)], rate: float = 0.5):
        """A factory whose sizes are bounded by their annotation."""

    resolved, problems = check_options(factory, {"sizes": [2, 3]})
    assert problems == [] and resolved == {"sizes": [2, 3], "rate": 0.5}
    _, problems = check_options(factory, {"sizes": [2, 30]})
    assert problems == [(("sizes",), "option 'sizes' of component: 30 lies outside [1, 10], "
                                     "codesign's limit for it")]


def test_an_empty_term_entry_is_reported_not_a_traceback(registry):
    text = BASE.replace("""objective:
  - term: final_position
    options: {target: 0.2}
""", """objective:
  terms:
    - term: final_position
  constraints:
    - terms: [null]
      at_most: 0.5
""")
    (error,) = errors_of(text, registry)
    assert error.startswith("objective.constraints[0].terms[0] (line 11): missing required key "
                            "'term'"), error


class _TimedTermPlugin:
    """A term factory that takes the run's ``dt`` and ``substeps`` and keeps them."""

    CODESIGN_API = (1, 1)
    seen: list = []

    @staticmethod
    def make(*, simulator, dt: float, substeps: int, target: float = 0.0):
        _TimedTermPlugin.seen.append((dt, substeps))
        return fx.FinalPosition(simulator=simulator, target=target)

    @staticmethod
    @hookimpl
    def codesign_register_terms(register):
        register("timed_position", _TimedTermPlugin.make)


def test_a_term_factory_receives_the_runs_dt_and_substeps():
    manager = fx.plugin_manager()
    manager.register(_TimedTermPlugin, name="timed")
    registry = get_registry(manager)
    text = BASE.replace("term: final_position", "term: timed_position") + "  substeps: 3\n"
    with build_experiment(validate(text, registry), registry):
        assert _TimedTermPlugin.seen == [(0.01, 3)]
    text = text.replace("{target: 0.2}", "{target: 0.2, dt: 1.0}")
    (error,) = errors_of(text, registry)
    assert "'dt' is set by the run" in error
