"""codesign plugin hooks: the ``rigid`` simulator and the examples."""

from __future__ import annotations

from codesign.examples import register_examples
from codesign.hookspecs import hookimpl

from .scene import make_simulator

CODESIGN_API = (1, 1)

EXAMPLES = {
    "arm_damping": "the 4-link arm driven by random torques; identify its joint damping "
                   "from the recorded swings (`codesign demo rigid`)",
}
"""Example name -> description; each is ``sim_rigid/examples/<name>.yaml`` (package data)."""

__all__ = ["CODESIGN_API", "EXAMPLES"]


@hookimpl
def codesign_register_simulators(register):
    register("rigid", make_simulator,
             description="articulated rigid robots in reduced coordinates: implicit BDF2, "
                         "adjoint gradients (Xu et al., DiffHand)")


@hookimpl
def codesign_register_examples(register):
    register_examples(register, __package__, EXAMPLES, default="arm_damping")
