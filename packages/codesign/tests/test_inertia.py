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
