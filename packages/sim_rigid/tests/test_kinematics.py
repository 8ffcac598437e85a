"""A point on a link in the world (sim_rigid.kinematics) and its Jacobians, on the arm and on
the floating tree (free, prismatic, fixed and revolute joints)."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.testing import gradcheck
from sim_rigid.dynamics import dual, link_frames, link_frames_dual, unit_axes
from sim_rigid.kinematics import link_point, link_point_jacobians

POINT = np.array([0.07, -0.02, 0.03])


def test_link_point_and_its_jacobians(any_model):
    model = any_model
    rng = np.random.default_rng(1)
    q = model.joint_rest + rng.uniform(-0.4, 0.4, model.coordinate_count)
    origin = model.joint_origin + rng.uniform(-0.02, 0.02, model.joint_origin.shape)
    axis = 2.0 * model.joint_axis + rng.uniform(-0.3, 0.3, model.joint_axis.shape)
    link = model.link_count - 1
    rotation, frame = link_frames(model, {"joint_origin": origin, "joint_axis": axis}, q)
    position = link_point(model, origin, q, link, POINT, joint_axis=axis)
    np.testing.assert_allclose(position, frame[link] + rotation[link] @ POINT, atol=1e-15)
    assert np.abs(position - link_point(model, origin, q, link, POINT)).max() > 1e-4

    value, d_q, d_origin, d_axis = link_point_jacobians(model, origin, q, link, POINT,
                                                        joint_axis=axis)
    np.testing.assert_allclose(value, position, atol=1e-15)
    weights = rng.normal(size=3)  # a scalar of the position, so gradcheck applies

    def scalar(inputs):
        return float(weights @ link_point(model, inputs["origin"], inputs["q"], link, POINT,
                                          joint_axis=inputs["axis"]))

    report = gradcheck(scalar, {"q": q, "origin": origin, "axis": axis},
                       {"q": weights @ d_q,
                        "origin": np.einsum("i,ijk->jk", weights, d_origin),
                        "axis": np.einsum("i,ijk->jk", weights, d_axis)})
    report.assert_ok()

    # the compiled kinematics equal the NumPy reference's tangent rows
    d, n = model.coordinate_count, model.link_count
    directions, rows = np.eye(d + 6 * n), d + 6 * n + 1
    rotations, frames = link_frames_dual(
        model, dual(origin, directions[:, d:d + 3 * n].reshape(-1, n, 3), rows),
        dual(q, directions[:, :d], rows),
        axis=unit_axes(axis, directions[:, d + 3 * n:].reshape(-1, n, 3), rows))
    reference = frames[:, link] + rotations[:, link] @ POINT
    np.testing.assert_allclose(np.column_stack([d_q, d_origin.reshape(3, -1),
                                                d_axis.reshape(3, -1)]),
                               reference[1:].T, rtol=1e-12, atol=1e-14)


def test_link_point_refuses_a_bad_link_or_point(models):
    model = models.arm4()
    with pytest.raises(ValueError, match="outside the robot's 4 links"):
        link_point(model, model.joint_origin, model.joint_rest, 4, POINT)
    with pytest.raises(ValueError, match=r"\[x, y, z\]"):
        link_point(model, model.joint_origin, model.joint_rest, 0, [0.1, 0.0])
