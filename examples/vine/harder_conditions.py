"""The package README's numbers for the harder recordings' conditions, over noise seeds.

Usage: ``python examples/vine/harder_conditions.py [--cases scale fps growth evert
model_rate noise_free] [--seeds 0 1 2]``

Every case writes a recording with :func:`sim_vine.fit.harder_recording.harder_recording`
(the tests' settings: K, C and the growth offset free unless said, start pose and length
fitted) and runs the one-command pipeline on it (:func:`sim_vine.fit.pipeline.run_recording`,
no video); one line per fit: tip MAE and max, shape error [mm], K and C off the truth [%],
iterations, convergence, the run's time [s] and what the case estimated.

- ``scale``: a 5 % scale error, fitted at the recording's scale and with the length scale
  estimated (``scale_range: [0.9, 1.15]``);
- ``fps``: times written at 25 fps where the camera ran at 30, the frame rate estimated
  (``frame_rate_range: [20, 40]``), at the true scale and with the 5 % scale error;
- ``growth``: the vine slows from 0.3 to 0.2 m/s at frame 13 (the YAML says 0.3): a constant
  rate with the growth offset free, and per-frame rates with ``growth_smoothing`` 0, 3, 30;
- ``evert``: the truth everts (12 bodies of 5 cm, 0.235 m out at frame 0), fitted by the
  everting model and by ``every_prismatic``, at the true scale and with the 5 % scale error;
- ``model_rate``: the 90 Hz truth fitted at 90, 180 and 360 model steps per second;
- ``noise_free``: no pixel noise, at the true scale and with the 5 % scale error.

Each line also gives C's standard errors, noise only and with frames correlated.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import yaml

from sim_vine.fit.harder_recording import TRUE_DAMPING, TRUE_STIFFNESS, harder_recording
from sim_vine.fit.pipeline import run_recording

SLOWING = np.r_[np.full(13, 0.3), np.full(13, 0.2)]
"""The growth case's true rate per frame interval [m/s]."""
EVERTING = {"growth": "evert", "max_length": 0.6, "bodies": 12, "length": 0.235}
"""The evert case's truth (a start between two bodies' full lengths, as in the test)."""


def line(summary: dict) -> str:
    """One fit's numbers from its bundle summary."""
    (recording,) = summary["recordings"]
    parameters = summary["parameters"]
    stiffness = 100 * (parameters["joint.stiffness"]["value"] / TRUE_STIFFNESS - 1)
    damping = 100 * (parameters["joint.damping"]["value"] / TRUE_DAMPING - 1)
    c = parameters["joint.damping"]
    return (f"tip MAE {recording['tip_error_mm']['mae']:.2f} (max "
            f"{recording['tip_error_mm']['max']:.1f}) shape "
            f"{recording['shape_error_mm']['mean']:.2f} mm, K {stiffness:+.2f} %, C "
            f"{damping:+.2f} % (± {100 * c['standard_error'] / TRUE_DAMPING:.2f} %, "
            f"± {100 * c['standard_error_correlated'] / TRUE_DAMPING:.2f} % correlated), "
            f"{summary['optimizer']['iterations']} iterations, converged "
            f"{summary['optimizer']['converged']}, {summary['time_s']:.1f} s")


def fitted(folder: Path, *, simulator: dict | None = None, **recording) -> dict:
    """The pipeline's summary of a harder recording (``recording``: its keywords), with
    ``simulator`` over the YAML's simulator block."""
    path = harder_recording(folder, **recording)
    if simulator:
        spec = yaml.safe_load(path.read_text())
        spec["simulator"].update(simulator)
        path.write_text(yaml.safe_dump(spec))
    return run_recording(path, folder / "out", video=False)


def cases(name: str, seed: int):
    """(label, keywords of :func:`fitted`, what to report besides :func:`line`) per fit."""
    if name == "scale":
        yield "scale not estimated", {"scale_error": 0.05}, lambda s: ""
        yield "scale_range", {"scale_error": 0.05, "fit": {"scale_range": [0.9, 1.15]}}, \
            lambda s: f"σ {s['estimates']['length_scale']:.4f}"
    elif name == "fps":
        for scale in (0.0, 0.05):
            yield f"frame rate, scale error {scale:g}", {
                "scale_error": scale, "written_fps": 25.0,
                "fit": {"frame_rate_range": [20, 40]}}, \
                lambda s: f"{s['estimates']['frame_rate_fps']:.2f} fps"
    elif name == "growth":
        yield "constant rate + offset", {"scale_error": 0.0, "growth_rate": SLOWING,
                                         "fit": {"iterations": 100}}, lambda s: ""
        for smoothing in (0.0, 3.0, 30.0):
            def rates(s):
                off = np.array(s["recordings"][0]["growth_rate"]) - SLOWING
                return (f"rates off max {np.max(np.abs(off)):.3f}, RMS "
                        f"{np.sqrt(np.mean(off ** 2)):.3f} m/s")
            yield f"per-frame, λ {smoothing:g}", {
                "scale_error": 0.0, "growth_rate": SLOWING,
                "fit": {"free": ["joint.stiffness", "joint.damping"], "fit_growth": True,
                        "growth_smoothing": smoothing, "iterations": 100}}, rates
    elif name == "evert":
        for scale in (0.0, 0.05):
            for model in ("evert", "every_prismatic"):
                extra = {"max_length": 0.6 * (1 + scale)} if model == "evert" else {}
                yield f"evert truth, {model}, scale error {scale:g}", {
                    "scale_error": scale, "truth": EVERTING,
                    "simulator": {"growth": model, **extra}}, lambda s: ""
    elif name == "model_rate":
        for rate in (90, 180, 360):
            yield f"fitted at {rate} Hz", {"scale_error": 0.0, "fit": {"model_rate": rate}}, \
                lambda s: ""
    elif name == "noise_free":
        for scale in (0.0, 0.05):
            yield f"no noise, scale error {scale:g}", {"scale_error": scale, "noise_px": 0.0}, \
                lambda s: ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cases_known = ["scale", "fps", "growth", "evert", "model_rate", "noise_free"]
    parser.add_argument("--cases", nargs="+", default=cases_known, choices=cases_known)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    args = parser.parse_args()
    rows = []
    for name in args.cases:
        for seed in args.seeds:
            for label, keywords, extra in cases(name, seed):
                with tempfile.TemporaryDirectory() as folder:
                    summary = fitted(Path(folder), seed=seed, **keywords)
                rows.append(f"{name} | seed {seed} | {label} | {line(summary)} | "
                            f"{extra(summary)}")
                print(rows[-1], flush=True)
    print("\n".join(["", *rows]))


if __name__ == "__main__":
    main()
