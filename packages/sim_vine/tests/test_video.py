"""Reading and writing frames: video files, image folders, globs, and their errors."""

import cv2
import numpy as np
import pytest

from sim_vine.vision.video import VideoError, draw_vine_frame, read_frames, write_video


def _frames(count=5, width=64, height=48):
    rng = np.random.default_rng(0)
    return [draw_vine_frame(np.array([[5.0, 24.0], [20.0 + 5 * i, 10.0 + 3 * i]]), width=width,
                            height=height, thickness_px=5, noise_std=3.0, rng=rng)
            for i in range(count)]


def test_png_sequence_roundtrip_is_lossless_with_timestamps(tmp_path):
    frames = _frames()
    folder = write_video(frames, tmp_path / "seq", fps=30.0)
    read = list(read_frames(folder, fps=30.0, start_time=0.5))
    assert [f.index for f in read] == list(range(5))
    np.testing.assert_allclose([f.time for f in read], 0.5 + np.arange(5) / 30.0)
    for original, frame in zip(frames, read, strict=True):
        np.testing.assert_array_equal(original, frame.image)
    # a glob picks the same files in natural order
    assert len(list(read_frames(str(tmp_path / "seq" / "*.png"), fps=30.0))) == 5


def test_avi_roundtrip_keeps_count_size_and_rate(tmp_path):
    frames = _frames(count=7)
    path = write_video(frames, tmp_path / "clip.avi", fps=90.0)
    read = list(read_frames(path))
    assert len(read) == 7
    assert read[0].image.shape == frames[0].shape
    np.testing.assert_allclose(read[-1].time, 6 / 90.0, rtol=1e-6)
    # MJPG is lossy but close
    assert np.abs(read[3].image.astype(int) - frames[3].astype(int)).mean() < 6.0


def test_natural_order_of_numbered_images(tmp_path):
    for i in (10, 9, 1):
        cv2.imwrite(str(tmp_path / f"f{i}.png"), np.full((4, 4, 3), i, np.uint8))
    values = [int(f.image[0, 0, 0]) for f in read_frames(tmp_path, fps=1.0)]
    assert values == [1, 9, 10]


def test_bad_sources_raise_clear_errors(tmp_path):
    with pytest.raises(VideoError, match="no video or image sequence"):
        list(read_frames(tmp_path / "absent.avi"))
    with pytest.raises(VideoError, match="no image files"):
        list(read_frames(tmp_path, fps=30.0))
    write_video(_frames(2), tmp_path / "seq", fps=10.0)
    with pytest.raises(VideoError, match="frame rate"):
        list(read_frames(tmp_path / "seq"))
    (tmp_path / "seq" / "frame_00002.png").write_bytes(b"not a png")
    with pytest.raises(VideoError, match="corrupt"):
        list(read_frames(tmp_path / "seq", fps=10.0))
    (tmp_path / "broken.avi").write_bytes(b"garbage" * 10)
    with pytest.raises(VideoError, match="cannot open|no decodable"):
        list(read_frames(tmp_path / "broken.avi", fps=10.0))


def test_mixed_sizes_and_bad_frames_are_rejected(tmp_path):
    cv2.imwrite(str(tmp_path / "a1.png"), np.zeros((4, 4, 3), np.uint8))
    cv2.imwrite(str(tmp_path / "a2.png"), np.zeros((5, 4, 3), np.uint8))
    with pytest.raises(VideoError, match="one size"):
        list(read_frames(tmp_path, fps=1.0))
    with pytest.raises(VideoError, match="uint8 BGR"):
        write_video([np.zeros((4, 4))], tmp_path / "x.avi", fps=1.0)
    with pytest.raises(VideoError, match="no frames"):
        write_video([], tmp_path / "y.avi", fps=1.0)


def test_draw_vine_frame_draws_the_vine_and_blobs():
    image = draw_vine_frame(np.array([[10.0, 10.0], [50.0, 10.0]]), width=64, height=32,
                            thickness_px=6, blobs_px=[(55.0, 25.0, 3.0)])
    assert image.shape == (32, 64, 3) and image.dtype == np.uint8
    green = (image[:, :, 1] > 150) & (image[:, :, 0] < 100)
    assert green[10, 30] and green[25, 55] and not green[25, 30]
    # out of focus: the vine's colour spreads past its edge, its middle stays green
    blurred = draw_vine_frame(np.array([[10.0, 10.0], [50.0, 10.0]]), width=64, height=32,
                              thickness_px=6, blur_px=2.0)
    assert blurred[10, 30, 1] > 150 and blurred[10, 30, 0] < 100
    assert image[16, 30, 0] == 235 and blurred[16, 30, 0] < 225
    with pytest.raises(VideoError, match="blur_px must be a non-negative number"):
        draw_vine_frame(None, width=8, height=8, thickness_px=2, blur_px=-1.0)
    with pytest.raises(VideoError, match="shape"):
        draw_vine_frame(np.zeros(4), width=8, height=8, thickness_px=2)
    with pytest.raises(VideoError, match="NaN"):
        draw_vine_frame(np.array([[0.0, 0.0], [np.nan, 1.0]]), width=8, height=8, thickness_px=2)
