import numpy as np
import pytest

from sim_vine.constraints import (
    contact_curvature,
    contact_frame,
    contact_rows,
    growth_curvature,
    growth_rows,
    joint_curvature,
    joint_residual,
    joint_rows,
    row_layout,
    rows_times,
    rows_transpose_times,
)
from sim_vine.model import VineModel
from sim_vine.obstacles import Circle, rectangle


def _model(n, **kw):
    obstacles = (Circle([0.12, 0.1], 0.05), rectangle([0.1, -0.1], [0.1, 0.05], 0.4))
    return VineModel(body_count=n, length=0.2, obstacles=obstacles, **kw)


def _random_pose(model, seed=0):
    rng = np.random.default_rng(seed)
    q = model.configuration(rng.uniform(-0.3, 0.3, model.pin_count),
                            rng.uniform(0.0, 0.02, model.prismatic_count))
    return q + 1e-3 * rng.standard_normal(q.shape)  # off the constraint manifold too


def _fd_jacobian(f, q, h=1e-7):
    columns = []
    for i in range(q.size):
        dq = np.zeros(q.size)
        dq[i] = h
        columns.append((f(q + dq.reshape(q.shape)) - f(q - dq.reshape(q.shape))) / (2 * h))
    return np.stack(columns, axis=1)


def _dense(bodies, values, n):
    out = np.zeros((len(bodies), 3 * n))
    for r, (pair, row) in enumerate(zip(bodies, values, strict=True)):
        for side in range(2):
            if pair[side] >= 0:
                out[r, 3 * pair[side]:3 * pair[side] + 3] += row[3 * side:3 * side + 3]
    return out


def _extension(model, q):
    a, b = model.prismatics
    return np.sum(np.stack([np.cos(q[a, 2]), np.sin(q[a, 2])], 1) * (q[b, :2] - q[a, :2]), 1)


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_joint_and_growth_jacobians_match_finite_differences(n):
    model = _model(n)
    layout = row_layout(model)
    q = _random_pose(model)
    dense = _dense(layout.row_bodies[layout.joint], joint_rows(model, q), n)
    np.testing.assert_allclose(dense, _fd_jacobian(lambda x: joint_residual(model, x), q),
                               atol=1e-8)
    if model.prismatic_count:
        dense = _dense(layout.row_bodies[layout.growth], growth_rows(model, q), n)
        np.testing.assert_allclose(dense, _fd_jacobian(lambda x: _extension(model, x), q),
                                   atol=1e-8)


def test_contact_normal_rows_are_the_gradient_of_phi():
    model = _model(8)
    q = _random_pose(model, seed=3)
    frame = contact_frame(model, q)
    _, phi_rows = contact_rows(frame, 0.3)
    bodies = np.stack([np.full(len(frame.body), -1), frame.body], axis=1)
    np.testing.assert_allclose(_dense(bodies, phi_rows, 8),
                               _fd_jacobian(lambda x: contact_frame(model, x).phi, q), atol=1e-7)


@pytest.mark.parametrize("kind", ["joint", "growth", "contact"])
def test_curvature_is_the_derivative_of_weighted_rows(kind):
    model = _model(8)
    layout = row_layout(model)
    q = _random_pose(model, seed=1)
    rng = np.random.default_rng(2)
    w = rng.standard_normal(q.shape)
    mu = 0.4
    rows_of = {
        "joint": lambda x: joint_rows(model, x),
        "growth": lambda x: growth_rows(model, x),
        "contact": lambda x: contact_rows(contact_frame(model, x), mu)[0],
    }[kind]
    bodies = layout.row_bodies[getattr(layout, kind)]
    lam = rng.standard_normal(len(bodies))

    def scalar(x):
        return np.array([lam @ rows_times(bodies, rows_of(x), w)])

    expected = _fd_jacobian(scalar, q, h=1e-6).reshape(q.shape)
    if kind == "joint":
        got = joint_curvature(model, q, lam, w)
    elif kind == "growth":
        got = growth_curvature(model, q, lam, w)
    else:
        got, g_mu = contact_curvature(contact_frame(model, q), mu, lam, w, 8)
        frame = contact_frame(model, q)
        h = 1e-6
        fd_mu = (lam @ rows_times(bodies, contact_rows(frame, mu + h)[0], w)
                 - lam @ rows_times(bodies, contact_rows(frame, mu - h)[0], w)) / (2 * h)
        assert g_mu == pytest.approx(fd_mu, rel=1e-7, abs=1e-10)
    np.testing.assert_allclose(got, expected, atol=1e-6)


def test_rows_transpose_is_the_adjoint_of_rows_times():
    model = _model(6)
    layout = row_layout(model)
    q = _random_pose(model)
    values = joint_rows(model, q)
    bodies = layout.row_bodies[layout.joint]
    rng = np.random.default_rng(4)
    v, lam = rng.standard_normal(q.shape), rng.standard_normal(len(bodies))
    assert lam @ rows_times(bodies, values, v) == pytest.approx(
        np.sum(rows_transpose_times(bodies, values, lam, 6) * v))


def test_initial_configuration_satisfies_the_joints():
    model = VineModel(body_count=9, initial_angles=[0.1, -0.2, 0.3, 0.0, 0.5])
    assert np.max(np.abs(joint_residual(model, model.initial_configuration()))) < 1e-15
