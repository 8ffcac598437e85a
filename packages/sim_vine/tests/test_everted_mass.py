"""Body masses that grow with the everted length (``linear_density``)."""

import numpy as np
import pytest

from codesign.testing import check_step_gradients, gradcheck
from sim_vine import VineModel, VineSimulator
from sim_vine.everted_mass import everted_masses, everted_masses_vjp, material_lengths
from sim_vine.kinematics import vine_length
from sim_vine.model import ModelError
from sim_vine.scene import make_simulator

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
