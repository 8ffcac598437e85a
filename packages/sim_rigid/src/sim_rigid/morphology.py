"""Cage-based morphology (Xu et al. 2021, Section III-A): the three differentiable layers

    high-level parameters θ (m,) --H--> cage handles (h, 3) --M--> deformed meshes
        --P--> simulation parameters (joint origins, link masses, centres of mass and
               inertias, contact points and their areas)

for a finger assembled from box components (:func:`assemble_finger`: a base welded to the
world, ``phalanges`` phalanges on revolute joints about y, a tip welded to the last one),
each with its VJP, and :func:`design` / :func:`design_vjp` joining them to the simulator's
design parameters, so a design gradient from :class:`~sim_rigid.simulator.RigidSimulator`
reaches θ.

The finger lies along +x at rest, its joint frames unrotated: the joint of component k sits
at the centre of its proximal face. Its cage is a box spanning two *stations* (the planes x =
const between components); neighbours share the station's four handles, so the face between
them moves as one (the connectivity constraint), and the mesh's end faces lie in the cage's
end faces, where mean value coordinates are the face's barycentric coordinates: both
neighbours' interface vertices follow the shared handles alone and stay together. θ holds
(the fabrication constraints):

- ``length.<component>``: each component's length along x [m];
- ``width.<station>``: each station's width along y [m], the joints' axis: a joint
  station scales only along its axis (standard pins and screws fix its height);
- ``height.<station>``: the height along z [m] of the stations that no revolute joint
  passes through, those named in ``free_heights`` (default the tip's free end, ``tip``;
  ``tip_joint``, the weld between the last phalanx and the tip, may join it).

Several fingers in one robot (:class:`HandMorphology`, each finger named by its prefix, as
``robot: {fingers: [...]}`` builds them) are the fingers' layers side by side: θ the
fingers' parameters in turn, named ``<kind>.<prefix><station or component>``
(``length.right_phalanx1``), :func:`hand_design` the fingers' designs stacked and
:func:`hand_design_jacobian` block diagonal.

The design (:func:`design`) holds every link's mass, centre of mass and inertia about it,
the joint origins and the contact points, each with its VJP. Limits: the contact areas
computed here (the lumped area of each contact vertex [m²], with their VJP)
are not passed on: the simulator's ``contact.area`` is a force weight (default 1)
that the examples' contact stiffnesses are tuned with.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .cage import mean_value_coordinates
from .components import box_mesh, check_sizes
from .mesh_properties import (
    deform,
    deform_vjp,
    mass_properties,
    mass_properties_vjp,
    vertex_areas,
    vertex_areas_vjp,
)

__all__ = ["DESIGN_OF_PARAMETER", "FREE_HEIGHT_STATIONS", "FingerMorphology",
           "HandMorphology", "assemble_finger", "description", "design", "design_jacobian",
           "design_vjp", "hand_design", "hand_design_jacobian", "handles", "handles_vjp",
           "meshes", "meshes_vjp", "simulation_parameters", "simulation_parameters_vjp"]

DESIGN_OF_PARAMETER = {"link_mass": "link.mass", "link_com": "link.com",
                       "link_inertia": "link.inertia", "joint_origin": "joint.origin",
                       "contact_point": "contact.point"}
"""Simulation parameter -> the :class:`~sim_rigid.simulator.RigidSimulator` design parameter
it sets."""

FREE_HEIGHT_STATIONS = ("tip_joint", "tip")
"""Stations whose height may be a parameter: no revolute joint passes through them (a joint
station scales only along its axis, the fabrication constraint)."""

_CAGE_FACES = box_mesh([0, 0, 0], [1, 1, 1])[1]
"""The 8-handle box cage's faces; its vertices are a component's two stations' handles,
proximal four then distal four, each station's in (y, z) signs (-,-), (-,+), (+,-), (+,+)
(the order of :func:`box_mesh`)."""
_CORNER_SIGNS = np.array([[-1, -1], [-1, 1], [1, -1], [1, 1]], dtype=np.float64)


@dataclasses.dataclass(frozen=True, eq=False)
class FingerMorphology:
    """An assembled finger: n links (base, phalanges, tip) over n + 1 stations.

    Attributes:
        parameter_names: names of θ (m,); ``parameter_defaults`` (m,) [m] its rest values.
        handle_offset, handle_basis: handles (h, 3) [m] = offset + basis (h, 3, m) @ θ.
        link_names: (n,); ``joint_types``: ``fixed`` or ``revolute`` each; ``joint_parent``:
            parent link index, -1 for the world.
        mount: the base's joint origin in the world at station 0's centre [m] (3,).
        link_weights: per link the mean value coordinates (v_k, 8) of its mesh vertices in
            its cage (handles ``4 k .. 4 k + 7``), fixed at the rest shape.
        link_faces: per link its mesh's faces (f_k, 3).
        contact_vertices: per link the mesh vertices that are contact points (its -z side,
            the pad the finger closes with; none on the base).
        density: of every component [kg/m³].
    """

    parameter_names: tuple[str, ...]
    parameter_defaults: np.ndarray
    handle_offset: np.ndarray
    handle_basis: np.ndarray
    link_names: tuple[str, ...]
    joint_types: tuple[str, ...]
    joint_parent: np.ndarray
    mount: np.ndarray
    link_weights: tuple[np.ndarray, ...]
    link_faces: tuple[np.ndarray, ...]
    contact_vertices: tuple[np.ndarray, ...]
    density: float


def assemble_finger(phalanges: int, *, base_length: float = 0.02,
                    phalanx_length: float = 0.04, tip_length: float = 0.025,
                    width: float = 0.02, height: float = 0.015, density: float = 1000.0,
                    cage_margin: float = 1.25, divisions=(2, 1, 1),
                    mount=(0.0, 0.0, 0.1), free_heights=("tip",)) -> FingerMorphology:
    """A finger of ``phalanges`` (>= 1) box phalanges [m] between a base and a tip, each
    component a box mesh (``divisions`` per axis) of ``width`` (y) and ``height`` (z) [m]
    inside a cage ``cage_margin`` (> 1) times as wide and high, of ``density`` [kg/m³];
    the base's joint at ``mount`` [m] in the world; the stations of ``free_heights``
    (among :data:`FREE_HEIGHT_STATIONS`) have a ``height.<station>`` parameter each."""
    if int(phalanges) != phalanges or phalanges < 1:
        raise ValueError(f"a finger needs phalanges >= 1 (an integer), got {phalanges!r}")
    check_sizes("finger", dict(base_length=base_length, phalanx_length=phalanx_length,
                               tip_length=tip_length, width=width, height=height,
                               density=density), cage_margin=cage_margin)
    free_heights = tuple(free_heights)
    if not set(free_heights) <= set(FREE_HEIGHT_STATIONS) or \
            len(set(free_heights)) != len(free_heights):
        raise ValueError(f"free_heights names stations whose height may change, each once, "
                         f"among {list(FREE_HEIGHT_STATIONS)} (a joint's station scales only "
                         f"along its axis), got {list(free_heights)}")
    n = int(phalanges) + 2
    link_names = ("base", *(f"phalanx{k}" for k in range(1, n - 1)), "tip")
    station_names = ("base", *(f"joint{k}" for k in range(1, n - 1)), "tip_joint", "tip")
    lengths = [base_length] + [phalanx_length] * (n - 2) + [tip_length]
    heights = [station for station in station_names if station in free_heights]
    names = ([f"length.{name}" for name in link_names]
             + [f"width.{name}" for name in station_names]
             + [f"height.{name}" for name in heights])
    defaults = np.array(lengths + [width] * (n + 1) + [height] * len(heights),
                        dtype=np.float64)
    column = {name: k for k, name in enumerate(names)}

    offset = np.zeros((4 * (n + 1), 3))
    basis = np.zeros((4 * (n + 1), 3, len(names)))
    for s, station in enumerate(station_names):
        rows = slice(4 * s, 4 * s + 4)
        for k in range(s):
            basis[rows, 0, column[f"length.{link_names[k]}"]] = 1.0
        basis[rows, 1, column[f"width.{station}"]] = _CORNER_SIGNS[:, 0] * cage_margin / 2
        if station in heights:
            basis[rows, 2, column[f"height.{station}"]] = _CORNER_SIGNS[:, 1] * cage_margin / 2
        else:
            offset[rows, 2] = _CORNER_SIGNS[:, 1] * cage_margin * height / 2
    rest_handles = offset + basis @ defaults

    weights, faces, contacts = [], [], []
    x = np.concatenate([[0.0], np.cumsum(lengths)])
    for k in range(n):
        vertices, link_faces = box_mesh([x[k], -width / 2, -height / 2],
                                        [x[k + 1], width / 2, height / 2], divisions)
        weights.append(mean_value_coordinates(rest_handles[4 * k:4 * k + 8], _CAGE_FACES,
                                              vertices))
        faces.append(link_faces)
        pad = np.flatnonzero(vertices[:, 2] == vertices[:, 2].min())
        contacts.append(pad if k > 0 else np.zeros(0, dtype=np.int64))
    return FingerMorphology(
        parameter_names=tuple(names), parameter_defaults=defaults, handle_offset=offset,
        handle_basis=basis, link_names=link_names,
        joint_types=("fixed", *["revolute"] * (n - 2), "fixed"),
        joint_parent=np.arange(n) - 1, mount=np.asarray(mount, dtype=np.float64),
        link_weights=tuple(weights), link_faces=tuple(faces), contact_vertices=tuple(contacts),
        density=float(density))


def _check_parameters(morphology: FingerMorphology, params) -> np.ndarray:
    theta = np.asarray(params, dtype=np.float64)
    if theta.shape != morphology.parameter_defaults.shape:
        raise ValueError(f"the finger's parameters are {list(morphology.parameter_names)} "
                         f"(shape {morphology.parameter_defaults.shape}), got shape "
                         f"{theta.shape}")
    if not np.all(theta > 0):
        bad = [n for n, v in zip(morphology.parameter_names, theta, strict=True) if not v > 0]
        raise ValueError(f"finger lengths, widths and heights must be positive: {bad}")
    return theta


def handles(morphology: FingerMorphology, params) -> np.ndarray:
    """Layer H: the cage handles (h, 3) [m] in the finger's rest frame from θ (m,) [m]."""
    theta = _check_parameters(morphology, params)
    return morphology.handle_offset + morphology.handle_basis @ theta


