"""The joint estimation over a whole trial with wall contact: warm start against cold starts.

Usage: ``python examples/vine/estimate_whole_trial.py [FRAMES]`` (default 60, 2 s; needs the
``fit`` extra: ``pip install 'sim_vine[fit]'``).

The recording is :func:`sim_vine.fit.whole_trial.whole_trial` (the ``wall_vertical`` vine
growing into the wall and sliding along it, 0.3 mm keypoint noise, frames 7, 15 and 33
missing). Every fit starts 30 % below K and 50 % above C. It prints, for the shooting fit,
the estimation warm-started from it, the estimation warm-started from the starting guess's
own rollout (no shooting fit), and the estimation from poses fitted per frame (with each
frame's length, and with the model's), the solver's status and iterations, the time,
the tip error of a simulation with the fitted values and the parameter errors: the package
README's table.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from sim_vine.fit.estimation import EstimationError, estimate
from sim_vine.fit.shooting import fit_shooting, frame_schedule
from sim_vine.fit.start_pose import start_pose_from_keypoints
from sim_vine.fit.warm_start import simulated_warm_start
from sim_vine.fit.whole_trial import TRUTH, wall_vine, whole_trial
from sim_vine.state import VineState


def _row(name: str, status: str, iterations: int, seconds: float, tip, fitted) -> None:
    errors = ", ".join(f"{key.split('.')[1]} {100 * (float(fitted[key]) / value - 1):+.2f} %"
                       for key, value in TRUTH.items())
    print(f"{name}: {status}, {iterations} iterations, {seconds:.1f} s, tip MAE "
          f"{tip['mae']:.2f} mm (max {tip['max']:.2f}), {errors}")


def main(frames: int) -> None:
    """Fit the whole trial four ways and print one line each."""
    recording, truth = whole_trial(frames=frames)
    print(f"{frames} frames, {len(truth.contacts)} model steps, the truth's tip on the wall "
          f"at {np.count_nonzero(truth.contacts[:, -1])} of them")
    guess = wall_vine(stiffness=0.021, damping=0.003)
    started = time.perf_counter()
    fit = fit_shooting(guess, [recording], fit_length=True, fit_start=True, max_iterations=10)
    shooting_seconds = time.perf_counter() - started
    _row("shooting (fit_start, fit_length)", fit.optimization.message,
         fit.optimization.iterations, shooting_seconds, fit.tip_error_mm[0], fit.fitted)
    started = time.perf_counter()
    warm = estimate(guess, recording, warm_start=fit)
    _row("estimation warm-started from it", warm.status, warm.iterations,
         time.perf_counter() - started, warm.tip_error_mm, warm.fitted)
    # no shooting fit: the guess's own rollout from the first frame's pose
    started = time.perf_counter()
    schedule = frame_schedule(recording.keypoints.times, model_rate=90.0)
    start = start_pose_from_keypoints(guess.model, recording.keypoints.points[0],
                                      fit_length=True).body_q(guess.model)
    rollout = simulated_warm_start(
        guess, guess.design_space().defaults(),
        initial_state=VineState(body_q=start, body_qd=np.zeros_like(start)),
        growth_rate=np.repeat(recording.growth_table()[:, 0], schedule.substeps),
        dt=schedule.dt)
    guessed = estimate(guess, recording, warm_start=rollout)
    _row("estimation warm-started from the guess's rollout",
         f"{guessed.status} in {guessed.contact_rounds} contact round(s)", guessed.iterations,
         time.perf_counter() - started, guessed.tip_error_mm, guessed.fitted)
    for fit_length in (True, False):
        name = f"estimation from per-frame poses (fit_length={fit_length})"
        started = time.perf_counter()
        try:
            cold = estimate(guess, recording, fit_length=fit_length)
        except EstimationError as error:
            print(f"{name}: {error} ({time.perf_counter() - started:.1f} s)")
            continue
        _row(name, f"{cold.status} in {cold.contact_rounds} contact round(s)", cold.iterations,
             time.perf_counter() - started, cold.tip_error_mm, cold.fitted)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60)
