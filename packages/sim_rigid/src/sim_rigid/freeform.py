"""Free-form cube fingers (Xu et al. 2021, Section IV-C, "Free-form Gripper"): a parallel
gripper's two fingers, each a cube deformed by a cage with many handles, whose inner-side
handles are the design. The paper's layers, each with its VJP:

    θ: handle displacements (k, 3) per finger [m] --H--> cage handles (h, 3)
        --M--> deformed finger meshes --P--> link masses and inertias, contact points

- the cage of a finger: the cube ``cage_margin`` times the finger's size, each side cut
  into ``cage_divisions`` (:func:`~sim_rigid.components.box_mesh`), so it has many handles;
  the mesh: the cube cut into ``divisions`` per side, its vertices' mean value coordinates
  (:func:`~sim_rigid.cage.mean_value_coordinates`) fixed at the rest shape;
- the fabrication constraints (the paper's): only the handles on the finger's inner side
  (the side facing the other finger) move, not those of the top row, where the finger is
  mounted on its slide; each moves at most ``normal_travel`` along the closing axis (y)
  and ``0.45`` of the cage's cell along x and z, so neighbouring handles never cross and
  the cage stays a closed, outward mesh (the bounds of :func:`handle_parameters`);
- contact points: the mesh vertices of the inner side (the pad that grasps), in the link's
  frame, whose origin is the rest cube's centre; the link's joint origin (its slide on
  the palm) does not depend on θ.

Each finger's link frame is unrotated: the left finger (``left_finger``) sits at +y, its
inner side at -y; the right one (``right_finger``) at -y, its inner side at +y. θ holds
displacements in those frames: ``handles.left_finger`` and ``handles.right_finger``, each
(k, 3) in the order of :attr:`FreeformGripper.free_handles`. :func:`design` and
:func:`design_vjp` map θ (flattened, left then right) to and from the simulator's
``link.mass``, ``link.inertia``, ``joint.origin`` and ``contact.point`` of the two finger
links, :func:`design_jacobian` gives ∂design/∂θ for
:class:`~sim_rigid.cage_design.CageSimulator`.

Limits: :func:`design` does not pass ``link.com`` (the simulator takes it; the finger
morphology's :func:`sim_rigid.morphology.design` does), so each finger's centre of mass
stays where the rest cube put it (its centre); the mass and the inertia about it follow θ.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from codesign import Parameter

from .cage import mean_value_coordinates
from .components import box_mesh, check_sizes
from .mesh_properties import deform, mass_properties, mass_properties_vjp

__all__ = ["FINGER_NAMES", "FreeformGripper", "design", "design_jacobian", "design_vjp",
           "finger_meshes", "freeform_gripper", "handle_parameters", "handles", "handles_vjp"]

FINGER_NAMES = ("left_finger", "right_finger")
"""The finger links, left (at +y) then right (at -y)."""

_TANGENTIAL_TRAVEL = 0.45
"""Largest move of a handle along x and z, as a fraction of the cage's cell: below one half,
so two neighbours never cross."""


@dataclasses.dataclass(frozen=True, eq=False)
class FreeformGripper:
    """Two free-form cube fingers.

    Attributes:
        link_names: the finger links (:data:`FINGER_NAMES`).
        joint_origin: (2, 3) [m] each finger's slide origin in the palm's frame.
        rest_handles: (h, 3) [m] per finger its cage's vertices at rest in its link frame.
        cage_faces: (g, 3) the cage's faces (the same for both fingers).
        free_handles: (k,) per finger the cage vertices θ moves (its inner side without
            the top row).
        lower, upper: (k, 3) [m] per finger the bounds of the displacements.
        link_weights: (v, h) per finger its mesh vertices' mean value coordinates.
        link_faces: (f, 3) the mesh's faces (the same for both fingers).
        contact_vertices: (c,) per finger the mesh vertices that are contact points.
        density: of the fingers [kg/m³].
        cage_margin: the cage's size over the finger's.
    """

    link_names: tuple[str, ...]
    joint_origin: np.ndarray
    rest_handles: tuple[np.ndarray, ...]
    cage_faces: np.ndarray
    free_handles: tuple[np.ndarray, ...]
    lower: tuple[np.ndarray, ...]
    upper: tuple[np.ndarray, ...]
    link_weights: tuple[np.ndarray, ...]
    link_faces: np.ndarray
    contact_vertices: tuple[np.ndarray, ...]
    density: float
    cage_margin: float

    @property
    def parameter_names(self) -> tuple[str, ...]:
        """θ's parameters: ``handles.<finger>`` each."""
        return tuple(f"handles.{name}" for name in self.link_names)

    @property
    def handle_count(self) -> int:
        """k, the handles θ moves per finger."""
        return len(self.free_handles[0])


