"""MLS-MPM substep speed: sim_mpm against Warp and Taichi, side by side in one run.

Scenes (benchmarks/peers/scene.py): a 2D block of 6,400 particles on a 128² grid and 3D
cubes of 8,000 and 64,000 particles on a 64³ grid; fixed corotated, Δt = 1e-3 s, sticky
walls, gravity. For each scene it

1. checks that every implementation produces the same trajectory: positions after
   ``--check-substeps`` substeps against sim_mpm in float64, within float32 tolerance,
   and the same one-substep gradient ∂(Σ s')/∂s from there;
2. prints milliseconds per forward substep and per reverse substep (sim_mpm's ``step_vjp``,
   Warp's ``Tape.backward``, Taichi's diffmpm-style reverse): the median and best of
   ``--rounds`` rounds that interleave the implementations, the median over rounds of each
   peer's time divided by sim_mpm's in the same round (a ratio above 1 means sim_mpm is
   faster), and whether issue 3's targets (1.5x Warp, 3x Taichi, forward and backward) are
   met;

and finally, in a fresh process, the peak memory of the reverse sweep of 1,000 substeps of
the 3D 64k cube through ``codesign.Rollout`` (√N checkpointing), from tracemalloc (NumPy
allocations) and the process's maximum resident set size.

All timings use float32 on the CPU with ``--threads`` threads (default: every core) for
sim_mpm (numba, multithreaded kernels when above 1) and Taichi (its CPU backend's thread
pool); Warp's CPU backend runs kernels on one thread. The reverse substep of each is what a
reverse sweep over many substeps pays per substep: sim_mpm's ``step_vjp`` and Taichi's
diffmpm-style reverse recompute the grid from the particle state (neither stores grids),
Warp's ``Tape.backward`` replays adjoint kernels over the grids its tape keeps. Peers run only
when importable: ``pip install ./packages/codesign './packages/sim_mpm[benchmark]'``
(warp-lang, taichi).

Usage: ``python benchmarks/mpm_step.py [--scenes 2d_6400,3d_8000] [--threads 1]
[--memory-substeps 0]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import time
import tracemalloc

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from peers.memory import peak_rss_mib  # noqa: E402
from peers.scene import SCENES, BenchmarkScene, build_sim_mpm  # noqa: E402

# (forward substeps timed, reverse substeps timed) per scene
_REPEATS = {"2d_6400": (400, 100), "3d_8000": (100, 40), "3d_64000": (10, 5)}
_TOLERANCE = 1e-5  # [m] largest position difference accepted after the check substeps
_GRADIENT_TOLERANCE = 1e-3  # largest relative one-substep gradient difference in float32
_TARGETS = {"Warp": 1.5, "Taichi": 3.0}  # issue 3: sim_mpm at least this many times faster


class Ours:
    """sim_mpm behind the peers' interface (run, positions, time_forward, time_backward)."""

    def __init__(self, scene: BenchmarkScene, dtype: str = "float32", *, threads: int = 1):
        self.scene = scene
        self.simulator, self.design = build_sim_mpm(scene, dtype, parallel=threads > 1)
        self.state = self.simulator.initial_state(self.design)
        self.action = np.zeros(0)

    def run(self, substeps: int) -> None:
        for _ in range(substeps):
            self.state = self.simulator.step(self.state, self.action, self.design,
                                             self.scene.dt)

    def positions(self) -> np.ndarray:
        return np.asarray(self.state.particle_x, dtype=np.float64)

    def time_forward(self, substeps: int) -> float:
        self.run(1)
        start = time.perf_counter()
        self.run(substeps)
        return 1e3 * (time.perf_counter() - start) / substeps

    def _seed(self):
        from sim_mpm import MPMState

        return MPMState(*(np.ones_like(getattr(self.state, f)) for f in
                          ("particle_x", "particle_v", "particle_F", "particle_C")))

    def gradient(self) -> dict[str, np.ndarray]:
        g_state, _, _ = self.simulator.step_vjp(self.state, self.action, self.design,
                                                self.scene.dt, self._seed())
        return {name: np.asarray(value, dtype=np.float64) for name, value in vars(g_state).items()}

    def time_backward(self, repeats: int) -> float:
        seed = self._seed()
        vjp = self.simulator.step_vjp
        vjp(self.state, self.action, self.design, self.scene.dt, seed)
        start = time.perf_counter()
        for _ in range(repeats):
            vjp(self.state, self.action, self.design, self.scene.dt, seed)
        return 1e3 * (time.perf_counter() - start) / repeats


