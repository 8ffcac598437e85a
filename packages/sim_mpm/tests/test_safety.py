"""Time-step checks, divergence detection and input validation."""

from __future__ import annotations

import importlib.util
import pathlib
import re

import numpy as np
import pytest

from codesign import SimulationError, UnstableTimeStepError
from sim_mpm import BoxWalls, ModelError, MPMSimulator, MPMState, build_model
from sim_mpm.safety import actuator_stress, largest_stable_dt

_spec = importlib.util.spec_from_file_location(
    "mpm_scenes", pathlib.Path(__file__).with_name("mpm_scenes.py"))
scenes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scenes)


def _sim():
    return MPMSimulator(scenes.small_model(2))


def test_unstable_time_step_is_refused_with_the_largest_safe_value():
    sim = _sim()
    design = sim.design_space().defaults()
    safe = largest_stable_dt(dx=sim.model.dx, youngs_modulus=design["particle.youngs_modulus"],
                             density=design["particle.density"],
                             actuator_stress=actuator_stress(sim.model))
    sim.check_time_step(design, 0.99 * safe)
    with pytest.raises(UnstableTimeStepError) as info:
        sim.check_time_step(design, 2 * safe)
    stated = float(re.search(r"largest safe time step is ([0-9.e+-]+) s", str(info.value))[1])
    assert stated == pytest.approx(safe, rel=1e-2)
    # the stated value is accepted
    sim.check_time_step(design, stated * 0.999)


def test_stiffer_material_and_faster_bodies_lower_the_safe_step():
    sim = _sim()
    design = sim.design_space().defaults()
    soft = largest_stable_dt(dx=0.1, youngs_modulus=[10.0], density=[1.0])
    stiff = largest_stable_dt(dx=0.1, youngs_modulus=[1000.0], density=[1.0])
    assert stiff == pytest.approx(soft / 10)
    design["initial.velocity"] = np.array([1000.0, 0.0])
    with pytest.raises(UnstableTimeStepError, match=r"\|v\|max"):
        sim.check_time_step(design, 1e-3)
    with pytest.raises(UnstableTimeStepError, match="positive"):
        sim.check_time_step(sim.design_space().defaults(), -1.0)


def test_actuator_stress_stiffens_the_time_step_check():
    """A stress actuator adds a modulus of 2 σ_max where it acts: a step safe for the
    passive material is refused, naming the actuators."""
    passive = MPMSimulator(scenes.small_model(2, actuators=False))
    design = passive.design_space().defaults()
    safe = largest_stable_dt(dx=passive.model.dx, youngs_modulus=design["particle.youngs_modulus"],
                             density=design["particle.density"])
    passive.check_time_step(design, 0.99 * safe)
    actuated = MPMSimulator(scenes.small_model(2))
    with pytest.raises(UnstableTimeStepError, match="actuator stress stiffens.*max_stress"):
        actuated.check_time_step(design, 0.99 * safe)
    sigma = actuator_stress(actuated.model)
    np.testing.assert_array_equal(sigma, np.where(actuated.model.actuator_index == 0, 3.0, 2.0))
    stiff = largest_stable_dt(dx=0.1, youngs_modulus=[10.0], density=[1.0], actuator_stress=45.0)
    assert stiff == pytest.approx(largest_stable_dt(dx=0.1, youngs_modulus=[100.0],
                                                    density=[1.0]))


def test_nan_is_reported_with_step_and_field():
    sim = _sim()
    state = sim.initial_state(sim.design_space().defaults())
    sim.check_state(state, 0)
    v = state.particle_v.copy()
    v[3, 1] = np.nan
    with pytest.raises(SimulationError, match=r"step 17: particle_v .* NaN") as info:
        sim.check_state(MPMState(state.particle_x, v, state.particle_F, state.particle_C), 17)
    assert "by substep 17" in str(info.value) and "actuation" in str(info.value)


