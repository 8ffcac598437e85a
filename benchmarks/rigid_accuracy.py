"""sim_rigid's 4-link arm released under gravity against Pinocchio, the table behind the
sim_rigid README's "Accuracy against Pinocchio": the largest joint-angle error [rad] over
each window for each time step, against Pinocchio's articulated-body algorithm on the same
model integrated by RK4 at 0.1 ms (``packages/sim_rigid/tests/reference.py``), sampled
every 10 ms.

Usage: ``python benchmarks/rigid_accuracy.py [--duration 2.0]`` (Pinocchio, the ``pin``
wheel, is a dev dependency of the workspace).
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import numpy as np

from sim_rigid.scene import make_simulator

ROOT = Path(__file__).resolve().parents[1]
STEPS = (0.01, 0.005, 0.002, 0.001)
WINDOWS = (0.25, 0.5, 1.0, 2.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=2.0)
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location(
        "sim_rigid_reference", ROOT / "packages" / "sim_rigid" / "tests" / "reference.py")
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    sim = make_simulator(robot="arm4")
    model, design = sim.model, sim.design_space().defaults()
    expected = reference.release(reference.pinocchio_model(model), model.joint_rest,
                                 np.zeros(model.coordinate_count),
                                 damping=model.joint_damping, duration=args.duration,
                                 sample=0.01)
    windows = [w for w in WINDOWS if w <= args.duration]
    print("| Δt | " + " | ".join(f"≤{w:g} s" for w in windows) + " |")
    print("| --- |" + " --- |" * len(windows))
    for dt in STEPS:
        state = sim.initial_state(design)
        rows, every = [state.joint_q], int(round(0.01 / dt))
        for k in range(int(round(args.duration / dt))):
            state = sim.step(state, np.zeros(sim.action_size), design, dt)
            if (k + 1) % every == 0:
                rows.append(state.joint_q)
        error = np.abs(np.array(rows) - expected).max(axis=1)
        print(f"| {dt * 1e3:g} ms | " + " | ".join(
            f"{error[: int(round(w / 0.01)) + 1].max():.1e}" for w in windows) + " |")


if __name__ == "__main__":
    main()
