"""System identification: fit design parameters (and initial states, and actions) to recorded
trajectories.

Single shooting through the simulator: each recording's actions are replayed open loop
(an :class:`~codesign.OpenLoopController` whose table is the recording), and a measurement
map (an :class:`~codesign.Observer`) compares the simulated states with the recorded
measurements through :class:`~codesign.TrajectoryTracking`. The loss
is the mean over recordings, so it can be minimized full-batch by any optimizer or
stochastically over minibatches of recordings with Adam. It is a sum of squares, so the
problem also gives its residuals and their Jacobian (forward differences) for a
Gauss-Newton method (:class:`~codesign.optim.TrustRegionLeastSquares`, ``least_squares``).

With ``fit_initial_state`` every recording gets its own offset added to the simulator's
initial state, flattened from the state tree's float leaves; its gradient is the rollout's
``Gradient.initial_state``.

With ``fit_actions`` every recording's action table becomes unknowns too, starting at the
recorded actions: the inverse problem of which actions made the recorded motion (e.g. the
torques that hold a robot still at measured poses: gravity compensation). Its gradient is
the open-loop controller's, ``Gradient.weights["table"]``. Actions may act weakly and
unevenly on what is measured (a force moves a mass m by Δt² F / m in a step of Δt; a torque
changes the rate of a joint of inertia I by Δt τ / I, and a robot's inertias span orders of
magnitude): unscaled, their gradient can fall below a quasi-Newton method's tolerance long
before the actions are found, and the loss's curvature in them can be badly conditioned.
``action_scale`` (a number, or one per action component) is the actions' unit in the
vector, a diagonal preconditioner: best near 1 / √(∂²L/∂a²) per component, the action that
changes the loss by one unit (for joint torques, ∝ the joint's effective inertia / Δt). On
Baxter's gravity compensation (sim_pbd's ``baxter_gravity_compensation`` example) per-joint
scales cut L-BFGS-B's iterations fourfold (sim_pbd README, "Torque estimation").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from typing import Any

import numpy as np

from .backend import array_module_of, to_backend, to_host
from .controllers import OpenLoopController
from .design import DesignSpace, Parameter
from .optim.adam import Adam
from .optim.base import Callback, Evaluation, IterationInfo, Optimizer, OptimizeResult
from .optim.guarded import minimize_guarded
from .optim.least_squares import forward_jacobian
from .problem import VectorProblem, apply_overrides
from .rollout import Rollout
from .terms import Objective, TrajectoryTracking
from .tree import is_float_leaf, tree_leaves, tree_map, tree_to_host

__all__ = ["Recording", "IdentificationProblem", "IdentificationResult", "identify"]


@dataclasses.dataclass(frozen=True)
class Recording:
    """One recorded trajectory.

    Attributes:
        actions: the actions applied at control steps 0 … T-1, shape (T, action_size).
        measurements: what the measurement map read at states 0 … T, shape
            (T + 1, measurement size); NaN marks missing frames (whole rows) or points.
        name: a label used in error messages.
        initial_state: the simulator state the recording starts from (a state tree: a
            robot measured at rest at a pose), or ``None`` to start from the simulator's
            ``initial_state(design)``. A given start does not depend on the design, so the
            fit's gradient does not flow through it (fit parameters that leave it alone).
    """

    actions: np.ndarray
    measurements: np.ndarray
    name: str = ""
    initial_state: Any = None

    def __post_init__(self):
        label = f"recording {self.name!r}" if self.name else "recording"
        actions = np.asarray(self.actions, dtype=np.float64)
        measurements = np.asarray(self.measurements, dtype=np.float64)
        if actions.ndim != 2 or actions.shape[0] < 1:
            raise ValueError(f"{label}: actions must have shape (steps, action_size) with "
                             f"steps >= 1, got {actions.shape}")
        if measurements.ndim != 2 or measurements.shape[0] != actions.shape[0] + 1:
            raise ValueError(
                f"{label}: measurements must have shape (steps + 1, measurement size) = "
                f"({actions.shape[0] + 1}, m): one row per state, the initial one included; "
                f"got {measurements.shape}")
        if not np.all(np.isfinite(actions)):
            raise ValueError(f"{label}: actions contain NaN or inf; fill or drop those steps")
        if np.any(np.isinf(measurements)):
            raise ValueError(f"{label}: measurements contain inf; mark missing values with NaN")
        if np.all(np.isnan(measurements)):
            raise ValueError(f"{label}: every measurement is NaN, nothing to fit")
        object.__setattr__(self, "actions", actions)
        object.__setattr__(self, "measurements", measurements)

    @property
    def steps(self) -> int:
        """Number of control steps T."""
        return int(self.actions.shape[0])


def _flatten_like(template, tree) -> np.ndarray:
    """The float leaves of ``tree`` (shaped like ``template``) as one host vector.

    Leaves missing from ``tree`` (``None`` or an absent tree) count as zero.
    """
    parts: list[np.ndarray] = []

    def collect(leaf, other=None):
        if is_float_leaf(leaf):
            value = np.zeros(np.shape(leaf)) if other is None else to_host(other)
            parts.append(np.asarray(value, dtype=np.float64).reshape(-1))
        return leaf

    tree_map(collect, template, *(() if tree is None else (tree,)))
    return np.concatenate(parts) if parts else np.zeros(0)


def _unflatten_like(template, vector: np.ndarray):
    """A tree shaped like ``template``: float leaves from ``vector``, other leaves zero."""
    offset = 0

    def fill(leaf):
        nonlocal offset
        xp = array_module_of(leaf)
        if not is_float_leaf(leaf):
            return xp.zeros_like(leaf)
        size = int(np.prod(np.shape(leaf), dtype=np.int64))
        chunk = vector[offset : offset + size].reshape(np.shape(leaf)).astype(leaf.dtype)
        offset += size
        return to_backend(chunk, xp)

    return tree_map(fill, template)


def _rollout_inputs(problem: IdentificationProblem, x: np.ndarray,
                    index: int) -> tuple[dict, dict, dict]:
    """Recording ``index``'s rollout at ``x``: the design, the controller weights (its action
    table) and the start (``initial_offset``, ``initial_state`` keywords)."""
    start = {"initial_offset": problem.initial_offset(x, index),
             "initial_state": problem.recordings[index].initial_state}
    return problem.design(x), {"table": problem.actions(x, index)}, start


def _evaluate_recording(problem: IdentificationProblem, x: np.ndarray, index: int,
                        grad: bool) -> tuple[float, np.ndarray | None, dict | None]:
    """Tracking loss of one recording and its gradients: the design part (scaled) and the
    recording's own unknowns (``initial_state.<index>``, ``actions.<index>``: name ->
    gradient in their values)."""
    design, weights, start = _rollout_inputs(problem, x, index)
    rollout, objective = problem.rollouts[index], problem.objectives[index]
    if not grad:
        result = rollout.forward(design, weights, objective, **start)
        return float(result.values[0]), None, None
    result, (gradient,) = rollout.value_and_grad(design, weights, objective, **start)
    design_grad = problem.free_space.flatten_gradient(
        {f"design.{n}": gradient.design[n] for n in problem.free}, scaled=True)
    own = {}
    if problem.fit_initial_state:
        own[f"initial_state.{index}"] = _flatten_like(problem.state_template,
                                                      gradient.initial_state)
    if problem.fit_actions:
        own[f"actions.{index}"] = gradient.weights["table"]
    return float(result.values[0]), design_grad, own


def _recording_residuals(problem: IdentificationProblem, x: np.ndarray,
                         index: int) -> np.ndarray:
    """Recording ``index``'s weighted tracking residuals at ``x`` (its rollout recorded)."""
    design, weights, start = _rollout_inputs(problem, x, index)
    result = problem.rollouts[index].forward(design, weights, problem.objectives[index],
                                             record=True, **start)
    return problem.trackings[index].residuals(result.states, design)


