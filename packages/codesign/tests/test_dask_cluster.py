"""Faults on a real cluster: a ``dask scheduler`` and two ``dask worker`` processes on
loopback (random free ports), started and stopped here. A worker killed mid-batch has its
tasks rerun (same result); a lost scheduler stops the run with a clear error and
``--resume`` finishes it with the result of an uninterrupted run."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from cluster_plugin import plugin_manager
from test_executors import points, spring_problem

from codesign.cli import main
from codesign.executors import get_executor, shared
from codesign.outputs import read_npz
from codesign.plugins import get_registry
from codesign.problem import evaluate_point
from codesign.runs import partial_dir

HERE = Path(__file__).parent
DASK = Path(sys.executable).with_name("dask")
STARTUP_S = 30.0  # an upper bound for a loaded 2-core machine; a healthy start takes ~3 s


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Cluster:
    """A scheduler and two single-threaded workers without nannies (a killed worker stays
    dead), with this folder on their PYTHONPATH so they import the tests' systems."""

    def __init__(self):
        self.address = f"tcp://127.0.0.1:{_free_port()}"
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            filter(None, [str(HERE), os.environ.get("PYTHONPATH")])))
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env}
        self.scheduler = subprocess.Popen(
            [DASK, "scheduler", "--host", "127.0.0.1", "--port", self.address.rsplit(":")[-1],
             "--no-dashboard"], **quiet)
        self.workers = [subprocess.Popen(
            [DASK, "worker", self.address, "--nthreads", "1", "--no-nanny", "--host",
             "127.0.0.1", "--no-dashboard", "--death-timeout", str(STARTUP_S)], **quiet)
            for _ in range(2)]

    def wait_until_ready(self) -> None:
        """Return once the scheduler answers and both workers have joined."""
        from distributed import Client

        with Client(self.address, timeout=STARTUP_S) as client:
            client.wait_for_workers(2, timeout=STARTUP_S)

    def executor(self):
        return get_executor("dask", address=self.address, max_workers=2,
                            connect_timeout_s=STARTUP_S, registry=get_registry(plugin_manager()))

    def stop(self) -> None:
        for process in (*self.workers, self.scheduler):
            process.kill()
            process.wait()


@pytest.fixture
def cluster():
    started = Cluster()
    try:
        started.wait_until_ready()
        yield started
    finally:
        started.stop()


def test_a_worker_killed_mid_batch_has_its_tasks_rerun_with_the_same_result(cluster):
    from systems import SlowSpringMass

    with cluster.executor() as executor:
        problem = spring_problem(executor)
        problem.rollout.simulator = SlowSpringMass(delay_s=0.4)
        xs = points(problem, 8)  # four rounds of 0.4 s on two workers
        handle = shared(executor, problem)
        client = executor.client
        address, pid = next(iter(client.run(os.getpid).items()))
        (victim,) = [w for w in cluster.workers if w.pid == pid]
        futures = [executor.submit(evaluate_point, handle, x, True) for x in xs]
        futures[0].result()
        # both workers hold queued tasks from the start (8 of 0.4 s), so either one, killed
        # now, dies in the middle of the batch: its running task and its queue move to the
        # other (watching the scheduler's processing list for a busy worker raced the
        # polls between tasks and sometimes saw none)
        unfinished = sum(not f.future.done() for f in futures)
        victim.kill()
        assert unfinished >= 4, "the batch ended before a worker could be killed in it"
        got = [future.result() for future in futures]
        assert victim.wait(timeout=5) is not None
        assert address not in client.scheduler_info()["workers"]
    problem.executor, problem.rollout.simulator = None, SlowSpringMass(delay_s=0.0)
    for a, b in zip(got, problem.evaluate_many(xs, grad=True), strict=True):
        assert a.loss == b.loss
        np.testing.assert_array_equal(a.grad, b.grad)


EXPERIMENT = """\
simulator: {name: slow_spring, options: {delay_s: 0.05}}
design:
  stiffness: {init: 3.0, lower: 0.5, upper: 20.0}
  damping: {init: 0.5, lower: 0.0, upper: 5.0}
identification:
  recordings:
    source: synthetic
    options: {truth: {stiffness: 6.0, damping: 0.3}, count: 2}
  measurement: {name: state_fields, options: {fields: [q]}}
optimizer: {name: cmaes, options: {population_size: 4, sigma0: 0.3}, iterations: 5}
run: {steps: 10, dt: 0.01, executor: inline}
"""


def _run(args, capsys):
    code = main([str(a) for a in args], plugin_manager=plugin_manager())
    return code, capsys.readouterr().err


def _journaled(out: Path) -> int:
    return len(list((partial_dir(out) / "evaluations").glob("*.npz")))


def test_a_lost_scheduler_stops_the_run_and_resume_finishes_it(cluster, tmp_path, capsys):
    experiment = tmp_path / "identify.yaml"
    experiment.write_text(EXPERIMENT)
    out = tmp_path / "run"

    run_ended = threading.Event()

    def kill_the_scheduler_after_a_generation():
        while _journaled(out) < 4 and not run_ended.is_set():
            time.sleep(0.02)
        cluster.scheduler.kill()

    killer = threading.Thread(target=kill_the_scheduler_after_a_generation)
    killer.start()
    try:
        code, err = _run(["run", experiment, "--out", out, "--no-progress",
                          "--executor", f"dask={cluster.address}"], capsys)
    finally:
        run_ended.set()
        killer.join()
    assert code == 2, err
    assert f"lost the Dask scheduler at {cluster.address}" in err and "--resume" in err
    assert not out.exists() and 4 <= _journaled(out) < 4 * 5 + 1

    code, err = _run(["run", experiment, "--out", out, "--resume", "--no-progress"], capsys)
    assert code == 0, err
    reference = tmp_path / "uninterrupted"
    assert _run(["run", experiment, "--out", reference, "--no-progress"], capsys)[0] == 0
    for name, value in read_npz(reference / "parameters.npz").items():
        np.testing.assert_array_equal(read_npz(out / "parameters.npz")[name], value)
    history = json.loads((out / "history.json").read_text())["iterations"]
    assert history == json.loads((reference / "history.json").read_text())["iterations"]
