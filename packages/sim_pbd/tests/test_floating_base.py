"""A floating base moves as a free system: its joints' torques and constraints are internal,
so the total momentum is conserved, and its centre of mass falls like a particle."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sim_pbd import PBDState
from sim_pbd.options import SCHEMES
from sim_pbd.rotations import quat_to_matrix
from sim_pbd.step import step

SETTINGS = dict(substeps=10, iterations=2)


def _free_chain(models, gravity):
    model = models.floating(models.chain_3d())
    model = dataclasses.replace(model, gravity=np.asarray(gravity, dtype=np.float64))
    state = models.state_at(model, [-0.3, 0.05], [1.0, 0.2])
    # the whole chain also drifts and turns as one rigid body (joint rates unchanged)
    drift, turn = np.array([0.3, -0.2, 0.5]), np.array([0.4, 0.1, -0.7])
    state = PBDState(state.link_x, state.link_q,
                     state.link_v + drift + np.cross(turn, state.link_x - state.link_x[0]),
                     state.link_w + turn)
    return model, state, model.parameters()


def _momenta(state: PBDState, params):
    """Total linear momentum [kg m/s] (3,) and angular momentum about the origin [kg m²/s]
    (3,)."""
    mass = params["link_mass"]
    linear = mass[:, None] * state.link_v
    spin = [quat_to_matrix(q) @ inertia @ quat_to_matrix(q).T @ w
            for q, inertia, w in zip(state.link_q, params["link_inertia"], state.link_w,
                                     strict=True)]
    angular = np.cross(state.link_x, linear) + np.array(spin)
    return linear.sum(axis=0), angular.sum(axis=0)


def _run(model, state, params, actions, dt=0.01, substeps=SETTINGS["substeps"], **options):
    states = [state]
    for action in actions:
        states.append(step(model, states[-1], action, params, dt, substeps=substeps,
                           iterations=SETTINGS["iterations"], **options))
    return states


def _angular_drift(models, substeps):
    """The largest relative change of the angular momentum over 1 s of a free chain driven
    by torques that swing its joints back and forth (up to 14 rad/s)."""
    model, state, params = _free_chain(models, (0.0, 0.0, 0.0))
    actions = [np.array([0.5, -1.0]) * np.sin(2 * np.pi * k / 50) for k in range(100)]
    states = _run(model, state, params, actions, substeps=substeps)
    linear0, angular0 = _momenta(states[0], params)
    for later in states[1:]:
        # every correction and torque is applied equal and opposite: exact to round-off
        np.testing.assert_allclose(_momenta(later, params)[0], linear0, atol=1e-12)
    return max(np.linalg.norm(_momenta(later, params)[1] - angular0) for later in states[1:]
               ) / np.linalg.norm(angular0)


def test_joint_torques_keep_a_free_chains_momentum(models):
    # linear momentum exactly; angular momentum to first order in the substep (the
    # projection's levers and the explicit gyroscopic term move within a substep)
    coarse, fine = _angular_drift(models, 10), _angular_drift(models, 20)
    assert 0 < coarse < 4e-3  # 2.8e-3 measured
    assert 0.4 < fine / coarse < 0.6


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_free_chain_falls_like_a_particle(models, scheme):
    gravity = np.array([0.0, 0.0, -9.81])
    model, state, params = _free_chain(models, gravity)
    mass = params["link_mass"]
    steps, dt = 50, 0.01
    states = _run(model, state, params, [np.zeros(2)] * steps, dt, scheme=scheme)
    com0 = mass @ state.link_x / mass.sum()
    velocity0 = mass @ state.link_v / mass.sum()
    h = dt / SETTINGS["substeps"]
    for k, later in enumerate(states):
        n = k * SETTINGS["substeps"]
        # second order (leapfrog between half kicks): the parabola x_0 + t v_0 + g t² / 2
        # exactly; first order (symplectic Euler): x_0 + n h v_0 + h² g n (n + 1) / 2
        fall = n * n / 2 if scheme == "second_order" else n * (n + 1) / 2
        expected = com0 + n * h * velocity0 + h * h * gravity * fall
        np.testing.assert_allclose(mass @ later.link_x / mass.sum(), expected, atol=1e-12)
        np.testing.assert_allclose(mass @ later.link_v / mass.sum(), velocity0 + n * h * gravity,
                                   atol=1e-12)
