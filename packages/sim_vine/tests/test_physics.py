"""Known answers: spring oscillation frequency, growth length, joints, wall contact."""

import numpy as np
import pytest

from sim_vine import VineModel, VineSimulator, VineState, make_simulator, rectangle
from sim_vine.constraints import joint_residual
from sim_vine.dynamics import joint_angles
from sim_vine.kinematics import tip_position, vine_length


def _oscillation_period(angles, dt):
    crossings = np.flatnonzero((angles[:-1] > 0) & (angles[1:] <= 0))
    times = (crossings + angles[crossings] / (angles[crossings] - angles[crossings + 1])) * dt
    return float(np.mean(np.diff(times)))


@pytest.mark.parametrize("bodies, implicit", [(1, True), (2, True), (1, False)])
def test_cantilever_oscillates_at_sqrt_k_over_i(runner, bodies, implicit):
    stiffness, mass, length = 0.05, 0.01, 0.2
    model = VineModel(body_count=bodies, length=length, total_mass=mass, stiffness=stiffness,
                      damping=0.0, initial_angles=0.05, implicit_springs=implicit)
    sim = VineSimulator(model)
    d = model.half_length
    m_body = mass / bodies
    # inertia about the base pin: every body's own plus m x² of its centre
    centres = d * (2 * np.arange(bodies) + 1)
    inertia = np.sum(m_body * model.gyration**2 + m_body * centres**2)
    omega = np.sqrt(stiffness / inertia)
    dt = 1e-3  # ω Δt ≈ 0.02: the integrators' frequency errors are ~1e-4
    states, _ = runner(sim, int(2.2 * 2 * np.pi / omega / dt), rate=0.0, dt=dt)
    angles = np.array([s.body_q[0, 2] for s in states])
    period = _oscillation_period(angles, dt)
    assert period == pytest.approx(2 * np.pi / omega, rel=2e-3)
    if not implicit:  # symplectic Euler keeps the amplitude
        assert np.max(angles[-300:]) == pytest.approx(0.05, rel=0.02)


def test_a_long_everted_pair_swings_with_the_inertia_of_the_rod_it_carries(runner):
    # Two bodies 0.1 m long, the pair extended by 0.3 m and held there (rate 0): a rigid
    # rotor on the base pin. Body 1 carries the rod ℓ = 0.4 m ending at its distal end, so
    # its inertia about its centre is ρ ℓ (ℓ²/12 + (ℓ/2 − d)²) (everted_mass.py).
    rho, stiffness, extension = 0.05, 0.2, 0.3
    model = VineModel(body_count=2, length=0.2, linear_density=rho, stiffness=stiffness,
                      damping=0.0, implicit_springs=False)
    sim = VineSimulator(model)
    d, ell = model.half_length, 2 * model.half_length + extension
    q = model.configuration([0.05], [extension])
    state = sim.start_from(VineState(body_q=q, body_qd=np.zeros_like(q)))
    m0, m1 = rho * 2 * d, rho * ell
    own = m0 * (2 * d) ** 2 / 12 + m0 * d**2  # body 0 about the base pin
    rod = m1 * (ell**2 / 12 + (ell / 2 - d) ** 2) + m1 * (d + ell) ** 2
    fixed_radius = m1 * (2 * d) ** 2 / 12 + m1 * (d + ell) ** 2  # before: I = m (2d)²/12
    omega = np.sqrt(stiffness / (own + rod))
    dt = 1e-3
    states, _ = runner(sim, int(2.2 * 2 * np.pi / omega / dt), rate=0.0, dt=dt, state=state)
    period = _oscillation_period(np.array([s.body_q[0, 2] for s in states]), dt)
    assert period == pytest.approx(2 * np.pi / omega, rel=1e-3)
    old_period = 2 * np.pi * np.sqrt((own + fixed_radius) / stiffness)
    assert abs(period / old_period - 1) > 0.05


@pytest.mark.parametrize("growth", ["every_prismatic", "tip"])
def test_constant_growth_lengthens_the_vine_by_rate_times_time(runner, growth):
    sim = VineSimulator(VineModel(body_count=8, length=0.2, growth=growth))
    states, _ = runner(sim, 100, rate=0.07, dt=0.01)
    assert vine_length(sim.model, states[-1].body_q) == pytest.approx(0.2 + 0.07 * 1.0,
                                                                       abs=1e-9)
    np.testing.assert_allclose(tip_position(sim.model, states[-1].body_q), [0.27, 0.0],
                               atol=1e-9)


