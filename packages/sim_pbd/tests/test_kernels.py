"""The compiled kernels (kernels="numba") against the NumPy reference (kernels="numpy"):
forward states and every VJP output equal to round-off for both solvers and both schemes,
with limits, damping, friction, compliance, prismatic joints and a floating base; the
compiled second order's VJP against finite differences; the simulator's ``kernels`` choice;
bad input; the compile notice."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.testing import gradcheck
from codesign.tree import tree_vdot
from sim_pbd import PBDState
from sim_pbd import kernels as compiled
from sim_pbd.kinematics import joint_positions
from sim_pbd.options import SCHEMES
from sim_pbd.simulator import PBDSimulator
from sim_pbd.step import step, step_vjp

FIELDS = ("link_x", "link_q", "link_v", "link_w")
SETTINGS = {"substeps": 3, "iterations": 2}
ROUND_OFF = 1e-11
"""Largest difference accepted, relative to the reference's largest entry (at least 1): a
few steps' round-off, amplified by the projections and, in the gradients, by the inverse
inertias and the 1/h² of the compliances."""


def _limited(models):
    """A double pendulum whose first joint is pushed into its upper limit (0.3 rad)."""
    base = models.chain(2)
    return models.make_model(
        [(base.link_mass[i], base.link_inertia[i]) for i in range(2)],
        [dict(type="revolute", parent=-1, child=0, child_x=base.joint_child_x[0], upper=0.3),
         dict(type="revolute", parent=0, child=1, parent_x=base.joint_parent_x[1],
              child_x=base.joint_child_x[1])])


def _with_friction(models, friction):
    """A pendulum without gravity whose joint has Coulomb friction [N m]."""
    base = models.pendulum()
    return models.make_model([(base.link_mass[0], base.link_inertia[0])],
                             [dict(type="revolute", parent=-1, child=0, friction=friction,
                                   child_x=base.joint_child_x[0])], gravity=(0.0, 0.0, 0.0))


CASES = {
    # (model, joint positions, joint rates, action)
    "3d_chain": lambda m: (m.chain_3d(), [0.4, -0.3, 0.05], [1.0, -0.5, 0.2], [0.3, -0.2, 1.0]),
    "prismatic_chain": lambda m: (m.prismatic_chain(), [0.3, 0.1], [1.0, -0.2], [0.5, 2.0]),
    "limit": lambda m: (_limited(m), [0.31, 0.2], [0.0, 1.5], [5.0, 0.1]),
    "friction_holding": lambda m: (_with_friction(m, 0.5), [0.4], [0.0], [0.1]),
    "friction_sliding": lambda m: (_with_friction(m, 0.2), [0.4], [2.0], [0.5]),
    "stiff_damping": lambda m: (m.chain(2, damping=60.0), [0.4, -0.3], [1.0, -2.0], [0.5, 0.1]),
    "floating_base": lambda m: (m.floating(m.chain_3d()), [0.0, -0.3, 0.05], [0.0, 1.0, 0.2],
                                [-0.2, 1.0]),
}


def _case(models, name):
    model, joint_q, joint_qd, action = CASES[name](models)
    if model.floating_base:
        # forward kinematics places the free root at the origin; set it moving and turning
        state = models.state_at(model, joint_q[1:], joint_qd[1:])
        state = PBDState(state.link_x + 0.1, state.link_q,
                         state.link_v + np.array([0.3, -0.2, 0.5]),
                         state.link_w + np.array([0.4, 0.1, -0.7]))
    else:
        state = models.state_at(model, joint_q, joint_qd)
    params = {k: np.array(v, dtype=np.float64) for k, v in model.parameters().items()}
    params["joint_damping"] = params["joint_damping"] + 0.3
    params["joint_compliance"] = params["joint_compliance"] + 1e-4
    return model, state, np.asarray(action, dtype=np.float64), params


def _assert_round_off(name, value, reference):
    value, reference = np.asarray(value), np.asarray(reference)
    assert value.shape == reference.shape, name
    scale = max(1.0, float(np.abs(reference).max()))
    difference = float(np.abs(value - reference).max())
    assert difference <= ROUND_OFF * scale, f"{name} differs by {difference:.3g} (of {scale:.3g})"


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("solver", ["gauss_seidel", "jacobi"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_equals_the_reference(models, name, solver, scheme):
    model, state, action, params = _case(models, name)
    finals = {}
    for kernels in ("numpy", "numba"):
        current = state
        for _ in range(5):
            current = step(model, current, action, params, 0.01, solver=solver,
                           kernels=kernels, scheme=scheme, **SETTINGS)
        finals[kernels] = current
    for field in FIELDS:
        _assert_round_off(field, getattr(finals["numba"], field),
                          getattr(finals["numpy"], field))


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("solver", ["gauss_seidel", "jacobi"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_vjp_equals_the_reference(models, name, solver, scheme):
    model, state, action, params = _case(models, name)
    rng = np.random.default_rng(1)
    g_next = PBDState(*(rng.standard_normal(np.shape(getattr(state, f))) for f in FIELDS))
    results = {kernels: step_vjp(model, state, action, params, 0.01, g_next, solver=solver,
                                 kernels=kernels, scheme=scheme, **SETTINGS)
               for kernels in ("numpy", "numba")}
    (g_state, g_action, g_params), (ref_state, ref_action, ref_params) = (
        results["numba"], results["numpy"])
    for field in FIELDS:
        _assert_round_off(f"g_state.{field}", getattr(g_state, field), getattr(ref_state, field))
    _assert_round_off("g_action", g_action, ref_action)
    assert set(g_params) == set(ref_params)
    for key in ref_params:
        _assert_round_off(f"g_params[{key!r}]", g_params[key], ref_params[key])


@pytest.mark.parametrize("solver", ["gauss_seidel", "jacobi"])
@pytest.mark.parametrize("name", ["limit", "prismatic_chain", "floating_base"])
def test_the_compiled_second_order_vjp_passes_gradcheck(models, name, solver):
    # with respect to the state, the action and every parameter (damping, compliance and
    # the joint origins included), on the cases' double pendulum held on its limit, the
    # hinge and slider, and the floating base
    model, state, action, params = _case(models, name)
    options = dict(solver=solver, kernels="numba", scheme="second_order", **SETTINGS)
    rng = np.random.default_rng(2)
    weights = PBDState(*(rng.standard_normal(np.shape(getattr(state, f))) for f in FIELDS))

    def split(array):
        # a scalar per link or joint (mass, damping, compliance): each its own leaf, checked
        # on its own, so that no direction cancels its derivatives; the closing velocity
        # passes leave the loss little sensitivity to the compliances, and a direction over
        # two joints can cancel it below what differences of a loss with 6e-14 round-off
        # resolve (Jacobi slider: 0.03 of 9.1)
        return tuple(array[i:i + 1] for i in range(len(array))) if array.ndim == 1 else array

    def loss(inputs):
        merged = params | {k: np.concatenate(v) if isinstance(v, tuple) else v
                           for k, v in inputs.items() if k in params}
        return tree_vdot(step(model, inputs["state"], inputs["action"], merged, 0.01, **options),
                         weights)

    g_state, g_action, g_params = step_vjp(model, state, action, params, 0.01, weights,
                                           **options)
    inputs = {"state": state, "action": action} | {k: split(v) for k, v in params.items()}
    grads = {"state": g_state, "action": g_action} | {k: split(v) for k, v in g_params.items()}
    for group in inputs:
        # inertias (down to 2e-4 kg m²) and compliances (1e-4) need the smaller step
        eps = 1e-6 if group in ("link_inertia", "joint_compliance") else 1e-4
        gradcheck(loss, inputs, grads, eps=eps, relative_step=False, groups=[group],
                  tolerance=1e-6).assert_ok()


@pytest.mark.parametrize(("scheme", "held"), [("first_order", 1e-12), ("second_order", 1e-2)])
def test_the_cases_reach_what_they_exercise(models, scheme, held):
    # the limit holds the first joint on it; friction holds one pendulum and lets the other
    # slide (the second order holds it up to the rate ½ h τ / I of the closing half kick,
    # which acts without friction); the floating base moves
    options = dict(scheme=scheme, **SETTINGS)
    model, state, action, params = _case(models, "limit")
    final = step(model, state, action, params, 0.01, **options)
    assert joint_positions(model, params, final)[0][0] == pytest.approx(0.3, abs=1e-3)
    rates = {}
    for name in ("friction_holding", "friction_sliding"):
        model, state, action, params = _case(models, name)
        final = step(model, state, action, params, 0.01, **options)
        rates[name] = joint_positions(model, params, final)[1][0]
    assert abs(rates["friction_holding"]) < held and abs(rates["friction_sliding"]) > 0.1
    model, state, action, params = _case(models, "floating_base")
    final = step(model, state, action, params, 0.01, **options)
    assert np.linalg.norm(final.link_x[0] - state.link_x[0]) > 1e-3


@pytest.mark.parametrize("kernels", ["numba", "numpy"])
def test_the_simulator_runs_the_kernels_it_is_given(models, monkeypatch, kernels):
    calls = []
    original = compiled.step
    monkeypatch.setattr(compiled, "step", lambda *a, **k: calls.append(1) or original(*a, **k))
    sim = PBDSimulator(models.chain(2), kernels=kernels)
    design = sim.design_space().defaults()
    sim.step(sim.initial_state(design), np.zeros(2), design, 0.01)
    assert len(calls) == (kernels == "numba")


def test_unknown_kernels_are_refused(models):
    model = models.pendulum()
    with pytest.raises(ValueError, match="kernels"):
        PBDSimulator(model, kernels="cuda")
    with pytest.raises(ValueError, match="kernels must be one of"):
        step(model, models.state_at(model, [0.0]), np.zeros(1), model.parameters(), 0.01,
             kernels="cuda", **SETTINGS)


def test_unknown_schemes_are_refused(models):
    model = models.pendulum()
    with pytest.raises(ValueError, match="scheme"):
        PBDSimulator(model, scheme="third_order")
    for kernels in ("numba", "numpy"):
        with pytest.raises(ValueError, match="scheme must be one of"):
            step(model, models.state_at(model, [0.0]), np.zeros(1), model.parameters(), 0.01,
                 kernels=kernels, scheme="third_order", **SETTINGS)


@pytest.mark.parametrize("kernels", ["numba", "numpy"])
def test_a_zero_orientation_gets_the_references_error(models, kernels):
    model = models.chain(2)
    state = models.state_at(model, [0.1, 0.2])
    state = PBDState(state.link_x, np.array([state.link_q[0], np.zeros(4)]), state.link_v,
                     state.link_w)
    with pytest.raises(ValueError, match="cannot normalize the quaternion"):
        step(model, state, np.zeros(2), model.parameters(), 0.01, kernels=kernels, **SETTINGS)


def test_wrong_shapes_are_named_before_the_kernels_run(models):
    model = models.chain(2)
    state = models.state_at(model, [0.1, 0.2])
    params = model.parameters() | {"link_inertia": np.ones((3, 3))}
    with pytest.raises(ValueError, match=r"params\['link_inertia'\] has shape \(3, 3\)"):
        step(model, state, np.zeros(2), params, 0.01, **SETTINGS)
    short = PBDState(state.link_x, state.link_q[:1], state.link_v, state.link_w)
    with pytest.raises(ValueError, match=r"state.link_q has shape \(1, 4\)"):
        step(model, short, np.zeros(2), model.parameters(), 0.01, **SETTINGS)


def test_compiling_is_announced_for_sim_pbd_kernels():
    assert compiled._COMPILES.package == "sim_pbd."
    assert compiled._COMPILES.message == compiled.COMPILE_NOTICE