def freeform_gripper(*, side: float = 0.04, divisions: int = 6, cage_divisions: int = 4,
                     cage_margin: float = 1.15, normal_travel: float = 0.012,
                     density: float = 500.0, opening: float = 0.05,
                     drop: float = 0.04) -> FreeformGripper:
    """Two cubes of ``side`` [m] (mesh cut ``divisions`` times per side) in cages
    ``cage_margin`` (> 1) times as large cut ``cage_divisions`` times per side, of
    ``density`` [kg/m³]; their centres ``opening`` [m] either side of the palm along y and
    ``drop`` [m] below it; inner handles move at most ``normal_travel`` [m] along y."""
    check_sizes("gripper", dict(side=side, normal_travel=normal_travel, density=density,
                                opening=opening), cage_margin=cage_margin)
    for name, count in (("divisions", divisions), ("cage_divisions", cage_divisions)):
        if int(count) != count or count < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {count!r}")
    if opening <= side / 2:
        raise ValueError(f"opening {opening} m puts the fingers' centres closer than half "
                         f"their side ({side / 2} m) to the middle: they would overlap")
    half, cage_half = side / 2, cage_margin * side / 2
    vertices, faces = box_mesh([-half] * 3, [half] * 3, [int(divisions)] * 3)
    cage, cage_faces = box_mesh([-cage_half] * 3, [cage_half] * 3, [int(cage_divisions)] * 3)
    weights = mean_value_coordinates(cage, cage_faces, vertices)
    cell = 2 * cage_half / cage_divisions
    free, contacts, lower, upper = [], [], [], []
    for inner in (-1.0, 1.0):           # the left finger's inner side is at -y
        top = cage[:, 2] >= cage_half * (1 - 1e-9)
        handles_k = np.flatnonzero((inner * cage[:, 1] >= cage_half * (1 - 1e-9)) & ~top)
        free.append(handles_k)
        contacts.append(np.flatnonzero(inner * vertices[:, 1] >= half * (1 - 1e-9)))
        travel = np.array([_TANGENTIAL_TRAVEL * cell, normal_travel,
                           _TANGENTIAL_TRAVEL * cell])
        lower.append(np.broadcast_to(-travel, (len(handles_k), 3)).copy())
        upper.append(np.broadcast_to(travel, (len(handles_k), 3)).copy())
    origin = np.array([[0.0, opening, -drop], [0.0, -opening, -drop]])
    return FreeformGripper(
        link_names=FINGER_NAMES, joint_origin=origin, rest_handles=(cage, cage.copy()),
        cage_faces=cage_faces, free_handles=tuple(free), lower=tuple(lower),
        upper=tuple(upper), link_weights=(weights, weights), link_faces=faces,
        contact_vertices=tuple(contacts), density=float(density),
        cage_margin=float(cage_margin))


def handle_parameters(gripper: FreeformGripper) -> list[Parameter]:
    """θ as design parameters: ``handles.<finger>`` (k, 3) [m], default 0 (the cubes),
    within the fabrication bounds."""
    scale = float(np.max(gripper.upper[0]))
    return [Parameter(name, (gripper.handle_count, 3), 0.0, lower=low, upper=high, unit="m",
                      scale=scale, entity="handle",
                      doc="displacement of an inner cage handle in the finger's frame")
            for name, low, high in zip(gripper.parameter_names, gripper.lower, gripper.upper,
                                       strict=True)]


def _displacements(gripper: FreeformGripper, params) -> list[np.ndarray]:
    """θ (2 k 3,) [m] as one (k, 3) per finger, after checking its size."""
    theta = np.asarray(params, dtype=np.float64)
    k = gripper.handle_count
    if theta.shape != (2 * k * 3,):
        raise ValueError(f"the free-form gripper's θ holds {k} handle displacements (x, y, z) "
                         f"per finger, {2 * k * 3} values, got shape {theta.shape}; give "
                         f"handles.left_finger and handles.right_finger of shape ({k}, 3)")
    if not np.all(np.isfinite(theta)):
        raise ValueError("the free-form gripper's handle displacements must be finite")
    return list(theta.reshape(2, k, 3))


def handles(gripper: FreeformGripper, params) -> list[np.ndarray]:
    """Layer H: each finger's cage handles (h, 3) [m] in its link frame from θ (2 k 3,)."""
    out = []
    for rest, free, move in zip(gripper.rest_handles, gripper.free_handles,
                                _displacements(gripper, params), strict=True):
        cage = rest.copy()
        cage[free] += move
        out.append(cage)
    return out


