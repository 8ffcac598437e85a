"""The numba kernels' fast paths (grid passes restricted to the particles' node box, threaded
scatters into per-chunk grid copies, adjoints that reuse the forward pass's stresses) still
equal the reference."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

from sim_mpm import BoxWalls, MPMSimulator, MPMState, Plane, build_model

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


def _step_and_vjp(sim, state, action, design):
    g_next = MPMState(*(np.ones_like(getattr(state, f)) for f in FIELDS))
    return sim.step(state, action, design, 1e-3), sim.step_vjp(state, action, design, 1e-3,
                                                               g_next)


def test_threaded_scatters_are_deterministic_and_match_one_thread():
    """The per-chunk grid copies are summed in chunk order: two threaded runs agree bit for
    bit, and with every thread count they equal the serial kernels to round-off."""
    import numba

    model = scenes.contact_model(3, spacing=0.75)
    serial = MPMSimulator(model, kernels="numba")
    threaded = MPMSimulator(model, kernels="numba", parallel=True)
    design = serial.design_space().defaults()
    state = scenes.perturbed_state(serial, scale=0.3)
    action = np.array([0.4, -0.6, 0.8])
    expected = _step_and_vjp(serial, state, action, design)
    first = _step_and_vjp(threaded, state, action, design)
    again = _step_and_vjp(threaded, state, action, design)
    for f in FIELDS:
        np.testing.assert_array_equal(getattr(first[0], f), getattr(again[0], f))
        np.testing.assert_array_equal(getattr(first[1][0], f), getattr(again[1][0], f))
    threads = numba.get_num_threads()
    try:
        for count in range(1, threads + 1):
            numba.set_num_threads(count)
            result = _step_and_vjp(threaded, state, action, design)
            for f in FIELDS:
                assert _relative(getattr(expected[0], f), getattr(result[0], f)) <= 1e-12
                assert _relative(getattr(expected[1][0], f),
                                 getattr(result[1][0], f)) <= 1e-12
            assert _relative(expected[1][1], result[1][1]) <= 1e-12
            for name, value in expected[1][2].items():
                assert _relative(value, result[1][2][name]) <= 1e-12, name
    finally:
        numba.set_num_threads(threads)


def test_single_particle_with_more_chunks_than_particles():
    """Empty chunks leave an empty node box, which the grid pass must skip."""
    x = np.array([[0.5, 0.5]])
    model = build_model(particle_x=x, dim=2, grid_resolution=16, dx=1 / 16, youngs_modulus=10.0,
                        poissons_ratio=0.3, density=1.0,
                        boundaries=(BoxWalls(kind="slip"),))
    reference = MPMSimulator(model, kernels="reference")
    threaded = MPMSimulator(model, kernels="numba", parallel=True)
    design = reference.design_space().defaults()
    state = reference.initial_state(design)
    a = _step_and_vjp(reference, state, np.zeros(0), design)
    b = _step_and_vjp(threaded, state, np.zeros(0), design)
    for f in FIELDS:  # C is zero up to round-off here: absolute tolerance
        np.testing.assert_allclose(getattr(b[0], f), getattr(a[0], f), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(getattr(b[1][0], f), getattr(a[1][0], f), rtol=1e-12,
                                   atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_vector_lane_intrinsics_equal_scalar_arithmetic(dtype):
    """add4 and row_sums (four-lane vector code the numba kernels emit directly) against
    NumPy."""
    import numba

    from sim_mpm._particle_kernels import add4, row_sums

    @numba.njit
    def run(array, weights, lanes):
        add4(array, 4, weights[0], lanes[0], lanes[1], lanes[2], lanes[3])
        return row_sums(array, 4, (weights[0], weights[1], weights[2], weights[3],
                                   weights[4], weights[5]))

    rng = np.random.default_rng(0)
    array = rng.standard_normal(20).astype(dtype)
    weights = rng.standard_normal(6).astype(dtype)
    lanes = rng.standard_normal(4).astype(dtype)
    expected = array.copy()
    expected[4:8] += weights[0] * lanes
    nodes = expected[4:16].reshape(3, 4)
    sums = np.asarray(run(array, weights, lanes))
    np.testing.assert_allclose(array, expected, rtol=1e-6)
    np.testing.assert_allclose(sums[:4], weights[:3] @ nodes, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sums[4:], weights[3:] @ nodes, rtol=1e-5, atol=1e-6)


_THRESHOLD_PROBES = '''
import json
import sys

import numba
import numpy as np

sys.path.insert(0, sys.argv[1])
N = 20
reads = ", ".join(f"a{k}" for k in range(N))
source = {
    # 20 arrays written: more overlap checks than LLVM's default limit of 128
    "memory": f"def probe(o, {reads}):\\n    for i in range(o.shape[0]):\\n"
              + "".join(f"        a{k}[i] = o[i] * a{k}[i]\\n" for k in range(N)),
    # 21 strided arrays: more stride checks than LLVM's default limit of 16
    "scev": f"def probe(o, {reads}):\\n    for i in range(o.shape[0]):\\n"
            f"        o[i] = {' + '.join(f'a{k}[i]' for k in range(N))}\\n",
}


# one strided array read, within LLVM's default limits: it vectorizes plainly wherever the
# target's cost model takes strided loops at all (AMD's znver3 does not)
control = "def probe(o, a0):\\n    for i in range(o.shape[0]):\\n        o[i] = 2.0 * a0[i]\\n"


def vectorized(text, arrays, **options):
    namespace = {}
    exec(text, namespace)
    probe = numba.njit(**options)(namespace["probe"])
    probe(*arrays)
    return "vector.body" in next(iter(probe.inspect_llvm().values()))


def probes(**options):
    return [vectorized(text, [np.ones(16) if kind == "memory" else np.ones((16, 2))[:, 0]
                              for _ in range(N + 1)], **options)
            for kind, text in source.items()]


strided = vectorized(control, [np.ones((16, 2))[:, 0] for _ in range(2)])
before = probes()
import mpm_scenes
from sim_mpm import MPMSimulator
from sim_mpm._particle_kernels import _KernelCompiler

simulator = MPMSimulator(mpm_scenes.small_model(2))
state = simulator.initial_state(simulator.design_space().defaults())
simulator.step(state, np.zeros(simulator.action_size), simulator.design_space().defaults(),
               1e-3)
raised = probes(pipeline_class=_KernelCompiler)
after = probes()
print(json.dumps([strided, before, raised, after]))
'''


def test_vectorizer_thresholds_are_raised_only_while_kernels_compile():
    """Importing sim_mpm and stepping it leave LLVM's options as they were: loops that
    need more run-time checks than LLVM allows by default vectorize when compiled as
    sim_mpm's kernels are, and not when compiled plainly, before or after (in a fresh
    interpreter: the options are process-wide). The stride checks' probe shows the raised
    limit only on targets whose cost model vectorizes a strided loop at all, which a
    one-array strided loop tells."""
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _THRESHOLD_PROBES,
                          str(pathlib.Path(__file__).parent)],
                         capture_output=True, text=True, check=True).stdout
    strided, before, raised, after = json.loads(out.splitlines()[-1])
    assert raised == [True, strided]
    assert before == after == [False, False]
