"""The package README's table of fits on harder synthetic recordings, per fit method.

Usage: ``python examples/vine/fit_convergence.py [--methods least_squares lbfgsb]
[--seeds 0 1 2] [--iterations 100]``

Every case writes a recording with :func:`sim_vine.fit.harder_recording.harder_recording`
(scale error 0 or 5 %, K and C free, or K, C and the growth offset), runs the one-command
pipeline on it (:func:`sim_vine.fit.pipeline.run_recording`, no video) and prints one row
per fit (iterations, the optimizer's success flag, tip MAE and max, shape error, K and C off
the truth, the fit's time), then the README's rows: ranges over the noise seeds.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from sim_vine.fit.harder_recording import TRUE_DAMPING, TRUE_STIFFNESS, harder_recording
from sim_vine.fit.pipeline import run_recording

CASES = [(scale, free) for scale in (0.0, 0.05)
         for free in (["joint.stiffness", "joint.damping"],
                      ["joint.stiffness", "joint.damping", "growth.offset"])]
LABELS = {"joint.stiffness": "K", "joint.damping": "C", "growth.offset": "growth offset"}


def run_case(folder: Path, *, scale_error: float, free: list[str], method: str, seed: int,
             iterations: int) -> dict:
    """One fit's numbers: iterations, success, tip MAE and max [mm], shape error [mm], K and
    C off the truth [%], time [s], the optimizer's message."""
    path = harder_recording(folder, scale_error=scale_error, seed=seed,
                            fit={"free": free, "iterations": iterations, "method": method})
    summary = run_recording(path, folder / "out", video=False)
    (recording,) = summary["recordings"]
    parameters = summary["parameters"]
    return {"iterations": summary["optimizer"]["iterations"],
            "success": summary["optimizer"]["converged"],
            "tip_mae": recording["tip_error_mm"]["mae"],
            "tip_max": recording["tip_error_mm"]["max"],
            "shape": recording["shape_error_mm"]["mean"],
            "k_off": 100 * (parameters["joint.stiffness"]["value"] / TRUE_STIFFNESS - 1),
            "c_off": 100 * (parameters["joint.damping"]["value"] / TRUE_DAMPING - 1),
            "time": summary["time_s"], "message": summary["optimizer"]["message"]}


def _span(values, fmt: str) -> str:
    low, high = min(values), max(values)
    return format(low, fmt) if format(low, fmt) == format(high, fmt) else \
        f"{format(low, fmt)} to {format(high, fmt)}"


def main(argv: list[str] | None = None) -> None:
    """Run every case with every method and seed; print the rows and the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", nargs="+", default=["least_squares", "lbfgsb"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--iterations", type=int, default=100)
    args = parser.parse_args(argv)
    rows = []
    for method in args.methods:
        for scale_error, free in CASES:
            runs = []
            for seed in args.seeds:
                with tempfile.TemporaryDirectory() as folder:
                    run = run_case(Path(folder), scale_error=scale_error, free=free,
                                   method=method, seed=seed, iterations=args.iterations)
                print(f"{method} scale {scale_error:g} free {free} seed {seed}: {run}",
                      flush=True)
                runs.append(run)
            rows.append((method, scale_error, free, runs))
    print("\n| method | scale error | free | tip MAE mm | tip max mm | shape mm | K off % | "
          "C off % | iterations | success | s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for method, scale_error, free, runs in rows:
        column = {key: [run[key] for run in runs] for key in runs[0]}
        print(f"| {method} | {100 * scale_error:g} % | "
              f"{', '.join(LABELS[name] for name in free)} | {_span(column['tip_mae'], '.2f')} | "
              f"{_span(column['tip_max'], '.1f')} | {_span(column['shape'], '.2f')} | "
              f"{_span(column['k_off'], '+.2f')} | {_span(column['c_off'], '+.1f')} | "
              f"{_span(column['iterations'], 'd')} | "
              f"{sum(column['success'])}/{len(runs)} | {_span(column['time'], '.1f')} |")


if __name__ == "__main__":
    main()
