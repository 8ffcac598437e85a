"""What a run records besides its results: the files it read (hashes), the plugin versions,
the environment (libraries, platform, git, command line); and resume refusing changes."""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
from plugin_fixture import fixtures_plugin

from codesign.config import load_config
from codesign.environment import LIBRARIES, git_state, library_versions, run_environment
from codesign.inputs import file_sha256, input_changes, input_files, plugin_changes
from codesign.observers import StateFieldObserver
from codesign.plugins import get_registry
from codesign.recordings import save_recordings, synthetic_recordings
from codesign.runs import RunError, RunInterrupted, partial_dir, run_experiment
from codesign.validation import validate_config

fx = fixtures_plugin()

IDENTIFY_FROM_FILE = """\
simulator: {name: spring, options: {q0: 1.0}}
design:
  stiffness: {init: 3.0, lower: 0.5, upper: 20.0}
identification:
  recordings: {source: file, options: {path: data/spring.npz}}
  measurement: {name: state_fields, options: {fields: [q]}}
optimizer: {name: adam, options: {learning_rate: 0.2}, iterations: 6}
run: {steps: 10, substeps: 2, dt: 0.01, video: {fps: 10, width: 32, height: 24, every: 5}}
"""


pytestmark = pytest.mark.usefixtures("reset_fake_plugin")


def run(path, out, manager, *, resume=False):
    return run_experiment(path, get_registry(manager), out=out, resume=resume, progress=False,
                          plugin_manager=manager, log=lambda message: None)


def save_spring_recordings(path: Path, stiffness: float) -> None:
    spring = fx.make_spring()
    measurement = StateFieldObserver(simulator=spring, fields=["q"])
    data = synthetic_recordings(simulator=spring, measurement=measurement, dt=0.01, substeps=2,
                                base_dir=path.parent, truth={"stiffness": stiffness}, steps=10,
                                count=2)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_recordings(path, data, truth=data.truth)


@pytest.fixture
def identification(tmp_path):
    """An identification experiment reading data/spring.npz beside it."""
    save_spring_recordings(tmp_path / "data" / "spring.npz", 6.0)
    path = tmp_path / "identify.yaml"
    path.write_text(IDENTIFY_FROM_FILE)
    return path


def interrupted(path, out, manager) -> None:
    """Run ``path`` into ``out`` until a few evaluations are journaled, then interrupt it."""
    fx.reset_calls()  # making the recordings simulated the spring too
    # building reads the 2 recordings' initial states; each evaluation simulates both: 3 of
    # them complete before the interrupt
    fx.INTERRUPT_AFTER = 2 + 3 * 2
    with pytest.raises(RunInterrupted):
        run(path, out, manager)
    fx.INTERRUPT_AFTER = 0
    assert partial_dir(out).exists()


# -- input files ------------------------------------------------------------------------------


def config_of(path, manager):
    return validate_config(load_config(path), get_registry(manager))


def test_input_files_are_the_files_the_experiment_names_with_their_hashes(identification,
                                                                          manager):
    data = identification.parent / "data" / "spring.npz"
    files = input_files(config_of(identification, manager))
    assert files == [{"key": "identification.recordings.options.path",
                      "path": "data/spring.npz", "file": str(data.resolve()),
                      "sha256": hashlib.sha256(data.read_bytes()).hexdigest(),
                      "bytes": data.stat().st_size}]


def test_an_asset_dir_option_is_where_relative_names_beside_it_start(tmp_path):
    from codesign.config import ExperimentConfig

    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "body.png").write_bytes(b"png")
    (tmp_path / "scene.yaml").write_text("bodies: []")
    data = {"simulator": {"name": "x", "options": {
        "asset_dir": "assets", "scene": "scene.yaml", "name": "walls",
        "bodies": [{"shape": "image", "path": "body.png"}, {"path": "missing.png"}]}},
        "run": {"note": "x" * 5000 + "\0"}}
    config = ExperimentConfig(data=data, tree={}, source=str(tmp_path / "exp.yaml"))
    files = input_files(config)
    assert [(f["key"], f["path"]) for f in files] == [
        ("simulator.options.scene", "scene.yaml"),
        ("simulator.options.bodies[0].path", "body.png")]
    assert files[1]["sha256"] == file_sha256(tmp_path / "assets" / "body.png")


