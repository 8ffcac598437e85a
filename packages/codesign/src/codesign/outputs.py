"""Files a run writes: atomic writes, JSON, arrays without pickle, the loss curve and videos
(H.264 MP4, GIF without an H.264 encoder).

Every writer goes through :func:`atomic_write`: the data lands in a temporary file in the
same folder, which then replaces the target with :func:`os.replace`, so a reader (or a run
killed half-way) never sees a half-written file.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "atomic_write",
    "current_umask",
    "write_bytes",
    "write_text",
    "write_json",
    "write_npz",
    "read_npz",
    "json_safe",
    "summarize_array",
    "plot_loss",
    "new_figure",
    "write_figure",
    "write_video",
    "even_frame",
    "check_frame",
]


def atomic_write(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp_path)`` to fill a temporary file beside ``path``, then rename it.

    The temporary name keeps ``path``'s suffix (some writers pick the format from it). On
    any failure the temporary file is removed and ``path`` is untouched.
    """
    path = Path(path)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}",
                                    dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes 0600; use what open() would
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    return path


def current_umask() -> int:
    """The process's file-creation mask (read by setting and restoring it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically."""
    return atomic_write(path, lambda tmp: tmp.write_bytes(data))


def write_text(path: str | Path, text: str) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically."""
    return write_bytes(path, text.encode("utf-8"))


def json_safe(value: Any) -> Any:
    """``value`` with arrays as lists and NaN/inf as ``None`` (strict JSON has neither)."""
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        return json_safe(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


LARGEST_LISTED_ARRAY = 64
"""Arrays with more entries appear in JSON as shape and statistics (per-particle fields would
make megabytes of JSON); runs keep their values in ``.npz`` files."""


def summarize_array(value: Any) -> Any:
    """``value`` for JSON: its entries as (nested) lists, or ``{shape, min, mean, max}`` when it
    has more than :data:`LARGEST_LISTED_ARRAY` entries."""
    array = np.asarray(value, dtype=np.float64)
    if array.size <= LARGEST_LISTED_ARRAY:
        return array.tolist()
    return {"shape": list(array.shape), "min": float(array.min()),
            "mean": float(array.mean()), "max": float(array.max())}


def write_json(path: str | Path, value: Any) -> Path:
    """Write ``value`` as strict, indented JSON atomically."""
    return write_text(path, json.dumps(json_safe(value), indent=2, allow_nan=False) + "\n")


def write_npz(path: str | Path, arrays: Mapping[str, Any]) -> Path:
    """Save float/int arrays to an ``.npz`` atomically; object arrays (pickle) are refused."""
    clean = {}
    for name, value in arrays.items():
        array = np.asarray(value)
        if array.dtype == object:
            raise TypeError(f"array {name!r} has dtype object; only numeric arrays are saved "
                            "(no pickle)")
        clean[name] = array

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as handle:
            np.savez(handle, **clean)

    return atomic_write(path, write)


def read_npz(path: str | Path) -> dict[str, np.ndarray]:
    """Load every array of an ``.npz`` file without pickle."""
    with np.load(path, allow_pickle=False) as data:
        return {name: data[name] for name in data.files}


def new_figure(*, size=(6.4, 4.0), **options):
    """A matplotlib Figure of ``size`` [in] at 100 dpi on the Agg canvas (no pyplot, no global
    state); ``options`` go to ``Figure`` (e.g. ``layout="constrained"``)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=size, dpi=100, **options)
    FigureCanvasAgg(figure)
    return figure


def write_figure(path: str | Path, figure) -> Path:
    """``figure`` as a PNG at ``path``, written atomically."""
    return atomic_write(path, lambda tmp: figure.savefig(tmp, format="png"))


