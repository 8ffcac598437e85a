"""Default solver settings against a tightly converged reference (OSQP eps 1e-9)."""

import numpy as np

from sim_vine import SolverSettings, VineSimulator, make_simulator
from sim_vine.kinematics import tip_position


def _tip_trajectory(sim, steps):
    design = sim.design_space().defaults()
    state = sim.initial_state(design)
    tips = []
    for _ in range(steps):
        state = sim.step(state, np.array([0.1]), design, 0.01)
        tips.append(tip_position(sim.model, state.body_q))
    return np.array(tips)


def _osqp_alone(model, eps):
    return VineSimulator(model, settings=SolverSettings(eps_abs=eps, eps_rel=eps,
                                                        max_iter=1_000_000, refine=False))


def test_default_settings_match_the_tight_reference_within_0_1_mm():
    # 20 bodies, 2.5 s: the tip reaches the circle at about 1.4 s and slides along it.
    # The reference is OSQP alone at eps 1e-9, independent of the exact active-set solve.
    default_sim = make_simulator(scene="runtime", bodies=20)
    default = _tip_trajectory(default_sim, 250)
    tight = _tip_trajectory(_osqp_alone(default_sim.model, 1e-9), 250)
    assert np.min(default[:, 1]) < -0.02  # deflected by the obstacle
    assert np.max(np.linalg.norm(default - tight, axis=1)) < 1e-4


def test_osqp_iterates_alone_would_not():
    # Why the exact active-set solve matters: OSQP's iterate at its default eps 1e-3
    # drifts from the reference.
    model = make_simulator(scene="runtime", bodies=20).model
    loose = _tip_trajectory(_osqp_alone(model, 1e-3), 250)
    exact = _tip_trajectory(VineSimulator(model, settings=SolverSettings(
        eps_abs=1e-3, eps_rel=1e-3)), 250)
    tight = _tip_trajectory(_osqp_alone(model, 1e-9), 250)
    assert np.max(np.linalg.norm(loose - tight, axis=1)) > 1e-3
    assert np.max(np.linalg.norm(exact - tight, axis=1)) < 1e-7


def test_reusing_the_previous_active_set_gives_the_same_steps():
    # Most steps keep their active set, so the solver skips OSQP when the previous set is
    # still optimal. The result must not depend on that shortcut: with and without it the
    # trajectory agrees to round-off, sliding along the circle with and without friction.
    model = make_simulator(scene="runtime", bodies=20).model
    for friction in (0.0, 0.3):
        sims = [VineSimulator(model, settings=SolverSettings(reuse_active_set=reuse))
                for reuse in (True, False)]
        tips = []
        for sim in sims:
            design = sim.design_space().defaults()
            design["contact.friction"] = np.asarray(friction)
            state = sim.initial_state(design)
            trajectory = []
            for _ in range(250):
                state = sim.step(state, np.array([0.1]), design, 0.01)
                trajectory.append(tip_position(sim.model, state.body_q))
            tips.append(np.array(trajectory))
        assert np.min(tips[0][:, 1]) < -0.02  # in contact for most of the run
        np.testing.assert_allclose(tips[0], tips[1], atol=1e-12)
        assert sims[0].qp.reused > 200 and sims[1].qp.reused == 0
