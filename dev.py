#!/usr/bin/env python3
"""Set up the workspace and run the demo or the tests: the README's two commands.

    python3 dev.py demo [codesign demo options]   # e.g. --quick, or: vine --quick
    python3 dev.py test [pytest options]

Needs only Python 3.11+ and git. It installs uv into ``.bootstrap/`` when uv is not on PATH,
syncs every workspace package and the dev tools into ``.venv/`` from ``uv.lock``, then runs.
``test`` without paths also runs ros_bridge's rclpy tests (Linux x86_64, where the ROS 2
wheels exist) in ``.venv-ros/``, an environment of their own: the wheels install a ``.pth``
that re-executes every Python process of their environment.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
BOOTSTRAP = ROOT / ".bootstrap"
VENV = ROOT / ".venv"
ROS_VENV = ROOT / ".venv-ros"
ROS_TESTS = "packages/ros_bridge/tests_ros"
BIN = "Scripts" if os.name == "nt" else "bin"


def _uv() -> str:
    found = shutil.which("uv")
    if found:
        return found
    uv = BOOTSTRAP / BIN / ("uv.exe" if os.name == "nt" else "uv")
    if not uv.exists():
        print("dev.py: installing uv into .bootstrap/ (one time)", file=sys.stderr)
        venv.EnvBuilder(with_pip=True, clear=True).create(BOOTSTRAP)
        pip = [str(BOOTSTRAP / BIN / "python"), "-m", "pip"]
        subprocess.run([*pip, "install", "--quiet", "--disable-pip-version-check", "uv>=0.4"],
                       check=True)
    return str(uv)


def _sync() -> None:
    env = dict(os.environ, UV_PYTHON_DOWNLOADS="never", UV_PYTHON=sys.executable)
    subprocess.run([_uv(), "sync", "--all-packages", "--locked", "--quiet"], cwd=ROOT, env=env,
                   check=True)


def _ros_tests() -> int:
    """Sync ros_bridge with its ``ros``, ``test``, ``fake-baxter``, ``images`` and ``colcon``
    extras into .venv-ros and run its rclpy tests there (loopback only)."""
    env = dict(os.environ, UV_PYTHON_DOWNLOADS="never", UV_PYTHON=sys.executable,
               UV_PROJECT_ENVIRONMENT=str(ROS_VENV))
    sync = [_uv(), "sync", "--package", "ros_bridge", "--extra", "ros", "--extra", "test",
            "--extra", "fake-baxter", "--extra", "images", "--extra", "colcon", "--locked",
            "--quiet", "--inexact"]
    # --inexact: the ROS wheels install rclpy and its interfaces under records of their own,
    # which an exact sync removes as extraneous from an environment made before
    subprocess.run(sync, cwd=ROOT, env=env, check=True)
    python = str(ROS_VENV / BIN / "python")
    if subprocess.call([python, "-c", "import rclpy"], cwd=ROOT, env=env,
                       stderr=subprocess.DEVNULL) != 0:  # removed by an exact sync before
        subprocess.run([*sync, "--reinstall"], cwd=ROOT, env=env, check=True)
    env = dict(os.environ, ROS_LOCALHOST_ONLY="1")
    return subprocess.call([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", ROS_TESTS],
                           cwd=ROOT, env=env)


def _runs_everything(pytest_args: list[str]) -> bool:
    """Whether the pytest arguments select the whole suite: none names a file or folder."""
    return not any((ROOT / arg.split("::")[0]).exists() for arg in pytest_args
                   if not arg.startswith("-"))


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("demo", "test"):
        print(__doc__, file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    _sync()
    if command == "demo":
        return subprocess.call([str(VENV / BIN / "codesign"), "demo", *rest], cwd=ROOT)
    status = subprocess.call([str(VENV / BIN / "python"), "-m", "pytest", *rest], cwd=ROOT)
    if _runs_everything(rest) and sys.platform == "linux" and platform.machine() == "x86_64":
        status = _ros_tests() or status
    return status


if __name__ == "__main__":
    if sys.version_info < (3, 11):  # noqa: UP036 - the check is for people on older Pythons
        sys.exit("dev.py: codesign needs Python 3.11 or newer")
    sys.exit(main(sys.argv[1:]))
