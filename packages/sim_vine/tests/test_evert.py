"""Growth by eversion at the tip (``growth: evert``): model, kernels, physics, gradients."""

import numpy as np
import pytest

from codesign import SimulationError
from codesign.testing import check_step_gradients, gradcheck
from sim_vine import VineModel, VineSimulator, evert
from sim_vine.constraints import rows_times
from sim_vine.everted_mass import (
    UNEVERTED_MASS_FRACTION,
    everted_masses,
    everted_masses_vjp,
    gyration_squares,
    gyration_squares_vjp,
    material_lengths,
)
from sim_vine.kinematics import centerline_vertices, tip_position, vine_length
from sim_vine.model import ModelError
from sim_vine.obstacles import Circle, Wall, signed_distance
from sim_vine.scene import make_simulator
from sim_vine.step import build_problem, step

RATE = np.array([0.1])


def everting(bodies=8, length=0.1, max_length=0.4, **options):
    return VineSimulator(VineModel(body_count=bodies, length=length, max_length=max_length,
                                   growth="evert", **options))


def test_evert_model_is_a_chain_of_pins_with_its_bodies_at_the_tip():
    model = VineModel(body_count=8, length=0.125, max_length=0.4, growth="evert",
                      initial_angles=0.2)
    assert model.body_length == pytest.approx(0.05)
    assert model.pin_count == 8 and model.prismatic_count == 0
    np.testing.assert_array_equal(model.pins[0], np.arange(-1, 7))
    np.testing.assert_array_equal(model.contact_points[0], np.arange(8))
    q = model.initial_configuration()
    # 0.125 m everted: bodies 0 and 1 out, body 2 half out of body 1, the rest on body 2
    np.testing.assert_allclose(evert.slot_offsets(model, q), [0, 0, -0.025] + [-0.05] * 5,
                               atol=1e-15)
    assert vine_length(model, q) == pytest.approx(0.125)
    # the everted pins bend, the others are straight on the emerging body
    np.testing.assert_allclose(np.diff(q[:, 2]), [0.2, 0, 0, 0, 0, 0, 0], atol=1e-15)
    np.testing.assert_allclose(q[3:], np.repeat(q[2:3], 5, axis=0), atol=1e-15)
    np.testing.assert_allclose(tip_position(model, q), q[2, :2] + 0.025 * np.array(
        [np.cos(q[2, 2]), np.sin(q[2, 2])]))
    offsets, slope = model.evert_schedule(0.125 - 0.05)
    np.testing.assert_allclose(offsets, [0, 0, -0.025] + [-0.05] * 5, atol=1e-15)
    np.testing.assert_array_equal(slope, [0, 0, 1, 0, 0, 0, 0, 0])


@pytest.mark.parametrize("options, message", [
    ({}, "max_length"),
    ({"max_length": 0.4, "length": 0.5}, "length <= max_length"),
    ({"max_length": 0.4, "length": 0.01}, "one body length"),
])
def test_evert_options_are_checked(options, message):
    with pytest.raises(ModelError, match=message):
        VineModel(body_count=8, growth="evert", **options)


def test_evert_with_contact_smoothing_tracks_hard_contact_and_its_gradients_hold():
    # the wall scene's tip slides along the wall while bodies still evert: free lock rows
    # (joints out) and switched-off contact rows (bodies not out) beside the smoothed rows
    rate = np.array([0.3])
    tips, sims = [], []
    for kappa in (0.0, 1e-6):
        sim = make_simulator(scene="wall", bodies=8, length=0.1, max_length=0.5,
                             growth="evert", friction=0.1, ground_friction=2.0,
                             contact_smoothing=kappa)
        design = sim.design_space().defaults()
        state, path = sim.initial_state(design), []
        for _ in range(100):
            state = sim.step(state, rate, design, 0.01)
            path.append(tip_position(sim.model, state.body_q))
        tips.append(np.array(path))
        sims.append(sim)
    assert np.min(sims[1].model.obstacle_distances(state.body_q)[0]) < 1e-3  # on the wall
    # 0.18 mm at most (measured), where the tip first meets the wall
    np.testing.assert_allclose(tips[1], tips[0], atol=2.5e-4)
    params, _ = sim._parameters(design)
    problem = build_problem(sim.arrays, sim.layout, state.body_q, state.body_qd, 0.3,
                            sim._step_masses(params, state.body_q), 0.01)
    solution = sim.qp.solve(problem, warm_v=state.body_qd)
    free = problem.lower == -np.inf
    assert free.any() and np.all(solution.y[free] == 0.0) and not solution.active[free].any()
    # round-off of the interior point's stopping test limits central differences below 1e-5
    check_step_gradients(sim, dt=0.01, steps=2, state=state, action=rate, design=design,
                         eps=1e-5).assert_ok()


