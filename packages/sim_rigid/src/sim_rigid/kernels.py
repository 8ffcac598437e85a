"""The compiled dynamics (:mod:`._kernels`) with the signatures of the NumPy reference in
:mod:`sim_rigid.dynamics`, which they equal to round-off, and the flat arrays (per model:
nodes, contacts, actuation; per call: parameters) that the compiled steps behind
:func:`sim_rigid.step.step` and :func:`sim_rigid.step.step_vjp` (``kernels="numba"``, the
default; :func:`._kernels.implicit_step`) take.

Compilation: the kernels compile on their first call and are cached on disk (numba's cache,
beside the sources or in ``NUMBA_CACHE_DIR``); while that happens, stderr says
"sim_rigid: compiling kernels (first run only)", once per process.
"""

from __future__ import annotations

import weakref

import numpy as np

from codesign.compile_notice import announce_compiles

from . import _kernels
from .contact import COEFFICIENTS
from .dynamics import dual, dual_rows, node_table, unit_axes
from .model import OBSTACLE_TYPES, RigidModel

__all__ = ["COMPILE_NOTICE", "contact_arrays", "inverse_dynamics_tangents", "mass_matrix",
           "drive_arrays", "node_arrays", "parameter_arrays", "parameter_vjp"]

COMPILE_NOTICE = "sim_rigid: compiling kernels (first run only)"

_COMPILES = announce_compiles(f"{__package__}.", COMPILE_NOTICE)

_NODE_ARRAYS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_CONTACT_ARRAYS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_DRIVE_ARRAYS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def node_arrays(model: RigidModel) -> tuple:
    """The model's :class:`~sim_rigid._kernels.NodeArrays` as the plain tuple the kernels
    take, built on first use and kept while the model lives."""
    arrays = _NODE_ARRAYS.get(model)
    if arrays is None:
        table = node_table(model)
        fields = _kernels.NodeArrays(parent=table.parent, kind=table.kind, axis=table.axis,
                                     rotation=table.rotation, origin_joint=table.origin_joint,
                                     link=table.link, coordinate=table.coordinate,
                                     axis_joint=table.axis_joint)
        arrays = _NODE_ARRAYS[model] = tuple(np.ascontiguousarray(a) for a in fields)
    return arrays


def contact_arrays(model: RigidModel) -> tuple:
    """The model's :class:`~sim_rigid._kernels.Contacts` as the plain tuple the kernels
    take, built on first use and kept while the model lives."""
    arrays = _CONTACT_ARRAYS.get(model)
    if arrays is None:
        link_node = node_table(model).link_node
        fields = _kernels.Contacts(
            node=link_node[model.contact_link], link=model.contact_link,
            obstacle_type=model.obstacle_type, obstacle_center=model.obstacle_center,
            obstacle_rotation=model.obstacle_rotation,
            obstacle_half_extents=model.obstacle_half_extents,
            obstacle_link=model.obstacle_link,
            obstacle_node=np.where(model.obstacle_link >= 0,
                                   link_node[np.maximum(model.obstacle_link, 0)], -1),
            grid=model.obstacle_grid, grid_shape=model.obstacle_grid_shape,
            grid_start=model.obstacle_grid_start,
            friction_sharpness=model.friction_sharpness,
            # a plane has no bounding box; every other shape lies in its box
            obstacle_bound=np.where(model.obstacle_type == OBSTACLE_TYPES.index("plane"),
                                    np.inf, np.linalg.norm(model.obstacle_half_extents,
                                                           axis=1)))
        arrays = _CONTACT_ARRAYS[model] = tuple(
            np.ascontiguousarray(a) if isinstance(a, np.ndarray) else a for a in fields)
    return arrays


def drive_arrays(model: RigidModel) -> tuple[np.ndarray, np.ndarray]:
    """(the actuated coordinates (a,) int64, their gears (a,)), built on first use and kept
    while the model lives (the model's properties compute them on every access)."""
    arrays = _DRIVE_ARRAYS.get(model)
    if arrays is None:
        arrays = _DRIVE_ARRAYS[model] = (
            np.ascontiguousarray(model.actuated, dtype=np.int64),
            np.ascontiguousarray(model.actuated_gear, dtype=np.float64))
    return arrays


