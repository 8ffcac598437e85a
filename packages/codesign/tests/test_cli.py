"""The codesign command: errors without partial run directories, plugins, demo, SIGKILL+resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from plugin_fixture import fixtures_plugin

from codesign.cli import main, parse_executor
from codesign.config import ConfigError
from codesign.hookspecs import hookimpl
from codesign.outputs import read_npz
from codesign.plugins import get_plugin_manager

HERE = Path(__file__).parent
fx = fixtures_plugin()


pytestmark = pytest.mark.usefixtures("reset_fake_plugin")


def codesign(args, manager, capsys):
    code = main([str(a) for a in args], plugin_manager=manager)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


SPRING = fx.SPRING_YAML.read_text()
BAD_EXPERIMENTS = {
    "malformed_yaml": (SPRING.replace("  name: spring\n", "  name: [spring\n"),
                       "line 5: malformed YAML", "fix the syntax at that line"),
    "unknown_plugin": (SPRING.replace("name: spring", "name: mpm"),
                       "simulator.name (line 4): unknown simulator 'mpm'; available: linear, "
                       "spring", ""),
    "unknown_key": (SPRING.replace("  substeps: 2\n", "  substeps: 2\n  sbusteps: 2\n"),
                    "run.sbusteps (line 25): unknown key 'sbusteps'", "allowed here: steps"),
    "wrong_shape": (SPRING.replace("stiffness: {init: 4.0,", "stiffness: {init: [4.0, 5.0],"),
                    "design.stiffness.init (line 7): a value of shape (2,) does not fit "
                    "parameter 'stiffness' of shape ()", ""),
    "nan_parameter": (SPRING.replace("damping: {init: 0.1,", "damping: {init: .nan,"),
                      "design.damping.init (line 8): init must be finite", ""),
    "nan_controller_weights": (SPRING.replace("options: {initial: 0.0}",
                                              "options: {initial: .nan}"),
                               "controller.options.initial (line 11): option 'initial' of "
                               "controller 'open_loop' must be finite (no NaN or inf)", ""),
}


@pytest.mark.parametrize("case", sorted(BAD_EXPERIMENTS))
def test_bad_experiments_fail_clearly_and_leave_no_run_directory(tmp_path, manager, capsys,
                                                                 case):
    text, expected, also = BAD_EXPERIMENTS[case]
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    code, out, err = codesign(["run", path, "--out", tmp_path / "runs" / "out"], manager,
                              capsys)
    assert code == 2
    assert err.startswith(f"codesign: error: {path}: ")
    assert expected in err and also in err
    assert "Traceback" not in err and out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp.yaml"]  # nothing was created
    code, out, err = codesign(["validate", path], manager, capsys)
    assert code == 2 and expected in err and out == ""


def test_diverging_run_fails_clearly_and_leaves_no_run_directory(tmp_path, manager, capsys):
    path = tmp_path / "exp.yaml"
    path.write_text(SPRING.replace("{target: 0.2}", "{target: 1.0e+154}")  # loss 2e308 = inf
                    .replace("weight: 1.0", "weight: 2.0"))
    code, _, err = codesign(["run", path, "--out", tmp_path / "out", "--no-progress"], manager,
                            capsys)
    assert code == 2
    assert err.startswith("codesign: error: the rollout produced non-finite objective values")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp.yaml"]


def test_several_errors_are_listed_together(tmp_path, manager, capsys):
    path = tmp_path / "exp.yaml"
    path.write_text(SPRING.replace("name: spring", "name: mpm").replace("steps: 20", "steps: x"))
    code, _, err = codesign(["validate", path], manager, capsys)
    assert code == 2
    assert "2 problems in the experiment:\n  - simulator.name (line 4)" in err
    assert "\n  - run.steps (line 23): must be an integer" in err


def test_validate_ok(manager, capsys):
    code, out, err = codesign(["validate", fx.SPRING_YAML, "--quick"], manager, capsys)
    assert code == 0 and err == ""
    assert out.startswith(f"OK: {fx.SPRING_YAML}: simulator 'spring', 2 free design "
                          "parameter(s) (stiffness, damping), 12 optimized value(s), optimizer "
                          "'test_gd' for 4 iteration(s)")


def test_validate_contacts_no_scheduler(tmp_path, manager, capsys):
    experiment = tmp_path / "exp.yaml"  # nothing listens on port 9 (discard) of loopback
    experiment.write_text(SPRING.replace(
        "  dt: 0.01\n", "  dt: 0.01\n  executor: {kind: dask, address: 'tcp://127.0.0.1:9'}\n"))
    code, out, err = codesign(["validate", experiment], manager, capsys)
    assert code == 0 and out.startswith(f"OK: {experiment}"), err


def test_run_prints_a_summary_and_a_progress_bar(tmp_path, manager, capsys):
    out_dir = tmp_path / "run"
    code, out, err = codesign(["run", fx.SPRING_YAML, "--out", out_dir, "--quick"], manager,
                              capsys)
    assert code == 0
    assert out.startswith(f"wrote {out_dir}: final loss ")
    assert "4/4" in err and "loss=" in err  # tqdm on stderr
    assert json.loads((out_dir / "summary.json").read_text())["quick"] is True
    code, _, err = codesign(["run", fx.SPRING_YAML, "--out", out_dir], manager, capsys)
    assert code == 2 and "already exists; choose another --out or delete it" in err


def test_debug_shows_the_traceback(tmp_path, manager, capsys):
    path = tmp_path / "exp.yaml"
    path.write_text(SPRING.replace("name: spring", "name: mpm"))
    with pytest.raises(ConfigError):
        main(["--debug", "validate", str(path)], plugin_manager=manager)
    with pytest.raises(ConfigError):
        main(["validate", str(path), "--debug"], plugin_manager=manager)


def test_plugin_warnings_are_one_line(monkeypatch, manager, capsys):
    import warnings

    from codesign import cli as cli_module
    from codesign.plugins import PluginWarning

    def plugins_with_a_broken_one():
        warnings.warn("skipping codesign plugin 'broken': it failed to import", PluginWarning,
                      stacklevel=2)
        return manager

    monkeypatch.setattr(cli_module, "get_plugin_manager", plugins_with_a_broken_one)
    code, out, err = codesign(["plugins"], None, capsys)
    assert code == 0 and "spring" in out
    assert err == "codesign: warning: skipping codesign plugin 'broken': it failed to import\n"


def test_missing_file(tmp_path, manager, capsys):
    code, _, err = codesign(["validate", tmp_path / "nope.yaml"], manager, capsys)
    assert code == 2
    assert err == (f"codesign: error: no such file {str(tmp_path / 'nope.yaml')!r}; check the "
                   "path to the experiment YAML\n")


def test_plugins_lists_the_cores_components(capsys):
    code, out, _ = codesign(["plugins"], get_plugin_manager(load_entry_points=False), capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["KIND", "NAME", "PLUGIN", "VERSION", "DISTRIBUTION",
                                "DESCRIPTION"]
    rows = {tuple(line.split()[:2]): line.split()[2:5] for line in lines[1:] if line.strip()}
    from codesign import __version__

    for component in [("controller", "open_loop"), ("controller", "mlp"),
                      ("controller", "pd"), ("controller", "sinusoid"),
                      ("observer", "none"), ("observer", "state_fields"),
                      ("term", "action_l2"), ("term", "parameter_regularizer"),
                      ("optimizer", "adam"), ("optimizer", "cmaes"),
                      ("executor", "inline"), ("executor", "process"), ("executor", "dask")]:
        assert rows[component] == ["core", __version__, "codesign"], component
    assert "0 simulators" in lines[-1]


def test_executor_option_is_a_kind_or_kind_equals_address(tmp_path, manager, capsys):
    assert parse_executor("dask") == "dask"
    assert parse_executor("dask=tcp://10.0.0.5:8786") == {"kind": "dask",
                                                          "address": "tcp://10.0.0.5:8786"}
    with pytest.raises(SystemExit):
        codesign(["run", fx.SPRING_YAML, "--out", tmp_path / "a", "--executor", "dask="],
                 manager, capsys)
    assert "expected KIND or KIND=ADDRESS" in capsys.readouterr().err
    code, _, err = codesign(["run", fx.SPRING_YAML, "--out", tmp_path / "b", "--executor",
                             "threads"], manager, capsys)
    assert code == 2 and "unknown executor kind 'threads'; allowed: inline, process, dask" in err
    assert not (tmp_path / "b").exists()


def test_demo_without_simulators_says_how_to_get_one(capsys):
    code, out, err = codesign(["demo"], get_plugin_manager(load_entry_points=False), capsys)
    assert code == 0 and err == ""
    assert "no simulator plugin is installed" in out
    assert "pip install ./packages/sim_mpm" in out and "uv sync --all-packages" in out


class _SimulatorOnlyPlugin:
    CODESIGN_API = (1, 1)

    @staticmethod
    @hookimpl
    def codesign_register_simulators(register):
        register("spring", fx.make_spring)


def test_demo_without_a_default_example_says_so(capsys):
    manager = get_plugin_manager(load_entry_points=False)
    manager.register(_SimulatorOnlyPlugin, name="only")
    code, out, _ = codesign(["demo"], manager, capsys)
    assert code == 0
    assert "that registers a default example (installed simulators: spring)" in out
    assert "pip install" not in out  # the simulator is installed; it has no demo


def test_demo_of_a_simulator_without_a_default_example_says_so(capsys):
    manager = get_plugin_manager(load_entry_points=False)
    manager.register(_SimulatorOnlyPlugin, name="only")
    code, out, _ = codesign(["demo", "spring"], manager, capsys)
    assert code == 0
    assert out.startswith("codesign demo: the plugin of simulator 'spring' registers no "
                          "default example (installed simulators: spring)")
    code, _, err = codesign(["demo", "pendulum"], manager, capsys)
    assert code == 2 and "unknown simulator 'pendulum'; available: spring" in err


def test_demo_runs_the_default_example(tmp_path, manager, capsys):
    code, out, _ = codesign(["demo", "--quick", "--out", tmp_path / "demo", "--no-progress"],
                            manager, capsys)
    assert code == 0
    assert out.startswith("codesign demo: spring_demo (spring co-design (test)) from plugin "
                          "'fake'")
    assert (tmp_path / "demo" / "summary.json").exists()


def test_demo_runs_the_default_example_of_the_named_simulator(tmp_path, manager, capsys):
    code, out, _ = codesign(["demo", "spring", "--quick", "--out", tmp_path / "demo",
                             "--no-progress"], manager, capsys)
    assert code == 0
    assert out.startswith("codesign demo: spring_demo (spring co-design (test)) from plugin "
                          "'fake'")
    assert (tmp_path / "demo" / "summary.json").exists()


def test_module_entry_point():
    result = subprocess.run([sys.executable, "-m", "codesign.cli", "--version"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.startswith("codesign ")


def _killable(args, *, hang_after=0):
    return subprocess.Popen(
        [sys.executable, str(HERE / "run_killable.py"), str(hang_after), *map(str, args)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_sigkill_then_resume_equals_an_uninterrupted_run(tmp_path, manager, capsys):
    reference = tmp_path / "reference"
    assert codesign(["run", fx.SPRING_YAML, "--out", reference, "--no-progress"], manager,
                    capsys)[0] == 0

    out = tmp_path / "run"
    journal = tmp_path / "run.partial" / "evaluations"
    process = _killable(["run", fx.SPRING_YAML, "--out", out, "--no-progress"], hang_after=5)
    deadline = time.monotonic() + 120
    try:
        while len(list(journal.glob("0*.npz"))) < 5:
            if process.poll() is not None:
                pytest.fail(f"the run ended before it was killed: {process.communicate()}")
            assert time.monotonic() < deadline, "the journal never reached 5 evaluations"
            time.sleep(0.02)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.communicate(timeout=60)
    assert process.returncode == -signal.SIGKILL
    assert not out.exists()
    assert len(list(journal.glob("*.npz"))) == 5

    code, _, err = codesign(["run", fx.SPRING_YAML, "--out", out, "--no-progress"], manager,
                            capsys)
    assert code == 2 and "pass --resume to continue it" in err

    resumed = _killable(["run", fx.SPRING_YAML, "--out", out, "--resume", "--no-progress"])
    stdout, stderr = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, stderr
    assert "resuming: 5 evaluation(s) in the journal" in stderr
    assert "resumed: 5 evaluation(s) answered from the journal" in stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reference", "run"]

    reference_parameters, parameters = (read_npz(reference / "parameters.npz"),
                                        read_npz(out / "parameters.npz"))
    assert reference_parameters.keys() == parameters.keys()
    for name in parameters:
        np.testing.assert_array_equal(parameters[name], reference_parameters[name])
    history = json.loads((out / "history.json").read_text())["iterations"]
    reference_history = json.loads((reference / "history.json").read_text())["iterations"]
    assert [h["loss"] for h in history] == [h["loss"] for h in reference_history]
    assert history == reference_history
    summary = json.loads((out / "summary.json").read_text())
    reference_summary = json.loads((reference / "summary.json").read_text())
    assert summary["final_loss"] == reference_summary["final_loss"]
    assert summary["evaluations"] == reference_summary["evaluations"] == 12


def test_sigterm_keeps_the_journal_and_says_how_to_resume(tmp_path, manager, capsys):
    out = tmp_path / "run"
    journal = tmp_path / "run.partial" / "evaluations"
    process = _killable(["run", fx.SPRING_YAML, "--out", out, "--no-progress"], hang_after=3)
    deadline = time.monotonic() + 120
    try:
        while len(list(journal.glob("0*.npz"))) < 3:
            if process.poll() is not None:
                pytest.fail(f"the run ended before it was stopped: {process.communicate()}")
            assert time.monotonic() < deadline, "the journal never reached 3 evaluations"
            time.sleep(0.02)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130
    assert "codesign: interrupted; 3 evaluation(s) are journaled" in stderr
    assert "rerun the same command with --resume to continue" in stderr
    assert "Traceback" not in stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.partial"]
    code, stdout, _ = codesign(["run", fx.SPRING_YAML, "--out", out, "--resume",
                                "--no-progress"], manager, capsys)
    assert code == 0 and "resumed: 3 evaluation(s) answered from the journal" in stdout


def test_a_run_killed_while_writing_leaves_only_its_journal(tmp_path, manager, capsys):
    out = tmp_path / "run"
    # 12 evaluations, then the 13th rollout draws the video: the files before it are written
    process = _killable(["run", fx.SPRING_YAML, "--out", out, "--no-progress"], hang_after=12)
    deadline = time.monotonic() + 120
    try:
        while not list(tmp_path.glob("**/loss.png")):  # wherever the run writes it
            if process.poll() is not None:
                pytest.fail(f"the run ended before it was killed: {process.communicate()}")
            assert time.monotonic() < deadline, "the run never started writing"
            time.sleep(0.02)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.communicate(timeout=60)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.partial"]  # nothing hidden
    code, stdout, _ = codesign(["run", fx.SPRING_YAML, "--out", out, "--resume",
                                "--no-progress"], manager, capsys)
    assert code == 0 and "resumed: 12 evaluation(s) answered from the journal" in stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    summary = json.loads((out / "summary.json").read_text())
    assert sorted(p.name for p in out.iterdir()) == summary["files"]
    assert summary["evaluations"] == 12 and summary["video"] is not None


def test_progress_in_a_log_is_whole_lines(tmp_path, manager, capsys):
    code, _, err = codesign(["run", fx.SPRING_YAML, "--out", tmp_path / "run", "--quick"],
                            manager, capsys)
    assert code == 0
    assert "\r" not in err  # stderr is captured here, as in a log: no bar redrawn in place
    assert err.startswith("fixtures_spring: 4/4 it, loss=") and err.count("\n") == 1


def test_the_run_directory_records_the_command_line(tmp_path, manager, capsys):
    out = tmp_path / "run"
    args = ["run", str(fx.SPRING_YAML), "--out", str(out), "--quick", "--no-progress"]
    assert codesign(args, manager, capsys)[0] == 0
    environment = json.loads((out / "environment.json").read_text())
    assert environment["command"] == ["codesign", *args]
    assert environment["command_line"].startswith("codesign run ")
    assert environment["working_directory"] == os.getcwd()
