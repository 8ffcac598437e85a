"""Runs of several stages (codesign.stages): each stage optimized from the last one's result,
the stage keys checked, the totals and every stage's result in the run directory."""

from __future__ import annotations

import json
import textwrap

import pytest
from plugin_fixture import fixtures_plugin

from codesign.config import ConfigError, load_config
from codesign.plugins import get_registry
from codesign.runs import RunInterrupted, run_experiment
from codesign.validation import validate_config

fx = fixtures_plugin()
pytestmark = pytest.mark.usefixtures("reset_fake_plugin")

STAGES = """
stages:
  - set: {simulator.options.q0: 0.5, optimizer.iterations: 40}
  - set: {simulator.options.q0: 1.0, optimizer.iterations: 3}
"""


def experiment(tmp_path, stages: str = STAGES, optimizer: str = "name: lbfgsb"):
    """The test plugin's spring experiment (L-BFGS-B) with ``stages`` appended."""
    text = fx.SPRING_YAML.read_text().replace(
        "name: test_gd\n  options: {learning_rate: 0.5}", optimizer)
    path = tmp_path / "exp.yaml"
    path.write_text(text + textwrap.dedent(stages))
    return path


def run(path, out, manager, **options):
    return run_experiment(path, get_registry(manager), out=out, progress=False,
                          plugin_manager=manager, log=lambda message: None, **options)


def test_each_stage_starts_from_the_last_ones_result(tmp_path, manager):
    summary = run(experiment(tmp_path), tmp_path / "run", manager)
    first, second = summary["stages"]
    # stage 0 converges before its budget of 40 iterations, then stage 1 runs
    assert first["converged"] and first["iterations"] < 40
    assert first["set"] == {"simulator.options.q0": 0.5, "optimizer.iterations": 40}
    assert second["iterations"] <= 3
    assert summary["evaluations"] == first["evaluations"] + second["evaluations"]
    assert summary["iterations"] == first["iterations"] + second["iterations"]
    assert summary["final_loss"] == second["final_loss"]
    assert summary["initial_loss"] == first["initial_loss"]
    assert summary["design"] == second["design"]
    # stage 1's start is stage 0's result, not the design section's init (4.0)
    history = json.loads((tmp_path / "run" / "history.json").read_text())
    stage1 = [record for record in history["iterations"] if record["stage"] == 1]
    assert stage1[0]["parameters"]["design.stiffness"] != 4.0
    assert second["initial_loss"] is not None
    assert history["stages"] == summary["stages"]
    assert "stages" in (tmp_path / "run" / "config.yaml").read_text()


def test_a_stage_changes_the_problem_it_optimizes(tmp_path, manager):
    # the same budgets without changing q0: stage 0 ends where stage 1 would start from
    same = experiment(tmp_path, STAGES.replace("q0: 0.5", "q0: 1.0"))
    summary_same = run(same, tmp_path / "same", manager)
    summary = run(experiment(tmp_path), tmp_path / "run", manager)
    assert summary["stages"][0]["final_loss"] != summary_same["stages"][0]["final_loss"]


def test_a_killed_staged_run_resumes_to_the_same_result(tmp_path, manager):
    path = experiment(tmp_path)
    whole = run(path, tmp_path / "whole", manager)
    fx.reset_calls()
    fx.INTERRUPT_AFTER = whole["stages"][0]["evaluations"] + 1  # inside stage 1
    with pytest.raises(RunInterrupted):
        run(path, tmp_path / "run", manager)
    fx.INTERRUPT_AFTER = 0
    resumed = run(path, tmp_path / "run", manager, resume=True)
    for key in ("final_loss", "evaluations", "design"):
        assert resumed[key] == whole[key], key
    assert resumed["evaluations_from_journal"] > whole["stages"][0]["evaluations"]


def errors(tmp_path, manager, stages: str, **options) -> str:
    with pytest.raises(ConfigError) as caught:
        run(experiment(tmp_path, stages, **options), tmp_path / "run", manager)
    assert not (tmp_path / "run").exists()
    return str(caught.value)


@pytest.mark.parametrize("stages, message", [
    ("stages: {set: {optimizer.iterations: 2}}", "stages must be a non-empty list of stages"),
    ("stages: []", "stages must be a non-empty list"),
    ("stages:\n  - {iterations: 2}", "missing required key 'set' in a stage"),
    ("stages:\n  - {set: {}}", "a stage's set must be a non-empty mapping of dotted keys"),
    ("stages:\n  - {set: {optimizer.iterations: 2}, sett: 1}", "unknown key 'sett'"),
    ("stages:\n  - set: {simulatr.options.q0: 0.5}",
     "stages[0].set.simulatr.options.q0 (line 30): 'simulatr.options.q0' does not name a "
     "value of the experiment; a stage sets dotted keys under one of the sections"),
    ("stages:\n  - set: {stages.x: 1}", "'stages.x' does not name a value"),
])
def test_bad_stages_are_refused_naming_the_fix(tmp_path, manager, stages, message):
    assert message in errors(tmp_path, manager, stages)


def test_a_stages_bad_option_is_found_before_anything_runs(tmp_path, manager):
    stages = ("stages:\n  - set: {optimizer.iterations: 2}\n"
              "  - set: {simulator.options.q1: 0.5, optimizer.iterations: 0}\n")
    text = errors(tmp_path, manager, stages)
    assert "stages[1].set.simulator.options.q1 (line 31): unknown option 'q1'" in text
    assert "q0 (a number = 1.0)" in text  # the options it takes
    assert "stages[1].set.optimizer.iterations (line 31)" in text
    assert fx._calls == 0


def test_a_stage_that_frees_other_parameters_is_refused(tmp_path, manager):
    stages = ("stages:\n  - set: {optimizer.iterations: 2}\n"
              "  - set: {run.steps: 5}\n")
    text = errors(tmp_path, manager, stages)
    assert "stages[1].set (line 31): stage 1 optimizes other parameters than stage 0" in text
    assert "not the design section's names, the controller or run.steps" in text
    assert fx._calls == 0


def test_stages_with_several_starts_are_refused(tmp_path, manager):
    text = errors(tmp_path, manager, "stages:\n  - set: {optimizer.starts: 2}")
    assert "stages[0] (line 30): optimizer.starts is 2" in text
    assert "remove optimizer.starts or the stages" in text


def test_each_stage_is_validated_as_its_own_experiment(tmp_path, manager):
    config = validate_config(load_config(experiment(tmp_path)), get_registry(manager))
    assert [c.data["simulator"]["options"]["q0"] for c in config.stages] == [0.5, 1.0]
    assert [c.data["optimizer"]["iterations"] for c in config.stages] == [40, 3]
    assert all("stages" not in c.data for c in config.stages)
    assert config.data["stages"][1] == {"set": {"simulator.options.q0": 1.0,
                                                "optimizer.iterations": 3}}
    single = validate_config(load_config(fx.SPRING_YAML), get_registry(manager))
    assert single.stages == [] and "stages" not in single.data
