import numpy as np
import pytest

from codesign import (
    CircleTrajectory,
    MLPController,
    OpenLoopController,
    PDController,
    SinusoidController,
    TaskSpaceStiffnessController,
)
from codesign.testing import gradcheck


def check_controller(controller, observation, control_step=3):
    weights = controller.parameter_space().defaults()
    rng = np.random.default_rng(0)
    weights = {k: v + 0.1 * rng.standard_normal(v.shape) for k, v in weights.items()}
    w_out = rng.standard_normal(controller.action_size)

    def loss(inputs):
        return float(w_out @ controller.act(inputs["obs"], control_step, inputs["weights"]))

    g_weights = {k: np.zeros_like(v) for k, v in weights.items()}
    g_obs = controller.act_vjp(observation, control_step, weights, w_out, g_weights)
    report = gradcheck(loss, {"obs": observation, "weights": weights},
                       {"obs": g_obs, "weights": g_weights},
                       groups=["obs", "weights"] if observation.size else ["weights"])
    assert report.passed, str(report)


def test_mlp_gradients_with_phase_inputs():
    ctrl = MLPController(observation_size=5, action_size=3, hidden=[8, 6], phase_inputs=2,
                         period=20, action_scale=2.0, seed=1)
    check_controller(ctrl, np.linspace(-1, 1, 5))


def test_mlp_output_is_bounded_by_action_scale():
    ctrl = MLPController(observation_size=2, action_size=4, hidden=[4], action_scale=0.5)
    w = {k: 100 * v for k, v in ctrl.parameter_space().defaults().items()}
    assert np.all(np.abs(ctrl.act(np.ones(2) * 10, 0, w)) <= 0.5)


@pytest.mark.parametrize("squash", [False, True])
def test_open_loop_gradients(squash):
    ctrl = OpenLoopController(observation_size=0, action_size=2, control_steps=5, squash=squash)
    check_controller(ctrl, np.zeros(0))


def test_open_loop_returns_the_row_of_its_table():
    ctrl = OpenLoopController(observation_size=0, action_size=2, control_steps=3)
    table = np.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(ctrl.act(np.zeros(0), 2, {"table": table}), [4, 5])


def test_sinusoid_gradients_and_period():
    ctrl = SinusoidController(observation_size=0, action_size=2, control_dt=0.01,
                              frequency=2.0, harmonics=2, squash=True)
    check_controller(ctrl, np.zeros(0))
    w = ctrl.parameter_space().defaults()
    np.testing.assert_allclose(ctrl.act(None, 0, w), ctrl.act(None, 50, w), atol=1e-12)


def test_pd_law_and_gradients():
    ctrl = PDController(observation_size=4, action_size=2, kp=3.0, kd=0.5, target=1.0)
    w = ctrl.parameter_space().defaults()
    np.testing.assert_allclose(ctrl.act(np.array([0.0, 2.0, 1.0, 0.0]), 0, w), [2.5, -3.0])
    check_controller(ctrl, np.array([0.2, -0.4, 0.3, 0.9]))


def test_open_loop_controller_drives_a_passive_scene_with_an_empty_table():
    ctrl = OpenLoopController(observation_size=0, action_size=0, control_steps=4)
    weights = ctrl.parameter_space().defaults()
    assert weights["table"].shape == (4, 0)
    assert ctrl.act(np.zeros(0), 2, weights).shape == (0,)
    g_weights = {"table": np.zeros((4, 0))}
    assert ctrl.act_vjp(np.zeros(0), 2, weights, np.zeros(0), g_weights).shape == (0,)


def test_circle_trajectory_runs_round_at_constant_speed():
    circle = CircleTrajectory(centre=[2.7, 0.0, 0.0], radius=0.3, period=2.0,
                              axes=[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], phase=0.5)
    start = [2.7, 0.3 * np.cos(0.5), 0.3 * np.sin(0.5)]
    np.testing.assert_allclose(circle.position(0.0), start)
    np.testing.assert_allclose(circle.position(2.0), start, atol=1e-12)
    np.testing.assert_allclose(circle.position(0.5) - circle.centre,
                               0.3 * np.array([0.0, -np.sin(0.5), np.cos(0.5)]), atol=1e-12)
    h = 1e-6
    for time in (0.0, 0.7, 1.3):
        difference = (circle.position(time + h) - circle.position(time - h)) / (2 * h)
        np.testing.assert_allclose(circle.velocity(time), difference, atol=1e-8)
        assert np.linalg.norm(circle.velocity(time)) == pytest.approx(0.3 * np.pi)


@pytest.mark.parametrize("kwargs, message", [
    ({"axes": [[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]}, "two orthonormal vectors"),
    ({"radius": -0.1}, "radius must be a length >= 0"),
    ({"period": 0.0}, "period must be a positive time"),
    ({"centre": [1.0, 2.0]}, r"centre must be \[x, y, z\]"),
])
def test_a_bad_circle_is_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CircleTrajectory(**kwargs)


def test_task_space_stiffness_law_and_gradients():
    ctrl = TaskSpaceStiffnessController(observation_size=12, action_size=2, control_dt=0.01,
                                        centre=[2.7, 0.0, 0.0], radius=0.3, period=2.0)
    position, velocity = np.array([3.1, 0.05, 0.0]), np.array([0.2, -0.1, 0.0])
    jacobian = np.array([[-0.05, -0.02], [3.1, 0.4], [0.0, 0.0]])
    observation = np.concatenate([position, velocity, jacobian.reshape(-1)])
    weights = ctrl.parameter_space().defaults()
    assert weights["stiffness"] == 60.0 and weights["damping"] == 6.0
    circle = CircleTrajectory(centre=[2.7, 0.0, 0.0], radius=0.3, period=2.0)
    force = (60.0 * (circle.position(0.07) - position)
             + 6.0 * (circle.velocity(0.07) - velocity))
    np.testing.assert_allclose(ctrl.act(observation, 7, weights), jacobian.T @ force)
    check_controller(ctrl, observation, control_step=7)


@pytest.mark.parametrize("factory, kwargs, message", [
    (TaskSpaceStiffnessController,
     {"observation_size": 4, "action_size": 2, "control_dt": 0.01}, "6 \\+ 3 \\* action_size"),
    (PDController, {"observation_size": 3, "action_size": 2}, "2 \\* action_size"),
    (MLPController, {"observation_size": 3, "action_size": 0}, "action_size >= 1"),
    (OpenLoopController, {"observation_size": 0, "action_size": -1, "control_steps": 2},
     "OpenLoopController needs action_size >= 0"),
    (MLPController, {"observation_size": 3, "action_size": 1, "hidden": [0]}, "positive"),
    (SinusoidController, {"observation_size": 0, "action_size": 1, "control_dt": 0.0},
     "control_dt > 0"),
])
def test_bad_configuration_is_refused(factory, kwargs, message):
    with pytest.raises(ValueError, match=message):
        factory(**kwargs)
