"""Multi-start: starting points, starts as one batch, the best kept, every start recorded
and journaled for resume."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
from plugin_fixture import fixtures_plugin
from test_executors import spring_problem

from codesign.executors import InlineExecutor
from codesign.multistart import Solver, run_starts, start_points
from codesign.optim import CMAES
from codesign.plugins import get_registry
from codesign.runs import run_experiment

fx = fixtures_plugin()
pytestmark = pytest.mark.usefixtures("reset_fake_plugin")


def test_start_points_begin_at_x0_and_stay_in_bounds():
    problem = spring_problem()  # stiffness and damping bounded, the action table not
    points = start_points(problem, 4, seed=3)
    np.testing.assert_array_equal(points[0], problem.x0())
    for point in points[1:]:
        assert np.all(point >= problem.lower) and np.all(point <= problem.upper)
        assert not np.array_equal(point, points[0])
    again = start_points(problem, 4, seed=3)
    for a, b in zip(points, again, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(start_points(problem, 2, seed=4)[1], points[1])
    with pytest.raises(ValueError, match="starts must be at least 1"):
        start_points(problem, 0, seed=0)


def _starts(problem, executor, folder, points):
    seen = []
    runs = run_starts(problem, Solver(CMAES(population_size=4, seed=1), 3), points,
                      executor=executor, journal_folder=folder,
                      on_finished=lambda k, run, replayed: seen.append((k, replayed)))
    return runs, seen


def test_starts_run_on_the_executor_in_order_and_resume_from_the_journal(tmp_path):
    problem = spring_problem()
    points = start_points(problem, 3, seed=0)
    inline, seen = _starts(problem, None, tmp_path / "a", points)
    assert seen == [(0, False), (1, False), (2, False)]
    pooled, _ = _starts(problem, InlineExecutor(), tmp_path / "b", points)
    (tmp_path / "b" / "1.json").unlink()  # as if killed while start 1 ran
    resumed, seen = _starts(problem, InlineExecutor(), tmp_path / "b", points)
    assert seen == [(0, True), (1, False), (2, True)]
    for runs in (pooled, resumed):
        for got, want in zip(runs, inline, strict=True):
            assert got.result.loss == want.result.loss
            np.testing.assert_array_equal(got.result.x, want.result.x)
            assert [i.loss for i in got.iterations] == [i.loss for i in want.iterations]
            np.testing.assert_array_equal(got.iterations[-1].x, want.iterations[-1].x)


def test_a_run_with_starts_keeps_the_best_and_records_every_start(tmp_path):
    text = fx.SPRING_YAML.read_text().replace("  iterations: 12\n",
                                              "  iterations: 3\n  starts: 3\n")
    path = tmp_path / "exp.yaml"
    path.write_text(textwrap.dedent(text))
    manager = fx.plugin_manager()
    summary = run_experiment(path, get_registry(manager), out=tmp_path / "run", progress=False,
                             plugin_manager=manager, log=lambda message: None)
    history = json.loads((tmp_path / "run" / "history.json").read_text())
    starts = history["starts"]
    assert [s["start"] for s in starts] == [0, 1, 2] and summary["starts"] == 3
    best = min(starts, key=lambda s: s["loss"])
    assert summary["best_start"] == best["start"] and summary["final_loss"] == best["loss"]
    assert summary["evaluations"] == sum(s["evaluations"] for s in starts) == 9
    assert len({s["initial"]["design.stiffness"] for s in starts}) == 3
    assert history["iterations"][-1]["iteration"] == 3
