"""Make the synthetic input videos of the vine fitting examples (committed beside their YAML).

Each video is a simulated vine at a known stiffness K and damping C, seen through a tilted
camera (a known homography) and drawn with OpenCV with Gaussian pixel noise, 320×240 at
30 fps, from a 90 Hz model (3 model steps per frame):

- ``oscillation.mp4``: a 10-body, 0.3 m cantilever released from a bent pose (the paper's
  Fig. 6 scenario), 3 s; truth K = 0.02 N m/rad, C = 2e-4 N m s/rad.
- ``wall.mp4``: a 10-body vine growing from 0.25 m at 0.3 m/s into a slanted wall and
  sliding along it (the paper's Fig. 7 scenario in the bundled ``wall_vertical`` scene: in
  a vertical plane, released straight at rest, it sags and swings under its weight before
  it reaches the wall after 0.4 s), 1.3 s; truth K = 0.05 N m/rad, C = 0.002 N m s/rad.

Run ``python examples/vine/make_videos.py`` (about 3 s; 133 KB and 79 KB files, mp4v): it
writes them into the sim_vine package's examples folder (package data) and prints the
calibration and base pixel that ``vine_oscillation.yaml`` and ``vine_wall.yaml`` use.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sim_vine.fit.synthetic import synthetic_video, tilted_calibration
from sim_vine.scene import make_simulator
from sim_vine.vision.video import write_video

OUTPUT_DIR = (Path(__file__).resolve().parents[2] / "packages" / "sim_vine" / "src" / "sim_vine"
              / "examples")
WIDTH, HEIGHT, FPS, SUBSTEPS = 320, 240, 30.0, 3
NOISE_STD = 4.0

SCENARIOS = {
    "oscillation": dict(
        simulator=dict(bodies=10, length=0.3, stiffness=0.02, damping=2e-4,
                       initial_angles=0.08),
        frames=90, growth_rate=0.0, view=(-0.03, 0.33, -0.14, 0.22)),
    "wall": dict(
        simulator=dict(scene="wall_vertical", stiffness=0.05, damping=0.002),
        frames=40, growth_rate=0.3, view=(-0.03, 0.52, -0.56, 0.04)),
}


def make(name: str) -> None:
    """Render one scenario's video and print what its YAML needs."""
    spec = SCENARIOS[name]
    sim = make_simulator(**spec["simulator"])
    truth = sim.design_space().defaults()
    calibration = tilted_calibration(spec["view"], width=WIDTH, height=HEIGHT)
    video = synthetic_video(sim, truth, frames=spec["frames"], dt=1.0 / (FPS * SUBSTEPS),
                            substeps=SUBSTEPS, points=8, calibration=calibration,
                            width=WIDTH, height=HEIGHT, growth_rate=spec["growth_rate"],
                            thickness_px=7.0, noise_std=NOISE_STD, seed=1)
    path = write_video(video.images, OUTPUT_DIR / f"{name}.mp4", fps=FPS)
    x0, x1, y0, y1 = spec["view"]
    world = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]])
    pixels = calibration.to_pixels(world)
    print(f"{path.name}: {path.stat().st_size / 1024:.0f} KB, {spec['frames']} frames")
    print(f"  calibration: {{pixels: {np.round(pixels, 3).tolist()}, world: {world.tolist()}}}")
    print(f"  base_px: {np.round(video.base_px, 3).tolist()}, base_direction: "
          f"{np.round(video.base_direction_px, 4).tolist()}")
    print(f"  tip at the end: {np.round(video.truth[-1, -1], 4).tolist()} m")


if __name__ == "__main__":
    for scenario in SCENARIOS:
        make(scenario)
