"""PBDSimulator against the core's contract: conformance, design parameters, the factory."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.simulator import SimulationError
from codesign.testing import run_conformance
from sim_pbd.scene import make_simulator
from sim_pbd.simulator import DESIGN_FIELDS, PBDSimulator

LEFT_ARM = ["left_s0", "left_s1", "left_e0", "left_e1", "left_w0", "left_w1", "left_w2"]


def test_conformance_of_a_damped_3d_chain(models):
    model = models.chain_3d()
    model = type(model)(**{**vars(model), "joint_damping": np.full(model.joint_count, 0.3),
                           "joint_compliance": np.full(model.joint_count, 1e-7)})
    sim = PBDSimulator(model, substeps=3, iterations=2)
    state = sim.initial_state(sim.design_space().defaults())
    # compliances (1e-7) need steps far below the others' (test_gradients checks them with
    # their own): the conformance suite's one step size checks the rest of the design. The
    # stiff projections leave round-off near 1e-12 of the loss, so steps of 1e-6 are noise
    # and 1e-4 truncation: 3e-5 sits between (test_gradients sweeps steps per group)
    design = sim.design_space().defaults()
    del design["joint.compliance"]
    run_conformance(sim, dt=0.01, state=state, action=np.linspace(-0.5, 0.5, sim.action_size),
                    design=design, steps=(1, 3), rollout_steps=3, substeps=2, eps=3e-5)


def test_design_parameters_replace_the_model_values(models):
    sim = PBDSimulator(models.chain(2))
    design = sim.design_space().defaults()
    assert set(design) == set(DESIGN_FIELDS)
    params = sim.parameters({**design, "link.mass": np.array([2.0, 3.0])})
    np.testing.assert_array_equal(params["link_mass"], [2.0, 3.0])
    with pytest.raises(ValueError, match="link.mass must be positive"):
        sim.parameters({"link.mass": np.array([1.0, 0.0])})
    with pytest.raises(ValueError, match=r"joint.origin.*shape \(2, 3\)"):
        sim.parameters({"joint.origin": np.zeros(3)})


def test_the_factory_builds_baxters_left_arm_and_its_joints_hold():
    sim = make_simulator(urdf="baxter", joints=LEFT_ARM)
    assert sim.action_size == 7 and sim.model.joint_names == tuple(LEFT_ARM)
    design = sim.design_space().defaults()
    state = sim.initial_state(design)
    for step in range(5):
        state = sim.step(state, np.zeros(7), design, 0.01)
        sim.check_state(state, step)
    assert np.all(np.isfinite(state.link_x))


def test_wrong_actions_get_clear_errors(models):
    sim = PBDSimulator(models.chain(2))
    design = sim.design_space().defaults()
    state = sim.initial_state(design)
    with pytest.raises(ValueError, match=r"one torque .* shape \(2,\)"):
        sim.step(state, np.zeros(3), design, 0.01)
    with pytest.raises(SimulationError, match="NaN or inf at joint.*joint1"):
        sim.step(state, np.array([0.0, np.nan]), design, 0.01)
