"""Vine step speed and accuracy: ms per step against a rebuild-every-step peer.

The paper's runtime scene (Jitosho et al. 2023, Sec. IV-A): a vine fixed at the origin grows
at 0.1 m/s for 4 s (Δt 10 ms, 400 steps) toward one circular obstacle, discretized into
10 … 200 bodies. For each size this prints

- ``ours``: ms per step of ``VineSimulator.step`` (the exact banded KKT solve at the
  previous step's active set when that is still optimal, else OSQP, set up once and
  updated and warm-started every step, to find the active set, then the exact solve),
  best of ``--repeats`` runs; times are the process's CPU time (``time.process_time``), so other
  programs on a shared machine disturb them less;
- ``rebuild``: ms per step of a peer that, like the authors' Julia code, builds the sparse
  matrices and a fresh OSQP solver from scratch every step (OSQP's default settings);
- ``speedup`` = rebuild / ours, measured in the same run;
- ``tip err``: the largest tip deviation over the run from a reference solved by OSQP
  alone to eps 1e-9 (no exact active-set solve), for ours (default settings) and for the
  peer;
- ``exact``: the share of our steps whose solution satisfies the KKT conditions at its
  active set to round-off;
- ``vjp``: ms per call of ``VineSimulator.step_vjp`` over the same trajectory's states (a
  reverse sweep's cost per step), best of ``--repeats``, and ``vjp/step``, its ratio to
  ``ours``;

then the least-squares slope of ms per step against bodies (the scaling).

``--growth evert``: the same for a vine that everts (``growth: evert``), 0.2 m long at the
start with room for 0.7 m (so it grows from 0.2 to 0.6 m over the run), its masses following
the everted material; the default is the scene's ``every_prismatic`` vine.

Run: ``python benchmarks/vine_step.py [--bodies 10 30 50 70 100 200] [--repeats 3]
[--growth every_prismatic|evert]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import osqp
import scipy.sparse as sp

from sim_vine import SolverSettings, VineSimulator, make_simulator
from sim_vine.kinematics import tip_position
from sim_vine.state import VineState
from sim_vine.step import assemble

RATE, DT, STEPS = 0.1, 0.01, 400


def run_ours(sim, design):
    """Tip trajectory (STEPS + 1, 2) and seconds per step of the simulator's own step."""
    state = sim.initial_state(design)
    action = np.array([RATE])
    tips = [tip_position(sim.model, state.body_q)]
    start = time.process_time()
    for _ in range(STEPS):
        state = sim.step(state, action, design, DT)
        tips.append(tip_position(sim.model, state.body_q))
    return np.array(tips), (time.process_time() - start) / STEPS


def run_vjp(sim, design):
    """Seconds per ``step_vjp`` call over the states of the run (cotangent of the tip)."""
    state = sim.initial_state(design)
    action = np.array([RATE])
    states = [state]
    for _ in range(STEPS - 1):
        states.append(sim.step(states[-1], action, design, DT))
    g_q = np.zeros_like(state.body_q)
    g_q[-1, :2] = 1.0
    g_next = VineState(body_q=g_q, body_qd=np.zeros_like(g_q))
    start = time.process_time()
    for s in reversed(states):
        g_next = sim.step_vjp(s, action, design, DT, g_next)[0]
    return (time.process_time() - start) / STEPS


