"""The core's own components, registered through the same hooks as every plugin."""

from __future__ import annotations

from .controllers import MLPController, OpenLoopController, PDController, SinusoidController
from .hookspecs import hookimpl
from .observers import NullObserver, StateFieldObserver
from .terms import ActionL2, ParameterRegularizer

CODESIGN_API = (1, 1)


@hookimpl
def codesign_register_controllers(register):
    register("open_loop", OpenLoopController, description="table of actions per control step")
    register("mlp", MLPController, description="MLP, tanh hidden layers and tanh output")
    register("sinusoid", SinusoidController, description="central pattern generator")
    register("pd", PDController, description="proportional-derivative law on [q, q̇]")


@hookimpl
def codesign_register_observers(register):
    register("none", NullObserver, description="no observation (open loop)")
    register("state_fields", StateFieldObserver, description="named state fields, flattened")


@hookimpl
def codesign_register_terms(register):
    register("action_l2", ActionL2, description="running Σ a²")
    register("parameter_regularizer", ParameterRegularizer,
             description="final Σ ((θ - θ_ref) / scale)²")