def handles_vjp(morphology: FingerMorphology, g_handles) -> np.ndarray:
    """∂L/∂θ (m,) from ∂L/∂handles (h, 3) of :func:`handles` (a linear map)."""
    return np.einsum("hij,hi->j", morphology.handle_basis, np.asarray(g_handles))


def meshes(morphology: FingerMorphology, handle_positions) -> list[np.ndarray]:
    """Layer M: each link's deformed mesh vertices (v_k, 3) [m] from the handles (h, 3)."""
    return [deform(w, handle_positions[4 * k:4 * k + 8])
            for k, w in enumerate(morphology.link_weights)]


def meshes_vjp(morphology: FingerMorphology, g_meshes) -> np.ndarray:
    """∂L/∂handles (h, 3) from ∂L/∂meshes (a list of (v_k, 3)) of :func:`meshes`."""
    g_handles = np.zeros_like(morphology.handle_offset)
    for k, (w, g) in enumerate(zip(morphology.link_weights, g_meshes, strict=True)):
        g_handles[4 * k:4 * k + 8] += deform_vjp(w, g)
    return g_handles


def _joint_positions(handle_positions) -> np.ndarray:
    """Each link's joint (the centre of its proximal station) [m], (n,); station k's four
    handles average to it."""
    return handle_positions.reshape(-1, 4, 3).mean(axis=1)[:-1]


