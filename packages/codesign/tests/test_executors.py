"""Executors: inline and process pool give the same batch results; problems pickle."""

from __future__ import annotations

import pickle
from concurrent.futures import Executor, ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from systems import SpringMass

from codesign import Objective, OpenLoopController, Rollout, StateFieldObserver, TrajectoryTracking
from codesign.executors import (
    InlineExecutor,
    get_executor,
    map_batch,
    reporting_tasks,
    shared,
    unshare,
)
from codesign.problem import RolloutProblem


def spring_problem(executor=None, steps=10):
    """A tiny spring-mass tracking problem over stiffness, damping and the action table."""
    sim = SpringMass()
    controller = OpenLoopController(observation_size=0, action_size=1, control_steps=steps)
    rollout = Rollout(sim, controller=controller, steps=steps, dt=0.05)
    observer = StateFieldObserver(simulator=sim, fields=["q", "v"])
    targets = np.linspace(0.0, 1.0, 2 * (steps + 1)).reshape(steps + 1, 2)
    objective = Objective.of(TrajectoryTracking(observer=observer, targets=targets))
    return RolloutProblem(rollout, objective, free=["stiffness", "damping"], executor=executor)


def points(problem, count=4):
    rng = np.random.default_rng(0)
    return [problem.x0() + 0.1 * rng.standard_normal(problem.size) for _ in range(count)]


def test_inline_executor_runs_at_once_and_captures_exceptions():
    executor = InlineExecutor()
    assert isinstance(executor, Executor)
    calls = []
    future = executor.submit(lambda a, *, b: calls.append((a, b)) or a + b, 1, b=2)
    assert calls == [(1, 2)] and future.done() and future.result() == 3
    failed = executor.submit(lambda: 1 / 0)
    assert failed.done() and isinstance(failed.exception(), ZeroDivisionError)
    with pytest.raises(ZeroDivisionError):
        failed.result()
    assert list(executor.map(lambda v: v * v, [1, 2, 3])) == [1, 4, 9]
    with executor:
        pass
    with pytest.raises(RuntimeError, match="shut down"):
        executor.submit(print)


def test_get_executor_kinds_and_errors():
    assert isinstance(get_executor(), InlineExecutor)
    assert isinstance(get_executor("inline", max_workers=1), InlineExecutor)
    with pytest.raises(ValueError, match="allowed: inline, process"):
        get_executor("threads")
    with pytest.raises(ValueError, match="max_workers"):
        get_executor("process", max_workers=0)
    with pytest.raises(ValueError, match="kind='process'"):
        get_executor("inline", max_workers=4)


def test_process_pool_matches_inline_and_serial():
    serial = spring_problem()
    xs = points(serial)
    expected = serial.evaluate_many(xs, grad=True)
    inline = spring_problem(get_executor("inline")).evaluate_many(xs, grad=True)
    with get_executor("process", max_workers=2) as pool:
        assert isinstance(pool, ProcessPoolExecutor)
        remote = spring_problem(pool).evaluate_many(xs, grad=True)
    for results in (inline, remote):
        for got, want in zip(results, expected, strict=True):
            assert got.loss == want.loss
            np.testing.assert_array_equal(got.grad, want.grad)
    assert len({e.loss for e in expected}) == len(xs)


def test_rollout_problem_pickles_with_either_executor():
    for executor in (None, InlineExecutor(), get_executor("process", max_workers=1)):
        problem = spring_problem(executor)
        clone = pickle.loads(pickle.dumps(problem))
        x = points(problem, 1)[0]
        assert clone.evaluate(x).loss == problem.evaluate(x).loss
        # The executor stays behind: a worker evaluates its share in its own process.
        assert clone.executor is None
        if executor is not None:
            executor.shutdown()


def test_a_process_pool_ships_a_shared_problem_once_per_worker():
    with get_executor("process", max_workers=2) as pool:
        problem = spring_problem(pool)
        handle = shared(pool, problem)
        assert shared(pool, problem) is handle  # one file per problem, whatever the batches
        assert len(pickle.dumps(handle)) < 200 < len(pickle.dumps(problem))
        xs = points(problem, 6)
        got = problem.evaluate_many(xs, grad=True)
        folder = pool._folder
    for a, b in zip(got, spring_problem().evaluate_many(xs, grad=True), strict=True):
        assert a.loss == b.loss
        np.testing.assert_array_equal(a.grad, b.grad)
    assert not Path(folder).exists()  # removed at shutdown


def test_an_unshared_problem_leaves_the_pool_and_its_file_name_is_never_reused():
    with get_executor("process", max_workers=1) as pool:
        first, second = spring_problem(pool), spring_problem(pool)
        handle = shared(pool, first)
        unshare(pool, first)
        assert not Path(handle.path).exists()
        unshare(pool, first)  # forgetting twice is harmless
        # workers cache what they read by path: a later problem must not take the old name
        assert shared(pool, second).path != handle.path
        assert shared(pool, first).path not in (handle.path, shared(pool, second).path)
        assert second.evaluate_many(points(second, 2))[0].loss == \
            spring_problem().evaluate(points(second, 2)[0], grad=False).loss
    unshare(InlineExecutor(), first)  # an executor that shares nothing has nothing to forget


def _nested_batch(common, k):
    """A task that runs a batch of its own (inline) and returns ``common + k``."""
    return sum(map_batch(None, lambda c, j: j, None, [(0,), (1,)])) + common + k


def _add(common, k):
    return common + k


def test_batches_report_each_finished_task_inline_and_on_a_process_pool():
    reports = []
    with reporting_tasks(lambda done, total: reports.append((done, total))):
        assert map_batch(None, _nested_batch, 10, [(k,) for k in range(3)]) == [11, 12, 13]
        assert reports == [(1, 3), (2, 3), (3, 3)]  # the batches inside tasks do not report
        with get_executor("process", max_workers=2) as pool:
            assert map_batch(pool, _add, 10, [(k,) for k in range(5)]) == [10, 11, 12, 13, 14]
    assert reports[3:] == [(done, 5) for done in range(1, 6)]
    assert map_batch(None, _add, 0, [(1,)]) == [1] and len(reports) == 8  # outside: silent
