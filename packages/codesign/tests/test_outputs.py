"""Videos: H.264 in MP4 that browsers play, decoded back; GIF without the encoder.
Figures: PNG."""

from __future__ import annotations

import sys

import av
import numpy as np
import pytest
from PIL import Image

import codesign.outputs
from codesign.outputs import even_frame, new_figure, write_figure, write_video


def moving_square(count: int, *, height: int, width: int) -> list[np.ndarray]:
    """``count`` RGB frames of a red square moving right on grey (red: a swap of the colour
    channels shows)."""
    frames = []
    for i in range(count):
        frame = np.full((height, width, 3), 40, dtype=np.uint8)
        frame[height // 4: height // 2, 3 * i: 3 * i + 8] = (230, 30, 30)
        frames.append(frame)
    return frames


def decode(path):
    """(codec name, pixel format, width, height, frame rate, decoded RGB frames) of a video."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        context = stream.codec_context
        frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(stream)]
        return context.name, context.pix_fmt, stream.width, stream.height, \
            stream.average_rate, frames


def test_the_video_is_h264_that_decodes_back_to_the_frames(tmp_path):
    frames = moving_square(12, height=48, width=64)
    path = write_video(tmp_path / "result", frames, fps=10)
    assert path == tmp_path / "result.mp4"
    codec, pixels, width, height, rate, decoded = decode(path)
    assert (codec, pixels, width, height, rate) == ("h264", "yuv420p", 64, 48, 10)
    assert len(decoded) == 12
    for i, (original, back) in enumerate(zip(frames, decoded, strict=True)):
        assert np.abs(original.astype(int) - back).mean() < 4.0  # lossy, but close
        assert np.abs(back[18, 3 * i + 4].astype(int) - (230, 30, 30)).max() < 25  # still red
    head = path.read_bytes()[:64]
    assert head[4:8] == b"ftyp" and b"moov" in head  # the index first: plays while loading
    assert [p.name for p in tmp_path.iterdir()] == ["result.mp4"]  # no temporary file left


def test_odd_sizes_are_grown_to_even_by_repeating_the_edge(tmp_path):
    frames = moving_square(3, height=49, width=65)
    _, _, width, height, _, decoded = decode(write_video(tmp_path / "odd", frames, fps=5))
    assert (width, height, len(decoded)) == (66, 50, 3)
    grown = even_frame(frames[0])
    assert grown.shape == (50, 66, 3)
    np.testing.assert_array_equal(grown[:49, :65], frames[0])
    np.testing.assert_array_equal(grown[49, :65], frames[0][48])
    np.testing.assert_array_equal(grown[:49, 65], frames[0][:, 64])
    assert even_frame(frames[0][:48, :64]).shape == (48, 64, 3)


def test_a_gif_when_the_h264_encoder_is_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(codesign.outputs, "H264_ENCODER", "no_such_encoder")
    path = write_video(tmp_path / "result", moving_square(4, height=16, width=20), fps=10)
    assert path == tmp_path / "result.gif"
    with Image.open(path) as gif:
        assert gif.n_frames == 4 and gif.size == (20, 16)
    assert [p.name for p in tmp_path.iterdir()] == ["result.gif"]


def test_a_gif_when_pyav_is_not_installed(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "av", None)  # import av raises ImportError
    with pytest.raises(ImportError):
        import av as _  # noqa: F401
    path = write_video(tmp_path / "result", moving_square(2, height=8, width=8), fps=10)
    assert path.name == "result.gif"


def test_a_figure_is_written_as_a_png_of_its_size(tmp_path):
    figure = new_figure(size=(3.0, 2.0))
    figure.add_subplot().plot([0, 1], [1, 0])
    path = write_figure(tmp_path / "line.png", figure)
    with Image.open(path) as image:
        assert image.format == "PNG" and image.size == (300, 200)
    assert [p.name for p in tmp_path.iterdir()] == ["line.png"]  # nothing half-written left
