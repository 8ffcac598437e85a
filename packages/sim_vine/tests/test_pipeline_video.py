"""The one-command pipeline from a video: keypoints extracted with a keypoints file's checks,
the fit, and a bundle whose plot and overlay are drawn over the recorded frames."""

import json
import re

import cv2
import numpy as np
import pytest
import yaml

from sim_vine.fit.bundle import FITTED_BGR, MEASURED_BGR, overlay_frames
from sim_vine.fit.pipeline import PipelineError, load_recording_file, main
from sim_vine.fit.shooting import VideoRecording
from sim_vine.fit.synthetic import synthetic_video
from sim_vine.fit.video_file import Footage, read_video_file
from sim_vine.scene import make_simulator
from sim_vine.vision.keypoints import Calibration, Keypoints
from sim_vine.vision.video import read_frames, write_video

MPP, ORIGIN = 0.002, (40.0, 20.0)  # the camera looks straight at the motion plane
WIDTH, HEIGHT, FRAMES, POINTS, HIDDEN = 320, 260, 27, 6, (7, 15)


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """The wall_vertical vine (6 bodies, K 0.03, C 0.002, growing 0.3 m/s into the wall), 27
    frames at 30 fps, 2 mm/px, out of focus (2 px blur), pixel noise, frames 7 and 15
    without the vine, as an MJPG video; and its pipeline YAML's video section."""
    sim = make_simulator(scene="wall_vertical", bodies=6, stiffness=0.03)
    video = synthetic_video(sim, sim.design_space().defaults(), frames=FRAMES, dt=1 / 90,
                            substeps=3, points=POINTS, growth_rate=0.3,
                            calibration=Calibration.from_scale(MPP, ORIGIN), width=WIDTH,
                            height=HEIGHT, thickness_px=8, noise_std=6.0, blur_px=2.0,
                            hidden=HIDDEN)
    folder = tmp_path_factory.mktemp("video")
    write_video(video.images, folder / "trial.avi", fps=30.0)
    section = {"path": "trial.avi", "base_px": video.base_px.tolist(), "points": POINTS,
               "scale": {"pixels": [[0, 0], [100, 0]], "distance": 100 * MPP},
               "origin_px": list(ORIGIN), "base_direction": video.base_direction_px.tolist()}
    return folder, section, video