def simulation_parameters(morphology: FingerMorphology, handle_positions,
                          link_meshes) -> dict[str, np.ndarray]:
    """Layer P: ``joint_origin`` (n, 3) [m] in the parent's frame, ``link_mass`` (n,) [kg],
    ``link_com`` (n, 3) [m] and ``link_inertia`` (n, 3, 3) [kg m²] about it in the link's
    frame, ``contact_point`` (c, 3) [m] in their links' frames and ``contact_area`` (c,)
    [m²] (links in order, each link's contact vertices in order)."""
    joint = _joint_positions(np.asarray(handle_positions))
    parent = morphology.joint_parent
    origin = joint - np.where(parent[:, None] >= 0, joint[parent], -morphology.mount)
    mass, com, inertia, points, areas = [], [], [], [], []
    for k, mesh in enumerate(link_meshes):
        local = mesh - joint[k]
        props = mass_properties(local, morphology.link_faces[k], morphology.density)
        mass.append(props["mass"])
        com.append(props["com"])
        inertia.append(props["inertia"])
        points.append(local[morphology.contact_vertices[k]])
        areas.append(vertex_areas(local, morphology.link_faces[k])[
            morphology.contact_vertices[k]])
    return {"joint_origin": origin, "link_mass": np.array(mass), "link_com": np.array(com),
            "link_inertia": np.array(inertia), "contact_point": np.concatenate(points),
            "contact_area": np.concatenate(areas)}


