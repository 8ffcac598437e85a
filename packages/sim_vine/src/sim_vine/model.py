"""Static description of a vine: bodies, joints, contact points, growth mode, obstacles.

A vine of N rigid bodies in maximal coordinates (x, y, θ per body). Consecutive bodies are
joined by alternating prismatic and pin joints: joint k between bodies k and k+1 is
prismatic for even k (the pair telescopes, which is how the model grows) and a pin for odd
k; a first pin fixes body 0's proximal end to the base pose. Torsional springs (about a
rest angle per pin) and dampers act at the pins; each body may feel viscous friction
against the ground. Contact points sit at body ends, by default at every movable pin joint
and at the tip.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .obstacles import Circle, Obstacle, Polygon, Wall, obstacle_from_dict, signed_distance
from .options import GROWTH_MODES, VineOptions

__all__ = ["VineModel", "ModelError", "GROWTH_MODES", "CONTACT_MODES"]

_DEFAULT = VineOptions()
"""The declared default of every option, the defaults of the builders below."""

CONTACT_MODES = ("pins", "bodies", "along")


class ModelError(ValueError):
    """A vine model option is out of range or has the wrong shape."""


_DECLARED = ("length", "total_mass", "linear_density", "gyration_radius", "stiffness", "damping",
             "rest_angle", "friction", "ground_friction", "growth", "max_length", "contact_gap")
"""Fields that are options of :class:`VineOptions` by the same name: their bounds and
choices are checked as declared there."""


def _per_entity(value, count: int, name: str) -> np.ndarray:
    array = np.asarray(value, dtype=np.float64)
    if array.ndim == 0:
        array = np.full(count, float(array))
    if array.shape != (count,):
        raise ModelError(f"{name} must be a number or a list of {count}, got shape {array.shape}")
    return array


@dataclasses.dataclass(frozen=True, kw_only=True)
class VineModel:
    """A planar vine robot model (static; the state lives in :class:`VineState`).

    Attributes:
        body_count: number of rigid bodies N ≥ 1.
        length: initial length of the straight vine [m]; each body is ``length / N`` long.
        total_mass: mass of the whole vine [kg], the default of the per-body masses.
        linear_density: mass per length [kg/m]; when set, body masses grow with the
            everted length (:mod:`sim_vine.everted_mass`) and ``total_mass`` is not used;
            ``None`` keeps fixed masses.
        gyration_radius: radius of gyration of each body [m] (inertia = mass · r²);
            ``None`` means a slender rod, ``body_length / √12``.
        base: base pose ``(x [m], y [m], angle [rad])``; the vine starts along ``angle``.
        stiffness: default torsional stiffness per pin [N m/rad], scalar or (n_pins,).
        damping: default torsional damping per pin [N m s/rad], scalar or (n_pins,).
        rest_angle: default spring rest angle φ0 per pin [rad], scalar or (n_pins,): the
            spring torque is ``−K(φ − φ0)``.
        friction: default Coulomb friction coefficient at contacts [-].
        gravity: gravitational acceleration (gx, gy) [m/s²]; zero for a vine on a table.
        ground_friction: viscous friction against the ground per body [1/s], scalar or
            (N,): force ``−c_g m v`` and torque ``−c_g m r² ω`` (integrated implicitly).
        growth: ``"every_prismatic"`` (every prismatic joint extends at an equal share of
            the growth rate), ``"tip"`` (only the last prismatic joint extends) or
            ``"evert"`` (a chain of pins whose bodies evert one after another at the tip,
            :mod:`sim_vine.evert`).
        max_length: with ``growth="evert"``, the length with every body everted [m]: each
            body is ``max_length / N`` long and ``length`` is the everted length at t = 0.
        contact: ``"pins"`` (every movable pin and the tip), ``"bodies"`` (the distal end
            of every body), ``"along"`` (points spread evenly along every body, its distal
            end included, at most ``contact_gap`` apart: a body cuts no obstacle corner
            wider than the gap) or a list of ``[body_index, offset_m]`` along the body axis.
        contact_gap: with ``contact="along"``, the largest gap between neighbouring points
            on a body [m]; ``None``: a quarter of a body's length.
        obstacles: the environment's obstacles.
        initial_angles: joint angles of the pins at t = 0 [rad], scalar or (n_pins,).
        implicit_springs: integrate spring and damper torques implicitly (stable for any
            dt); ``False`` uses the paper's explicit forces.

    Defaults, bounds and choices are the options' (:class:`~sim_vine.options.VineOptions`);
    :meth:`from_options` builds the model of a set of options.
    """

    body_count: int = _DEFAULT.bodies
    length: float = _DEFAULT.length
    total_mass: float = _DEFAULT.total_mass
    linear_density: float | None = _DEFAULT.linear_density
    gyration_radius: float | None = _DEFAULT.gyration_radius
    base: Sequence[float] = tuple(_DEFAULT.base)
    stiffness: Any = _DEFAULT.stiffness
    damping: Any = _DEFAULT.damping
    rest_angle: Any = _DEFAULT.rest_angle
    friction: float = _DEFAULT.friction
    gravity: Sequence[float] = tuple(_DEFAULT.gravity)
    ground_friction: Any = _DEFAULT.ground_friction
    growth: str = _DEFAULT.growth
    max_length: float | None = _DEFAULT.max_length
    contact: Any = _DEFAULT.contact
    contact_gap: float | None = _DEFAULT.contact_gap
    obstacles: tuple[Obstacle, ...] = ()
    initial_angles: Any = _DEFAULT.initial_angles
    implicit_springs: bool = _DEFAULT.implicit_springs

    @classmethod
    def from_options(cls, options: VineOptions) -> VineModel:
        """The model the options describe (its ``obstacles`` as YAML mappings)."""
        o = options
        return cls(body_count=o.bodies, length=o.length, total_mass=o.total_mass,
                   linear_density=o.linear_density, gyration_radius=o.gyration_radius,
                   base=o.base, stiffness=o.stiffness, damping=o.damping,
                   rest_angle=o.rest_angle, friction=o.friction, gravity=o.gravity,
                   ground_friction=o.ground_friction, growth=o.growth,
                   max_length=o.max_length, contact=o.contact, contact_gap=o.contact_gap,
                   initial_angles=o.initial_angles,
                   obstacles=tuple(obstacle_from_dict(spec) for spec in o.obstacles),
                   implicit_springs=o.implicit_springs)

    def __post_init__(self):
        if isinstance(self.body_count, bool) or int(self.body_count) != self.body_count \
                or self.body_count < 1:
            raise ModelError(f"body_count must be an integer ≥ 1, got {self.body_count!r}")
        # the options' declared bounds and choices, also for a model built in Python
        problems = VineOptions.problems({name: getattr(self, name) for name in _DECLARED})
        if problems:
            raise ModelError("; ".join(f"{name}: {message}" for name, message in problems))
        object.__setattr__(self, "body_count", int(self.body_count))
        for name in ("length", "total_mass", "friction"):
            object.__setattr__(self, name, float(getattr(self, name)))
        for name in ("gyration_radius", "linear_density", "max_length"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, float(getattr(self, name)))
        base = np.asarray(self.base, dtype=np.float64)
        if base.shape != (3,) or not np.all(np.isfinite(base)):
            raise ModelError(f"base must be (x, y, angle), got {self.base!r}")
        object.__setattr__(self, "base", base)
        gravity = np.asarray(self.gravity, dtype=np.float64)
        if gravity.shape != (2,) or not np.all(np.isfinite(gravity)):
            raise ModelError(f"gravity must be (gx, gy) in m/s², got {self.gravity!r}")
        object.__setattr__(self, "gravity", gravity)
        if self.evert:
            if self.max_length is None:
                raise ModelError("growth: evert needs max_length, the vine's length with all "
                                 "its bodies everted [m] (each body is max_length / bodies "
                                 "long)")
            if not self.body_length * (1 - 1e-12) <= self.length \
                    <= self.max_length * (1 + 1e-12):
                raise ModelError(
                    f"growth: evert needs one body length ({self.body_length:g} m) <= length "
                    f"<= max_length ({self.max_length:g} m), got length {self.length:g} m")
        n_pins = self.pin_count
        object.__setattr__(self, "stiffness", _per_entity(self.stiffness, n_pins, "stiffness"))
        object.__setattr__(self, "damping", _per_entity(self.damping, n_pins, "damping"))
        rest_angle = _per_entity(self.rest_angle, n_pins, "rest_angle")
        if not np.all(np.isfinite(rest_angle)):
            raise ModelError(f"rest_angle must be finite [rad], got {rest_angle}")
        object.__setattr__(self, "rest_angle", rest_angle)
        ground = _per_entity(self.ground_friction, self.body_count, "ground_friction")
        if not np.all(np.isfinite(ground) & (ground >= 0)):
            raise ModelError(f"ground_friction must be finite and >= 0 [1/s], got {ground}")
        object.__setattr__(self, "ground_friction", ground)
        angles = np.asarray(self.initial_angles, dtype=np.float64)
        angles = np.full(n_pins, float(angles)) if angles.ndim == 0 else angles
        if angles.shape != (n_pins,) or not np.all(np.isfinite(angles)):
            raise ModelError(f"initial_angles must be a number or a list of {n_pins}, "
                             f"got shape {angles.shape}")
        object.__setattr__(self, "initial_angles", angles)
        obstacles = tuple(self.obstacles)
        for obstacle in obstacles:
            if not isinstance(obstacle, Circle | Polygon | Wall):
                raise ModelError(f"obstacles must be Circle, Polygon or Wall, got {obstacle!r}")
        object.__setattr__(self, "obstacles", obstacles)
        self._contact_points()  # validates the contact option

    # -- geometry -------------------------------------------------------------------------

    @property
    def evert(self) -> bool:
        """True when the vine grows by eversion at the tip (``growth="evert"``)."""
        return self.growth == "evert"

    @property
    def body_length(self) -> float:
        """Length of each rigid body [m]: ``length / N``, or ``max_length / N`` when the
        vine everts."""
        if self.evert:
            return self.max_length / self.body_count
        return self.length / self.body_count

    @property
    def half_length(self) -> float:
        """Distance d from a body's centre of mass to its ends [m]."""
        return 0.5 * self.body_length

    @property
    def body_mass(self) -> float:
        """Default design mass of each body [kg]: ``linear_density`` × body length (the
        mass of the body's own length, before it carries everted material), else
        ``total_mass / N``."""
        if self.linear_density is not None:
            return self.linear_density * self.body_length
        return self.total_mass / self.body_count

    @property
    def gyration(self) -> float:
        """Radius of gyration used for the inertia [m]."""
        return self.gyration_radius or self.body_length / np.sqrt(12.0)

    @property
    def pin_count(self) -> int:
        """Number of pin joints, the base pin included (every joint when the vine everts)."""
        if self.evert:
            return self.body_count
        return 1 + (self.body_count - 1) // 2

    @property
    def prismatic_count(self) -> int:
        """Number of prismatic joints (none when the vine everts)."""
        if self.evert:
            return 0
        return self.body_count // 2

    @functools.cached_property
    def pins(self) -> tuple[np.ndarray, np.ndarray]:
        """(parent, child) body indices of each pin, shape (n_pins,); parent -1 is the base."""
        if self.evert:
            return np.arange(-1, self.body_count - 1), np.arange(self.body_count)
        parents = np.array([-1] + list(range(1, self.body_count - 1, 2)), dtype=np.int64)
        return parents, parents + 1

    @functools.cached_property
    def prismatics(self) -> tuple[np.ndarray, np.ndarray]:
        """(proximal, distal) body indices of each prismatic joint, shape (n_prismatic,)."""
        proximal = np.arange(0, 2 * self.prismatic_count, 2, dtype=np.int64)
        return proximal, proximal + 1

    @functools.cached_property
    def growth_weights(self) -> np.ndarray:
        """Share of the growth rate taken by each prismatic joint, shape (n_prismatic,)."""
        n = self.prismatic_count
        if n == 0:
            return np.zeros(0)
        if self.growth == "tip":
            weights = np.zeros(n)
            weights[-1] = 1.0
            return weights
        return np.full(n, 1.0 / n)

    def _contact_points(self) -> tuple[np.ndarray, np.ndarray]:
        n, d = self.body_count, self.half_length
        if isinstance(self.contact, str):
            if self.contact == "pins" and self.evert:  # every body's distal end is a pin
                bodies = list(range(n))
            elif self.contact == "pins":
                bodies = sorted(set(range(1, n - 1, 2)) | {n - 1})
            elif self.contact == "bodies":
                bodies = list(range(n))
            elif self.contact == "along":
                # a body's proximal end is its parent's distal point (or the fixed base)
                gap = self.contact_gap or self.body_length / 4.0
                segments = max(1, math.ceil(self.body_length / gap - 1e-9))
                offsets = -d + self.body_length * np.arange(1, segments + 1) / segments
                return np.repeat(np.arange(n, dtype=np.int64), segments), np.tile(offsets, n)
            else:
                raise ModelError(f"contact must be one of {CONTACT_MODES} or a list of "
                                 f"[body, offset], got {self.contact!r}")
            return np.asarray(bodies, dtype=np.int64), np.full(len(bodies), d)
        points = np.asarray(self.contact, dtype=np.float64)
        if points.ndim != 2 or points.shape[1] != 2 or len(points) == 0:
            raise ModelError(
                f"contact points must be a list of [body, offset], got {self.contact!r}")
        bodies = points[:, 0]
        if np.any(bodies != np.round(bodies)) or np.any(bodies < 0) or np.any(bodies >= n):
            raise ModelError(f"contact body indices must be integers in [0, {n}), got {bodies}")
        if np.any(np.abs(points[:, 1]) > d * (1 + 1e-12)):
            raise ModelError(f"contact offsets must lie on the body, |offset| <= {d} m")
        return bodies.astype(np.int64), points[:, 1].copy()

    @functools.cached_property
    def contact_points(self) -> tuple[np.ndarray, np.ndarray]:
        """(body index, offset along the body axis [m]) of each contact point, (n_contacts,)."""
        return self._contact_points()

    @property
    def contact_count(self) -> int:
        """Number of contact points."""
        return len(self.contact_points[0])

    # -- configurations ------------------------------------------------------------------

    def configuration(self, joint_angles, extensions=None) -> np.ndarray:
        """Body poses (N, 3) of a vine with the given pin angles [rad], shape (n_pins,).

        ``extensions`` are the prismatic joint extensions beyond touching ends [m], shape
        (n_prismatic,), default zero. Every body is laid end to end from the base. A vine
        that everts has one extension, its everted length beyond ``length`` [m] (shape (1,),
        default zero): its bodies evert to that length as the growth schedule
        (:meth:`evert_schedule`) places them, and the joints not yet everted stay straight
        whatever their angle.
        """
        if self.evert:
            return self._everted_configuration(joint_angles, extensions)
        angles = np.asarray(joint_angles, dtype=np.float64).reshape(self.pin_count)
        ext = np.zeros(self.prismatic_count) if extensions is None else np.asarray(
            extensions, dtype=np.float64).reshape(self.prismatic_count)
        d = self.half_length
        q = np.zeros((self.body_count, 3))
        point = self.base[:2].copy()
        heading = self.base[2]
        for i in range(self.body_count):
            if i % 2 == 0:  # bodies 0, 2, 4 ... start after a pin
                heading = heading + angles[i // 2]
            direction = np.array([np.cos(heading), np.sin(heading)])
            if i % 2 == 1:  # the distal body of a prismatic pair slides out by its extension
                point = point + ext[i // 2] * direction
            q[i] = (*(point + d * direction), heading)
            point = point + 2 * d * direction
        return q

    def evert_schedule(self, everted_length: float) -> tuple[np.ndarray, np.ndarray]:
        """``(S (N,) [m], slope (N,))`` of a vine that everts: the slot offset
        ``S_j = clip(E − 2d(j − 1), 0, 2d) − 2d`` that the length E [m] everted beyond
        body 0 gives joint j (bodies evert in order, each up to its full 2d; the base joint
        is always a pin) and ``∂S_j/∂E`` (1 for the body emerging at E, else 0)."""
        full = self.body_length
        reach = everted_length - full * np.arange(-1, self.body_count - 1)  # E − 2d(j − 1)
        reach[0] = full
        offsets = np.clip(reach, 0.0, full) - full
        slope = ((reach > 0.0) & (reach < full)).astype(np.float64)
        return offsets, slope

    def _everted_length(self, extensions) -> float:
        """The length E [m] everted beyond body 0 with ``extensions`` (None or shape (1,),
        the everted length beyond ``length``)."""
        extension = np.zeros(1) if extensions is None else np.asarray(
            extensions, dtype=np.float64).reshape(-1)
        if extension.shape != (1,):
            raise ModelError(f"a vine that everts (growth: evert) has one extension, its "
                             f"everted length beyond length [m]; got shape "
                             f"{np.shape(extensions)}")
        return self.length - self.body_length + float(extension[0])

    def _everted_configuration(self, joint_angles, extensions) -> np.ndarray:
        angles = np.asarray(joint_angles, dtype=np.float64).reshape(self.pin_count)
        offsets, _ = self.evert_schedule(self._everted_length(extensions))
        d = self.half_length
        q = np.zeros((self.body_count, 3))
        end = self.base[:2].copy()  # the parent's distal end
        heading = self.base[2]
        for j in range(self.body_count):
            if j == 0 or offsets[j] == 0.0:  # a joint that has everted bends
                heading = heading + angles[j]
            direction = np.array([np.cos(heading), np.sin(heading)])
            start = end + offsets[j] * direction
            q[j] = (*(start + d * direction), heading)
            end = start + 2 * d * direction
        return q

    def configuration_vjp(self, joint_angles, extensions, g_q) -> tuple[np.ndarray, np.ndarray]:
        """``(∂L/∂joint_angles (n_pins,), ∂L/∂extensions (n_prismatic,))`` of
        :meth:`configuration` given ``∂L/∂q`` (N, 3).

        Body i's heading is the base angle plus the pin angles at or before it, and its
        centre is the base plus ``ℓ_j dir(h_j)`` summed over the bodies j before it plus
        ``(e_i + d) dir(h_i)``, with ``ℓ_j = 2d + e_j`` and e_j the extension a distal body
        of a prismatic pair slides out by (0 for the others). A vine that everts has one
        extension, its everted length beyond ``length`` (:meth:`configuration`).
        """
        if self.evert:
            return self._everted_configuration_vjp(joint_angles, extensions, g_q)
        angles = np.asarray(joint_angles, dtype=np.float64).reshape(self.pin_count)
        ext = np.zeros(self.prismatic_count) if extensions is None else np.asarray(
            extensions, dtype=np.float64).reshape(self.prismatic_count)
        g_q = np.asarray(g_q, dtype=np.float64).reshape(self.body_count, 3)
        n, d = self.body_count, self.half_length
        body = np.arange(n)
        heading = self.base[2] + np.cumsum(np.where(body % 2 == 0, angles[body // 2], 0.0))
        slide = np.zeros(n)
        slide[1::2] = ext  # the distal body of each prismatic pair
        g_heading, g_slide = _chain_vjp(heading, slide, g_q, d)
        g_from = np.cumsum(g_heading[::-1])[::-1]  # a pin turns every body from it on
        return g_from[0::2], g_slide[1::2]

    def _everted_configuration_vjp(self, joint_angles, extensions, g_q
                                   ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`configuration_vjp` of a vine that everts: body j's centre is the base plus
        ``(2d + σ_k) dir(h_k)`` over the bodies k before it plus ``(σ_j + d) dir(h_j)``,
        its heading turned by the angles of the joints that have everted (σ = 0), and the
        slot offsets σ follow the everted length by the schedule's slope."""
        angles = np.asarray(joint_angles, dtype=np.float64).reshape(self.pin_count)
        offsets, slope = self.evert_schedule(self._everted_length(extensions))
        g_q = np.asarray(g_q, dtype=np.float64).reshape(self.body_count, 3)
        d = self.half_length
        bent = offsets == 0.0
        bent[0] = True
        heading = self.base[2] + np.cumsum(np.where(bent, angles, 0.0))
        g_heading, g_offsets = _chain_vjp(heading, offsets, g_q, d)
        g_angles = np.where(bent, np.cumsum(g_heading[::-1])[::-1], 0.0)
        return g_angles, np.array([g_offsets @ slope])

    def initial_configuration(self) -> np.ndarray:
        """Body poses (N, 3) at t = 0 from ``initial_angles``."""
        return self.configuration(self.initial_angles)

    def contact_positions(self, body_q) -> np.ndarray:
        """World positions of the contact points [m], shape (n_contacts, 2)."""
        bodies, offsets = self.contact_points
        q = np.asarray(body_q)[bodies]
        return q[:, :2] + offsets[:, None] * np.stack([np.cos(q[:, 2]), np.sin(q[:, 2])], axis=1)

    def obstacle_distances(self, body_q) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Signed distance [m], outward normal and its derivative [1/m] of every contact
        point to every obstacle, shapes (n_contacts, n_obstacles) + (), (2,), (2, 2)."""
        points = self.contact_positions(body_q)
        shape = (len(points), len(self.obstacles))
        phi, normal, dnormal = np.zeros(shape), np.zeros(shape + (2,)), np.zeros(shape + (2, 2))
        for j, obstacle in enumerate(self.obstacles):
            phi[:, j], normal[:, j], dnormal[:, j] = signed_distance(obstacle, points)
        return phi, normal, dnormal

    def penetrations(self, body_q, *, tolerance: float = 0.0) -> list[tuple[int, int, float]]:
        """(contact point, obstacle, signed distance [m]) for every point inside an obstacle,
        obstacle by obstacle."""
        phi = self.obstacle_distances(body_q)[0]
        return [(int(i), int(j), float(phi[i, j]))
                for j, i in zip(*np.nonzero(phi.T < -tolerance), strict=True)]


def _chain_vjp(heading, slide, g_q, d: float) -> tuple[np.ndarray, np.ndarray]:
    """``(∂L/∂heading, ∂L/∂slide)`` (N,) of a chain whose body j has heading h_j [rad] and
    its centre at the base plus ``(2d + s_k) dir(h_k)`` over the bodies k before it plus
    ``(s_j + d) dir(h_j)``, given ∂L/∂q (N, 3): the configurations of both growth models."""
    direction = np.stack([np.cos(heading), np.sin(heading)], axis=1)
    normal = np.stack([-direction[:, 1], direction[:, 0]], axis=1)
    g_xy = g_q[:, :2]
    after = np.cumsum(g_xy[::-1], axis=0)[::-1] - g_xy  # Σ_{i > j} ∂L/∂x_i
    g_heading = (g_q[:, 2] + (2 * d + slide) * np.sum(after * normal, axis=1)
                 + (slide + d) * np.sum(g_xy * normal, axis=1))
    return g_heading, np.sum((after + g_xy) * direction, axis=1)