def test_input_changes_name_the_file_and_both_hashes():
    row = {"key": "a.path", "path": "x.npz", "file": "/d/x.npz", "sha256": "1" * 64,
           "bytes": 10}
    changed = dict(row, sha256="2" * 64, bytes=12)
    other = dict(row, key="b.path", path="y.npz", file="/d/y.npz")
    assert input_changes([row], [row]) == []
    assert input_changes([row], [changed]) == [
        f"a.path: /d/x.npz changed: sha256 {'1' * 16} (10 bytes) -> {'2' * 16} (12 bytes)"]
    assert input_changes([row], [other]) == [
        "a.path: 'x.npz' (/d/x.npz) is no longer read (missing, or the experiment names "
        "another file)",
        "b.path: 'y.npz' (/d/y.npz) is read now but was not by the interrupted run"]


def test_plugin_changes_name_the_plugin_and_both_versions():
    old = [{"name": "mpm", "distribution": "sim_mpm", "version": "0.1.0"},
           {"name": "gone", "distribution": "old", "version": "1"}]
    new = [{"name": "mpm", "distribution": "sim_mpm", "version": "0.2.0"},
           {"name": "fresh", "distribution": None, "version": None}]
    assert plugin_changes(old, old) == []
    assert plugin_changes(old, new) == [
        "plugin 'mpm': sim_mpm 0.1.0 -> sim_mpm 0.2.0",
        "plugin 'gone' (old 1) is no longer installed",
        "plugin 'fresh' (None None) is new"]


# -- resume -----------------------------------------------------------------------------------


def test_resume_refuses_a_changed_recording_file_and_names_it(identification, tmp_path,
                                                              manager):
    out = tmp_path / "run"
    data = tmp_path / "data" / "spring.npz"
    interrupted(identification, out, manager)
    recorded = json.loads((partial_dir(out) / "inputs.json").read_text())
    assert [row["sha256"] for row in recorded] == [file_sha256(data)]
    original = data.read_bytes()
    save_spring_recordings(data, 7.0)
    with pytest.raises(RunError) as info:
        run(identification, out, manager, resume=True)
    message = str(info.value)
    assert f"identification.recordings.options.path: {data.resolve()} changed: sha256 " \
           f"{hashlib.sha256(original).hexdigest()[:16]}" in message
    assert f"-> {file_sha256(data)[:16]}" in message
    assert "restore the files and plugin versions it recorded" in message
    assert f"or delete {str(partial_dir(out))!r} to start over" in message
    assert partial_dir(out).exists()  # the journal survives the refusal
    data.write_bytes(original)
    summary = run(identification, out, manager, resume=True)
    assert summary["evaluations_from_journal"] == 3
    assert json.loads((out / "inputs.json").read_text()) == recorded


def test_resume_refuses_a_missing_recording_file(identification, tmp_path, manager):
    out = tmp_path / "run"
    interrupted(identification, out, manager)
    (tmp_path / "data" / "spring.npz").rename(tmp_path / "data" / "moved.npz")
    with pytest.raises(RunError, match="'data/spring.npz' .* is no longer read"):
        run(identification, out, manager, resume=True)


def test_resume_refuses_changed_plugin_versions(identification, tmp_path, manager):
    out = tmp_path / "run"
    interrupted(identification, out, manager)
    table = partial_dir(out) / "plugins.json"
    plugins = json.loads(table.read_text())
    assert plugins[0]["name"] == "core"
    current = plugins[0]["version"]
    plugins[0]["version"] = "0.0.1"  # as if the run began under another codesign
    table.write_text(json.dumps(plugins))
    with pytest.raises(RunError, match=f"plugin 'core': codesign 0.0.1 -> codesign {current}"):
        run(identification, out, manager, resume=True)