def handles_vjp(gripper: FreeformGripper, g_handles) -> np.ndarray:
    """∂L/∂θ (2 k 3,) from ∂L/∂handles (one (h, 3) per finger) of :func:`handles`."""
    return np.concatenate([np.asarray(g)[free].reshape(-1)
                           for g, free in zip(g_handles, gripper.free_handles, strict=True)])


def finger_meshes(gripper: FreeformGripper, params) -> list[np.ndarray]:
    """Layers H and M: each finger's deformed mesh vertices (v, 3) [m] in its link frame
    (faces ``gripper.link_faces``)."""
    return [deform(w, cage) for w, cage in zip(gripper.link_weights,
                                                handles(gripper, params), strict=True)]


def design(gripper: FreeformGripper, params) -> dict[str, np.ndarray]:
    """The simulator's design of the two finger links at θ (2 k 3,) [m]: ``link.mass``
    (2,) [kg], ``link.inertia`` (2, 3, 3) [kg m²] about the centre of mass, ``joint.origin``
    (2, 3) [m] (constant) and ``contact.point`` (2 c, 3) [m], left finger first."""
    mass, inertia, points = [], [], []
    for k, mesh in enumerate(finger_meshes(gripper, params)):
        props = mass_properties(mesh, gripper.link_faces, gripper.density)
        if not np.all(np.linalg.eigvalsh(props["inertia"]) > 0):
            raise ValueError(f"the {gripper.link_names[k]}'s deformed mesh has an inertia "
                             f"that is not positive definite: its handles fold the mesh; "
                             f"keep them within their bounds")
        mass.append(props["mass"])
        inertia.append(props["inertia"])
        points.append(mesh[gripper.contact_vertices[k]])
    return {"link.mass": np.array(mass), "link.inertia": np.array(inertia),
            "joint.origin": gripper.joint_origin.copy(),
            "contact.point": np.concatenate(points)}


def design_vjp(gripper: FreeformGripper, params, g_design: dict) -> np.ndarray:
    """∂L/∂θ (2 k 3,) from ∂L/∂(the entries of :func:`design`; missing ones count as
    zero, ``joint.origin`` does not depend on θ)."""
    meshes = finger_meshes(gripper, params)
    c = len(gripper.contact_vertices[0])
    g_mass = np.asarray(g_design.get("link.mass", np.zeros(2)), dtype=np.float64)
    g_inertia = np.asarray(g_design.get("link.inertia", np.zeros((2, 3, 3))), dtype=np.float64)
    g_points = np.asarray(g_design.get("contact.point", np.zeros((2 * c, 3))),
                          dtype=np.float64)
    g_handles = []
    for k, mesh in enumerate(meshes):
        g_mesh, _ = mass_properties_vjp(mesh, gripper.link_faces, gripper.density,
                                        {"mass": g_mass[k], "inertia": g_inertia[k]})
        np.add.at(g_mesh, gripper.contact_vertices[k], g_points[k * c:(k + 1) * c])
        g_handles.append(gripper.link_weights[k].T @ g_mesh)
    return handles_vjp(gripper, g_handles)


def design_jacobian(gripper: FreeformGripper, params) -> dict[str, np.ndarray]:
    """∂design/∂θ at θ: per entry of :func:`design` a (size of the entry, 2 k 3) matrix.
    The contact points are linear in θ (rows of the mean value coordinates); the masses and
    inertias take one :func:`design_vjp` per unit cotangent (20)."""
    size = 2 * gripper.handle_count * 3
    jacobian = {"joint.origin": np.zeros((6, size))}
    for name, shape in (("link.mass", (2,)), ("link.inertia", (2, 3, 3))):
        units = np.eye(int(np.prod(shape)))
        jacobian[name] = np.array([design_vjp(gripper, params, {name: u.reshape(shape)})
                                   for u in units])
    blocks = []
    for k, (w, free) in enumerate(zip(gripper.link_weights, gripper.free_handles,
                                      strict=True)):
        # ∂ point_i,a / ∂ θ_(finger k, handle j, axis b) = W[i, free_j] δ_ab
        per_axis = np.einsum("ij,ab->iajb", w[gripper.contact_vertices[k]][:, free],
                             np.eye(3)).reshape(-1, len(free) * 3)
        block = np.zeros((per_axis.shape[0], size))
        block[:, k * len(free) * 3:(k + 1) * len(free) * 3] = per_axis
        blocks.append(block)
    jacobian["contact.point"] = np.concatenate(blocks)
    return jacobian
