"""Experiment YAML: safe loading with lines, validation in two phases, options vs signatures."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from typing import Literal

import numpy as np
import pytest

from codesign import DesignError
from codesign.config import (
    ConfigError,
    DesignConfigError,
    deep_merge,
    format_path,
    load_config,
    parse_config,
)
from codesign.experiment import build_experiment, check_initial_design
from codesign.hookspecs import hookimpl
from codesign.options import check_options
from codesign.plugins import get_registry
from codesign.validation import validate_config


def _fixtures():
    name = "_codesign_tests_fixtures_plugin"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, Path(__file__).with_name("fixtures_plugin.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


fx = _fixtures()

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
                     "design or set controller.optimize: true")


def test_process_executor_is_built_and_shut_down(registry):
    text = BASE + "  executor: process\n  workers: 2\n"
    experiment = build_experiment(validate(text, registry), registry)
    assert experiment.problem.executor is experiment.executor is not None
    assert experiment.executor._max_workers == 2
    experiment.close()
    assert experiment.executor is None
