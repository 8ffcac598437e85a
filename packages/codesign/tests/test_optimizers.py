"""Optimizers on closed-form problems and on rollouts of the test systems."""

from __future__ import annotations

import numpy as np
import pytest
from systems import LinearState, LinearSystem, SpringMass

from codesign import (
    ActionL2,
    Constraint,
    Objective,
    OpenLoopController,
    Rollout,
    SimulationError,
    StateFieldObserver,
    TrajectoryTracking,
)
from codesign.optim import (
    CMAES,
    LBFGSB,
    SLSQP,
    Adam,
    EvaluateOnly,
    Evaluation,
    EvaluationCache,
    ObjectiveFunction,
    OnePlusOneES,
    Optimizer,
    TrustConstr,
)
from codesign.plugins import get_registry
from codesign.problem import RolloutProblem


class Quadratic:
    """f = ½ (x − c)ᵀ A (x − c) with box bounds and optional linear constraints G x."""

    def __init__(self, center, *, lower=-np.inf, upper=np.inf, G=None, c_lower=(), c_upper=()):
        self.center = np.asarray(center, float)
        self.size = self.center.size
        self.A = np.diag(np.arange(1.0, self.size + 1)) + 0.3
        self.lower = np.broadcast_to(np.asarray(lower, float), self.size).copy()
        self.upper = np.broadcast_to(np.asarray(upper, float), self.size).copy()
        self.G = np.zeros((0, self.size)) if G is None else np.asarray(G, float)
        self.constraint_lower = np.asarray(c_lower, float)
        self.constraint_upper = np.asarray(c_upper, float)
        self.calls = 0

    def evaluate(self, x, *, grad=True):
        self.calls += 1
        r = np.asarray(x, float) - self.center
        return Evaluation(loss=0.5 * r @ self.A @ r, grad=self.A @ r if grad else None,
                          constraints=self.G @ x, constraint_jac=self.G)

    def evaluate_many(self, xs, *, grad=False):
        return [self.evaluate(x, grad=grad) for x in xs]


class Rosenbrock(Quadratic):
    """f = Σ 100 (x_{i+1} − x_i²)² + (1 − x_i)², minimum 0 at (1, …, 1)."""

    def evaluate(self, x, *, grad=True):
        self.calls += 1
        x = np.asarray(x, float)
        a, b = x[:-1], x[1:]
        loss = float(np.sum(100 * (b - a**2) ** 2 + (1 - a) ** 2))
        g = np.zeros_like(x)
        g[:-1] += -400 * a * (b - a**2) - 2 * (1 - a)
        g[1:] += 200 * (b - a**2)
        return Evaluation(loss=loss, grad=g if grad else None)


def all_optimizers():
    return {
        "adam": (Adam(learning_rate=0.05, learning_rate_decay=0.995), 600),
        "lbfgsb": (LBFGSB(), 100),
        "slsqp": (SLSQP(), 100),
        "trust_constr": (TrustConstr(), 200),
        "cmaes": (CMAES(sigma0=0.5, seed=3), 200),
        "one_plus_one_es": (OnePlusOneES(sigma0=0.5, seed=3), 1500),
    }


TOLERANCE = {"adam": 1e-4, "lbfgsb": 1e-7, "slsqp": 1e-7, "trust_constr": 1e-6,
             "cmaes": 1e-6, "one_plus_one_es": 1e-4}


@pytest.mark.parametrize("name", list(all_optimizers()))
def test_quadratic_reaches_the_optimum(name):
    optimizer, iterations = all_optimizers()[name]
    assert isinstance(optimizer, Optimizer)
    problem = Quadratic([0.5, -1.0, 2.0])
    assert isinstance(problem, ObjectiveFunction)
    result = optimizer.minimize(problem, np.zeros(3), max_iterations=iterations)
    np.testing.assert_allclose(result.x, problem.center, atol=TOLERANCE[name])
    assert result.loss < 1e-6
    assert len(result.history) == result.iterations <= iterations


