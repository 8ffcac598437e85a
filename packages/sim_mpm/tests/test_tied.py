"""Tied material parameters (sim_mpm.tied): shapes, expansion, gradients and conformance."""

from __future__ import annotations

import dataclasses
import importlib.util
import pathlib

import numpy as np
import pytest

from codesign.options import OptionsError
from codesign.testing import check_step_gradients, run_conformance
from sim_mpm import BoxWalls, MPMSimulator
from sim_mpm.scene import make_simulator
from sim_mpm.tied import TiedMaterialSimulator

_spec = importlib.util.spec_from_file_location(
    "mpm_scenes", pathlib.Path(__file__).with_name("mpm_scenes.py"))
scenes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scenes)


def tied_sim(mode: str) -> TiedMaterialSimulator:
    """The small block, its particles in two groups (left and right half)."""
    model = scenes.small_model(2, cables=True, volume=1.0, resolution=16,
                               boundaries=(BoxWalls(kind="friction", friction=0.3),))
    model = dataclasses.replace(model, particle_group=(model.particle_rest_x[:, 0] > 0.5)
                                .astype(np.int64))
    return TiedMaterialSimulator(MPMSimulator(model), mode=mode)


def test_uniform_mode_replaces_the_particle_fields_by_three_scalars():
    sim = tied_sim("uniform")
    space = sim.design_space()
    assert space.names[:3] == ["material.youngs_modulus", "material.poissons_ratio",
                               "material.density"]
    assert "particle.youngs_modulus" not in space and "particle.volume" in space
    assert space["material.youngs_modulus"].shape == (1,)
    model = sim.model
    assert space["material.density"].default_array()[0] == pytest.approx(model.density.mean())
    design = space.defaults()
    design["material.youngs_modulus"] = np.array([7.0])
    expanded = sim.expand(design)
    assert np.all(expanded["particle.youngs_modulus"] == 7.0)
    assert expanded["particle.youngs_modulus"].shape == (model.particle_count,)


def test_group_mode_has_one_entry_per_group_and_sums_gradients_per_group():
    sim = tied_sim("group")
    groups = np.unique(sim.model.particle_group)
    assert len(groups) == 2
    assert sim.tie_groups == groups.tolist()
    assert sim.design_space()["material.density"].shape == (len(groups),)
    g = {"particle.density": np.arange(sim.model.particle_count, dtype=float)}
    reduced = sim.reduce_gradient(g)["material.density"]
    for j, group in enumerate(groups):
        mask = sim.model.particle_group == group
        assert reduced[j] == pytest.approx(g["particle.density"][mask].sum())


def test_wrong_tied_shape_and_unknown_mode_raise_clear_errors():
    sim = tied_sim("uniform")
    design = sim.design_space().defaults()
    design["material.poissons_ratio"] = np.array([0.3, 0.3])
    with pytest.raises(ValueError, match=r"material.poissons_ratio must have shape \(1,\)"):
        sim.step(sim.initial_state(design), np.zeros(sim.action_size), design, 1e-3)
    with pytest.raises(ValueError, match="unknown material tie mode"):
        TiedMaterialSimulator(sim.inner, mode="body")
    with pytest.raises(OptionsError, match="material_parameters"):
        make_simulator(bodies=[{"shape": "box", "lower": [0.4, 0.4], "size": [0.1, 0.1]}],
                       material_parameters="per_body")


@pytest.mark.parametrize("mode", ["uniform", "group"])
def test_tied_step_gradients_match_finite_differences(mode):
    sim = tied_sim(mode)
    state = scenes.perturbed_state(sim.inner)
    report = check_step_gradients(sim, dt=1e-3, steps=3, state=state, tolerance=1e-6)
    tied = [g for g in report.errors if "material." in g]
    assert len(tied) == 3, report.errors
    report.assert_ok()


def test_tied_simulator_passes_the_conformance_suite():
    sim = tied_sim("uniform")
    reports = run_conformance(sim, dt=1e-3, state=scenes.perturbed_state(sim.inner))
    assert all(report.passed for report in reports)


def test_make_simulator_uniform_option_wraps_the_scene_simulator():
    sim = make_simulator(grid_resolution=16,
                         bodies=[{"shape": "box", "lower": [0.4, 0.4], "size": [0.1, 0.1]}],
                         material_parameters="uniform", youngs_modulus=12.0)
    assert isinstance(sim, TiedMaterialSimulator)
    design = sim.design_space().defaults()
    assert design["material.youngs_modulus"].tolist() == [12.0]
    frame = sim.render(sim.initial_state(design), design, width=32, height=24)
    assert frame.shape == (24, 32, 3) and frame.dtype == np.uint8
