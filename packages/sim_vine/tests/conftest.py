"""Shared builders for the sim_vine tests."""

from __future__ import annotations

import numpy as np
import pytest

from sim_vine import VineModel, VineSimulator


def run(sim, steps: int, rate: float = 0.1, dt: float = 0.01, design=None, state=None):
    """Step ``sim`` ``steps`` times at a constant growth rate; returns (states, design)."""
    design = sim.design_space().defaults() if design is None else design
    state = sim.initial_state(design) if state is None else state
    states = [state]
    for _ in range(steps):
        states.append(sim.step(states[-1], np.array([rate]), design, dt))
    return states, design


@pytest.fixture
def runner():
    """The :func:`run` helper."""
    return run


@pytest.fixture
def small_vine():
    """A 6-body vine without obstacles, slightly bent, under gravity."""
    return VineSimulator(VineModel(body_count=6, length=0.2, initial_angles=0.1,
                                   gravity=(0.0, -9.81)))