def test_growth_of_a_swinging_vine_converges_at_first_order(runner):
    # Linearizing the growth constraint lets a rotating prismatic pair over-extend by
    # e ω² Δt² / 2 per step: the length error is first order in Δt.
    def length_error(dt):
        sim = VineSimulator(VineModel(body_count=8, length=0.2, initial_angles=0.15,
                                      gravity=(0.0, -9.81), stiffness=0.2))
        states, _ = runner(sim, int(round(1.0 / dt)), rate=0.05, dt=dt)
        return vine_length(sim.model, states[-1].body_q) - 0.25

    coarse, fine = length_error(0.01), length_error(0.005)
    assert abs(coarse) < 0.02 * 0.25
    assert 1.4 < coarse / fine < 2.6  # halving Δt about halves the error


def test_joint_constraints_stay_satisfied(runner, small_vine):
    states, _ = runner(small_vine, 200, rate=0.1, dt=0.01)
    errors = [np.max(np.abs(joint_residual(small_vine.model, s.body_q))) for s in states]
    assert max(errors) < 1e-4  # second-order drift of the linearized joints, fed back
    assert tip_position(small_vine.model, states[-1].body_q)[1] < -0.01  # it sags


def test_vine_growing_into_a_wall_stops_penetrating(runner):
    sim = make_simulator(scene="wall")
    states, _ = runner(sim, 200, rate=0.1, dt=0.01)
    wall = sim.model.obstacles[0]
    from sim_vine.obstacles import signed_distance
    distances = np.array([signed_distance(wall, sim.model.contact_positions(s.body_q))[0]
                          for s in states])
    assert distances.min() > -1e-6  # never inside
    assert distances[-1].min() < 1e-4  # the tip rests on the wall
    tip = np.array([tip_position(sim.model, s.body_q) for s in states])
    assert tip[-1, 1] < tip[100, 1] - 0.02  # and slides along it


def test_coulomb_friction_holds_or_lets_slide(runner):
    # An inverted V of two free links, its tip on the floor, collapses under gravity unless
    # friction holds the tip: the tip's force is at cot(1 rad) = 0.64 to the normal.
    def tip_travel(friction):
        floor = rectangle([0.1, -0.0502], [0.4, 0.1])
        model = VineModel(body_count=4, length=0.2, initial_angles=[1.0, -2.0],
                          stiffness=0.0, damping=0.0, gravity=(0.0, -9.81),
                          friction=friction, obstacles=(floor,))
        states, _ = runner(VineSimulator(model), 60, rate=0.0, dt=0.005)
        start, end = (tip_position(model, s.body_q)[0] for s in (states[0], states[-1]))
        return end - start

    free, partial, held = tip_travel(0.0), tip_travel(0.3), tip_travel(1.0)
    assert free > 0.05
    assert 0.01 < partial < free
    assert abs(held) < 1e-6


def _settle(runner, sim, seconds, dt):
    return runner(sim, int(round(seconds / dt)), rate=0.0, dt=dt)[0][-1]


def test_vine_without_gravity_settles_to_its_rest_angles(runner):
    rest = np.array([0.3, -0.4, 0.2])
    model = VineModel(body_count=5, length=0.2, stiffness=0.05, damping=0.002,
                      rest_angle=rest)
    state = _settle(runner, VineSimulator(model), 3.0, 0.01)
    np.testing.assert_allclose(joint_angles(model, state.body_q), rest, atol=1e-7)
    # body headings; the positions carry the linearized growth's drift of the extensions
    # while the vine swings (Known limits), which is not what this test measures
    np.testing.assert_allclose(state.body_q[:, 2], model.configuration(rest)[:, 2], atol=1e-7)
    np.testing.assert_allclose(state.body_qd, 0.0, atol=1e-6)


@pytest.mark.parametrize("implicit", [True, False])
def test_a_vine_at_its_rest_angles_stays_at_rest(runner, implicit):
    rest = np.array([0.3, -0.4, 0.2])
    model = VineModel(body_count=5, length=0.2, rest_angle=rest, initial_angles=rest,
                      implicit_springs=implicit, stiffness=0.001, damping=1e-5)
    states, _ = runner(VineSimulator(model), 3, rate=0.0, dt=0.001)
    # round-off only: with the springs pulling toward 0 the pins would turn at ~1 rad/s
    np.testing.assert_allclose(states[-1].body_q, states[0].body_q, rtol=0, atol=1e-14)
    np.testing.assert_allclose(states[-1].body_qd, 0.0, atol=1e-12)


