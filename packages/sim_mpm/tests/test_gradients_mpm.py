"""Adjoint gradients of MPMSimulator against central finite differences (float64).

Every check uses ``codesign.testing.gradcheck`` (4-point central differences along random
directions) at tolerance 1e-6, for L = <w, s_n> after n substeps with a fixed random w.
Each input gets its own group and step, because one step does not fit all of them:

- x, F, ν, ρ: 1e-6 (times max(1, rms)). Larger steps in x run into the grid's rational
  terms (mv/m at nodes that a particle barely reaches) and into the switching points of
  the boundary projections.
- v, action, E: 1e-5 (E relative to its rms): over 100-1000 substeps the loss's round-off
  grows and a 1e-6 step leaves errors near 1e-6.
- C: 3e-5. C enters as m C with m ~ 1e-3, so its directional derivatives are small and a
  smaller step drowns them in the loss's round-off.
- volume: checked in units of its mean (V / V̄), so the step is 1e-6 relative; the kit's
  absolute step (volumes ~1e-3 m²) would move V by 0.1 % and cross switching points.
"""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

from codesign.testing import check_initial_state_gradients, gradcheck
from codesign.tree import tree_vdot
from sim_mpm import BoxWalls, HeightField, MPMSimulator, MPMState, Plane

_spec = importlib.util.spec_from_file_location(
    "mpm_scenes", pathlib.Path(__file__).with_name("mpm_scenes.py"))
scenes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scenes)

TOLERANCE = 1e-6
ACTION = np.array([0.5, -0.3, 0.6])
STEPS = {"x": 1e-6, "v": 1e-5, "F": 1e-6, "C": 3e-5, "action": 1e-5, "E": 1e-5, "nu": 1e-6,
         "rho": 1e-6, "V": 1e-6}
FIELDS = {"x": "particle_x", "v": "particle_v", "F": "particle_F", "C": "particle_C"}
PARAMS = {"E": "particle.youngs_modulus", "nu": "particle.poissons_ratio",
          "rho": "particle.density"}


def _check(sim, state, steps, action=ACTION, dt=1e-3, seed=0, eps=None):
    """Gradcheck every input of n substeps; returns the largest relative error. ``eps``
    overrides finite-difference steps of STEPS by group."""
    design = {k: np.asarray(v, dtype=np.float64) for k, v in
              sim.design_space().defaults().items()}
    volume0 = float(np.mean(design["particle.volume"]))
    rng = np.random.default_rng(seed + 11)

    def unpack(inputs):
        s = MPMState(*(inputs[k] for k in FIELDS))
        d = dict(design)
        d.update({PARAMS[k]: inputs[k] for k in PARAMS})
        d["particle.volume"] = inputs["V"] * volume0
        return s, inputs["action"], d

    inputs = {k: getattr(state, f) for k, f in FIELDS.items()}
    inputs.update({k: design[PARAMS[k]] for k in PARAMS})
    inputs["V"] = design["particle.volume"] / volume0
    inputs["action"] = np.asarray(action, dtype=np.float64)
    trajectory = [state]
    for _ in range(steps):
        trajectory.append(sim.step(trajectory[-1], action, design, dt))
    w = MPMState(*(rng.standard_normal(getattr(state, f).shape) for f in FIELDS.values()))

    def loss(values):
        s, a, d = unpack(values)
        for _ in range(steps):
            s = sim.step(s, a, d, dt)
        return tree_vdot(s, w)

    g_state, g_action, g_design = w, np.zeros_like(inputs["action"]), {}
    for s in reversed(trajectory[:-1]):
        g_state, ga, gd = sim.step_vjp(s, action, design, dt, g_state)
        g_action = g_action + ga
        for name, value in gd.items():
            g_design[name] = g_design.get(name, 0.0) + value
    analytic = {k: getattr(g_state, f) for k, f in FIELDS.items()}
    analytic.update({k: g_design[PARAMS[k]] for k in PARAMS})
    analytic["V"] = g_design["particle.volume"] * volume0
    analytic["action"] = g_action
    worst = 0.0
    for group, step in {**STEPS, **(eps or {})}.items():
        report = gradcheck(loss, inputs, analytic, groups=[group], eps=step,
                           tolerance=TOLERANCE, seed=seed)
        report.assert_ok()
        worst = max(worst, max(report.errors.values()))
    return worst


@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("material,exponent", [("corotated", 0), ("neo_hookean", 0),
                                               ("corotated", 3), ("neo_hookean", 2)])
@pytest.mark.parametrize("steps", [1, 10])
def test_material_and_actuator_gradients(dim, material, exponent, steps):
    model = scenes.small_model(dim, material=material, exponent=exponent, cables=True)
    sim = MPMSimulator(model, kernels="numba")
    _check(sim, scenes.perturbed_state(sim), steps)


