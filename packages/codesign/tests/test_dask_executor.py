"""The executor hook and the dask executor on a LocalCluster: same results as inline, the
problem shipped once, and clear errors for what cannot work."""

from __future__ import annotations

import socket
import sys
import threading
import time

import numpy as np
import pytest
from systems import SpringMass
from test_executors import points, spring_problem
from test_identification import DT, FREE, q_observer, recordings

from codesign.dask_executor import DaskExecutor, unpicklable_part
from codesign.executors import ExecutorError, get_executor, map_batch, reporting_tasks, shared
from codesign.identification import IdentificationProblem
from codesign.multistart import Solver, run_starts, start_points
from codesign.optim import CMAES
from codesign.plugins import get_plugin_manager, get_registry

CORE = get_registry(get_plugin_manager(load_entry_points=False))
"""The core's own components: executors without loading every installed plugin."""


@pytest.fixture(scope="module")
def cluster():
    """A dask executor on a two-worker LocalCluster, shared by the tests of this file."""
    with get_executor("dask", max_workers=2, registry=CORE) as executor:
        yield executor


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_core_registers_inline_process_and_dask_through_the_hook():
    assert CORE.names("executors", ordered=True) == ["inline", "process", "dask"]
    assert CORE.get("executors", "dask").plugin == "core"
    with pytest.raises(ValueError, match="allowed: inline, process, dask"):
        get_executor("threads", registry=CORE)


def test_options_of_another_kind_are_refused_by_name():
    with pytest.raises(ValueError, match="unknown option 'address'.*executor 'process'"):
        get_executor("process", address="tcp://127.0.0.1:8786", registry=CORE)


def test_without_distributed_the_dask_executor_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed now fails
    with pytest.raises(ExecutorError, match=r"pip install 'codesign\[dask\]'"):
        get_executor("dask", registry=CORE)


def test_an_unreachable_scheduler_is_named():
    address = f"tcp://127.0.0.1:{free_port()}"
    with pytest.raises(ExecutorError, match=f"cannot reach the Dask scheduler at '{address}'"):
        get_executor("dask", address=address, connect_timeout_s=0.5, registry=CORE)


def test_the_address_comes_from_the_environment_when_not_given(monkeypatch):
    address = f"tcp://127.0.0.1:{free_port()}"
    monkeypatch.setenv("CODESIGN_DASK_ADDRESS", address)
    with pytest.raises(ExecutorError, match=address):
        get_executor("dask", connect_timeout_s=0.5, registry=CORE)


def test_dask_gives_inline_results_bit_for_bit_and_ships_the_problem_once(cluster):
    assert isinstance(cluster, DaskExecutor) and cluster.address.startswith("tcp://127.0.0.1:")
    problem = spring_problem(cluster)
    xs = points(problem, 6)
    expected = spring_problem().evaluate_many(xs, grad=True)
    before = cluster.shared_bytes
    for _ in range(2):  # the second batch ships nothing new
        got = problem.evaluate_many(xs, grad=True)
        for a, b in zip(got, expected, strict=True):
            assert a.loss == b.loss
            np.testing.assert_array_equal(a.grad, b.grad)
    assert cluster.shared_bytes > before
    shipped = cluster.shared_bytes
    problem.evaluate_many(xs, grad=False)
    assert cluster.shared_bytes == shipped


def test_identification_over_recordings_on_dask_reduces_in_recording_order(cluster):
    sim, recs = recordings(4)
    xs = [np.array([1.0, 4.0, 0.1]), np.array([1.4, 6.5, 0.2])]
    inline = IdentificationProblem(sim, recs, measurement=q_observer(sim), free=FREE, dt=DT)
    remote = IdentificationProblem(sim, recs, measurement=q_observer(sim), free=FREE, dt=DT,
                                   executor=cluster)
    for a, b in zip(remote.evaluate_many(xs, grad=True), inline.evaluate_many(xs, grad=True),
                    strict=True):
        assert a.loss == b.loss
        np.testing.assert_array_equal(a.grad, b.grad)


def test_cmaes_histories_are_bit_identical_on_inline_process_and_dask(cluster):
    def history(executor):
        problem = spring_problem(executor)
        result = CMAES(population_size=6, sigma0=0.2, seed=7).minimize(
            problem, problem.x0(), max_iterations=4)
        return result.history, result.x

    want_history, want_x = history(None)
    with get_executor("process", max_workers=2) as pool:
        runs = [history(get_executor("inline")), history(pool), history(cluster)]
    for got_history, got_x in runs:
        assert list(got_history) == list(want_history)
        np.testing.assert_array_equal(got_x, want_x)


class _HoldsALock(SpringMass):
    def __init__(self):
        super().__init__()
        self.guard = threading.Lock()


def test_a_problem_that_does_not_pickle_is_refused_naming_the_part(cluster):
    problem = spring_problem(cluster)
    problem.rollout.simulator = _HoldsALock()
    path, part, _ = unpicklable_part(problem)
    assert path == "problem.rollout.simulator.guard" and part is problem.rollout.simulator.guard
    with pytest.raises(ExecutorError, match=r"problem\.rollout\.simulator\.guard \(a lock\) "
                                            "cannot be pickled"):
        problem.evaluate_many(points(problem, 2))


def test_a_worker_without_a_module_of_the_problem_is_named(cluster, tmp_path, monkeypatch):
    (tmp_path / "codesign_plugin_only_here.py").write_text(
        "from systems import SpringMass\n\nclass HereOnly(SpringMass):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # the workers started before: they lack it
    from codesign_plugin_only_here import HereOnly

    problem = spring_problem(cluster)
    problem.rollout.simulator = HereOnly()
    with pytest.raises(ExecutorError, match=r"Dask worker tcp://127\.0\.0\.1:\d+ .*cannot "
                                            r"import 'codesign_plugin_only_here'"):
        map_batch(cluster, lambda p, x: p.evaluate(x), problem, [(problem.x0(),)])
    monkeypatch.delitem(sys.modules, "codesign_plugin_only_here")


def test_starts_run_as_dask_tasks_give_the_inline_results(cluster, tmp_path):
    problem = spring_problem()
    points = start_points(problem, 3, seed=2)
    solver = Solver(CMAES(population_size=4, seed=5), 3)

    def starts(executor, folder):
        return run_starts(problem, solver, points, executor=executor,
                          journal_folder=tmp_path / folder, on_finished=lambda *_: None)

    for got, want in zip(starts(cluster, "dask"), starts(None, "inline"), strict=True):
        assert got.result.history == want.result.history
        np.testing.assert_array_equal(got.result.x, want.result.x)


def test_tasks_finishing_on_the_cluster_are_reported_and_a_problem_can_be_released(cluster):
    problem = spring_problem(cluster)
    xs = points(problem, 5)
    reports = []
    with reporting_tasks(lambda done, total: reports.append((done, total))):
        got = problem.evaluate_many(xs, grad=False)
    assert reports == [(done, 5) for done in range(1, 6)]
    assert [e.loss for e in got] == [e.loss for e in spring_problem().evaluate_many(xs)]
    handle = shared(cluster, problem)
    cluster.unshare(problem)
    for _ in range(200):  # the client lets go of a released future on its event loop
        if cluster.client.refcount.get(handle.key, 0) == 0:
            break
        time.sleep(0.02)
    assert cluster.client.refcount.get(handle.key, 0) == 0  # the cluster may drop it
    before = cluster.shared_bytes
    assert shared(cluster, problem) is not handle and cluster.shared_bytes > before