def test_evert_option_through_make_simulator():
    sim = make_simulator(bodies=12, length=0.25, max_length=0.9, growth="evert",
                         scene="wall_vertical")
    assert sim.model.evert and sim.model.body_length == pytest.approx(0.075)
    # start poses are fitted through the configuration's VJP: the angles and one extension
    g_angles, g_extension = sim.model.configuration_vjp(sim.model.initial_angles, None,
                                                        np.ones((12, 3)))
    assert g_angles.shape == (12,) and g_extension.shape == (1,) and g_extension[0] != 0.0


def _mixed_pose(model, rng):
    """A pose with bent everted joints, one emerging body and bodies still on the tip,
    slightly off its joints (drift), and a random velocity."""
    q = model.configuration(rng.uniform(-0.4, 0.4, model.pin_count))
    return q + 1e-4 * rng.standard_normal(q.shape), rng.standard_normal(q.shape)


# touching the pose of _mixed_pose(seed 3)'s contact points 1 and 2 and its tip
OBSTACLES = (Circle([0.072, -0.054], 0.0205), Wall([0.148, -0.2], [0.148, 0.2], 0.02))


@pytest.mark.parametrize("friction", [0.0, 0.3])
def test_compiled_evert_problem_and_backward_equal_reference(friction, assembly_matches,
                                                             backward_matches):
    model = VineModel(body_count=9, length=0.15, max_length=0.36, growth="evert",
                      obstacles=OBSTACLES, gravity=(0.3, -9.8), friction=friction)
    sim = VineSimulator(model, check_initial_pose=False)
    rng = np.random.default_rng(3)
    q, v = _mixed_pose(model, rng)
    design = sim.design_space().defaults()
    design["joint.rest_angle"] = rng.uniform(-0.3, 0.3, model.pin_count)
    params, _ = sim._parameters(design)
    params = sim._step_masses(params, q)
    dt = 0.01
    # a rate whose step crosses body 3's full length (everted 0.11 m beyond body 0, bodies
    # 0.04 m long): the joining step
    rate = (0.124 - evert.everted_length(model, q)) / dt
    for test_rate in (0.07, rate):
        _, reference = assembly_matches(sim, q, v, test_rate, params, dt)
    # the joining step: one lock released, contacts of bodies not out are off
    _, _, locked = evert.joint_bounds(model, q, rate, dt)
    np.testing.assert_array_equal(locked, [False] * 4 + [True] * 5)
    contact_out = np.isfinite(reference.lower[sim.layout.contact][::2 * len(OBSTACLES)])
    np.testing.assert_array_equal(contact_out, [True] * 5 + [False] * 4)
    g_q, g_v = rng.standard_normal(q.shape), rng.standard_normal(q.shape)
    solution, reference = backward_matches(sim, q, v, rate, params, dt, g_q, g_v, atol=1e-12)
    assert solution.active[sim.layout.contact].sum() >= 2  # contact curvature exercised
    assert reference.rate != 0.0


