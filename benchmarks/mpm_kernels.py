"""Speed of sim_mpm's numba kernels alone: ms per forward and per reverse substep.

Times ``MPMSimulator.step`` and ``step_vjp`` on the benchmark scenes of
benchmarks/peers/scene.py (fixed corotated, Δt = 1e-3 s, sticky walls, gravity) for each
dtype and thread count: median of ``--repeats`` timed calls after warm-up calls. One thread
runs the serial kernels, more the multithreaded ones (``parallel=True``). The reverse
substep includes the forward recomputation that ``step_vjp`` does internally.
benchmarks/mpm_step.py measures the Warp and Taichi peers side by side.

Usage: ``python benchmarks/mpm_kernels.py [--scenes 2d_6400,3d_8000,3d_64000]
[--dtypes float32,float64] [--threads 1,2] [--repeats 30]``.
"""

from __future__ import annotations

import argparse
import os
import sys
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


def main(argv=None) -> None:
    """Print the table."""
    import numba

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", default="2d_6400,3d_8000,3d_64000")
    parser.add_argument("--dtypes", default="float32,float64")
    parser.add_argument("--threads", default=f"1,{numba.config.NUMBA_NUM_THREADS}")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args(argv)
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
