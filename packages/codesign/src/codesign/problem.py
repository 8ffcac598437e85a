"""A rollout as an optimization problem over a flat vector of free parameters.

The free parameters are some simulator design parameters (``design.<name>``) and, optionally,
every controller weight (``controller.<name>``); the rest of the design stays fixed. Vectors
are in scaled coordinates (value / scale) so parameters in different units take comparable
steps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from typing import Any

import numpy as np

from .design import DesignError, DesignSpace
from .executors import map_batch
from .optim.base import Evaluation
from .options import bounded_repr, is_number
from .rollout import Rollout
from .terms import Constraint, Objective

__all__ = ["DesignOverrideError", "RolloutProblem", "VectorProblem", "apply_overrides",
           "evaluate_point"]


class DesignOverrideError(DesignError):
    """A design-section override its parameter refuses.

    Attributes:
        name: the parameter.
        key: the override at fault (``init``, ``lower``, ``upper`` or ``scale``), or None
            for the entry as a whole.
        detail: what is wrong, without the location (the message starts with it).
    """

    def __init__(self, name: str, key: str | None, detail: str):
        self.name, self.key, self.detail = name, key, detail
        super().__init__(f"design.{name}{'' if key is None else f'.{key}'}: {detail}")


def apply_overrides(space: DesignSpace, overrides: Mapping[str, Mapping[str, Any]]) -> DesignSpace:
    """Return ``space`` with per-parameter ``init``/``lower``/``upper``/``scale`` overrides.

    ``overrides`` maps parameter names to dicts with any of those keys (YAML's design section).
    Raises :class:`DesignOverrideError` naming the parameter and the key at fault.
    """
    allowed = ("init", "lower", "upper", "scale")
    for name, changes in overrides.items():
        unknown = [key for key in changes if key not in allowed]
        if unknown:
            raise DesignOverrideError(name, None, f"unknown key(s) {bounded_repr(unknown)}; "
                                                  f"allowed: {', '.join(allowed)}")
        physical = space[name]
        given = {key: _override_value(physical, key, value) for key, value in changes.items()}
        low = given.get("lower", physical.lower_array())
        high = given.get("upper", physical.upper_array())
        for side, where, outside in (("lower", "below", low < physical.lower_array()),
                                     ("upper", "above", high > physical.upper_array())):
            if np.any(outside):
                raise DesignOverrideError(
                    name, side, f"{side} bound {bounded_repr(changes[side])} lies {where} the "
                                f"parameter's physical bound "
                                f"{bounded_repr(getattr(physical, side))}; a design section may "
                                "narrow bounds, never widen them")
        bound_key = "lower" if "lower" in given else "upper"
        crossed = np.flatnonzero(np.broadcast_to(low > high, physical.shape))
        if crossed.size:
            raise DesignOverrideError(name, bound_key, f"lower bound {np.ravel(low)[crossed[0]]:g} "
                                      f"exceeds upper bound {np.ravel(high)[crossed[0]]:g}"
                                      f"{_entry(crossed, physical.shape)}; swap them")
        init = given.get("init", physical.default_array())
        outside = np.flatnonzero((init < low) | (init > high))
        if outside.size:
            first = outside[0]
            raise DesignOverrideError(
                name, "init" if "init" in given else bound_key,
                f"{'init' if 'init' in given else 'the default init'} "
                f"{np.ravel(init)[first]:g}{_entry(outside, physical.shape)} lies outside "
                f"[lower, upper] = [{np.ravel(low)[first]:g}, {np.ravel(high)[first]:g}]; "
                "move init inside the bounds")
        space = space.with_parameter(name, **{("default" if k == "init" else k): v
                                              for k, v in changes.items()})
    return space


def _override_value(physical, key: str, value: Any) -> Any:
    """An override as the parameter will hold it (an array of its shape, or the scale);
    DesignOverrideError if it does not fit."""
    if key == "scale":
        if not (is_number(value) and np.isfinite(value) and value > 0):
            raise DesignOverrideError(physical.name, key, f"scale must be a positive number, "
                                                          f"got {bounded_repr(value)}")
        return value
    try:
        array = np.broadcast_to(np.asarray(value, dtype=np.float64), physical.shape)
    except (ValueError, TypeError):
        raise DesignOverrideError(physical.name, key, f"{bounded_repr(value)} is not a number "
                                  f"or a nested list of numbers of shape {physical.shape}"
                                  ) from None
    if np.any(np.isnan(array)) or (key == "init" and not np.all(np.isfinite(array))):
        raise DesignOverrideError(physical.name, key, f"{key} must be "
                                  f"{'finite' if key == 'init' else 'a number (inf: no bound)'}"
                                  f", got {bounded_repr(value)}")
    return array


def _entry(indices: np.ndarray, shape: tuple[int, ...]) -> str:
    """`` (entry 3; 5 of 10 entries)`` for the flat ``indices`` at fault, ``""`` for a scalar."""
    size = int(np.prod(shape, dtype=np.int64))
    return "" if shape == () else f" (entry {indices[0]}; {indices.size} of {size} entries)"


def evaluate_point(problem, x: np.ndarray, grad: bool) -> Evaluation:
    """``problem.evaluate(x, grad=grad)`` as a module-level function executors can pickle."""
    return problem.evaluate(x, grad=grad)


class VectorProblem:
    """What a problem over a flat, scaled vector of the parameters in ``self.space`` shares:
    its starting point, its description, and pickling without its executor."""

    space: DesignSpace
    executor: Executor | None

    def __getstate__(self):
        # Workers receive the problem without the executor that sent it there: pools and
        # distributed clients hold locks and connections that do not pickle.
        return dict(self.__dict__, executor=None)

    def _map(self, function, jobs: Sequence[tuple]) -> list:
        """``[function(self, *job) for job in jobs]`` in job order, through the executor when
        one is set (which receives this problem once, :func:`codesign.executors.map_batch`)."""
        return map_batch(self.executor, function, self, jobs)

    def x0(self) -> np.ndarray:
        """The starting vector (scaled): every parameter's (overridden) default."""
        return self.space.flatten(self.space.defaults(), scaled=True)

    def describe(self, x: np.ndarray) -> dict[str, Any]:
        """The free parameters at ``x`` as ``name -> list`` (for history and summaries)."""
        return {name: np.asarray(v).tolist()
                for name, v in self.space.unflatten(x, scaled=True).items()}


class RolloutProblem(VectorProblem):
    """Loss and constraints of a rollout as a function of a flat parameter vector.

    Args:
        rollout: the :class:`Rollout` to evaluate.
        objective: what to minimize.
        constraints: rollout constraints ``lower <= f <= upper``.
        free: simulator design parameters to optimize (names); default none.
        overrides: ``name -> {init, lower, upper, scale}`` for simulator parameters.
        optimize_controller: whether controller weights are free.
        weights: initial controller weights (default: the controller's initial values).
        executor: runs batches of evaluations (``concurrent.futures`` interface); default
            in the calling thread.
    """

    def __init__(
        self,
        rollout: Rollout,
        objective: Objective,
        constraints: Sequence[Constraint] = (),
        *,
        free: Sequence[str] = (),
        overrides: Mapping[str, Mapping[str, Any]] | None = None,
        optimize_controller: bool = True,
        weights: Mapping[str, Any] | None = None,
        executor: Executor | None = None,
    ):
        self.rollout, self.objective = rollout, objective
        self.constraints = tuple(constraints)
        self.design_space = apply_overrides(rollout.simulator.design_space(), overrides or {})
        self.base_design = self.design_space.defaults()
        self.free = list(free)
        free_space = self.design_space.subset(self.free).prefixed("design")
        weight_space = rollout.controller.parameter_space()
        if weights is not None:
            weight_space = DesignSpace(p.replace(default=np.asarray(weights[p.name]))
                                       for p in weight_space)
        self.weight_space = weight_space
        self.optimize_controller = optimize_controller
        parts = [free_space]
        if optimize_controller:
            parts.append(weight_space.prefixed("controller"))
        self.space = DesignSpace().concat(*parts)
        self.size = self.space.size
        self.lower, self.upper = self.space.bounds(scaled=True)
        self.constraint_lower = np.array([c.lower for c in self.constraints], dtype=float)
        self.constraint_upper = np.array([c.upper for c in self.constraints], dtype=float)
        self.executor = executor

    def split(self, x: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Map a scaled vector to ``(design, controller weights)``."""
        values = self.space.unflatten(x, scaled=True)
        design = dict(self.base_design)
        weights = self.weight_space.defaults()
        for name, value in values.items():
            group, _, rest = name.partition(".")
            (design if group == "design" else weights)[rest] = value
        return self.design_space.check(design), weights

    def join_gradient(self, design_grad: Mapping[str, Any],
                      weight_grad: Mapping[str, Any]) -> np.ndarray:
        """Flatten gradients of design and weights into the scaled vector's gradient."""
        grads = {f"design.{n}": design_grad[n] for n in self.free}
        if self.optimize_controller:
            grads.update({f"controller.{n}": g for n, g in weight_grad.items()})
        return self.space.flatten_gradient(grads, scaled=True)

    def evaluate(self, x: np.ndarray, *, grad: bool = True) -> Evaluation:
        """Loss, gradient, constraint values and Jacobian at ``x`` (one forward + reverse)."""
        design, weights = self.split(np.asarray(x, dtype=float))
        if not grad:
            result = self.rollout.forward(design, weights, self.objective, self.constraints)
            return Evaluation(loss=float(result.values[0]), constraints=result.values[1:])
        result, gradients = self.rollout.value_and_grad(design, weights, self.objective,
                                                        self.constraints)
        flat = [self.join_gradient(g.design, g.weights) for g in gradients]
        jac = np.array(flat[1:]).reshape(len(self.constraints), self.size)
        return Evaluation(loss=float(result.values[0]), grad=flat[0],
                          constraints=result.values[1:], constraint_jac=jac)

    def evaluate_many(self, xs: Sequence[np.ndarray], *, grad: bool = False) -> list[Evaluation]:
        """Evaluate a batch; through the executor when one is set."""
        return self._map(evaluate_point, [(np.asarray(x), grad) for x in xs])