def _gravity_torques(model, q, mass):
    """Torque [N m] of gravity on the bodies beyond each pin, about that pin."""
    _, child = model.pins
    d = model.half_length
    torques = []
    for c in child:
        pin = q[c, :2] - d * np.array([np.cos(q[c, 2]), np.sin(q[c, 2])])
        arm = q[c:, :2] - pin
        force = mass[c:, None] * model.gravity
        torques.append(np.sum(arm[:, 0] * force[:, 1] - arm[:, 1] * force[:, 0]))
    return np.array(torques)


def test_vine_under_gravity_settles_where_springs_balance_gravity(runner):
    # static equilibrium of the bodies beyond pin j, about pin j: K_j (φ_j − φ0_j) = τ_gravity
    rest = np.array([0.5, -0.3, 0.4])
    stiffness = np.array([0.08, 0.05, 0.03])
    model = VineModel(body_count=5, length=0.2, stiffness=stiffness, damping=0.003,
                      rest_angle=rest, gravity=(0.0, -9.81), initial_angles=rest)
    sim = VineSimulator(model)
    state = _settle(runner, sim, 4.0, 0.01)
    mass = sim.design_space().defaults()["body.mass"]
    phi = joint_angles(model, state.body_q)
    torque = _gravity_torques(model, state.body_q, mass)
    assert np.all(np.abs(phi - rest) > 0.01)  # gravity bends every pin away from rest
    np.testing.assert_allclose(stiffness * (phi - rest), torque, rtol=1e-6, atol=1e-10)


def test_one_body_under_gravity_settles_at_the_analytic_angle(runner):
    # K (φ − φ0) = −m g d cos φ for a rod pinned at one end, gravity along −y
    from scipy.optimize import brentq

    stiffness, mass, rest = 0.02, 0.01, 0.6
    model = VineModel(body_count=1, length=0.2, total_mass=mass, stiffness=stiffness,
                      damping=0.002, rest_angle=rest, gravity=(0.0, -9.81))
    state = _settle(runner, VineSimulator(model), 3.0, 0.01)
    d = model.half_length
    expected = brentq(lambda phi: stiffness * (phi - rest) + mass * 9.81 * d * np.cos(phi),
                      -np.pi / 2, rest)
    assert state.body_q[0, 2] == pytest.approx(expected, abs=1e-8)


@pytest.mark.parametrize("ground, dt, steps", [(5.0, 0.01, 30), (2.0, 0.001, 30),
                                               (1e4, 0.1, 2)])
def test_ground_friction_slows_a_free_vine_as_implicit_euler_of_exp_minus_ct(ground, dt, steps):
    # A straight vine turning rigidly about its base (no springs, no gravity) feels only the
    # ground: translation and rotation both lose c_g m v, so every velocity follows
    # v_n = v_0 (1 + c Δt)^(−n), backward Euler's exp(−c t), stable at any c Δt (1000 here,
    # two steps: the velocity is then 1e-6 of v_0).
    # ω is small so that the linearized joints' drift (relative (ω Δt)²) stays below 1e-10.
    from sim_vine import VineState

    model = VineModel(body_count=6, length=0.2, stiffness=0.0, damping=0.0,
                      ground_friction=ground)
    sim = VineSimulator(model)
    design = sim.design_space().defaults()
    q = model.initial_configuration()
    v0 = 1e-4 * np.stack([-q[:, 1], q[:, 0], np.ones(6)], axis=1)
    state = VineState(body_q=q, body_qd=v0)
    for n in range(1, steps + 1):
        state = sim.step(state, np.array([0.0]), design, dt)
        decay = (1.0 + ground * dt) ** -n
        np.testing.assert_allclose(state.body_qd[:, 2], v0[:, 2] * decay, rtol=1e-9)
        np.testing.assert_allclose(state.body_qd[:, 1], v0[:, 1] * decay, rtol=1e-9,
                                   atol=1e-12 * decay)
    if ground * dt < 0.1:  # and it converges to exp(−c t) as Δt shrinks
        assert decay == pytest.approx(np.exp(-ground * steps * dt),
                                      rel=ground**2 * steps * dt**2)