def test_escaped_particles_are_reported():
    sim = _sim()
    state = sim.initial_state(sim.design_space().defaults())
    x = state.particle_x.copy()
    x[5, 0] = sim.model.domain_size + 0.1
    with pytest.raises(SimulationError, match=r"step 4: 1 particle\(s\) left the grid") as info:
        sim.check_state(MPMState(x, state.particle_v, state.particle_F, state.particle_C), 4)
    assert "by substep 4" in str(info.value) and "actuation" in str(info.value)


def test_leaving_the_grid_is_reported_before_nan():
    """By the end of a control step an escaped particle may have turned other fields NaN:
    the message names the escape, its likelier cause."""
    sim = _sim()
    state = sim.initial_state(sim.design_space().defaults())
    x, F = state.particle_x.copy(), state.particle_F.copy()
    x[5, 0] = -0.2
    F[5, 0, 0] = np.nan
    with pytest.raises(SimulationError, match=r"1 particle\(s\) left the grid \(first: particle 5"):
        sim.check_state(MPMState(x, state.particle_v, F, state.particle_C), 40)


def test_a_diverging_run_is_caught():
    """Far too large a step blows up; check_state names the step."""
    sim = MPMSimulator(scenes.small_model(2, boundaries=(BoxWalls(),)))
    design = sim.design_space().defaults()
    design["particle.youngs_modulus"] = design["particle.youngs_modulus"] * 1e4
    state = sim.initial_state(design)
    with pytest.raises(SimulationError, match=r"step \d+"):
        for step in range(1, 200):
            state = sim.step(state, np.zeros(sim.action_size), design, 5e-3)
            sim.check_state(state, step)


def test_escaping_particles_do_not_index_outside_the_grid():
    """The stencil is clamped, so a step with escaped particles stays finite."""
    sim = _sim()
    state = sim.initial_state(sim.design_space().defaults())
    x = state.particle_x.copy()
    x[0] = [-0.5, 2.0]
    out = sim.step(MPMState(x, state.particle_v, state.particle_F, state.particle_C),
                   np.zeros(sim.action_size), sim.design_space().defaults(), 1e-3)
    assert np.all(np.isfinite(out.particle_v))


@pytest.mark.parametrize("change,message", [
    (dict(dim=4), "dim: 4 is not one of its choices: 2, 3"),
    (dict(particle_x=np.zeros((3, 2))), "particles must lie"),
    (dict(material="jelly"), "material: 'jelly' is not one of its choices"),
    (dict(poissons_ratio=0.5), r"poissons_ratio: 0.5 lies outside .* bounds \[0.001, 0.49\]"),
    (dict(youngs_modulus=-1.0), "youngs_modulus must be finite and > 0"),
    (dict(incompressibility_exponent=1), "incompressibility_exponent"),
    (dict(dx=0.0), "dx must be a positive"),
    (dict(cables=[dict(route=[0])]), "route needs"),
    (dict(cables=[dict(route=[0, 1], spring=3)]), "unknown key"),
    (dict(actuator_index=np.zeros(4, dtype=int), actuator_axes=np.ones((2, 2))),
     "actuator_axes has 2 rows"),
    (dict(dtype="float16"), "dtype: 'float16' is not one of its choices"),
    (dict(boundaries=("floor",)), "unknown boundary"),
])
def test_bad_models_are_refused(change, message):
    x = scenes.block_points(2, [0.4, 0.4], [0.5, 0.5], 0.05)
    options = dict(particle_x=x, dim=2, grid_resolution=16, dx=1.0 / 16)
    options.update(change)
    with pytest.raises(ModelError, match=message):
        build_model(**options)


def test_bad_actions_and_kernels_are_refused():
    sim = _sim()
    design = sim.design_space().defaults()
    state = sim.initial_state(design)
    with pytest.raises(ValueError, match=r"action must have shape \(2,\)"):
        sim.step(state, np.zeros(5), design, 1e-3)
    with pytest.raises(ValueError, match="option .kernels.: .cuda. is not one of its choices"):
        MPMSimulator(sim.model, kernels="cuda")
