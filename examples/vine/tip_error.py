"""Tip error [mm] of a finished vine video fit: the paper's accuracy metric.

Usage: ``python examples/vine/tip_error.py EXPERIMENT.yaml RUN_DIR``, e.g. with
``packages/sim_vine/src/sim_vine/examples/vine_oscillation.yaml``

Reads the experiment's simulator and ``vine_video`` options and the recovered design from
``RUN_DIR/summary.json``, replays the video's growth input on the simulator with the
recovered parameters, and prints the mean absolute tip error over the frames where the vine
was found (Euclidean, and per coordinate as the paper reports it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import yaml

from codesign import Objective, OpenLoopController, Rollout
from sim_vine.fit.shooting import tip_errors_mm
from sim_vine.fit.video_source import video_recordings
from sim_vine.scene import make_simulator
from sim_vine.terms import KeypointObserver


def main(experiment: str, run_dir: str) -> None:
    """Print the tip errors of the run's recovered design against its video."""
    config = yaml.safe_load(Path(experiment).read_text())
    summary = json.loads((Path(run_dir) / "summary.json").read_text())
    simulator = make_simulator(**config["simulator"].get("options", {}))
    section = config["identification"]
    measurement = KeypointObserver(simulator=simulator, **section["measurement"]["options"])
    run = config["run"]
    options = dict(section["recordings"]["options"])
    if summary.get("quick"):
        options.update(config.get("quick", {}).get("identification", {}).get(
            "recordings", {}).get("options", {}))
    recording = video_recordings(simulator=simulator, measurement=measurement, dt=run["dt"],
                                 substeps=run["substeps"], base_dir=Path(experiment).parent,
                                 **options)[0]
    design = simulator.design_space().defaults()
    for name, value in summary["design"].items():
        design[name.removeprefix("design.")] = np.asarray(value, dtype=np.float64)
    rollout = Rollout(simulator, controller=OpenLoopController(
        observation_size=0, action_size=1, control_steps=recording.steps),
        steps=recording.steps, substeps=run["substeps"], dt=run["dt"])
    states = rollout.forward(design, {"table": recording.actions}, Objective(()),
                             record=True).states
    count = measurement.count
    predicted = np.stack([measurement.observe(s, design).reshape(count, 2) for s in states])
    measured = recording.measurements.reshape(len(states), count, 2)
    errors = tip_errors_mm(predicted, measured)
    print(f"tip error over {int(np.sum(np.isfinite(measured[:, -1, 0])))} frames: mean "
          f"{errors['mae']:.3f} mm (x {errors['mae_x']:.3f} mm, y {errors['mae_y']:.3f} mm), "
          f"max {errors['max']:.3f} mm")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