def test_resume_refuses_a_journal_that_records_no_inputs(identification, tmp_path, manager):
    out = tmp_path / "run"
    interrupted(identification, out, manager)
    (partial_dir(out) / "inputs.json").unlink()
    with pytest.raises(RunError, match="does not record its input files and plugin versions "
                                       r"\(inputs.json, plugins.json: an older codesign"):
        run(identification, out, manager, resume=True)


# -- the environment --------------------------------------------------------------------------


def test_library_versions_are_those_installed():
    versions = library_versions()
    assert versions["numpy"] == np.__version__
    assert set(versions) <= set(LIBRARIES) and {"numpy", "scipy", "av"} <= set(versions)
    assert library_versions(["numpy", "no-such-distribution-xyz"]) == {
        "numpy": metadata.version("numpy")}


def git(folder, *args):
    return subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_git_state_gives_the_commit_and_whether_tracked_files_changed(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    assert git_state(repo) is None  # no commit yet
    (repo / "exp.yaml").write_text("a: 1\n")
    git(repo, "add", "exp.yaml")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    (repo / "untracked.txt").write_text("a run's output")
    state = git_state(repo)
    assert state == {"root": str(repo.resolve()), "commit": git(repo, "rev-parse", "HEAD"),
                     "dirty": False}
    (repo / "exp.yaml").write_text("a: 2\n")
    assert git_state(repo)["dirty"] is True
    (tmp_path / "plain").mkdir()
    assert git_state(tmp_path / "plain") is None  # outside any repository


def test_without_git_the_git_state_is_none(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no git on the path
    assert git_state(Path(__file__).parent) is None
    environment = run_environment(command=["codesign", "run"], experiment_folder=tmp_path)
    assert environment["git"] == {"codesign": None, "experiment": None}


def test_run_environment_records_python_platform_libraries_and_command(tmp_path):
    environment = run_environment(command=["codesign", "run", "my exp.yaml"],
                                  experiment_folder=tmp_path)
    assert environment["python"]["version"] == platform.python_version()
    assert environment["python"]["executable"] == sys.executable
    assert environment["platform"]["system"] == platform.system()
    assert environment["platform"]["machine"] == platform.machine()
    assert environment["libraries"] == library_versions()
    assert environment["command"] == ["codesign", "run", "my exp.yaml"]
    assert environment["command_line"] == "codesign run 'my exp.yaml'"
    assert run_environment()["command"] == sys.argv


def test_a_run_writes_its_inputs_and_environment(identification, tmp_path, manager,
                                                 monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "identify.yaml")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    out = tmp_path / "run"
    summary = run(identification, out, manager)
    assert {"inputs.json", "environment.json"} <= set(summary["files"])
    inputs = json.loads((out / "inputs.json").read_text())
    assert [row["path"] for row in inputs] == ["data/spring.npz"]
    environment = json.loads((out / "environment.json").read_text())
    assert environment["git"]["experiment"] == {"root": str(tmp_path.resolve()),
                                                "commit": git(tmp_path, "rev-parse", "HEAD"),
                                                "dirty": False}
    assert environment["libraries"]["numpy"] == np.__version__
    assert environment["command"] == sys.argv  # called from Python: this process's


def test_a_recording_named_by_an_absolute_path_is_recorded_too(tmp_path, manager):
    data = tmp_path / "elsewhere" / "spring.npz"
    save_spring_recordings(data, 6.0)
    path = tmp_path / "identify.yaml"
    path.write_text(textwrap.dedent(IDENTIFY_FROM_FILE).replace("data/spring.npz", str(data)))
    (row,) = input_files(config_of(path, manager))
    assert row["file"] == str(data.resolve()) and row["sha256"] == file_sha256(data)
