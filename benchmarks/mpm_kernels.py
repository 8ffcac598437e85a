"""Speed of sim_mpm's numba kernels alone: ms per forward and per reverse substep.

Times ``MPMSimulator.step`` and ``step_vjp`` (numba, serial) on the benchmark scenes of
benchmarks/peers/scene.py (fixed corotated, Δt = 1e-3 s, sticky walls, gravity) in float32
and float64: median of ``--repeats`` timed calls after warm-up calls. The reverse substep
includes the forward recomputation that ``step_vjp`` does internally.

The Warp CPU figures printed beside ours are QUOTED from the issue (measured there by its
author on this machine), not measured by this script; benchmarks/mpm_step.py measures
peers side by side when they are installed.

Usage: ``python benchmarks/mpm_kernels.py [--scenes 2d_6400,3d_8000,3d_64000]
[--dtypes float32,float64] [--repeats 30]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from peers.scene import SCENES, BenchmarkScene, build_sim_mpm  # noqa: E402

# issue 3's reference figures, ms per substep (forward, backward); quoted, not measured here
QUOTED_WARP_CPU = {"2d_6400": (0.52, 1.47), "3d_64000": (16.0, 98.0)}


def build(scene: BenchmarkScene, dtype: str):
    """(simulator, design, state) of the scene with numba kernels, serial."""
    simulator, design = build_sim_mpm(scene, dtype)
    return simulator, design, simulator.initial_state(design)


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


def measure(scene: BenchmarkScene, dtype: str, repeats: int) -> tuple[float, float]:
    """(forward ms, backward ms) per substep, after 20 substeps of motion."""
    from sim_mpm import MPMState

    simulator, design, state = build(scene, dtype)
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", default="2d_6400,3d_8000,3d_64000")
    parser.add_argument("--dtypes", default="float32,float64")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args(argv)
    print(f"{'scene':<10} {'dtype':<8} {'F ms':>8} {'B ms':>8}   Warp CPU F / B ms "
          "(quoted from issue 3, not measured)")
    for key in args.scenes.split(","):
        scene = SCENES[key]()
        quoted = QUOTED_WARP_CPU.get(key)
        note = f"{quoted[0]:.2f} / {quoted[1]:.2f}" if quoted else "-"
        for dtype in args.dtypes.split(","):
            forward, backward = measure(scene, dtype, args.repeats)
            print(f"{key:<10} {dtype:<8} {forward:8.3f} {backward:8.3f}   {note}", flush=True)


if __name__ == "__main__":
    main()
