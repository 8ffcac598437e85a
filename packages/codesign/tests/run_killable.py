"""Run ``codesign`` with the fake test plugin; freeze after a number of rollouts.

Usage: ``python run_killable.py HANG_AFTER [codesign arguments...]``. With HANG_AFTER > 0
the spring simulator sleeps in rollout number HANG_AFTER + 1, so a test can SIGKILL the
process at a known point of the optimization; 0 runs normally.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    from plugin_fixture import fixtures_plugin

    from codesign.cli import main

    fixtures = fixtures_plugin()
    fixtures.HANG_AFTER = int(sys.argv[1])
    sys.exit(main(sys.argv[2:], plugin_manager=fixtures.plugin_manager()))
