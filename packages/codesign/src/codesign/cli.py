"""The ``codesign`` command line: run, sweep, validate, plugins, options, demo.

- ``codesign run exp.yaml --out DIR [--quick] [--resume] [--executor KIND[=ADDRESS]]``:
  optimize (or, for an experiment with an ``identification`` section, fit parameters to
  recordings and print the recovered values against the truth) and write DIR; batches run
  on ``--executor`` instead of ``run.executor`` when given (``dask=tcp://host:8786``).
- ``codesign sweep exp.yaml --set KEY=V1,V2 [--set ...] --out DIR [--resume]
  [--executor ...]``: one run per point of the grid (:mod:`codesign.sweep`), a summary
  table (summary.csv) and a plot of the final loss over the grid; exit code 1 when a point
  failed.
- ``codesign validate exp.yaml [--quick]``: check the experiment (both phases), print OK or
  every problem.
- ``codesign plugins``: every registered component with its plugin and distribution.
- ``codesign options SIMULATOR``: the simulator's options: name, unit, default, bounds, doc.
- ``codesign demo [SIMULATOR] [--quick] [--out DIR]``: run the default example that the
  plugin of SIMULATOR registers (without one: the first plugin by name that has one).

Progress goes to stderr: a bar on a terminal, a plain line every few seconds when stderr is
a log or a pipe (``--no-progress`` hides it). The run directory's environment.json records
the command line. Errors are printed as one message on stderr with exit code 2 (``--debug``
shows the traceback); an interrupted run exits with 130 and says how to resume.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

from . import __version__
from .config import ConfigError, load_config
from .design import DesignError
from .executors import ExecutorError
from .experiment import build_experiment
from .options import format_options
from .plugins import COMPONENT_KINDS, RegistryError, get_plugin_manager, get_registry
from .run_directory import format_identification_table
from .runs import RunError, RunInterrupted, run_experiment
from .simulator import SimulationError
from .sweep import parse_setting, run_sweep
from .validation import validate_config

__all__ = ["main", "build_parser", "parse_executor", "DEMO_HELP"]

DEMO_HELP = """\
codesign demo runs the default example that a simulator plugin registers (the soft-robot
walker of sim_mpm), but no simulator plugin is installed.

Install the MPM simulator and try again:

    pip install ./packages/sim_mpm        # from a checkout of the codesign repository
    uv sync --all-packages                # or: every workspace package at once, with uv