def inverse_dynamics_tangents(model: RigidModel, params: dict, q, qd, qdd, *,
                              tangents: dict | None = None) -> np.ndarray:
    """τ and its directional derivatives (K+1, d), compiled; arguments as
    :func:`sim_rigid.dynamics.inverse_dynamics_tangents`, except that the centres of mass
    take no tangents (their gradient is :func:`parameter_vjp`'s)."""
    tangents = tangents or {}
    if "link_com" in tangents:
        raise ValueError("the compiled recursion keeps the centres of mass constant: take "
                         "their gradient from kernels.parameter_vjp, or tangents along "
                         "link_com from sim_rigid.dynamics.inverse_dynamics_tangents")
    rows = dual_rows(tangents)

    def plain(name):
        return np.ascontiguousarray(params[name], dtype=np.float64)

    def dual_of(name, value):
        return dual(np.asarray(value, dtype=np.float64), tangents.get(name), rows)

    mass, inertia, origin, points, area = (dual_of(name, params[name]) for name in (
        "link_mass", "link_inertia", "joint_origin", "contact_point", "contact_area"))
    coefficients = np.stack([dual_of(name, params[name]) for name in COEFFICIENTS], axis=1)
    return _kernels.rnea(node_arrays(model), contact_arrays(model), dual_of("q", q),
                         dual_of("qd", qd), dual_of("qdd", qdd), mass, plain("link_com"),
                         inertia, origin,
                         unit_axes(params["joint_axis"], tangents.get("joint_axis"), rows),
                         points, area, coefficients, np.asarray(model.gravity, np.float64))


def mass_matrix(model: RigidModel, params: dict, q) -> np.ndarray:
    """M(q) (d, d), compiled; arguments as :func:`sim_rigid.dynamics.mass_matrix`."""
    return _kernels.mass_matrix(
        node_arrays(model), np.ascontiguousarray(q, dtype=np.float64),
        *(np.ascontiguousarray(params[name], dtype=np.float64)
          for name in ("link_mass", "link_com", "link_inertia", "joint_origin")),
        np.ascontiguousarray(unit_axes(params["joint_axis"])[0]))


def parameter_arrays(model: RigidModel, params: dict) -> tuple:
    """The parameters as the plain tuple the compiled steps take (:class:`~sim_rigid.
    _kernels.Parameters`: masses, inertias, joint origins, contact points, areas, the four
    coefficients of :data:`~sim_rigid.contact.COEFFICIENTS`, joint damping, gravity, centres
    of mass, joint axis directions, normalized in the compiled step), float64 and
    contiguous."""
    def plain(value):
        return np.ascontiguousarray(value, dtype=np.float64)

    return tuple(_kernels.Parameters(
        mass=plain(params["link_mass"]), inertia=plain(params["link_inertia"]),
        origin=plain(params["joint_origin"]), points=plain(params["contact_point"]),
        area=plain(params["contact_area"]),
        coefficients=np.array([params[name] for name in COEFFICIENTS], dtype=np.float64),
        damping=plain(params["joint_damping"]), gravity=plain(model.gravity),
        com=plain(params["link_com"]), axis=plain(params["joint_axis"])))


def parameter_vjp(model: RigidModel, params: dict, q, qd, qdd, adjoint) -> dict:
    """λᵀ ∂τ/∂θ for τ of :func:`inverse_dynamics_tangents` and the adjoint λ = ``adjoint``
    (d,), by :data:`~sim_rigid.model.PARAMETERS` name: ``link_mass`` (n,), ``link_com``
    (n, 3), ``link_inertia`` (n, 3, 3), ``contact_point`` (c, 3), ``contact_area`` (c,) and
    each coefficient (a float); compiled, one pass (virtual power) where tangents would take
    one row each."""
    theta = _kernels.Parameters(*parameter_arrays(model, params))
    plain = [np.ascontiguousarray(x, dtype=np.float64) for x in (q, qd, qdd, adjoint)]
    g_mass, g_com, g_inertia, g_points, g_area, g_coefficients = _kernels.rnea_parameter_vjp(
        node_arrays(model), contact_arrays(model), *plain, theta.mass, theta.com,
        theta.inertia, theta.origin, np.ascontiguousarray(unit_axes(theta.axis)[0]),
        theta.points, theta.area, theta.coefficients, theta.gravity)
    return {"link_mass": g_mass, "link_com": g_com, "link_inertia": g_inertia,
            "contact_point": g_points, "contact_area": g_area} | {
        name: float(g_coefficients[k]) for k, name in enumerate(COEFFICIENTS)}
