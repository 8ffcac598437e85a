"""Inverse dynamics (RNEA), the mass matrix (CRBA) and forward kinematics against Pinocchio
on the same models, and the RNEA's forward-mode tangents against finite differences."""

from __future__ import annotations

import numpy as np
import pytest

from sim_rigid.dynamics import (
    bias_forces,
    dual,
    dual_rows,
    inverse_dynamics,
    inverse_dynamics_tangents,
    link_frames,
    mass_matrix,
    node_table,
)


def test_inverse_dynamics_equals_pinocchio(any_model, models, reference):
    import pinocchio as pin

    pin_model = reference.pinocchio_model(any_model)
    q, qd, qdd = models.random_point(any_model)
    expected = pin.rnea(pin_model, pin_model.createData(), q, qd, qdd)
    got = inverse_dynamics(any_model, any_model.parameters(), q, qd, qdd)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * np.abs(expected).max())


def test_bias_forces_are_the_inverse_dynamics_at_rest_acceleration(any_model, models, reference):
    import pinocchio as pin

    pin_model = reference.pinocchio_model(any_model)
    q, qd, _ = models.random_point(any_model, seed=1)
    expected = pin.nonLinearEffects(pin_model, pin_model.createData(), q, qd)
    got = bias_forces(any_model, any_model.parameters(), q, qd)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * np.abs(expected).max())


def test_mass_matrix_equals_pinocchio_and_the_rnea(any_model, models, reference):
    import pinocchio as pin

    pin_model = reference.pinocchio_model(any_model)
    q, _, _ = models.random_point(any_model, seed=2)
    expected = pin.crba(pin_model, pin_model.createData(), q)
    expected = np.triu(expected) + np.triu(expected, 1).T
    params = any_model.parameters()
    got = mass_matrix(any_model, params, q)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * np.abs(expected).max())
    d = any_model.coordinate_count
    columns = inverse_dynamics_tangents(any_model, params, q, np.zeros(d), np.zeros(d),
                                        tangents={"qdd": np.eye(d)})[1:]
    np.testing.assert_allclose(columns, got, rtol=0, atol=1e-12 * np.abs(got).max())
    assert np.linalg.eigvalsh(got)[0] > 0.0


def test_link_frames_equal_pinocchio(any_model, models, reference):
    import pinocchio as pin

    pin_model = reference.pinocchio_model(any_model)
    data = pin_model.createData()
    q, _, _ = models.random_point(any_model, seed=3)
    pin.forwardKinematics(pin_model, data, q)
    rotation, origin = link_frames(any_model, any_model.parameters(), q)
    # the centre of mass of the whole robot fixes every link frame's placement with its com
    com = pin.centerOfMass(pin_model, data, q)
    mass = any_model.link_mass
    world_com = origin + np.einsum("nij,nj->ni", rotation, any_model.link_com)
    np.testing.assert_allclose(mass @ world_com / mass.sum(), com, atol=1e-12)
    for link in range(any_model.link_count):
        assert np.allclose(rotation[link] @ rotation[link].T, np.eye(3), atol=1e-12)


@pytest.mark.parametrize("name", ["q", "qd", "qdd", "link_mass", "link_inertia",
                                  "joint_origin"])
def test_tangents_equal_finite_differences(any_model, models, name):
    params = any_model.parameters()
    q, qd, qdd = models.random_point(any_model, seed=4)
    point = {"q": q, "qd": qd, "qdd": qdd} | params
    rng = np.random.default_rng(5)
    direction = rng.standard_normal(np.shape(point[name]))
    tangent = inverse_dynamics_tangents(any_model, params, q, qd, qdd,
                                        tangents={name: direction[None]})[1]

    def tau(shift):
        moved = dict(point, **{name: point[name] + shift * direction})
        return inverse_dynamics(any_model, {k: moved[k] for k in params}, moved["q"],
                                moved["qd"], moved["qdd"])

    h = 1e-4
    fd = (8 * (tau(h) - tau(-h)) - (tau(2 * h) - tau(-2 * h))) / (12 * h)
    np.testing.assert_allclose(tangent, fd, rtol=0, atol=1e-8 * max(1.0, np.abs(fd).max()))


@pytest.mark.parametrize("name", ["q", "qd", "joint_origin", "contact_point",
                                  "contact_stiffness", "contact_damping", "friction",
                                  "friction_stiffness"])
@pytest.mark.parametrize("speed", [0.02, 1.0])
def test_contact_tangents_equal_finite_differences(models, name, speed):
    # a tilted box sunk into a plane, its corners sticking (slow) or sliding (fast)
    import dataclasses

    from sim_rigid.description import load_description, load_obstacles

    model = dataclasses.replace(load_description(models.box_description()),
                                **load_obstacles([{"type": "plane"}]), friction_stiffness=20.0)
    params = model.parameters()
    q = np.array([0.0, 0.0, 0.099, 0.02, 0.01, -0.015])
    qd = speed * np.array([1.0, 0.5, -0.05, 0.3, -0.2, 0.1])
    point = {"q": q, "qd": qd} | params
    direction = np.random.default_rng(10).standard_normal(np.shape(point[name]))
    tangent = inverse_dynamics_tangents(model, params, q, qd, np.zeros(6),
                                        tangents={name: direction[None]})[1]

    def tau(shift):
        moved = dict(point, **{name: point[name] + shift * direction})
        return inverse_dynamics(model, {k: moved[k] for k in params}, moved["q"], moved["qd"],
                                np.zeros(6))

    h = 1e-7 * max(1.0, float(np.abs(point[name]).max()))
    fd = (8 * (tau(h) - tau(-h)) - (tau(2 * h) - tau(-2 * h))) / (12 * h)
    np.testing.assert_allclose(tangent, fd, rtol=0, atol=1e-6 * max(1.0, np.abs(fd).max()))


def test_a_free_joint_expands_into_six_nodes(models):
    model = models.mixed_tree()
    table = node_table(model)
    # free joint: 6 nodes, three revolute/prismatic links, one fixed
    assert len(table.parent) == 6 + 4
    assert table.link[:6].tolist() == [-1] * 5 + [0]
    assert table.coordinate[:6].tolist() == list(range(6))
    assert (table.coordinate[table.kind == 2] == -1).all()


def test_tangents_need_one_direction_count(models):
    model = models.arm4()
    d = model.coordinate_count
    with pytest.raises(ValueError, match="same number of directions"):
        inverse_dynamics_tangents(model, model.parameters(), np.zeros(d), np.zeros(d),
                                  np.zeros(d), tangents={"q": np.eye(d), "qd": np.eye(d)[:2]})


def test_dual_stacks_a_value_over_its_tangent_and_zero_without_one():
    value = np.array([1.0, 2.0])
    np.testing.assert_array_equal(dual(value, np.array([[3.0, 4.0]]), 2), [[1, 2], [3, 4]])
    np.testing.assert_array_equal(dual(value, None, 3), [[1, 2], [0, 0], [0, 0]])


def test_dual_rows_count_the_directions_plus_the_value():
    assert dual_rows({}) == 1
    assert dual_rows({"q": np.zeros((4, 2)), "link_mass": np.zeros((4, 3))}) == 5
    with pytest.raises(ValueError, match="same number of directions"):
        dual_rows({"q": np.zeros((4, 2)), "qd": np.zeros((2, 2))})
