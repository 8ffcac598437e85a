"""Start poses: the vine at rest from pin angles and a shared extension, fitted to keypoints."""

import numpy as np
import pytest

from codesign.testing import gradcheck
from codesign.tying import Tie, TiedSimulator
from sim_vine.fit.start_pose import (
    START_PARAMETERS,
    FixedStart,
    StartPose,
    StartPoseError,
    StartPoses,
    start_pose_from_keypoints,
)
from sim_vine.kinematics import centerline_vertices, keypoints, vine_length
from sim_vine.model import VineModel
from sim_vine.scene import make_simulator
from sim_vine.state import VineState

POSE = StartPose(angles=np.array([-0.2, 0.15, -0.1]), extension=0.012)


@pytest.mark.parametrize("growth", ["every_prismatic", "tip"])
def test_start_pose_shares_the_extension_by_the_growth_weights(growth):
    model = VineModel(body_count=6, length=0.25, growth=growth)
    q = POSE.body_q(model)
    a, b = model.prismatics
    slide = np.sum((q[b, :2] - q[a, :2]) * np.stack([np.cos(q[a, 2]), np.sin(q[a, 2])], 1), 1)
    np.testing.assert_allclose(slide - model.body_length, 0.012 * model.growth_weights,
                               atol=1e-15)


def pose_vjp_check(model, pose, seed):
    """The pose's VJP for random weights (its cotangents) and its gradcheck report."""
    weights = np.random.default_rng(seed).standard_normal((model.body_count, 3))
    g_angles, g_extension = pose.body_q_vjp(model, weights)
    report = gradcheck(
        lambda p: float(np.sum(weights * StartPose(p["angles"], float(p["extension"])).body_q(
            model))),
        {"angles": pose.angles, "extension": np.asarray(pose.extension)},
        {"angles": g_angles, "extension": np.asarray(g_extension)})
    return g_angles, g_extension, report


def test_start_pose_vjp_matches_finite_differences():
    _, _, report = pose_vjp_check(VineModel(body_count=6, length=0.25), POSE, 0)
    assert report.passed, str(report)


def test_start_pose_from_exact_keypoints_is_the_pose():
    model = VineModel(body_count=6, length=0.25)
    points = keypoints(model, POSE.body_q(model), 8)
    found = start_pose_from_keypoints(model, points, fit_length=True)
    np.testing.assert_allclose(found.angles, POSE.angles, atol=1e-9)
    assert found.extension == pytest.approx(POSE.extension, abs=1e-10)
    kept = start_pose_from_keypoints(model, points)  # the model's length is kept
    assert kept.extension == 0.0


def test_start_pose_needs_a_frame_with_the_vine():
    model = VineModel(body_count=6)
    with pytest.raises(StartPoseError, match="no keypoints"):
        start_pose_from_keypoints(model, np.full((5, 2), np.nan))
    with pytest.raises(StartPoseError, match="shape"):
        start_pose_from_keypoints(model, np.zeros((5, 3)))


def test_a_tied_simulator_starts_from_its_fitted_start_pose_with_its_gradient():
    sim = make_simulator(bodies=6, length=0.25, gravity=[0.0, -9.81])
    other = StartPose(angles=np.zeros(3), extension=0.0)
    wrapped = TiedSimulator(sim, ties=[Tie("joint.stiffness")],
                            start=StartPoses(sim, [other, POSE], index=1))
    space = wrapped.design_space()
    assert space["start.angles"].shape == (2, 3) and space["start.extension"].shape == (2,)
    design = space.defaults()
    state = wrapped.initial_state(design)
    np.testing.assert_allclose(state.body_q, POSE.body_q(sim.model))
    assert not np.any(state.body_qd)
    assert not set(START_PARAMETERS) & set(wrapped.expand(design))  # only the wrapper's
    g_q = np.random.default_rng(1).standard_normal((6, 3))
    gradient = wrapped.initial_state_vjp(design, VineState(body_q=g_q, body_qd=0 * g_q))
    assert not np.any(gradient["start.angles"][0]) and gradient["start.extension"][0] == 0.0
    names = list(START_PARAMETERS)
    report = gradcheck(
        lambda p: float(np.sum(g_q * wrapped.initial_state({**design, **p}).body_q)),
        {n: design[n] for n in names}, {n: gradient[n] for n in names})
    assert report.passed, str(report)


def test_a_fixed_start_copies_its_state_as_step_zero_without_design_gradient():
    sim = make_simulator(bodies=6, length=0.25)
    q = POSE.body_q(sim.model)
    given = VineState(body_q=q, body_qd=np.full_like(q, 0.1))
    wrapped = TiedSimulator(sim, start=FixedStart(sim, given))
    design = wrapped.design_space().defaults()
    state = wrapped.initial_state(design)
    assert state is not given and sim.step_number(state) == 0
    np.testing.assert_array_equal(state.body_q, q)
    np.testing.assert_array_equal(state.body_qd, given.body_qd)
    assert wrapped.initial_state_vjp(design, state) == {}