def available_peers() -> dict[str, object]:
    """Peer name -> class, or -> the reason it is unavailable."""
    peers: dict[str, object] = {}
    for name, module, package, cls in (("Warp", "warp", "warp-lang", "WarpMPM"),
                                       ("Taichi", "taichi", "taichi", "TaichiMPM")):
        if importlib.util.find_spec(module) is None:
            peers[name] = f"unavailable: `pip install {package}`"
            continue
        try:
            peer_module = __import__(f"peers.{module}_mpm", fromlist=[cls])
            peers[name] = getattr(peer_module, cls)
        except Exception as exc:  # a broken peer install must not stop the benchmark
            peers[name] = f"unavailable: {type(exc).__name__}: {exc}"
    return peers


def run_scene(key: str, peers: dict, check_substeps: int, threads: int,
              rounds_count: int) -> None:
    """Check and time one scene against every available peer; print the table."""
    scene = SCENES[key]()
    forward_n, backward_n = _REPEATS[key]
    print(f"\n== {scene.name} (dx {scene.dx:.4g} m, dt {scene.dt:g} s) ==")
    truth = Ours(scene, "float64")
    truth.run(check_substeps)
    reference = truth.positions()
    implementations = {"sim_mpm": Ours(scene, "float32", threads=threads)}
    for name, peer in peers.items():
        if isinstance(peer, str):
            print(f"  {name}: {peer}")
        elif name == "Taichi":
            implementations[name] = peer(scene, threads=threads)
        else:
            implementations[name] = peer(scene)
    print(f"  trajectory check after {check_substeps} substeps, max |x - x_sim_mpm(float64)|:")
    for name, impl in implementations.items():
        impl.run(check_substeps)
        error = float(np.max(np.abs(impl.positions() - reference)))
        verdict = "same" if error <= _TOLERANCE else "DIFFERENT"
        print(f"    {name:<8s} {error:.2e} m  ({verdict} within {_TOLERANCE:.0e} m)")
    print("  one-substep gradient check, max |g - g_sim_mpm(float64)| / max |g_sim_mpm(float64)|"
          " of ∂(Σ s')/∂s over x, v, C, F:")
    truth_gradient = truth.gradient()
    for name, impl in implementations.items():
        impl.run(0)
        gradient = impl.gradient()
        worst = max(float(np.max(np.abs(gradient[f] - truth_gradient[f]))
                          / (np.max(np.abs(truth_gradient[f])) + 1e-30)) for f in truth_gradient)
        verdict = "same" if worst <= _GRADIENT_TOLERANCE else "DIFFERENT"
        print(f"    {name:<8s} {worst:.2e}  ({verdict} within {_GRADIENT_TOLERANCE:.0e})")
    rounds: dict[str, list] = {name: [] for name in implementations}
    for _ in range(rounds_count):  # interleaved, so that drifting load hits everyone alike
        for name, impl in implementations.items():
            rounds[name].append((impl.time_forward(forward_n), impl.time_backward(backward_n)))
    times = {name: np.array(r) for name, r in rounds.items()}  # (rounds, 2) each
    ours = times["sim_mpm"]
    # paired: each round's peer time over sim_mpm's time in the same round, so that load
    # drifting between rounds cancels; the table gives the median over rounds
    ratios = {name: np.median(t / ours, axis=0) for name, t in times.items()}
    print(f"  ms per substep, median (best) of {rounds_count} interleaved rounds; ratio = median "
          "over rounds of peer / sim_mpm in the same round")
    print(f"  {'':<8s} {'forward ms':>16s} {'backward ms':>16s} {'F ratio':>8s} {'B ratio':>8s}")
    for name, t in times.items():
        (f, b), (bf, bb) = np.median(t, axis=0), np.min(t, axis=0)
        rf, rb = ratios[name]
        print(f"  {name:<8s} {f:8.3f} ({bf:5.3f}) {b:8.3f} ({bb:5.3f}) {rf:8.2f} {rb:8.2f}")
    for name, needed in _TARGETS.items():
        if name in ratios:
            met = bool(np.all(ratios[name] >= needed))
            print(f"  target {needed:g}x {name} forward and backward: "
                  f"{'met' if met else 'NOT met'}")