def plot_loss(path: str | Path, losses: Sequence[float], *, title: str = "") -> Path:
    """Draw the loss per iteration to a PNG (matplotlib's Agg canvas, no global state).

    A log scale is used when every loss is positive and they span more than two decades.
    """
    figure = new_figure()
    axes = figure.add_subplot()
    losses = np.asarray(losses, dtype=float)
    iterations = np.arange(1, len(losses) + 1)
    axes.plot(iterations, losses, marker="o" if len(losses) < 30 else None, markersize=3)
    finite = losses[np.isfinite(losses)]
    if finite.size and np.all(finite > 0) and finite.max() / finite.min() > 100.0:
        axes.set_yscale("log")
    axes.set_xlabel("iteration")
    axes.set_ylabel("loss")
    axes.set_title(title or "loss per iteration")
    axes.grid(True, alpha=0.3)
    figure.tight_layout()
    return write_figure(path, figure)


def check_frame(frame: Any, *, width: int, height: int) -> np.ndarray:
    """Return ``frame`` as uint8 (height, width, 3) or raise ValueError saying what is wrong."""
    frame = np.asarray(frame)
    if frame.shape != (height, width, 3):
        raise ValueError(f"render returned shape {frame.shape}; expected (height, width, 3) = "
                         f"({height}, {width}, 3)")
    if frame.dtype != np.uint8:
        raise ValueError(f"render returned dtype {frame.dtype}; expected uint8 RGB")
    return frame


H264_ENCODER = "libx264"
"""FFmpeg's H.264 encoder, bundled in PyAV's wheels for Linux, macOS and Windows."""


def even_frame(frame: np.ndarray) -> np.ndarray:
    """``frame`` (height, width, 3) grown to even height and width by repeating its last row
    and column: H.264 in 4:2:0 chroma needs both even."""
    height, width = frame.shape[:2]
    return np.pad(frame, ((0, height % 2), (0, width % 2), (0, 0)), mode="edge")


def _write_mp4(path: Path, frames: Sequence[np.ndarray], fps: int) -> bool:
    """Write ``frames`` as H.264 (yuv420p, even size, index at the front) in an MP4 through
    PyAV; ``False`` when PyAV or its encoder is unavailable (the caller writes a GIF)."""
    try:
        import av
    except ImportError:
        return False
    even = [even_frame(np.ascontiguousarray(frame)) for frame in frames]
    height, width = even[0].shape[:2]

    def write(tmp: Path) -> None:
        # faststart moves the index before the data so browsers play while downloading
        with av.open(str(tmp), "w", format="mp4", options={"movflags": "+faststart"}) as out:
            stream = out.add_stream(H264_ENCODER, rate=fps)
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            stream.options = {"crf": "20"}  # visually lossless for flat renderings, small files
            for frame in even:
                out.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
            out.mux(stream.encode())

    try:
        atomic_write(path, write)
    except (av.FFmpegError, ValueError):  # no such encoder (UnknownCodecError), or it failed
        return False
    return True


def _write_gif(path: Path, frames: Sequence[np.ndarray], fps: int) -> None:
    from PIL import Image

    images = [Image.fromarray(np.ascontiguousarray(frame)) for frame in frames]
    duration = max(20, round(1000 / fps))  # browsers clamp shorter GIF delays
    atomic_write(path, lambda tmp: images[0].save(tmp, format="GIF", save_all=True,
                                                  append_images=images[1:], duration=duration,
                                                  loop=0))


def write_video(stem: str | Path, frames: Sequence[np.ndarray], *, fps: int) -> Path:
    """Write RGB uint8 frames as ``stem.mp4`` (H.264 through PyAV) or, when PyAV or its
    H.264 encoder is unavailable, ``stem.gif`` (Pillow).

    Frames of odd height or width are grown by one row or column (:func:`even_frame`).
    Returns the path written.
    """
    if not frames:
        raise ValueError("no frames to write")
    stem = Path(stem)
    mp4 = stem.with_suffix(".mp4")
    if _write_mp4(mp4, frames, fps):
        return mp4
    gif = stem.with_suffix(".gif")
    _write_gif(gif, frames, fps)
    return gif
