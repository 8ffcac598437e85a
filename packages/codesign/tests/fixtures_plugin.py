"""A fake codesign plugin for the run/CLI tests: small simulators, a term, an optimizer.

Registers ``spring`` (the damped spring-mass of ``systems.py`` with a render hook),
``linear`` (x' = A x + B u, no render hook), the term ``final_position`` and the optimizer
``test_gd`` (projected gradient descent with a fixed step, deterministic). ``HANG_AFTER``
lets a subprocess freeze mid-run so a test can kill it at a known point.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

from codesign import UnstableTimeStepError
from codesign.hookspecs import hookimpl
from codesign.optim.base import IterationInfo, OptimizeResult
from codesign.options import Options, option, options_factory
from codesign.plugins import get_plugin_manager

CODESIGN_API = (1, 1)
HERE = Path(__file__).parent
SPRING_YAML = HERE / "fixtures_spring.yaml"

HANG_AFTER = 0
"""When positive, the spring's ``initial_state`` sleeps on call number HANG_AFTER + 1."""
INTERRUPT_AFTER = 0
"""When positive, the spring's ``initial_state`` raises KeyboardInterrupt on that call + 1."""
_calls = 0


def reset_calls() -> None:
    """Restart the rollout count that HANG_AFTER and INTERRUPT_AFTER refer to."""
    global _calls
    _calls = 0


def _load_systems():
    name = "_codesign_tests_systems"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / "systems.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


systems = _load_systems()


class RenderedSpring(systems.SpringMass):
    """The spring-mass with a render hook and a time-step check (symplectic Euler)."""

    def initial_state(self, design):
        global _calls
        _calls += 1
        if HANG_AFTER and _calls > HANG_AFTER:
            time.sleep(3600)
        if INTERRUPT_AFTER and _calls > INTERRUPT_AFTER:
            raise KeyboardInterrupt
        return super().initial_state(design)

    def check_time_step(self, design, dt):
        """Symplectic Euler on q'' = -(k/m) q is stable for dt < 2 / ω, ω = √(k/m)."""
        limit = 2.0 / np.sqrt(float(design["stiffness"]) / float(design["mass"]))
        if dt >= limit:
            raise UnstableTimeStepError(f"dt = {dt} s is unstable for the spring; the largest "
                                        f"stable dt is {limit:.4g} s")

    def render(self, state, design, *, width, height, action=None):
        frame = np.full((height, width, 3), 30, dtype=np.uint8)
        column = int(np.clip((state.q[0] + 2.0) / 4.0 * (width - 1), 0, width - 5))
        frame[height // 3: 2 * height // 3, column: column + 4] = 255
        return frame


@dataclasses.dataclass(frozen=True, kw_only=True)
class SpringOptions(Options):
    """The spring's options, declared once."""

    q0: float = option(1.0, unit="m", lower=-2.0, upper=2.0, doc="start position")
    v0: float = option(0.0, unit="m/s", doc="start velocity")


@options_factory(SpringOptions)
def make_spring(options: SpringOptions) -> RenderedSpring:
    """Factory of ``spring``: the options of :class:`SpringOptions` as keywords."""
    return RenderedSpring(q0=options.q0, v0=options.v0)


def make_linear(*, size: int = 2, x0: list[float] | None = None) -> systems.LinearSystem:
    """Factory of ``linear``: a lightly damped ``size``-state system with one input."""
    a = -0.1 * np.eye(size)
    b = np.ones((size, 1))
    return systems.LinearSystem(a, b, x0=x0)


class FinalPosition:
    """Final term ``(q_T - target)²`` on the spring's position [m²]."""

    kind = "final"

    def __init__(self, *, simulator, target: float = 0.0):
        self.target = target

    def value(self, state, action, design, control_step):
        return float((state.q[0] - self.target) ** 2)

    def grad(self, state, action, design, control_step):
        g_q = np.array([2.0 * (state.q[0] - self.target)])
        return systems.SpringState(q=g_q, v=np.zeros(1)), None, None


class ReportedPosition(FinalPosition):
    """FinalPosition with a report: ``report.txt`` (the folder it was configured from and
    the replayed final position) and that position in the summary; ``fail`` raises."""

    def __init__(self, *, simulator, base_dir, target: float = 0.0, fail: bool = False):
        super().__init__(simulator=simulator, target=target)
        self.base_dir, self.fail = base_dir, fail

    def report(self, folder, context):
        if self.fail:
            raise RuntimeError("report broke")
        final_q = float(context.states[-1].q[0])
        (folder / "report.txt").write_text(f"{self.base_dir}\n{final_q}\n")
        return {"final_q": final_q, "stiffness": float(context.design["stiffness"]),
                "initial_stiffness": float(context.initial_design["stiffness"]),
                "steps": len(context.actions)}


class GradientDescent:
    """Projected gradient descent with a fixed step; one evaluation per iteration."""

    def __init__(self, *, learning_rate: float = 0.1):
        if not learning_rate > 0:
            raise ValueError(f"learning_rate must be positive, got {learning_rate}")
        self.learning_rate = learning_rate

    def minimize(self, function, x0, *, max_iterations, callback=None):
        x = np.clip(np.asarray(x0, float), function.lower, function.upper)
        best_x, best_loss, evaluations = x, np.inf, 0
        for iteration in range(1, max_iterations + 1):
            evaluation = function.evaluate(x, grad=True)
            evaluations += 1
            if evaluation.loss < best_loss:
                best_x, best_loss = x, evaluation.loss
            if callback is not None:
                callback(IterationInfo(iteration, x, evaluation.loss, evaluations,
                                       float(np.linalg.norm(evaluation.grad))))
            x = np.clip(x - self.learning_rate * evaluation.grad, function.lower, function.upper)
        return OptimizeResult(best_x, float(best_loss), max_iterations, evaluations, False,
                              "iteration limit reached")


@hookimpl
def codesign_register_simulators(register):
    register("spring", make_spring, description="damped spring-mass (test)")
    register("linear", make_linear, description="linear system without render (test)")


@hookimpl
def codesign_register_terms(register):
    register("final_position", FinalPosition, description="(q_T - target)² (test)")
    register("reported_position", ReportedPosition,
             description="(q_T - target)² with a report (test)")


@hookimpl
def codesign_register_optimizers(register):
    register("test_gd", GradientDescent, description="fixed-step gradient descent (test)")


@hookimpl
def codesign_register_examples(register):
    register("spring_demo", str(SPRING_YAML), description="spring co-design (test)",
             default=True)


def plugin_manager():
    """A plugin manager holding the core and this fake plugin, no entry points."""
    manager = get_plugin_manager(load_entry_points=False)
    manager.register(sys.modules[__name__], name="fake")
    return manager
