"""What a run ran on: Python, the platform, the numeric libraries, git state, command line.

:func:`run_environment` gathers it for the run directory's ``environment.json``, so a
result can be traced to the code and libraries that made it. Nothing here fails a run: a
library that is not installed is left out, and without git (or outside a repository) the
git entry is ``None``.
"""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["LIBRARIES", "git_state", "library_versions", "run_environment"]

LIBRARIES = ("numpy", "scipy", "numba", "llvmlite", "osqp", "av")
"""Distributions whose versions can change a run's numbers (or its video)."""

GIT_TIMEOUT_S = 10.0
"""Seconds one git command may take before the git state is given up (a huge repository)."""


def library_versions(names: Sequence[str] = LIBRARIES) -> dict[str, str]:
    """The installed version of each distribution in ``names``; those not installed are left
    out."""
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def _git(folder: Path, *args: str) -> str:
    """The output of ``git -C folder args``; raises OSError or CalledProcessError."""
    # no optional locks: reading the state must not take index.lock from a user's git
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0")
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True,
                          check=True, timeout=GIT_TIMEOUT_S, env=env).stdout.strip()


def git_state(folder: str | Path) -> dict[str, Any] | None:
    """The git repository holding ``folder``: ``root``, ``commit`` (HEAD) and ``dirty``
    (tracked files differ from HEAD); ``None`` without git, outside a repository, or before
    the first commit."""
    folder = Path(folder)
    try:
        root = _git(folder, "rev-parse", "--show-toplevel")
        commit = _git(folder, "rev-parse", "--verify", "HEAD")
        changes = _git(folder, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return None
    return {"root": root, "commit": commit, "dirty": bool(changes)}


def run_environment(*, command: Sequence[str] | None = None,
                    experiment_folder: str | Path | None = None) -> dict[str, Any]:
    """Python, platform, library versions, git state and command line of this process.

    ``command`` is the command line (default ``sys.argv``); ``git`` holds the state of the
    repository of the codesign package (a checkout, ``None`` for an installed wheel) and of
    ``experiment_folder``.
    """
    command = list(sys.argv if command is None else command)
    code_folder = Path(__file__).resolve().parent
    return {
        "python": {"version": platform.python_version(),
                   "implementation": platform.python_implementation(),
                   "executable": sys.executable},
        "platform": {"system": platform.system(), "release": platform.release(),
                     "machine": platform.machine(), "description": platform.platform()},
        "libraries": library_versions(),
        "git": {"codesign": git_state(code_folder),
                "experiment": None if experiment_folder is None
                else git_state(experiment_folder)},
        "command": command,
        "command_line": shlex.join(command),
        "working_directory": os.getcwd(),
    }
