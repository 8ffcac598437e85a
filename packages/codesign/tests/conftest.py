"""Shared fixtures for the core's tests: the closed-form test systems."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from systems import LinearSystem, SpringMass  # noqa: E402


@pytest.fixture
def linear_system():
    """A damped 2-state oscillator x' = A x + B u with x0 = (1, 0)."""
    return LinearSystem(np.array([[0.0, 1.0], [-2.0, -0.3]]), np.array([[0.0], [1.0]]),
                        x0=[1.0, 0.0])


@pytest.fixture
def spring_mass():
    """A damped spring-mass started at q = 1 m."""
    return SpringMass()
