"""A test plugin importable by name (``cluster_plugin``) on Dask workers started with this
folder on PYTHONPATH: the slow spring-mass, so a test can act while a batch runs."""

from __future__ import annotations

import sys

from systems import SlowSpringMass

from codesign.hookspecs import hookimpl
from codesign.plugins import get_plugin_manager

CODESIGN_API = (1, 1)


def make_slow_spring(*, delay_s: float = 0.05, q0: float = 1.0) -> SlowSpringMass:
    """Factory of ``slow_spring``: the spring-mass sleeping ``delay_s`` [s] per rollout."""
    return SlowSpringMass(delay_s=delay_s, q0=q0)


@hookimpl
def codesign_register_simulators(register):
    register("slow_spring", make_slow_spring, description="spring-mass, slow rollouts (test)")


def plugin_manager():
    """A plugin manager holding the core and this plugin, no entry points."""
    manager = get_plugin_manager(load_entry_points=False)
    manager.register(sys.modules[__name__], name="cluster")
    return manager
