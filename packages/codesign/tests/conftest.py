"""Shared fixtures for the core's tests: the closed-form test systems, the test plugin."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from plugin_fixture import fixtures_plugin  # noqa: E402
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


@pytest.fixture
def reset_fake_plugin():
    """The test plugin's switches off and its rollout count zero, before and after a test
    (files that run it use ``pytestmark = pytest.mark.usefixtures("reset_fake_plugin")``)."""
    fx = fixtures_plugin()
    fx.HANG_AFTER = fx.INTERRUPT_AFTER = 0
    fx.reset_calls()
    yield
    fx.HANG_AFTER = fx.INTERRUPT_AFTER = 0


@pytest.fixture(scope="module")
def manager():
    """The test plugin's plugin manager."""
    return fixtures_plugin().plugin_manager()