def _trial(folder, section, **changes):
    """Write the pipeline YAML (the fit starts 30 % below K and 50 % above C) and return it.
    The scene check's tolerance is 2 px: extracted keypoints are good to about a pixel."""
    spec = {"video": section, "scene": "wall_vertical",
            "simulator": {"bodies": 6, "stiffness": 0.021, "damping": 0.003},
            "growth_rate": 0.3, "obstacle_tolerance_mm": 4.0,
            "fit": {"free": ["joint.stiffness", "joint.damping"], "iterations": 30}, **changes}
    path = folder / "trial.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_one_command_fits_a_blurred_noisy_video_with_missed_frames_within_3_mm(recording,
                                                                               capsys):
    # measured: tip MAE 1.52 mm, K +0.04 %, C +0.45 %, converged in 7 iterations
    folder, section, _ = recording
    out = folder / "out"
    assert main([str(_trial(folder, section)), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "frame rate 30 fps (video file)" in printed
    assert "frames [7, 15] without the vine (NaN rows, skipped by the fit): frame 7: no " \
           "vine pixels within 10 px of the base" in printed
    summary = json.loads((out / "summary.json").read_text())
    (result,) = summary["recordings"]
    assert result["name"] == "trial.avi" and result["missing_frames"] == [7, 15]
    assert summary["optimizer"]["converged"], summary["optimizer"]["message"]
    assert result["tip_error_mm"]["mae"] <= 3.0
    parameters = summary["parameters"]
    assert parameters["joint.stiffness"]["value"] == pytest.approx(0.03, rel=0.02)
    assert parameters["joint.damping"]["value"] == pytest.approx(0.002, rel=0.02)
    errors = np.genfromtxt(out / "errors_0.csv", delimiter=",", names=True)
    assert len(errors) == FRAMES and np.isnan(errors["tip_error_mm"][list(HIDDEN)]).all()
    # the plot is drawn over the last recorded frame, the overlay over every frame
    recorded = [frame.image for frame in read_frames(folder / "trial.avi")]
    plot = cv2.imread(str(out / "paths_0.png"))
    assert plot.shape == recorded[-1].shape
    assert np.mean(np.all(plot == recorded[-1], axis=2)) > 0.8
    assert np.any(np.all(plot == FITTED_BGR, axis=2))
    assert np.any(np.all(plot == MEASURED_BGR, axis=2))
    overlay = [frame.image for frame in read_frames(out / "overlay_0.avi")]
    assert len(overlay) == FRAMES and overlay[0].shape == recorded[0].shape
    # MJPG twice: the frames agree with the recording away from the drawing
    difference = np.abs(overlay[20].astype(int) - recorded[20].astype(int)).max(axis=2)
    assert np.median(difference) <= 4


def _segment_distance(pixels, polyline):
    """The distance [px] of each pixel (k, 2) to a polyline (m, 2) (to its point if m = 1),
    its NaN rows left out (infinite if all are)."""
    polyline = polyline[np.all(np.isfinite(polyline), axis=1)]
    if len(polyline) == 0:
        return np.full(len(pixels), np.inf)
    if len(polyline) == 1:
        return np.linalg.norm(pixels - polyline[0], axis=1)
    start, end = polyline[:-1], polyline[1:]
    along = end - start
    t = np.clip(np.einsum("kmd,md->km", pixels[:, None] - start, along)
                / np.maximum(np.sum(along ** 2, axis=1), 1e-12), 0.0, 1.0)
    nearest = start + t[..., None] * along
    return np.linalg.norm(pixels[:, None] - nearest, axis=2).min(axis=1)


def test_the_overlay_draws_the_fit_over_the_recorded_frames(tmp_path):
    # three noise frames (every pixel differs from its neighbours, so any drawing shows),
    # lossless; the measured vine runs along the image, the fitted one 5 px below it
    rng = np.random.default_rng(0)
    recorded = [rng.integers(0, 256, (200, 240, 3), dtype=np.uint8) for _ in range(3)]
    folder = write_video(recorded, tmp_path / "frames", fps=30.0)
    calibration = Calibration.from_scale(MPP, ORIGIN)
    footage = Footage(source=folder, fps=30.0, calibration=calibration, frame_count=3)
    x = np.linspace(0.02, 0.26, 4)
    measured = np.stack([np.column_stack([x, -0.22 - 0.01 * f * x]) for f in range(3)])
    predicted = measured + [0.0, -0.01]
    measured[1] = np.nan  # a frame without the vine
    fitted = VideoRecording(Keypoints(np.arange(3) / 30.0, measured))
    tip_mm = np.array([10.0, np.nan, 10.0])
    frames = list(overlay_frames(make_simulator(bodies=3).model, fitted, predicted, tip_mm,
                                 footage=footage))
    assert len(frames) == 3
    rows, cols = np.mgrid[:200, :240]
    pixels = np.column_stack([cols.ravel(), rows.ravel()]).astype(float)
    for f, (image, background) in enumerate(zip(frames, recorded, strict=True)):
        assert image.shape == background.shape
        tip = np.round(calibration.to_pixels(predicted[f, -1])).astype(int)
        np.testing.assert_array_equal(image[tip[1], tip[0]], FITTED_BGR)
        seen = calibration.to_pixels(measured[f])
        if f != 1:
            middle = np.round(seen[1]).astype(int)  # a measured keypoint, 5 px off the fit
            np.testing.assert_array_equal(image[middle[1], middle[0]], MEASURED_BGR)
        # every changed pixel is part of the drawing: the legend (top left) or within a
        # dot's radius and the anti-aliasing of a keypoint, path or the fitted vine
        drawn = [calibration.to_pixels(predicted[f]), calibration.to_pixels(predicted[:f + 1, -1]),
                 calibration.to_pixels(measured[:f + 1, -1])] + [p[None] for p in seen]
        near = np.min([_segment_distance(pixels, line) for line in drawn], axis=0) <= 6.0
        legend = pixels[:, 1] <= 56
        changed = np.any(image != background, axis=2).ravel()
        assert not np.any(changed & ~near & ~legend)
        unchanged = ~changed & ~near & ~legend
        assert unchanged.sum() > 0.5 * len(pixels)


def test_the_scale_or_a_calibration_of_the_same_camera_give_the_same_keypoints(recording):
    folder, section, video = recording
    options = {k: v for k, v in section.items() if k != "path"}
    by_scale, footage = read_video_file(folder / "trial.avi", frames=5, **options)
    assert footage.frame_count == 5 and footage.fps == pytest.approx(30.0)
    assert by_scale.fps_source == "video file"
    corners = np.array([[0.0, 0.0], [0.5, 0.0], [0.5, -0.4], [0.0, -0.4]])
    pixels = Calibration.from_scale(MPP, ORIGIN).to_pixels(corners)
    options.pop("scale"), options.pop("origin_px")
    by_calibration, _ = read_video_file(
        folder / "trial.avi", frames=5,
        calibration={"pixels": pixels.tolist(), "world": corners.tolist()}, **options)
    np.testing.assert_allclose(by_calibration.keypoints.points, by_scale.keypoints.points,
                               atol=1e-9)
    # keypoints within about a pixel of the truth
    error = np.linalg.norm(by_scale.keypoints.points - video.truth[:5], axis=-1)
    assert np.max(error) < 1.5 * MPP


def test_an_image_sequence_needs_its_frame_rate(recording, tmp_path, capsys):
    folder, section, video = recording
    write_video(video.images[:4], tmp_path / "frames", fps=30.0)
    path = _trial(tmp_path, {**section, "path": "frames"})
    assert main([str(path), "--out", str(tmp_path / "out")]) == 2
    assert "is an image sequence, which has no frame rate of its own: give it (fps: 30)" in \
        capsys.readouterr().err
    read, _ = read_video_file(tmp_path / "frames", fps=25.0,
                              **{k: v for k, v in section.items() if k != "path"})
    assert read.keypoints.frame_count == 4 and read.notes[0].startswith(
        "frame rate 25 fps (given)")


def test_video_sections_name_the_fix(recording, tmp_path, capsys):
    folder, section, _ = recording
    path = _trial(tmp_path, section)
    spec = yaml.safe_load(path.read_text())
    video = spec["video"]
    keypoints = {"path": "trial.csv", "units": "m"}
    for change, message in (
            ({"keypoints": keypoints}, "give exactly one of keypoints: .* got both"),
            ({"video": None}, "give exactly one of keypoints: .* got neither"),
            ({"video": {**video, "fsp": 30}}, r"unknown video option 'fsp' \(did you mean 'fps'"),
            ({"video": {k: v for k, v in video.items() if k != "path"}},
             r"video.path is required \(a video file, image folder or glob\)"),
            ({"video": {**video, "points": "six"}}, "video.points must be the keypoints per"),
            ({"video": {**video, "base_px": [3]}}, r"video.base_px must be the pixel \[x, y\]")):
        path.write_text(yaml.safe_dump({**spec, **change}))
        with pytest.raises(PipelineError, match=message):
            load_recording_file(path)
    # the scale: never assumed, one way only, and checked against a vine's size
    source = folder / "trial.avi"
    for change, message in (
            ({"scale": None, "origin_px": None}, "a video needs its scale: scale"),
            ({"calibration": {"metres_per_pixel": MPP, "origin_px": list(ORIGIN)}},
             "give either scale and origin_px or calibration, not both"),
            ({"scale": {"pixels": [[0, 0], [100, 0]], "distance": 100e3 * MPP}},
             r"with the given scale the points span .* check the scale")):
        path = _trial(tmp_path, {**section, **change, "path": str(source)})
        assert main([str(path), "--out", str(tmp_path / "out")]) == 2
        assert re.search(message, capsys.readouterr().err)
