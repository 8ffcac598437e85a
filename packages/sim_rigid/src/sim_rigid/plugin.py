"""codesign plugin hooks: the ``rigid`` simulator."""

from __future__ import annotations

from codesign.hookspecs import hookimpl

from .scene import make_simulator

CODESIGN_API = (1, 1)

__all__ = ["CODESIGN_API"]


@hookimpl
def codesign_register_simulators(register):
    register("rigid", make_simulator,
             description="articulated rigid robots in reduced coordinates: implicit BDF2, "
                         "adjoint gradients (Xu et al., DiffHand)")