@pytest.mark.parametrize("name", list(all_optimizers()))
def test_bounds_hold_at_every_iterate_and_the_result(name):
    optimizer, iterations = all_optimizers()[name]
    problem = Quadratic([0.5, -1.0, 2.0], lower=[-2.0, -0.5, -2.0], upper=[2.0, 2.0, 1.0])
    seen = []
    result = optimizer.minimize(problem, np.zeros(3), max_iterations=iterations,
                                callback=lambda info: seen.append(info.x.copy()))
    assert seen and len(seen) == result.iterations
    for x in [*seen, result.x]:
        assert np.all(x >= problem.lower) and np.all(x <= problem.upper)
    # Active bounds on entries 1 and 2; the free entry adjusts to them (A is dense).
    assert abs(result.x[1] + 0.5) < 1e-3 and abs(result.x[2] - 1.0) < 1e-3


@pytest.mark.parametrize("name, tolerance", [("lbfgsb", 1e-6), ("slsqp", 1e-4),
                                             ("trust_constr", 1e-4), ("cmaes", 1e-5)])
def test_rosenbrock(name, tolerance):
    optimizer = {"lbfgsb": LBFGSB(), "slsqp": SLSQP(), "trust_constr": TrustConstr(),
                 "cmaes": CMAES(sigma0=0.3, seed=1)}[name]
    problem = Rosenbrock(np.zeros(2))
    result = optimizer.minimize(problem, np.array([-1.2, 1.0]), max_iterations=500)
    np.testing.assert_allclose(result.x, [1.0, 1.0], atol=tolerance)


def test_callback_stops_and_max_iterations_holds():
    for optimizer, _ in all_optimizers().values():
        problem = Quadratic([3.0, 1.0])
        calls = []
        result = optimizer.minimize(problem, np.zeros(2), max_iterations=50,
                                    callback=lambda info, calls=calls: calls.append(info) or
                                    info.iteration == 2)
        assert [c.iteration for c in calls] == [1, 2], type(optimizer).__name__
        assert result.iterations == 2 and result.message == "stopped by callback"
        assert not result.converged
        capped = optimizer.minimize(Quadratic([3.0, 1.0]), np.zeros(2), max_iterations=3)
        assert capped.iterations <= 3


@pytest.mark.filterwarnings("ignore:delta_grad == 0.0")
def test_scipy_adapters_evaluate_each_point_once():
    """Loss, gradient, constraints and Jacobian come from one evaluate() per distinct x."""
    seen = []

    class Recorder(Quadratic):
        def evaluate(self, x, *, grad=True):
            assert grad
            seen.append(np.asarray(x).tobytes())
            return super().evaluate(x, grad=grad)

    G = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, -1.0]])
    for optimizer in (SLSQP(), TrustConstr()):
        seen.clear()
        problem = Recorder([1.0, 2.0, 3.0], G=G, c_lower=[1.0, -np.inf], c_upper=[1.0, 0.0])
        result = optimizer.minimize(problem, np.zeros(3), max_iterations=100)
        assert len(seen) == len(set(seen)) == result.evaluations
        np.testing.assert_allclose(G[0] @ result.x, 1.0, atol=1e-8)
        assert G[1] @ result.x <= 1e-8


def test_evaluation_cache_keeps_recent_points():
    problem = Quadratic([1.0])
    cache = EvaluationCache(problem, size=2)
    for x in ([0.0], [1.0], [0.0], [2.0], [0.0]):
        cache.loss(np.array(x))
        cache.grad(np.array(x))
    assert problem.calls == cache.evaluations == 3


# -- rollouts of the test systems --------------------------------------------------------------

