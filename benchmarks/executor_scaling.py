"""The same batch on every executor: inline, a process pool and a Dask LocalCluster.

Two batches (issue 17): one CMA-ES generation of the sim_mpm walker (``walker_2d``, a
population of 32 candidates around the initial design and controller, forward rollouts),
and one full-batch identification evaluation over 32 synthetic sim_vine recordings (the
``vine_oscillation`` scene, per-recording loss and gradient, reduced in recording order).
Each batch runs inline, on a spawned process pool and on a LocalCluster of ``--workers``
processes with one thread each, in this one run. Before timing, every executor runs one
untimed batch, so the numba cache is warm on each worker and Dask holds the problem; the
timed wall time per batch then includes submitting every task (its point shipped with it),
the workers' work and every result's way back, but not the problem, which is sent once.

Printed per batch and executor: wall time per batch (best of ``--repeats``), mean task
time, parallel efficiency ``T_inline / (workers · T)``, the bytes of each task (the pickled
function, stand-in for the problem and point) and the bytes of the problem, sent once.
Separately, the per-task overhead: ``--overhead-tasks`` tasks that return at once
(with the problem as an argument), wall time / tasks; from it the cost model of
docs/cluster.md. The results of every executor are checked equal to inline's.

    python benchmarks/executor_scaling.py [--workers 2] [--population 32] [--recordings 32]
        [--walker-steps 100] [--vine-steps 90] [--repeats 2] [--overhead-tasks 400]
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

import cloudpickle
import numpy as np

from codesign.config import load_config, parse_config, with_settings
from codesign.executors import get_executor, map_batch, shared
from codesign.experiment import build_experiment
from codesign.plugins import get_registry
from codesign.problem import evaluate_point
from codesign.validation import validate_config

VINE_IDENTIFICATION = """\
simulator:
  name: vine
  options: {{bodies: 10, length: 0.3, initial_angles: 0.08,
             tie: [joint.stiffness, joint.damping]}}
design:
  joint.stiffness: {{init: 0.014, lower: 0.001, upper: 0.2}}
  joint.damping: {{init: 3.0e-4, lower: 1.0e-6, upper: 0.01}}
identification:
  recordings:
    source: synthetic
    options: {{truth: {{joint.stiffness: 0.02, joint.damping: 2.0e-4}}, count: {count},
              action_low: 0.0, action_high: 0.01}}
  measurement: {{name: keypoints, options: {{count: 8}}}}
optimizer: {{name: lbfgsb, iterations: 1}}
run: {{steps: {steps}, substeps: 3, dt: 0.011111111111111112, seed: 0}}
"""


def walker_generation(registry, *, population: int, steps: int):
    """The walker's problem and one CMA-ES generation of ``population`` candidates
    (σ = 0.05 in scaled coordinates around the start)."""
    path = Path(registry.get("examples", "walker_2d").factory)
    raw = with_settings(load_config(path), {"run.steps": steps})
    problem = build_experiment(validate_config(raw, registry), registry).problem
    rng = np.random.default_rng(0)
    x0 = problem.x0()
    candidates = [np.clip(x0 + 0.05 * rng.standard_normal(x0.size), problem.lower,
                          problem.upper) for _ in range(population)]
    return problem, candidates


def vine_identification(registry, *, recordings: int, steps: int):
    """The vine identification problem over ``recordings`` synthetic recordings."""
    text = VINE_IDENTIFICATION.format(count=recordings, steps=steps)
    config = validate_config(parse_config(text, source="vine_identification.yaml"), registry)
    return build_experiment(config, registry).problem


def _returns_at_once(problem, index: int) -> int:
    """A task that does nothing: its wall time is the executor's overhead."""
    return index


def _best_time(run, repeats: int):
    best, result = np.inf, None
    for _ in range(repeats):
        started = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - started)
    return best, result


def _task_bytes(executor, problem, job: tuple) -> int:
    """Bytes of one pickled evaluation task: the function, the stand-in for the shared
    problem (the pool's file handle, the key of Dask's problem task) and the point."""
    handle = shared(executor, problem)
    stand_in = getattr(handle, "key", handle)
    return len(cloudpickle.dumps((evaluate_point, stand_in, *job)))


def _same(got, want) -> bool:
    return all(a.loss == b.loss and (a.grad is None or np.array_equal(a.grad, b.grad))
               for a, b in zip(got, want, strict=True))


