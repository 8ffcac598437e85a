"""Keypoints files (CSV/NPZ) read into metres, and every bad input named with its fix."""

import numpy as np
import pytest

from sim_vine.fit.keypoints_file import KeypointsFileError, pixel_scale, read_keypoints_file

FPS = 30.0


def _points(frames=6, n=4):
    """A straight vine along x, 0.2 m long, growing 1 mm per frame [m], (frames, n, 2)."""
    length = 0.2 + 1e-3 * np.arange(frames)
    x = length[:, None] * np.linspace(0.0, 1.0, n)[None]
    return np.stack([x, np.zeros_like(x)], axis=2)


def _csv(path, times, points, *, clock="time", tip=None):
    n = points.shape[1]
    header = [clock] + [f"{a}{i}" for i in range(n) for a in "xy"]
    table = [times, *points.reshape(len(points), -1).T]
    if tip is not None:
        header += ["tip_x", "tip_y"]
        table += [tip[:, 0], tip[:, 1]]
    np.savetxt(path, np.column_stack(table), delimiter=",", header=",".join(header),
               comments="", fmt="%.10g")
    return path


def test_csv_in_metres_with_the_frame_rate_estimated(tmp_path):
    points = _points()
    read = read_keypoints_file(_csv(tmp_path / "k.csv", np.arange(6) / FPS, points))
    assert read.fps == pytest.approx(FPS) and read.fps_source == "estimated"
    np.testing.assert_allclose(read.keypoints.points, points)
    assert "30 fps (estimated)" in read.notes[0]
    assert read.metres_per_pixel is None


def test_pixels_with_a_scale_from_two_points_a_known_distance_apart(tmp_path):
    points = _points()
    mpp, origin = 0.004, np.array([50.0, 200.0])
    pixels = origin + points * [1.0, -1.0] / mpp  # image y points down
    path = _csv(tmp_path / "k.csv", np.arange(6) / FPS, pixels)
    scale = {"pixels": [[10.0, 10.0], [110.0, 10.0]], "distance": 100 * mpp}
    assert pixel_scale(scale) == pytest.approx(mpp)
    read = read_keypoints_file(path, units="px", scale=scale, origin_px=origin.tolist())
    np.testing.assert_allclose(read.keypoints.points, points, atol=1e-12)
    assert read.metres_per_pixel == pytest.approx(mpp)
    with pytest.raises(KeypointsFileError, match="needs scale"):
        read_keypoints_file(path, units="px")
    # a distance in millimetres where metres are expected
    with pytest.raises(KeypointsFileError, match="check the scale"):
        read_keypoints_file(path, units="px", origin_px=origin.tolist(),
                            scale={**scale, "distance": 1e3 * scale["distance"]})


def test_npz_with_a_separate_tip_and_frame_numbers_need_a_given_rate(tmp_path):
    points = _points()
    path = tmp_path / "k.npz"
    np.savez(path, centreline=points[:, :-1], tip=points[:, -1])
    with pytest.raises(KeypointsFileError, match="give the frame rate"):
        read_keypoints_file(path)
    read = read_keypoints_file(path, fps=FPS)
    assert read.fps_source == "given"
    np.testing.assert_allclose(read.keypoints.points, points)
    np.testing.assert_allclose(read.keypoints.times, np.arange(6) / FPS)


def test_missed_frames_become_nan_rows(tmp_path):
    points = _points(8)
    kept = [0, 1, 2, 5, 6, 7]  # frames 3 and 4 dropped by the tracker
    points[6] = np.nan  # and frame 6 written as NaN
    read = read_keypoints_file(_csv(tmp_path / "k.csv", np.array(kept) / FPS, points[kept]))
    assert read.keypoints.frame_count == 8
    assert read.keypoints.missing_frames == [3, 4, 6]
    assert "frames [3, 4] are missing" in read.notes[1] and "frames [6]" in read.notes[2]


def test_units_that_look_like_millimetres_or_pixels(tmp_path):
    path = _csv(tmp_path / "k.csv", np.arange(6) / FPS, 1e3 * _points())
    with pytest.raises(KeypointsFileError, match="look like millimetres or pixels; set units: mm"):
        read_keypoints_file(path)
    assert read_keypoints_file(path, units="mm").keypoints.points.max() == pytest.approx(0.205)
    small = _csv(tmp_path / "m.csv", np.arange(6) / FPS, _points())
    with pytest.raises(KeypointsFileError, match="look like metres read as a larger unit"):
        read_keypoints_file(small, units="mm")


def test_transposed_arrays_are_named_with_the_transpose_that_fixes_them(tmp_path):
    points = _points()
    path = tmp_path / "k.npz"
    np.savez(path, points=points.transpose(0, 2, 1), times=np.arange(6) / FPS)
    with pytest.raises(KeypointsFileError, match=r"transpose\(0, 2, 1\)"):
        read_keypoints_file(path)
    np.savez(path, points=points.transpose(2, 1, 0), times=np.arange(6) / FPS)
    with pytest.raises(KeypointsFileError, match=r"transpose\(2, 1, 0\)"):
        read_keypoints_file(path)
    np.savez(path, centreline=points[:, :-1], tip=points[:, -1].T, times=np.arange(6) / FPS)
    with pytest.raises(KeypointsFileError, match=r"'tip'.*use tip.T"):
        read_keypoints_file(path)


def test_time_going_backwards_and_inconsistent_rates(tmp_path):
    times = np.arange(6) / FPS
    times[[2, 3]] = times[[3, 2]]
    with pytest.raises(KeypointsFileError, match=r"goes backwards.*rows 2→3.*sort the rows"):
        read_keypoints_file(_csv(tmp_path / "b.csv", times, _points()))
    path = _csv(tmp_path / "k.csv", np.arange(6) / FPS, _points())
    with pytest.raises(KeypointsFileError, match="fps is given as 25"):
        read_keypoints_file(path, fps=25.0)
    with pytest.raises(KeypointsFileError, match="in seconds"):
        read_keypoints_file(_csv(tmp_path / "ms.csv", 1e3 * np.arange(6) / FPS, _points()))


def test_nan_and_inf_frames(tmp_path):
    times = np.arange(6) / FPS
    points = _points()
    points[[2, 4], 1, 0] = np.inf
    with pytest.raises(KeypointsFileError, match=r"frames \[2, 4\] hold inf"):
        read_keypoints_file(_csv(tmp_path / "i.csv", times, points))
    points = _points()
    points[3, 0] = np.nan
    with pytest.raises(KeypointsFileError, match=r"frames \[3\] are partly NaN"):
        read_keypoints_file(_csv(tmp_path / "p.csv", times, points))
    with pytest.raises(KeypointsFileError, match="every frame is NaN"):
        read_keypoints_file(_csv(tmp_path / "n.csv", times, np.full_like(points, np.nan)))
    points = _points()
    points[:2] = np.nan
    with pytest.raises(KeypointsFileError, match="first frame is all NaN.*before row 2"):
        read_keypoints_file(_csv(tmp_path / "f.csv", times, points))


def test_headers_and_point_counts(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("t,a,b\n0,1,2\n")
    with pytest.raises(KeypointsFileError, match="expected 'time,x0,y0"):
        read_keypoints_file(path)
    good = _csv(tmp_path / "k.csv", np.arange(6) / FPS, _points())
    with pytest.raises(KeypointsFileError, match="set the measurement's count to 4"):
        read_keypoints_file(good, points=5)
    with pytest.raises(KeypointsFileError, match="no keypoints file"):
        read_keypoints_file(tmp_path / "none.csv")
