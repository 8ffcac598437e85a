"""The numba kernels' fast paths: grid passes restricted to the particles' node box, and
material adjoints that reuse the forward pass's stresses, still equal the reference."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

from sim_mpm import BoxWalls, MPMSimulator, MPMState, Plane

_spec = importlib.util.spec_from_file_location(
    "mpm_scenes", pathlib.Path(__file__).with_name("mpm_scenes.py"))
scenes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scenes)

FIELDS = ("particle_x", "particle_v", "particle_F", "particle_C")


def _relative(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b)))
                 / max(float(np.max(np.abs(np.asarray(a)))), 1e-300))


def _shifted(state: MPMState, offset) -> MPMState:
    return MPMState(state.particle_x + np.asarray(offset), state.particle_v, state.particle_F,
                    state.particle_C)


@pytest.mark.parametrize("dim", [2, 3])
def test_moving_node_box_leaves_no_stale_grid_values(dim):
    """Stepping a block in one corner, then far away, then back: the grid workspace keeps
    values from the earlier node boxes, which must never reach the particles or the
    boundary projections (friction walls and a slip plane cross both boxes)."""
    boundaries = (BoxWalls(kind="friction", friction=0.3),
                  Plane(point=[0.0] * dim, normal=[1.0] + [0.5] * (dim - 1), kind="slip"))
    model = scenes.small_model(dim, boundaries=boundaries, resolution=16)
    reference = MPMSimulator(model, kernels="reference")
    fast = MPMSimulator(model, kernels="numba")
    design = reference.design_space().defaults()
    base = scenes.perturbed_state(reference, scale=0.3)
    action = np.array([0.5, -0.5])
    rng = np.random.default_rng(4)
    for offset in ([-0.18] * dim, [0.2] * dim, [0.0] * dim, [-0.18] + [0.2] * (dim - 1)):
        state = _shifted(base, offset)
        a = reference.step(state, action, design, 1e-3)
        b = fast.step(state, action, design, 1e-3)
        for f in FIELDS:
            assert _relative(getattr(a, f), getattr(b, f)) <= 1e-12, (offset, f)
        g_next = MPMState(*(rng.standard_normal(getattr(state, f).shape) for f in FIELDS))
        ga = reference.step_vjp(state, action, design, 1e-3, g_next)
        gb = fast.step_vjp(state, action, design, 1e-3, g_next)
        for f in FIELDS:
            assert _relative(getattr(ga[0], f), getattr(gb[0], f)) <= 1e-12, (offset, f)
        assert _relative(ga[1], gb[1]) <= 1e-12
        for name, value in ga[2].items():
            assert _relative(value, gb[2][name]) <= 1e-12, (offset, name)


@pytest.mark.parametrize("dim", [2, 3])
def test_float32_adjoint_follows_float64(dim):
    """The float32 kernels' one-step adjoint matches float64 to single precision."""
    out = {}
    for dtype in ("float64", "float32"):
        model = scenes.small_model(dim, dtype=dtype)
        sim = MPMSimulator(model, kernels="numba")
        design = sim.design_space().defaults()
        state = scenes.perturbed_state(MPMSimulator(scenes.small_model(dim),
                                                    kernels="reference"), scale=0.3)
        state = MPMState(*(np.asarray(getattr(state, f), dtype=dtype) for f in FIELDS))
        g_next = MPMState(*(np.ones_like(getattr(state, f)) for f in FIELDS))
        out[dtype] = sim.step_vjp(state, np.array([0.4, -0.6]), design, 1e-3, g_next)
    for f in FIELDS:
        assert _relative(getattr(out["float64"][0], f), getattr(out["float32"][0], f)) <= 1e-4, f
    for name, value in out["float64"][2].items():
        assert _relative(value, out["float32"][2][name]) <= 1e-3, name