def simulation_parameters_vjp(morphology: FingerMorphology, handle_positions, link_meshes,
                              g_params: dict) -> tuple[np.ndarray, list[np.ndarray]]:
    """(∂L/∂handles (h, 3), ∂L/∂meshes) from ∂L/∂(the entries of
    :func:`simulation_parameters`; missing ones count as zero)."""
    handle_positions = np.asarray(handle_positions)
    joint = _joint_positions(handle_positions)
    n = len(joint)
    zeros = {"joint_origin": np.zeros((n, 3)), "link_mass": np.zeros(n),
             "link_com": np.zeros((n, 3)), "link_inertia": np.zeros((n, 3, 3))}
    g = {key: np.asarray(g_params.get(key, zero), dtype=np.float64)
         for key, zero in zeros.items()}
    counts = np.cumsum([0] + [len(c) for c in morphology.contact_vertices])
    g_points = np.asarray(g_params.get("contact_point", np.zeros((counts[-1], 3))))
    g_areas = np.asarray(g_params.get("contact_area", np.zeros(counts[-1])))
    g_joint = g["joint_origin"].copy()
    parent = morphology.joint_parent
    np.add.at(g_joint, parent[parent >= 0], -g["joint_origin"][parent >= 0])
    g_meshes = []
    for k, mesh in enumerate(link_meshes):
        if not (g["link_mass"][k] or g["link_com"][k].any() or g["link_inertia"][k].any()
                or g_points[counts[k]:counts[k + 1]].any()
                or g_areas[counts[k]:counts[k + 1]].any()):
            # nothing reaches this link's mesh (a Jacobian's unit cotangent touches one)
            g_meshes.append(np.zeros_like(mesh))
            continue
        local = mesh - joint[k]
        faces, contact = morphology.link_faces[k], morphology.contact_vertices[k]
        g_local, _ = mass_properties_vjp(local, faces, morphology.density,
                                         {"mass": g["link_mass"][k], "com": g["link_com"][k],
                                          "inertia": g["link_inertia"][k]})
        np.add.at(g_local, contact, g_points[counts[k]:counts[k + 1]])
        g_vertex_areas = np.zeros(len(local))
        g_vertex_areas[contact] = g_areas[counts[k]:counts[k + 1]]
        g_local += vertex_areas_vjp(local, faces, g_vertex_areas)
        g_meshes.append(g_local)
        g_joint[k] -= g_local.sum(axis=0)
    g_handles = np.zeros_like(handle_positions)
    g_handles[:-4] = np.repeat(g_joint / 4.0, 4, axis=0)
    return g_handles, g_meshes