def test_evert_rows_curvature_and_targets_match_finite_differences():
    model = VineModel(body_count=7, length=0.15, max_length=0.35, growth="evert")
    rng = np.random.default_rng(5)
    q, w = _mixed_pose(model, rng)
    lam_joint, lam_slot = rng.standard_normal(2 * 7), rng.standard_normal(7)
    dt, rate = 0.01, 0.08
    parent, child = model.pins
    pairs = np.stack([parent, child], axis=1)

    def rows_times_w(x):
        joint_values, slot_values = evert.joint_rows(model, x)
        return float(lam_joint @ rows_times(np.repeat(pairs, 2, axis=0), joint_values, w)
                     + lam_slot @ rows_times(pairs, slot_values, w))

    gradcheck(lambda x: rows_times_w(x["q"]), {"q": q},
              {"q": evert.joint_curvature(model, q, lam_joint, lam_slot, w)}).assert_ok()
    # the rows are the velocity Jacobians of ν, the lock angle and σ
    joint_values, slot_values = evert.joint_rows(model, q)
    eps = 1e-7
    for k in range(7 * 3):
        dq = np.zeros(q.shape)
        dq.flat[k] = eps
        moved = (evert.slot_offsets(model, q + dq) - evert.slot_offsets(model, q - dq)) / (
            2 * eps)
        np.testing.assert_allclose(rows_times(pairs, slot_values, dq / eps), moved, atol=1e-7)

    def targets(x):
        lower, _, _ = evert.joint_bounds(model, x["q"], float(x["rate"]), dt)
        finite = np.isfinite(lower)
        weights = np.concatenate([lam_joint, lam_slot])
        return float(weights[finite] @ lower[finite])

    _, _, locked = evert.joint_bounds(model, q, rate, dt)
    free_locks = np.concatenate([np.stack([np.ones(7), locked], axis=1).reshape(-1),
                                 np.ones(7)]).astype(bool)
    weights = np.where(free_locks, np.concatenate([lam_joint, lam_slot]), 0.0)
    g_q, g_rate = evert.target_vjp(model, q, rate, dt, weights[:14], weights[14:])
    assert g_rate != 0.0
    gradcheck(targets, {"q": q, "rate": np.asarray(rate)},
              {"q": g_q, "rate": np.asarray(g_rate)}).assert_ok()


def test_a_straight_vine_everts_at_the_growth_rate_one_body_after_another(runner):
    sim = everting(bodies=8, length=0.1, max_length=0.4)
    d2 = sim.model.body_length
    states, _ = runner(sim, 250, rate=0.1)  # 0.1 m → 0.35 m
    joined = []
    for k, state in enumerate(states):
        q = state.body_q
        length = 0.1 + 0.1 * 0.01 * k
        assert tip_position(sim.model, q)[0] == pytest.approx(length, abs=1e-12)
        assert vine_length(sim.model, q) == pytest.approx(length, abs=1e-12)
        joined.append(int(np.sum(evert.slot_offsets(sim.model, q) > -1e-12)))
        # the everted bodies lie end to end at full length; the others wait at the tip
        sigma = evert.slot_offsets(sim.model, q)
        out = joined[-1]
        np.testing.assert_allclose(q[:out, 0], d2 * (np.arange(out) + 0.5), atol=1e-12)
        np.testing.assert_allclose(sigma[out + 1:], -d2, atol=1e-12)
    # a body joins every 2d / u = 0.5 s = 50 steps (from 2 at 0.1 m)
    changes = np.flatnonzero(np.diff(joined)) + 1
    np.testing.assert_array_equal(changes, [50, 100, 150, 200, 250][:len(changes)])
    np.testing.assert_array_equal(np.array(joined)[changes], np.arange(3, 3 + len(changes)))


