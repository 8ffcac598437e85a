"""Video frames in and out: read a video file or an image sequence with timestamps, write
videos and image sequences, and draw synthetic vine frames for validation.

Frames are OpenCV BGR images, uint8 arrays of shape (height, width, 3). Timestamps are
``start_time + index / fps`` seconds: a fixed frame rate, which is what camera videos and
numbered image sequences record.
"""

from __future__ import annotations

import dataclasses
import glob
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import cv2
import numpy as np

__all__ = [
    "Frame",
    "VideoError",
    "IMAGE_SUFFIXES",
    "read_frames",
    "write_video",
    "draw_vine_frame",
    "blurred_and_noisy",
]

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")
"""File endings treated as single images of an image sequence."""

_FOURCC = {".avi": "MJPG", ".mp4": "mp4v"}
_SUBPIXEL_BITS = 4  # cv2.polylines draws at 1/16 px precision with shift=4


class VideoError(ValueError):
    """A video or image sequence is missing, unreadable or inconsistent."""


@dataclasses.dataclass(frozen=True)
class Frame:
    """One video frame.

    Attributes:
        index: position in the source, starting at 0.
        time: timestamp [s].
        image: BGR image, uint8, shape (height, width, 3).
    """

    index: int
    time: float
    image: np.ndarray


def _natural_key(path: Path):
    # "frame_10.png" sorts after "frame_9.png"
    return [int(tok) if tok.isdigit() else tok for tok in re.split(r"(\d+)", path.name)]


def _image_files(source: str | Path) -> list[Path] | None:
    """The image files of a folder or glob pattern, sorted naturally; None for a video."""
    text, path = str(source), Path(source)
    pattern = any(ch in text for ch in "*?[")
    if pattern or path.is_dir():
        found = map(Path, glob.glob(text)) if pattern else path.iterdir()
        files = [p for p in found if p.suffix.lower() in IMAGE_SUFFIXES]
        if not files:
            where = f"the pattern {text!r} matches" if pattern else f"the folder {text!r} holds"
            raise VideoError(f"{where} no image files ({', '.join(IMAGE_SUFFIXES)})")
        return sorted(files, key=_natural_key)
    if not path.exists():
        raise VideoError(f"no video or image sequence at {text!r}; give a video file, a folder "
                         "of images or a glob pattern such as 'frames/*.png'")
    return None


def _check_fps(fps, what: str) -> float:
    if fps is None or not np.isfinite(fps) or fps <= 0:
        raise VideoError(f"{what} has no usable frame rate ({fps!r}); pass fps=<frames per second>")
    return float(fps)


def read_frames(source: str | Path, *, fps: float | None = None,
                start_time: float = 0.0) -> Iterator[Frame]:
    """Yield the frames of a video file, a folder of images or a glob pattern, in order.

    Args:
        source: a video file (anything OpenCV's FFmpeg/MJPG readers open), a folder of images
            (sorted by name with numbers compared as numbers) or a glob like ``"run/*.png"``.
        fps: frame rate [1/s]; required for image sequences, overrides the file's rate for
            videos.
        start_time: timestamp of the first frame [s].

    Raises:
        VideoError: the source is missing, cannot be decoded, has no frames or no frame rate,
            or an image has a different size than the first.
    """
    files = _image_files(source)
    if files is not None:
        rate = _check_fps(fps, f"the image sequence {str(source)!r}")
        shape = None
        for index, path in enumerate(files):
            image = cv2.imread(str(path), cv2.IMREAD_COLOR)
            if image is None:
                raise VideoError(f"cannot read image {str(path)!r} (frame {index}); is it corrupt?")
            if shape is not None and image.shape != shape:
                raise VideoError(f"image {str(path)!r} has size {image.shape[:2]} but the sequence "
                                 f"started with {shape[:2]}; all frames must have one size")
            shape = image.shape
            yield Frame(index, start_time + index / rate, image)
        return
    capture = cv2.VideoCapture(str(source))
    try:
        if not capture.isOpened():
            raise VideoError(f"OpenCV cannot open the video {str(source)!r}; is it a video file "
                             "(the headless build reads MJPG .avi and FFmpeg formats)?")
        rate = _check_fps(fps if fps is not None else capture.get(cv2.CAP_PROP_FPS),
                          f"the video {str(source)!r}")
        index = 0
        while True:
            ok, image = capture.read()
            if not ok:
                break
            yield Frame(index, start_time + index / rate, image)
            index += 1
        if index == 0:
            raise VideoError(f"the video {str(source)!r} has no decodable frames")
    finally:
        capture.release()


