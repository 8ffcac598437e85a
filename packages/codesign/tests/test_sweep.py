"""Sweeps: --set parsing, the grid, settings in the experiment, and codesign sweep's run
directories, summary table and plot."""

from __future__ import annotations

import csv
import json

import pytest
from plugin_fixture import fixtures_plugin

from codesign.cli import main
from codesign.config import ConfigError, ConfigIssue, issue_at, load_config, with_settings
from codesign.executors import InlineExecutor
from codesign.hookspecs import hookimpl
from codesign.plugins import get_registry
from codesign.runs import run_experiment
from codesign.sweep import grid, parse_setting, plot_sweep, point_name

fx = fixtures_plugin()
pytestmark = pytest.mark.usefixtures("reset_fake_plugin")


def test_a_setting_is_a_key_and_yaml_values():
    assert parse_setting("optimizer.options.sigma0=0.1,0.3") == (
        "optimizer.options.sigma0", [0.1, 0.3])
    assert parse_setting("a.b=[1, 2],x,true") == ("a.b", [[1, 2], "x", True])
    for bad in ("sigma0", "=1", "a="):
        with pytest.raises(ValueError, match="expected KEY=VALUE"):
            parse_setting(bad)


def test_the_grid_varies_the_first_key_slowest_and_refuses_a_repeated_key():
    assert grid([("a", [1, 2]), ("b", ["x", "y"])]) == [
        {"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "x"}, {"a": 2, "b": "y"}]
    with pytest.raises(ValueError, match="--set names a more than once"):
        grid([("a", [1]), ("a", [2])])
    assert point_name(3, {"optimizer.options.sigma0": 0.1, "run.executor": "dask"}) == \
        '003_sigma0=0.1_executor=-dask-'


def test_settings_land_in_the_experiment_over_the_quick_section():
    raw = with_settings(load_config(fx.SPRING_YAML, quick=True),
                        {"optimizer.iterations": 7, "optimizer.options.learning_rate": 0.2,
                         "run.seed": 3})
    assert raw.tree["optimizer"]["iterations"] == 7 and raw.tree["run"]["seed"] == 3
    assert raw.tree["optimizer"]["options"] == {"learning_rate": 0.2}
    assert raw.tree["run"]["steps"] == 10  # the quick section's, untouched
    with pytest.raises(ConfigError, match="cannot set run.steps.x: run.steps is not a mapping"):
        with_settings(raw, {"run.steps.x": 1})


def test_an_error_at_a_set_key_points_at_the_set_argument_not_the_file_line():
    raw = with_settings(load_config(fx.SPRING_YAML), {"design.stiffness.init": 50.0,
                                                      "run.extra.depth": 1})
    assert issue_at(raw.tree, ("design", "stiffness", "init"), "bad") == \
        ConfigIssue("--set design.stiffness.init", None, "bad")  # the key is in the file
    assert issue_at(raw.tree, ("run", "extra", "depth"), "bad") == \
        ConfigIssue("--set run.extra.depth", None, "bad")  # a mapping the setting created
    assert issue_at(raw.tree, ("run", "extra"), "bad").path == "--set run.extra"
    untouched = issue_at(raw.tree, ("design", "stiffness", "lower"), "bad")
    assert (untouched.path, untouched.line) == ("design.stiffness.lower", 7)
    assert issue_at(raw.tree, ("run",), "bad").line is not None  # run is in the file


@pytest.mark.parametrize("keys", [["a"], ["a", "b"], ["a", "b", "c"]])
def test_the_sweep_plot_draws_a_curve_a_map_or_bars(tmp_path, keys):
    rows = [{"point": i, **{k: v for k, v in zip(keys, p.values(), strict=False)},
             "final_loss": None if i == 1 else float(i + 1)}
            for i, p in enumerate(grid([(k, [1, 2]) for k in keys]))]
    path = plot_sweep(tmp_path / "objective.png", keys, rows)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_codesign_sweep_runs_each_point_and_tabulates_them(tmp_path, capsys):
    manager = fx.plugin_manager()
    out = tmp_path / "sweep"
    args = ["sweep", str(fx.SPRING_YAML), "--quick", "--no-progress", "--out", str(out),
            "--set", "design.stiffness.init=2.0,50.0",
            "--set", "optimizer.options.learning_rate=0.1,0.5"]
    assert main(args, plugin_manager=manager) == 1  # the points at 50 N/m lie out of bounds
    printed = capsys.readouterr()
    assert "wrote" in printed.out
    assert "--set design.stiffness.init: init 50 lies outside" in printed.out
    with (out / "summary.csv").open() as table:
        rows = list(csv.DictReader(table))
    assert [r["point"] for r in rows] == ["0", "1", "2", "3"]
    assert [(r["design.stiffness.init"], r["optimizer.options.learning_rate"]) for r in rows] \
        == [("2.0", "0.1"), ("2.0", "0.5"), ("50.0", "0.1"), ("50.0", "0.5")]
    assert [bool(r["error"]) for r in rows] == [False, False, True, True]
    assert (out / "objective.png").exists()

    experiment = tmp_path / "point1.yaml"
    experiment.write_text(fx.SPRING_YAML.read_text().replace(
        "stiffness: {init: 4.0", "stiffness: {init: 2.0"))
    alone = run_experiment(experiment, get_registry(manager), out=tmp_path / "alone",
                           quick=True, progress=False, plugin_manager=manager,
                           log=lambda message: None)
    assert float(rows[1]["final_loss"]) == alone["final_loss"]
    point = out / rows[1]["run"]
    assert "init: 2.0" in (point / "config.yaml").read_text()
    assert json.loads((point / "summary.json").read_text())["final_loss"] == alone["final_loss"]

    assert main([*args, "--resume"], plugin_manager=manager) == 1
    assert "finished before, kept" in capsys.readouterr().err
    assert main(args, plugin_manager=manager) == 2
    assert "already exists" in capsys.readouterr().err


def test_an_invalid_point_is_refused_before_anything_runs(tmp_path, capsys):
    out = tmp_path / "sweep"
    code = main(["sweep", str(fx.SPRING_YAML), "--out", str(out), "--set",
                 "optimizer.iterations=2,0"], plugin_manager=fx.plugin_manager())
    assert code == 2 and not out.exists()
    assert "at sweep point 1 (001_iterations=0)" in capsys.readouterr().err


class _RecordingExecutor(InlineExecutor):
    """Inline, recording what it was asked to share and to forget, and its shutdown."""

    def __init__(self):
        super().__init__()
        self.shared, self.unshared, self.shutdowns = [], [], 0

    def share(self, obj):
        self.shared.append(id(obj))
        return obj

    def unshare(self, obj):
        self.unshared.append(id(obj))

    def shutdown(self, wait=True, *, cancel_futures=False):
        self.shutdowns += 1
        super().shutdown(wait=wait, cancel_futures=cancel_futures)


class _RecordingExecutors:
    """A plugin registering the executor kind ``recording``; keeps every one it started."""

    def __init__(self):
        self.started: list[_RecordingExecutor] = []

    def make(self, *, workers: int | None = None) -> _RecordingExecutor:
        self.started.append(_RecordingExecutor())
        return self.started[-1]

    @hookimpl
    def codesign_register_executors(self, register):
        register("recording", self.make, description="inline, recording its use (test)")


def test_a_sweep_starts_one_executor_for_all_its_points_and_shuts_it_down_at_the_end(
        tmp_path, capsys):
    manager, executors = fx.plugin_manager(), _RecordingExecutors()
    manager.register(executors, name="recording_executors")
    args = ["sweep", str(fx.SPRING_YAML), "--quick", "--no-progress", "--executor",
            "recording", "--set", "design.stiffness.init=2.0,3.0,4.0",
            "--set", "optimizer.starts=2"]
    assert main([*args, "--out", str(tmp_path / "sweep")], plugin_manager=manager) == 0
    [executor] = executors.started
    assert executor.shutdowns == 1
    # every point shipped its problem (the starts are one batch) and let go of it when done
    assert len(executor.shared) == 3 and executor.unshared == executor.shared

    # points of different run.workers each need their own executor, still one per setting
    more = _RecordingExecutors()
    manager.register(more, name="more_recording_executors")
    manager.unregister(executors)
    assert main(["sweep", str(fx.SPRING_YAML), "--quick", "--no-progress", "--out",
                 str(tmp_path / "workers"), "--set", "run.executor=recording",
                 "--set", "run.workers=1,2", "--set", "design.stiffness.init=2.0,3.0"],
                plugin_manager=manager) == 0
    assert [e.shutdowns for e in more.started] == [1, 1]