@dataclasses.dataclass
class Batch:
    """One batch: its problem, how to run it, one task's job (for its size), task count."""

    name: str
    problem: object
    run: Callable
    job: tuple
    tasks: int
    inline_s: float = np.nan
    inline_results: list | None = None


def _overhead(executor, problem, tasks: int) -> float:
    """Seconds per task of ``tasks`` tasks that return at once (the problem shipped before)."""
    map_batch(executor, _returns_at_once, problem, [(i,) for i in range(50)])
    started = time.perf_counter()
    map_batch(executor, _returns_at_once, problem, [(i,) for i in range(tasks)])
    return (time.perf_counter() - started) / tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--population", type=int, default=32)
    parser.add_argument("--recordings", type=int, default=32)
    parser.add_argument("--walker-steps", type=int, default=100)
    parser.add_argument("--vine-steps", type=int, default=90)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--overhead-tasks", type=int, default=400)
    args = parser.parse_args()
    registry = get_registry()

    walker, candidates = walker_generation(registry, population=args.population,
                                           steps=args.walker_steps)
    vine = vine_identification(registry, recordings=args.recordings, steps=args.vine_steps)
    batches = [
        Batch(f"walker CMA-ES generation ({args.population} rollouts)", walker,
              lambda p: p.evaluate_many(candidates, grad=False), (candidates[0], False),
              len(candidates)),
        Batch(f"vine identification ({args.recordings} recordings, loss+grad)", vine,
              lambda p: p.evaluate_many([p.x0()], grad=True), (vine.x0(), 0, True),
              args.recordings),
    ]
    for batch in batches:
        print(f"{batch.name}: the problem pickles to {len(cloudpickle.dumps(batch.problem)):,} "
              "bytes")

    rows = []
    for kind, workers in (("inline", 1), ("process", args.workers), ("dask", args.workers)):
        executor = None if kind == "inline" else get_executor(kind, max_workers=workers,
                                                               registry=registry)
        try:
            for batch in batches:
                batch.problem.executor = executor
                before = getattr(executor, "shared_bytes", 0)
                batch.run(batch.problem)  # untimed: warms numba caches, ships the problem
                shipped = getattr(executor, "shared_bytes", 0) - before
                seconds, results = _best_time(lambda b=batch: b.run(b.problem), args.repeats)
                if kind == "inline":
                    batch.inline_s, batch.inline_results = seconds, results
                assert _same(results, batch.inline_results), f"{kind} differs from inline"
                rows.append((batch.name, kind, workers, seconds, seconds / batch.tasks,
                             batch.inline_s / (workers * seconds),
                             0 if executor is None else _task_bytes(executor, batch.problem,
                                                                    batch.job),
                             shipped))
            if executor is not None:
                rows.append(("per-task overhead (tasks that return at once)", kind, workers,
                             np.nan, _overhead(executor, walker, args.overhead_tasks), np.nan,
                             0, 0))
        finally:
            for batch in batches:
                batch.problem.executor = None
            if executor is not None:
                executor.shutdown()

    print(f"\n{'batch':<58} {'executor':<8} {'workers':>7} {'batch s':>8} {'per task':>10} "
          f"{'efficiency':>10} {'bytes/task':>11} {'sent once':>10}")
    for name, kind, workers, seconds, per_task, efficiency, task_bytes, shipped in rows:
        print(f"{name:<58} {kind:<8} {workers:>7} {seconds:>8.3f} {per_task * 1e3:>8.2f}ms "
              f"{efficiency:>10.0%} {task_bytes:>11,} {shipped:>10,}")
    print("\nissue 17 targets (inline task time: the batch's inline time / its tasks):")
    task_s = {batch.name: batch.inline_s / batch.tasks for batch in batches}
    for name, kind, workers, _, per_task, efficiency, _, _ in rows:
        if kind == "inline":
            continue
        if name in task_s:
            applies = "target applies" if task_s[name] >= 0.5 else \
                "tasks < 0.5 s: target n/a (--walker-steps 1000 --vine-steps 270)"
            print(f"  efficiency >= 80 % at {workers} workers, {kind:<7} {name}: "
                  f"{efficiency:.0%} with {task_s[name]:.2f} s tasks ({applies})")
        else:
            print(f"  per-task overhead <= 5 ms, {kind:<7}: {per_task * 1e3:.2f} ms "
                  f"({'met' if per_task <= 5e-3 else 'NOT met'})")


if __name__ == "__main__":
    main()
