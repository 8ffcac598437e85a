"""The numba kernels equal the array-level reference (forward and adjoint)."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

from codesign.backend import is_gpu_available
from sim_mpm import BoxWalls, HeightField, MPMSimulator, MPMState, Plane

_spec = importlib.util.spec_from_file_location(
    "mpm_scenes", pathlib.Path(__file__).with_name("mpm_scenes.py"))
scenes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scenes)

FIELDS = ("particle_x", "particle_v", "particle_F", "particle_C")
ACTION = np.array([0.4, -0.6, 0.8])


def _relative(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b)))
                 / max(float(np.max(np.abs(np.asarray(a)))), 1e-300))


def _compare(model, state_scale=0.3, steps=3, parallel=False, tolerance=1e-12):
    reference = MPMSimulator(model, kernels="reference")
    fast = MPMSimulator(model, kernels="numba", parallel=parallel)
    design = reference.design_space().defaults()
    state = scenes.perturbed_state(reference, scale=state_scale)
    action = ACTION[: model.action_size]
    for _ in range(steps):
        ref_next = reference.step(state, action, design, 1e-3)
        fast_next = fast.step(state, action, design, 1e-3)
        for f in FIELDS:
            assert _relative(getattr(ref_next, f), getattr(fast_next, f)) <= tolerance, f
        rng = np.random.default_rng(2)
        g_next = MPMState(*(rng.standard_normal(getattr(state, f).shape).astype(model.dtype)
                            for f in FIELDS))
        ref_g = reference.step_vjp(state, action, design, 1e-3, g_next)
        fast_g = fast.step_vjp(state, action, design, 1e-3, g_next)
        for f in FIELDS:
            assert _relative(getattr(ref_g[0], f), getattr(fast_g[0], f)) <= tolerance, f
        assert _relative(ref_g[1], fast_g[1]) <= tolerance
        for name, value in ref_g[2].items():
            assert _relative(value, fast_g[2][name]) <= tolerance, name
        state = ref_next


@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("material,exponent", [("corotated", 0), ("neo_hookean", 3)])
@pytest.mark.parametrize("kind", ["sticky", "slip", "separate", "friction"])
def test_numba_equals_reference(dim, material, exponent, kind):
    model = scenes.contact_model(dim, material=material,
                                 boundaries=(BoxWalls(kind=kind, friction=0.3),),
                                 spacing=0.5 if dim == 2 else 0.75)
    if exponent:
        model = scenes.small_model(dim, material=material, exponent=exponent, cables=True,
                                   boundaries=(BoxWalls(kind=kind, friction=0.3, margin=5),))
    _compare(model)


@pytest.mark.parametrize("dim", [2, 3])
def test_numba_equals_reference_corotated_with_incompressibility(dim):
    """Corotated with p = 2 takes the stress loops compiled with run-time switches (the
    loops for p = 0 are compiled with constant ones)."""
    _compare(scenes.small_model(dim, material="corotated", exponent=2, cables=True,
                                boundaries=(BoxWalls(kind="sticky", margin=5),)))


def test_numba_equals_reference_planes_and_terrain():
    _compare(scenes.contact_model(2, boundaries=(
        Plane(point=[0.0, 0.27], normal=[0.1, 1.0], kind="friction", friction=0.3),
        HeightField(heights=[0.24, 0.26, 0.27, 0.25], spacing=0.35, kind="separate"))))
    terrain = np.array([[0.24, 0.26, 0.25], [0.27, 0.25, 0.26], [0.25, 0.24, 0.26]])
    _compare(scenes.contact_model(3, spacing=0.75, boundaries=(
        HeightField(heights=terrain, spacing=0.4, kind="friction", friction=0.5),)))


def test_parallel_builds_equal_reference():
    _compare(scenes.contact_model(2), parallel=True)
    _compare(scenes.contact_model(3, spacing=0.75), parallel=True)


def test_inverted_particles_use_the_svd_fallback():
    """det F < 0 takes the SVD branch of the 3D polar decomposition in both paths."""
    model = scenes.small_model(3)
    reference = MPMSimulator(model, kernels="reference")
    fast = MPMSimulator(model, kernels="numba")
    design = reference.design_space().defaults()
    state = scenes.perturbed_state(reference, scale=0.3)
    F = state.particle_F.copy()
    F[:5, :, 0] *= -1.0
    state = MPMState(state.particle_x, state.particle_v, F, state.particle_C)
    a = reference.step(state, ACTION[:2], design, 1e-3)
    b = fast.step(state, ACTION[:2], design, 1e-3)
    for f in FIELDS:
        assert _relative(getattr(a, f), getattr(b, f)) <= 1e-12


@pytest.mark.parametrize("dim", [2, 3])
def test_float32_matches_float64(dim):
    """float32 kernels follow the float64 trajectory to single precision."""
    out = {}
    for dtype in ("float64", "float32"):
        sim = MPMSimulator(scenes.contact_model(dim, dtype=dtype,
                                                spacing=0.5 if dim == 2 else 0.75),
                           kernels="numba")
        design = sim.design_space().defaults()
        state = sim.initial_state(design)
        for _ in range(20):
            state = sim.step(state, ACTION, design, 1e-3)
        assert state.particle_x.dtype == np.dtype(dtype)
        out[dtype] = state
    np.testing.assert_allclose(out["float32"].particle_x, out["float64"].particle_x, atol=1e-5)
    np.testing.assert_allclose(out["float32"].particle_F, out["float64"].particle_F, atol=1e-4)


@pytest.mark.skipif(not is_gpu_available(), reason="CuPy with a CUDA device is not available")
@pytest.mark.parametrize("dim", [2, 3])
def test_cupy_reference_equals_numpy(dim):
    import cupy

    model = scenes.contact_model(dim, spacing=0.5 if dim == 2 else 0.75)
    cpu = MPMSimulator(model, kernels="reference")
    gpu = MPMSimulator(model, backend="cupy", kernels="reference")
    design = cpu.design_space().defaults()
    state = scenes.perturbed_state(cpu, scale=0.3)
    gpu_state = MPMState(*(cupy.asarray(getattr(state, f)) for f in FIELDS))
    a = cpu.step(state, ACTION, design, 1e-3)
    b = gpu.step(gpu_state, ACTION, design, 1e-3)
    for f in FIELDS:
        assert _relative(getattr(a, f), cupy.asnumpy(getattr(b, f))) <= 1e-12
    g = MPMState(*(np.ones_like(getattr(state, f)) for f in FIELDS))
    ga = cpu.step_vjp(state, ACTION, design, 1e-3, g)
    gb = gpu.step_vjp(gpu_state, ACTION, design, 1e-3,
                      MPMState(*(cupy.asarray(getattr(g, f)) for f in FIELDS)))
    for f in FIELDS:
        assert _relative(getattr(ga[0], f), cupy.asnumpy(getattr(gb[0], f))) <= 1e-12
    assert _relative(ga[1], gb[1]) <= 1e-12
