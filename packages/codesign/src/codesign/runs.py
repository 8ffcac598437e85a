"""Runs: an experiment file to a run directory, load → validate → build → optimize → write.

:func:`run_experiment` is the whole pipeline; each stage is one call into a module of its own:

1. load: :func:`codesign.config.load_config` parses the YAML keeping every line,
2. validate: :func:`codesign.validation.validate_config` checks the sections and options,
3. build: :func:`codesign.experiment.build_experiment` constructs the components and checks
   what needs them (every check happens before any directory exists),
4. optimize: :func:`codesign.optimization.optimize_experiment` on a journaled objective
   (with ``stages``, once per stage, each from the last one's result: :mod:`codesign.stages`),
5. write: :func:`codesign.run_directory.write_run_files` (the files are listed there).

This module keeps the run directory whole and leaves nothing else: the evaluations are
journaled in ``DIR.partial/`` for ``resume=True`` (:mod:`codesign.optimization`), the files
are built in ``DIR.partial/output/``, which is renamed to ``DIR`` only when complete, and a
failed run removes the journal and every folder it created (the parents of ``DIR``
included). A run killed while writing leaves only the journal; resuming it replays the
evaluations and writes the files again. The journal records the resolved experiment, the
input files' hashes and the plugin versions; a resume refuses when any of them changed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

from .config import load_config, with_settings
from .environment import run_environment
from .executors import ExecutorLostError
from .experiment import build_experiment
from .inputs import input_changes, input_files, plugin_changes
from .optimization import optimize_experiment
from .outputs import write_json, write_text
from .run_directory import plugin_table, write_run_files
from .stages import check_stage_experiments, optimized_stages
from .validation import validate_config

__all__ = ["RunError", "RunInterrupted", "partial_dir", "run_experiment"]


class RunError(RuntimeError):
    """A run cannot start or finish (its directory exists, a stale journal, a changed config
    or input)."""


class RunInterrupted(RunError):
    """The run was interrupted (Ctrl-C or SIGTERM); its journal is kept for ``--resume``."""


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


@dataclasses.dataclass(frozen=True)
class _RunRecord:
    """What a resumed run must share with the interrupted one, as the journal keeps it."""

    config_text: str
    inputs: list[dict[str, Any]]
    plugins: list[dict[str, Any]]

    def write(self, folder: Path) -> None:
        """Write config.yaml, inputs.json and plugins.json into ``folder``."""
        write_text(folder / "config.yaml", self.config_text)
        write_json(folder / "inputs.json", self.inputs)
        write_json(folder / "plugins.json", self.plugins)


def run_experiment(path: str | Path, registry, *, out: str | Path, quick: bool = False,
                   resume: bool = False, progress: bool = True, plugin_manager=None,
                   command: Sequence[str] | None = None,
                   executor: str | dict | Executor | None = None,
                   settings: Mapping[str, Any] | None = None,
                   log: Callable[[str], None] = _stderr) -> dict[str, Any]:
    """Run the experiment file ``path`` into the run directory ``out``; return the summary.

    ``quick`` applies the experiment's quick section; ``resume`` continues the run journaled
    in ``partial_dir(out)``; ``progress`` shows the progress on stderr (a bar on a terminal,
    a line every few seconds otherwise). ``plugin_manager`` (the one ``registry`` came from)
    lists every plugin in plugins.json; without it the plugins that registered components
    are listed. ``command`` is the command line environment.json records (default
    ``sys.argv``). ``executor`` (a kind or ``{kind, <options>}``) replaces the experiment's
    ``run.executor``; it is not part of the experiment, so a run may resume on another
    executor (results do not depend on it); a running ``Executor`` is used and left running
    (a sweep's, shared by its points). ``settings`` (``"dotted.key": value``) are set
    in the experiment (:func:`codesign.config.with_settings`; the recorded config.yaml holds
    them). ``log`` receives notes and warnings.

    Raises ConfigError/DesignError before anything is created, RunError for an existing
    ``out``, a stale journal or a resume whose experiment, input files or plugins changed,
    RunInterrupted (journal kept) on Ctrl-C/SIGTERM, RunError (journal kept) when the
    executor's cluster is lost; any other error (a diverged simulation)
    removes the journal, every temporary file and the folders the run created.
    """
    config = validate_config(with_settings(load_config(path, quick=quick), settings or {}),
                             registry)
    out = Path(out)
    journal_dir = _journal_dir_to_use(out, resume=resume, log=log)
    record = _RunRecord(config.to_yaml(), input_files(config),
                        plugin_table(plugin_manager, registry=registry))
    if journal_dir.exists():
        _refuse_a_changed_run(journal_dir, record)
    if config.stages:
        check_stage_experiments(config, registry)
    # taken before optimizing: the git state of the code that runs, not of later edits
    environment = run_environment(command=command, experiment_folder=config.base_dir)
    with contextlib.ExitStack() as stack:
        if config.stages:  # each stage is built when its turn comes, inside the journal
            stack.enter_context(_journal_kept_on_interrupt(journal_dir, record))
            experiment, optimized = stack.enter_context(optimized_stages(
                config, registry, journal_dir / "stages", executor=executor,
                progress=progress, log=log))
        else:
            experiment = stack.enter_context(build_experiment(config, registry,
                                                              executor=executor))
            stack.enter_context(_journal_kept_on_interrupt(journal_dir, record))
            optimized = optimize_experiment(experiment, journal_dir / "evaluations",
                                            progress=progress, log=log)
        with _renamed_when_complete(journal_dir / "output", out) as folder:
            return write_run_files(folder, experiment, optimized, record.plugins,
                                   inputs=record.inputs, environment=environment, log=log)


def partial_dir(out: str | Path) -> Path:
    """The journal folder ``DIR.partial`` beside run directory ``DIR``."""
    out = Path(out)
    return out.with_name(out.name + ".partial")


def _journal_dir_to_use(out: Path, *, resume: bool, log: Callable[[str], None]) -> Path:
    """The journal folder of ``out``; RunError if ``out`` exists or a journal is not resumed."""
    journal_dir = partial_dir(out)
    if out.exists():
        raise RunError(f"the run directory {str(out)!r} already exists; choose another --out "
                       "or delete it")
    if journal_dir.exists() and not resume:
        raise RunError(f"{str(journal_dir)!r} holds an interrupted run; pass --resume to "
                       "continue it, or delete that folder to start over")
    if resume and not journal_dir.exists():
        log(f"note: nothing to resume at {str(journal_dir)!r}; starting a new run")
    return journal_dir


def _read_json(path: Path) -> Any:
    """The JSON in ``path``, or ``None`` when it is missing or unreadable."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _refuse_a_changed_run(journal_dir: Path, record: _RunRecord) -> None:
    """RunError unless the journal's experiment, input files and plugins are ``record``'s."""
    start_over = f"or delete {str(journal_dir)!r} to start over"
    stored = journal_dir / "config.yaml"
    if not stored.exists() or stored.read_text(encoding="utf-8") != record.config_text:
        raise RunError(
            f"the experiment differs from the interrupted run in {str(journal_dir)!r} "
            f"(compare its config.yaml); resume with the same file and --quick setting, "
            f"{start_over}")
    inputs, plugins = (_read_json(journal_dir / "inputs.json"),
                       _read_json(journal_dir / "plugins.json"))
    if not isinstance(inputs, list) or not isinstance(plugins, list):
        raise RunError(f"the interrupted run in {str(journal_dir)!r} does not record its input "
                       "files and plugin versions (inputs.json, plugins.json: an older "
                       f"codesign wrote it), so resuming cannot be checked; {start_over}")
    changes = input_changes(inputs, record.inputs) + plugin_changes(plugins, record.plugins)
    if changes:
        listed = "".join(f"\n  - {change}" for change in changes)
        raise RunError(
            f"cannot resume {str(journal_dir)!r}: what the interrupted run read has changed "
            f"since:{listed}\nrestore the files and plugin versions it recorded (inputs.json "
            f"and plugins.json in that folder; the results would not match otherwise), "
            f"{start_over}")


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and those of its parents that do not exist, deepest first."""
    missing = []
    while not folder.exists() and folder.parent != folder:
        missing.append(folder)
        folder = folder.parent
    return missing


def _journaled(journal_dir: Path) -> int:
    """How many evaluations the journal in ``journal_dir`` holds (every stage's)."""
    entries = [*journal_dir.glob("evaluations/*.npz"), *journal_dir.glob("stages/*/*.npz")]
    return sum(1 for p in entries if ".tmp" not in p.name)


@contextlib.contextmanager
def _journal_kept_on_interrupt(journal_dir: Path, record: _RunRecord) -> Iterator[None]:
    """Create (or reopen) the journal folder holding ``record``; remove it when the block
    ends, except on Ctrl-C/SIGTERM, which becomes RunInterrupted. On an error the folders
    created for it (the parents of the run directory) are removed too. A lost executor
    (:class:`~codesign.executors.ExecutorLostError`: a cluster's scheduler went away) keeps
    the journal too and becomes a RunError saying so."""
    created = _missing_folders(journal_dir.parent)
    journal_dir.mkdir(parents=True, exist_ok=True)
    record.write(journal_dir)
    try:
        yield
    except KeyboardInterrupt:
        raise RunInterrupted(f"interrupted; {_journaled(journal_dir)} evaluation(s) are "
                             f"journaled in {str(journal_dir)!r}: rerun the same command with "
                             "--resume to continue") from None
    except ExecutorLostError as exc:
        raise RunError(f"{exc} ({_journaled(journal_dir)} evaluation(s) are journaled in "
                       f"{str(journal_dir)!r})") from exc
    except BaseException:
        shutil.rmtree(journal_dir, ignore_errors=True)
        for folder in created:
            with contextlib.suppress(OSError):  # not empty: something else lives there now
                folder.rmdir()
        raise
    shutil.rmtree(journal_dir, ignore_errors=True)


@contextlib.contextmanager
def _renamed_when_complete(tmp: Path, out: Path) -> Iterator[Path]:
    """The folder ``tmp`` (emptied first: a run killed while writing left it), renamed to
    ``out`` when the block succeeds and removed when it fails."""
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        yield tmp
        if out.exists():
            raise RunError(f"{str(out)!r} appeared while the run was writing; its results are "
                           "not replaced")
        tmp.rename(out)
    except BaseException:
        with contextlib.suppress(OSError):
            shutil.rmtree(tmp)
        raise
