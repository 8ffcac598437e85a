"""Runs: an experiment file to a run directory, load → validate → build → optimize → write.

:func:`run_experiment` is the whole pipeline; each stage is one call into a module of its own:

1. load: :func:`codesign.config.load_config` parses the YAML keeping every line,
2. validate: :func:`codesign.validation.validate_config` checks the sections and options,
3. build: :func:`codesign.experiment.build_experiment` constructs the components and checks
   what needs them (every check happens before any directory exists),
4. optimize: :func:`codesign.optimization.optimize_experiment` on a journaled objective,
5. write: :func:`codesign.run_directory.write_run_files` (the files are listed there).

This module keeps the run directory whole: the files are built in a hidden sibling
temporary folder that is renamed to ``DIR`` only when complete, and the evaluations are
journaled in ``DIR.partial/`` for ``resume=True`` (:mod:`codesign.optimization`).
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .config import load_config
from .experiment import build_experiment
from .optimization import optimize_experiment
from .outputs import current_umask, write_text
from .run_directory import plugin_table, write_run_files
from .validation import validate_config

__all__ = ["RunError", "RunInterrupted", "partial_dir", "run_experiment"]


class RunError(RuntimeError):
    """A run cannot start or finish (its directory exists, a stale journal, a changed config)."""


class RunInterrupted(RunError):
    """The run was interrupted (Ctrl-C or SIGTERM); its journal is kept for ``--resume``."""


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def run_experiment(path: str | Path, registry, *, out: str | Path, quick: bool = False,
                   resume: bool = False, progress: bool = True, plugin_manager=None,
                   log: Callable[[str], None] = _stderr) -> dict[str, Any]:
    """Run the experiment file ``path`` into the run directory ``out``; return the summary.

    ``quick`` applies the experiment's quick section; ``resume`` continues the run journaled
    in ``partial_dir(out)``; ``progress`` shows a progress bar on stderr. ``plugin_manager``
    (the one ``registry`` came from) lists every plugin in plugins.json; without it the
    plugins that registered components are listed. ``log`` receives notes and warnings.

    Raises ConfigError/DesignError before anything is created, RunError for an existing
    ``out`` or a stale journal, RunInterrupted (journal kept) on Ctrl-C/SIGTERM; any other
    error (a diverged simulation) removes the journal and every temporary file.
    """
    config = validate_config(load_config(path, quick=quick), registry)
    out = Path(out)
    journal_dir = _journal_dir_to_use(out, resume=resume, log=log)
    with build_experiment(config, registry) as experiment, \
            _journal_kept_on_interrupt(journal_dir, config.to_yaml()):
        optimized = optimize_experiment(experiment, journal_dir / "evaluations",
                                        progress=progress, log=log)
        with _renamed_when_complete(out) as folder:
            return write_run_files(folder, experiment, optimized,
                                   plugin_table(plugin_manager, registry=registry), log=log)


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


@contextlib.contextmanager
def _journal_kept_on_interrupt(journal_dir: Path, config_text: str) -> Iterator[None]:
    """Create (or reopen, if its experiment matches) the journal folder; remove it when the
    block ends, except on Ctrl-C/SIGTERM, which becomes RunInterrupted."""
    if journal_dir.exists():
        stored = journal_dir / "config.yaml"
        if not stored.exists() or stored.read_text(encoding="utf-8") != config_text:
            raise RunError(
                f"the experiment differs from the interrupted run in {str(journal_dir)!r} "
                "(compare its config.yaml); resume with the same file and --quick setting, "
                "or delete that folder to start over")
    journal_dir.mkdir(parents=True, exist_ok=True)
    write_text(journal_dir / "config.yaml", config_text)
    try:
        yield
    except KeyboardInterrupt:
        folder = journal_dir / "evaluations"
        count = sum(1 for p in folder.glob("*.npz") if ".tmp" not in p.name) \
            if folder.exists() else 0
        raise RunInterrupted(f"interrupted; {count} evaluation(s) are journaled in "
                             f"{str(journal_dir)!r}: rerun the same command with --resume to "
                             "continue") from None
    except BaseException:
        shutil.rmtree(journal_dir, ignore_errors=True)
        raise
    shutil.rmtree(journal_dir, ignore_errors=True)


@contextlib.contextmanager
def _renamed_when_complete(out: Path) -> Iterator[Path]:
    """A hidden temporary folder beside ``out``, renamed to ``out`` when the block succeeds
    and removed when it fails."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        tmp.chmod(0o777 & ~current_umask())  # mkdtemp makes 0700; the result is a normal folder
        yield tmp
        if out.exists():
            raise RunError(f"{str(out)!r} appeared while the run was writing; its results are "
                           "not replaced")
        tmp.rename(out)
    except BaseException:
        with contextlib.suppress(OSError):
            shutil.rmtree(tmp)
        raise
