"""A user's recording made from a simulated vine and made harder the way real ones are, as
the pipeline (:mod:`sim_vine.fit.pipeline`) reads it: a keypoints CSV in pixels with noise
and frames left out, a scene file and the pipeline's YAML, with a scale error, growth that
changes during the trial, a frame rate written wrong or a growth model other than the
fitted one.

The truth: the ``wall_vertical`` vine with 6 bodies, K 0.03 N m/rad, C 0.002 N m s/rad,
released straight and growing into the wall, 27 frames at 30 fps by default (3 model steps
of 1/90 s each). The fit starts 30 % below K (0.021) and 50 % above C (0.003). The tests of
``tests/test_pipeline.py`` and ``examples/vine/fit_convergence.py`` (the package README's
table) use it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ..kinematics import keypoints as model_keypoints
from ..scene import load_scene, make_simulator
from .shooting import simulate_states

__all__ = ["FPS", "FRAMES", "POINTS", "TRUE_DAMPING", "TRUE_STIFFNESS", "harder_recording"]

FPS = 30.0
"""Frames per second of the recording."""
FRAMES = 27
"""Frames of the recording."""
POINTS = 6
"""Keypoints per frame (base to tip)."""
TRUE_STIFFNESS = 0.03
"""K of the truth [N m/rad]."""
TRUE_DAMPING = 0.002
"""C of the truth [N m s/rad] (the vine's default)."""


def harder_recording(folder: str | Path, *, scale_error: float = 0.05, noise_px: float = 0.3,
                     dropped: Sequence[int] = (7, 15), metres_per_pixel: float = 0.002,
                     scene_scaled: bool = True, growth_rate: float | Sequence[float] = 0.3,
                     written_fps: float = FPS, truth: Mapping[str, Any] | None = None,
                     fit: Mapping[str, Any] | None = None, frames: int = FRAMES,
                     seed: int = 0) -> Path:
    """Write ``trial.csv``, ``scene.yaml`` and ``trial.yaml`` into ``folder``; return the
    path of ``trial.yaml``.

    Args:
        folder: an existing folder.
        scale_error: the recording's scale is this fraction too large (every length the
            user measures is too long by it).
        noise_px: standard deviation of the Gaussian noise on every keypoint [px].
        dropped: frames left out of the file.
        metres_per_pixel: the camera's true scale [m/px].
        scene_scaled: the user measured the wall (its ends and thickness) and the vine's
            length in the same (wrong) scale; false places the wall in true metres.
        growth_rate: the truth's growth rate [m/s], a number or one per frame interval
            (``frames`` − 1); the pipeline YAML's ``growth_rate`` is 0.3 m/s whatever it is.
        written_fps: the frame rate the file's time column is written at (a wrong one
            makes every time off by ``FPS / written_fps``).
        truth: vine options of the simulated truth over the ones above (e.g.
            ``{"growth": "tip"}``, or ``{"growth": "evert", "max_length": 0.6, "bodies":
            12}``); the scene file has the truth's body count.
        fit: the YAML's ``fit`` block over the default one (K, C and the growth offset
            free, 60 iterations, stop file ``STOP``).
        frames: frames of the recording (a longer one, 45 or 60, lets the tip slide
            further along the wall).
        seed: the noise's seed.
    """
    folder = Path(folder)
    sim = make_simulator(scene="wall_vertical",
                         **{"bodies": 6, "stiffness": TRUE_STIFFNESS, **dict(truth or {})})
    design = sim.design_space().defaults()
    states = simulate_states(sim, design, initial_state=sim.initial_state(design),
                             growth_rate=growth_rate, frames=frames, substeps=3, dt=1 / 90)
    true_points = np.stack([model_keypoints(sim.model, s.body_q, POINTS) for s in states])
    origin = np.array([40.0, 20.0])
    pixels = origin + true_points * [1.0, -1.0] / metres_per_pixel
    pixels += noise_px * np.random.default_rng(seed).standard_normal(pixels.shape)
    kept = [f for f in range(frames) if f not in dropped]
    header = "time," + ",".join(f"x{i},y{i}" for i in range(POINTS))
    table = np.column_stack([np.arange(frames)[kept] / written_fps,
                             pixels[kept].reshape(len(kept), -1)])
    np.savetxt(folder / "trial.csv", table, delimiter=",", header=header, comments="",
               fmt="%.6f")
    k = 1.0 + scale_error
    scene = load_scene("wall_vertical")
    scene.pop("view")
    if scene_scaled:
        for wall in scene["obstacles"]:
            wall["start"] = [k * v for v in wall["start"]]
            wall["end"] = [k * v for v in wall["end"]]
            wall["thickness"] = k * wall["thickness"]
    scene.update(bodies=sim.model.body_count, length=k * 0.25)
    (folder / "scene.yaml").write_text(yaml.safe_dump(scene))
    spec = {"keypoints": {"path": "trial.csv", "units": "px", "origin_px": origin.tolist(),
                          "scale": {"pixels": [[0, 0], [100, 0]],
                                    "distance": 100 * metres_per_pixel * k}},
            "scene": "scene.yaml", "growth_rate": 0.3,
            "simulator": {"stiffness": 0.021, "damping": 0.003},
            "fit": {"free": ["joint.stiffness", "joint.damping", "growth.offset"],
                    "iterations": 60, "stop_file": "STOP", **dict(fit or {})}}
    (folder / "trial.yaml").write_text(yaml.safe_dump(spec))
    return folder / "trial.yaml"
