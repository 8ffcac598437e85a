"""The XPBD step against known answers: periods, energy, constraint gaps, damping, actuation,
friction, limits, the two solvers, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.simulator import SimulationError
from sim_pbd import PBDState
from sim_pbd.kinematics import joint_positions
from sim_pbd.options import SCHEMES
from sim_pbd.rotations import quat_rotate, quat_to_matrix
from sim_pbd.step import step

# The known answers hold at 10 substeps of 2 iterations (dt 0.01 s; the package's default,
# 100 x 4, is what Baxter's 2 s swing needs to stay within 1e-3 rad) in the default scheme.
DEFAULT = {"substeps": 10, "iterations": 2}


def _rollout(model, state, steps, *, action=None, dt=0.01, **options):
    action = np.zeros(model.joint_count) if action is None else np.asarray(action, float)
    params = model.parameters()
    states = [state]
    for _ in range(steps):
        states.append(step(model, states[-1], action, params, dt, **(DEFAULT | options)))
    return states


def _energy(model, state) -> float:
    total = 0.0
    for i in range(model.link_count):
        r = quat_to_matrix(state.link_q[i])
        inertia = r @ model.link_inertia[i] @ r.T
        total += (0.5 * model.link_mass[i] * state.link_v[i] @ state.link_v[i]
                  + 0.5 * state.link_w[i] @ inertia @ state.link_w[i]
                  - model.link_mass[i] * model.gravity @ state.link_x[i])
    return float(total)


def _largest_gap(model, state) -> float:
    """Largest distance between a joint's origin on its parent and on its child [m]."""
    gaps = []
    for j in range(model.joint_count):
        parent, child = model.joint_parent[j], model.joint_child[j]
        on_child = state.link_x[child] + quat_rotate(state.link_q[child], model.joint_child_x[j])
        on_parent = (model.joint_parent_x[j] if parent < 0 else state.link_x[parent]
                     + quat_rotate(state.link_q[parent], model.joint_parent_x[j]))
        gaps.append(np.linalg.norm(on_child - on_parent))
    return max(gaps)


def _angles(model, states):
    return np.array([joint_positions(model, model.parameters(), s)[0] for s in states])


def test_small_angle_pendulum_period(models):
    model = models.pendulum(length=1.0)
    dt, amplitude = 0.01, 0.02
    angles = _angles(model, _rollout(model, models.state_at(model, [amplitude]), 400,
                                     substeps=5, iterations=1))[:, 0]
    down = np.flatnonzero((angles[:-1] > 0) & (angles[1:] <= 0))
    crossings = (down + angles[down] / (angles[down] - angles[down + 1])) * dt
    period = np.mean(np.diff(crossings))
    pivot_inertia = model.link_inertia[0][0, 0] + model.link_mass[0] * 0.5**2
    expected = 2 * np.pi * np.sqrt(pivot_inertia / (model.link_mass[0] * 9.81 * 0.5))
    assert abs(period / expected - 1) < 5e-3


def test_double_pendulum_energy_drift_shrinks_with_substeps(models):
    model = models.chain(2)
    start = models.state_at(model, [1.0, -0.5])
    scale = model.link_mass.sum() * 9.81 * 0.5
    drifts = []
    for substeps in (5, 20):
        final = _rollout(model, start, 50, substeps=substeps, iterations=1)[-1]
        drifts.append(abs(_energy(model, final) - _energy(model, start)) / scale)
    assert drifts[1] < 0.4 * drifts[0]
    assert drifts[1] < 5e-3


def test_joint_gap_after_a_step_at_default_settings(models):
    model = models.chain(2)
    state = models.state_at(model, [1.0, -0.5], [1.0, -1.0])
    assert _largest_gap(model, _rollout(model, state, 1)[-1]) < 1e-6