Then `codesign demo` trains the walker and writes its run directory (loss curve, video).
`codesign plugins` lists what is installed."""

_EXPECTED_ERRORS = (ConfigError, DesignError, SimulationError, RunError, RegistryError,
                    ExecutorError, FloatingPointError, OSError)


def _setting(text: str) -> tuple[str, list]:
    try:
        return parse_setting(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_executor(text: str) -> str | dict:
    """``--executor``'s value: ``KIND`` or ``KIND=ADDRESS`` (``dask=tcp://host:8786``) as a
    ``run.executor`` value (a kind, or ``{kind, address}``)."""
    kind, equals, address = text.partition("=")
    if not kind or (equals and not address):
        raise argparse.ArgumentTypeError(f"expected KIND or KIND=ADDRESS (e.g. dask or "
                                         f"dask=tcp://127.0.0.1:8786), got {text!r}")
    return {"kind": kind, "address": address} if equals else kind


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``codesign`` command."""
    parser = argparse.ArgumentParser(
        prog="codesign", description="Differentiable robot simulation and co-design.")
    parser.add_argument("--version", action="version", version=f"codesign {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show the full traceback of an error")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="optimize an experiment and write its run directory")
    run.add_argument("experiment", type=Path, help="experiment YAML file")
    run.add_argument("--out", type=Path, required=True, help="run directory to create")
    run.add_argument("--quick", action="store_true",
                     help="apply the experiment's quick section (a short setting)")

    sweep = commands.add_parser("sweep", help="run an experiment over a grid of settings, "
                                              "one run directory per point")
    sweep.add_argument("experiment", type=Path, help="experiment YAML file")
    sweep.add_argument("--set", dest="settings", action="append", required=True,
                       type=_setting, metavar="KEY=V1,V2,...",
                       help="a dotted key of the experiment and its values, e.g. "
                            "optimizer.options.sigma0=0.1,0.3 (repeat for a grid)")
    sweep.add_argument("--out", type=Path, required=True,
                       help="sweep directory: a run directory per point, summary.csv, "
                            "objective.png")
    sweep.add_argument("--quick", action="store_true",
                       help="apply the experiment's quick section (a short setting)")

    validate = commands.add_parser("validate", help="check an experiment without running it")
    validate.add_argument("experiment", type=Path, help="experiment YAML file")
    validate.add_argument("--quick", action="store_true", help="check the quick setting")

    commands.add_parser("plugins", help="list plugins and the components they register")

    options = commands.add_parser("options", help="list a simulator's options (name, unit, "
                                                  "default, bounds, doc)")
    options.add_argument("simulator", help="a simulator's name, e.g. mpm")

    demo = commands.add_parser("demo", help="run the default example of an installed plugin")
    demo.add_argument("simulator", nargs="?", default=None,
                      help="run this simulator's default example (default: the first "
                           "installed plugin by name that registers one)")
    demo.add_argument("--quick", action="store_true", help="a short run (seconds to minutes)")
    demo.add_argument("--out", type=Path, default=None,
                      help="run directory (default: runs/<example>-<date>-<time>)")
    for sub in (run, demo, sweep):
        sub.add_argument("--resume", action="store_true",
                         help="continue the interrupted run journaled in OUT.partial (a "
                              "sweep: skip finished points)")
        sub.add_argument("--executor", type=parse_executor, default=None, metavar="KIND[=ADDRESS]",
                         help="run batches on this executor instead of run.executor: inline, "
                              "process, dask (a local cluster) or dask=tcp://HOST:8786")
        sub.add_argument("--no-progress", action="store_true",
                         help="hide the progress (a bar on a terminal; otherwise a line every "
                              "few seconds)")
    for sub in (run, validate, demo, sweep):
        sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                         help="show the full traceback of an error")
    return parser


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """Treat SIGTERM like Ctrl-C while running, so the journal is kept for --resume."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run(args, plugin_manager, experiment_path: Path, out: Path) -> int:
    with _sigterm_as_interrupt():
        summary = run_experiment(experiment_path, get_registry(plugin_manager), out=out,
                                 quick=args.quick, resume=args.resume,
                                 progress=not args.no_progress, plugin_manager=plugin_manager,
                                 command=args.command_line, executor=args.executor)
    print(f"wrote {out}: final loss {summary['final_loss']:.6g} after {summary['iterations']} "
          f"iteration(s), {summary['evaluations']} evaluation(s), {summary['wall_time_s']:.1f} s")
    for note in summary["notes"]:
        print(f"  {note}")
    if "identification" in summary:
        found = summary["identification"]
        if found["parameters"]:
            print(f"identified from {found['recordings']} recording(s) ({found['source']}):")
            for line in format_identification_table(found["parameters"]):
                print(f"  {line}")
        else:  # a fit of the recordings' actions alone
            print(f"fitted the actions of {found['recordings']} recording(s) "
                  f"({found['source']}): parameters.npz, actions.<recording>")
    return 0


def _sweep(args, plugin_manager) -> int:
    with _sigterm_as_interrupt():
        rows = run_sweep(args.experiment, get_registry(plugin_manager),
                         assignments=args.settings, out=args.out, quick=args.quick,
                         resume=args.resume, progress=not args.no_progress,
                         plugin_manager=plugin_manager, command=args.command_line,
                         executor=args.executor, log=lambda line: print(line, file=sys.stderr))
    keys = [key for key, _ in args.settings]
    print(f"wrote {args.out}: {len(rows)} point(s), summary.csv and objective.png")
    for row in rows:
        values = ", ".join(f"{key}={row[key]!r}" for key in keys)
        result = f"failed: {row['error']}" if row["error"] else \
            f"final loss {row['final_loss']:.6g}"
        print(f"  {row['point']:>3}  {values}: {result}")
    failed = sum(1 for row in rows if row["error"])
    return 1 if failed else 0


def _validate(args, plugin_manager) -> int:
    registry = get_registry(plugin_manager)
    config = validate_config(load_config(args.experiment, quick=args.quick), registry)
    # Built without its executor: validating starts no cluster and contacts no scheduler.
    with build_experiment(config, registry, executor="inline") as experiment:
        problem = experiment.problem
        free = problem.free
        if config.identification:
            print(f"OK: {args.experiment}: identification with simulator "
                  f"{config.data['simulator']['name']!r}, {len(problem.recordings)} "
                  f"recording(s) from {config.data['identification']['recordings']['source']!r}, "
                  f"fitting {', '.join(free) or 'initial states only'} ({problem.size} "
                  f"value(s)), optimizer {config.data['optimizer']['name']!r} for "
                  f"{experiment.iterations} iteration(s)")
            return 0
        print(f"OK: {args.experiment}: simulator {config.data['simulator']['name']!r}, "
              f"{len(free)} free design parameter(s) ({', '.join(free) or 'none'}), "
              f"{problem.size} optimized value(s), optimizer "
              f"{config.data['optimizer']['name']!r} for {experiment.iterations} iteration(s)")
    return 0


def _plugins(plugin_manager) -> int:
    registry = get_registry(plugin_manager)
    rows = [("KIND", "NAME", "PLUGIN", "VERSION", "DISTRIBUTION", "DESCRIPTION")]
    for registration in registry.all():
        rows.append((registration.kind[:-1], registration.name, registration.plugin,
                     registration.version or "-", registration.distribution or "-",
                     str(registration.info.get("description", ""))))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
              + "  " + row[5])
    counts = ", ".join(f"{len(registry.names(kind))} {kind}" for kind in COMPONENT_KINDS)
    print(f"\n{counts}")
    return 0


def _options(args, plugin_manager) -> int:
    factory = get_registry(plugin_manager).get("simulators", args.simulator).factory
    declared = getattr(factory, "options", None)
    if declared is None:
        raise RegistryError(f"simulator {args.simulator!r} does not declare its options "
                            "(codesign.options.options_factory); see its documentation")
    print(format_options(declared))
    return 0


def _demo(args, plugin_manager) -> int:
    registry = get_registry(plugin_manager)
    simulators = registry.names("simulators")
    if not simulators:
        print(DEMO_HELP)
        return 0
    example = registry.default_example(args.simulator)
    if example is None:
        missing = (f"the plugin of simulator {args.simulator!r} registers no default example"
                   if args.simulator else
                   "there is no installed plugin that registers a default example")
        print(f"codesign demo: {missing} (installed simulators: {', '.join(simulators)}); "
              "`codesign plugins` lists the installed examples and `codesign run EXAMPLE.yaml "
              "--out DIR` runs one.")
        return 0
    out = args.out or Path("runs") / f"{example.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    print(f"codesign demo: {example.name} ({example.info.get('description', '')}) from "
          f"plugin {example.plugin!r} ({example.factory}); writing {out}")
    return _run(args, plugin_manager, Path(example.factory), out)


def _installed_plugins():
    """The installed plugins; a skipped plugin's warning becomes one line on stderr."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        manager = get_plugin_manager()
    for warning in caught:
        print(f"codesign: warning: {warning.message}", file=sys.stderr)
    return manager


