"""The compiled step and its VJP (:mod:`._kernels`) behind :func:`sim_pbd.step.step` and
:func:`sim_pbd.step.step_vjp` (``kernels="numba"``, the default), equal to the NumPy
reference to round-off.

One compiled call runs a whole step (every substep, iteration and constraint); the VJP's
call replays the forward pass into a tape sized from the model and sweeps it in reverse.
The model's constant arrays (joint frames, limits, friction, gravity) are built once per
model and kept while the model lives.

Compilation: the kernels compile on their first call and are cached on disk (numba's cache,
beside the sources or in ``NUMBA_CACHE_DIR``); while that happens, stderr says
"sim_pbd: compiling kernels (first run only)", once per process.
"""

from __future__ import annotations

import weakref

import numpy as np

from codesign.compile_notice import announce_compiles

from . import _kernels
from .kinematics import joint_frames
from .model import PBDModel
from .rotations import quat_normalize
from .state import PBDState

__all__ = ["COMPILE_NOTICE", "model_arrays", "step", "step_vjp"]

COMPILE_NOTICE = "sim_pbd: compiling kernels (first run only)"


_COMPILES = announce_compiles(f"{__package__}.", COMPILE_NOTICE)

_MODEL_ARRAYS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def model_arrays(model: PBDModel) -> tuple:
    """The model's :class:`~sim_pbd._kernels.ModelArrays` as the plain tuple the kernels
    take, built on the model's first step."""
    arrays = _MODEL_ARRAYS.get(model)
    if arrays is None:
        frames = joint_frames(model)
        lower = np.ascontiguousarray(model.joint_lower, dtype=np.float64)
        upper = np.ascontiguousarray(model.joint_upper, dtype=np.float64)
        fields = _kernels.ModelArrays(
            parent=model.joint_parent.astype(np.int64), child=model.joint_child.astype(np.int64),
            order=frames.order.astype(np.int64), prismatic=frames.prismatic.astype(np.bool_),
            parent_axis=frames.parent_axis, child_axis=frames.child_axis,
            parent_normal=frames.parent_normal, child_normal=frames.child_normal,
            parent_rotation=frames.parent_rotation, child_rotation=frames.child_rotation,
            lower=lower, upper=upper, limited=np.isfinite(lower) | np.isfinite(upper),
            friction=np.ascontiguousarray(model.joint_friction, dtype=np.float64),
            gravity=np.ascontiguousarray(model.gravity, dtype=np.float64))
        arrays = _MODEL_ARRAYS[model] = tuple(np.ascontiguousarray(a) for a in fields)
    return arrays


def _shaped(name: str, value, shape: tuple[int, ...]) -> np.ndarray:
    array = np.ascontiguousarray(value, dtype=np.float64)
    if array.shape != shape:
        raise ValueError(f"{name} has shape {array.shape}; the model needs {shape}")
    return array


def _params(model: PBDModel, params) -> tuple:
    n, m = model.link_count, model.joint_count
    shapes = {"link_mass": (n,), "link_inertia": (n, 3, 3), "joint_parent_x": (m, 3),
              "joint_child_x": (m, 3), "joint_damping": (m,), "joint_compliance": (m,)}
    return tuple(_shaped(f"params[{name!r}]", params[name], shape)
                 for name, shape in shapes.items())


def _state(model: PBDModel, state: PBDState, prefix: str = "state") -> tuple:
    n = model.link_count
    return (_shaped(f"{prefix}.link_x", state.link_x, (n, 3)),
            _shaped(f"{prefix}.link_q", state.link_q, (n, 4)),
            _shaped(f"{prefix}.link_v", state.link_v, (n, 3)),
            _shaped(f"{prefix}.link_w", state.link_w, (n, 3)))


def _raise_unnormalizable(link_q, bad: int) -> None:
    # the reference's error, from the reference's check
    quat_normalize(np.asarray(link_q, dtype=np.float64)[bad])


def step(model: PBDModel, state: PBDState, action: np.ndarray, params, dt: float, *,
         substeps: int, iterations: int, solver: str, scheme: str) -> PBDState:
    """:func:`sim_pbd.step.step` compiled; its arguments already checked there."""
    x, q, v, w = _state(model, state)
    x, q, v, w, bad = _kernels.step(model_arrays(model), _params(model, params), x, q, v, w,
                                    action, float(dt) / int(substeps), int(substeps),
                                    int(iterations), solver == "jacobi",
                                    scheme == "second_order")
    if bad >= 0:
        _raise_unnormalizable(state.link_q, bad)
    return PBDState(link_x=x, link_q=q, link_v=v, link_w=w)


def step_vjp(model: PBDModel, state: PBDState, action: np.ndarray, params, dt: float,
             g_next: PBDState, *, substeps: int, iterations: int, solver: str, scheme: str):
    """:func:`sim_pbd.step.step_vjp` compiled; its arguments already checked there."""
    x, q, v, w = _state(model, state)
    g = _state(model, g_next, "g_next")
    (g_x, g_q, g_v, g_w, g_action, g_mass, g_inertia, g_parent_x, g_child_x, g_damping,
     g_compliance, bad) = _kernels.step_vjp(
        model_arrays(model), _params(model, params), x, q, v, w, action,
        float(dt) / int(substeps), int(substeps), int(iterations), solver == "jacobi",
        scheme == "second_order", *g)
    if bad >= 0:
        _raise_unnormalizable(state.link_q, bad)
    g_params = {"link_mass": g_mass, "link_inertia": g_inertia, "joint_parent_x": g_parent_x,
                "joint_child_x": g_child_x, "joint_damping": g_damping,
                "joint_compliance": g_compliance}
    return PBDState(link_x=g_x, link_q=g_q, link_v=g_v, link_w=g_w), g_action, g_params
