"""The core's own components, registered through the same hooks as every plugin."""

from __future__ import annotations

from .controllers import (
    MLPController,
    OpenLoopController,
    PDController,
    SinusoidController,
    TaskSpaceStiffnessController,
)
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
    register("task_space_stiffness", TaskSpaceStiffnessController,
             description="τ = Jᵀ(K(p_des - p) + D(ṗ_des - ṗ)) round a circle, on [p, ṗ, J]")


@hookimpl
def codesign_register_observers(register):
    register("none", NullObserver, description="no observation (open loop)")
    register("state_fields", StateFieldObserver, description="named state fields, flattened")


@hookimpl
def codesign_register_terms(register):
    register("action_l2", ActionL2, description="running Σ a²")
    register("parameter_regularizer", ParameterRegularizer,
             description="final Σ ((θ - θ_ref) / scale)²")


@hookimpl
def codesign_register_recordings(register):
    from .recordings import file_recordings, synthetic_recordings

    register("file", file_recordings, description="recordings from an .npz file")
    register("synthetic", synthetic_recordings,
             description="simulated at a truth design with smooth random actions and noise")


@hookimpl
def codesign_register_optimizers(register):
    from .optim import (
        CMAES,
        LBFGSB,
        SLSQP,
        Adam,
        EvaluateOnly,
        OnePlusOneES,
        TrustConstr,
        TrustRegionLeastSquares,
    )

    register("adam", Adam, description="projected Adam with bounds")
    register("lbfgsb", LBFGSB, description="SciPy L-BFGS-B with bounds")
    register("least_squares", TrustRegionLeastSquares,
             description="SciPy trust-region least squares on the residuals (identification)")
    register("slsqp", SLSQP, description="SciPy SLSQP with rollout constraints")
    register("trust_constr", TrustConstr, description="SciPy trust-constr with rollout constraints")
    register("cmaes", CMAES, description="CMA-ES, gradient-free baseline")
    register("one_plus_one_es", OnePlusOneES, description="(1+1)-ES with the 1/5 success rule")
    register("none", EvaluateOnly, description="no optimization: evaluate the start once (a run "
                                               "that only simulates)")


@hookimpl
def codesign_register_executors(register):
    from .dask_executor import dask_executor
    from .executors import inline_executor, process_executor

    register("inline", inline_executor, description="one call at a time in the calling thread")
    register("process", process_executor, description="local process pool (spawned workers)")
    register("dask", dask_executor,
             description="Dask distributed: a LocalCluster or a scheduler's address "
                         "(pip install 'codesign[dask]')")
