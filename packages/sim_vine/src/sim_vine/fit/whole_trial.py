"""A whole trial with wall contact, for the joint estimation's tests and measurements.

The ``wall_vertical`` vine of the video tests (6 bodies, K 0.03 N m/rad at its 3 pins,
C 0.002 N m s/rad) released straight and growing at 0.3 m/s, filmed at 30 fps (3 model
steps of 1/90 s per frame): it swings under its weight, reaches the wall after about 0.6 s
and slides down along it to the end of the trial. Its keypoints carry Gaussian noise and
some frames are missing. ``tests/test_estimation_warm_start.py`` and
``examples/vine/estimate_whole_trial.py`` (the package README's numbers) use it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..kinematics import keypoints
from ..scene import make_simulator
from ..vision.keypoints import Keypoints
from .shooting import VideoRecording
from .warm_start import WarmStart, simulated_warm_start

__all__ = ["FPS", "GROWTH_RATE", "POINTS", "TRUTH", "wall_vine", "whole_trial"]

FPS = 30.0
"""Frames per second."""
GROWTH_RATE = 0.3
"""Growth rate of the truth and of the recording [m/s]."""
POINTS = 6
"""Keypoints per frame (base to tip)."""
TRUTH = {"joint.stiffness": 0.03, "joint.damping": 0.002}
"""The truth's K [N m/rad] and C [N m s/rad]."""


def wall_vine(**options):
    """The trial's simulator (``wall_vertical`` with 6 bodies) with vine ``options``."""
    return make_simulator(scene="wall_vertical", **{"bodies": 6, **options})


def whole_trial(*, frames: int = 60, noise_mm: float = 0.3,
                missing: Sequence[int] = (7, 15, 33), seed: int = 0
                ) -> tuple[VideoRecording, WarmStart]:
    """The recording and the truth's trajectory at every model step (with its contacts).

    Args:
        frames: frames of the recording (60: 2 s).
        noise_mm: standard deviation of the keypoints' Gaussian noise [mm].
        missing: frames without keypoints (NaN rows).
        seed: the noise's seed.
    """
    sim = wall_vine(stiffness=TRUTH["joint.stiffness"], damping=TRUTH["joint.damping"])
    design = sim.design_space().defaults()
    substeps = 3
    truth = simulated_warm_start(sim, design, initial_state=sim.initial_state(design),
                                 growth_rate=np.full(substeps * (frames - 1), GROWTH_RATE),
                                 dt=1.0 / (FPS * substeps))
    points = np.stack([keypoints(sim.model, q, POINTS) for q in truth.body_q[::substeps]])
    points += 1e-3 * noise_mm * np.random.default_rng(seed).standard_normal(points.shape)
    points[[f for f in missing if f < frames]] = np.nan
    recording = VideoRecording(keypoints=Keypoints(times=np.arange(frames) / FPS,
                                                   points=points),
                               growth_rate=GROWTH_RATE, name="whole trial")
    return recording, truth