def write_video(frames: Iterable[np.ndarray], path: str | Path, *, fps: float) -> Path:
    """Write BGR uint8 frames to ``path`` and return it.

    A path ending in ``.avi`` (MJPG) or ``.mp4`` (mp4v) becomes a video; any other path is a
    folder that receives ``frame_00000.png``, ``frame_00001.png``, ... (lossless).
    """
    path = Path(path)
    _check_fps(fps, f"write_video({str(path)!r})")
    suffix = path.suffix.lower()
    if suffix not in _FOURCC:
        path.mkdir(parents=True, exist_ok=True)
        for index, image in enumerate(frames):
            if not cv2.imwrite(str(path / f"frame_{index:05d}.png"), _checked_image(image)):
                raise VideoError(f"cannot write {str(path / f'frame_{index:05d}.png')!r}")
        return path
    writer = None
    try:
        for image in frames:
            image = _checked_image(image)
            if writer is None:
                height, width = image.shape[:2]
                writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*_FOURCC[suffix]),
                                         float(fps), (width, height))
                if not writer.isOpened():
                    raise VideoError(f"OpenCV cannot write {str(path)!r} with codec "
                                     f"{_FOURCC[suffix]}; try an .avi path or a folder of PNGs")
            writer.write(image)
    finally:
        if writer is not None:
            writer.release()
    if writer is None:
        raise VideoError(f"write_video({str(path)!r}) received no frames")
    return path


def _checked_image(image) -> np.ndarray:
    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise VideoError(f"frames must be uint8 BGR images of shape (height, width, 3), got "
                         f"{image.dtype} {image.shape}")
    return image


def draw_vine_frame(
    centerline_px: np.ndarray | None,
    *,
    width: int,
    height: int,
    thickness_px: float,
    vine_bgr: Sequence[int] = (40, 200, 40),
    background_bgr: Sequence[int] = (235, 235, 235),
    noise_std: float = 0.0,
    rng: np.random.Generator | None = None,
    blobs_px: Sequence[tuple[float, float, float]] = (),
    background: np.ndarray | None = None,
    blur_px: float = 0.0,
) -> np.ndarray:
    """Draw a vine as a thick anti-aliased polyline with round ends on a plain background.

    Args:
        centerline_px: centerline vertices in pixels (x right, y down), shape (m, 2);
            ``None`` draws the scene without the vine.
        width, height: image size [px].
        thickness_px: vine diameter [px].
        vine_bgr, background_bgr: colours.
        noise_std: standard deviation of additive Gaussian pixel noise (0-255 scale).
        rng: random generator for the noise.
        blobs_px: distractor discs ``(x, y, radius)`` in the vine colour.
        background: a BGR image (height, width, 3) to draw on (obstacles, a scene);
            default a plain ``background_bgr``.
        blur_px: standard deviation [px] of a Gaussian blur of the drawn scene before the
            noise (a lens out of focus); 0 draws it sharp.

    Returns:
        BGR image, uint8, shape (height, width, 3).
    """
    if not (np.isfinite(blur_px) and blur_px >= 0):
        raise VideoError(f"blur_px must be a non-negative number of pixels, got {blur_px!r}")
    if centerline_px is not None:
        centerline_px = np.asarray(centerline_px, dtype=np.float64)
        if centerline_px.ndim != 2 or centerline_px.shape[1] != 2 or len(centerline_px) < 2:
            raise VideoError(f"centerline_px must have shape (m >= 2, 2), got "
                             f"{centerline_px.shape}")
        if not np.all(np.isfinite(centerline_px)):
            raise VideoError("centerline_px holds NaN or infinite coordinates")
    if background is None:
        image = np.full((int(height), int(width), 3), background_bgr, np.uint8)
    else:
        image = _checked_image(background).copy()
        if image.shape[:2] != (int(height), int(width)):
            raise VideoError(f"the background is {image.shape[1]}×{image.shape[0]} px but the "
                             f"frame is {int(width)}×{int(height)} px")
    scale = 1 << _SUBPIXEL_BITS
    if centerline_px is not None:
        # OpenCV's thick lines are round-capped and joined, which is how an inflated vine
        # looks.
        fixed = np.round(centerline_px * scale).astype(np.int32).reshape(-1, 1, 2)
        cv2.polylines(image, [fixed], False, tuple(int(c) for c in vine_bgr),
                      thickness=max(1, int(round(thickness_px))), lineType=cv2.LINE_AA,
                      shift=_SUBPIXEL_BITS)
    for x, y, radius in blobs_px:
        centre = (int(round(x * scale)), int(round(y * scale)))
        cv2.circle(image, centre, int(round(radius * scale)), tuple(int(c) for c in vine_bgr),
                   -1, cv2.LINE_AA, _SUBPIXEL_BITS)
    return blurred_and_noisy(image, blur_px=blur_px, noise_std=noise_std, rng=rng)


def blurred_and_noisy(image: np.ndarray, *, blur_px: float = 0.0, noise_std: float = 0.0,
                      rng: np.random.Generator | None = None) -> np.ndarray:
    """A drawn frame as a camera records it: a Gaussian blur of ``blur_px`` [px] standard
    deviation (a lens out of focus), then additive Gaussian pixel noise of ``noise_std``
    (0-255 scale) from ``rng``, rounded to uint8.

    Args:
        image: BGR image, uint8 or float (0-255), shape (height, width, 3).
    """
    if blur_px > 0:
        image = cv2.GaussianBlur(image, (0, 0), sigmaX=float(blur_px))
    if noise_std > 0:
        rng = rng if rng is not None else np.random.default_rng(0)
        noisy = image.astype(np.float64) + rng.normal(0.0, noise_std, image.shape)
        return np.clip(np.round(noisy), 0, 255).astype(np.uint8)
    return np.clip(np.round(image), 0, 255).astype(np.uint8)