def run_rebuild(sim, design):
    """The peer: assemble the QP, build sparse P and A and a new OSQP solver every step."""
    design_params, _ = sim._parameters(design)
    model, layout = sim.model, sim.layout
    state = sim.initial_state(design)
    q, v = state.body_q, state.body_qd
    n = 3 * model.body_count
    bodies = layout.row_bodies
    tips = [tip_position(model, q)]
    start = time.process_time()
    for _ in range(STEPS):
        params = sim._step_masses(design_params, q)
        problem = assemble(model, layout, q, v, RATE, params, DT).problem
        rows, cols, vals = [], [], []
        for side in range(2):
            on = np.flatnonzero(bodies[:, side] >= 0)
            for k in range(3):
                rows.append(on)
                cols.append(3 * bodies[on, side] + k)
                vals.append(problem.row_values[on, 3 * side + k])
        A = sp.csc_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                          shape=(layout.size, n))
        P = sp.triu(sim.qp.p_matrix(problem.mass_diagonal, problem.spring_weights), format="csc")
        solver = osqp.OSQP()
        solver.setup(P, -problem.rhs.reshape(-1), A, problem.lower,
                     np.minimum(problem.upper, 1e30), verbose=False)
        result = solver.solve(raise_error=False)
        if result.info.status_val not in (1, 2):
            raise RuntimeError(f"rebuild peer: OSQP status {result.info.status}")
        v = np.array(result.x).reshape(-1, 3)
        q = q + DT * v
        tips.append(tip_position(model, q))
    return np.array(tips), (time.process_time() - start) / STEPS


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bodies", type=int, nargs="+", default=[10, 30, 50, 70, 100, 200])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--growth", choices=["every_prismatic", "evert"],
                        default="every_prismatic")
    args = parser.parse_args(argv)
    print(f"runtime scene: growth {RATE} m/s for {STEPS * DT:g} s ({args.growth}), "
          f"dt {DT * 1e3:g} ms, best of {args.repeats}")
    print(f"{'bodies':>6} {'ours ms':>9} {'rebuild ms':>11} {'speedup':>8} "
          f"{'ours tip err mm':>16} {'rebuild tip err mm':>19} {'exact':>9} {'vjp ms':>8} "
          f"{'vjp/step':>9}")
    sizes, times = [], []
    for bodies in args.bodies:
        sim = _simulator(bodies, args.growth)
        design = sim.design_space().defaults()
        ref_tips, _ = run_ours(_raw_osqp(sim.model, 1e-9), design)
        ours = min((run_ours(sim, design) for _ in range(args.repeats)), key=lambda r: r[1])
        peer = min((run_rebuild(sim, design) for _ in range(args.repeats)),
                   key=lambda r: r[1])
        err_ours = np.max(np.linalg.norm(ours[0] - ref_tips, axis=1)) * 1e3
        err_peer = np.max(np.linalg.norm(peer[0] - ref_tips, axis=1)) * 1e3
        exact = _exact_fraction(sim, design)
        vjp = min(run_vjp(sim, design) for _ in range(args.repeats))
        print(f"{bodies:>6} {ours[1] * 1e3:>9.3f} {peer[1] * 1e3:>11.3f} "
              f"{peer[1] / ours[1]:>7.1f}x {err_ours:>16.2e} {err_peer:>19.2e} "
              f"{exact:>8.0%} {vjp * 1e3:>8.3f} {vjp / ours[1]:>8.1f}x")
        sizes.append(bodies)
        times.append(ours[1] * 1e3)
    if len(sizes) > 1:
        slope, intercept = np.polyfit(sizes, times, 1)
        fit = np.polyval([slope, intercept], sizes)
        r2 = 1 - np.sum((np.array(times) - fit) ** 2) / np.sum((times - np.mean(times)) ** 2)
        print(f"scaling: {slope * 1e3:.2f} µs per body + {intercept:.3f} ms (linear fit R² "
              f"{r2:.3f}); {times[-1] / times[0]:.1f}x time for {sizes[-1] / sizes[0]:.0f}x "
              "bodies")


def _simulator(bodies, growth):
    """The runtime scene's vine of ``bodies`` bodies growing by ``growth``."""
    if growth == "evert":
        return make_simulator(scene="runtime", bodies=bodies, growth="evert", length=0.2,
                              max_length=0.7)
    return make_simulator(scene="runtime", bodies=bodies)


def _raw_osqp(model, eps):
    """The same QP solved by OSQP alone to ``eps`` (no exact active-set solve): the
    reference, independent of our refinement."""
    return VineSimulator(model, settings=SolverSettings(eps_abs=eps, eps_rel=eps,
                                                        max_iter=1_000_000, refine=False))


def _exact_fraction(sim, design):
    """Share of steps solved exactly at their active set (KKT conditions to round-off)."""
    from sim_vine.step import step
    design_params, _ = sim._parameters(design)
    state = sim.initial_state(design)
    exact = 0
    for _ in range(STEPS):
        params = sim._step_masses(design_params, state.body_q)
        q, v, solution, _ = step(sim.arrays, sim.layout, sim.qp, state.body_q,
                                 state.body_qd, RATE, params, DT)
        exact += solution.exact
        state = VineState(body_q=q, body_qd=v)
    return exact / STEPS


if __name__ == "__main__":
    main()
