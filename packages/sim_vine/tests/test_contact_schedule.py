"""The estimation's known contacts: detection from poses, active-set updates, local surfaces."""

import numpy as np
import pytest

from sim_vine.fit.contact_schedule import (
    ContactScheduleError,
    detect_contacts,
    local_surface,
    update_contacts,
)
from sim_vine.model import VineModel
from sim_vine.obstacles import Circle, Wall, rectangle, signed_distance


def _wall_model():
    # a 2-body vine along x whose tip (0.2, 0) starts 1 cm from a vertical wall
    return VineModel(body_count=2, length=0.2,
                     obstacles=(Wall([0.22, -1.0], [0.22, 1.0], thickness=0.02),))


def _poses(model, tips_x):
    """Straight poses whose tip is at (x, 0) for each x (the vine moved along its axis)."""
    q = model.initial_configuration()
    return np.stack([q + [x - 0.2, 0.0, 0.0] for x in tips_x])


def test_detected_contacts_and_their_cone_edges():
    model = _wall_model()
    q = _poses(model, [0.2, 0.2095, 0.2095, 0.21])
    q[3, :, 1] += 0.01  # the last step slides the tip up along the wall (+y, the tangent −T)
    modes = detect_contacts(model, q, tolerance=1e-3)
    assert modes.shape == (3, 1)
    # the wall's normal at the tip is −x, its tangent T = (0, −1): sliding up is −T,
    # friction pushes along +T, the cone edge N + μT
    np.testing.assert_array_equal(modes[:, 0], [1, 1, 1])
    q[3, :, 1] -= 0.02
    assert detect_contacts(model, q, tolerance=1e-3)[2, 0] == -1
    assert detect_contacts(model, q, tolerance=1e-4)[0, 0] == 0  # 0.5 mm away
    with pytest.raises(ContactScheduleError, match="poses"):
        detect_contacts(model, q[:, :1])


def test_update_drops_contacts_that_do_not_push_and_adds_penetrating_ones():
    model = _wall_model()
    q = _poses(model, [0.2, 0.21, 0.2095, 0.2105, 0.21])  # touch, leave, penetrate, touch
    modes = np.array([[1], [1], [0], [1]])
    impulse = np.array([[np.nan], [0.0], [0.0], [2e-3]])  # step 0 has no impulse variable
    updated = update_contacts(model, modes, q, impulse, release=1e-9)
    np.testing.assert_array_equal(updated[:, 0] != 0, [True, False, True, True])
    assert np.array_equal(update_contacts(model, updated, q, np.where(updated, 1.0, 0.0),
                                          release=1e-9) != 0, updated != 0)
    with pytest.raises(ContactScheduleError, match="do not match"):
        update_contacts(model, modes[:2], q, impulse, release=1e-9)


@pytest.mark.parametrize("obstacle, point", [
    (Wall([0.0, -1.0], [0.0, 1.0], thickness=0.02), [0.03, 0.2]),  # beside the wall: a plane
    (Wall([0.0, -1.0], [0.0, 1.0], thickness=0.02), [0.02, 1.03]),  # off its end: a circle
    (Circle([0.1, 0.2], 0.05), [0.2, 0.25]),
    (rectangle([0.0, 0.0], [0.2, 0.1]), [0.15, 0.09]),  # off a corner
    (rectangle([0.0, 0.0], [0.2, 0.1]), [0.05, 0.02]),  # inside: the nearest face
])
def test_local_surface_matches_the_signed_distance_near_the_point(obstacle, point):
    surface = local_surface(obstacle, point)
    rng = np.random.default_rng(0)
    nearby = np.asarray(point) + 1e-3 * rng.standard_normal((5, 2))
    if surface.radius is None:
        local = (nearby - surface.anchor) @ surface.normal
    else:
        local = np.linalg.norm(nearby - surface.anchor, axis=1) - surface.radius
    np.testing.assert_allclose(local, signed_distance(obstacle, nearby)[0], atol=1e-12)
