"""Co-design through the cage parameters θ (Xu et al. 2021, Section III-A): a
:class:`~sim_rigid.simulator.RigidSimulator` whose robot holds a cage-built finger, seen
through the finger's high-level parameters instead of its simulation parameters.

    θ --morphology.design--> link.mass, link.com, link.inertia, joint.origin, contact.point
        of the finger's links (the other links' stay the model's) --> the wrapped simulator

Several fingers (``robot: {fingers: [...]}``) go through the same wrapper as one
:class:`~sim_rigid.morphology.HandMorphology`: θ is the fingers' parameters in turn, each
named with its finger's prefix (``length.right_phalanx1``), and ``design`` /
``design_jacobian`` are :func:`~sim_rigid.morphology.hand_design` and
:func:`~sim_rigid.morphology.hand_design_jacobian` (the fingers' layers side by side).

:class:`CageSimulator` is the core's :class:`~codesign.tying.TiedSimulator` with another
expansion: its design space holds θ (``length.<component>``, ``width.<station>``,
``height.<station>`` [m], each a scalar within :data:`FABRICATION_LIMITS`) and every wrapped
parameter θ does not set (``joint.axis``, ``joint.damping``, ``contact.area``, the contact
law's coefficients); ``step``, ``initial_state`` and the optional hooks run the wrapped simulator
on the expanded design (inherited), ``step_vjp`` and ``initial_state_vjp`` pull its design
gradient back to θ through ∂design/∂θ (:func:`sim_rigid.morphology.design_jacobian`).

The expansion is pure; the last θ's design and Jacobian are kept, since a rollout and its
adjoint call the wrapper hundreds of times at one θ (a 4-phalanx finger: the design 0.5 ms,
the Jacobian 0.25 s, each step's pull-back a product of 186 × 14).

The free-form gripper (:mod:`sim_rigid.freeform`) goes through the same wrapper with its own
layers and θ: ``design``, ``design_jacobian`` and ``parameters`` (array-valued θ, the inner
handles' displacements) are keywords, θ being every parameter's entries flattened in order.
The wrapper sets the entries its ``design`` returns (the free-form gripper's has no
``link.com``: its fingers' centres of mass stay the model's).

Limits (those of :mod:`sim_rigid.morphology`): the contact areas the morphology computes
are not passed on (``contact.area`` stays a weight of its own).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from codesign import DesignSpace, Parameter
from codesign.tying import TiedSimulator

from . import morphology as mo
from .simulator import RigidSimulator

__all__ = ["FABRICATION_LIMITS", "CageDesignError", "CageSimulator"]

FABRICATION_LIMITS = (0.005, 0.2)
"""Bounds [m] of every cage parameter: components thinner than 5 mm do not print with their
joint's pin hole, and 20 cm is a printer bed's side."""


class CageDesignError(ValueError):
    """A robot that is not the cage-built finger (or fingers) the wrapper was given."""


class CageSimulator(TiedSimulator):
    """A rigid simulator whose finger's simulation parameters come from its cage
    parameters θ.

    Args:
        inner: the simulator of a robot holding the finger ``finger`` at its rest shape
            (links named as the finger's, from ``robot: {finger: ...}``), possibly beside
            other links (a carriage, an object); or several fingers (``robot: {fingers:
            [...]}``) with ``finger`` their :class:`~sim_rigid.morphology.HandMorphology`.
        finger: the finger's morphology (:func:`sim_rigid.morphology.assemble_finger`), or
            another cage-built morphology with ``link_names`` (those whose rows θ sets) and
            the keywords below.
        design, design_jacobian: ``f(finger, θ (m,))`` the rows of ``link.mass``,
            ``link.com`` (optional), ``link.inertia``, ``joint.origin`` and
            ``contact.point`` of those links, and their Jacobian (each entry (size, m));
            default the finger's
            (:func:`sim_rigid.morphology.design`, :func:`~sim_rigid.morphology.design_jacobian`).
        parameters: θ's :class:`~codesign.Parameter` list (default the finger's scalars
            within :data:`FABRICATION_LIMITS`); θ is their entries flattened in order.
    """

    def __init__(self, inner: RigidSimulator, finger, *, design=mo.design,
                 design_jacobian=mo.design_jacobian, parameters=None):
        super().__init__(inner)
        self.finger = finger
        self._design, self._design_jacobian = design, design_jacobian
        model = inner.model
        missing = [name for name in finger.link_names if name not in model.link_names]
        if missing:
            raise CageDesignError(f"the robot has no links {missing} of the cage-built "
                                  f"morphology {list(finger.link_names)}; build it with robot: "
                                  f"{{finger: {{...}}}}, {{fingers: [...]}} (the same prefixes) "
                                  f"or {{gripper: {{...}}}}")
        links = np.array([model.link_names.index(name) for name in finger.link_names])
        contacts = np.concatenate([np.flatnonzero(model.contact_link == link)
                                   for link in links])
        if parameters is None:
            low, high = FABRICATION_LIMITS
            parameters = [Parameter(name, (), default, lower=low, upper=high, unit="m",
                                    scale=default, doc=_DOCS[name.split(".")[0]])
                          for name, default in zip(finger.parameter_names,
                                                   finger.parameter_defaults, strict=True)]
        self._theta = list(parameters)
        rest = self._design(self.finger, self._rest_parameters())
        rows = {"link.mass": links, "link.com": links, "link.inertia": links,
                "joint.origin": links, "contact.point": contacts}
        self.rows = {name: rows[name] for name in rows if name in rest}
        wrapped = inner.design_space()
        self.base = {name: wrapped[name].default_array() for name in self.rows}
        self._check_rest_shape(rest)
        self._space = DesignSpace([*self._theta,
                                   *(p for p in wrapped if p.name not in self.rows)])
        self._linearized = None

    def _check_rest_shape(self, rest: dict) -> None:
        """CageDesignError unless the model's links are the morphology at θ's defaults
        (``rest``, its design there)."""
        for name, value in rest.items():
            model_value = self.base[name][self.rows[name]]
            if model_value.shape != value.shape or not np.allclose(model_value, value,
                                                                   rtol=1e-9, atol=1e-12):
                raise CageDesignError(
                    f"the robot's links {list(self.finger.link_names)} are not the cage-built "
                    f"finger at its rest shape ({name} differs); build them with robot: "
                    f"{{finger: {{...}}}} (or {{fingers: [...]}}) and leave their masses, "
                    f"joints and contacts as it makes them")

    def design_space(self) -> DesignSpace:
        """θ ([m]), then the wrapped parameters θ does not set."""
        return self._space

    def _rest_parameters(self) -> np.ndarray:
        """θ's defaults, flattened in order (m,) [m]."""
        return np.concatenate([p.default_array().reshape(-1) for p in self._theta])

    def cage_parameters(self, design: Mapping) -> np.ndarray:
        """θ (m,) [m] of ``design``: its parameters flattened in order (absent entries:
        defaults)."""
        values = []
        for p in self._theta:
            value = np.asarray(design[p.name], dtype=np.float64) if p.name in design \
                else p.default_array()
            if value.shape not in ((), p.shape):
                raise CageDesignError(f"design parameter {p.name!r} has shape {value.shape}; "
                                      f"it holds {p.shape} values ({p.doc})")
            values.append(np.broadcast_to(value, p.shape).reshape(-1))
        return np.concatenate(values)

    def _linearization(self, theta: np.ndarray, *, jacobian: bool):
        """(design, ∂design/∂θ or None) of the finger at θ, kept for the last θ."""
        key = theta.tobytes()
        kept = self._linearized
        if kept is None or kept[0] != key:
            kept = (key, self._design(self.finger, theta), None)
        if jacobian and kept[2] is None:
            kept = (key, kept[1], self._design_jacobian(self.finger, theta))
        self._linearized = kept
        return kept[1], kept[2]

    def expand(self, design: Mapping) -> dict:
        """The wrapped simulator's design: the finger's rows of ``link.mass``, ``link.com``,
        ``link.inertia``, ``joint.origin`` and ``contact.point`` from θ, the other rows the
        model's, every other entry of ``design`` passed on."""
        finger, _ = self._linearization(self.cage_parameters(design), jacobian=False)
        names = {p.name for p in self._theta}
        out = {k: v for k, v in design.items() if k not in names}
        for name, rows in self.rows.items():
            full = self.base[name].copy()
            full[rows] = finger[name]
            out[name] = full
        return out

    def reduce_gradient(self, g_design: Mapping | None, design: Mapping) -> dict:
        """∂L/∂(this design) from the wrapped ∂L/∂design at ``design`` (the VJP of
        :meth:`expand`; θ's needs θ, the map being nonlinear)."""
        g_design = g_design or {}
        out = {k: v for k, v in g_design.items() if k not in self.rows}
        g_theta = np.zeros(sum(int(np.prod(p.shape)) for p in self._theta))
        given = [name for name in self.rows if g_design.get(name) is not None]
        if given:
            _, jacobian = self._linearization(self.cage_parameters(design), jacobian=True)
        for name in given:
            g_rows = np.asarray(g_design[name])[self.rows[name]].reshape(-1)
            g_theta += jacobian[name].T @ g_rows
        sizes = np.cumsum([0] + [int(np.prod(p.shape)) for p in self._theta])
        out.update({p.name: g_theta[sizes[k]:sizes[k + 1]].reshape(p.shape)
                    for k, p in enumerate(self._theta)})
        return out

    def parameters(self, design: Mapping) -> dict[str, np.ndarray]:
        """The model's parameters at ``design`` (:meth:`RigidSimulator.parameters` of the
        expanded design), what task terms read (the joint origins)."""
        return self.inner.parameters(self.expand(design))

    def parameters_vjp(self, design: Mapping, g_params: dict) -> dict:
        """∂L/∂design from ∂L/∂(the entries of :meth:`parameters`)."""
        expanded = self.expand(design)
        return self.reduce_gradient(self.inner.parameters_vjp(expanded, g_params), design)

    def pull_back(self, g_design, design) -> dict:
        """∂L/∂design from the wrapped ∂L/∂design (:meth:`reduce_gradient`, θ's through
        the cage), what :class:`~codesign.TiedSimulator`'s ``step_vjp`` and
        ``simulate_vjp`` return."""
        return self.reduce_gradient(g_design, design)


_DOCS = {"length": "component length along the finger (x) [m]",
         "width": "station width along the joints' axis (y) [m]",
         "height": "station height (z) [m]: the tip's free end or the last phalanx's weld "
                   "to the tip"}
"""A cage parameter's doc by its kind (the name's first part)."""