def spring_tracking_problem(true_stiffness=7.0, steps=40, dt=0.05):
    """Recover SpringMass stiffness from the position trajectory it produced."""
    sim = SpringMass()
    controller = OpenLoopController(observation_size=0, action_size=1, control_steps=steps)
    rollout = Rollout(sim, controller=controller, steps=steps, dt=dt)
    actions = {"table": np.sin(np.linspace(0, 6, steps))[:, None]}
    truth = dict(sim.design_space().defaults(), stiffness=np.array(true_stiffness))
    states = rollout.forward(truth, actions, Objective(()), record=True).states
    observer = StateFieldObserver(simulator=sim, fields=["q"])
    targets = np.array([s.q for s in states])
    objective = Objective.of(TrajectoryTracking(observer=observer, targets=targets))
    return RolloutProblem(rollout, objective, free=["stiffness"], optimize_controller=False,
                          weights=actions, overrides={"stiffness": {"init": 3.0, "scale": 4.0}})


@pytest.mark.parametrize("name", list(all_optimizers()))
def test_recovers_spring_stiffness_through_a_rollout(name):
    optimizer, iterations = {
        "adam": (Adam(learning_rate=0.2, learning_rate_decay=0.95), 100),
        "cmaes": (CMAES(sigma0=0.3, seed=0), 60),
        "one_plus_one_es": (OnePlusOneES(sigma0=0.3, seed=0), 150),
    }.get(name, all_optimizers()[name])
    problem = spring_tracking_problem()
    result = optimizer.minimize(problem, problem.x0(), max_iterations=iterations)
    stiffness = problem.split(result.x)[0]["stiffness"]
    assert abs(stiffness - 7.0) < (1e-4 if name in ("adam", "one_plus_one_es") else 1e-5), name


class FinalCoordinate:
    """Final term: entry ``index`` of the linear system's final state x_T."""

    kind = "final"

    def __init__(self, index):
        self.index = index

    def value(self, state, action, design, control_step):
        return float(state.x[self.index])

    def grad(self, state, action, design, control_step):
        g = np.zeros_like(state.x)
        g[self.index] = 1.0
        return LinearState(x=g), None, None


def double_integrator_problem(steps=12, dt=0.1):
    """min Σ u² subject to x_T = 1 (equality) and v_T <= 0.1 (inequality, active)."""
    sim = LinearSystem([[0.0, 1.0], [0.0, 0.0]], [[0.0], [1.0]])
    controller = OpenLoopController(observation_size=0, action_size=1, control_steps=steps)
    rollout = Rollout(sim, controller=controller, steps=steps, dt=dt)
    constraints = [Constraint(Objective.of(FinalCoordinate(0)), 1.0, 1.0, name="position"),
                   Constraint(Objective.of(FinalCoordinate(1)), upper=0.1, name="velocity")]
    problem = RolloutProblem(rollout, Objective.of(ActionL2()), constraints)
    # Closed form: x_T = G u is linear; with both constraints active the minimizer of ‖u‖²
    # is the minimum-norm solution of G u = (1, 0.1).
    G = np.zeros((2, steps))
    for t in range(steps):
        u = np.zeros((steps, 1))
        u[t] = 1.0
        final = rollout.forward(sim.design_space().defaults(), {"table": u}, Objective(()))
        G[:, t] = final.final_state.x
    u_star = np.linalg.lstsq(G, [1.0, 0.1], rcond=None)[0]
    return problem, u_star


@pytest.mark.filterwarnings("ignore:delta_grad == 0.0")  # trust-constr's BFGS on linear c(x)
@pytest.mark.parametrize("optimizer", [SLSQP(), TrustConstr()], ids=["slsqp", "trust_constr"])
def test_constrained_rollout_satisfies_equality_and_inequality(optimizer):
    problem, u_star = double_integrator_problem()
    result = optimizer.minimize(problem, problem.x0(), max_iterations=200)
    evaluation = problem.evaluate(result.x)
    position, velocity = evaluation.constraints
    assert abs(position - 1.0) < 1e-6
    assert velocity <= 0.1 + 1e-6
    np.testing.assert_allclose(result.x, u_star, atol=1e-5)
    assert result.converged, result.message


