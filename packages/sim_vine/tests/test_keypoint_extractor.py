"""The ``vine_centerline`` keypoint extractor, found through the core's registry."""

import numpy as np
import pytest

from codesign.plugins import get_plugin_manager, get_registry
from sim_vine.vision.keypoints import KeypointError, resample_polyline
from sim_vine.vision.video import draw_vine_frame

SCALE = 0.002  # m per px
ORIGIN = (20.0, 100.0)


def _extractor(**options):
    registry = get_registry(get_plugin_manager(only=["vine"]))
    factory = registry.get("keypoint_extractors", "vine_centerline").factory
    return factory(base_px=ORIGIN, points=5, metres_per_pixel=SCALE, origin_px=ORIGIN,
                   **options)


def test_the_registered_extractor_finds_a_drawn_vine_in_metres():
    centerline_px = np.array([[20.0, 100.0], [80.0, 90.0], [130.0, 50.0]])
    image = draw_vine_frame(centerline_px, width=160, height=120, thickness_px=7)
    keypoints = _extractor()(image)
    world = (centerline_px - ORIGIN) * [SCALE, -SCALE]
    assert keypoints.shape == (5, 2)
    np.testing.assert_allclose(keypoints, resample_polyline(world, 5), atol=1.5 * SCALE)


def test_no_vine_gives_nan_keypoints_and_no_calibration_is_refused():
    empty = draw_vine_frame(None, width=160, height=120, thickness_px=7)
    assert np.isnan(_extractor()(empty)).all()
    with pytest.raises(KeypointError, match="needs a calibration"):
        get_registry(get_plugin_manager(only=["vine"])).get(
            "keypoint_extractors", "vine_centerline").factory(base_px=ORIGIN, points=5)
