"""The safety checks (sim_vine.safety): the start, the time step, each step's inputs and
divergence, through the module's functions and the simulator's methods that delegate to
them."""

import re

import numpy as np
import pytest

from codesign import SimulationError, UnstableTimeStepError
from sim_vine import VineModel, VineSimulator, VineState, make_simulator, safety

RATE = np.array([0.1])


@pytest.mark.parametrize("action, message", [
    (np.array([np.nan]), "not a number"),
    (np.array([-0.05]), "negative"),
    (np.array([0.1, 0.2]), "shape"),
])
def test_bad_growth_rates_raise(action, message):
    sim = make_simulator()
    design = sim.design_space().defaults()
    with pytest.raises(ValueError, match=message):
        sim.step(sim.initial_state(design), action, design, 0.01)


def test_bad_states_and_dt_raise():
    sim = make_simulator(bodies=4)
    design = sim.design_space().defaults()
    state = sim.initial_state(design)
    with pytest.raises(ValueError, match="shape"):
        sim.step(VineState(state.body_q[:3], state.body_qd), RATE, design, 0.01)
    with pytest.raises(SimulationError, match="NaN"):
        sim.step(VineState(state.body_q * np.nan, state.body_qd), RATE, design, 0.01)
    with pytest.raises(ValueError, match="dt"):
        sim.step(state, RATE, design, -0.01)
    assert safety.check_step_inputs(sim.model, state, RATE, 0.01, offset=0.05) == \
        pytest.approx(0.15)


def test_vine_starting_inside_an_obstacle_is_rejected():
    with pytest.raises(ValueError, match="starts inside an obstacle"):
        make_simulator(obstacles=[{"type": "circle", "center": [0.1, 0.0], "radius": 0.03}])
    safety.check_start(make_simulator(scene="wall").model)


def test_check_state_reports_the_step():
    sim = make_simulator(scene="wall")
    design = sim.design_space().defaults()
    state = sim.initial_state(design)
    sim.check_state(state, 0)
    broken = state.body_q.copy()
    broken[3, 1] += 0.01
    with pytest.raises(SimulationError, match="step 7: joint constraints"):
        sim.check_state(VineState(broken, state.body_qd), 7)
    inside = sim.model.configuration(np.zeros(sim.model.pin_count),
                                     np.full(sim.model.prismatic_count, 0.016))
    with pytest.raises(SimulationError, match="step 9: contact point .* inside obstacle 0"):
        sim.check_state(VineState(inside, state.body_qd), 9)
    with pytest.raises(SimulationError, match="NaN"):
        sim.check_state(VineState(state.body_q * np.nan, state.body_qd), 3)
    with pytest.raises(SimulationError, match="step 7: joint constraints"):
        safety.check_state(sim.model, VineState(broken, state.body_qd), 7,
                           joint_tolerance=1e-3, penetration_tolerance=5e-3)
    safety.check_state(sim.model, VineState(broken, state.body_qd), 7, joint_tolerance=0.02,
                       penetration_tolerance=5e-3)


def test_explicit_springs_report_the_largest_stable_dt():
    sim = VineSimulator(VineModel(body_count=6, implicit_springs=False))
    design = sim.design_space().defaults()
    with pytest.raises(UnstableTimeStepError, match=r"use dt <= [0-9.e-]+ s"):
        sim.check_time_step(design, 0.01)
    implicit = make_simulator(bodies=6)
    implicit.check_time_step(implicit.design_space().defaults(), 0.01)  # stable for any dt
    params, _ = sim._parameters(design)
    with pytest.raises(UnstableTimeStepError) as error:
        safety.check_time_step(sim.model, params, 0.01)
    largest = float(re.search(r"use dt <= ([0-9.e-]+) s", str(error.value)).group(1))
    safety.check_time_step(sim.model, params, 0.99 * largest)
    with pytest.raises(UnstableTimeStepError, match="positive"):
        safety.check_time_step(implicit.model, params, 0.0)


