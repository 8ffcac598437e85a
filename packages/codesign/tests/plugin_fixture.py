"""The test plugin (``fixtures_plugin.py``) loaded once, under one module name, for every
test file and the killable-run script: its registries and switches (``INTERRUPT_AFTER``,
``HANG_AFTER``) are then one object wherever a test sets them."""

import importlib.util
import sys
from pathlib import Path

_NAME = "_codesign_tests_fixtures_plugin"


def fixtures_plugin():
    """The loaded ``fixtures_plugin`` module (loaded on first call)."""
    if _NAME not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            _NAME, Path(__file__).with_name("fixtures_plugin.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[_NAME] = module
        spec.loader.exec_module(module)
    return sys.modules[_NAME]