def _forward(morphology: FingerMorphology, params):
    handle_positions = handles(morphology, params)
    link_meshes = meshes(morphology, handle_positions)
    return handle_positions, link_meshes, simulation_parameters(morphology, handle_positions,
                                                                link_meshes)


def design(morphology: FingerMorphology, params) -> dict[str, np.ndarray]:
    """The simulator's design (``link.mass``, ``link.com``, ``link.inertia``,
    ``joint.origin``, ``contact.point``) at θ: layers H, M and P in turn."""
    simulation = _forward(morphology, params)[2]
    return {name: simulation[field] for field, name in DESIGN_OF_PARAMETER.items()}


def _design_vjp_at(morphology: FingerMorphology, handle_positions, link_meshes,
                   g_design: dict) -> np.ndarray:
    """:func:`design_vjp` at the layers' outputs of a forward pass (``_forward``)."""
    g_params = {field: g_design[name] for field, name in DESIGN_OF_PARAMETER.items()
                if name in g_design}
    g_handles, g_meshes = simulation_parameters_vjp(morphology, handle_positions,
                                                    link_meshes, g_params)
    return handles_vjp(morphology, g_handles + meshes_vjp(morphology, g_meshes))


def design_vjp(morphology: FingerMorphology, params, g_design: dict) -> np.ndarray:
    """∂L/∂θ (m,) from the simulator's ∂L/∂design (the entries of :func:`design`; others,
    such as ``joint.damping``, do not depend on θ and are ignored)."""
    handle_positions, link_meshes, _ = _forward(morphology, params)
    return _design_vjp_at(morphology, handle_positions, link_meshes, g_design)


def design_jacobian(morphology: FingerMorphology, params) -> dict[str, np.ndarray]:
    """∂design/∂θ at θ: per entry of :func:`design` a (size of the entry, m) matrix, its
    flattened entries' rows, built from :func:`design_vjp` of each unit cotangent (one
    forward pass for all). A rollout's many ``step_vjp`` calls at one θ then pull their
    gradients back by a product each (``J.T @ g``)."""
    handle_positions, link_meshes, simulation = _forward(morphology, params)
    jacobian = {}
    for field, name in DESIGN_OF_PARAMETER.items():
        shape = simulation[field].shape
        units = np.eye(int(np.prod(shape)))
        jacobian[name] = np.array([
            _design_vjp_at(morphology, handle_positions, link_meshes,
                           {name: unit.reshape(shape)}) for unit in units])
    return jacobian


@dataclasses.dataclass(frozen=True, eq=False)
class HandMorphology:
    """Several assembled fingers in one robot, finger k's links and joints named with
    ``prefixes[k]`` before them (``right_phalanx1``), as ``robot: {fingers: [...]}`` builds
    them.

    Attributes:
        fingers: each finger's morphology (:func:`assemble_finger`).
        prefixes: each finger's prefix (distinct strings).
    """

    fingers: tuple[FingerMorphology, ...]
    prefixes: tuple[str, ...]

    def __post_init__(self):
        if len(self.fingers) != len(self.prefixes) or not self.fingers:
            raise ValueError(f"a hand needs one prefix per finger and at least one finger, "
                             f"got {len(self.fingers)} fingers and prefixes "
                             f"{list(self.prefixes)}")
        repeated = sorted({p for p in self.prefixes if self.prefixes.count(p) > 1})
        if repeated:
            raise ValueError(f"the fingers' prefixes {repeated} repeat: give each finger its "
                             f"own prefix (prefix: left_, prefix: right_), their links, "
                             f"joints and cage parameters are named by it")

    @property
    def link_names(self) -> tuple[str, ...]:
        """Every finger's links (prefixed), finger after finger."""
        return tuple(prefix + name
                     for finger, prefix in zip(self.fingers, self.prefixes, strict=True)
                     for name in finger.link_names)

    @property
    def parameter_names(self) -> tuple[str, ...]:
        """θ's names, ``<kind>.<prefix><station or component>`` (``width.left_tip``),
        finger after finger."""
        return tuple(f"{kind}.{prefix}{part}"
                     for finger, prefix in zip(self.fingers, self.prefixes, strict=True)
                     for kind, part in (name.split(".", 1) for name in finger.parameter_names))

    @property
    def parameter_defaults(self) -> np.ndarray:
        """θ's rest values (m,) [m]."""
        return np.concatenate([finger.parameter_defaults for finger in self.fingers])

    def split(self, params) -> list[np.ndarray]:
        """Each finger's θ from the hand's (m,); a ValueError for another shape."""
        theta = np.asarray(params, dtype=np.float64)
        sizes = np.cumsum([0] + [len(f.parameter_defaults) for f in self.fingers])
        if theta.shape != (sizes[-1],):
            raise ValueError(f"the hand's cage parameters are {sizes[-1]} values "
                             f"{list(self.parameter_names)}, got shape {theta.shape}")
        return [theta[a:b] for a, b in zip(sizes[:-1], sizes[1:], strict=True)]


