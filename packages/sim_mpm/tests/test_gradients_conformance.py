"""The codesign conformance suite and the design space."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

from codesign.testing import run_conformance
from sim_mpm import BoxWalls, MPMSimulator

_spec = importlib.util.spec_from_file_location(
    "mpm_scenes", pathlib.Path(__file__).with_name("mpm_scenes.py"))
scenes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scenes)


@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("kernels", ["numba", "reference"])
def test_run_conformance(dim, kernels):
    """At the kit's defaults (step 1e-6, tolerance 1e-6). Particle volumes are set near 1
    (which leaves the dynamics unchanged) because the kit's step is absolute below 1. The
    body starts clear of the walls: at rest against a side wall a node's v·n is exactly 0,
    the switching point of the friction projection, where no derivative exists."""
    model = scenes.small_model(dim, cables=True, volume=1.0, resolution=16,
                               boundaries=(BoxWalls(kind="friction", friction=0.3),))
    sim = MPMSimulator(model, kernels=kernels)
    reports = run_conformance(sim, dt=1e-3, state=scenes.perturbed_state(sim))
    assert all(report.passed for report in reports)


def test_design_space_names_shapes_and_bounds():
    sim = MPMSimulator(scenes.small_model(3))
    space = sim.design_space()
    n, d = sim.model.particle_count, 3
    assert space.names == ["particle.youngs_modulus", "particle.poissons_ratio",
                           "particle.density", "particle.volume", "geometry.scale",
                           "initial.velocity"]
    assert space["particle.youngs_modulus"].shape == (n,)
    assert space["geometry.scale"].shape == (sim.model.geometry_group_count, d)
    assert space["initial.velocity"].shape == (d,)
    lower, upper = space.bounds()
    defaults = space.flatten(space.defaults())
    assert np.all(lower <= defaults) and np.all(defaults <= upper)
    nu = space["particle.poissons_ratio"]
    assert nu.lower_array().min() > 0 and nu.upper_array().max() < 0.5
    assert space["particle.youngs_modulus"].lower_array().min() > 0
    assert sim.action_size == 2


def test_geometry_scale_moves_rest_positions_about_the_anchor():
    sim = MPMSimulator(scenes.small_model(2))
    design = sim.design_space().defaults()
    design["geometry.scale"] = np.array([[2.0, 1.0], [1.0, 0.5]])
    x = sim.initial_state(design).particle_x
    model = sim.model
    group = model.particle_geometry_group
    anchor = model.geometry_anchor[group]
    expected = anchor + design["geometry.scale"][group] * (model.particle_rest_x - anchor)
    np.testing.assert_allclose(x, expected)
    design["initial.velocity"] = np.array([0.5, -1.0])
    np.testing.assert_allclose(sim.initial_state(design).particle_v,
                               model.particle_rest_v + [0.5, -1.0])


def test_float32_simulator_keeps_its_dtype():
    sim = MPMSimulator(scenes.small_model(2, dtype="float32"))
    design = sim.design_space().defaults()
    state = sim.initial_state(design)
    nxt = sim.step(state, np.zeros(2), design, 1e-3)
    assert all(getattr(nxt, f).dtype == np.float32 for f in
               ("particle_x", "particle_v", "particle_F", "particle_C"))
