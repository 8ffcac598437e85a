"""Testing kit: finite-difference gradient checks and the simulator conformance suite."""

from ._conformance import (
    RandomLinearTerm,
    check_initial_state_gradients,
    check_protocol,
    check_rollout_gradients,
    check_step_gradients,
    check_step_is_pure,
    check_vjp_structure,
    run_conformance,
)
from ._gradcheck import GradcheckReport, gradcheck

__all__ = [
    "GradcheckReport",
    "gradcheck",
    "RandomLinearTerm",
    "check_protocol",
    "check_step_is_pure",
    "check_vjp_structure",
    "check_step_gradients",
    "check_initial_state_gradients",
    "check_rollout_gradients",
    "run_conformance",
]
