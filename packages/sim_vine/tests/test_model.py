import numpy as np
import pytest

from sim_vine.model import ModelError, VineModel


def test_joint_structure():
    model = VineModel(body_count=6)
    parent, child = model.pins
    np.testing.assert_array_equal(parent, [-1, 1, 3])
    np.testing.assert_array_equal(child, [0, 2, 4])
    np.testing.assert_array_equal(model.prismatics[0], [0, 2, 4])
    bodies, offsets = model.contact_points
    np.testing.assert_array_equal(bodies, [1, 3, 5])  # two movable pins and the tip
    np.testing.assert_allclose(offsets, model.half_length)
    np.testing.assert_allclose(model.growth_weights, 1 / 3)
    np.testing.assert_allclose(VineModel(body_count=6, growth="tip").growth_weights, [0, 0, 1])


def test_configuration_lays_bodies_end_to_end():
    model = VineModel(body_count=4, length=0.4, base=(1.0, 2.0, np.pi / 2))
    q = model.initial_configuration()
    np.testing.assert_allclose(q[:, 0], 1.0, atol=1e-15)
    np.testing.assert_allclose(q[:, 1], 2.0 + np.array([0.05, 0.15, 0.25, 0.35]))
    np.testing.assert_allclose(q[:, 2], np.pi / 2)


@pytest.mark.parametrize("options, message", [
    ({"body_count": 0}, "body_count"),
    ({"body_count": 2.5}, "body_count"),
    ({"length": -1.0}, "length"),
    ({"total_mass": float("nan")}, "total_mass"),
    ({"base": (0, 0)}, "base"),
    ({"gravity": (0, 0, -9.8)}, "gravity"),
    ({"growth": "sideways"}, "growth"),
    ({"stiffness": [1.0, 2.0, 3.0, 4.0]}, "stiffness"),
    ({"damping": -0.1}, "damping"),
    ({"friction": -0.5}, "friction"),
    ({"contact": "everywhere"}, "contact"),
    ({"contact": [[12, 0.0]]}, "contact body"),
    ({"contact": [[1, 0.5]]}, "offsets"),
    ({"initial_angles": [0.1]}, "initial_angles"),
    ({"rest_angle": [0.1, 0.2]}, "rest_angle"),
    ({"rest_angle": float("nan")}, "rest_angle"),
    ({"ground_friction": -1.0}, "ground_friction"),
    ({"ground_friction": [1.0, 2.0]}, "ground_friction"),
    ({"obstacles": ("circle",)}, "obstacles"),
])
def test_bad_options_raise(options, message):
    with pytest.raises(ModelError, match=message):
        VineModel(**{"body_count": 6, **options})


def test_penetrations_report_points_inside():
    from sim_vine.obstacles import Circle
    model = VineModel(body_count=4, length=0.2, obstacles=(Circle([0.2, 0.0], 0.01),))
    found = model.penetrations(model.initial_configuration())
    assert [(i, j) for i, j, _ in found] == [(1, 0)]  # the tip at (0.2, 0) is inside


@pytest.mark.parametrize("bodies", [1, 2, 5, 6])
def test_configuration_vjp_matches_finite_differences(bodies):
    from codesign.testing import gradcheck
    model = VineModel(body_count=bodies, length=0.3, base=(0.1, -0.2, 0.4))
    rng = np.random.default_rng(bodies)
    point = {"angles": 0.3 * rng.standard_normal(model.pin_count),
             "extensions": rng.uniform(0.0, 0.02, model.prismatic_count)}
    weights = rng.standard_normal((bodies, 3))
    g_angles, g_ext = model.configuration_vjp(point["angles"], point["extensions"], weights)
    report = gradcheck(
        lambda p: float(np.sum(weights * model.configuration(p["angles"], p["extensions"]))),
        point, {"angles": g_angles, "extensions": g_ext})
    assert report.passed, str(report)


def test_rest_angle_option_gives_the_design_default():
    from sim_vine import make_simulator
    sim = make_simulator(bodies=5, rest_angle=[0.1, -0.2, 0.3])
    np.testing.assert_array_equal(sim.model.rest_angle, [0.1, -0.2, 0.3])
    np.testing.assert_array_equal(sim.design_space().defaults()["joint.rest_angle"],
                                  [0.1, -0.2, 0.3])
    np.testing.assert_array_equal(VineModel(body_count=5).rest_angle, 0.0)


def test_ground_friction_option_gives_the_design_default():
    from sim_vine import make_simulator
    sim = make_simulator(bodies=4, ground_friction=[1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(sim.design_space().defaults()["ground.friction"],
                                  [1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(make_simulator(bodies=3, ground_friction=2.5).model
                                  .ground_friction, 2.5)
    assert sim.design_space()["ground.friction"].lower == 0.0
