"""sim_pbd's accuracy against Pinocchio: Baxter's left arm released under gravity, joint
angles over 2 s against substeps and iterations (the table of the sim_pbd README).

The scene of ``packages/sim_pbd/tests/test_accuracy.py`` (joint limits off, released at rest
from its pose, Δt = 0.01 s) run to 2 s; the reference is Pinocchio's ABA integrated by RK4 at
0.25 ms (its own error below 1e-8 rad). For each (substeps, iterations, solver) it prints

- damped (the URDF's 0.7 N m s/rad): the largest joint-angle error [rad] over the first
  0.25, 0.5, 1 and 2 s;
- undamped: the largest error over the first 0.25 s (after that the swing is chaotic: a
  1e-6 rad start error grows to ~0.5 rad in 2 s) and the energy lost over 2 s [J] (the
  reference keeps it to 1e-9 J), from Pinocchio's energy at our joint angles and rates.

and the cost of a step at those settings [µs] (the compiled ``sim_pbd.step.step``, best of
5 runs of the 200-step damped release; not timed with ``--kernels numpy``).

Usage: ``python benchmarks/pbd_accuracy.py [--substeps 10 20 40] [--iterations 1 2 4]
[--scheme second_order first_order] [--kernels numba] [--jacobi]`` (``--jacobi`` adds the
paper's settings: 1 substep, 30 Jacobi iterations, first-order scheme).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from sim_pbd.kinematics import joint_positions
from sim_pbd.options import KERNELS, SCHEMES
from sim_pbd.step import step

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pbd_step import DAMPING, DT, LEFT_ARM, PAPER, POSE, load_reference, simulator  # noqa: E402

DURATION = 2.0  # [s]
WINDOWS = (0.25, 0.5, 1.0, 2.0)  # [s] over which the damped error's maximum is reported


def release(damping: float, **settings):
    """Our joint angles and rates every step for DURATION, (K + 1, 7) each."""
    sim = simulator(**settings) if damping == DAMPING else _undamped(**settings)
    design = sim.design_space().defaults()
    params = sim.parameters(design)
    state = sim.initial_state(design)
    rows = [joint_positions(sim.model, params, state)]
    for _ in range(int(round(DURATION / DT))):
        state = sim.step(state, np.zeros(7), design, DT)
        rows.append(joint_positions(sim.model, params, state))
    return np.array([q for q, _ in rows]), np.array([qd for _, qd in rows])


def step_cost(**settings) -> float:
    """µs per step of the damped release with the compiled step (best of 5 runs)."""
    sim = simulator(**settings)
    design = sim.design_space().defaults()
    params = sim.parameters(design)
    start = sim.initial_state(design)
    action = np.zeros(7)
    best = np.inf
    for _ in range(5):
        state = start
        began = time.perf_counter()
        for _ in range(int(round(DURATION / DT))):
            state = step(sim.model, state, action, params, DT, **settings)
        best = min(best, (time.perf_counter() - began) / (DURATION / DT))
    return best * 1e6


def _undamped(**settings):
    from sim_pbd.scene import make_simulator

    return make_simulator(urdf="baxter", joints=LEFT_ARM, joint_limits=False,
                          initial_positions=POSE, damping=0.0, **settings)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--substeps", type=int, nargs="+", default=[10, 20, 40])
    parser.add_argument("--iterations", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--scheme", nargs="+", choices=SCHEMES, default=list(SCHEMES))
    parser.add_argument("--kernels", choices=KERNELS, default="numba")
    parser.add_argument("--jacobi", action="store_true")
    args = parser.parse_args(argv)
    reference = load_reference()
    if reference is None:
        raise SystemExit("the reference library is missing: pip install pin")
    arm = reference.reduced_baxter(LEFT_ARM)
    damped, _ = reference.release(arm, POSE, damping=DAMPING, duration=DURATION)
    free_q, free_qd = reference.release(arm, POSE, damping=0.0, duration=DURATION)
    start = reference.energy(arm, free_q[0], free_qd[0])
    drift = abs(reference.energy(arm, free_q[-1], free_qd[-1]) - start)
    print(f"Baxter left arm released from {POSE} rad, dt {DT} s, {DURATION:g} s; reference "
          f"energy drift undamped {drift:.1e} J")
    windows = " ".join(f"{f'≤{w:g} s':>9s}" for w in WINDOWS)
    print(f"{'scheme':>12s} {'substeps':>8s} {'iter':>4s} {'solver':>12s} | damped max error "
          f"[rad] {windows} | undamped ≤0.25 s [rad], energy lost in 2 s [J] | µs/step")
    grid = [(c, s, i, "gauss_seidel") for c in args.scheme for s in args.substeps
            for i in args.iterations]
    if args.jacobi:
        grid.append((PAPER["scheme"], PAPER["substeps"], PAPER["iterations"], PAPER["solver"]))
    for scheme, substeps, iterations, solver in grid:
        settings = dict(substeps=substeps, iterations=iterations, solver=solver, scheme=scheme,
                        kernels=args.kernels)
        error = reference.angle_error(release(DAMPING, **settings)[0], damped).max(axis=1)
        worst = " ".join(f"{error[: int(round(w / DT)) + 1].max():9.2e}" for w in WINDOWS)
        ours_q, ours_qd = release(0.0, **settings)
        early = reference.angle_error(ours_q, free_q)[: int(round(0.25 / DT)) + 1].max()
        lost = start - reference.energy(arm, ours_q[-1], ours_qd[-1])
        cost = step_cost(**settings) if args.kernels == "numba" else float("nan")
        print(f"{scheme:>12s} {substeps:>8d} {iterations:>4d} {solver:>12s} | {'':22s} {worst} | "
              f"{early:9.2e} {lost:9.3f} | {cost:7.1f}", flush=True)


if __name__ == "__main__":
    main()
