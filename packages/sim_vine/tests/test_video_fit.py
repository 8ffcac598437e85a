"""Validation from synthetic videos: simulate with known K and C, render frames with pixel
noise through a known homography, extract keypoints with OpenCV, fit, compare with truth.

Two scenarios (the paper's): a cantilever released from a bent pose, and a vine growing
into a slanted wall and sliding along it (in a vertical plane: the wall_vertical scene).
"""

import numpy as np
import pytest

from sim_vine.fit.contact_schedule import detect_contacts
from sim_vine.fit.estimation import casadi_available, estimate
from sim_vine.fit.shooting import VideoRecording, fit_shooting
from sim_vine.fit.synthetic import synthetic_video, tilted_calibration
from sim_vine.scene import make_simulator
from sim_vine.vision.keypoints import Segmentation, VineNotFoundError, extract_keypoints
from sim_vine.vision.video import write_video

WIDTH, HEIGHT, POINTS = 320, 240, 6


def _extract(video, source, **options):
    return extract_keypoints(source, segmentation=Segmentation(), base_px=video.base_px,
                             base_direction=video.base_direction_px,
                             calibration=video.calibration, points=POINTS, fps=30.0, **options)


def _pixel_errors(video, keypoints):
    seen = [f for f in range(len(video.images)) if f not in video.hidden]
    projected = video.calibration.to_pixels(keypoints.points[seen])
    return np.linalg.norm(projected - video.truth_px[seen], axis=-1)


def cantilever():
    return make_simulator(bodies=4, length=0.2, stiffness=0.05, damping=0.0005,
                          initial_angles=0.15)


def test_released_cantilever_video_gives_keypoints_within_a_pixel_and_k_c_within_2_percent(
        tmp_path):
    sim = cantilever()
    truth = sim.design_space().defaults()
    video = synthetic_video(sim, truth, frames=16, dt=1 / 90, substeps=3, points=POINTS,
                            calibration=tilted_calibration((-0.02, 0.2, -0.02, 0.15),
                                                           width=WIDTH, height=HEIGHT),
                            width=WIDTH, height=HEIGHT, thickness_px=8, noise_std=6.0,
                            hidden=(6, 11))
    path = write_video(video.images, tmp_path / "release.avi", fps=30.0)  # MJPG, lossy
    keypoints = _extract(video, path)
    # frames without the vine are reported and kept as NaN rows
    assert keypoints.missing_frames == [6, 11]
    assert "frame 6" in keypoints.report() and "frame 11" in keypoints.report()
    with pytest.raises(VineNotFoundError, match="2 frame") as stopped:
        _extract(video, path, on_missing="raise")
    assert stopped.value.frames == [6, 11]
    errors = _pixel_errors(video, keypoints)
    assert np.median(errors) < 1.0, np.median(errors)
    # the fit skips the missing frames and recovers the parameters behind the video
    fit = fit_shooting(cantilever(), [VideoRecording(keypoints=keypoints, name="release")],
                       model_rate=90.0, max_iterations=30,
                       overrides={"joint.stiffness": {"init": 0.035},
                                  "joint.damping": {"init": 0.0008}})
    assert float(fit.fitted["joint.stiffness"]) == pytest.approx(0.05, rel=0.02)
    assert float(fit.fitted["joint.damping"]) == pytest.approx(0.0005, rel=0.02)
    assert fit.tip_error_mm[0]["mae"] < 1.0


def wall(**options):
    # the bundled wall_vertical scene with 6 bodies: 0.03 N m/rad at its 3 pins bends like its
    # 0.05 N m/rad at 5 pins (same K / pin spacing)
    return make_simulator(scene="wall_vertical", bodies=6, stiffness=0.03, **options)


WALL_TRUTH = {"joint.stiffness": 0.03, "joint.damping": 0.002}
WALL_FRAMES, WALL_RATE = 27, 0.3


@pytest.fixture(scope="module")
def wall_video():
    # 0.9 s at 30 fps: released straight, the vine sags and swings under its weight while it
    # grows at 0.3 m/s, reaches the slanted wall after ~0.5 s and slides down along it
    video = _wall_video()
    keypoints = _extract(video, video.images)
    return video, VideoRecording(keypoints=keypoints, growth_rate=WALL_RATE, name="wall")


def _wall_video(**options):
    """The wall scene's video at 30 fps, 320 × 240 px, noise 6 (``options``: more of
    :func:`synthetic_video`'s, such as blur)."""
    sim = wall()
    return synthetic_video(sim, sim.design_space().defaults(), frames=WALL_FRAMES, dt=1 / 90,
                           substeps=3, points=POINTS, growth_rate=WALL_RATE,
                           calibration=tilted_calibration((-0.03, 0.45, -0.44, 0.04),
                                                          width=WIDTH, height=HEIGHT),
                           width=WIDTH, height=HEIGHT, thickness_px=8, noise_std=6.0,
                           **options)


def _wall_fit(keypoints):
    """A shooting fit of the wall vine to ``keypoints``, start pose and length fitted,
    starting 30 % below K and 50 % above C."""
    return fit_shooting(wall(), [VideoRecording(keypoints=keypoints, growth_rate=WALL_RATE)],
                        model_rate=90.0, max_iterations=25, fit_length=True, fit_start=True,
                        overrides={"joint.stiffness": {"init": 0.021},
                                   "joint.damping": {"init": 0.003}})


