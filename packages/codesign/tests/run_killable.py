"""Run ``codesign`` with the fake test plugin; freeze after a number of rollouts.

Usage: ``python run_killable.py HANG_AFTER [codesign arguments...]``. With HANG_AFTER > 0
the spring simulator sleeps in rollout number HANG_AFTER + 1, so a test can SIGKILL the
process at a known point of the optimization; 0 runs normally.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def _fixtures():
    name = "_codesign_tests_fixtures_plugin"
    spec = importlib.util.spec_from_file_location(
        name, Path(__file__).with_name("fixtures_plugin.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    from codesign.cli import main

    fixtures = _fixtures()
    fixtures.HANG_AFTER = int(sys.argv[1])
    sys.exit(main(sys.argv[2:], plugin_manager=fixtures.plugin_manager()))
