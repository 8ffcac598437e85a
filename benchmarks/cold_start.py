"""Cold start: seconds from launching ``codesign demo <simulator> --quick`` in a fresh
process with an empty numba cache to its first finished optimizer iteration, and to the end
of the run (issue 13's target: the first iteration within 10 s).

Each run gets its own empty ``NUMBA_CACHE_DIR``, so every kernel compiles; the first
iteration is the first progress line on stderr ("…: 1/… it"), which codesign prints as plain
lines when stderr is not a terminal.

Usage: ``python benchmarks/cold_start.py [--simulator mpm] [--runs 3]``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CODESIGN = Path(sys.executable).with_name("codesign")


def cold_run(simulator: str) -> tuple[float | None, float]:
    """(seconds to the first optimizer iteration or None, seconds to the end) of one run."""
    with tempfile.TemporaryDirectory() as folder:
        env = dict(os.environ, NUMBA_CACHE_DIR=folder)
        start = time.perf_counter()
        first = None
        process = subprocess.Popen(
            [str(CODESIGN), "demo", simulator, "--quick", "--out", f"{folder}/run"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        for line in process.stderr:
            if first is None and re.search(r": 1/\d+ it", line):
                first = time.perf_counter() - start
        if process.wait():
            raise SystemExit(f"codesign demo {simulator} --quick failed")
        return first, time.perf_counter() - start


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--simulator", default="mpm")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    for _ in range(args.runs):
        first, whole = cold_run(args.simulator)
        shown = "no iteration line" if first is None else f"{first:.1f} s"
        print(f"first optimizer iteration {shown}, whole run {whole:.1f} s")


if __name__ == "__main__":
    main()
