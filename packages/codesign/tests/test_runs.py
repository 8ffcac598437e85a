"""Runs: the run directory's files, atomic outputs, the evaluation journal and resume."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest
from plugin_fixture import fixtures_plugin

from codesign import SimulationError
from codesign.optim.base import Evaluation
from codesign.optimization import EvaluationJournal, JournaledFunction
from codesign.outputs import (
    atomic_write,
    json_safe,
    read_npz,
    write_json,
    write_npz,
    write_video,
)
from codesign.plugins import get_registry
from codesign.run_directory import plugin_table
from codesign.runs import RunError, RunInterrupted, partial_dir, run_experiment

fx = fixtures_plugin()
RUN_FILES = {"config.yaml", "plugins.json", "inputs.json", "environment.json", "history.json",
             "parameters.npz", "loss.png", "summary.json"}


pytestmark = pytest.mark.usefixtures("reset_fake_plugin")


def run(path, out, manager, *, quick=False, resume=False):
    return run_experiment(path, get_registry(manager), out=out, quick=quick, resume=resume,
                          progress=False, plugin_manager=manager, log=lambda message: None)


def write_experiment(tmp_path, text=None, **replacements) -> Path:
    text = text if text is not None else fx.SPRING_YAML.read_text()
    for old, new in replacements.items():
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / "exp.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def assert_same_results(a: Path, b: Path) -> None:
    params_a, params_b = read_npz(a / "parameters.npz"), read_npz(b / "parameters.npz")
    assert params_a.keys() == params_b.keys()
    for name in params_a:
        np.testing.assert_array_equal(params_a[name], params_b[name], err_msg=name)
    history_a = json.loads((a / "history.json").read_text())["iterations"]
    history_b = json.loads((b / "history.json").read_text())["iterations"]
    assert [h["loss"] for h in history_a] == [h["loss"] for h in history_b]
    assert history_a == history_b
    summary_a = json.loads((a / "summary.json").read_text())
    summary_b = json.loads((b / "summary.json").read_text())
    for key in ("final_loss", "initial_loss", "iterations", "evaluations", "design", "files"):
        assert summary_a[key] == summary_b[key], key
    assert (a / "config.yaml").read_text() == (b / "config.yaml").read_text()


def test_a_terms_report_writes_its_files_and_numbers_into_the_run(tmp_path, manager):
    path = write_experiment(tmp_path, **{"term: final_position": "term: reported_position"})
    summary = run(path, tmp_path / "run", manager)
    report = summary["reports"]["reported_position"]
    assert "report.txt" in summary["files"]
    folder, final_q = (tmp_path / "run" / "report.txt").read_text().split()
    assert folder == str(tmp_path) and float(final_q) == report["final_q"]
    assert report["steps"] == 20 and report["initial_stiffness"] == 4.0
    assert report["stiffness"] == summary["design"]["design.stiffness"] != 4.0


def test_a_failing_report_costs_only_itself(tmp_path, manager):
    path = write_experiment(tmp_path, **{"term: final_position": "term: reported_position",
                                         "{target: 0.2}": "{target: 0.2, fail: true}"})
    summary = run(path, tmp_path / "run", manager)
    assert "reports" not in summary and summary["video"] in summary["files"]
    assert any("no report from reported_position: RuntimeError: report broke" in note
               for note in summary["notes"])


def test_full_run_writes_every_file(tmp_path, manager):
    out = tmp_path / "run"
    summary = run(fx.SPRING_YAML, out, manager)
    files = {p.name for p in out.iterdir()}
    video = summary["video"]
    assert video in ("result.mp4", "result.gif")
    assert files == RUN_FILES | {video}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no journal, no temp folder
    assert summary["files"] == sorted(files)
    assert json.loads((out / "summary.json").read_text()) == summary

    assert summary["iterations"] == 12 and summary["evaluations"] == 12
    assert summary["evaluations_from_journal"] == 0
    assert summary["final_loss"] < summary["initial_loss"]
    assert summary["message"] == "iteration limit reached" and summary["converged"] is False
    assert summary["wall_time_s"] >= 0

    history = json.loads((out / "history.json").read_text())["iterations"]
    assert [h["iteration"] for h in history] == list(range(1, 13))
    assert history[0]["loss"] == summary["initial_loss"]
    assert min(h["loss"] for h in history) == summary["final_loss"]
    assert history[0]["parameters"] == {"design.stiffness": 4.0, "design.damping": 0.1}
    assert all(np.isfinite(h["grad_norm"]) and h["controller_weight_norm"] >= 0
               for h in history)

    params = read_npz(out / "parameters.npz")
    assert set(params) == {"design.mass", "design.stiffness", "design.damping",
                           "controller.table", "x"}
    assert params["controller.table"].shape == (20, 1)
    assert params["design.mass"] == 1.0  # fixed parameters are saved too
    assert float(params["design.stiffness"]) == summary["design"]["design.stiffness"]

    assert (out / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    plugins = json.loads((out / "plugins.json").read_text())
    assert {"name": "core", "module": "codesign._core_plugin", "distribution": "codesign",
            "version": plugins[0]["version"]} == plugins[0]
    assert plugins[1]["name"] == "fake"
    config = (out / "config.yaml").read_text()
    assert "learning_rate: 0.5" in config and "quick" not in config


def test_video_frames_come_from_the_render_hook(tmp_path, manager):
    summary = run(fx.SPRING_YAML, tmp_path / "run", manager)
    path = tmp_path / "run" / summary["video"]
    if path.suffix == ".mp4":
        import cv2

        capture = cv2.VideoCapture(str(path))
        frames = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
        ok, frame = capture.read()
        assert ok and frame.shape == (48, 64, 3)
    else:
        from PIL import Image

        frames = Image.open(path).n_frames
    assert frames == 11  # 20 control steps + 1 states, every 2nd


def test_each_frame_gets_the_action_applied_from_its_state():
    from types import SimpleNamespace

    from codesign.run_directory import _frames

    calls = []

    def render(state, design, *, width, height, action=None):
        calls.append((state, None if action is None else float(action[0])))
        return np.zeros((height, width, 3), dtype=np.uint8)

    result = SimpleNamespace(states=["s0", "s1", "s2", "s3"],
                             actions=np.array([[0.1], [0.2], [0.3]]))
    simulator = SimpleNamespace(render=render)
    frames = _frames(simulator, result, {}, {"width": 8, "height": 8, "every": 1})
    assert len(frames) == 4
    assert calls == [("s0", 0.1), ("s1", 0.2), ("s2", 0.3), ("s3", None)]
    calls.clear()
    _frames(simulator, result, {}, {"width": 8, "height": 8, "every": 2})
    assert calls == [("s0", 0.1), ("s2", 0.3)]


def test_a_render_sequence_hook_draws_the_whole_motion_at_once():
    from types import SimpleNamespace

    from codesign.run_directory import _frames

    calls = []

    def render_sequence(states, design, *, width, height, actions):
        calls.append((list(states), [None if a is None else float(a[0]) for a in actions]))
        return [np.full((height, width, 3), k, dtype=np.uint8) for k in range(len(states))]

    def render(state, design, *, width, height, action=None):
        raise AssertionError("render_sequence must be preferred")

    result = SimpleNamespace(states=["s0", "s1", "s2"], actions=np.array([[0.1], [0.2]]))
    simulator = SimpleNamespace(render=render, render_sequence=render_sequence)
    frames = _frames(simulator, result, {}, {"width": 8, "height": 8, "every": 2})
    assert calls == [(["s0", "s2"], [0.1, None])]
    assert [int(frame[0, 0, 0]) for frame in frames] == [0, 1]
    short = SimpleNamespace(render=render, render_sequence=lambda states, *a, **k: [])
    with pytest.raises(ValueError, match="render_sequence returned 0 frames for 2 states"):
        _frames(short, result, {}, {"width": 8, "height": 8, "every": 2})


def test_gif_when_mp4_is_unavailable(tmp_path, manager, monkeypatch):
    import codesign.outputs

    monkeypatch.setattr(codesign.outputs, "_write_mp4", lambda *args: False)
    summary = run(fx.SPRING_YAML, tmp_path / "run", manager, quick=True)
    assert summary["video"] == "result.gif"
    from PIL import Image

    with Image.open(tmp_path / "run" / "result.gif") as gif:
        assert gif.format == "GIF" and gif.size == (64, 48)
    frames = [np.full((8, 10, 3), 40 * i, dtype=np.uint8) for i in range(5)]
    path = write_video(tmp_path / "v", frames, fps=10)
    assert path.name == "v.gif"
    with Image.open(path) as gif:
        assert gif.n_frames == 5 and gif.info["duration"] == 100


def test_simulator_without_render_skips_the_video_with_a_note(tmp_path, manager):
    path = write_experiment(tmp_path, """\
        simulator: {name: linear, options: {size: 2, x0: [1.0, -1.0]}}
        design:
          gain: {init: 1.0}
          x0: {}
        controller: {name: open_loop}
        objective:
          - {term: action_l2, weight: 0.1}
          - {term: parameter_regularizer, options: {names: [x0], reference: {x0: [0.5, 0.5]}}}
        optimizer: {name: test_gd, iterations: 3}
        run: {steps: 4, dt: 0.05}
        """)
    summary = run(path, tmp_path / "run", manager)
    assert summary["video"] is None
    assert "no video: the simulator has no render hook" in summary["notes"]
    assert {p.name for p in (tmp_path / "run").iterdir()} == RUN_FILES
    assert summary["final_loss"] < summary["initial_loss"]


def test_large_design_fields_are_summarized_in_json(tmp_path, manager):
    path = write_experiment(tmp_path, """\
        simulator: {name: linear, options: {size: 70}}
        design:
          x0: {init: 0.5}
          gain: {}
        controller: {name: open_loop, optimize: false}
        objective:
          - {term: parameter_regularizer, options: {names: [x0]}}
        optimizer: {name: test_gd, iterations: 2}
        run: {steps: 2, dt: 0.05}
        """)
    summary = run(path, tmp_path / "run", manager)
    assert summary["design"]["design.gain"] == [1.0]
    stats = summary["design"]["design.x0"]
    assert stats == {"shape": [70], "min": stats["min"], "mean": stats["mean"],
                     "max": stats["max"]} and stats["min"] < 0.5
    history = json.loads((tmp_path / "run" / "history.json").read_text())["iterations"]
    assert history[0]["parameters"]["design.x0"] == {"shape": [70], "min": 0.5, "mean": 0.5,
                                                     "max": 0.5}
    assert "controller_weight_norm" not in history[0]
    params = read_npz(tmp_path / "run" / "parameters.npz")
    assert params["design.x0"].shape == (70,) and params["x"].shape == (71,)


def _bad_shape(self, state, design, *, width, height, action=None):
    return np.zeros((2, 2))


def _crash(self, state, design, *, width, height, action=None):
    raise RuntimeError("no display")


@pytest.mark.parametrize(("render", "note"), [
    (_bad_shape, "no video: render returned shape (2, 2); expected (height, width, 3) = "
                 "(48, 64, 3)"),
    (_crash, "no video: render failed with RuntimeError: no display"),
])
def test_a_broken_render_hook_costs_only_the_video(tmp_path, manager, monkeypatch, render,
                                                   note):
    monkeypatch.setattr(fx.RenderedSpring, "render", render)
    messages = []
    summary = run_experiment(fx.SPRING_YAML, get_registry(manager), out=tmp_path / "run",
                             quick=True, progress=False, log=messages.append)
    assert note in summary["notes"] and messages == [f"warning: {note}"]
    assert summary["video"] is None
    plugins = json.loads((tmp_path / "run" / "plugins.json").read_text())
    assert {"name": "core", "distribution": "codesign",
            "version": plugins[0]["version"]} in plugins  # listed without a plugin manager


def test_existing_run_directory_is_refused(tmp_path, manager):
    (tmp_path / "run").mkdir()
    with pytest.raises(RunError, match="already exists; choose another --out or delete it"):
        run(fx.SPRING_YAML, tmp_path / "run", manager)


def test_stale_journal_needs_resume(tmp_path, manager):
    partial_dir(tmp_path / "run").mkdir()
    with pytest.raises(RunError, match="holds an interrupted run; pass --resume to continue it, "
                                       "or delete that folder"):
        run(fx.SPRING_YAML, tmp_path / "run", manager)


def test_interrupt_keeps_the_journal_and_resume_matches_an_uninterrupted_run(tmp_path, manager):
    run(fx.SPRING_YAML, tmp_path / "reference", manager)
    fx.reset_calls()
    fx.INTERRUPT_AFTER = 5
    out = tmp_path / "run"
    with pytest.raises(RunInterrupted, match="5 evaluation\\(s\\) are journaled .* --resume"):
        run(fx.SPRING_YAML, out, manager)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reference", "run.partial"]
    assert len(list((partial_dir(out) / "evaluations").glob("*.npz"))) == 5
    fx.INTERRUPT_AFTER = 0
    summary = run(fx.SPRING_YAML, out, manager, resume=True)
    assert summary["evaluations_from_journal"] == 5
    assert not partial_dir(out).exists()
    assert_same_results(tmp_path / "reference", out)


@pytest.mark.parametrize("optimizer", ["cmaes", "adam", "lbfgsb"])
def test_resume_matches_for_the_core_optimizers(tmp_path, manager, optimizer):
    path = write_experiment(tmp_path, **{"name: test_gd\n  options: {learning_rate: 0.5}":
                                         f"name: {optimizer}"})
    run(path, tmp_path / "reference", manager, quick=True)
    fx.reset_calls()
    fx.INTERRUPT_AFTER = 3
    with pytest.raises(RunInterrupted):
        run(path, tmp_path / "run", manager, quick=True)
    fx.INTERRUPT_AFTER = 0
    summary = run(path, tmp_path / "run", manager, quick=True, resume=True)
    assert summary["evaluations_from_journal"] >= 3
    assert_same_results(tmp_path / "reference", tmp_path / "run")


def test_resume_refuses_a_changed_experiment(tmp_path, manager):
    fx.INTERRUPT_AFTER = 2
    with pytest.raises(RunInterrupted):
        run(fx.SPRING_YAML, tmp_path / "run", manager)
    fx.INTERRUPT_AFTER = 0
    with pytest.raises(RunError, match="differs from the interrupted run"):
        run(fx.SPRING_YAML, tmp_path / "run", manager, quick=True, resume=True)
    assert partial_dir(tmp_path / "run").exists()  # the journal survives the refusal


def test_resume_without_a_journal_starts_fresh(tmp_path, manager):
    summary = run(fx.SPRING_YAML, tmp_path / "run", manager, quick=True, resume=True)
    assert summary["evaluations_from_journal"] == 0


def test_a_diverging_simulation_leaves_nothing_behind(tmp_path, manager):
    path = write_experiment(tmp_path, **{"{target: 0.2}": "{target: 1.0e+154}",  # loss 2e308
                                         "weight: 1.0": "weight: 2.0"})
    with pytest.raises(SimulationError, match="non-finite objective values"):
        run(path, tmp_path / "run", manager)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp.yaml"]


def test_a_failed_run_removes_the_folders_it_created(tmp_path, manager):
    path = write_experiment(tmp_path, **{"{target: 0.2}": "{target: 1.0e+154}",  # loss 2e308
                                         "weight: 1.0": "weight: 2.0"})
    with pytest.raises(SimulationError, match="non-finite objective values"):
        run(path, tmp_path / "runs" / "spring" / "run", manager)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp.yaml"]
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "keep.txt").write_text("a user's file")
    with pytest.raises(SimulationError):
        run(path, tmp_path / "runs" / "spring" / "run", manager)
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["keep.txt"]


def test_a_folder_left_by_a_kill_while_writing_is_replaced_on_resume(tmp_path, manager):
    fx.INTERRUPT_AFTER = 12  # every evaluation is journaled; the video's rollout is cut
    out = tmp_path / "run"
    with pytest.raises(RunInterrupted, match="12 evaluation"):
        run(fx.SPRING_YAML, out, manager)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.partial"]  # nothing hidden
    output = partial_dir(out) / "output"
    output.mkdir()  # what a SIGKILL during the write leaves (tests/test_cli.py kills one)
    (output / "history.json").write_text("{half")
    (output / ".parameters.x1y2.tmp.npz").write_bytes(b"half")
    fx.INTERRUPT_AFTER = 0
    summary = run(fx.SPRING_YAML, out, manager, resume=True)
    assert summary["evaluations_from_journal"] == 12
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    assert {p.name for p in out.iterdir()} == RUN_FILES | {summary["video"]}
    assert json.loads((out / "history.json").read_text())["iterations"][0]["iteration"] == 1


# -- the journal ------------------------------------------------------------------------------


def test_journal_round_trips_bit_exactly_and_skips_damage(tmp_path):
    journal = EvaluationJournal(tmp_path / "j")
    x = np.array([0.1, 1.0 / 3.0])
    full = Evaluation(loss=1.0 / 7.0, grad=np.array([np.pi, -np.e]),
                      constraints=np.array([0.5]), constraint_jac=np.array([[1e-300, 2.0]]))
    journal.record(x, full)
    journal.record(x + 1, Evaluation(loss=2.0))
    (tmp_path / "j" / ".0000002.tmp.npz").write_bytes(b"half")
    (tmp_path / "j" / "0000005.npz").write_bytes(b"not a zip")
    with pytest.warns(UserWarning, match="ignoring unreadable journal entry"):
        again = EvaluationJournal(tmp_path / "j")
    assert len(again) == 2
    assert not (tmp_path / "j" / ".0000002.tmp.npz").exists()
    loaded = again.get(x.copy(), grad=True)
    assert loaded.loss == full.loss
    np.testing.assert_array_equal(loaded.grad, full.grad)
    np.testing.assert_array_equal(loaded.constraint_jac, full.constraint_jac)
    assert again.get(x + 1, grad=False).grad is None
    assert again.get(x + 1, grad=True) is None  # a gradient request is not answered without one
    again.record(x + 2, Evaluation(loss=3.0))
    assert (tmp_path / "j" / "0000006.npz").exists()  # numbering continues past every file


class _CountingProblem:
    size, lower, upper = 1, np.array([-1.0]), np.array([1.0])
    constraint_lower = constraint_upper = np.zeros(0)

    def __init__(self):
        self.calls = []

    def evaluate(self, x, *, grad=True):
        self.calls.append(float(x[0]))
        return Evaluation(loss=float(x[0]) ** 2, grad=2 * x if grad else None)

    def evaluate_many(self, xs, *, grad=False):
        return [self.evaluate(x, grad=grad) for x in xs]


def test_journaled_function_answers_from_the_journal(tmp_path):
    problem = _CountingProblem()
    function = JournaledFunction(problem, EvaluationJournal(tmp_path))
    assert function.evaluate(np.array([0.5])).loss == 0.25
    assert function.evaluate(np.array([0.5])).loss == 0.25
    batch = function.evaluate_many([np.array([0.5]), np.array([0.25]), np.array([-0.5])])
    assert [e.loss for e in batch] == [0.25, 0.0625, 0.25]
    assert problem.calls == [0.5, 0.25, -0.5]
    # the repeats are answered from the journal but replay nothing: no run was resumed (the
    # summary's "resumed" note counts replays)
    assert function.computed == 3 and function.replayed == 0
    resumed = JournaledFunction(_CountingProblem(), EvaluationJournal(tmp_path))
    assert resumed.evaluate(np.array([0.25]), grad=False).loss == 0.0625
    assert resumed.problem.calls == [] and resumed.replayed == 1


def test_plugin_table_lists_every_plugin(manager):
    rows = plugin_table(manager)
    assert [r["name"] for r in rows] == ["core", "fake"]
    assert rows[0]["distribution"] == "codesign" and rows[1]["distribution"] is None


# -- outputs ----------------------------------------------------------------------------------


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "file.txt"
    target.write_text("old")

    def fail(tmp):
        tmp.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, fail)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["file.txt"]


def test_arrays_are_saved_without_pickle(tmp_path):
    write_npz(tmp_path / "a.npz", {"x": np.arange(3.0), "n": np.int64(4)})
    loaded = read_npz(tmp_path / "a.npz")
    np.testing.assert_array_equal(loaded["x"], [0.0, 1.0, 2.0])
    with pytest.raises(TypeError, match="no pickle"):
        write_npz(tmp_path / "b.npz", {"bad": np.array([{}, 1], dtype=object)})
    assert not (tmp_path / "b.npz").exists()


def test_json_is_strict(tmp_path):
    assert json_safe({"a": np.array([1.0, np.nan]), "b": np.float32(2), "c": (np.inf,)}) == \
        {"a": [1.0, None], "b": 2.0, "c": [None]}
    write_json(tmp_path / "s.json", {"loss": float("nan")})
    assert json.loads((tmp_path / "s.json").read_text()) == {"loss": None}


def test_write_video_refuses_no_frames(tmp_path):
    with pytest.raises(ValueError, match="no frames"):
        write_video(tmp_path / "v", [], fps=10)
