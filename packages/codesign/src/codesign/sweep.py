"""Sweeps: one experiment over a grid of settings, one run directory per point.

``codesign sweep exp.yaml --set optimizer.options.sigma0=0.1,0.3 --set run.seed=0,1 --out
DIR`` runs the experiment at every combination of the values (the first ``--set`` varies
slowest), each point a whole run (:func:`codesign.runs.run_experiment` with the point's
settings, on the experiment's executor or ``--executor``) in ``DIR/<index>_<key=value...>``,
then writes ``DIR/summary.csv`` (one row per point: its values, final loss, iterations,
evaluations, wall time, run directory, error) and ``DIR/objective.png`` (the final loss over
the grid: a curve for one key, a heat map for two, bars per point for more).

Every point is validated before any runs. The points share one executor (starting a Dask
LocalCluster costs seconds): it is started when the first point runs and shut down when the
sweep ends; points whose ``run.executor``/``run.workers`` differ get one each. A point
whose design is refused when it is built (an init outside its bounds) or whose simulation
fails (diverges) is recorded with its error and the sweep goes on; anything else stops it,
and ``--resume`` skips the finished points and resumes the interrupted one.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from .config import ConfigError, load_config, with_settings
from .design import DesignError
from .experiment import executor_from_spec
from .outputs import new_figure, write_figure, write_text
from .runs import RunError, run_experiment
from .simulator import SimulationError
from .validation import validate_config

__all__ = ["SUMMARY_COLUMNS", "grid", "parse_setting", "plot_sweep", "point_name", "run_sweep"]

SUMMARY_COLUMNS = ("final_loss", "iterations", "evaluations", "wall_time_s", "run", "error")
"""The columns of summary.csv after the point index and the swept keys."""


def parse_setting(text: str) -> tuple[str, list[Any]]:
    """``"key=v1,v2"`` as ``(key, [v1, v2])``, each value read as YAML (``0.1`` a number,
    ``true`` a boolean, ``[1, 2]`` a list: commas inside brackets do not split values)."""
    key, equals, values = text.partition("=")
    key = key.strip()
    if not equals or not key or not values.strip():
        raise ValueError(f"expected KEY=VALUE[,VALUE...] (e.g. optimizer.options.sigma0=0.1,0.3"
                         f"), got {text!r}")
    items, depth, current = [], 0, ""
    for char in values:
        depth += {"[": 1, "{": 1, "]": -1, "}": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    items.append(current)
    try:
        return key, [yaml.safe_load(item.strip()) for item in items]
    except yaml.YAMLError as exc:
        raise ValueError(f"--set {key}: a value is not valid YAML ({exc})") from None


def grid(assignments: Sequence[tuple[str, list[Any]]]) -> list[dict[str, Any]]:
    """Every combination of the assignments' values as ``{key: value}``, the first key
    varying slowest; a key given twice is refused."""
    keys = [key for key, _ in assignments]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise ValueError(f"--set names {', '.join(repeated)} more than once; give all its "
                         "values in one --set")
    return [dict(zip(keys, values, strict=True))
            for values in itertools.product(*(values for _, values in assignments))]


def point_name(index: int, settings: dict[str, Any]) -> str:
    """The folder name of point ``index``: ``003_sigma0=0.1_seed=2`` (last key parts; other
    characters than letters, digits, ``.=-+`` become ``-``)."""
    parts = [f"{key.rsplit('.', 1)[-1]}={json.dumps(value)}" for key, value in settings.items()]
    return re.sub(r"[^A-Za-z0-9.=+_-]", "-", "_".join([f"{index:03d}", *parts]))[:120]


def _label(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def plot_sweep(path: str | Path, keys: Sequence[str], rows: Sequence[dict[str, Any]], *,
               title: str = "") -> Path:
    """Draw the final loss of each point over the grid to a PNG (failed points missing)."""
    figure = new_figure(size=(6.4, 4.4))
    axes = figure.add_subplot()
    loss = np.array([np.nan if r["final_loss"] is None else r["final_loss"] for r in rows],
                    dtype=float)
    if len(keys) == 1:
        values = [r[keys[0]] for r in rows]
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
        positions = np.asarray(values, float) if numeric else np.arange(len(values))
        axes.plot(positions, loss, marker="o")
        if not numeric:
            axes.set_xticks(positions, [_label(v) for v in values])
        axes.set_xlabel(keys[0])
    elif len(keys) == 2:
        first = list(dict.fromkeys(_label(r[keys[0]]) for r in rows))
        second = list(dict.fromkeys(_label(r[keys[1]]) for r in rows))
        table = loss.reshape(len(first), len(second))
        image = axes.imshow(table, cmap="viridis", aspect="auto")
        figure.colorbar(image, ax=axes, label="final loss")
        for (i, j), value in np.ndenumerate(table):
            axes.text(j, i, f"{value:.3g}", ha="center", va="center", color="w", fontsize=8)
        axes.set_yticks(range(len(first)), first)
        axes.set_xticks(range(len(second)), second)
        axes.set_ylabel(keys[0])
        axes.set_xlabel(keys[1])
    else:
        axes.bar(np.arange(len(rows)), loss)
        axes.set_xticks(np.arange(len(rows)), [str(r["point"]) for r in rows])
        axes.set_xlabel("point (see summary.csv)")
    if len(keys) != 2:
        axes.set_ylabel("final loss")
        axes.grid(True, alpha=0.3)
    axes.set_title(title or "final loss over the sweep")
    figure.tight_layout()
    return write_figure(path, figure)


def _summary_csv(keys: Sequence[str], rows: Sequence[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["point", *keys, *SUMMARY_COLUMNS])
    for row in rows:
        writer.writerow([row["point"], *(_label(row[k]) for k in keys),
                         *("" if row[c] is None else row[c] for c in SUMMARY_COLUMNS)])
    return buffer.getvalue()


def run_sweep(path: str | Path, registry, *, assignments: Sequence[tuple[str, list[Any]]],
              out: str | Path, quick: bool = False, resume: bool = False,
              progress: bool = True, plugin_manager=None,
              command: Sequence[str] | None = None, executor: str | dict | None = None,
              log: Callable[[str], None]) -> list[dict[str, Any]]:
    """Run the experiment ``path`` at every point of the grid of ``assignments`` into
    ``out`` (see the module docstring); return the summary rows.

    Raises ConfigError naming the point when a point's experiment is invalid (before any
    run), RunError when ``out`` exists and ``resume`` is not set; the arguments in common
    with :func:`codesign.runs.run_experiment` mean the same.
    """
    out = Path(out)
    if out.exists() and not resume:
        raise RunError(f"the sweep directory {str(out)!r} already exists; choose another --out"
                       ", delete it, or pass --resume to finish an interrupted sweep")
    points = grid(assignments)
    keys = [key for key, _ in assignments]
    configs = []
    for index, settings in enumerate(points):
        try:
            configs.append(validate_config(with_settings(load_config(path, quick=quick),
                                                         settings), registry))
        except ConfigError as exc:
            raise ConfigError(exc.errors, source=f"{path} at sweep point {index} "
                                                 f"({point_name(index, settings)})") from None
    out.mkdir(parents=True, exist_ok=True)
    with _SharedExecutors(registry, executor) as executors:
        rows = [_run_point(path, registry, index, settings, out=out / point_name(index, settings),
                           count=len(points), executor=lambda c=config: executors.of(c),
                           quick=quick, resume=resume, progress=progress,
                           plugin_manager=plugin_manager, command=command, log=log)
                for index, (settings, config) in enumerate(zip(points, configs, strict=True))]
    write_text(out / "summary.csv", _summary_csv(keys, rows))
    plot_sweep(out / "objective.png", keys, rows, title=f"{Path(path).name}: final loss")
    return rows


class _SharedExecutors:
    """The executors of a sweep, one per distinct (executor, workers) of its points, each
    started when a point first needs it and shut down when the block ends."""

    def __init__(self, registry, executor: str | dict | None):
        self.registry, self.executor = registry, executor
        self.started: dict[str, Executor | None] = {}

    def of(self, config) -> Executor | str:
        """The running executor for the validated point ``config`` (``"inline"`` for none)."""
        run = config.data["run"]
        spec = run["executor"] if self.executor is None else self.executor
        key = json.dumps([spec, run["workers"]], sort_keys=True, default=str)
        if key not in self.started:
            self.started[key] = executor_from_spec(spec, self.registry, workers=run["workers"])
        pool = self.started[key]
        return "inline" if pool is None else pool

    def __enter__(self) -> _SharedExecutors:
        return self

    def __exit__(self, *exc_info) -> None:
        for pool in self.started.values():
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        self.started.clear()


def _run_point(path: str | Path, registry, index: int, settings: dict[str, Any], *,
               out: Path, count: int, executor: Callable[[], Executor | str], quick: bool,
               resume: bool, progress: bool, plugin_manager, command,
               log: Callable[[str], None]) -> dict[str, Any]:
    """Point ``index`` of ``count`` run into ``out`` (kept if it finished before) on the
    executor ``executor()`` gives; its summary row."""
    name = out.name
    row: dict[str, Any] = {"point": index, **settings, "run": name, "error": None}
    if out.exists():
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
        log(f"point {index + 1}/{count} {name}: finished before, kept")
    else:
        log(f"point {index + 1}/{count} {name}")
        try:
            summary = run_experiment(path, registry, out=out, quick=quick, resume=resume,
                                     progress=progress, plugin_manager=plugin_manager,
                                     command=command, executor=executor(), settings=settings,
                                     log=log)
        except (DesignError, SimulationError, FloatingPointError) as exc:
            summary, row["error"] = {}, str(exc)
            log(f"point {index + 1}/{count} {name} failed: {exc}")
    row.update({key: summary.get(key) for key in SUMMARY_COLUMNS[:4]})
    return row