class IdentificationProblem(VectorProblem):
    """Mean tracking loss over recordings as an :class:`~codesign.optim.ObjectiveFunction`.

    The vector holds the free design parameters (scaled, as in
    :class:`~codesign.problem.RolloutProblem`), then, with ``fit_initial_state``, one
    initial-state offset per recording (``initial_state.<i>``: the state's float leaves,
    flattened, unscaled), then, with ``fit_actions``, one action table per recording
    (``actions.<i>``, shape (T_i, action_size), unbounded, row by row divided by
    ``action_scale``).

    Args:
        simulator: the simulator to shoot through.
        recordings: one or more :class:`Recording`; their lengths may differ.
        measurement: observer mapping simulated states to measurements.
        free: design parameters to fit (names); the others stay at their defaults.
        overrides: ``name -> {init, lower, upper, scale}`` for design parameters.
        fit_initial_state: also fit an initial-state offset per recording.
        fit_actions: also fit every recording's actions, starting at the recorded ones.
        action_scale: the size of an action in the vector (e.g. [N m]), one number or one
            per action component (action_size,); the vector holds actions /
            ``action_scale`` (a preconditioner: see the module docstring).
        substeps: simulator substeps per recorded control step.
        dt: substep length [s]; a control step lasts ``substeps * dt``.
        checkpoint_every: checkpoint interval of the reverse sweep (default ⌈√N⌉).
        executor: runs the recordings' rollouts (``concurrent.futures`` interface); default
            in the calling thread.
    """

    def __init__(
        self,
        simulator,
        recordings: Sequence[Recording],
        *,
        measurement,
        free: Sequence[str] = (),
        overrides: Mapping[str, Mapping[str, Any]] | None = None,
        fit_initial_state: bool = False,
        fit_actions: bool = False,
        action_scale: float | Sequence[float] = 1.0,
        substeps: int = 1,
        dt: float,
        checkpoint_every: int | None = None,
        executor: Executor | None = None,
    ):
        self.recordings = list(recordings)
        if not self.recordings:
            raise ValueError("identification needs at least one recording")
        for i, recording in enumerate(self.recordings):
            if not isinstance(recording, Recording):
                raise TypeError(f"recording {i}: expected a codesign.identification.Recording, "
                                f"got {type(recording).__name__}")
            label = f"recording {i} ({recording.name!r})" if recording.name else f"recording {i}"
            if recording.actions.shape[1] != simulator.action_size:
                raise ValueError(f"{label}: actions have {recording.actions.shape[1]} column(s) "
                                 f"but the simulator takes {simulator.action_size}")
            if recording.measurements.shape[1] != measurement.size:
                raise ValueError(f"{label}: measurements have {recording.measurements.shape[1]} "
                                 f"column(s) but the measurement map gives {measurement.size}")
        if not free and not fit_initial_state and not fit_actions:
            raise ValueError("nothing to identify: name design parameters in `free` or set "
                             "fit_initial_state=True or fit_actions=True")
        scale = np.asarray(action_scale, dtype=np.float64)
        if scale.shape not in ((), (simulator.action_size,)) or not np.all(
                np.isfinite(scale) & (scale > 0)):
            raise ValueError(f"action_scale must be a positive number or "
                             f"{simulator.action_size} positive numbers (one per action "
                             f"component), got {action_scale!r}")
        self.simulator, self.measurement = simulator, measurement
        self.free = list(free)
        self.fit_initial_state = bool(fit_initial_state)
        self.fit_actions = bool(fit_actions)
        self.action_scale = np.broadcast_to(scale, (simulator.action_size,)).copy()
        self.design_space = apply_overrides(simulator.design_space(), overrides or {})
        self.base_design = self.design_space.defaults()
        self.free_space = self.design_space.subset(self.free).prefixed("design")
        self.state_template = tree_to_host(simulator.initial_state(self.base_design))
        self.state_size = int(sum(np.size(leaf) for leaf in tree_leaves(self.state_template)
                                  if is_float_leaf(leaf)))
        offsets = DesignSpace(
            Parameter(f"initial_state.{i}", (self.state_size,), 0.0,
                      doc=f"initial-state offset of recording {i}")
            for i in range(len(self.recordings)) if self.fit_initial_state)
        actions = DesignSpace(
            Parameter(f"actions.{i}", r.actions.shape, r.actions,
                      doc=f"action table of recording {i}")
            for i, r in enumerate(self.recordings) if self.fit_actions)
        self.recording_space = offsets.concat(actions)
        self.space = self.free_space.concat(self.recording_space)
        self.size = self.space.size
        # per entry of the vector, the value of one unit beyond the space's own scaling:
        # the action scale per component (a Parameter's scale is one number)
        self._unit = np.concatenate(
            [np.ones(self.free_space.size + offsets.size),
             *(np.tile(self.action_scale, r.steps) for r in self.recordings
               if self.fit_actions)])
        self.lower, self.upper = (bound / self._unit for bound in self.space.bounds(scaled=True))
        self.constraint_lower = np.zeros(0)
        self.constraint_upper = np.zeros(0)
        self.rollouts = [
            Rollout(simulator,
                    controller=OpenLoopController(observation_size=0,
                                                 action_size=simulator.action_size,
                                                 control_steps=r.steps),
                    steps=r.steps, substeps=substeps, dt=dt, checkpoint_every=checkpoint_every)
            for r in self.recordings]
        self.trackings = [TrajectoryTracking(observer=measurement, targets=r.measurements)
                          for r in self.recordings]
        self.objectives = [Objective.of(tracking) for tracking in self.trackings]
        self.executor = executor

    def _values(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """Every unknown's value at ``x``: ``design.<name>``, ``initial_state.<i>``,
        ``actions.<i>``."""
        return self.space.unflatten(np.asarray(x, dtype=float) * self._unit, scaled=True)

    def x0(self) -> np.ndarray:
        """The starting vector: the design's (overridden) defaults, zero offsets, the
        recorded actions."""
        return self.space.flatten(self.space.defaults(), scaled=True) / self._unit

    def describe(self, x: np.ndarray) -> dict[str, Any]:
        """Every unknown at ``x`` as ``name -> list`` (for history and summaries)."""
        return {name: np.asarray(v).tolist() for name, v in self._values(x).items()}

    def design(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """The full simulator design at ``x`` (fixed parameters at their defaults)."""
        values = self._values(x)
        return self.design_space.check(
            {**self.base_design, **{n: values[f"design.{n}"] for n in self.free}})

    def initial_offset(self, x: np.ndarray, index: int):
        """Recording ``index``'s initial-state offset at ``x`` as a state tree, or ``None``."""
        if not self.fit_initial_state:
            return None
        return _unflatten_like(self.state_template, self._values(x)[f"initial_state.{index}"])

    def actions(self, x: np.ndarray, index: int) -> np.ndarray:
        """Recording ``index``'s action table at ``x``, shape (T, action_size): the fitted
        one with ``fit_actions``, else the recorded one."""
        if not self.fit_actions:
            return self.recordings[index].actions
        return self._values(x)[f"actions.{index}"]

    def _combine(self, parts, indices: Sequence[int], grad: bool) -> Evaluation:
        # Summed in recording order (the executor returns parts in job order, never in
        # completion order), so the mean is bit-identical on every executor.
        count = len(indices)
        loss = sum(p[0] for p in parts) / count
        if not grad:
            return Evaluation(loss=loss)
        design_grad = sum(p[1] for p in parts) / count
        # recordings outside a minibatch leave their own unknowns' gradient at zero
        own = {name: g / count for part in parts for name, g in part[2].items()}
        vector = np.concatenate([np.asarray(design_grad, dtype=float),
                                 self.recording_space.flatten_gradient(own)]) * self._unit
        return Evaluation(loss=loss, grad=vector, constraint_jac=np.zeros((0, self.size)))

    def _run(self, xs: Sequence[np.ndarray], indices: Sequence[int], grad: bool) -> list:
        results = self._map(_evaluate_recording, [(np.asarray(x, dtype=float), int(i), grad)
                                                  for x in xs for i in indices])
        n = len(indices)
        return [results[k * n : (k + 1) * n] for k in range(len(xs))]

    def evaluate_subset(self, x: np.ndarray, indices: Sequence[int], *,
                        grad: bool = True) -> Evaluation:
        """Mean loss (and gradient) over the recordings ``indices`` only (a minibatch)."""
        indices = [int(i) for i in indices]
        if not indices or min(indices) < 0 or max(indices) >= len(self.recordings):
            raise IndexError(f"recording indices must lie in [0, {len(self.recordings)}), "
                             f"got {indices}")
        return self._combine(self._run([x], indices, grad)[0], indices, grad)

    def evaluate(self, x: np.ndarray, *, grad: bool = True) -> Evaluation:
        """Mean tracking loss over all recordings, with its gradient when ``grad``."""
        return self.evaluate_subset(x, range(len(self.recordings)), grad=grad)

    def evaluate_many(self, xs: Sequence[np.ndarray], *, grad: bool = False) -> list[Evaluation]:
        """Evaluate several points; every (point, recording) rollout is one executor job."""
        indices = list(range(len(self.recordings)))
        return [self._combine(parts, indices, grad) for parts in self._run(xs, indices, grad)]

    def residuals(self, x: np.ndarray) -> np.ndarray:
        """Every recording's weighted tracking residuals at ``x``, one after another and
        divided by √(recordings), so that their squares sum to :meth:`evaluate`'s loss;
        each recording's rollout is one executor job."""
        parts = self._map(_recording_residuals, [(np.asarray(x, dtype=float), i)
                                                 for i in range(len(self.recordings))])
        return np.concatenate(parts) / np.sqrt(len(self.recordings))

    def jacobian(self, x: np.ndarray, at: np.ndarray, *, residuals=None) -> np.ndarray:
        """∂(residuals)/∂x at ``x`` whose residuals are ``at``, shape (residuals, size), by
        forward differences (:func:`codesign.optim.least_squares.forward_jacobian`) of
        ``residuals`` (default :meth:`residuals`; a guard passes its own): one set of
        rollouts per entry of ``x``, so for a few dozen unknowns, not action tables."""
        return forward_jacobian(residuals or self.residuals, x, at, lower=self.lower,
                                upper=self.upper)


@dataclasses.dataclass(frozen=True)
class IdentificationResult:
    """What :func:`identify` found.

    Attributes:
        design: the full simulator design with the fitted parameters.
        initial_offsets: per recording, the fitted initial-state offset (a state tree), or
            ``None`` without ``fit_initial_state``.
        actions: per recording, the fitted action table (T, action_size), or ``None``
            without ``fit_actions``.
        loss: mean tracking loss over all recordings at the result.
        x: the result as the problem's vector.
        optimization: the optimizer's account (history, iterations, evaluations).
    """

    design: dict[str, np.ndarray]
    initial_offsets: list | None
    actions: list[np.ndarray] | None
    loss: float
    x: np.ndarray
    optimization: OptimizeResult


def _stochastic_adam(problem: IdentificationProblem, adam: Adam, x0: np.ndarray, *,
                     max_iterations: int, batch_size: int, seed: int,
                     callback: Callback | None) -> OptimizeResult:
    rng = np.random.default_rng(seed)
    x = np.clip(np.asarray(x0, dtype=float), problem.lower, problem.upper)
    state = adam.init_state(x.size)
    history: list[float] = []
    message = "reached max_iterations"
    for iteration in range(1, max_iterations + 1):
        batch = np.sort(rng.choice(len(problem.recordings), size=batch_size, replace=False))
        evaluation = problem.evaluate_subset(x, batch, grad=True)
        history.append(evaluation.loss)
        info = IterationInfo(iteration=iteration, x=x, loss=evaluation.loss,
                             evaluations=iteration,
                             grad_norm=float(np.linalg.norm(evaluation.grad)))
        x, state = adam.step(x, evaluation.grad, state, problem.lower, problem.upper)
        if callback is not None and callback(info):
            message = "stopped by callback"
            break
    loss = problem.evaluate(x, grad=False).loss
    return OptimizeResult(x=x, loss=loss, iterations=len(history), evaluations=len(history) + 1,
                          converged=False, message=message, history=history)


def identify(
    problem: IdentificationProblem,
    *,
    optimizer: Optimizer,
    max_iterations: int,
    batch_size: int | None = None,
    seed: int = 0,
    callback: Callback | None = None,
    x0: np.ndarray | None = None,
) -> IdentificationResult:
    """Fit the problem's free parameters (and offsets, and actions) to its recordings.

    Args:
        problem: the identification problem.
        optimizer: any optimizer for full-batch fitting; an :class:`~codesign.optim.Adam`
            for stochastic fitting.
        max_iterations: optimizer iterations (minibatch steps when stochastic).
        batch_size: ``None`` (or at least the number of recordings) fits full-batch;
            otherwise each Adam step uses ``batch_size`` recordings drawn without
            replacement from ``numpy.random.default_rng(seed)``. Stochastic fitting returns
            the last iterate (minibatch losses are not comparable across batches) with its
            full-batch loss.
        seed: seed of the minibatch sampler.
        callback: called after every iteration; returning True stops.
        x0: starting vector (default ``problem.x0()``).
    """
    x0 = problem.x0() if x0 is None else np.asarray(x0, dtype=float)
    count = len(problem.recordings)
    if batch_size is None or batch_size >= count:
        # a trial point whose rollouts fail is penalized instead of ending the fit
        result = minimize_guarded(optimizer, problem, x0, max_iterations=max_iterations,
                                  callback=callback)
    else:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not isinstance(optimizer, Adam):
            raise ValueError(f"stochastic identification (batch_size={batch_size} < {count} "
                             f"recordings) steps with Adam; got {type(optimizer).__name__}. "
                             "Pass codesign.optim.Adam(...) or leave batch_size unset")
        result = _stochastic_adam(problem, optimizer, x0, max_iterations=max_iterations,
                                  batch_size=batch_size, seed=seed, callback=callback)
    offsets = ([problem.initial_offset(result.x, i) for i in range(count)]
               if problem.fit_initial_state else None)
    actions = ([problem.actions(result.x, i) for i in range(count)]
               if problem.fit_actions else None)
    return IdentificationResult(design=problem.design(result.x), initial_offsets=offsets,
                                actions=actions, loss=float(result.loss), x=result.x,
                                optimization=result)
