"""Scenes from plain options: what a YAML ``simulator: {name: mpm, options: {...}}`` holds.

:func:`build_scene_model` turns the options into an :class:`~sim_mpm.model.MPMModel`;
:func:`make_simulator` (registered as ``"mpm"``) wraps it in a simulator whose
``render(state, design, *, width, height)`` draws video frames with :mod:`sim_mpm.render`.

Bodies are shape dicts sampled on one particle lattice (see :mod:`sim_mpm.geometry`)::

    {shape: box, lower: [x, y], size: [w, h]}            # or upper: [x, y]
    {shape: sphere, center: [x, y], radius: r}
    {shape: image, path: robot.png, pixel_size: 0.004, lower: [x, y],
     colors: {"#ff0000": 1, "#000000": 0}}               # color -> particle group
    {shape: mesh, path: robot.stl, scale: 0.01, lower: [x, y, z]}

with optional overrides ``group`` (particle group; default the body's index; images use
their colors unless ``group`` is set), ``actuator`` (stress actuator index of the whole
body), ``youngs_modulus``, ``poissons_ratio``, ``density``, ``velocity``,
``geometry_group`` and ``anchor`` (the fixed point of that group's ``geometry.scale``).
A relative image or mesh ``path`` starts in the experiment file's folder (or its
``asset_dir`` option), so an example runs from any working directory.

Regions (``regions``): ``{lower: [x, y], upper: [x, y], group: g}`` moves the particles
inside that axis-aligned box (of any body) to group ``g``, in order, after the bodies set
their groups; this marks actuator groups on a single mesh or image body.
Stress actuators (``actuators``): ``{groups: [g, ...], axes: [1, 0], max_stress: s}``;
actuator k acts on bodies with ``actuator: k`` and on particles of the listed groups.
Cables (``cables``): ``{points: [[x, y], ...], stiffness: k, max_contraction: R}``; each
point snaps to its nearest particle (or give ``particles: [i, ...]``).
Boundaries (``boundaries``): ``{type: walls | plane | terrain, condition: sticky | slip |
separate | friction, friction: μ}`` with ``margin`` (walls), ``point``/``normal``
(plane), ``heights``/``spacing``/``origin`` (terrain).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from codesign.options import options_factory

from .boundaries import BOUNDARY_KINDS, BoxWalls, HeightField, Plane
from .geometry import Box, GeometryError, ImageShape, MeshShape, Sphere, sample_shapes
from .model import MPMModel, build_model
from .options import MPMOptions
from .simulator import MPMSimulator
from .tied import TiedMaterialSimulator

__all__ = [
    "SceneError",
    "build_scene_model",
    "make_simulator",
    "resolve_asset",
]

_BODY_KEYS = {
    "box": {"lower", "size", "upper"},
    "sphere": {"center", "radius"},
    "image": {"path", "pixel_size", "lower", "colors", "default_group", "tolerance"},
    "mesh": {"path", "scale", "lower"},
}
_OVERRIDE_KEYS = {"shape", "group", "actuator", "youngs_modulus", "poissons_ratio", "density",
                  "velocity", "geometry_group", "anchor"}
_BOUNDARY_KEYS = {
    "walls": {"margin"},
    "plane": {"point", "normal"},
    "terrain": {"heights", "spacing", "origin"},
}


class SceneError(ValueError):
    """Invalid scene options; the message names the option and how to fix it."""


def _require(entry: Mapping, key: str, where: str):
    if key not in entry:
        raise SceneError(f"{where} needs '{key}'")
    return entry[key]


def _check_keys(entry: Mapping, allowed: set[str], where: str) -> None:
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise SceneError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")


def resolve_asset(path: str, asset_dir: str | Path | None = None) -> str:
    """An asset file's path: absolute as given, else relative to ``asset_dir`` (default the
    working directory); a missing file raises :class:`SceneError` naming the folder."""
    folder = Path(asset_dir or ".")
    full = folder / path
    if not full.is_file():
        raise SceneError(f"asset file {path!r} not found in {str(folder.resolve())!r}; paths "
                         "are relative to the experiment file's folder (or its asset_dir "
                         "option) unless absolute")
    return str(full)


def _shape(body: Mapping, index: int, dim: int, asset_dir: Path):
    where = f"bodies[{index}]"
    if not isinstance(body, Mapping):
        raise SceneError(f"{where} must be a mapping with a 'shape' key, got {body!r}")
    kind = body.get("shape")
    if kind not in _BODY_KEYS:
        raise SceneError(f"{where}: unknown shape {kind!r}; choose one of {sorted(_BODY_KEYS)}")
    _check_keys(body, _BODY_KEYS[kind] | _OVERRIDE_KEYS, where)
    try:
        if kind == "box":
            lower = _require(body, "lower", where)
            if "size" not in body and "upper" not in body:
                raise SceneError(f"{where} needs 'upper' (or 'size')")
            shape = (Box.from_size(lower, body["size"]) if "size" in body
                     else Box(lower, body["upper"]))
        elif kind == "sphere":
            shape = Sphere(_require(body, "center", where), float(_require(body, "radius", where)))
        else:  # a file: the shape's own defaults fill the options not given
            path = resolve_asset(_require(body, "path", where), asset_dir)
            if kind == "image":
                _require(body, "pixel_size", where)
            given = {("origin" if key == "lower" else key): body[key]
                     for key in _BODY_KEYS[kind] - {"path"} if key in body}
            shape = (ImageShape if kind == "image" else MeshShape).from_file(path, **given)
    except GeometryError as exc:
        raise SceneError(f"{where}: {exc}") from None
    if shape.dim != dim:
        raise SceneError(f"{where} is a {shape.dim}D {kind} in a dim={dim} scene; give "
                         f"{dim} coordinates")
    return shape


def _boundary(entry: Mapping, index: int, dim: int):
    where = f"boundaries[{index}]"
    if not isinstance(entry, Mapping):
        raise SceneError(f"{where} must be a mapping with a 'type' key, got {entry!r}")
    kind = entry.get("type")
    if kind not in _BOUNDARY_KEYS:
        raise SceneError(f"{where}: unknown boundary type {kind!r}; choose one of "
                         f"{sorted(_BOUNDARY_KEYS)}")
    _check_keys(entry, _BOUNDARY_KEYS[kind] | {"type", "condition", "friction"}, where)
    condition = entry.get("condition", "sticky")
    if condition not in BOUNDARY_KINDS:
        raise SceneError(f"{where}: unknown condition {condition!r}; choose one of "
                         f"{', '.join(BOUNDARY_KINDS)}")
    if condition == "friction" and "friction" not in entry:
        raise SceneError(f"{where}: condition 'friction' needs a friction coefficient "
                         "'friction: μ'")
    common = {"kind": condition, "friction": float(entry.get("friction", 0.0))}
    if kind == "walls":
        return BoxWalls(margin=int(entry.get("margin", 3)), **common)
    if kind == "plane":
        return Plane(_require(entry, "point", where), _require(entry, "normal", where), **common)
    heights = np.asarray(_require(entry, "heights", where), dtype=np.float64)
    if heights.ndim != dim - 1:
        raise SceneError(f"{where}: a {dim}D scene needs {dim - 1}-D terrain heights, got "
                         f"shape {heights.shape}")
    return HeightField(heights, float(_require(entry, "spacing", where)),
                       entry.get("origin", 0.0), **common)


def _cable(entry: Mapping, index: int, particle_x: np.ndarray) -> dict:
    where = f"cables[{index}]"
    if not isinstance(entry, Mapping):
        raise SceneError(f"{where} must be a mapping, got {entry!r}")
    _check_keys(entry, {"points", "particles", "stiffness", "max_contraction", "rest_length"},
                where)
    if ("points" in entry) == ("particles" in entry):
        raise SceneError(f"{where} needs exactly one of 'points' (positions snapped to the "
                         "nearest particles) or 'particles' (indices)")
    if "points" in entry:
        points = np.asarray(entry["points"], dtype=np.float64)
        if points.ndim != 2 or points.shape[1] != particle_x.shape[1] or len(points) < 2:
            raise SceneError(f"{where}: points must be ≥ 2 positions of "
                             f"{particle_x.shape[1]} coordinates")
        d2 = ((points[:, None, :] - particle_x[None]) ** 2).sum(-1)
        route = np.argmin(d2, axis=1)
        route = route[np.r_[True, np.diff(route) != 0]]  # nearby points may snap together
    else:
        route = np.asarray(entry["particles"], dtype=np.int64)
    cable = {"route": route, "stiffness": float(entry.get("stiffness", 1.0)),
             "max_contraction": float(_require(entry, "max_contraction", where))}
    if "rest_length" in entry:
        cable["rest_length"] = float(entry["rest_length"])
    return cable


def build_scene_model(options: MPMOptions) -> MPMModel:
    """Build an :class:`MPMModel` from scene options (see :class:`~sim_mpm.options.MPMOptions`
    for each option and the module docstring for the shapes of bodies, regions, actuators,
    cables and boundaries)."""
    o = options
    dim, bodies = o.dim, o.bodies
    if not bodies:
        raise SceneError("the scene has no bodies; add at least one, e.g. "
                         "{shape: box, lower: [0.1, 0.1], size: [0.2, 0.1]}")
    dx = float(o.domain_size) / int(o.grid_resolution)
    spacing = 0.5 * dx if o.particle_spacing is None else float(o.particle_spacing)
    if spacing > dx:
        raise SceneError(f"particle_spacing must lie in (0, dx = {dx:g}] m, got {spacing!r}")

    asset_dir = Path(o.base_dir or ".") / (o.asset_dir or "")
    shapes = [_shape(body, i, dim, asset_dir) for i, body in enumerate(bodies)]
    groups = [body.get("group", None if body["shape"] == "image" else i)
              for i, body in enumerate(bodies)]  # images keep their colors' groups
    try:
        particle_x, body_index, particle_group = sample_shapes(
            shapes, spacing=spacing, groups=groups, jitter=o.jitter, seed=o.seed)
    except GeometryError as exc:
        raise SceneError(str(exc)) from None
    for i, region in enumerate(o.regions):
        inside, group = _region(region, i, particle_x)
        particle_group[inside] = group
    n = len(particle_x)

    actuators = o.actuators
    actuator_index = np.full(n, -1, dtype=np.int64)
    for k, actuator in enumerate(actuators):
        if not isinstance(actuator, Mapping):
            raise SceneError(f"actuators[{k}] must be a mapping, got {actuator!r}")
        _check_keys(actuator, {"groups", "axes", "max_stress"}, f"actuators[{k}]")
        for group in actuator.get("groups", []):
            actuator_index[particle_group == int(group)] = k

    material = {key: np.empty(n) for key in ("youngs_modulus", "poissons_ratio", "density")}
    velocity = np.zeros((n, dim))
    if o.initial_velocity is not None:
        velocity[:] = _vector(o.initial_velocity, dim, "initial_velocity")
    geometry_group = np.zeros(n, dtype=np.int64)
    anchors: dict[int, np.ndarray] = {}
    for i, body in enumerate(bodies):  # the per-body overrides
        mine = body_index == i
        for key, values in material.items():
            value = body.get(key, getattr(o, key))
            problem = MPMOptions.spec(key).problem(value)
            if problem is not None:
                raise SceneError(f"bodies[{i}].{key}: {problem}")
            values[mine] = float(value)
        if "velocity" in body:
            velocity[mine] = _vector(body["velocity"], dim, f"bodies[{i}].velocity")
        if body.get("actuator") is not None:
            k = int(body["actuator"])
            if not 0 <= k < len(actuators):
                raise SceneError(f"bodies[{i}].actuator is {k} but only {len(actuators)} "
                                 "actuator(s) are defined in 'actuators'")
            actuator_index[mine] = k
        g = int(body.get("geometry_group", 0))
        if g < 0:
            raise SceneError(f"bodies[{i}].geometry_group must be ≥ 0, got {g}")
        geometry_group[mine] = g
        if "anchor" in body:
            anchors[g] = _vector(body["anchor"], dim, f"bodies[{i}].anchor")
    for k in range(len(actuators)):
        if not np.any(actuator_index == k):
            raise SceneError(f"actuators[{k}] acts on no particle: give it 'groups' or set "
                             f"'actuator: {k}' on a body")
    axes = [_vector(a.get("axes", [1.0] * dim), dim, f"actuators[{k}].axes")
            for k, a in enumerate(actuators)]
    geometry_anchor = None
    if anchors:  # the other groups keep the model's default anchor, their centroid
        geometry_anchor = np.stack([
            anchors.get(g, particle_x[geometry_group == g].mean(0) if np.any(geometry_group == g)
                        else np.zeros(dim)) for g in range(int(geometry_group.max()) + 1)])

    cables = [_cable(c, i, particle_x) for i, c in enumerate(o.cables)]
    boundaries = [_boundary(b, i, dim) for i, b in enumerate(o.boundaries)]
    try:
        return build_model(
            particle_x=particle_x, dim=dim, grid_resolution=int(o.grid_resolution), dx=dx,
            particle_v=velocity, particle_group=particle_group, gravity=o.gravity, **material,
            volume=spacing**dim, material=o.material,
            incompressibility_exponent=o.incompressibility_exponent,
            actuator_index=actuator_index, actuator_axes=np.asarray(axes).reshape(-1, dim),
            actuator_max_stress=np.asarray([float(a.get("max_stress", 1.0)) for a in actuators]),
            cables=cables, boundaries=boundaries, dtype=o.dtype, geometry_group=geometry_group,
            geometry_anchor=geometry_anchor)
    except ValueError as exc:
        raise SceneError(f"invalid scene: {exc}") from exc


def _region(region: Mapping, index: int, particle_x: np.ndarray) -> tuple[np.ndarray, int]:
    """The particles (mask, shape (n,)) in the box of ``regions[index]``, at least one, and
    the group they move to."""
    where = f"regions[{index}]"
    if not isinstance(region, Mapping):
        raise SceneError(f"{where} must be a mapping {{lower, upper, group}}, got {region!r}")
    _check_keys(region, {"lower", "upper", "group"}, where)
    dim = particle_x.shape[1]
    lower = _vector(_require(region, "lower", where), dim, f"{where}.lower")
    upper = _vector(_require(region, "upper", where), dim, f"{where}.upper")
    group = _require(region, "group", where)
    if not (isinstance(group, int | np.integer) and group >= 0):
        raise SceneError(f"{where}.group must be an integer ≥ 0, got {group!r}")
    inside = np.all((particle_x >= lower) & (particle_x < upper), axis=1)
    if not np.any(inside):
        raise SceneError(f"{where} (box {lower.tolist()} to {upper.tolist()}) contains no "
                         "particle; move or enlarge it")
    return inside, int(group)


def _vector(value, dim: int, name: str) -> np.ndarray:
    array = np.asarray(value, dtype=np.float64).reshape(-1)
    if array.size != dim or not np.all(np.isfinite(array)):
        raise SceneError(f"{name} must be {dim} finite numbers, got {value!r}")
    return array


@options_factory(MPMOptions)
def make_simulator(options: MPMOptions) -> MPMSimulator | TiedMaterialSimulator:
    """The ``mpm`` simulator of a scene (registered under that name); takes the options of
    :class:`~sim_mpm.options.MPMOptions` as keywords."""
    simulator = MPMSimulator(build_scene_model(options), color_by=options.color_by,
                             backend=options.backend, kernels=options.kernels,
                             parallel=options.parallel)
    if options.material_parameters == "particle":
        return simulator
    return TiedMaterialSimulator(simulator, mode=options.material_parameters)
