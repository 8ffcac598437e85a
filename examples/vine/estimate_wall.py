"""Fit K and C to wall.mp4 with the paper's joint state and parameter estimation.

Usage: ``python examples/vine/estimate_wall.py [EXPERIMENT.yaml]`` (default: sim_vine's
``vine_wall`` example; needs the ``fit`` extra: ``pip install 'sim_vine[fit]'``).

The same video, calibration, keypoint count, starting design and truth as ``vine_wall.yaml``
(which fits by shooting through the simulator); here :func:`sim_vine.fit.estimation.estimate`
solves the paper's Section III problem with IPOPT: the states of every model step and the
scalar K and C are the unknowns, the dynamics are residuals weighted by the trust R, and the
tip is held on the wall at the steps where the poses fitted to the keypoints touch it
(known contacts, refined from the estimated trajectory). It prints the recovered values,
their errors against the truth, the tip error of a simulation with them, and the time.
"""

from __future__ import annotations

import importlib.resources
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from sim_vine.fit.estimation import estimate
from sim_vine.fit.shooting import VideoRecording
from sim_vine.scene import make_simulator
from sim_vine.vision.keypoints import Calibration, Segmentation, extract_keypoints


def main(experiment: str) -> None:
    """Extract the experiment's video keypoints, estimate K and C, print the result."""
    path = Path(experiment)
    config = yaml.safe_load(path.read_text())
    section = config["identification"]
    options = section["recordings"]["options"]
    simulator_options = {k: v for k, v in config["simulator"]["options"].items() if k != "tie"}
    simulator = make_simulator(**simulator_options)
    started = time.perf_counter()
    keypoints = extract_keypoints(
        path.parent / options["video"], segmentation=Segmentation(),
        base_px=options["base_px"], base_direction=options["base_direction"],
        calibration=Calibration.from_reference_points(options["calibration"]["pixels"],
                                                      options["calibration"]["world"]),
        points=section["measurement"]["options"]["count"])
    recording = VideoRecording(keypoints=keypoints, growth_rate=options["growth_rate"],
                               name=options["video"])
    design = dict(simulator.design_space().defaults())
    for name, spec in config["design"].items():
        design[name] = np.full_like(design[name], spec["init"])
    result = estimate(simulator, recording, design=design,
                      model_rate=1.0 / config["run"]["dt"])
    seconds = time.perf_counter() - started
    print(f"{result.status} after {result.iterations} IPOPT iterations in "
          f"{result.contact_rounds} contact round(s); contact at "
          f"{np.count_nonzero(np.any(result.contacts, axis=1))} of "
          f"{len(result.contacts)} steps")
    for name, truth in options["truth"].items():
        value = float(result.fitted[name])
        print(f"  {name}: {value:.6g} (truth {truth:g}, {100 * abs(value / truth - 1):.2f} % off)")
    tip = result.tip_error_mm
    print(f"tip error of the fitted model over {keypoints.frame_count} frames: mean "
          f"{tip['mae']:.3f} mm (x {tip['mae_x']:.3f} mm, y {tip['mae_y']:.3f} mm), max "
          f"{tip['max']:.3f} mm; {seconds:.1f} s with keypoint extraction")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1
         else str(importlib.resources.files("sim_vine") / "examples" / "vine_wall.yaml"))
