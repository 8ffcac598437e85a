"""Design spaces: named differentiable parameters θ with shapes, bounds, units and scales.

A *design* is a plain ``dict`` mapping dotted parameter names (``"material.youngs_modulus"``)
to float arrays. A :class:`DesignSpace` knows every parameter's shape and bounds, checks
designs, and converts between designs and the flat vectors optimizers work on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

__all__ = ["DesignError", "Parameter", "DesignSpace", "design_replace", "fields_from_design"]


class DesignError(ValueError):
    """A design value has the wrong name, shape or a non-finite entry."""


@dataclasses.dataclass(frozen=True)
class Parameter:
    """One named design parameter.

    Attributes:
        name: dotted name, e.g. ``"material.youngs_modulus"``.
        shape: array shape; ``()`` for a scalar, ``(n,)`` for a per-entity field.
        default: default value, broadcast to ``shape``.
        lower, upper: elementwise bounds (``-inf``/``inf`` for none), broadcast to ``shape``.
        unit: SI unit for documentation, e.g. ``"Pa"``.
        scale: typical magnitude; optimizers see ``value / scale`` so that parameters in
            different units get comparable steps.
        entity: what one entry of the first axis describes (``"particle"``, ``"joint"``),
            or ``None`` for a global parameter.
        doc: one line saying what the parameter is.
    """

    name: str
    shape: tuple[int, ...]
    default: Any
    lower: Any = -np.inf
    upper: Any = np.inf
    unit: str = ""
    scale: float = 1.0
    entity: str | None = None
    doc: str = ""

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(n) for n in self.shape))
        if not self.name:
            raise DesignError("a parameter needs a non-empty name")
        if not (np.isfinite(self.scale) and self.scale > 0):
            raise DesignError(f"parameter {self.name!r}: scale must be a positive number")
        lower, upper = self.lower_array(), self.upper_array()
        if np.any(lower > upper):
            raise DesignError(f"parameter {self.name!r}: lower bound exceeds upper bound")
        default = self.default_array()
        if not np.all(np.isfinite(default)):
            raise DesignError(f"parameter {self.name!r}: default must be finite")

    @property
    def size(self) -> int:
        """Number of scalar entries."""
        return int(np.prod(self.shape, dtype=np.int64))

    def _broadcast(self, value, what: str) -> np.ndarray:
        try:
            return np.broadcast_to(np.asarray(value, dtype=np.float64), self.shape).copy()
        except ValueError as exc:
            raise DesignError(
                f"parameter {self.name!r}: {what} of shape {np.shape(value)} does not fit "
                f"shape {self.shape}"
            ) from exc

    def default_array(self) -> np.ndarray:
        """The default value as a float64 array of ``shape``."""
        return self._broadcast(self.default, "default")

    def lower_array(self) -> np.ndarray:
        """Lower bounds as a float64 array of ``shape``."""
        return self._broadcast(self.lower, "lower bound")

    def upper_array(self) -> np.ndarray:
        """Upper bounds as a float64 array of ``shape``."""
        return self._broadcast(self.upper, "upper bound")

    def check(self, value) -> np.ndarray:
        """Return ``value`` as an array of this parameter's shape, or raise DesignError."""
        array = np.asarray(value)
        if array.shape != self.shape:
            if array.size == 1 and self.shape == ():
                array = array.reshape(())
            else:
                raise DesignError(
                    f"parameter {self.name!r} must have shape {self.shape}, got {array.shape}"
                )
        if not np.issubdtype(array.dtype, np.number):
            raise DesignError(f"parameter {self.name!r} must be numeric, got {array.dtype}")
        if not np.all(np.isfinite(array)):
            bad = int(np.size(array) - np.count_nonzero(np.isfinite(array)))
            raise DesignError(
                f"parameter {self.name!r} has {bad} non-finite value(s) (NaN or inf); "
                "check the initial value and bounds in the design section"
            )
        return array

    def replace(self, **changes) -> Parameter:
        """A copy with some fields changed (for YAML overrides of default and bounds)."""
        return dataclasses.replace(self, **changes)


