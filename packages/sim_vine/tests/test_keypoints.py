"""Keypoints from synthetic videos of known centerlines, calibration, files and bad input."""

import cv2
import numpy as np
import pytest

from sim_vine.vision.keypoints import (
    Calibration,
    KeypointError,
    Keypoints,
    Segmentation,
    VineNotFoundError,
    check_point_counts,
    extract_keypoints,
    load_keypoints,
    resample_polyline,
    save_keypoints,
    trace_centerline,
)
from sim_vine.vision.video import draw_vine_frame, write_video

WIDTH, HEIGHT = 160, 120
# a 0.4 m × 0.3 m plane seen at an angle: the four corners land on a skewed quadrilateral
WORLD_CORNERS = np.array([[0.0, 0.0], [0.4, 0.0], [0.4, 0.3], [0.0, 0.3]])
PIXEL_CORNERS = np.array([[8.0, 112.0], [152.0, 116.0], [146.0, 6.0], [14.0, 10.0]])
BASE = np.array([0.05, 0.15])


def _calibration():
    return Calibration.from_reference_points(PIXEL_CORNERS, WORLD_CORNERS)


def _centerline(frame, frames):
    """A bending, growing vine [m]: dense polyline, shape (200, 2)."""
    phase = frame / max(frames - 1, 1)
    length = 0.22 + 0.08 * phase
    s = np.linspace(0.0, length, 200)
    heading = 0.15 + (4.0 * np.sin(2.5 * phase) - 1.0) * s
    step = np.stack([np.cos(heading), np.sin(heading)], axis=1)
    return BASE + np.concatenate([[[0.0, 0.0]], np.cumsum(
        0.5 * (step[1:] + step[:-1]) * np.diff(s)[:, None], axis=0)])


def _render(frames, *, noise=8.0, missing=(), seed=0):
    cal = _calibration()
    rng = np.random.default_rng(seed)
    truth, images = [], []
    for f in range(frames):
        world = _centerline(f, frames)
        truth.append(world)
        image = draw_vine_frame(cal.to_pixels(world), width=WIDTH, height=HEIGHT, thickness_px=7,
                                noise_std=noise, rng=rng, blobs_px=[(150.0, 100.0, 4.0)])
        if f in missing:
            image = draw_vine_frame(np.array([[140.0, 20.0], [150.0, 20.0]]), width=WIDTH,
                                    height=HEIGHT, thickness_px=5, noise_std=noise, rng=rng)
        images.append(image)
    return images, truth


def _pixel_errors(keypoints, truth, points):
    cal = _calibration()
    expected = np.stack([resample_polyline(w, points) for w in truth])
    return np.linalg.norm(cal.to_pixels(keypoints.points) - cal.to_pixels(expected), axis=-1)


@pytest.mark.parametrize("container", ["avi", "png"])
def test_synthetic_video_keypoints_within_one_pixel(tmp_path, container):
    images, truth = _render(12)
    path = write_video(images, tmp_path / ("clip.avi" if container == "avi" else "frames"),
                       fps=30.0)
    base_px = _calibration().to_pixels(BASE)
    keypoints = extract_keypoints(path, segmentation=Segmentation(method="hsv"), base_px=base_px,
                                  calibration=_calibration(), points=8, fps=30.0)
    assert keypoints.points.shape == (12, 8, 2) and keypoints.missing_frames == []
    np.testing.assert_allclose(keypoints.times, np.arange(12) / 30.0, atol=1e-9)
    errors = _pixel_errors(keypoints, truth, 8)
    assert np.median(errors) < 1.0, np.median(errors)
    assert np.percentile(errors, 95) < 2.0
    # in metres: the plane is ~360 px/m across, so 1 px is ~2.8 mm
    metres = np.linalg.norm(keypoints.points - np.stack([resample_polyline(w, 8) for w in truth]),
                            axis=-1)
    assert np.median(metres) < 1.0 / _calibration().pixels_per_metre(BASE)


def test_background_and_rgb_segmentation_agree_with_hsv():
    images, truth = _render(3, noise=4.0)
    background = draw_vine_frame(np.array([[-50.0, -50.0], [-40.0, -50.0]]), width=WIDTH,
                                 height=HEIGHT, thickness_px=1)
    base_px = _calibration().to_pixels(BASE)
    for segmentation in (Segmentation(method="background", background=background, threshold=60),
                         Segmentation(method="rgb", lower=(0, 140, 0), upper=(120, 255, 120))):
        keypoints = extract_keypoints(images, segmentation=segmentation, base_px=base_px,
                                      calibration=_calibration(), points=6, fps=30.0)
        assert np.median(_pixel_errors(keypoints, truth, 6)) < 1.0


def test_missing_frames_are_reported_or_stop_extraction():
    images, _ = _render(6, missing=(2, 4))
    base_px = _calibration().to_pixels(BASE)
    options = dict(segmentation=Segmentation(), base_px=base_px, calibration=_calibration(),
                   points=5, fps=30.0)
    keypoints = extract_keypoints(images, **options)
    assert keypoints.missing_frames == [2, 4]
    assert np.isnan(keypoints.points[[2, 4]]).all() and np.isfinite(keypoints.points[[0, 5]]).all()
    report = keypoints.report()
    assert "frame 2" in report and "frame 4" in report and "within 10 px of the base" in report
    with pytest.raises(VineNotFoundError, match="2 frame") as info:
        extract_keypoints(images, on_missing="raise", **options)
    assert info.value.frames == [2, 4]