def hand_design(hand: HandMorphology, params) -> dict[str, np.ndarray]:
    """:func:`design` of every finger at its part of θ (m,), the entries' rows stacked
    finger after finger (the order of ``hand.link_names`` and of their contacts)."""
    designs = [design(finger, theta)
               for finger, theta in zip(hand.fingers, hand.split(params), strict=True)]
    return {name: np.concatenate([d[name] for d in designs]) for name in designs[0]}


def hand_design_jacobian(hand: HandMorphology, params) -> dict[str, np.ndarray]:
    """∂(:func:`hand_design`)/∂θ: per entry a (size of the entry, m) matrix, block diagonal
    (a finger's rows depend on its own θ only)."""
    blocks = [design_jacobian(finger, theta)
              for finger, theta in zip(hand.fingers, hand.split(params), strict=True)]
    out = {}
    for name in blocks[0]:
        rows = sum(b[name].shape[0] for b in blocks)
        jacobian = np.zeros((rows, len(hand.parameter_defaults)))
        row = column = 0
        for block in blocks:
            r, c = block[name].shape
            jacobian[row:row + r, column:column + c] = block[name]
            row, column = row + r, column + c
        out[name] = jacobian
    return out


def description(morphology: FingerMorphology, params, *, damping: float = 0.01,
                initial=0.0) -> dict:
    """A sim_rigid robot description (:mod:`sim_rigid.description`) of the finger at θ:
    the links' masses, centres of mass, inertias and contact points and the joints'
    origins from :func:`simulation_parameters`, the revolute joints about y with
    ``damping`` [N m s/rad] and ``initial`` angles [rad] (one value or one per joint)."""
    simulation = _forward(morphology, params)[2]
    revolute = [k for k, t in enumerate(morphology.joint_types) if t == "revolute"]
    initial = np.broadcast_to(np.asarray(initial, dtype=np.float64), (len(revolute),))
    counts = np.cumsum([0] + [len(c) for c in morphology.contact_vertices])
    links, joints = [], []
    for k, name in enumerate(morphology.link_names):
        links.append({"name": name, "mass": float(simulation["link_mass"][k]),
                      "com": simulation["link_com"][k].tolist(),
                      "inertia": simulation["link_inertia"][k].tolist(),
                      "contacts": simulation["contact_point"][counts[k]:counts[k + 1]].tolist()})
        parent = morphology.joint_parent[k]
        joint = {"name": f"{name}_joint", "type": morphology.joint_types[k],
                 "parent": "world" if parent < 0 else morphology.link_names[parent],
                 "child": name, "origin": simulation["joint_origin"][k].tolist()}
        if k in revolute:
            joint |= {"axis": [0.0, 1.0, 0.0], "damping": float(damping),
                      "initial": float(initial[revolute.index(k)])}
        joints.append(joint)
    return {"links": links, "joints": joints}
