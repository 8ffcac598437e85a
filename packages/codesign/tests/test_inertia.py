"""The inertia tensor checks."""

import numpy as np

from codesign.inertia import inertia_problem


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
