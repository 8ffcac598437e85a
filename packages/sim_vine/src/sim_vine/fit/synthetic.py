"""Synthetic vine videos with known truth, for validating the video fitting pipeline.

:func:`synthetic_video` simulates a vine at a known design, projects its centerline into a
camera image through a known homography (a plane seen at an angle) and draws every video
frame with OpenCV (:func:`sim_vine.vision.video.draw_vine_frame`): obstacles in grey, the vine as a
thick green line, optionally blurred (a lens out of focus, and motion blur: the vine moving
while the shutter is open), Gaussian pixel noise on top. It returns the frames
together with the true keypoints in metres and in pixels, so keypoint extraction and
parameter fits can be scored against the truth that made the video.

Frames and model steps: frame f is the state after ``f × substeps`` model steps of ``dt``,
so the video runs at ``fps = 1 / (substeps × dt)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import cv2
import numpy as np

from ..kinematics import centerline_vertices
from ..kinematics import keypoints as model_keypoints
from ..obstacles import Circle, Polygon
from ..state import VineState
from ..vision.keypoints import Calibration
from ..vision.video import blurred_and_noisy, draw_vine_frame
from .shooting import growth_rates, simulate_states

__all__ = ["SyntheticVideo", "draw_obstacles", "synthetic_video", "tilted_calibration"]


@dataclasses.dataclass(frozen=True)
class SyntheticVideo:
    """A rendered video and the truth behind it.

    Attributes:
        images: BGR frames, uint8, each (height, width, 3).
        times: frame timestamps [s], shape (frames,).
        states: the simulated state at every frame.
        truth: true keypoints [m], shape (frames, points, 2), base first.
        truth_px: the same projected into the image [px], shape (frames, points, 2).
        calibration: the homography that maps the image back to the motion plane.
        base_px: the base pixel (x, y).
        base_direction_px: the direction the vine leaves the base in the image, (dx, dy).
        hidden: frames drawn without the vine (to exercise missing-frame handling).
    """

    images: list[np.ndarray]
    times: np.ndarray
    states: list[VineState]
    truth: np.ndarray
    truth_px: np.ndarray
    calibration: Calibration
    base_px: np.ndarray
    base_direction_px: np.ndarray
    hidden: tuple[int, ...]


def tilted_calibration(view: Sequence[float], *, width: int, height: int,
                       tilt: float = 0.06) -> Calibration:
    """A homography for a camera that sees the world rectangle ``view`` at an angle.

    The rectangle ``(x_min, x_max, y_min, y_max)`` [m] fills the image with a margin of 4 %,
    its top edge narrowed by ``tilt`` of the width on each side (perspective) and y flipped
    (image y points down).
    """
    x0, x1, y0, y1 = (float(v) for v in view)
    if not (x0 < x1 and y0 < y1):
        raise ValueError(f"view must be (x_min, x_max, y_min, y_max) with min < max, got {view}")
    mx, my = 0.04 * width, 0.04 * height
    inset = tilt * width
    pixels = np.array([[mx, height - my], [width - mx, height - my],
                       [width - mx - inset, my], [mx + inset, my]])
    world = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]])
    return Calibration.from_reference_points(pixels, world)


def draw_obstacles(image: np.ndarray, obstacles, calibration: Calibration,
                    colour: Sequence[int]) -> None:
    """Fill every obstacle (circle, polygon, wall) into the BGR ``image`` in place, mapped
    from metres to pixels through ``calibration``, anti-aliased."""
    scale = 16  # fillPoly's 4 fractional bits
    for obstacle in obstacles:
        if isinstance(obstacle, Circle):
            angles = np.linspace(0.0, 2 * np.pi, 64, endpoint=False)
            outline = obstacle.center + obstacle.radius * np.stack(
                [np.cos(angles), np.sin(angles)], axis=1)
        elif isinstance(obstacle, Polygon):
            outline = obstacle.vertices
        else:  # a Wall
            direction = obstacle.end - obstacle.start
            normal = np.array([-direction[1], direction[0]]) / np.linalg.norm(direction)
            half = 0.5 * obstacle.thickness * normal
            outline = [obstacle.start - half, obstacle.end - half, obstacle.end + half,
                       obstacle.start + half]
        fixed = np.round(calibration.to_pixels(np.asarray(outline)) * scale).astype(np.int32)
        cv2.fillPoly(image, [fixed], tuple(int(c) for c in colour), cv2.LINE_AA, 4)


def synthetic_video(
    simulator,
    design,
    *,
    frames: int,
    dt: float,
    substeps: int,
    points: int,
    calibration: Calibration,
    width: int,
    height: int,
    growth_rate=0.0,
    initial_state: VineState | None = None,
    thickness_px: float = 7.0,
    noise_std: float = 6.0,
    blur_px: float = 0.0,
    exposure_steps: int = 0,
    seed: int = 0,
    hidden: Sequence[int] = (),
    vine_bgr: Sequence[int] = (40, 200, 40),
    background_bgr: Sequence[int] = (235, 235, 235),
    obstacle_bgr: Sequence[int] = (120, 120, 120),
) -> SyntheticVideo:
    """Simulate a vine and draw the video a camera would record of it.

    Args:
        simulator: a :class:`~sim_vine.simulator.VineSimulator` (or a wrapper with
            ``model``) and the ``design`` to simulate.
        frames: number of frames (the first shows the initial state).
        dt: model step [s]; substeps: model steps per frame.
        points: keypoints per frame in the returned truth.
        calibration: maps image pixels to the motion plane; the world is drawn through its
            inverse.
        width, height: image size [px].
        growth_rate: commanded growth rate [m/s], a number or one per frame interval.
        initial_state: the state of frame 0 (default: the simulator's initial state).
        thickness_px: the vine's drawn diameter [px].
        noise_std: Gaussian pixel noise (0-255 scale).
        blur_px: standard deviation [px] of a Gaussian blur of every frame before the noise
            (a lens out of focus).
        exposure_steps: motion blur: the shutter stays open for this many model steps
            (``exposure_steps × dt`` [s]), centred on the frame's time, and the frame is the
            mean of the vine drawn at every model state in that window (before the
            moment the run starts, the initial state: the vine held still). 0: a sharp
            instant. The truth stays the state at the frame's time.
        seed: seeds the noise.
        hidden: frame indices drawn without the vine (an occluded or dropped frame).
        vine_bgr, background_bgr, obstacle_bgr: colours.
    """
    frames = int(frames)
    if frames < 2:
        raise ValueError(f"a synthetic video needs at least 2 frames, got {frames}")
    bad = [int(i) for i in hidden if not 0 <= int(i) < frames]
    if bad:
        raise ValueError(f"hidden frames {bad} are outside 0 … {frames - 1}")
    model = simulator.model
    if initial_state is None:
        initial_state = simulator.initial_state(design)
    exposure_steps = int(exposure_steps)
    if exposure_steps < 0:
        raise ValueError(f"exposure_steps must be a number of model steps >= 0, got "
                         f"{exposure_steps}")
    background = np.full((int(height), int(width), 3), background_bgr, np.uint8)
    draw_obstacles(background, model.obstacles, calibration, obstacle_bgr)
    rng = np.random.default_rng(seed)

    def drawn(q, *, noise: float, blur: float, hide: bool) -> np.ndarray:
        # a hidden frame: the camera sees the scene without the vine
        line = None if hide else calibration.to_pixels(centerline_vertices(model, q))
        return draw_vine_frame(line, width=int(width), height=int(height),
                               thickness_px=thickness_px, vine_bgr=vine_bgr,
                               background=background, noise_std=noise, rng=rng,
                               blur_px=blur)

    if exposure_steps == 0:
        states = simulate_states(simulator, design, initial_state=initial_state,
                                 growth_rate=growth_rate, frames=frames, substeps=substeps,
                                 dt=dt)
        images = [drawn(np.asarray(s.body_q), noise=noise_std, blur=blur_px,
                        hide=index in hidden) for index, s in enumerate(states)]
    else:
        states, images = _motion_blurred(
            simulator, design, drawn, initial_state=initial_state, growth_rate=growth_rate,
            frames=frames, substeps=int(substeps), dt=dt, exposure_steps=exposure_steps,
            hidden=hidden, blur_px=blur_px, noise_std=noise_std, rng=rng)
    truth = np.stack([model_keypoints(model, np.asarray(s.body_q), int(points)) for s in states])
    base = model.base
    base_px = calibration.to_pixels(base[:2])
    ahead = calibration.to_pixels(base[:2] + 0.01 * np.array([np.cos(base[2]), np.sin(base[2])]))
    return SyntheticVideo(
        images=images, times=np.arange(frames) * substeps * dt, states=list(states),
        truth=truth, truth_px=calibration.to_pixels(truth), calibration=calibration,
        base_px=base_px, base_direction_px=ahead - base_px,
        hidden=tuple(sorted(int(i) for i in hidden)))


def _motion_blurred(simulator, design, drawn, *, initial_state, growth_rate, frames: int,
                    substeps: int, dt: float, exposure_steps: int, hidden, blur_px: float,
                    noise_std: float, rng) -> tuple[list[VineState], list[np.ndarray]]:
    """The states at every frame and the frames exposed over ``exposure_steps`` model steps
    centred on each frame's time (see :func:`synthetic_video`): the run is simulated step by
    step (the frame rates' growth per step, the last rate for the steps past the last frame)
    and each frame is the mean of the sharp drawings of its window's states, then blurred
    and noisy as one image."""
    half = exposure_steps / 2.0
    past_end = int(np.ceil(half))
    rate = np.repeat(growth_rates(growth_rate, frames), substeps)
    rate = np.concatenate([rate, np.full(past_end, rate[-1])])
    fine = simulate_states(simulator, design, initial_state=initial_state, growth_rate=rate,
                           frames=len(rate) + 1, substeps=1, dt=dt)
    states, images = [], []
    for index in range(frames):
        centre = index * substeps
        states.append(fine[centre])
        # the window's end points are half-weighted (trapezoid rule over the shutter time)
        steps = np.arange(int(np.floor(centre - half)), int(np.ceil(centre + half)) + 1)
        weights = np.clip(half + 0.5 - np.abs(steps - centre), 0.0, 1.0)
        exposed = sum(w * drawn(np.asarray(fine[max(int(k), 0)].body_q), noise=0.0, blur=0.0,
                                hide=index in hidden).astype(np.float64)
                      for k, w in zip(steps, weights, strict=True) if w > 0)
        images.append(blurred_and_noisy(exposed / weights.sum(), blur_px=blur_px,
                                        noise_std=noise_std, rng=rng))
    return states, images
