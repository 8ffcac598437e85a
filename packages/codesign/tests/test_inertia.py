"""The inertia tensor checks."""

import numpy as np

from codesign.inertia import inertia_problem, link_parameters


def test_physical_tensors_pass_and_a_thin_rod_meets_the_triangle_inequality():
    rod = np.diag([0.0 + 1e-12, 0.5, 0.5])
    assert inertia_problem(np.array([np.diag([1.0, 2.0, 2.5]), rod])) is None
    assert inertia_problem(np.zeros((0, 3, 3))) is None


def test_each_unphysical_tensor_is_named_with_its_index_and_why():
    good = np.diag([1.0, 1.0, 1.0])
    asymmetric = np.array([[1.0, 0.1, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    index, why = inertia_problem(np.array([good, asymmetric]))
    assert index == 1 and "not symmetric" in why
    index, why = inertia_problem(np.array([np.diag([1.0, -1.0, 1.0])]))
    assert index == 0 and "not positive definite" in why
    index, why = inertia_problem(np.array([good, good, np.diag([1.0, 1.0, 3.0])]))
    assert index == 2 and "triangle inequality" in why


def test_a_flat_disc_and_a_rotated_body_pass_and_a_rod_without_axial_moment_fails():
    rotation = np.linalg.qr(np.arange(9.0).reshape(3, 3) + np.eye(3))[0]
    physical = [np.diag([1.0, 1.0, 2.0]),  # a flat disc: the triangle inequality's equality
                rotation @ np.diag([0.3, 0.4, 0.7]) @ rotation.T]
    assert inertia_problem(np.array(physical)) is None
    index, why = inertia_problem(np.array([*physical, np.diag([1.0, 1.0, 0.0])]))
    assert index == 2 and "not positive definite" in why  # a thin rod has no axial moment
    index, why = inertia_problem(np.array([np.diag([0.3, 0.4, 0.71]), *physical]))
    assert index == 0 and "triangle" in why


def test_link_parameters_default_to_the_model_and_scale_by_its_means():
    mass, inertia = np.array([1.0, 3.0]), np.array([np.diag([0.3, 0.3, 0.6])] * 2)
    link_mass, link_inertia = link_parameters(mass, inertia, frame="body frame")
    assert (link_mass.name, link_mass.shape, link_mass.scale) == ("link.mass", (2,), 2.0)
    np.testing.assert_array_equal(link_mass.lower_array(), [0.0, 0.0])
    assert (link_inertia.name, link_inertia.shape) == ("link.inertia", (2, 3, 3))
    assert np.isclose(link_inertia.scale, 0.4) and "body frame" in link_inertia.doc
    np.testing.assert_array_equal(link_inertia.default_array(), inertia)
    assert link_parameters(mass, inertia * 0.0 + 1e-9 * np.eye(3), frame="f")[1].scale == 1e-6
