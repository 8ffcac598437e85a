"""Quaternion helpers: values against known rotations, VJPs against finite differences."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.testing import gradcheck
from sim_pbd import rotations as rot


def _random_quat(rng):
    q = rng.standard_normal(4)
    return q / np.linalg.norm(q)


def _check(forward, vjp, inputs, seed=0):
    """Gradcheck <w, forward(**inputs)> against vjp(**inputs, g=w) (a dict by input name)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(np.shape(forward(**inputs)))

    def loss(groups):
        return float(np.sum(w * forward(**groups["x"])))

    gradcheck(loss, {"x": inputs}, {"x": vjp(**inputs, g=w)}, tolerance=1e-8).assert_ok()


def test_multiply_matches_matrix_product_and_conjugate_inverts():
    rng = np.random.default_rng(0)
    a, b = _random_quat(rng), _random_quat(rng)
    np.testing.assert_allclose(rot.quat_to_matrix(rot.quat_multiply(a, b)),
                               rot.quat_to_matrix(a) @ rot.quat_to_matrix(b), atol=1e-14)
    np.testing.assert_allclose(rot.quat_multiply(a, rot.quat_conjugate(a)), [1, 0, 0, 0],
                               atol=1e-15)


def test_rotate_about_z_by_quarter_turn():
    q = rot.quat_from_axis_angle(np.array([0.0, 0.0, 1.0]), np.pi / 2)
    np.testing.assert_allclose(rot.quat_rotate(q, np.array([1.0, 0.0, 0.0])), [0, 1, 0],
                               atol=1e-15)
    matrix = rot.quat_to_matrix(_random_quat(np.random.default_rng(1)))
    np.testing.assert_allclose(matrix @ matrix.T, np.eye(3), atol=1e-14)


def test_integrate_is_first_order_rotation():
    rng = np.random.default_rng(2)
    q = _random_quat(rng)
    dphi = 1e-4 * rng.standard_normal(3)
    exact = rot.quat_multiply(rot.quat_from_axis_angle(dphi / np.linalg.norm(dphi),
                                                       np.linalg.norm(dphi)), q)
    updated = rot.quat_normalize(rot.quat_integrate(q, dphi))
    assert np.linalg.norm(updated - exact) < 1e-8


def test_skew_is_cross_product():
    rng = np.random.default_rng(3)
    u, v = rng.standard_normal(3), rng.standard_normal(3)
    np.testing.assert_allclose(rot.skew(u) @ v, np.cross(u, v), atol=1e-15)


def test_normalize_rejects_zero():
    with pytest.raises(ValueError, match="norm"):
        rot.quat_normalize(np.zeros(4))



def _named(names, grads):
    return dict(zip(names, grads, strict=True))


@pytest.mark.parametrize("seed", [0, 1])
def test_vjps_match_finite_differences(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal(4), rng.standard_normal(4)
    v = rng.standard_normal(3)
    _check(rot.quat_multiply, lambda a, b, g: _named("ab", rot.quat_multiply_vjp(a, b, g)),
           {"a": a, "b": b})
    _check(rot.quat_conjugate, lambda q, g: {"q": rot.quat_conjugate_vjp(g)}, {"q": a})
    _check(rot.quat_normalize, lambda q, g: {"q": rot.quat_normalize_vjp(q, g)}, {"q": a})
    _check(rot.quat_integrate,
           lambda q, dphi, g: _named(("q", "dphi"), rot.quat_integrate_vjp(q, dphi, g)),
           {"q": a, "dphi": v})
    _check(rot.quat_to_matrix, lambda q, g: {"q": rot.quat_to_matrix_vjp(q, g)}, {"q": a})
    _check(rot.quat_rotate, lambda q, v, g: _named("qv", rot.quat_rotate_vjp(q, v, g)),
           {"q": a, "v": v})
    _check(rot.skew, lambda v, g: {"v": rot.skew_vjp(g)}, {"v": v})
    axis = v / np.linalg.norm(v)
    _check(lambda angle: rot.quat_from_axis_angle(axis, angle[0]),
           lambda angle, g: {"angle": np.array([rot.quat_from_axis_angle_vjp(axis, angle[0],
                                                                              g)])},
           {"angle": rng.standard_normal(1)})
