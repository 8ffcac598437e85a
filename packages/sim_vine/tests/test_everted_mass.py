"""Body masses that grow with the everted length (``linear_density``)."""

import numpy as np
import pytest

from codesign.testing import check_step_gradients, gradcheck
from sim_vine import VineModel, VineSimulator
from sim_vine.everted_mass import (
    everted_masses,
    everted_masses_vjp,
    gyration_squares,
    gyration_squares_vjp,
    material_lengths,
)
from sim_vine.kinematics import vine_length
from sim_vine.model import ModelError
from sim_vine.scene import make_simulator
from sim_vine.step import build_problem

RHO = 0.05  # kg/m


def grown(runner, growth="every_prismatic", steps=20, angle=0.1, gravity=-9.81):
    sim = VineSimulator(VineModel(body_count=7, length=0.14, linear_density=RHO,
                                  initial_angles=angle, growth=growth, gravity=(0.0, gravity)))
    states, design = runner(sim, steps, rate=0.1)
    return sim, states, design


def test_the_everted_material_joins_the_distal_bodies(runner):
    sim, states, design = grown(runner, angle=0.0, gravity=0.0)  # straight: growth is exact
    np.testing.assert_allclose(design["body.mass"], RHO * 0.02)  # ρ × each body's length
    q = states[-1].body_q
    lengths = material_lengths(sim.model, q)
    # 0.1 m/s for 0.2 s shared by 3 prismatic pairs: each distal body carries 2d + 6.7 mm
    np.testing.assert_allclose(lengths[1:6:2], 0.02 + 0.02 / 3, rtol=1e-3)
    np.testing.assert_allclose(lengths[0:7:2], 0.02)
    masses = everted_masses(sim.model, design["body.mass"], q)
    assert np.sum(masses) == pytest.approx(RHO * vine_length(sim.model, q), rel=1e-3)
    # the default, fixed masses do not grow
    fixed = VineSimulator(VineModel(body_count=7, length=0.14, total_mass=0.007))
    np.testing.assert_allclose(fixed.design_space().defaults()["body.mass"], 0.001)


def test_everted_masses_vjp(runner):
    sim, states, design = grown(runner)
    q, mass = states[-1].body_q, design["body.mass"]
    weights = np.linspace(1.0, 2.0, sim.model.body_count)
    g_mass, g_q = everted_masses_vjp(sim.model, mass, q, weights)
    gradcheck(lambda x: float(weights @ everted_masses(sim.model, x["m"], x["q"])),
              {"m": mass, "q": q}, {"m": g_mass, "q": g_q}).assert_ok()


@pytest.mark.parametrize("growth", ["every_prismatic", "tip"])
def test_step_gradients_with_growing_masses(runner, growth):
    sim, states, design = grown(runner, growth=growth, steps=5)
    check_step_gradients(sim, dt=0.01, steps=3, state=states[-1], action=np.array([0.1]),
                         design=design, eps=1e-5).assert_ok()


def test_growing_masses_change_the_motion_and_are_an_option(runner):
    sim, states, _ = grown(runner, steps=30)
    fixed = VineSimulator(VineModel(body_count=7, length=0.14, total_mass=RHO * 0.14,
                                    initial_angles=0.1, gravity=(0.0, -9.81)))
    fixed_states, _ = runner(fixed, 30, rate=0.1)
    assert np.max(np.abs(states[-1].body_q - fixed_states[-1].body_q)) > 1e-6
    assert make_simulator(bodies=4, linear_density=0.1).model.linear_density == 0.1
    with pytest.raises(ModelError, match="linear_density"):
        VineModel(linear_density=-1.0)


def test_inertias_are_those_of_the_carried_rod_about_the_body_centre(runner):
    sim, states, design = grown(runner, steps=40)
    q, d = states[-1].body_q, sim.model.half_length
    lengths = material_lengths(sim.model, q)
    inertia = everted_masses(sim.model, design["body.mass"], q) * gyration_squares(sim.model, q)
    # ρ ∫ x² dx over the rod [d − ℓ, d] (its distal end the body's distal end)
    np.testing.assert_allclose(inertia, RHO * (d**3 - (d - lengths) ** 3) / 3, rtol=1e-12)
    np.testing.assert_allclose(inertia[0::2], RHO * (2 * d) ** 3 / 12, rtol=1e-12)
    assert np.all(inertia[1:6:2] > 1.5 * RHO * (2 * d) ** 3 / 12)  # grown: ~ℓ³
    weights = np.linspace(1.0, 2.0, sim.model.body_count)
    gradcheck(lambda x: float(weights @ gyration_squares(sim.model, x["q"])), {"q": q},
              {"q": gyration_squares_vjp(sim.model, q, weights)}).assert_ok()
    params, _ = sim._parameters(design)
    np.testing.assert_array_equal(sim._step_masses(params, q).gyration_sq,
                                  gyration_squares(sim.model, q))


@pytest.mark.parametrize("options", [{"linear_density": RHO, "gyration_radius": 0.015},
                                     {"total_mass": RHO * 0.14}])  # fixed masses
def test_fixed_radii_keep_the_inertia_m_r_squared_bit_for_bit(runner, options):
    sim = VineSimulator(VineModel(body_count=7, length=0.14, initial_angles=0.1,
                                  ground_friction=2.0, gravity=(0.0, -9.81), **options))
    states, design = runner(sim, 20)
    q = states[-1].body_q
    params, _ = sim._parameters(design)
    params = sim._step_masses(params, q)
    assert params.gyration_sq is None
    np.testing.assert_array_equal(gyration_squares(sim.model, q), sim.model.gyration**2)
    assert not np.any(gyration_squares_vjp(sim.model, q, np.ones(7)))
    problem = build_problem(sim.arrays, sim.layout, q, states[-1].body_qd, 0.1, params, 0.01)
    # the formula before per-body inertias: drag m (1 + Δt c_g) times the model's r²
    drag = params.mass * (1.0 + 0.01 * params.ground_friction)
    np.testing.assert_array_equal(problem.mass_diagonal[:, 2], drag * sim.model.gyration**2)


def test_compiled_step_with_growing_inertias_equals_reference(runner, assembly_matches,
                                                              backward_matches):
    sim, states, design = grown(runner, steps=40)
    design["ground.friction"] = np.full(7, 2.0)
    q, v = states[-1].body_q, states[-1].body_qd
    params, _ = sim._parameters(design)
    params = sim._step_masses(params, q)
    assembly_matches(sim, q, v, 0.1, params, 0.01)
    rng = np.random.default_rng(0)
    g_q, g_v = rng.standard_normal(q.shape), rng.standard_normal(q.shape)
    _, reference = backward_matches(sim, q, v, 0.1, params, 0.01, g_q, g_v, atol=1e-12)
    assert np.max(np.abs(reference.gyration_sq)) > 0


def test_step_gradients_with_grown_inertias(runner):
    sim, states, design = grown(runner, steps=40)
    design["ground.friction"] = np.full(7, 2.0)
    check_step_gradients(sim, dt=0.01, steps=3, state=states[-1], action=np.array([0.1]),
                         design=design, eps=1e-5).assert_ok()