def test_damped_joint_decays_exponentially(models):
    base = models.pendulum()
    pivot_inertia = base.link_inertia[0][0, 0] + base.link_mass[0] * 0.5**2
    rates = []
    for damping in (0.0, 0.05):
        model = models.make_model([(base.link_mass[0], base.link_inertia[0])],
                                  [dict(type="revolute", parent=-1, child=0, damping=damping,
                                        child_x=base.joint_child_x[0])],
                                  gravity=(0.0, 0.0, 0.0))
        final = _rollout(model, models.state_at(model, [0.0], [2.0]), 50)[-1]
        rates.append(joint_positions(model, model.parameters(), final)[1][0])
    decay = np.exp(-0.05 * 0.5 / pivot_inertia)
    # XPBD's own first-order numerical damping (0.16 % over this spin) is the rest
    assert rates[1] == pytest.approx(2.0 * decay, rel=2e-3)
    assert rates[1] / rates[0] == pytest.approx(decay, rel=5e-4)


def test_damping_too_stiff_for_the_substep_stays_stable(models):
    # b h w = 36 (100 N m s/rad on a light pendulum, 1 ms substeps): explicit damping would
    # flip and grow the rate 35x a substep; capped at k w = 1.5 it decays
    base = models.pendulum()
    model = models.make_model([(base.link_mass[0], base.link_inertia[0])],
                              [dict(type="revolute", parent=-1, child=0, damping=100.0,
                                    child_x=base.joint_child_x[0])], gravity=(0.0, 0.0, 0.0))
    states = _rollout(model, models.state_at(model, [0.0], [2.0]), 5)
    rates = [abs(joint_positions(model, model.parameters(), s)[1][0]) for s in states]
    assert all(later <= earlier for earlier, later in zip(rates, rates[1:], strict=False))
    assert rates[-1] < 1e-6


def test_prismatic_joint_slides_at_gravity_along_its_axis(models):
    tilt = 0.6
    axis = np.array([np.sin(tilt), 0.0, np.cos(tilt)])
    model = models.make_model([(2.0, np.diag([0.01, 0.02, 0.03]))],
                              [dict(type="prismatic", parent=-1, child=0, axis=axis,
                                    child_x=np.array([0.05, 0.0, 0.02]))])
    states = _rollout(model, models.state_at(model, [0.0]), 30)
    rate = joint_positions(model, model.parameters(), states[-1])[1][0]
    assert rate == pytest.approx(-9.81 * np.cos(tilt) * 0.3, rel=1e-6)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_torque_without_gravity_gives_torque_over_axis_inertia(models, scheme):
    base = models.pendulum()
    model = models.make_model([(base.link_mass[0], base.link_inertia[0])],
                              [dict(type="revolute", parent=-1, child=0,
                                    child_x=base.joint_child_x[0])], gravity=(0.0, 0.0, 0.0))
    torque = 0.3
    states = _rollout(model, models.state_at(model, [0.0]), 20, action=[torque],
                      scheme=scheme)
    pivot_inertia = base.link_inertia[0][1, 1] + base.link_mass[0] * 0.5**2
    rate = joint_positions(model, model.parameters(), states[-1])[1][0]
    assert rate == pytest.approx(torque / pivot_inertia * 0.2, rel=1e-5)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_friction_holds_below_and_slips_above_its_torque(models, scheme):
    base = models.pendulum()
    model = models.make_model([(base.link_mass[0], base.link_inertia[0])],
                              [dict(type="revolute", parent=-1, child=0, friction=0.5,
                                    child_x=base.joint_child_x[0])], gravity=(0.0, 0.0, 0.0))
    pivot_inertia = base.link_inertia[0][1, 1] + base.link_mass[0] * 0.5**2
    start = models.state_at(model, [0.0])
    held = _rollout(model, start, 10, action=[0.4], scheme=scheme)[-1]
    slipping = _rollout(model, start, 10, action=[0.8], scheme=scheme)[-1]
    held_q, held_rate = (v[0] for v in joint_positions(model, model.parameters(), held))
    expected_rate = (0.8 - 0.5) / pivot_inertia * 0.1
    slipping_rate = joint_positions(model, model.parameters(), slipping)[1][0]
    if scheme == "first_order":
        assert abs(held_rate) < 1e-12
        assert slipping_rate == pytest.approx(expected_rate, rel=1e-6)
    else:
        # friction stays a velocity impulse inside the substeps, not in the half kicks
        # around them: the held joint reports about the closing half kick's rate (h/2) τ / I
        # (6.4e-4 rad/s here; 1/10 of it at the default 100 substeps) and creeps by 1.6e-5
        # rad over the 0.1 s; the slip is 0.3 % fast
        h = 0.01 / DEFAULT["substeps"]
        assert abs(held_rate) <= h * 0.4 / pivot_inertia
        assert abs(held_q) < 2e-5
        assert slipping_rate == pytest.approx(expected_rate, rel=5e-3)