@pytest.mark.parametrize("name", list(all_optimizers()))
def test_same_evaluations_give_identical_runs(name):
    runs = []
    for _ in range(2):
        optimizer, _ = all_optimizers()[name]
        problem = spring_tracking_problem(steps=20)
        history = []
        result = optimizer.minimize(problem, problem.x0(), max_iterations=15,
                                    callback=lambda info, h=history: h.append(
                                        (info.x.tobytes(), info.loss)))
        runs.append((history, result.x.tobytes(), result.history))
    assert runs[0] == runs[1]


class Fragile(Quadratic):
    """A quadratic whose "simulation" fails left of x₀ = −0.2, as a contact-rich rollout
    fails Newton's method at some wide samples."""

    def evaluate(self, x, *, grad=True):
        if x[0] < -0.2:
            raise SimulationError(f"step 3: Newton's method did not converge at x {x[0]:.3g}")
        return super().evaluate(x, grad=grad)


@pytest.mark.parametrize("optimizer", [CMAES(sigma0=0.5, seed=3), OnePlusOneES(sigma0=0.5,
                                                                               seed=3)])
def test_evolution_strategies_rank_failed_simulations_last(optimizer):
    problem = Fragile([1.0, 2.0])
    result = optimizer.minimize(problem, np.zeros(2), max_iterations=150)
    np.testing.assert_allclose(result.x, [1.0, 2.0], atol=1e-3)
    assert "failed in the simulation and were ranked last" in result.message
    assert "Newton's method did not converge" in result.message
    with pytest.raises(FloatingPointError, match="a failed simulation: step 3"):
        CMAES(sigma0=0.5, seed=3).minimize(Fragile([1.0, 2.0]), np.full(2, -5.0),
                                           max_iterations=3)


def test_seed_changes_the_evolution_strategies():
    for cls in (CMAES, OnePlusOneES):
        xs = [cls(seed=s).minimize(Quadratic([1.0, 2.0]), np.zeros(2), max_iterations=3).x
              for s in (0, 1)]
        assert not np.array_equal(*xs)


def test_bad_options_are_rejected():
    with pytest.raises(ValueError, match="learning_rate"):
        Adam(learning_rate=0.0)
    with pytest.raises(ValueError, match="population_size"):
        CMAES(population_size=1)
    with pytest.raises(ValueError, match="sigma0"):
        OnePlusOneES(sigma0=-1.0)
    with pytest.raises(ValueError, match="max_iterations"):
        LBFGSB().minimize(Quadratic([1.0]), np.zeros(1), max_iterations=0)
    with pytest.raises(FloatingPointError, match="gradient"):
        class Broken(Quadratic):
            def evaluate(self, x, *, grad=True):
                return Evaluation(loss=0.0, grad=np.full(self.size, np.nan))
        Adam().minimize(Broken([1.0]), np.zeros(1), max_iterations=2)


def test_optimizers_are_registered_by_name():
    registry = get_registry()
    expected = {"adam": Adam, "lbfgsb": LBFGSB, "slsqp": SLSQP, "trust_constr": TrustConstr,
                "cmaes": CMAES, "one_plus_one_es": OnePlusOneES, "none": EvaluateOnly}
    for name, cls in expected.items():
        factory = registry.get("optimizers", name).factory
        assert factory is cls
        assert isinstance(factory(), Optimizer)


def test_evaluate_only_returns_the_start_after_one_evaluation_without_callbacks():
    problem = Quadratic([1.0, -2.0])
    calls = []
    result = EvaluateOnly().minimize(problem, np.array([0.5, 0.5]), max_iterations=50,
                                     callback=calls.append)
    assert problem.calls == 1 and calls == []
    assert result.x == pytest.approx([0.5, 0.5]) and result.iterations == 0
    assert result.loss == pytest.approx(problem.evaluate(np.array([0.5, 0.5])).loss)
    assert result.evaluations == 1 and result.converged and result.history == (result.loss,)
    assert EvaluateOnly.needs_parameters is False