def test_bends_stay_where_they_everted_unlike_every_prismatic(runner):
    """The pins of a vine that everts keep their arc length from the base as it grows; the
    prismatic model's pins move out with the growth (its bends stretch)."""
    grown = everting(bodies=8, length=0.1, max_length=0.4, initial_angles=0.3,
                     stiffness=0.05, rest_angle=0.3)
    old = VineSimulator(VineModel(body_count=3, length=0.1, initial_angles=0.3,
                                  stiffness=0.05, rest_angle=0.3))
    for sim in (grown, old):
        states, _ = runner(sim, 200, rate=0.1)
        first, last = (centerline_vertices(sim.model, s.body_q) for s in (states[0],
                                                                          states[-1]))
        first_bend = np.linalg.norm(first[1] - first[0])
        last_bend = np.linalg.norm(last[1] - last[0])
        if sim is grown:
            assert last_bend == pytest.approx(first_bend, abs=1e-9)
            assert vine_length(sim.model, states[-1].body_q) == pytest.approx(0.3, abs=1e-3)
        else:  # the base pair everts a third of the growth
            assert last_bend > first_bend + 0.05


def test_growth_beyond_max_length_is_an_error(runner):
    sim = everting(bodies=4, length=0.3, max_length=0.4)
    states, _ = runner(sim, 9, rate=1.0)
    with pytest.raises(SimulationError, match="everted all its 4 bodies"):
        runner(sim, 2, rate=1.0, state=states[-1])


def test_evert_masses_follow_the_everted_material(runner):
    sim = everting(bodies=6, length=0.1, max_length=0.3, initial_angles=0.1,
                   gravity=(0.0, -9.81))
    states, design = runner(sim, 13)
    q, mass = states[-1].body_q, design["body.mass"]
    lengths = material_lengths(sim.model, q)
    np.testing.assert_allclose(lengths, [0.05, 0.05, 0.013, 0, 0, 0], atol=2e-4)
    masses = everted_masses(sim.model, mass, q)
    f = UNEVERTED_MASS_FRACTION
    np.testing.assert_allclose(masses, mass * (f + (1 - f) * lengths / 0.05))
    weights = np.linspace(1.0, 2.0, 6)
    g_mass, g_q = everted_masses_vjp(sim.model, mass, q, weights)
    gradcheck(lambda x: float(weights @ everted_masses(sim.model, x["m"], x["q"])),
              {"m": mass, "q": q}, {"m": g_mass, "q": g_q}).assert_ok()
    # compiled lengths: the NumPy reference 2d + σ_j
    np.testing.assert_allclose(lengths[1:], 0.05 + evert.slot_offsets(sim.model, q)[1:],
                               rtol=0, atol=1e-15)
    # inertia about the body's centre of the part out of its parent (a rod ending at the
    # body's distal end): (2d)²/12 when out, ℓ²/12 + (ℓ/2 − d)² emerging, d² on the tip
    d = 0.025
    r2 = gyration_squares(sim.model, q)
    np.testing.assert_allclose(r2, lengths**2 / 12 + (lengths / 2 - d) ** 2, rtol=1e-12)
    np.testing.assert_allclose(r2[[0, 1]], 0.05**2 / 12, rtol=1e-3)  # out up to drift
    np.testing.assert_allclose(r2[3:], d**2, rtol=1e-3)
    gradcheck(lambda x: float(weights @ gyration_squares(sim.model, x["q"])), {"q": q},
              {"q": gyration_squares_vjp(sim.model, q, weights)}).assert_ok()
    radius = everting(bodies=6, length=0.1, max_length=0.3, gyration_radius=0.01)
    np.testing.assert_array_equal(gyration_squares(radius.model, q), 0.01**2)


def test_evert_gradients_across_a_joining_step(runner, tip_gradcheck):
    # 0.4 mm more than whole bodies: body 2 reaches its full length within step 46, which
    # shares its growth between bodies 2 and 3 (the split, away from a step's end)
    sim = everting(bodies=6, length=0.1004, max_length=0.3, initial_angles=0.1,
                   gravity=(0.0, -9.81), ground_friction=2.0)
    states, design = runner(sim, 43)
    report = tip_gradcheck(sim, states[-1], design, steps=6)
    report.assert_ok()
    check_step_gradients(sim, dt=0.01, steps=4, state=states[-1], action=RATE,
                         design=design, eps=1e-5).assert_ok()


