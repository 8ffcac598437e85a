"""The ``vine_video`` recording source: frames on control steps, YAML runs, and bad input."""

import numpy as np
import pytest
import yaml

from codesign.config import load_config
from codesign.experiment import build_experiment
from codesign.plugins import get_registry
from codesign.recordings import RecordingSourceError
from codesign.validation import validate_config
from sim_vine.fit.synthetic import synthetic_video, tilted_calibration
from sim_vine.fit.video_source import video_recordings
from sim_vine.scene import make_simulator
from sim_vine.terms import KeypointObserver, TipObserver
from sim_vine.vision.keypoints import VineNotFoundError
from sim_vine.vision.video import write_video

VIEW = (-0.02, 0.2, -0.08, 0.15)
WIDTH, HEIGHT = 240, 180
OPTIONS = dict(bodies=4, length=0.2, initial_angles=0.15)


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    """Eight frames of a released cantilever (frame 5 without the vine), as PNGs."""
    sim = make_simulator(**OPTIONS)
    calibration = tilted_calibration(VIEW, width=WIDTH, height=HEIGHT)
    video = synthetic_video(sim, sim.design_space().defaults(), frames=8, dt=1 / 90,
                            substeps=3, points=5, calibration=calibration, width=WIDTH,
                            height=HEIGHT, noise_std=3.0, hidden=(5,))
    folder = write_video(video.images, tmp_path_factory.mktemp("clip") / "frames", fps=30.0)
    corners = np.array([[VIEW[0], VIEW[2]], [VIEW[1], VIEW[2]], [VIEW[1], VIEW[3]],
                        [VIEW[0], VIEW[3]]])
    options = {"video": folder.name, "fps": 30.0,
               "calibration": {"pixels": calibration.to_pixels(corners).tolist(),
                               "world": corners.tolist()},
               "base_px": video.base_px.tolist(), "base_direction": [1.0, 0.0]}
    return folder, options, video


def _call(clip, *, simulator=None, measurement=None, dt=1 / 90, substeps=3, **options):
    folder, base, _ = clip
    simulator = simulator or make_simulator(**OPTIONS)
    measurement = measurement or KeypointObserver(simulator=simulator, count=5)
    return video_recordings(simulator=simulator, measurement=measurement, dt=dt,
                            substeps=substeps, base_dir=folder.parent, **{**base, **options})


def test_frames_land_on_control_steps_with_nan_rows_between(clip):
    _, _, video = clip
    # one control step per frame: rows are frames, the hidden frame is a NaN row
    (per_frame,) = _call(clip)
    assert per_frame.measurements.shape == (8, 10) and per_frame.actions.shape == (7, 1)
    assert np.isnan(per_frame.measurements[5]).all()
    seen = [0, 1, 2, 3, 4, 6, 7]
    found = per_frame.measurements[seen].reshape(len(seen), 5, 2)
    assert np.max(np.abs(found - video.truth[seen])) < 3e-3
    # one model step per control step: frames on every third row
    (per_step,) = _call(clip, substeps=1)
    assert per_step.measurements.shape == (22, 10)
    rows = np.flatnonzero(np.isfinite(per_step.measurements[:, 0]))
    np.testing.assert_array_equal(rows, [0, 3, 6, 9, 12, 18, 21])
    np.testing.assert_allclose(per_step.measurements[rows], per_frame.measurements[seen])


def test_yaml_identification_builds_with_truth(clip, tmp_path):
    folder, options, _ = clip
    experiment = {
        "simulator": {"name": "vine", "options": {**OPTIONS,
                                                  "tie": ["joint.stiffness", "joint.damping"]}},
        "design": {"joint.stiffness": {"init": 0.03, "lower": 0.001, "upper": 0.5}},
        "identification": {
            "recordings": {"source": "vine_video",
                           "options": {**options, "video": str(folder),
                                       "truth": {"joint.stiffness": 0.05}}},
            "measurement": {"name": "keypoints", "options": {"count": 5}}},
        "optimizer": {"name": "lbfgsb", "iterations": 1},
        "run": {"substeps": 3, "dt": 1 / 90},
    }
    path = tmp_path / "fit.yaml"
    path.write_text(yaml.safe_dump(experiment))
    registry = get_registry()
    built = build_experiment(validate_config(load_config(path), registry), registry)
    assert built.truth["joint.stiffness"] == pytest.approx(0.05)
    assert built.recordings[0].steps == 7
    assert built.problem.size == 1  # one stiffness shared by both pins


def test_bad_inputs_name_the_problem_and_a_fix(clip):
    with pytest.raises(RecordingSourceError, match=r"run.dt: 0.0111.* run.substeps: 3"):
        _call(clip, dt=0.01, substeps=1)
    with pytest.raises(RecordingSourceError, match="measurement to {name: keypoints"):
        sim = make_simulator(**OPTIONS)
        _call(clip, simulator=sim, measurement=TipObserver(simulator=sim))
    with pytest.raises(VineNotFoundError, match="1 frame") as stopped:
        _call(clip, on_missing="raise")
    assert stopped.value.frames == [5]
    # a simulator that starts straight while the video starts bent: the fix is given
    with pytest.raises(RecordingSourceError, match=r"initial_angles: \[0\.15"):
        _call(clip, simulator=make_simulator(bodies=4, length=0.2))
    with pytest.raises(RecordingSourceError, match="calibration must be"):
        _call(clip, calibration={"scale": 1.0})
    with pytest.raises(RecordingSourceError, match="growth_rate"):
        _call(clip, growth_rate=float("nan"))
    with pytest.raises(RecordingSourceError, match="growth_rate"):
        _call(clip, growth_rate=-0.1)
    with pytest.raises(RecordingSourceError, match="frames must be at least 2"):
        _call(clip, frames=1)
    (short,) = _call(clip, frames=4)
    assert short.steps == 3
