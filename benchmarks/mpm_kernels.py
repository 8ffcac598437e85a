"""Speed of sim_mpm's numba kernels alone: ms per forward and per reverse substep.

Times ``MPMSimulator.step`` and ``step_vjp`` on the benchmark scenes of
benchmarks/peers/scene.py (fixed corotated, Δt = 1e-3 s, sticky walls, gravity) for each
dtype and thread count: median of ``--repeats`` timed calls after warm-up calls. One thread
runs the serial kernels, more the multithreaded ones (``parallel=True``). The reverse
substep includes the forward recomputation that ``step_vjp`` does internally.
benchmarks/mpm_step.py measures the Warp and Taichi peers side by side.

``--compile`` instead prints the seconds of the first (compiling) serial ``step`` and
``step_vjp`` per scene and dtype, each in a fresh process with an empty numba cache: what a
new scene configuration pays once.

Usage: ``python benchmarks/mpm_kernels.py [--scenes 2d_6400,3d_8000,3d_64000]
[--dtypes float32,float64] [--threads 1,2] [--repeats 30] [--compile]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from peers.scene import SCENES, BenchmarkScene, build_sim_mpm  # noqa: E402


def median_ms(fn, repeats: int, warmup: int = 3) -> float:
    """Median wall time of ``fn()`` in milliseconds over ``repeats`` calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def measure(scene: BenchmarkScene, dtype: str, threads: int, repeats: int) -> tuple[float, float]:
    """(forward ms, backward ms) per substep, after 20 substeps of motion."""
    import numba

    from sim_mpm import MPMState

    numba.set_num_threads(threads)
    simulator, design = build_sim_mpm(scene, dtype, parallel=threads > 1)
    state = simulator.initial_state(design)
    action = np.zeros(simulator.action_size)
    for _ in range(20):
        state = simulator.step(state, action, design, scene.dt)
    seed = MPMState(*(np.ones_like(getattr(state, f)) for f in
                      ("particle_x", "particle_v", "particle_F", "particle_C")))
    forward = median_ms(lambda: simulator.step(state, action, design, scene.dt), repeats)
    backward = median_ms(
        lambda: simulator.step_vjp(state, action, design, scene.dt, seed), repeats)
    return forward, backward


def first_calls(key: str, dtype: str) -> tuple[float, float]:
    """Seconds of the first serial step and step_vjp of a scene in this process."""
    from sim_mpm import MPMState

    scene = SCENES[key]()
    simulator, design = build_sim_mpm(scene, dtype, parallel=False)
    state = simulator.initial_state(design)
    action = np.zeros(simulator.action_size)
    start = time.perf_counter()
    simulator.step(state, action, design, scene.dt)
    forward = time.perf_counter() - start
    seed = MPMState(*(np.ones_like(getattr(state, f)) for f in
                      ("particle_x", "particle_v", "particle_F", "particle_C")))
    start = time.perf_counter()
    simulator.step_vjp(state, action, design, scene.dt, seed)
    return forward, time.perf_counter() - start


def compile_seconds(key: str, dtype: str) -> tuple[float, float]:
    """:func:`first_calls` in a fresh process whose numba cache starts empty."""
    with tempfile.TemporaryDirectory() as cache:
        out = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--first-calls", f"{key},{dtype}"],
            env={**os.environ, "NUMBA_CACHE_DIR": cache}, check=True, capture_output=True,
            text=True).stdout
    forward, backward = out.split()[-2:]
    return float(forward), float(backward)


def main(argv=None) -> None:
    """Print the table."""
    import numba

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", default="2d_6400,3d_8000,3d_64000")
    parser.add_argument("--dtypes", default="float32,float64")
    parser.add_argument("--threads", default=f"1,{numba.config.NUMBA_NUM_THREADS}")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--compile", action="store_true",
                        help="time the first, compiling calls instead")
    parser.add_argument("--first-calls", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.first_calls:
        print(*first_calls(*args.first_calls.split(",")))
        return
    if args.compile:
        print(f"{'scene':<10} {'dtype':<8} {'first step s':>12} {'first vjp s':>12}")
        for key in args.scenes.split(","):
            for dtype in args.dtypes.split(","):
                forward, backward = compile_seconds(key, dtype)
                print(f"{key:<10} {dtype:<8} {forward:12.1f} {backward:12.1f}", flush=True)
        return
    print(f"{'scene':<10} {'dtype':<8} {'threads':>7} {'F ms':>8} {'B ms':>8}")
    for key in args.scenes.split(","):
        scene = SCENES[key]()
        for dtype in args.dtypes.split(","):
            for threads in sorted({int(t) for t in args.threads.split(",")}):
                forward, backward = measure(scene, dtype, threads, args.repeats)
                print(f"{key:<10} {dtype:<8} {threads:7d} {forward:8.3f} {backward:8.3f}",
                      flush=True)


if __name__ == "__main__":
    main()
