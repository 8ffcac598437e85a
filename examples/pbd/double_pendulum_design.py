"""Double pendulum link-length design (the paper's Sec. V-B, Table II), end to end.

Usage: ``python examples/pbd/double_pendulum_design.py [--out DIR] [--quick]``.

Runs the example experiment ``sim_pbd/examples/double_pendulum_design.yaml`` (``codesign
run``: L-BFGS-B on the two link lengths through the differentiable closed loop) into
``DIR/run``, then simulates the initial and the optimized arm once more and writes:

- ``DIR/double_pendulum_design.png``: the loss per iteration, and the tip's path against the
  desired circle before and after;
- ``DIR/double_pendulum_design.mp4`` (a GIF without PyAV): both arms side by side, each tip
  trailing its path;

and prints the link lengths, the loss (Eq. 30) and its two parts, tracking Σ‖p − p_des‖
and joint work Σ τ·Δθ, beside the paper's Table II. ``--quick`` runs the experiment's quick
setting (10 steps, 2 iterations) to check the pipeline in seconds.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from codesign.config import load_config
from codesign.experiment import build_experiment
from codesign.outputs import atomic_write, write_video
from codesign.plugins import get_registry
from codesign.runs import run_experiment
from codesign.terms import Objective
from codesign.validation import validate_config
from sim_pbd.render import render_frame
from sim_pbd.scene import ROBOT_DIRECTORY

EXAMPLE = ROBOT_DIRECTORY / "double_pendulum_design.yaml"
PAPER = {"initial": (3.0, 0.1, 51.716, 1.475), "optimal": (2.7026, 0.3074, 14.448, 0.368)}
"""Table II: link 1 [m], link 2 [m], loss, work [J]."""


def evaluate(experiment, lengths) -> dict:
    """Loss, its terms and the recorded rollout of the design with these link lengths
    (l1, l2) [m]."""
    problem = experiment.problem
    design = dict(problem.base_design)
    design["joint.child_origin"] = np.array([[-lengths[0], 0.0, 0.0],
                                             [-lengths[1], 0.0, 0.0]])
    weights = problem.weight_space.defaults()
    rollout, objective = experiment.rollout, experiment.objective
    result = rollout.forward(design, weights, objective, record=True)
    parts = {wt.name: rollout.forward(design, weights, Objective((wt,))).values[0] / wt.weight
             for wt in objective.terms}
    tips = np.array([experiment.observer.observe(s, design)[:3] for s in result.states])
    return {"lengths": tuple(lengths), "loss": float(result.values[0]), "parts": parts,
            "states": result.states, "tips": tips, "design": design}


def plot(path: Path, losses, before: dict, after: dict, circle) -> Path:
    """Loss per iteration and the two tip paths against the circle, one PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(13.0, 4.0), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.subplots(1, 3)
    axes[0].plot(np.arange(len(losses)), losses, marker="o", markersize=3)
    axes[0].set(xlabel="iteration (0: the initial design)", ylabel="loss (Eq. 30)",
                title="loss per iteration")
    axes[0].grid(True, alpha=0.3)
    angles = np.linspace(0.0, circle.period, 200)
    ring = np.array([circle.position(t) for t in angles])
    for ax, run, name in ((axes[1], before, "initial"), (axes[2], after, "optimized")):
        l1, l2 = run["lengths"]
        ax.plot(ring[:, 0], ring[:, 1], "r-", label="desired circle")
        ax.plot(run["tips"][:, 0], run["tips"][:, 1], "k.-", markersize=2, label="tip")
        elbow = np.array([[0.0, 0.0], run["states"][0].link_x[0, :2],
                          run["states"][0].link_x[1, :2]])
        ax.plot(elbow[:, 0], elbow[:, 1], "g-o", label="arm at t = 0")
        # framed on the circle and the tip's path; the arm runs in from the base at the origin
        shown = np.vstack([ring, run["tips"]])[:, :2]
        low, high = shown.min(axis=0) - 0.1, shown.max(axis=0) + 0.1
        ax.set(title=f"{name}: l1 = {l1:.4f} m, l2 = {l2:.4f} m", xlabel="x [m]",
               ylabel="y [m]", xlim=(low[0], high[0]), ylim=(low[1], high[1]), aspect="equal")
        ax.legend(loc="lower left", fontsize=8)
    figure.tight_layout()
    return atomic_write(path, lambda tmp: figure.savefig(tmp, format="png"))


def video(stem: Path, experiment, before: dict, after: dict, *, fps: int = 25) -> Path:
    """Both arms side by side, every control step, the tip trailing its path."""
    sim = experiment.simulator
    frames = []
    for t in range(len(before["states"])):
        frames.append(np.hstack([
            render_frame(sim.model, run["states"][t], width=480, height=320,
                         params=sim.parameters(run["design"]), view=sim.view,
                         window=sim.window, trace=run["tips"][: t + 1])
            for run in (before, after)]))
    return write_video(stem, frames, fps=fps)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("double_pendulum_design"),
                        help="output folder (must not hold a run already)")
    parser.add_argument("--quick", action="store_true", help="the experiment's quick setting")
    args = parser.parse_args(argv)
    registry = get_registry()
    summary = run_experiment(EXAMPLE, registry, out=args.out / "run", quick=args.quick)
    optimized = -np.asarray(summary["design"]["design.joint.child_origin"])[:, 0]
    history = json.loads((args.out / "run" / "history.json").read_text())
    losses = [entry["loss"] for entry in history["iterations"]]
    config = validate_config(load_config(EXAMPLE, quick=args.quick), registry)
    with build_experiment(config, registry) as experiment:
        before = evaluate(experiment, PAPER["initial"][:2])
        after = evaluate(experiment, optimized)
        losses = [before["loss"], *losses]
        figure = plot(args.out / "double_pendulum_design.png", losses, before, after,
                      experiment.controller.circle)
        movie = video(args.out / "double_pendulum_design", experiment, before, after)
    print(f"\n{summary['iterations']} iterations, {summary['evaluations']} evaluations, "
          f"{summary['wall_time_s']:.0f} s; wrote {figure} and {movie}\n")
    print("| design | link 1 m | link 2 m | loss | tracking Σ‖p − p_des‖ m | work J "
          "| paper: link 1, link 2, loss, work |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, run in (("initial", before), ("optimized", after)):
        paper = ", ".join(f"{v:g}" for v in PAPER["initial" if name == "initial" else "optimal"])
        print(f"| {name} | {run['lengths'][0]:.4f} | {run['lengths'][1]:.4f} | "
              f"{run['loss']:.3f} | {run['parts']['circle_tracking']:.3f} | "
              f"{run['parts']['joint_work']:.3f} | {paper} |")


if __name__ == "__main__":
    main()