@pytest.mark.parametrize("dim", [2, 3])
def test_reference_gradients_one_step(dim):
    model = scenes.small_model(dim, cables=True, boundaries=(BoxWalls(kind="friction",
                                                                       friction=0.3),))
    sim = MPMSimulator(model, kernels="reference")
    _check(sim, scenes.perturbed_state(sim), 1)


BOUNDARIES = {
    "sticky": (BoxWalls(kind="sticky"),),
    "slip": (BoxWalls(kind="slip"),),
    "separate": (BoxWalls(kind="separate"),),
    "friction": (BoxWalls(kind="friction", friction=0.3),),
    "plane": (Plane(point=[0.0, 0.27], normal=[0.1, 1.0], kind="friction", friction=0.3),),
    "terrain": (HeightField(heights=[0.24, 0.26, 0.27, 0.25], spacing=0.35, kind="friction",
                            friction=0.3),),
}


@pytest.mark.parametrize("boundary", sorted(BOUNDARIES))
@pytest.mark.parametrize("steps", [1, 10, 100])
def test_boundary_gradients_in_contact(boundary, steps):
    model = scenes.contact_model(2, boundaries=BOUNDARIES[boundary])
    sim = MPMSimulator(model, kernels="numba")
    _check(sim, scenes.perturbed_state(sim, scale=0.3), steps)


@pytest.mark.parametrize("kind", ["sticky", "slip", "separate", "friction"])
def test_boundary_gradients_3d(kind):
    model = scenes.contact_model(3, boundaries=(BoxWalls(kind=kind, friction=0.3),),
                                 spacing=0.75)
    sim = MPMSimulator(model, kernels="numba")
    _check(sim, scenes.perturbed_state(sim, scale=0.3), 10)


@pytest.mark.parametrize("material", ["corotated", "neo_hookean"])
def test_long_rollout_gradients(material):
    """100 substeps of a 3D block on a sticky floor; 1000 substeps of a tiny 2D block.

    Long rollouts with friction or separation pass through switching points of the
    projections (a node's v·n or stick/slip changing sign), where finite differences do not
    converge; the 2D contact tests above cover those kinds over 100 substeps.
    """
    model = scenes.contact_model(3, material=material, spacing=0.75,
                                 boundaries=(BoxWalls(kind="sticky"),))
    sim = MPMSimulator(model, kernels="numba")
    _check(sim, scenes.perturbed_state(sim, scale=0.3), 100)
    tiny = scenes.contact_model(2, material=material, spacing=1.0, cables=False,
                                boundaries=(BoxWalls(kind="slip"),))
    sim = MPMSimulator(tiny, kernels="numba")
    # after 1000 substeps the loss's round-off moves 4-point differences in C by a few 1e-6
    # at steps up to 1e-4 (measured against the reference kernels' adjoint, which the numba
    # adjoint equals to 1e-14); 3e-4 is still far inside the smooth range
    _check(sim, sim.initial_state(sim.design_space().defaults()), 1000,
           action=np.array([0.2, -0.1]), eps={"C": 3e-4})


@pytest.mark.parametrize("dim", [2, 3])
def test_initial_state_gradients(dim):
    sim = MPMSimulator(scenes.small_model(dim), kernels="numba")
    design = sim.design_space().defaults()
    design["geometry.scale"] = np.full_like(design["geometry.scale"], 1.1)
    design["initial.velocity"] = np.linspace(-0.2, 0.3, dim)
    check_initial_state_gradients(sim, design=design, tolerance=TOLERANCE).assert_ok()


def test_float32_gradients_track_float64():
    """float32 gradients agree with float64 ones to single-precision accuracy."""
    grads = {}
    for dtype in ("float64", "float32"):
        sim = MPMSimulator(scenes.small_model(2, dtype=dtype, cables=True), kernels="numba")
        design = sim.design_space().defaults()
        state = sim.initial_state(design)
        for _ in range(5):
            state = sim.step(state, ACTION, design, 1e-3)
        ones = type(state)(*(np.ones_like(a) for a in (state.particle_x, state.particle_v,
                                                        state.particle_F, state.particle_C)))
        g_state, g_action, g_design = sim.step_vjp(state, ACTION, design, 1e-3, ones)
        assert g_state.particle_x.dtype == np.dtype(dtype)
        grads[dtype] = (g_state.particle_F, g_action, g_design["particle.youngs_modulus"])
    for a, b in zip(grads["float64"], grads["float32"], strict=True):
        np.testing.assert_allclose(b, a, rtol=2e-3, atol=2e-3 * np.max(np.abs(a)))