def test_evert_gradients_in_contact_across_a_joining_step(runner, tip_gradcheck):
    sim = everting(bodies=8, length=0.1004, max_length=0.4, friction=0.2,
                   obstacles=(Wall([0.35, -0.2], [0.15, 0.2], 0.02),))
    states, design = runner(sim, 144)  # sliding on the wall since step 138
    params, _ = sim._parameters(design)
    q, v = states[-1].body_q, states[-1].body_qd
    _, _, solution, _ = step(sim.arrays, sim.layout, sim.qp, q, v, 0.1,
                             sim._step_masses(params, q), 0.01)
    assert solution.active[sim.layout.contact].sum() >= 1
    report = tip_gradcheck(sim, states[-1], design, steps=5)  # body 4 joins in step 146
    # the ground friction's share of this slow vine's loss (4e-7) is at the finite
    # differences' round-off: test_evert_gradients_across_a_joining_step checks it
    report.errors.pop("design.ground.friction")
    report.assert_ok()
    check_step_gradients(sim, dt=0.01, steps=1, state=states[-1], action=RATE,
                         design=design, eps=1e-5).assert_ok()


def test_evert_step_is_a_pure_function_of_its_inputs(runner):
    sim = everting(bodies=8, length=0.1, max_length=0.4, friction=0.2,
                   obstacles=(Wall([0.35, -0.2], [0.15, 0.2], 0.02),))
    states, design = runner(sim, 140)
    first = sim.step(states[-1], RATE, design, 0.01)
    sim.step_vjp(states[50], RATE, design, 0.01, states[3])
    sim.step(states[20], RATE, design, 0.01)
    again = sim.step(states[-1], RATE, design, 0.01)
    np.testing.assert_array_equal(first.body_q, again.body_q)
    np.testing.assert_array_equal(first.body_qd, again.body_qd)


def _wall_run(runner, growth, **options):
    """The wall_vertical vine (ρ 0.04 kg/m, bending stiffness K·spacing 0.01 N m²) growing
    0.3 m/s for 2 s, 0.25 → 0.85 m: (simulator, states, the centreline's deepest point
    inside the wall [m])."""
    sim = make_simulator(scene="wall_vertical", growth=growth, linear_density=0.04, **options)
    states, _ = runner(sim, 200, rate=0.3)
    deepest = 0.0
    for state in states:
        vertices = centerline_vertices(sim.model, state.body_q)
        along = np.linspace(0.0, 1.0, 20)[:, None, None]
        points = (vertices[:-1] + along * np.diff(vertices, axis=0)).reshape(-1, 2)
        deepest = min(deepest, float(np.min(signed_distance(sim.model.obstacles[0],
                                                             points)[0])))
    return sim, states, deepest


def test_on_the_wall_the_old_model_cuts_through_and_stretches_its_bends(runner):
    grown, grown_states, grown_depth = _wall_run(runner, "evert", bodies=24, max_length=0.9,
                                                 stiffness=0.2 * 0.05 / 0.0375)
    old, old_states, old_depth = _wall_run(runner, "every_prismatic", stiffness=0.2)
    for sim, states in ((grown, grown_states), (old, old_states)):
        assert vine_length(sim.model, states[-1].body_q) == pytest.approx(0.85, rel=2e-3)
    # every_prismatic: 17 cm links with contact points only at their pins pass through the
    # 2 cm wall; the everting vine (a contact point every 3.75 cm) stays on its face
    assert old_depth < -0.009
    assert grown_depth > -0.0015
    first = [np.linalg.norm(centerline_vertices(grown.model, s.body_q)[1]) for s in
             (grown_states[0], grown_states[-1])]
    assert first[1] == pytest.approx(first[0], abs=1e-9)
    first = [np.linalg.norm(centerline_vertices(old.model, s.body_q)[1]) for s in
             (old_states[0], old_states[-1])]
    assert first[1] > 3 * first[0]