def test_blobs_and_mount_behind_the_base_are_ignored():
    mask = np.zeros((60, 100), np.uint8)
    cv2.line(mask, (20, 30), (90, 30), 255, 7)  # the vine
    cv2.line(mask, (0, 30), (20, 30), 255, 11)  # a wider mount behind the base
    cv2.circle(mask, (50, 10), 5, 255, -1)  # a distractor of the vine's colour
    line, reason = trace_centerline(mask, (20, 30), base_direction=(1, 0))
    assert reason is None
    np.testing.assert_allclose(line[0], [20, 30])
    np.testing.assert_allclose(line[-1], [90, 30], atol=1.0)
    assert np.all(np.abs(line[:, 1] - 30) < 0.5)
    empty, reason = trace_centerline(np.zeros((20, 20), np.uint8), (5, 5))
    assert empty is None and "no vine pixels" in reason
    speck = np.zeros((20, 20), np.uint8)
    speck[5:8, 5:8] = 255
    assert "min_area_px" in trace_centerline(speck, (6, 6))[1]


def test_calibration_maps_reference_points_and_inverts():
    cal = _calibration()
    np.testing.assert_allclose(cal.to_world(PIXEL_CORNERS), WORLD_CORNERS, atol=1e-9)
    np.testing.assert_allclose(cal.to_pixels(cal.to_world(PIXEL_CORNERS)), PIXEL_CORNERS, atol=1e-9)
    extra = cal.to_pixels([[0.2, 0.1]])
    many = Calibration.from_reference_points(np.vstack([PIXEL_CORNERS, extra]),
                                             np.vstack([WORLD_CORNERS, [[0.2, 0.1]]]))
    np.testing.assert_allclose(many.homography, cal.homography, atol=1e-8)
    scaled = Calibration.from_scale(0.002, (10.0, 100.0))
    np.testing.assert_allclose(scaled.to_world([[10.0, 100.0], [20.0, 90.0]]),
                               [[0.0, 0.0], [0.02, 0.02]])
    assert scaled.pixels_per_metre([0.0, 0.0]) == pytest.approx(500.0)
    with pytest.raises(KeypointError, match="degenerate"):
        Calibration.from_reference_points([[0, 0], [1, 1], [2, 2], [3, 3]], WORLD_CORNERS)
    with pytest.raises(KeypointError, match="k >= 4"):
        Calibration.from_reference_points(PIXEL_CORNERS[:3], WORLD_CORNERS[:3])
    with pytest.raises(KeypointError, match="positive"):
        Calibration.from_scale(-1.0, (0, 0))


def test_resample_polyline_spaces_points_evenly():
    points = resample_polyline([[0.0, 0.0], [1.0, 0.0], [1.0, 2.0]], 4)
    np.testing.assert_allclose(points, [[0, 0], [1, 0], [1, 1], [1, 2]])
    with pytest.raises(KeypointError, match="count >= 2"):
        resample_polyline([[0.0, 0.0], [1.0, 0.0]], 1)


def test_files_roundtrip_and_validate(tmp_path):
    points = np.random.default_rng(0).normal(size=(4, 3, 2))
    points[1] = np.nan
    keypoints = Keypoints(np.arange(4) / 30.0, points)
    for suffix in (".npz", ".csv"):
        path = save_keypoints(keypoints, tmp_path / f"k{suffix}")
        loaded = load_keypoints(path, points=3)
        np.testing.assert_allclose(loaded.points, points, rtol=1e-8)
        assert loaded.missing_frames == [1]
        with pytest.raises(KeypointError, match="3 keypoints per frame but 5"):
            load_keypoints(path, points=5)
    with pytest.raises(KeypointError, match="no keypoint file"):
        load_keypoints(tmp_path / "absent.npz")
    (tmp_path / "bad.csv").write_text("time,x0,y0\n0,1,2\n")
    with pytest.raises(KeypointError, match="header"):
        load_keypoints(tmp_path / "bad.csv")
    (tmp_path / "bad.npz").write_bytes(b"zip? no")
    with pytest.raises(KeypointError, match="cannot read"):
        load_keypoints(tmp_path / "bad.npz")
    np.savez(tmp_path / "other.npz", times=np.zeros(2))
    with pytest.raises(KeypointError, match="lacks"):
        load_keypoints(tmp_path / "other.npz")
    with pytest.raises(KeypointError, match=r"\.npz or \.csv"):
        save_keypoints(keypoints, tmp_path / "k.txt")


def test_bad_keypoint_arrays_and_mismatched_counts():
    with pytest.raises(KeypointError, match="timestamps"):
        Keypoints(np.zeros(3), np.zeros((2, 3, 2)))
    with pytest.raises(KeypointError, match="increasing"):
        Keypoints(np.array([0.0, 0.0]), np.zeros((2, 3, 2)))
    partial = np.zeros((2, 3, 2))
    partial[0, 1, 0] = np.nan
    with pytest.raises(KeypointError, match="partly NaN"):
        Keypoints(np.arange(2.0), partial)
    a = Keypoints(np.arange(2.0), np.zeros((2, 3, 2)))
    b = Keypoints(np.arange(2.0), np.zeros((2, 4, 2)))
    assert check_point_counts([a, a]) == 3
    with pytest.raises(KeypointError, match=r"recording\(s\) \[1\] have \[4\] points"):
        check_point_counts([a, b])


def test_bad_segmentation_settings():
    with pytest.raises(KeypointError, match="unknown segmentation method"):
        Segmentation(method="magic")
    with pytest.raises(KeypointError, match="needs background"):
        Segmentation(method="background")
    with pytest.raises(KeypointError, match="0-255"):
        Segmentation(lower=(0, 0))
    with pytest.raises(KeypointError, match="on_missing"):
        extract_keypoints([], segmentation=Segmentation(), base_px=(0, 0),
                          calibration=_calibration(), points=3, fps=1.0, on_missing="skip")
