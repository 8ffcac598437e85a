"""Constitutive models and actuators: energies, invariances, signs."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.testing import gradcheck
from sim_mpm import MPMSimulator, build_model
from sim_mpm.actuators import CableActuator, cable_forces
from sim_mpm.materials import first_piola, polar_rotation, polar_rotation_vjp


def _random_F(dim, n=6, seed=0, spread=0.2):
    rng = np.random.default_rng(seed)
    return np.eye(dim) + spread * rng.standard_normal((n, dim, dim))


def _rotation(dim, seed):
    q, r = np.linalg.qr(np.random.default_rng(seed).standard_normal((dim, dim)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q if dim == 3 else q[:, ::-1]


def _energy(F, E, nu, material, exponent):
    mu, lam = E / (2 * (1 + nu)), E * nu / ((1 + nu) * (1 - 2 * nu))
    J = np.linalg.det(F)
    if material == "corotated":
        R = polar_rotation(np, F)
        psi = mu * np.sum((F - R) ** 2, axis=(1, 2)) + 0.5 * lam * (J - 1) ** 2
    else:
        d = F.shape[-1]
        logJ = np.log(J)
        psi = 0.5 * mu * (np.sum(F * F, axis=(1, 2)) - d) - mu * logJ + 0.5 * lam * logJ**2
    if exponent:
        psi = psi + E / (3 * (2 - 2 * nu)) * (J - 1) ** exponent
    return psi


@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("material", ["corotated", "neo_hookean"])
@pytest.mark.parametrize("exponent", [0, 2, 3])
def test_stress_is_the_energy_gradient(dim, material, exponent):
    """P = ∂ψ/∂F for ψ the model's strain energy density."""
    F = _random_F(dim)
    E, nu = np.full(len(F), 20.0), np.full(len(F), 0.3)
    P = first_piola(np, F, E, nu, material=material, exponent=exponent)
    gradcheck(lambda inputs: float(np.sum(_energy(inputs["F"], E, nu, material, exponent))),
              {"F": F}, {"F": P}, tolerance=1e-7).assert_ok()


@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("material", ["corotated", "neo_hookean"])
def test_stress_vanishes_at_rest_and_rotates_with_the_body(dim, material):
    E, nu = np.full(4, 20.0), np.full(4, 0.3)
    rest = first_piola(np, np.tile(np.eye(dim), (4, 1, 1)), E, nu, material=material,
                       exponent=3)
    np.testing.assert_allclose(rest, 0.0, atol=1e-14)
    F = _random_F(dim, n=4)
    Q = _rotation(dim, seed=4)
    P = first_piola(np, F, E, nu, material=material, exponent=3)
    PQ = first_piola(np, Q @ F, E, nu, material=material, exponent=3)
    np.testing.assert_allclose(PQ, Q @ P, atol=1e-12)


@pytest.mark.parametrize("dim", [2, 3])
def test_polar_rotation_is_a_rotation_with_symmetric_stretch(dim):
    F = _random_F(dim, n=20, spread=0.4)
    R = polar_rotation(np, F)
    np.testing.assert_allclose(np.swapaxes(R, 1, 2) @ R, np.broadcast_to(np.eye(dim), R.shape),
                               atol=1e-12)
    np.testing.assert_allclose(np.linalg.det(R), 1.0, atol=1e-12)
    S = np.swapaxes(R, 1, 2) @ F
    np.testing.assert_allclose(S, np.swapaxes(S, 1, 2), atol=1e-12)


def test_polar_rotation_gradient_is_stable_at_repeated_singular_values():
    """F = U diag(1.2, 1.2, 0.9) Vᵀ and F = rotation · I: the SVD factors are not unique but
    the rotation's VJP (which only divides by σᵢ + σⱼ) is finite and exact."""
    U, V = _rotation(3, 1), _rotation(3, 2)
    F = np.stack([U @ np.diag([1.2, 1.2, 0.9]) @ V.T, U, U @ np.diag([0.7, 0.7, 0.7])])
    G = np.random.default_rng(3).standard_normal(F.shape)
    g_F = polar_rotation_vjp(np, F, polar_rotation(np, F), G)
    assert np.all(np.isfinite(g_F))
    gradcheck(lambda inputs: float(np.sum(polar_rotation(np, inputs["F"]) * G)),
              {"F": F}, {"F": g_F}, tolerance=1e-7).assert_ok()


def test_cable_is_slack_at_rest_and_pulls_when_contracted():
    x = np.array([[0.0, 0.0], [0.0, 0.1], [0.0, 0.2]])
    cable = CableActuator(route=np.array([0, 1, 2]), stiffness=50.0, max_contraction=0.05,
                          rest_length=0.2)
    np.testing.assert_allclose(cable_forces(np, x, np.array([0.0]), (cable,)), 0.0)
    np.testing.assert_allclose(cable_forces(np, x, np.array([-1.0]), (cable,)), 0.0)
    f = cable_forces(np, x, np.array([1.0]), (cable,))
    np.testing.assert_allclose(f.sum(axis=0), 0.0, atol=1e-15)
    tension = 50.0 * 0.05
    np.testing.assert_allclose(f[0], [0.0, tension])
    np.testing.assert_allclose(f[2], [0.0, -tension])


@pytest.mark.parametrize("dim", [2, 3])
def test_positive_stress_signal_contracts_along_the_actuator_axes(dim):
    """σ_a along x only: the block shortens in x under +1 and lengthens under −1."""
    dx = 1.0 / 16
    axes = [np.linspace(0.35, 0.6, 6)] * dim
    grid = np.meshgrid(*axes, indexing="ij")
    x = np.stack([g.ravel() for g in grid], axis=1)
    mask = np.zeros((1, dim))
    mask[0, 0] = 1.0
    model = build_model(particle_x=x, dim=dim, grid_resolution=16, dx=dx,
                        gravity=np.zeros(dim), youngs_modulus=50.0, poissons_ratio=0.3, density=1.0,
                        actuator_index=np.zeros(len(x), dtype=np.int64), actuator_axes=mask,
                        actuator_max_stress=[5.0], boundaries=())
    sim = MPMSimulator(model)
    design = sim.design_space().defaults()
    extent = {}
    for signal in (1.0, -1.0):
        state = sim.initial_state(design)
        for _ in range(100):
            state = sim.step(state, np.array([signal]), design, 1e-3)
        extent[signal] = np.ptp(state.particle_x, axis=0)
    rest = np.ptp(x, axis=0)
    assert extent[1.0][0] < rest[0] - 1e-3 < rest[0] + 1e-3 < extent[-1.0][0]