def memory_sweep(substeps: int) -> None:
    """Peak memory of one checkpointed reverse sweep over ``substeps`` of the 64k cube."""
    from codesign import DesignSpace, Objective, Rollout
    from sim_mpm.terms import MeanPosition

    class NoActuation:
        observation_size = 0
        action_size = 0

        def parameter_space(self):
            return DesignSpace([])

        def act(self, observation, control_step, weights):
            return np.zeros(0)

        def act_vjp(self, observation, control_step, weights, g_action, g_weights):
            return np.zeros(0)

    scene = SCENES["3d_64000"]()
    simulator, design = build_sim_mpm(scene, "float32")
    rollout = Rollout(simulator, controller=NoActuation(), steps=substeps, substeps=1,
                      dt=scene.dt)
    objective = Objective.of(MeanPosition(simulator=simulator, axis=0))
    state_mb = sum(np.asarray(a).nbytes for a in vars(simulator.initial_state(design)).values())
    tracemalloc.start()
    start = time.perf_counter()
    result, (gradient,) = rollout.value_and_grad(design, {}, objective)
    seconds = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss = peak_rss_mib()
    print(f"\n== memory: reverse sweep of {substeps} substeps, {scene.name}, float32 ==")
    print(f"  checkpoint interval {rollout.checkpoint_every}, at most {result.peak_states_held} "
          f"states held ({state_mb / 2**20:.1f} MiB each)")
    print(f"  peak traced NumPy memory {peak / 2**20:.0f} MiB, max RSS {rss:.0f} MiB "
          f"(limit 2048 MiB), {seconds:.0f} s")
    print(f"  d(mean x_T)/d(E) sum {float(np.sum(gradient.design['particle.youngs_modulus'])):.3e}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenes", default=",".join(SCENES),
                        help=f"comma-separated subset of {', '.join(SCENES)}")
    parser.add_argument("--check-substeps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="threads for sim_mpm and Taichi (Warp's CPU backend uses one)")
    parser.add_argument("--rounds", type=int, default=9,
                        help="interleaved timing rounds per implementation")
    parser.add_argument("--memory-substeps", type=int, default=1000,
                        help="substeps of the memory sweep (0 skips it)")
    parser.add_argument("--memory-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_only:
        memory_sweep(args.memory_substeps)
        return
    import numba

    numba.set_num_threads(args.threads)
    kind = "multithreaded" if args.threads > 1 else "serial"
    print(f"CPU threads: sim_mpm {args.threads} ({kind} numba kernels), Taichi {args.threads}, "
          f"Warp 1 (its CPU backend is serial); float32")
    peers = available_peers()
    for key in args.scenes.split(","):
        if key not in SCENES:
            raise SystemExit(f"unknown scene {key!r}; choose from {', '.join(SCENES)}")
        run_scene(key, peers, args.check_substeps, args.threads, args.rounds)
    if args.threads > 1:
        print(f"numba threading layer: {numba.threading_layer()}")
    if args.memory_substeps > 0:
        sys.stdout.flush()
        subprocess.run([sys.executable, os.path.abspath(__file__), "--memory-only",
                        "--memory-substeps", str(args.memory_substeps)], check=True)


if __name__ == "__main__":
    main()
