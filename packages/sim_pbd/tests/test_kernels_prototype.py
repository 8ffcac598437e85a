"""The compiled second-order step against its origin, the NumPy prototype
``benchmarks/pbd_second_order_prototype.py`` (half kicks, Cayley readout, SHAKE projections,
midpoint dampers; Gauss-Seidel, no joint limits, no compliance): Baxter's left arm, equal to
round-off over several steps under actuation."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from sim_pbd.scene import make_simulator
from sim_pbd.step import step

_PROTOTYPE = Path(__file__).parents[3] / "benchmarks" / "pbd_second_order_prototype.py"
ROUND_OFF = 1e-11
"""Largest difference accepted, relative to the state's largest entry (at least 1): the
positions' round-off (1e-15 m) over a substep of 1 ms in the velocities, over a few steps."""


def _prototype():
    spec = importlib.util.spec_from_file_location("pbd_second_order_prototype", _PROTOTYPE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("damping", [0.7, 0.0])
def test_the_compiled_second_order_equals_the_prototype_on_baxters_arm(damping):
    prototype = _prototype()
    substeps, iterations = 10, 4
    sim = make_simulator(urdf="baxter", joints=prototype.LEFT_ARM, joint_limits=False,
                         initial_positions=prototype.POSE, damping=damping)
    design = sim.design_space().defaults()
    params = sim.parameters(design)
    args = argparse.Namespace(kick=True, cayley=True, shake=True, damping="midpoint",
                              iterations=iterations, substeps_now=substeps)
    action = np.array([0.5, -1.0, 0.3, 0.2, -0.1, 0.05, 0.02])  # [N m]
    ours = expected = sim.initial_state(design)
    for _ in range(5):
        expected = prototype.prototype_step(sim.model, expected, action, params, 0.01, args)
        ours = step(sim.model, ours, action, params, 0.01, substeps=substeps,
                    iterations=iterations, solver="gauss_seidel", kernels="numba",
                    scheme="second_order")
    for field in ("link_x", "link_q", "link_v", "link_w"):
        value, reference = getattr(ours, field), getattr(expected, field)
        scale = max(1.0, float(np.abs(reference).max()))
        assert float(np.abs(value - reference).max()) <= ROUND_OFF * scale, field