def test_limit_stops_the_joint(models):
    model = models.pendulum(upper=0.2)
    angles = _angles(model, _rollout(model, models.state_at(model, [0.0], [3.0]), 30))
    assert angles.max() < 0.2 + 1e-9
    assert angles.max() > 0.2 - 1e-3


def test_solvers_agree_with_many_iterations(models):
    model = models.chain(2)
    state = models.state_at(model, [0.3, -0.4], [1.0, 0.5])
    action = np.array([0.2, -0.1])

    def difference(iterations):
        finals = [step(model, state, action, model.parameters(), 0.01, substeps=4,
                       iterations=iterations, solver=solver)
                  for solver in ("gauss_seidel", "jacobi")]
        return [np.abs(getattr(finals[0], f) - getattr(finals[1], f)).max()
                for f in ("link_x", "link_q", "link_v", "link_w")]

    assert max(difference(2)[:2]) > 1e-5
    # converged, the two differ only by the path of the nonlinear projections, second order
    # in the corrections (~1e-8 m here, divided by h in the velocities)
    x, q, v, w = difference(200)
    assert max(x, q) < 1e-7
    assert max(v, w) < 1e-4


def test_step_is_pure(models):
    model = models.prismatic_chain()
    state = models.state_at(model, [0.3, 0.1], [1.0, -0.2])
    before = PBDState(*(np.copy(getattr(state, f)) for f in PBDState.__dataclass_fields__))
    params = model.parameters()
    first = step(model, state, np.ones(2), params, 0.01, **DEFAULT)
    second = step(model, state, np.ones(2), params, 0.01, **DEFAULT)
    for name in PBDState.__dataclass_fields__:
        np.testing.assert_array_equal(getattr(state, name), getattr(before, name))
        np.testing.assert_array_equal(getattr(first, name), getattr(second, name))


def test_unnormalized_orientation_is_normalized(models):
    model = models.pendulum()
    state = models.state_at(model, [0.3])
    scaled = PBDState(state.link_x, 3.0 * state.link_q, state.link_v, state.link_w)
    a = step(model, state, np.zeros(1), model.parameters(), 0.01, **DEFAULT)
    b = step(model, scaled, np.zeros(1), model.parameters(), 0.01, **DEFAULT)
    np.testing.assert_allclose(a.link_q, b.link_q, atol=1e-15)


@pytest.mark.parametrize(("change", "message"), [
    ({"action": np.zeros(3)}, "one torque .N m. or force .N. per joint"),
    ({"substeps": 0}, "substeps must be a positive integer"),
    ({"iterations": 1.5}, "iterations must be a positive integer"),
    ({"solver": "newton"}, "solver must be one of"),
    ({"dt": -0.01}, "dt must be a positive"),
])
def test_bad_input_is_named(models, change, message):
    model = models.pendulum()
    args = {"action": np.zeros(1), "dt": 0.01, **DEFAULT, "solver": "gauss_seidel"} | change
    with pytest.raises(ValueError, match=message):
        step(model, models.state_at(model, [0.0]), args.pop("action"), model.parameters(),
             args.pop("dt"), **args)


def test_a_non_finite_action_stops_the_step_naming_the_joint(models):
    model = models.pendulum()
    with pytest.raises(SimulationError, match="NaN or inf at joint"):
        step(model, models.state_at(model, [0.0]), np.array([np.nan]), model.parameters(),
             0.01, **DEFAULT)
