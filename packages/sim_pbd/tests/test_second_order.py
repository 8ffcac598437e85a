"""The second-order scheme (``scheme="second_order"``, :mod:`sim_pbd.step`): its hand-written
adjoint against central finite differences (both solvers, limits, compliance, friction,
damping, prismatic joints, a floating base), and its convergence order."""

from __future__ import annotations

import numpy as np
import pytest
from test_gradients import _check, _moving

SECOND = {"scheme": "second_order", "kernels": "numpy"}


@pytest.mark.parametrize("kernels", ["numpy", "numba"])
@pytest.mark.parametrize("solver", ["gauss_seidel", "jacobi"])
def test_one_step(any_model, models, solver, kernels):
    state, action = _moving(models, any_model)
    _check(any_model, state, action, steps=1, substeps=2, iterations=2, solver=solver,
           kernels=kernels, **SECOND)


@pytest.mark.parametrize("solver", ["gauss_seidel", "jacobi"])
def test_ten_steps(models, solver):
    model = models.chain_3d()
    state, action = _moving(models, model, seed=1)
    # a step of 1e-4 in the state leaves 1e-6 round-off in a small angular-velocity
    # derivative over 10 steps (2e-2; the same at 1e-3 and 3e-4 agrees to 1e-9)
    _check(model, state, action, steps=10, substeps=2, iterations=1, solver=solver,
           eps={"state": 3e-4}, **SECOND)


def test_against_an_active_limit(models):
    model = models.chain(2, upper=0.3)
    model = models.make_model(
        [(model.link_mass[i], model.link_inertia[i]) for i in range(2)],
        [dict(type="revolute", parent=-1, child=0, child_x=model.joint_child_x[0], upper=0.3),
         dict(type="revolute", parent=0, child=1, parent_x=model.joint_parent_x[1],
              child_x=model.joint_child_x[1])])
    state = models.state_at(model, [0.31, 0.2], [0.0, 1.5])
    _check(model, state, np.array([5.0, 0.1]), steps=10, directions=1, seed=1, substeps=2,
           iterations=1, **SECOND)


def test_sliding_friction(models):
    base = models.pendulum()
    model = models.make_model([(base.link_mass[0], base.link_inertia[0])],
                              [dict(type="revolute", parent=-1, child=0, friction=0.2,
                                    child_x=base.joint_child_x[0])])
    state = models.state_at(model, [0.4], [2.0])
    _check(model, state, np.array([0.5]), steps=5, substeps=2, iterations=1, **SECOND)
