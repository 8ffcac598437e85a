"""The package README's tables of model comparison (``fit.models``) on harder synthetic
recordings whose truth the YAML's model does not match.

Usage: ``python examples/vine/model_selection.py [--cases growth friction] [--seeds 0 1 2]
[--frames 27 45 60]``

``growth``: the truth grows at its tip (``truth={"growth": "tip"}``); the candidates are
the scene's ``every_prismatic`` and ``tip`` (27 frames, scale error 0 and 5 %).
``friction``: the truth drags on the ground (``ground_friction: 2`` /s); the candidates
are the YAML's model and the same with ``ground.friction`` free (true scale, every
``--frames``). Every fit: :func:`sim_vine.fit.harder_recording.harder_recording` (K, C and
the growth offset free, start pose and length fitted, 60 iterations at most), the
one-command pipeline (:func:`sim_vine.fit.pipeline.run_recording`, no video). One row per
recording and candidate: BIC, k, tip MAE and shape error, K, C (and friction) off the
truth, iterations, and the chosen model's standard errors of C and friction (for the
friction candidate always: when BIC does not choose it, a second run fits it alone).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from sim_vine.fit.harder_recording import TRUE_DAMPING, TRUE_STIFFNESS, harder_recording
from sim_vine.fit.pipeline import run_recording

TRUE_FRICTION = 2.0
GROWTH_MODELS = [{"simulator": {"growth": "every_prismatic"}}, {"simulator": {"growth": "tip"}}]
FRICTION_MODELS = [{"name": "no friction"},
                   {"name": "friction", "free": ["ground.friction"]}]


def _errors(summary: dict) -> dict:
    """Value and standard error of C and friction in a pipeline summary."""
    parameters = summary["parameters"]
    return {name: (parameters[name]["value"], parameters[name]["standard_error"])
            for name in ("joint.damping", "ground.friction") if name in parameters}


def run_case(folder: Path, *, case: str, frames: int, scale_error: float, seed: int) -> dict:
    """One recording's comparison: the summary's ``models`` rows, the chosen model and the
    standard errors of C and friction of the friction candidate (``friction`` case) or of
    the chosen one."""
    models = GROWTH_MODELS if case == "growth" else FRICTION_MODELS
    truth = {"growth": "tip"} if case == "growth" else {"ground_friction": TRUE_FRICTION}
    path = harder_recording(folder, scale_error=scale_error, truth=truth, frames=frames,
                            seed=seed, fit={"models": models})
    summary = run_recording(path, folder / "out", video=False)
    errors = _errors(summary)
    if case == "friction" and summary["models"]["chosen"] != "friction":
        alone = harder_recording(folder, scale_error=scale_error, truth=truth, frames=frames,
                                 seed=seed, fit={"models": models[1:]})
        errors = _errors(run_recording(alone, folder / "alone", video=False))
    return {"rows": summary["models"]["candidates"], "chosen": summary["models"]["chosen"],
            "errors": errors}


def _off(row: dict, name: str, truth: float) -> str:
    value = row["fitted"].get(name)
    return "-" if value is None else f"{100 * (value / truth - 1):+.1f}"


def main(argv: list[str] | None = None) -> None:
    """Run every case, seed and length; print one line per candidate fit."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", default=["growth", "friction"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--frames", nargs="+", type=int, default=[27, 45, 60])
    args = parser.parse_args(argv)
    print("case | frames | scale % | seed | candidate | chosen | ΔBIC | k | tip MAE mm | "
          "shape mm | K off % | C off % | friction off % | iterations | converged | "
          "C ± SE | friction ± SE")
    for case in args.cases:
        settings = ([(27, s) for s in (0.0, 0.05)] if case == "growth"
                    else [(f, 0.0) for f in args.frames])
        for frames, scale_error in settings:
            for seed in args.seeds:
                with tempfile.TemporaryDirectory() as folder:
                    run = run_case(Path(folder), case=case, frames=frames,
                                   scale_error=scale_error, seed=seed)
                best = min(r["bic"] for r in run["rows"] if r["error"] is None)
                c, friction = (run["errors"].get(n) for n in ("joint.damping",
                                                               "ground.friction"))
                for row in run["rows"]:
                    if row["error"]:
                        print(f"{case} | {frames} | {100 * scale_error:g} | {seed} | "
                              f"{row['name']} | failed: {row['error']}")
                        continue
                    shown = row["name"] == ("friction" if case == "friction"
                                            else run["chosen"])
                    print(f"{case} | {frames} | {100 * scale_error:g} | {seed} | "
                          f"{row['name']} | {row['name'] == run['chosen']} | "
                          f"{row['bic'] - best:.1f} | {row['parameters']} | "
                          f"{row['tip_mae_mm']:.2f} | {row['shape_error_mm']:.2f} | "
                          f"{_off(row, 'joint.stiffness', TRUE_STIFFNESS)} | "
                          f"{_off(row, 'joint.damping', TRUE_DAMPING)} | "
                          f"{_off(row, 'ground.friction', TRUE_FRICTION)} | "
                          f"{row['iterations']} | {row['converged']} | "
                          + (f"{c[0]:.5f} ± {c[1]:.1e} | " if c and shown else "- | ")
                          + (f"{friction[0]:.3f} ± {friction[1]:.3f}" if friction and shown
                             else "-"),
                          flush=True)


if __name__ == "__main__":
    main()
