"""The compiled dynamics equal the NumPy reference (to round-off), and so do whole steps
and their VJPs through each."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sim_rigid import RigidState, dynamics, kernels
from sim_rigid.contact import COEFFICIENTS
from sim_rigid.description import load_description, load_obstacles
from sim_rigid.step import NewtonError, step, step_vjp


def test_rnea_tangents_equal_the_reference(any_model, models):
    params = any_model.parameters() | models.tilted(any_model, 5)
    q, qd, qdd = models.random_point(any_model, seed=6)
    d, n = any_model.coordinate_count, any_model.link_count
    rng = np.random.default_rng(7)
    tangents = {"q": rng.standard_normal((3, d)), "qd": rng.standard_normal((3, d)),
                "qdd": rng.standard_normal((3, d)), "link_mass": rng.standard_normal((3, n)),
                "link_inertia": rng.standard_normal((3, n, 3, 3)),
                "joint_origin": rng.standard_normal((3, n, 3)),
                "joint_axis": rng.standard_normal((3, n, 3))}
    expected = dynamics.inverse_dynamics_tangents(any_model, params, q, qd, qdd,
                                                  tangents=tangents)
    got = kernels.inverse_dynamics_tangents(any_model, params, q, qd, qdd, tangents=tangents)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-13 * np.abs(expected).max())
    plain = kernels.inverse_dynamics_tangents(any_model, params, q, qd, qdd)
    np.testing.assert_allclose(plain[0], expected[0], rtol=0,
                               atol=1e-13 * np.abs(expected).max())


def test_the_compiled_recursion_takes_no_tangents_along_the_centres_of_mass(models):
    model = models.arm4()
    q = np.zeros(4)
    with pytest.raises(ValueError, match="keeps the centres of mass constant"):
        kernels.inverse_dynamics_tangents(model, model.parameters(), q, q, q,
                                          tangents={"link_com": np.ones((1, 4, 3))})


def test_mass_matrix_equals_the_reference(any_model, models):
    params = any_model.parameters() | models.tilted(any_model, 5)
    q, _, _ = models.random_point(any_model, seed=8)
    expected = dynamics.mass_matrix(any_model, params, q)
    np.testing.assert_allclose(kernels.mass_matrix(any_model, params, q), expected, rtol=0,
                               atol=1e-14 * np.abs(expected).max())


def test_steps_and_vjps_equal_the_reference(any_model, models):
    params = any_model.parameters() | models.tilted(any_model, 4)
    d = any_model.coordinate_count
    state = RigidState(any_model.joint_rest, np.linspace(-1.0, 1.0, d), any_model.joint_rest,
                       np.zeros(d), np.asarray(0, dtype=np.int64))
    action = np.linspace(0.5, -0.5, len(any_model.actuated))
    g_next = RigidState(*(np.linspace(-1.0, 2.0, d) for _ in range(4)), None)
    for _ in range(3):
        compiled = step(any_model, state, action, params, 0.01, kernels="numba")
        reference = step(any_model, state, action, params, 0.01, kernels="numpy")
        for field in ("joint_q", "joint_qd"):
            np.testing.assert_allclose(getattr(compiled, field), getattr(reference, field),
                                       rtol=0, atol=1e-12)
        g_compiled = step_vjp(any_model, state, action, params, 0.01, g_next, kernels="numba")
        g_reference = step_vjp(any_model, state, action, params, 0.01, g_next,
                               kernels="numpy")
        np.testing.assert_allclose(g_compiled[0].joint_q, g_reference[0].joint_q, rtol=1e-10)
        np.testing.assert_allclose(g_compiled[1], g_reference[1], rtol=1e-10)
        for name, value in g_reference[2].items():
            np.testing.assert_allclose(g_compiled[2][name], value, rtol=1e-9,
                                       atol=1e-12 * np.abs(value).max(initial=0.0))
        state = compiled


def test_contact_forces_and_their_tangents_equal_the_reference(models):
    # a tilted box sunk into a plane and a box obstacle, sliding and spinning: both
    # friction branches (the slow corners stick) and every tangent
    obstacles = load_obstacles([{"type": "plane"}, {"type": "box", "center": [0.1, 0, -0.2],
                                                     "half_extents": [0.1, 0.3, 0.2],
                                                     "rpy": [0.1, 0.0, 0.2]}])
    model = dataclasses.replace(load_description(models.box_description()), **obstacles,
                                friction_stiffness=20.0)
    params = model.parameters()
    q = np.array([0.0, 0.0, 0.099, 0.02, 0.01, -0.015])
    qd = np.array([0.02, 0.01, -0.05, 0.3, -0.2, 0.1])
    rng = np.random.default_rng(9)
    tangents = {"q": rng.standard_normal((4, 6)), "qd": rng.standard_normal((4, 6)),
                "joint_origin": rng.standard_normal((4, 1, 3)),
                "contact_point": rng.standard_normal((4, 8, 3))} | {
        name: rng.standard_normal(4) for name in COEFFICIENTS}
    expected = dynamics.inverse_dynamics_tangents(model, params, q, qd, np.zeros(6),
                                                  tangents=tangents)
    got = kernels.inverse_dynamics_tangents(model, params, q, qd, np.zeros(6),
                                            tangents=tangents)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * np.abs(expected).max())
    # the contacts act: the plane holds the box up with about its weight and more
    assert abs(expected[0, 2]) > 5.0


def _identity_tangents(blocks: dict) -> dict:
    """One tangent direction per scalar of each named parameter of shape ``blocks[name]``."""
    total = sum(int(np.prod(shape, dtype=np.int64)) for shape in blocks.values())
    tangents, start = {}, 0
    for name, shape in blocks.items():
        size = int(np.prod(shape, dtype=np.int64))
        block = np.zeros((total, size))
        block[start:start + size] = np.eye(size)
        tangents[name] = block.reshape((total, *shape))
        start += size
    return tangents


def _box_on_obstacles(models, **fields):
    """The free box sunk into a plane beside a turned box obstacle (contact on both)."""
    obstacles = load_obstacles([{"type": "plane"}, {"type": "box", "center": [0.1, 0, -0.2],
                                                     "half_extents": [0.1, 0.3, 0.2],
                                                     "rpy": [0.1, 0.0, 0.2]}])
    return dataclasses.replace(load_description(models.box_description()), **obstacles,
                               friction_stiffness=20.0, **fields)


def _parameter_vjp_matches_tangents(model, params, q, qd, qdd):
    c = len(model.contact_link)
    blocks = {"link_mass": (model.link_count,), "link_inertia": (model.link_count, 3, 3),
              "contact_point": (c, 3), "contact_area": (c,)} | {
        name: () for name in COEFFICIENTS}
    adjoint = np.random.default_rng(3).standard_normal(model.coordinate_count)
    rows = kernels.inverse_dynamics_tangents(model, params, q, qd, qdd,
                                             tangents=_identity_tangents(blocks))[1:]
    expected, start = rows @ adjoint, 0
    got = kernels.parameter_vjp(model, params, q, qd, qdd, adjoint)
    for name, shape in blocks.items():
        size = int(np.prod(shape, dtype=np.int64))
        want = expected[start:start + size]
        np.testing.assert_allclose(np.ravel(got[name]), want, rtol=0,
                                   atol=1e-13 * np.abs(expected).max(), err_msg=name)
        start += size
    # the centres of mass against the reference's tangent rows (the compiled recursion
    # keeps them constant)
    identity = np.eye(3 * model.link_count).reshape(-1, model.link_count, 3)
    want = dynamics.inverse_dynamics_tangents(model, params, q, qd, qdd,
                                              tangents={"link_com": identity})[1:] @ adjoint
    np.testing.assert_allclose(np.ravel(got["link_com"]), want, rtol=0,
                               atol=1e-13 * np.abs(want).max())
    assert np.abs(want).max() > 1e-3
    return got


def test_parameter_vjp_equals_the_tangent_rows(any_model, models):
    got = _parameter_vjp_matches_tangents(any_model,
                                          any_model.parameters() | models.tilted(any_model, 8),
                                          *models.random_point(any_model, seed=6))
    assert np.abs(got["link_inertia"]).max() > 1e-3  # the masses and inertias act


def test_parameter_vjp_through_contact_equals_the_tangent_rows(models):
    q = np.array([0.0, 0.0, 0.099, 0.02, 0.01, -0.015])
    qd = np.array([0.02, 0.01, -0.05, 0.3, -0.2, 0.1])
    for sharpness in (0.0, 4.0):  # the hard stick-slip switch and the smooth law
        model = _box_on_obstacles(models, friction_sharpness=sharpness)
        got = _parameter_vjp_matches_tangents(model, model.parameters(), q, qd, np.zeros(6))
        assert np.abs(got["contact_point"]).max() > 1.0 and got["contact_stiffness"] != 0.0


def test_compiled_position_servo_steps_equal_the_reference(models, paths_agree):
    model = models.arm4()
    state = RigidState(model.joint_rest, np.linspace(-1.0, 1.0, 4), model.joint_rest,
                       np.zeros(4), np.asarray(0, dtype=np.int64))
    for params in (None, models.tilted(model, 9)):
        paths_agree(model, state, np.array([0.3, -0.2, 0.5, 0.1]), 3, 0.01, params=params,
                    actuation="position", servo_stiffness=40.0, servo_damping=2.0)


def test_compiled_contact_steps_equal_the_reference(models, paths_agree):
    # the free box sliding and spinning on the plane into the box obstacle (no action)
    model = _box_on_obstacles(models, friction_sharpness=4.0)
    q = np.array([0.0, 0.0, 0.099, 0.02, 0.01, -0.015])
    state = RigidState(q, np.array([0.2, 0.1, -0.05, 0.3, -0.2, 0.1]), q, np.zeros(6),
                       np.asarray(0, dtype=np.int64))
    end = paths_agree(model, state, np.zeros(0), 3, 0.005)
    assert end.joint_q[2] > 0.09  # the plane holds the box up


def test_compiled_newton_failures_read_as_the_reference(models):
    model = models.arm4()
    rates = np.linspace(30.0, -30.0, 4)
    state = RigidState(model.joint_rest + 0.1, rates, model.joint_rest, rates,
                       np.asarray(7, dtype=np.int64))
    g_next = RigidState(*(np.ones(4) for _ in range(4)), None)
    messages = set()
    for kernels_name in ("numba", "numpy"):
        for function, extra in ((step, ()), (step_vjp, (g_next,))):
            with pytest.raises(NewtonError) as error:
                function(model, state, 50.0 * np.ones(4), model.parameters(), 0.2, *extra,
                         kernels=kernels_name, iterations=3)
            messages.add(str(error.value))
    assert len(messages) == 1, messages
    assert "step 7: Newton's method did not converge in 3 iterations" in messages.pop()


def test_flat_arrays_for_the_compiled_steps(models):
    model = _box_on_obstacles(models, friction_sharpness=4.0)
    params = model.parameters() | {"link_mass": np.array([2], dtype=np.int64)}
    flat = kernels.parameter_arrays(model, params)
    assert flat[0].dtype == np.float64 and flat[0].tolist() == [2.0]
    np.testing.assert_array_equal(flat[5], [params[name] for name in COEFFICIENTS])
    np.testing.assert_array_equal(flat[3], model.contact_point)
    np.testing.assert_array_equal(flat[7], model.gravity)
    arm = models.arm4()
    actuated, gear = kernels.drive_arrays(arm)
    assert kernels.drive_arrays(arm)[0] is actuated  # kept while the model lives
    np.testing.assert_array_equal(actuated, arm.actuated)
    np.testing.assert_array_equal(gear, arm.actuated_gear)
