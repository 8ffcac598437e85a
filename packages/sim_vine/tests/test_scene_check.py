"""Scene obstacles against a recorded path, and the ``vine_keypoints`` source built from YAML."""

import numpy as np
import pytest
import yaml

from codesign.config import load_config
from codesign.experiment import build_experiment
from codesign.plugins import get_registry
from codesign.recordings import RecordingSourceError
from codesign.validation import validate_config
from sim_vine.fit.keypoints_source import keypoints_recordings
from sim_vine.fit.scene_check import (
    SceneMismatchError,
    check_scene,
    contact_spacing,
    obstacle_tolerance,
)
from sim_vine.model import VineModel
from sim_vine.obstacles import Circle, Wall
from sim_vine.scene import make_simulator
from sim_vine.terms import KeypointObserver
from sim_vine.vision.keypoints import Keypoints

FPS = 30.0


def _straight(frames=4, n=5):
    """A straight 0.2 m vine along x, not moving: keypoints (frames, n, 2) [m]."""
    x = np.linspace(0.0, 0.2, n)
    return Keypoints(np.arange(frames) / FPS,
                     np.repeat(np.stack([x, np.zeros(n)], axis=1)[None], frames, axis=0))


def _model(*obstacles):
    return VineModel(body_count=10, length=0.2, obstacles=obstacles)


def test_a_thin_wall_through_the_base_is_an_error():
    with pytest.raises(SceneMismatchError, match=r"obstacle 0 \(wall.*holds the vine's base"):
        check_scene(_model(Wall([0.0, -0.05], [0.0, 0.05], 0.004)), _straight())


def test_an_obstacle_the_recorded_vine_passes_through_is_an_error():
    wall = Wall([0.1, -0.05], [0.1, 0.05], 0.004)
    with pytest.raises(SceneMismatchError,
                       match=r"obstacle 1 \(wall.*passes through it in frames 0, 1, 2, 3"):
        check_scene(_model(Circle([0.0, 0.5], 0.05), wall), _straight())


def test_an_obstacle_touched_between_contact_points_is_a_warning():
    # every second joint is a pin: contact points 40 mm apart on the 0.2 m, 10-body vine
    assert contact_spacing(_model(), _straight()) == pytest.approx(0.04)
    # a thin wall's end 4 mm beside the recorded vine: within 6 mm of it along 9 mm
    # (7.9 mm between the first and last 1 mm samples inside)
    peg = Wall([0.1, 0.005], [0.1, 0.1], 0.002)
    check = check_scene(_model(peg), _straight())
    assert len(check.warnings) == 1
    assert "obstacle 0 (wall" in check.warnings[0] and "along only 7.9 mm" in check.warnings[0]
    assert "40.0 mm between" in check.warnings[0] and "contact: along" in check.warnings[0]
    # a vine lying along a wall, a tip touching one, an obstacle 10 mm away: no warning
    along = Wall([0.02, 0.004], [0.19, 0.004], 0.002)
    at_tip = Wall([0.203, -0.05], [0.203, 0.05], 0.002)
    away = Circle([0.1, 0.03], 0.02)
    assert check_scene(_model(along, at_tip, away), _straight()).warnings == ()


def test_the_default_tolerance_is_two_pixels_where_they_are_more_than_2_mm():
    # keypoints are found to about a pixel: at 2 mm/px a 2 mm tolerance is one pixel
    assert obstacle_tolerance(None, None) == (0.002, ())
    assert obstacle_tolerance(None, 0.0005) == (0.002, ())
    tolerance, (note,) = obstacle_tolerance(None, 0.0034)
    assert tolerance == pytest.approx(0.0068)
    assert "6.8 mm: 2 pixels of 3.4 mm" in note and "obstacle_tolerance_mm" in note
    assert obstacle_tolerance(1.5, 0.0034) == (0.0015, ())
    for bad in (0, -1.0, float("nan"), "2", True):
        with pytest.raises(SceneMismatchError, match="obstacle_tolerance_mm must be"):
            obstacle_tolerance(bad, None)


def _write_csv(path, keypoints, *, scale=1.0):
    n = keypoints.point_count
    header = "time," + ",".join(f"x{i},y{i}" for i in range(n))
    np.savetxt(path, np.column_stack([keypoints.times, scale * keypoints.points.reshape(
        keypoints.frame_count, -1)]), delimiter=",", header=header, comments="", fmt="%.10g")
    return path


def test_the_keypoints_source_checks_file_and_scene(tmp_path):
    _write_csv(tmp_path / "trial.csv", _straight(), scale=1e3)
    sim = make_simulator(bodies=4, length=0.2)
    measurement = KeypointObserver(simulator=sim, count=5)
    call = dict(simulator=sim, measurement=measurement, dt=1 / 90, substeps=3,
                base_dir=tmp_path, path="trial.csv")
    with pytest.raises(RecordingSourceError, match="set units: mm"):
        keypoints_recordings(**call)
    (recording,) = keypoints_recordings(**call, units="mm")
    assert recording.measurements.shape == (4, 10)
    blocked = make_simulator(bodies=4, length=0.2, check_initial_pose=False,
                             obstacles=[{"type": "wall", "start": [0.1, -0.05],
                                         "end": [0.1, 0.05], "thickness": 0.004}])
    with pytest.raises(RecordingSourceError, match="passes through it"):
        keypoints_recordings(**{**call, "simulator": blocked}, units="mm")


def test_the_keypoints_source_estimates_the_growth_rate_when_asked(tmp_path, capsys):
    # a straight vine growing 1 mm per frame at 30 fps: 0.03 m/s
    grown = _straight(frames=6)
    points = grown.points * (1.0 + 5e-3 * np.arange(6))[:, None, None]
    _write_csv(tmp_path / "trial.csv", Keypoints(grown.times, points))
    sim = make_simulator(bodies=4, length=0.2)
    call = dict(simulator=sim, measurement=KeypointObserver(simulator=sim, count=5),
                dt=1 / 90, substeps=3, base_dir=tmp_path, path="trial.csv")
    (recording,) = keypoints_recordings(**call, growth_rate="estimate")
    np.testing.assert_allclose(recording.actions, 0.03, rtol=1e-9)
    assert "growth rate 0.03 m/s estimated" in capsys.readouterr().out
    for bad in ("estimated", -0.1, float("nan"), "0.3"):
        with pytest.raises(RecordingSourceError, match="non-negative number of m/s or 'estim"):
            keypoints_recordings(**call, growth_rate=bad)


def test_yaml_identification_with_the_keypoints_source(tmp_path):
    _write_csv(tmp_path / "trial.csv", _straight())
    experiment = {
        "simulator": {"name": "vine", "options": {"bodies": 4, "length": 0.2,
                                                  "tie": ["joint.stiffness"]}},
        "design": {"joint.stiffness": {"init": 0.03, "lower": 0.001, "upper": 0.5}},
        "identification": {
            "recordings": {"source": "vine_keypoints",
                           "options": {"path": "trial.csv", "growth_rate": 0.0}},
            "measurement": {"name": "keypoints", "options": {"count": 5}}},
        "optimizer": {"name": "lbfgsb", "iterations": 1},
        "run": {"substeps": 3, "dt": 1 / 90},
    }
    path = tmp_path / "fit.yaml"
    path.write_text(yaml.safe_dump(experiment))
    registry = get_registry()
    built = build_experiment(validate_config(load_config(path), registry), registry)
    assert built.recordings[0].steps == 3