def test_a_blurred_wall_video_still_gives_keypoints_and_k_c_within_2_percent():
    # the same video out of focus (Gaussian blur of 3 px on the 8 px vine) before the noise:
    # measured, keypoints within 0.25 px median (0.15 sharp), K 0.17 % and C 0.43 % off,
    # tip MAE 1.15 mm (0.59 sharp)
    _assert_the_fit_survives(_wall_video(blur_px=3.0), relative=0.02, tip_mm=1.5)


def _assert_the_fit_survives(video, *, relative: float, tip_mm: float) -> None:
    """Keypoints of every frame within a pixel (median), and a converged fit with K and C
    within ``relative`` and the tip MAE below ``tip_mm``."""
    keypoints = _extract(video, video.images)
    assert keypoints.missing_frames == []
    assert np.median(_pixel_errors(video, keypoints)) < 1.0
    fit = _wall_fit(keypoints)
    assert fit.optimization.converged, fit.optimization.message
    for name, truth in WALL_TRUTH.items():
        assert float(fit.fitted[name]) == pytest.approx(truth, rel=relative), name
    assert fit.tip_error_mm[0]["mae"] < tip_mm


def test_motion_blur_is_the_mean_over_the_shutter_time_and_the_fit_survives_it():
    # the shutter open for the whole frame interval (3 model steps, 1/30 s) while the vine
    # swings and grows at 0.3 m/s (smears of up to 4 px), and out of focus (2 px): measured,
    # keypoints within 0.27 px median (1.7 px at worst), K 0.27 % and C 1.3 % off, tip MAE
    # 1.53 mm, converged in 7 iterations
    video = _wall_video(blur_px=2.0, exposure_steps=3)
    sharp = _wall_video(blur_px=2.0)
    np.testing.assert_array_equal(video.truth, sharp.truth)
    assert not np.array_equal(video.images[10], sharp.images[10])
    _assert_the_fit_survives(video, relative=0.03, tip_mm=2.0)


def test_a_still_vine_shows_no_motion_blur():
    # a weightless vine at rest: every state in the shutter window is the same, so the
    # exposed frames equal the sharp ones bit for bit (same noise draws)
    still = make_simulator(bodies=4, length=0.2, stiffness=0.05)
    design = still.design_space().defaults()
    options = dict(frames=4, dt=1 / 90, substeps=3, points=POINTS, width=WIDTH,
                   height=HEIGHT, calibration=tilted_calibration(
                       (-0.02, 0.2, -0.02, 0.15), width=WIDTH, height=HEIGHT))
    exposed = synthetic_video(still, design, exposure_steps=2, **options)
    sharp = synthetic_video(still, design, **options)
    for a, b in zip(exposed.images, sharp.images, strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="exposure_steps must be"):
        synthetic_video(still, design, exposure_steps=-1, **options)


def _touches_the_wall(sim, body_q):
    return bool(np.any(detect_contacts(sim.model, body_q, tolerance=1e-4)))


def test_wall_growth_video_gives_keypoints_within_a_pixel(wall_video):
    video, recording = wall_video
    assert recording.keypoints.missing_frames == []
    assert np.median(_pixel_errors(video, recording.keypoints)) < 1.0
    assert _touches_the_wall(wall(), np.array([s.body_q for s in video.states]))


def test_wall_growth_video_shooting_fit_recovers_k_and_c_within_2_percent(wall_video):
    # the start pose is fitted with K and C, so that frame 0's keypoint errors (its tip is
    # extracted 0.4 px long) do not set it
    _, recording = wall_video
    fit = _wall_fit(recording.keypoints)
    for name, truth in WALL_TRUTH.items():
        assert float(fit.fitted[name]) == pytest.approx(truth, rel=0.02), name
    assert fit.tip_error_mm[0]["mae"] < 1.0


@pytest.mark.skipif(not casadi_available(), reason="joint estimation needs casadi (sim_vine[fit])")
def test_wall_growth_video_joint_estimation_recovers_k_and_c_within_2_percent(wall_video):
    # the paper's estimation with known contacts, detected from the poses fitted to the
    # keypoints (the default)
    _, recording = wall_video
    sim = wall()
    start = dict(sim.design_space().defaults())
    start["joint.stiffness"] = np.full(sim.model.pin_count, 0.021)
    start["joint.damping"] = np.full(sim.model.pin_count, 0.003)
    result = estimate(sim, recording, design=start, model_rate=90.0, fit_length=True)
    assert result.status == "Solve_Succeeded"
    assert np.any(result.contacts) and np.all(result.contact_impulse[result.contacts != 0] > 0)
    for name, truth in WALL_TRUTH.items():
        assert float(result.fitted[name]) == pytest.approx(truth, rel=0.02), name
    assert result.tip_error_mm["mae"] < 1.0


def test_known_contacts_from_poses_match_the_simulators_active_contacts(contact_runner):
    # the joint estimation's contact schedule: from poses alone, the steps where the tip
    # is held by the wall are those where the simulator's contact rows were active
    sim = wall()
    poses, modes = contact_runner(sim, 3 * (WALL_FRAMES - 1), WALL_RATE, 1 / 90)
    assert 20 < np.count_nonzero(modes[:, -1]) < len(modes)  # the tip slides along the wall
    detected = detect_contacts(sim.model, poses, tolerance=3e-4)
    np.testing.assert_array_equal(detected != 0, modes != 0)