def main(argv: Sequence[str] | None = None, *, plugin_manager=None) -> int:
    """Entry point of the ``codesign`` command; returns the exit status.

    ``plugin_manager`` replaces the installed plugins (tests inject a fake plugin).
    """
    argv = sys.argv[1:] if argv is None else [str(arg) for arg in argv]
    args = build_parser().parse_args(argv)
    args.command_line = ["codesign", *argv]  # what environment.json records
    try:
        manager = plugin_manager if plugin_manager is not None else _installed_plugins()
        if args.command == "run":
            return _run(args, manager, args.experiment, args.out)
        if args.command == "validate":
            return _validate(args, manager)
        if args.command == "sweep":
            return _sweep(args, manager)
        if args.command == "plugins":
            return _plugins(manager)
        if args.command == "options":
            return _options(args, manager)
        return _demo(args, manager)
    except RunInterrupted as exc:
        if args.debug:
            raise
        print(f"codesign: {exc}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        if args.debug:
            raise
        print("codesign: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # every failure becomes one message; --debug shows the traceback
        if args.debug:
            raise
        text = str(exc) if isinstance(exc, _EXPECTED_ERRORS) else (
            f"{type(exc).__name__}: {exc} (rerun with --debug for the traceback)")
        print(f"codesign: error: {text}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
