import numpy as np
import pytest

from codesign import SimulationError
from sim_vine import VineSimulator, VineState, make_simulator
from sim_vine.kinematics import tip_position
from sim_vine.scene import SceneError, load_scene

RATE = np.array([0.1])


def test_design_space_names_and_shapes():
    sim = make_simulator(bodies=7)
    space = sim.design_space()
    assert space.names == ["joint.stiffness", "joint.damping", "contact.friction", "body.mass",
                           "growth.offset", "joint.rest_angle", "ground.friction"]
    assert space["joint.stiffness"].shape == (4,) and space["body.mass"].shape == (7,)
    assert sim.action_size == 1


def test_step_is_reproducible_and_pure(runner):
    sim = make_simulator(scene="wall")
    states, design = runner(sim, 80)
    state = states[-1]
    before = state.body_q.copy()
    first, second = sim.step(state, RATE, design, 0.01), sim.step(state, RATE, design, 0.01)
    np.testing.assert_array_equal(first.body_q, second.body_q)
    np.testing.assert_array_equal(first.body_qd, second.body_qd)
    np.testing.assert_array_equal(state.body_q, before)


def test_growth_offset_adds_to_the_action(runner):
    sim = make_simulator()
    design = sim.design_space().defaults()
    design["growth.offset"] = np.asarray(0.05)
    states, _ = runner(sim, 10, rate=0.0, design=design)
    assert tip_position(sim.model, states[-1].body_q)[0] == pytest.approx(0.2 + 0.005, abs=1e-9)
    design["growth.offset"] = np.asarray(-0.05)
    with pytest.raises(ValueError, match="negative"):
        sim.step(states[0], np.array([0.01]), design, 0.01)


def test_infeasible_step_names_the_step_and_cause(runner):
    # A slanted wall inside the friction cone jams the forced growth: no velocity exists.
    sim = make_simulator(scene="wall", friction=0.6)
    with pytest.raises(SimulationError, match=r"step \d+ after initial_state.*infeasible"):
        runner(sim, 120)


def test_scene_loading_and_errors(tmp_path):
    assert load_scene("runtime")["bodies"] == 30
    sim = make_simulator(scene="runtime", bodies=12)
    assert sim.model.body_count == 12 and len(sim.model.obstacles) == 1
    with pytest.raises(SceneError, match="bundled"):
        make_simulator(scene="no_such_scene")
    bad = tmp_path / "bad.yaml"
    bad.write_text("bodies: [1, 2\n")
    with pytest.raises(SceneError, match="not valid YAML"):
        load_scene(str(bad))
    bad.write_text("bodys: 3\n")
    with pytest.raises(SceneError, match="unknown option"):
        load_scene(str(bad))
    bad.write_text("- 1\n")
    with pytest.raises(SceneError, match="mapping"):
        load_scene(str(bad))
    with pytest.raises(SceneError, match="view"):
        make_simulator(view=[1.0, 0.0, 0.0, 1.0])


def test_a_scene_field_of_the_wrong_type_gets_the_options_message(tmp_path):
    scene = tmp_path / "ten.yaml"
    scene.write_text("bodies: ten\nfriction: 0.1\n")
    words = r"option 'bodies' of scene file .*ten.yaml must be an integer, got a string 'ten'"
    with pytest.raises(SceneError, match=words):
        load_scene(str(scene))
    with pytest.raises(SceneError, match=words):
        make_simulator(scene=str(scene))
    scene.write_text("friction: 9.0\n")  # bounds too, named like an experiment's options
    with pytest.raises(SceneError, match=r"option 'friction' of scene file .*outside"):
        load_scene(str(scene))


def test_a_scene_path_starts_in_the_experiment_folder(tmp_path, monkeypatch):
    (tmp_path / "scene.yaml").write_text("bodies: 7\n")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert make_simulator(scene="scene.yaml", base_dir=tmp_path).model.body_count == 7
    assert load_scene(str(tmp_path / "scene.yaml"), base_dir=tmp_path / "elsewhere") == \
        {"bodies": 7}
    with pytest.raises(SceneError, match="neither a file in ") as error:
        make_simulator(scene="scene.yaml")
    assert str(tmp_path / "elsewhere") in str(error.value)


def test_render_draws_vine_contacts_and_obstacles(runner):
    sim = make_simulator(scene="wall")
    states, design = runner(sim, 100)
    image = sim.render(states[-1], design, width=320, height=240)
    assert image.shape == (240, 320, 3) and image.dtype == np.uint8

    def has(picture, color):
        return bool(np.any(np.all(np.abs(picture.astype(int) - color) <= 12, axis=-1)))

    assert has(image, (120, 160, 110))  # obstacle
    assert has(image, (40, 90, 200))  # bodies
    assert has(image, (150, 185, 235))  # centreline
    assert has(image, (230, 40, 180))  # the active contact at the wall
    assert not has(sim.render(states[0], design, width=320, height=240), (230, 40, 180))
    with pytest.raises(ValueError, match="frame size"):
        sim.render(states[0], design, width=4, height=4)


def test_simulator_pickles_for_process_executors():
    import pickle
    sim = make_simulator(scene="wall", friction=0.1)
    copy = pickle.loads(pickle.dumps(sim))
    design = sim.design_space().defaults()
    state = sim.initial_state(design)
    np.testing.assert_array_equal(sim.step(state, RATE, design, 0.01).body_q,
                                  copy.step(state, RATE, design, 0.01).body_q)
    assert copy.model.friction == 0.1 and len(copy.model.obstacles) == 1


def test_steps_recomputed_in_the_reverse_sweep_keep_their_numbers():
    # The reverse sweep recomputes segments from checkpoints; a step there must be named
    # by its number since initial_state (as in the forward pass), not by a local count.
    from codesign import Objective, OpenLoopController, Rollout, WeightedTerm
    from sim_vine.terms import TipTargetDistance

    numbers = []

    class Spy(VineSimulator):
        def step(self, state, action, design, dt):
            numbers.append(self.step_number(state))
            return super().step(state, action, design, dt)

    sim = Spy(make_simulator(bodies=4).model)
    rollout = Rollout(sim, controller=OpenLoopController(observation_size=0, action_size=1,
                                                         control_steps=10),
                      steps=10, substeps=1, dt=0.01, checkpoint_every=4)
    objective = Objective([WeightedTerm(TipTargetDistance(simulator=sim, target=[0.3, 0.1]),
                                        1.0)])
    rollout.value_and_grad(sim.design_space().defaults(),
                           {"table": np.full((10, 1), 0.1)}, objective)
    forward, recomputed = numbers[:10], numbers[10:]
    assert forward == list(range(10))
    # segments [8, 9], [4, 7], [0, 3]: each recomputes from its checkpoint up to its end
    assert recomputed == [8, 4, 5, 6, 0, 1, 2]
    start = sim.start_from(sim.initial_state(sim.design_space().defaults()))
    assert sim.step_number(start) == 0
    assert sim.step_number(VineState(body_q=start.body_q, body_qd=start.body_qd)) is None
