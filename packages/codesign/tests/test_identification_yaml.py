"""Identification as a YAML run: recording sources, the section's checks, outputs, resume."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest
from plugin_fixture import fixtures_plugin

from codesign import run_directory
from codesign.cli import main
from codesign.config import ConfigError, load_config
from codesign.experiment import IdentificationExperiment, build_experiment
from codesign.identification import Recording
from codesign.observers import StateFieldObserver
from codesign.outputs import read_npz
from codesign.plugins import get_registry
from codesign.recordings import (
    RecordingSet,
    RecordingSourceError,
    file_recordings,
    frame_steps,
    save_recordings,
    smooth_random_actions,
    synthetic_recordings,
)
from codesign.runs import RunInterrupted, partial_dir, run_experiment
from codesign.validation import validate_config

fx = fixtures_plugin()

EXPERIMENT = """\
simulator: {name: spring, options: {q0: 1.0}}
design:
  stiffness: {init: 3.0, lower: 0.5, upper: 20.0}
identification:
  recordings:
    source: synthetic
    options: {truth: {stiffness: 6.0}, count: 3, noise_std: 0.0}
  measurement: {name: state_fields, options: {fields: [q]}}
optimizer:
  name: lbfgsb
  iterations: 30
run: {steps: 30, substeps: 2, dt: 0.01, video: {fps: 10, width: 64, height: 48, every: 5}}
quick:
  optimizer: {iterations: 2}
  identification: {recordings: {options: {count: 2}}}
  run: {steps: 10}
