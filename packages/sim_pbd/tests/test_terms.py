"""Observers: joint positions and rates, a point on a link; their VJPs against finite
differences."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.testing import gradcheck
from sim_pbd.kinematics import joint_positions
from sim_pbd.simulator import PBDSimulator
from sim_pbd.state import PBDState
from sim_pbd.terms import JointObserver, LinkPointObserver


@pytest.fixture
def moving(models):
    model = models.chain_3d()
    sim = PBDSimulator(model)
    state = models.state_at(model, np.array([0.3, -0.2, 0.5])[: model.joint_count],
                     np.array([0.5, 0.1, -0.4])[: model.joint_count])
    return sim, state


def _check(observer, sim, state):
    design = sim.design_space().defaults()
    weights = np.linspace(-1.0, 1.0, observer.size)

    def loss(inputs):
        s = PBDState(**inputs["state"])
        return float(weights @ observer.observe(s, {**design, **inputs["design"]}))

    g_state, g_design = observer.observe_vjp(state, design, weights)
    inputs = {"state": dict(vars(state)),
              "design": {name: design[name] for name in g_design}}
    gradients = {"state": dict(vars(g_state)), "design": g_design}
    gradcheck(loss, inputs, gradients, eps=1e-6, tolerance=1e-6).assert_ok()


def test_joint_observer_reads_the_joints_and_its_vjp_matches(moving):
    sim, state = moving
    observer = JointObserver(simulator=sim)
    q, qd = joint_positions(sim.model, sim.model.parameters(), state)
    np.testing.assert_allclose(observer.observe(state, {}), np.concatenate([q, qd]))
    _check(observer, sim, state)


def test_link_point_observer_and_its_vjp(moving):
    sim, state = moving
    observer = LinkPointObserver(simulator=sim, point=[0.1, 0.0, 0.05])
    _check(observer, sim, state)
    with pytest.raises(ValueError, match="unknown link 'hand'"):
        LinkPointObserver(simulator=sim, link="hand")


def test_a_point_on_a_floating_base_is_refused_by_name(models):
    sim = PBDSimulator(models.floating(models.chain_3d()))
    root = sim.model.link_names[0]
    with pytest.raises(ValueError, match=rf"link {root!r} hangs on no joint"):
        LinkPointObserver(simulator=sim, link=root)
    LinkPointObserver(simulator=sim)  # the last link hangs on a joint
