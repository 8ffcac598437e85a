"""step_vjp against central finite differences over rollouts of 1, 10, 100 and 1000 steps,
both solvers and both schemes, with damping, compliance, friction and active joint
limits."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.testing import gradcheck
from codesign.tree import tree_vdot
from sim_pbd import PBDState
from sim_pbd.kinematics import joint_positions
from sim_pbd.options import KERNELS, SCHEMES
from sim_pbd.step import step, step_vjp

# Finite-difference steps per input (fourth-order stencil): large enough that the step's
# round-off (amplified by the projections: ~1e-13 of a loss near 1, the positions' round-off
# over the substep in the velocities) stays far below 1e-6 of small derivatives, small
# enough for the inertias (down to 2e-4 kg m² here) and compliances (1e-4; a step of 1e-7
# left derivatives near 0.5 with round-off errors of 1e-6).
EPS = {"link_inertia": 1e-6, "joint_compliance": 1e-6}
FIELDS = ("link_x", "link_q", "link_v", "link_w")


def _check(model, state, action, *, steps, directions=2, seed=0, eps=None, **options):
    params = {k: np.array(v, dtype=np.float64) for k, v in model.parameters().items()}
    params["joint_damping"] = params["joint_damping"] + 0.3
    params["joint_compliance"] = params["joint_compliance"] + 1e-4
    trajectory = [state]
    for _ in range(steps):
        trajectory.append(step(model, trajectory[-1], action, params, 0.01, **options))
    final = trajectory.pop()
    rng = np.random.default_rng(seed)
    weights = PBDState(*(rng.standard_normal(np.shape(getattr(final, f))) for f in FIELDS))

    def loss(inputs):
        current = inputs["state"]
        merged = params | {k: v for k, v in inputs.items() if k in params}
        for _ in range(steps):
            current = step(model, current, inputs["action"], merged, 0.01, **options)
        return tree_vdot(current, weights)

    g_state, g_action, g_params = weights, np.zeros_like(action), {k: 0.0 for k in params}
    for before in reversed(trajectory):
        g_state, g_a, g_p = step_vjp(model, before, action, params, 0.01, g_state, **options)
        g_action = g_action + g_a
        g_params = {k: g_params[k] + g_p[k] for k in params}
    inputs = {"state": state, "action": action} | params
    grads = {"state": g_state, "action": g_action} | g_params
    for group in inputs:
        gradcheck(loss, inputs, grads, eps=(EPS | (eps or {})).get(group, 1e-4),
                  relative_step=False,
                  groups=[group], directions=directions, seed=seed).assert_ok()


def _moving(models, model, seed=0):
    rng = np.random.default_rng(seed)
    state = models.state_at(model, rng.uniform(-1.0, 1.0, model.joint_count),
                            rng.standard_normal(model.joint_count))
    return state, rng.standard_normal(model.joint_count)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("solver", ["gauss_seidel", "jacobi"])
def test_one_step(any_model, models, solver, kernels, scheme):
    state, action = _moving(models, any_model)
    _check(any_model, state, action, steps=1, substeps=2, iterations=2, solver=solver,
           kernels=kernels, scheme=scheme)


def test_state_off_the_unit_sphere_and_the_joints(models):
    model = models.chain_3d()
    state, action = _moving(models, model, seed=3)
    rng = np.random.default_rng(4)
    state = PBDState(*(getattr(state, f) + 0.01 * rng.standard_normal(getattr(state, f).shape)
                       for f in FIELDS))
    state = PBDState(state.link_x, 1.3 * state.link_q, state.link_v, state.link_w)
    _check(model, state, action, steps=1, substeps=2, iterations=1)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("solver", ["gauss_seidel", "jacobi"])
@pytest.mark.parametrize("name", ["chain_3d", "prismatic_chain"])
def test_ten_steps(models, name, solver, scheme):
    model = getattr(models, name)()
    state, action = _moving(models, model, seed=1)
    # second order, chain_3d: a step of 1e-4 in the state leaves 1e-6 of round-off in a
    # small angular-velocity derivative (2e-2) over 10 steps; 3e-4 and 1e-3 agree to 1e-9
    _check(model, state, action, steps=10, substeps=2, iterations=1, solver=solver,
           scheme=scheme, eps={"state": 3e-4} if scheme == "second_order" else None)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("solver", ["gauss_seidel", "jacobi"])
def test_hundred_steps(models, solver, scheme):
    model = models.chain(2)
    state, action = _moving(models, model, seed=2)
    _check(model, state, 0.2 * action, steps=100, substeps=1, iterations=1, solver=solver,
           directions=1, scheme=scheme)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("solver", ["gauss_seidel", "jacobi"])
def test_thousand_steps(models, solver, scheme):
    # 10 s of a damped double pendulum swinging under its torques, through the compiled
    # kernels (a few seconds; the NumPy reference would take minutes)
    model = models.chain(2)
    state, action = _moving(models, model, seed=5)
    _check(model, state, 0.2 * action, steps=1000, substeps=1, iterations=1, solver=solver,
           directions=1, scheme=scheme)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize(("solver", "steps"), [
    ("gauss_seidel", 1), ("gauss_seidel", 10), ("gauss_seidel", 100), ("jacobi", 1)])
def test_against_an_active_limit(models, solver, steps, scheme):
    # pushed into its upper limit by the torque, the first joint stays on it every substep
    # (the limit is active throughout, away from the kink where it engages) while the second
    # swings. Over several steps averaged Jacobi passes move the joint across its limit and
    # back within a substep, switching the limit on and off: a kink at every perturbation,
    # so Jacobi is checked over one step.
    model = models.chain(2, upper=0.3)
    model = models.make_model(
        [(model.link_mass[i], model.link_inertia[i]) for i in range(2)],
        [dict(type="revolute", parent=-1, child=0, child_x=model.joint_child_x[0], upper=0.3),
         dict(type="revolute", parent=0, child=1, parent_x=model.joint_parent_x[1],
              child_x=model.joint_child_x[1])])
    state = models.state_at(model, [0.31, 0.2], [0.0, 1.5])
    # averaged Jacobi needs more passes to hold the limit against the push
    options = {"substeps": 1 if steps == 100 else 2, "iterations": 1, "solver": solver,
               "scheme": scheme}
    if solver == "jacobi":
        options["iterations"] = 10
    action = np.array([5.0, 0.1])
    _check(model, state, action, steps=steps, directions=1, seed=1, **options)
    final = state
    for _ in range(steps):
        final = step(model, final, action, model.parameters(), 0.01, **options)
    # still on the limit (a Jacobi step starting 0.01 rad past it ends 0.004 rad past it)
    assert joint_positions(model, model.parameters(), final)[0][0] == pytest.approx(0.3,
                                                                                    abs=5e-3)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_sliding_friction(models, scheme):
    base = models.pendulum()
    model = models.make_model([(base.link_mass[0], base.link_inertia[0])],
                              [dict(type="revolute", parent=-1, child=0, friction=0.2,
                                    child_x=base.joint_child_x[0])])
    state = models.state_at(model, [0.4], [2.0])
    _check(model, state, np.array([0.5]), steps=5, substeps=2, iterations=1, scheme=scheme)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("steps", [1, 10])
def test_stiff_damping(models, steps, scheme):
    # b h w of 15 and 29 (60 N m s/rad, 5 ms substeps). First order: both joints' damping
    # impulses capped at k w = 1.5, so they depend on the inverse inertias and not on the
    # damping; second order: the midpoint dampers in the projection loop, uncapped
    model = models.chain(2, damping=60.0)
    state, action = _moving(models, model, seed=6)
    _check(model, state, action, steps=steps, substeps=2, iterations=2, scheme=scheme)
