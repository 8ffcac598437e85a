"""Contact along every body (``contact: along``): points spread along each body so that a
body cannot pass over an obstacle smaller than its length between two contact points."""

import numpy as np
import pytest

from codesign.testing import check_step_gradients
from sim_vine.kinematics import centerline_vertices
from sim_vine.model import ModelError
from sim_vine.obstacles import signed_distance
from sim_vine.scene import make_simulator
from sim_vine.step import step


def test_points_are_spread_along_every_body_at_most_the_gap_apart():
    sim = make_simulator(bodies=4, length=0.2, contact="along", contact_gap=0.02)
    bodies, offsets = sim.model.contact_points
    # 5 cm bodies: 3 points each, the distal end included (the proximal end is the parent's)
    np.testing.assert_array_equal(bodies, np.repeat(np.arange(4), 3))
    np.testing.assert_allclose(offsets, np.tile([-0.025 / 3, 0.025 / 3, 0.025], 4))
    assert make_simulator(bodies=4, length=0.2, contact="along").model.contact_count == 16
    everting = make_simulator(growth="evert", max_length=0.6, bodies=12, length=0.2,
                              contact="along")
    assert everting.model.contact_count == 48
    with pytest.raises((ModelError, ValueError), match="contact_gap"):
        make_simulator(bodies=4, length=0.2, contact="along", contact_gap=-0.01)


def _deepest_mm(sim, states, obstacle) -> float:
    """How far the centreline's densest samples go inside ``obstacle`` over ``states`` [mm]."""
    deepest = 0.0
    for state in states:
        vertices = centerline_vertices(sim.model, state.body_q)
        t = np.linspace(0.0, 1.0, 200)[:, None]
        samples = np.concatenate([a + t * (b - a) for a, b in zip(vertices[:-1], vertices[1:],
                                                                  strict=True)])
        distance, _, _ = signed_distance(obstacle, samples)
        deepest = max(deepest, -float(np.min(distance)))
    return 1e3 * deepest


def _peg_scene(contact: str):
    """Four 10 cm bodies held straight and level under gravity, a 2 cm peg 1.5 cm under the
    middle of the third body, friction 0.2; contact points every 5 mm with ``along``."""
    return make_simulator(bodies=4, length=0.4, stiffness=0.05, damping=0.002, friction=0.2,
                          gravity=[0.0, -9.81], contact=contact, contact_gap=0.005,
                          obstacles=[{"type": "circle", "center": [0.25, -0.025],
                                      "radius": 0.01}])


@pytest.mark.parametrize("contact", ["bodies", "along"])
def test_a_peg_under_the_middle_of_a_body_is_felt_only_with_contact_along(contact):
    # four 10 cm bodies held straight and level, released under gravity onto a 2 cm peg
    # 1.5 cm under the middle of the third body: with points only at the body ends the body
    # sags into the peg (measured 8.8 mm deep); with points every 5 mm along the
    # bodies it rests on it (measured 0.1 mm, within the gap's chord over the peg)
    sim = _peg_scene(contact)
    design = sim.design_space().defaults()
    state = sim.initial_state(design)
    states = [state]
    for _ in range(60):
        state = sim.step(state, np.array([0.0]), design, 1 / 120)
        states.append(state)
    deepest = _deepest_mm(sim, states, sim.model.obstacles[0])
    if contact == "along":
        assert deepest < 0.5
    else:
        assert deepest > 5.0


def test_gradients_with_contact_along_a_body(tip_gradcheck):
    # the peg scene above, growing at 5 cm/s, the third body resting on the peg at points
    # between its ends
    sim = _peg_scene("along")
    design = sim.design_space().defaults()
    state = sim.initial_state(design)
    for _ in range(40):
        state = sim.step(state, np.array([0.05]), design, 1 / 120)
    params, offset = sim._parameters(design)
    _, _, solution, _ = step(sim.arrays, sim.layout, sim.qp, state.body_q, state.body_qd,
                             0.05 + offset, params, 1 / 120)
    active = solution.active[sim.layout.contact].reshape(-1, 2).any(axis=1)
    _, offsets = sim.model.contact_points
    assert np.any(active & (offsets < sim.model.half_length))  # a point between the ends
    check_step_gradients(sim, dt=1 / 120, steps=1, state=state, action=np.array([0.05]),
                         design=design, eps=1e-6).assert_ok()
    tip_gradcheck(sim, state, design, steps=4, dt=1 / 120, rate=(0.05,)).assert_ok()