"""


QUICK_COUNT = "  identification: {recordings: {options: {count: 2}}}\n"


pytestmark = pytest.mark.usefixtures("reset_fake_plugin")


def write(tmp_path, text=EXPERIMENT, **replacements) -> Path:
    for old, new in replacements.items():
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / "identify.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def config_of(path, manager, *, quick=False):
    return validate_config(load_config(path, quick=quick), get_registry(manager))


def run(path, out, manager, *, quick=False, resume=False):
    return run_experiment(path, get_registry(manager), out=out, quick=quick, resume=resume,
                          progress=False, plugin_manager=manager, log=lambda message: None)


def spring_and_measurement():
    spring = fx.make_spring()
    return spring, StateFieldObserver(simulator=spring, fields=["q", "v"])


# -- recording sources ------------------------------------------------------------------------


def test_smooth_random_actions_stay_in_range_and_pass_through_the_knots():
    rng = np.random.default_rng(0)
    actions = smooth_random_actions(rng, 41, 2, knots=5, low=0.0, high=0.5)
    assert actions.shape == (41, 2)
    assert actions.min() >= 0.0 and actions.max() <= 0.5
    knots = np.random.default_rng(0).uniform(0.0, 0.5, size=(5, 2))
    np.testing.assert_allclose(actions[::10], knots)
    with pytest.raises(ValueError, match="action_knots must be at least 2"):
        smooth_random_actions(rng, 10, 1, knots=1, low=-1, high=1)


def test_synthetic_source_reproduces_a_noise_free_simulation_and_reports_its_truth():
    spring, measurement = spring_and_measurement()
    kwargs = dict(simulator=spring, measurement=measurement, dt=0.01, substeps=2,
                  base_dir=Path("."), truth={"stiffness": 6.0}, steps=12, count=2)
    clean = synthetic_recordings(**kwargs, seed=3)
    assert isinstance(clean, RecordingSet) and len(clean) == 2
    assert clean.truth == {"stiffness": np.array(6.0)}
    design = spring.design_space().defaults() | {"stiffness": np.array(6.0)}
    state = spring.initial_state(design)
    first = clean[0]
    assert first.actions.shape == (12, 1) and first.measurements.shape == (13, 2)
    for c in range(3):  # the recorded measurement is the truth's trajectory
        np.testing.assert_allclose(first.measurements[c], np.r_[state.q, state.v])
        for _ in range(2):
            state = spring.step(state, first.actions[c], design, 0.01)
    noisy = synthetic_recordings(**kwargs, seed=3, noise_std=0.01)
    np.testing.assert_array_equal(noisy[0].actions, first.actions)
    residual = noisy[0].measurements - first.measurements
    assert 0.003 < residual.std() < 0.03


def test_synthetic_source_names_unknown_truth_parameters_and_bad_shapes():
    spring, measurement = spring_and_measurement()
    kwargs = dict(simulator=spring, measurement=measurement, dt=0.01, substeps=1,
                  base_dir=Path("."), steps=5)
    with pytest.raises(RecordingSourceError, match="unknown design parameter 'stifness'.*"
                                                   "did you mean 'stiffness'"):
        synthetic_recordings(**kwargs, truth={"stifness": 1.0})
    with pytest.raises(RecordingSourceError, match="does not fit the parameter's shape"):
        synthetic_recordings(**kwargs, truth={"stiffness": [1.0, 2.0]})
    with pytest.raises(RecordingSourceError, match="noise_std"):
        synthetic_recordings(**kwargs, truth={"stiffness": 1.0}, noise_std=-1.0)


def test_file_source_round_trips_saved_recordings_and_truth(tmp_path):
    spring, measurement = spring_and_measurement()
    recordings = synthetic_recordings(simulator=spring, measurement=measurement, dt=0.01,
                                      substeps=1, base_dir=tmp_path, truth={"damping": 0.4},
                                      steps=6, count=3, noise_std=0.01)
    save_recordings(tmp_path / "data.npz", recordings, truth=recordings.truth)
    loaded = file_recordings(simulator=spring, measurement=measurement, dt=0.01, substeps=1,
                             base_dir=tmp_path, path="data.npz")
    assert [r.name for r in loaded] == [r.name for r in recordings]
    for a, b in zip(loaded, recordings, strict=True):
        np.testing.assert_array_equal(a.actions, b.actions)
        np.testing.assert_array_equal(a.measurements, b.measurements)
    assert loaded.truth["damping"] == pytest.approx(0.4)


def test_file_source_reads_one_recording_without_the_leading_axis(tmp_path):
    spring, measurement = spring_and_measurement()
    np.savez(tmp_path / "one.npz", actions=np.zeros((4, 1)), measurements=np.ones((5, 2)))
    loaded = file_recordings(simulator=spring, measurement=measurement, dt=0.01, substeps=1,
                             base_dir=tmp_path, path=str(tmp_path / "one.npz"))
    assert len(loaded) == 1 and loaded.truth is None and loaded[0].steps == 4


@pytest.mark.parametrize("arrays, message", [
    (None, "not found; check options.path"),
    ({"actions": np.zeros((2, 4, 1))}, "has no array 'measurements'"),
    ({"actions": np.zeros((2, 4, 3)), "measurements": np.zeros((2, 5, 2))},
     r"array 'actions' has shape \(2, 4, 3\); expected \(recordings, steps, 1\)"),
    ({"actions": np.zeros((2, 4, 1)), "measurements": np.zeros((2, 4, 2))},
     r"array 'measurements' has shape \(2, 4, 2\); expected \(2, 5, 2\)"),
    ({"actions": np.zeros((2, 4, 1)), "measurements": np.zeros((2, 5, 2)),
      "names": np.array(["a"])}, r"array 'names' has shape \(1,\); expected \(2,\)"),
])
def test_file_source_errors_name_the_file_the_array_and_the_expected_shape(tmp_path, arrays,
                                                                           message):
    spring, measurement = spring_and_measurement()
    if arrays is not None:
        np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(RecordingSourceError, match=message) as info:
        file_recordings(simulator=spring, measurement=measurement, dt=0.01, substeps=1,
                        base_dir=tmp_path, path="bad.npz")
    assert "bad.npz" in str(info.value)


def test_file_source_refuses_a_file_that_is_not_an_npz(tmp_path):
    spring, measurement = spring_and_measurement()
    (tmp_path / "junk.npz").write_bytes(b"not a zip archive")
    with pytest.raises(RecordingSourceError, match="cannot read recording file"):
        file_recordings(simulator=spring, measurement=measurement, dt=0.01, substeps=1,
                        base_dir=tmp_path, path="junk.npz")


# -- the YAML section -------------------------------------------------------------------------


def test_frame_steps_accept_exact_multiples_only():
    np.testing.assert_array_equal(frame_steps(np.arange(4) / 30.0, 1 / 90), [0, 3, 6, 9])
    with pytest.raises(RecordingSourceError, match="fall between control steps"):
        frame_steps(np.arange(4) / 30.0, 0.02)


def test_the_resolved_experiment_validates_again_as_a_run_records_it(tmp_path, manager):
    # a run directory's config.yaml is the resolved experiment: rerunnable as it stands
    config = config_of(write(tmp_path), manager)
    again = tmp_path / "again" / "identify.yaml"
    again.parent.mkdir()
    again.write_text(config.to_yaml())
    assert config_of(again, manager).data == config.data


def test_validation_resolves_the_section_and_defaults_steps_and_seed_from_run(tmp_path,
                                                                               manager):
    config = config_of(write(tmp_path), manager)
    assert config.identification and "controller" not in config.data
    section = config.data["identification"]
    options = section["recordings"]["options"]
    assert section["recordings"]["source"] == "synthetic"
    assert options["steps"] == 30 and options["seed"] == 0 and options["count"] == 3
    assert section["batch_size"] is None and section["fit_initial_state"] is False
    assert section["fit_actions"] is False and "action_scale" not in section
    quick = config_of(write(tmp_path), manager, quick=True)
    assert quick.data["identification"]["recordings"]["options"]["count"] == 2
    assert quick.data["identification"]["recordings"]["options"]["steps"] == 10


@pytest.mark.parametrize("replacements, message", [
    ({"source: synthetic": "source: synthetc"},
     r"identification.recordings.source \(line 6\): unknown recording 'synthetc' \(did you "
     r"mean 'synthetic'\?\)"),
    ({"count: 3,": "count: 3, colour: red,"},
     r"identification.recordings.options.colour \(line 7\): unknown option 'colour'"),
    ({"  measurement: {name: state_fields, options: {fields: [q]}}\n": ""},
     r"identification \(line 4\): missing required key 'measurement'"),
    ({"optimizer:\n": "observer: {name: none}\noptimizer:\n"},
     r"observer \(line 9\): an identification experiment has no 'observer' section"),
    ({"run: {steps: 30,": "run: {"},
     r"needs option 'steps'"),
    ({"  measurement:": "  batch_size: 0\n  measurement:"},
     r"identification.batch_size \(line 8\): must be at least 1"),
    ({"  measurement:": "  fit_actions: yes please\n  measurement:"},
     r"identification.fit_actions \(line 8\): must be true or false, got a string"),
    ({"  measurement:": "  action_scale: 2.0\n  measurement:"},
     r"identification.action_scale \(line 8\): action_scale sizes the fitted actions; set "
     r"fit_actions: true or remove action_scale"),
    ({"  measurement:": "  fit_actions: true\n  action_scale: 0\n  measurement:"},
     r"identification.action_scale \(line 9\): must be positive, got 0"),
    ({"  measurement:": "  fit_actions: true\n  action_scale: []\n  measurement:"},
     r"identification.action_scale \(line 9\): must be a positive number or a non-empty "
     r"list"),
    ({"  measurement:": "  fit_actions: true\n  action_scale: [1.0, two]\n  measurement:"},
     r"identification.action_scale\[1\] \(line 9\): must be a number, got a string 'two'"),
])
def test_section_errors_name_the_path_and_line(tmp_path, manager, replacements, message):
    with pytest.raises(ConfigError, match=message):
        config_of(write(tmp_path, **replacements), manager)


def test_build_reports_source_failures_and_misfits_at_their_yaml_path(tmp_path, manager):
    registry = get_registry(manager)
    path = write(tmp_path, **{"source: synthetic\n    options: {truth: {stiffness: 6.0}, "
                              "count: 3, noise_std: 0.0}":
                              "source: file\n    options: {path: missing.npz}",
                              QUICK_COUNT: ""})
    with pytest.raises(ConfigError, match=r"identification.recordings.options \(line 7\): "
                                          r"recording file .*missing.npz' not found"):
        build_experiment(config_of(path, manager), registry)
    path = write(tmp_path, **{"stiffness: {init: 3.0, lower: 0.5, upper: 20.0}":
                              "stiffnes: {init: 3.0}"})
    with pytest.raises(ConfigError, match="unknown design parameter 'stiffnes'"):
        build_experiment(config_of(path, manager), registry)
    path = write(tmp_path, **{"design:\n  stiffness: {init: 3.0, lower: 0.5, upper: 20.0}\n":
                              ""})
    with pytest.raises(ConfigError, match=r"identification \(line 2\): nothing to identify"):
        build_experiment(config_of(path, manager), registry)
    path = write(tmp_path, **{"  measurement:": "  batch_size: 2\n  measurement:"})
    with pytest.raises(ConfigError, match=r"identification.batch_size.*steps with Adam"):
        build_experiment(config_of(path, manager), registry)
    path = write(tmp_path, **{"  measurement:": "  fit_actions: true\n  action_scale: [1, 2]"
                                                "\n  measurement:"})
    with pytest.raises(ConfigError, match=r"identification.action_scale \(line 9\): 2 scales "
                                          r"for the simulator's 1 action components"):
        build_experiment(config_of(path, manager), registry)


def test_the_file_source_resolves_paths_against_the_experiment_folder(tmp_path, manager):
    spring, measurement = fx.make_spring(), None
    measurement = StateFieldObserver(simulator=spring, fields=["q"])
    data = synthetic_recordings(simulator=spring, measurement=measurement, dt=0.01, substeps=2,
                                base_dir=tmp_path, truth={"stiffness": 6.0}, steps=10,
                                count=2)
    save_recordings(tmp_path / "spring.npz", data, truth=data.truth)
    path = write(tmp_path, **{"source: synthetic\n    options: {truth: {stiffness: 6.0}, "
                              "count: 3, noise_std: 0.0}":
                              "source: file\n    options: {path: spring.npz}",
                              "run: {steps: 30, ": "run: {", QUICK_COUNT: ""})
    with build_experiment(config_of(path, manager), get_registry(manager)) as experiment:
        assert isinstance(experiment, IdentificationExperiment)
        assert len(experiment.recordings) == 2 and experiment.truth == data.truth


# -- runs -------------------------------------------------------------------------------------


def test_identification_run_recovers_the_truth_and_writes_it(tmp_path, manager, capsys):
    path = write(tmp_path)
    out = tmp_path / "run"
    assert main(["run", str(path), "--out", str(out), "--no-progress"],
                plugin_manager=manager) == 0
    printed = capsys.readouterr().out
    assert "identified from 3 recording(s) (synthetic)" in printed
    assert "stiffness" in printed and "rel. error" in printed
    summary = json.loads((out / "summary.json").read_text())
    row = summary["identification"]["parameters"]["stiffness"]
    assert row["initial"] == 3.0 and row["truth"] == 6.0
    assert row["recovered"] == pytest.approx(6.0, rel=1e-4)
    assert row["relative_error"] < 1e-4
    assert summary["final_loss"] < 1e-8 < summary["initial_loss"]
    arrays = read_npz(out / "parameters.npz")
    assert float(arrays["design.stiffness"]) == pytest.approx(6.0, rel=1e-4)
    assert float(arrays["truth.stiffness"]) == 6.0
    assert summary["video"] == "result.mp4" or summary["video"] == "result.gif"
    assert "replaying recording 0" in " ".join(summary["notes"])
    assert main(["validate", str(path)], plugin_manager=manager) == 0
    assert "identification with simulator 'spring', 3 recording(s)" in capsys.readouterr().out


def test_an_identification_run_with_least_squares_converges(tmp_path, manager):
    path = write(tmp_path, **{"  name: lbfgsb\n": "  name: least_squares\n"})
    out = tmp_path / "run"
    assert main(["run", str(path), "--out", str(out), "--no-progress"],
                plugin_manager=manager) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["converged"], summary["message"]
    row = summary["identification"]["parameters"]["stiffness"]
    assert row["recovered"] == pytest.approx(6.0, rel=1e-6)


def test_a_run_that_fits_actions_writes_them_and_replays_recording_0_with_them(tmp_path,
                                                                              manager, capsys):
    path = write(tmp_path, **{"design:\n  stiffness: {init: 3.0, lower: 0.5, upper: 20.0}\n":
                              "", "  measurement:": "  fit_actions: true\n  action_scale: 0.5"
                                                    "\n  measurement:"})
    config = config_of(path, manager, quick=True)
    assert config.data["identification"]["fit_actions"] is True
    assert config.data["identification"]["action_scale"] == 0.5
    again = tmp_path / "again" / "identify.yaml"
    again.parent.mkdir()
    again.write_text(config.to_yaml())
    assert config_of(again, manager).data == config.data
    with build_experiment(config, get_registry(manager)) as experiment:
        problem = experiment.problem
        x = problem.x0() + 0.1
        replayed = run_directory._replay(experiment, x)[1]
        np.testing.assert_array_equal(replayed.actions, problem.actions(x, 0))
        assert not np.array_equal(replayed.actions, experiment.recordings[0].actions)
    assert main(["run", str(path), "--quick", "--out", str(tmp_path / "cli"), "--no-progress"],
                plugin_manager=manager) == 0
    printed = capsys.readouterr().out
    assert "fitted the actions of 2 recording(s) (synthetic)" in printed
    assert "rel. error" not in printed  # no parameter table without parameters
    out = tmp_path / "run"
    summary = run(path, out, manager, quick=True)
    assert summary["identification"]["fit_actions"] is True
    assert summary["identification"]["parameters"] == {}
    arrays = read_npz(out / "parameters.npz")
    assert sorted(k for k in arrays if k.startswith("actions.")) == ["actions.0", "actions.1"]
    assert arrays["actions.1"].shape == (10, 1)
    np.testing.assert_array_equal(arrays["actions.0"], arrays["x"][:10, None] * 0.5)


def test_stochastic_identification_resumes_to_the_same_result(tmp_path, manager):
    path = write(tmp_path, **{"name: lbfgsb": "name: adam\n  options: {learning_rate: 0.2}",
                              "  measurement:": "  batch_size: 2\n  measurement:",
                              "iterations: 30": "iterations: 8"})
    reference = run(path, tmp_path / "reference", manager)
    assert reference["identification"]["batch_size"] == 2
    fx.reset_calls()
    # building reads the initial state twice (measurement, problem) and simulates the 3
    # recordings; then 3 minibatches of 2 recordings each complete before the interrupt
    fx.INTERRUPT_AFTER = 2 + 3 + 3 * 2
    with pytest.raises(RunInterrupted):
        run(path, tmp_path / "run", manager)
    assert partial_dir(tmp_path / "run").exists()
    fx.INTERRUPT_AFTER = 0
    summary = run(path, tmp_path / "run", manager, resume=True)
    assert summary["evaluations_from_journal"] == 3
    assert summary["identification"] == reference["identification"]
    np.testing.assert_array_equal(read_npz(tmp_path / "run" / "parameters.npz")["x"],
                                  read_npz(tmp_path / "reference" / "parameters.npz")["x"])


def test_recording_set_is_a_list_with_truth():
    recording = Recording(np.zeros((2, 1)), np.zeros((3, 1)))
    assert RecordingSet([recording]).truth is None
    assert RecordingSet([recording], truth={"a": 1})[0] is recording
