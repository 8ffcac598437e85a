"""sim_rigid's dynamics against Pinocchio's, the measurement behind the sim_rigid README's
"Implementation choice" table.

1. The bundled 4-link arm at a random state: µs per call of the recursive Newton-Euler
   algorithm with its ∂/∂q and ∂/∂q̇ (sim_rigid: forward-mode tangents, compiled and the
   NumPy reference; Pinocchio: ``computeRNEADerivatives``), of the mass matrix (CRBA), and
   of the tangents along every direction the adjoint needs (coordinates, rates, masses,
   inertias, joint origins: Pinocchio has no derivative with respect to joint placements);
   best of ``--rounds`` rounds of ``--calls`` calls.
2. The same arm on a free base (Z-Y-X Euler coordinates; in Pinocchio the composite joint
   PX PY PZ RZ RY RX): the largest error of each library's ∂τ/∂q and ∂τ/∂q̇ against central
   differences of its own inverse dynamics.
3. ms per ``sim_rigid.step.step`` and ``step_vjp`` of the arm at Δt = 0.01 s, and the share
   of a step spent inside compiled code (``sim_rigid._kernels.implicit_step``, one call per
   step, the Newton loop included; the rest is the Python around it: argument packing, the new
   state).

Usage: ``python benchmarks/rigid_dynamics.py [--rounds 5] [--calls 2000]`` (Pinocchio, the
``pin`` wheel, is a dev dependency of the workspace).
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import importlib.util
import pstats
import time
from pathlib import Path

import numpy as np
import pinocchio as pin
import yaml

from sim_rigid import RigidState, dynamics, kernels
from sim_rigid.description import load_description
from sim_rigid.scene import robot_path
from sim_rigid.step import step, step_vjp

ROOT = Path(__file__).resolve().parents[1]


def _reference():
    spec = importlib.util.spec_from_file_location(
        "sim_rigid_reference", ROOT / "packages" / "sim_rigid" / "tests" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def best_us(fn, *, rounds: int, calls: int) -> float:
    """Best of ``rounds`` of ``calls`` calls of ``fn``, µs per call."""
    fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls)
    return 1e6 * min(times)


def _all_directions(model):
    d, n = model.coordinate_count, model.link_count
    blocks = {"q": (d,), "qd": (d,), "link_mass": (n,), "link_inertia": (n, 3, 3),
              "joint_origin": (n, 3)}
    total = sum(int(np.prod(s)) for s in blocks.values())
    tangents, start = {}, 0
    for name, shape in blocks.items():
        size = int(np.prod(shape))
        block = np.zeros((total, size))
        block[start:start + size] = np.eye(size)
        tangents[name] = block.reshape((total,) + shape)
        start += size
    return tangents


def timings(model, reference, *, rounds: int, calls: int) -> None:
    params = model.parameters()
    rng = np.random.default_rng(0)
    d = model.coordinate_count
    q, qd, qdd = (rng.standard_normal(d) for _ in range(3))
    pin_model = reference.pinocchio_model(model)
    data = pin_model.createData()
    jacobian = {"q": np.eye(d), "qd": np.eye(d)}
    everything = _all_directions(model)
    slow = dict(rounds=rounds, calls=max(calls // 100, 3))
    rows = [
        ("RNEA", best_us(lambda: pin.rnea(pin_model, data, q, qd, qdd),
                         rounds=rounds, calls=calls),
         best_us(lambda: kernels.inverse_dynamics_tangents(model, params, q, qd, qdd),
                 rounds=rounds, calls=calls),
         best_us(lambda: dynamics.inverse_dynamics_tangents(model, params, q, qd, qdd),
                 **slow)),
        ("RNEA + ∂/∂q, ∂/∂q̇", best_us(
            lambda: pin.computeRNEADerivatives(pin_model, data, q, qd, qdd),
            rounds=rounds, calls=calls),
         best_us(lambda: kernels.inverse_dynamics_tangents(model, params, q, qd, qdd,
                                                           tangents=jacobian),
                 rounds=rounds, calls=calls),
         best_us(lambda: dynamics.inverse_dynamics_tangents(model, params, q, qd, qdd,
                                                            tangents=jacobian), **slow)),
        ("mass matrix (CRBA)", best_us(lambda: pin.crba(pin_model, data, q),
                                       rounds=rounds, calls=calls),
         best_us(lambda: kernels.mass_matrix(model, params, q), rounds=rounds, calls=calls),
         best_us(lambda: dynamics.mass_matrix(model, params, q), **slow)),
        (f"RNEA + all {len(everything['q'])} adjoint directions", float("nan"),
         best_us(lambda: kernels.inverse_dynamics_tangents(model, params, q, qd, qdd,
                                                           tangents=everything),
                 rounds=rounds, calls=calls),
         best_us(lambda: dynamics.inverse_dynamics_tangents(model, params, q, qd, qdd,
                                                            tangents=everything), **slow)),
    ]
    print(f"| call | Pinocchio {pin.__version__} µs | sim_rigid numba µs "
          f"| sim_rigid NumPy µs |")
    print("| --- | --- | --- | --- |")
    for name, *values in rows:
        print(f"| {name} | " + " | ".join("-" if np.isnan(v) else f"{v:.1f}" for v in values)
              + " |")


def free_base_derivative_errors(reference) -> None:
    description = yaml.safe_load(robot_path("arm4").read_text())
    floating = copy.deepcopy(description)
    floating["joints"][0] = {"name": "base", "type": "free", "parent": "world",
                             "child": "link1", "origin": [0, 0, 0.5]}
    model = load_description(floating)
    rng = np.random.default_rng(1)
    d = model.coordinate_count
    q, qd, qdd = 0.5 * rng.standard_normal(d), rng.standard_normal(d), rng.standard_normal(d)
    params = model.parameters()
    pin_model = reference.pinocchio_model(model)
    data = pin_model.createData()
    h = 1e-6

    def central(fn, x):
        return np.array([(fn(x + h * e) - fn(x - h * e)) / (2 * h) for e in np.eye(d)]).T

    ours_q = kernels.inverse_dynamics_tangents(model, params, q, qd, qdd,
                                               tangents={"q": np.eye(d)})[1:].T
    ours_v = kernels.inverse_dynamics_tangents(model, params, q, qd, qdd,
                                               tangents={"qd": np.eye(d)})[1:].T
    fd_q = central(lambda x: kernels.inverse_dynamics_tangents(model, params, x, qd, qdd)[0], q)
    fd_v = central(lambda x: kernels.inverse_dynamics_tangents(model, params, q, x, qdd)[0], qd)
    pin_q, pin_v, _ = pin.computeRNEADerivatives(pin_model, data, q, qd, qdd)
    pin_fd_q = central(lambda x: pin.rnea(pin_model, data, x, qd, qdd), q)
    pin_fd_v = central(lambda x: pin.rnea(pin_model, data, q, x, qdd), qd)
    print("\nfree base (composite joint in Pinocchio): largest |analytic - central difference|")
    print(f"  sim_rigid  ∂τ/∂q {np.abs(ours_q - fd_q).max():.1e}  ∂τ/∂q̇ "
          f"{np.abs(ours_v - fd_v).max():.1e}")
    print(f"  Pinocchio  ∂τ/∂q {np.abs(pin_q - pin_fd_q).max():.1e}  ∂τ/∂q̇ "
          f"{np.abs(pin_v - pin_fd_v).max():.1e}  (|τ| up to {np.abs(pin_fd_q).max():.1f})")


def step_timings(*, rounds: int, calls: int) -> None:
    model = load_description(robot_path("arm4"))
    params = model.parameters()
    state = RigidState(model.joint_rest, np.linspace(-1, 1, 4), model.joint_rest,
                       np.zeros(4), np.asarray(3, dtype=np.int64))
    action = np.array([0.3, -0.2, 0.1, 0.05])
    calls = max(calls // 10, 3)
    forward = best_us(lambda: step(model, state, action, params, 0.01), rounds=rounds,
                      calls=calls)
    backward = best_us(lambda: step_vjp(model, state, action, params, 0.01, state),
                       rounds=rounds, calls=calls)
    print(f"\narm4, Δt 0.01 s (BDF2): step {forward / 1e3:.3f} ms, step_vjp "
          f"{backward / 1e3:.3f} ms")
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(calls):
        step(model, state, action, params, 0.01)
    profile.disable()
    stats = pstats.Stats(profile).stats
    total = sum(t for (_, _, t, _, _) in stats.values())
    inside = sum(t for (file, _, name), (_, _, t, _, _) in stats.items()
                 if file.endswith("_kernels.py") and name == "implicit_step")
    print(f"share of a step inside compiled code (cProfile): {inside / total:.0%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    reference = _reference()
    timings(load_description(robot_path("arm4")), reference, rounds=args.rounds,
            calls=args.calls)
    free_base_derivative_errors(reference)
    step_timings(rounds=args.rounds, calls=args.calls)


if __name__ == "__main__":
    main()