def test_a_fit_checks_the_pose_it_starts_from_not_the_default_one():
    # a post on the straight default pose; the recording starts bent away from it
    post = [{"type": "circle", "center": [0.17, 0.0], "radius": 0.02}]
    with pytest.raises(ValueError, match="the vine starts inside an obstacle"):
        make_simulator(bodies=6, length=0.25, obstacles=post)
    sim = make_simulator(bodies=6, length=0.25, obstacles=post, check_initial_pose=False)
    bent = StartPose(angles=np.array([0.5, 0.2, 0.1]), extension=0.0)
    frame_0 = keypoints(sim.model, bent.body_q(sim.model), 5)
    start = StartPoses(sim, [start_pose_from_keypoints(sim.model, frame_0)])
    design = TiedSimulator(sim, start=start).design_space().defaults()
    q = start.state(design).body_q
    np.testing.assert_allclose(keypoints(sim.model, q, 5), frame_0, atol=1e-9)
    state = VineState(body_q=q, body_qd=np.zeros_like(q))
    FixedStart(sim, state)  # a pose clear of the post is accepted
    # the poses actually used are checked: the default one when initial_state uses it ...
    with pytest.raises(ValueError, match="the vine starts inside an obstacle"):
        sim.initial_state(sim.design_space().defaults())
    straight = sim.model.initial_configuration()
    # ... and a fit's start inside the post
    with pytest.raises(ValueError, match="start pose 1 starts inside an obstacle"):
        StartPoses(sim, [StartPose(bent.angles, 0.0), StartPose(np.zeros(3), 0.0)])
    with pytest.raises(ValueError, match="the given start state starts inside an obstacle"):
        FixedStart(sim, VineState(body_q=straight, body_qd=np.zeros_like(straight)))


# a vine that everts: 8 bodies of 0.05 m, 0.17 m out; with 0.09 m more, bodies 0-4 are out
# (bent), body 5 emerges and bodies 6-7 lie on it
EVERT = VineModel(body_count=8, length=0.17, max_length=0.4, growth="evert")
EVERT_POSE = StartPose(angles=np.array([-0.2, 0.15, -0.1, 0.25, 0.1, 0.0, 0.0, 0.0]),
                       extension=0.09)


def test_an_everting_start_pose_is_everted_by_its_extension_and_bends_where_out():
    q = EVERT_POSE.body_q(EVERT)
    assert vine_length(EVERT, q) == pytest.approx(0.17 + 0.09, abs=1e-12)
    # every body out has its joint's angle, the emerging one and those on it are straight
    np.testing.assert_allclose(np.diff(q[:, 2]), [0.15, -0.1, 0.25, 0.1, 0.0, 0.0, 0.0],
                               atol=1e-15)
    tip = q[-1, :2] + EVERT.half_length * np.array([np.cos(q[-1, 2]), np.sin(q[-1, 2])])
    vertices = centerline_vertices(EVERT, q)  # body 5 is 0.01 m out, 6 and 7 lie on it
    np.testing.assert_allclose(vertices[6:], [tip] * 3, atol=1e-15)
    assert np.linalg.norm(tip - vertices[5]) == pytest.approx(0.01, abs=1e-12)
    # the angles of joints not out do not move it
    moved = StartPose(EVERT_POSE.angles + np.r_[np.zeros(5), 0.3, -0.2, 0.4], 0.09)
    np.testing.assert_array_equal(moved.body_q(EVERT), q)


def test_an_everting_start_pose_vjp_matches_finite_differences():
    g_angles, g_extension, report = pose_vjp_check(EVERT, EVERT_POSE, 2)
    assert g_extension != 0.0 and not np.any(g_angles[5:])
    assert report.passed, str(report)


def test_an_everting_start_pose_from_exact_keypoints_is_the_pose():
    points = keypoints(EVERT, EVERT_POSE.body_q(EVERT), 8)
    found = start_pose_from_keypoints(EVERT, points, fit_length=True)
    assert found.extension == pytest.approx(EVERT_POSE.extension, abs=1e-9)
    np.testing.assert_allclose(found.angles, EVERT_POSE.angles, atol=1e-8)
    # at the model's length the bodies out are fitted to the frame as well as they can be
    kept = start_pose_from_keypoints(EVERT, points)
    assert kept.extension == 0.0 and vine_length(EVERT, kept.body_q(EVERT)) == pytest.approx(0.17)
