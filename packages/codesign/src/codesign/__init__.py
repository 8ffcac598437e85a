"""codesign: differentiable robot simulation and co-design, the simulator-agnostic core.

The contract (:class:`Simulator`), state trees, design spaces, controllers, observers,
objective terms, tied parameters, the checkpointed rollout, optimizers, identification,
plugins and runs.
"""

from importlib.metadata import PackageNotFoundError, version

from .backend import BackendError, get_array_module, scatter_add, to_host
from .controllers import (
    CircleTrajectory,
    Controller,
    MLPController,
    OpenLoopController,
    PDController,
    SinusoidController,
    TaskSpaceStiffnessController,
)
from .design import DesignError, DesignSpace, Parameter, design_replace
from .observers import NullObserver, Observer, StateFieldObserver
from .rollout import Gradient, Rollout, RolloutResult
from .simulator import SimulationError, Simulator, Trajectory, UnstableTimeStepError
from .terms import (
    ActionL2,
    Constraint,
    Objective,
    ParameterRegularizer,
    Term,
    TrajectoryTracking,
    WeightedTerm,
)
from .tying import Tie, TiedSimulator

try:
    __version__ = version("codesign")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0"

PLUGIN_API_VERSION = 1
"""Version of the plugin hook contract; plugins declare the range they support."""

__all__ = [
    "PLUGIN_API_VERSION",
    "ActionL2",
    "BackendError",
    "CircleTrajectory",
    "Constraint",
    "Controller",
    "DesignError",
    "DesignSpace",
    "Gradient",
    "MLPController",
    "NullObserver",
    "Objective",
    "Observer",
    "OpenLoopController",
    "PDController",
    "Parameter",
    "ParameterRegularizer",
    "Rollout",
    "RolloutResult",
    "SimulationError",
    "Simulator",
    "SinusoidController",
    "StateFieldObserver",
    "TaskSpaceStiffnessController",
    "Term",
    "Tie",
    "TiedSimulator",
    "Trajectory",
    "TrajectoryTracking",
    "UnstableTimeStepError",
    "WeightedTerm",
    "design_replace",
    "get_array_module",
    "scatter_add",
    "to_host",
]
