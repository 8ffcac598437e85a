"""Analytic checks: momentum conservation and d(mean x_T)/d(v0) = T."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

from sim_mpm import MPMSimulator, MPMState

_spec = importlib.util.spec_from_file_location(
    "mpm_scenes", pathlib.Path(__file__).with_name("mpm_scenes.py"))
scenes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scenes)


def _free_model(dim, *, material="corotated", uniform_mass=False):
    """No gravity, no walls: a free body with stress and cable actuators."""
    model = scenes.small_model(dim, material=material, exponent=2, cables=True,
                               boundaries=(), gravity=np.zeros(dim))
    if uniform_mass:
        model = scenes.build_model(
            particle_x=model.particle_rest_x, dim=dim, grid_resolution=model.grid_resolution,
            dx=model.dx, gravity=np.zeros(dim), youngs_modulus=model.youngs_modulus,
            poissons_ratio=model.poissons_ratio, density=1.0, material=material,
            incompressibility_exponent=2, actuator_index=model.actuator_index,
            actuator_axes=model.actuator_axes, actuator_max_stress=model.actuator_max_stress,
            cables=model.cables, boundaries=())
    return model


def _momentum(sim, state, design):
    mass = design["particle.density"] * design["particle.volume"]
    return (mass[:, None] * state.particle_v).sum(axis=0)


@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("kernels", ["numba", "reference"])
@pytest.mark.parametrize("stressed", [False, True])
def test_total_momentum_is_conserved(dim, kernels, stressed):
    sim = MPMSimulator(_free_model(dim), kernels=kernels)
    design = sim.design_space().defaults()
    state = scenes.perturbed_state(sim, scale=1.0 if stressed else 0.0)
    if not stressed:
        state = MPMState(state.particle_x, state.particle_v + 0.3, state.particle_F,
                         state.particle_C)
    action = np.array([0.8, -0.5, 1.0]) if stressed else np.zeros(3)
    before = _momentum(sim, state, design)
    for _ in range(50):
        state = sim.step(state, action, design, 1e-3)
    after = _momentum(sim, state, design)
    scale = np.sum(design["particle.density"] * design["particle.volume"]
                   * np.linalg.norm(state.particle_v, axis=1))
    assert np.max(np.abs(after - before)) <= 1e-13 * scale
    if stressed:  # the stresses did something
        assert np.max(np.abs(state.particle_F - np.eye(dim))) > 1e-3


@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("material", ["corotated", "neo_hookean"])
def test_mean_position_gradient_equals_elapsed_time(dim, material):
    """Without gravity or walls, d(mean x_T)/d(initial.velocity) = T·I (equal masses)."""
    sim = MPMSimulator(_free_model(dim, material=material, uniform_mass=True))
    design = sim.design_space().defaults()
    design["initial.velocity"] = np.linspace(0.1, 0.3, dim)
    steps, dt = 100, 1e-3
    action = np.array([0.7, -0.4, 0.9])
    trajectory = [sim.initial_state(design)]
    for _ in range(steps):
        trajectory.append(sim.step(trajectory[-1], action, design, dt))
    n = sim.model.particle_count
    assert np.max(np.abs(trajectory[-1].particle_F - np.eye(dim))) > 1e-3
    for axis in range(dim):
        g_x = np.zeros((n, dim))
        g_x[:, axis] = 1.0 / n
        g = MPMState(g_x, np.zeros((n, dim)), np.zeros((n, dim, dim)), np.zeros((n, dim, dim)))
        for state in reversed(trajectory[:-1]):
            g, _, _ = sim.step_vjp(state, action, design, dt, g)
        g_v0 = sim.initial_state_vjp(design, g)["initial.velocity"]
        expected = np.zeros(dim)
        expected[axis] = steps * dt
        np.testing.assert_allclose(g_v0, expected, rtol=0, atol=1e-9)