class DesignSpace:
    """An ordered collection of :class:`Parameter` with flatten/unflatten for optimizers."""

    def __init__(self, parameters: Iterable[Parameter] = ()):
        self._parameters: dict[str, Parameter] = {}
        for parameter in parameters:
            if parameter.name in self._parameters:
                raise DesignError(f"parameter {parameter.name!r} is defined twice")
            self._parameters[parameter.name] = parameter

    def __iter__(self) -> Iterator[Parameter]:
        return iter(self._parameters.values())

    def __len__(self) -> int:
        return len(self._parameters)

    def __contains__(self, name: object) -> bool:
        return name in self._parameters

    def __getitem__(self, name: str) -> Parameter:
        try:
            return self._parameters[name]
        except KeyError:
            raise DesignError(
                f"unknown design parameter {name!r}; known: {', '.join(self.names) or 'none'}"
            ) from None

    def __repr__(self) -> str:
        return f"DesignSpace({', '.join(f'{p.name}{list(p.shape)}' for p in self)})"

    @property
    def names(self) -> list[str]:
        """Parameter names in order."""
        return list(self._parameters)

    @property
    def size(self) -> int:
        """Total number of scalar entries."""
        return sum(p.size for p in self)

    def defaults(self) -> dict[str, np.ndarray]:
        """A design holding every parameter's default."""
        return {p.name: p.default_array() for p in self}

    def check(self, design: Mapping[str, Any], *, partial: bool = False) -> dict[str, np.ndarray]:
        """Validate names, shapes and finiteness; return a new design dict.

        With ``partial=True`` missing parameters are allowed (gradients may omit zeros).
        """
        unknown = [name for name in design if name not in self._parameters]
        if unknown:
            raise DesignError(
                f"unknown design parameter(s) {', '.join(map(repr, unknown))}; "
                f"known: {', '.join(self.names) or 'none'}"
            )
        if not partial:
            missing = [name for name in self._parameters if name not in design]
            if missing:
                raise DesignError(f"design lacks parameter(s) {', '.join(map(repr, missing))}")
        return {name: self[name].check(value) for name, value in design.items()}

    def flatten(self, design: Mapping[str, Any], *, scaled: bool = False) -> np.ndarray:
        """Concatenate a design into one float64 vector (divided by scales if ``scaled``)."""
        parts = []
        for p in self:
            value = np.asarray(design[p.name], dtype=np.float64).reshape(-1)
            parts.append(value / p.scale if scaled else value)
        return np.concatenate(parts) if parts else np.zeros(0)

    def unflatten(self, vector, *, scaled: bool = False) -> dict[str, np.ndarray]:
        """Split a flat vector into a design (multiplying by scales if ``scaled``)."""
        vector = np.asarray(vector, dtype=np.float64)
        if vector.shape != (self.size,):
            raise DesignError(f"expected a vector of length {self.size}, got shape {vector.shape}")
        out, offset = {}, 0
        for p in self:
            chunk = vector[offset : offset + p.size].reshape(p.shape)
            out[p.name] = chunk * p.scale if scaled else chunk.copy()
            offset += p.size
        return out

    def flatten_gradient(self, gradient: Mapping[str, Any], *, scaled: bool = False) -> np.ndarray:
        """Flatten a (possibly partial) gradient dict; missing entries count as zero.

        With ``scaled=True`` the result is the gradient with respect to ``value / scale``.
        """
        parts = []
        for p in self:
            g = gradient.get(p.name)
            g = np.zeros(p.size) if g is None else np.asarray(g, dtype=np.float64).reshape(-1)
            parts.append(g * p.scale if scaled else g)
        return np.concatenate(parts) if parts else np.zeros(0)

    def bounds(self, *, scaled: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Flat lower and upper bound vectors."""
        lower = self.flatten({p.name: p.lower_array() for p in self}, scaled=scaled)
        upper = self.flatten({p.name: p.upper_array() for p in self}, scaled=scaled)
        return lower, upper

    def project(self, design: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Clip every parameter to its bounds; returns a new design."""
        return {
            name: np.clip(value, self[name].lower_array(), self[name].upper_array())
            for name, value in design.items()
        }

    def subset(self, names: Iterable[str]) -> DesignSpace:
        """The space restricted to ``names`` (in the given order)."""
        return DesignSpace(self[name] for name in names)

    def prefixed(self, prefix: str) -> DesignSpace:
        """The same parameters renamed ``prefix.name``."""
        return DesignSpace(p.replace(name=f"{prefix}.{p.name}") for p in self)

    def concat(self, *others: DesignSpace) -> DesignSpace:
        """This space followed by ``others``; names must not clash."""
        return DesignSpace([*self, *(p for other in others for p in other)])

    def with_parameter(self, name: str, **changes) -> DesignSpace:
        """A new space where parameter ``name`` has some fields changed."""
        self[name]  # raises a clear error for unknown names
        return DesignSpace(p.replace(**changes) if p.name == name else p for p in self)


def design_replace(design: Mapping[str, Any], path: str, value) -> dict[str, Any]:
    """Return a copy of ``design`` with the entry at ``path`` replaced (Brax ``tree_replace``).

    ``path`` is either a full parameter name (``"links.stiffness"``) or a prefix; with a prefix
    ``value`` must be a mapping whose keys complete the names (``{"stiffness": ...}``).
    """
    out = dict(design)
    if path in design:
        out[path] = value
        return out
    if isinstance(value, Mapping):
        for key, sub in value.items():
            out = design_replace(out, f"{path}.{key}", sub)
        return out
    raise DesignError(f"no design parameter at path {path!r}; known: {', '.join(design)}")


def fields_from_design(fields: Mapping[str, Any], design: Mapping[str, Any],
                       names: Mapping[str, str]) -> dict[str, Any]:
    """A copy of a model's ``fields`` with, for each design parameter ``names`` maps to a
    field (``{"link.mass": "link_mass"}``) and ``design`` holds, the design's value in place
    (float64): the one place a simulator's model values meet the design's.

    Raises ValueError naming the parameter when its value's shape is not the field's.
    """
    out = dict(fields)
    for name, field in names.items():
        if name in design:
            value = np.asarray(design[name], dtype=np.float64)
            if value.shape != np.shape(out[field]):
                raise ValueError(f"design {name!r} must have shape {np.shape(out[field])}, "
                                 f"got {value.shape}")
            out[field] = value
    return out
