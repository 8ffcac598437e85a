"""Scenes from keyword options: bodies, actuators, cables, boundaries, and their errors."""

import pickle

import numpy as np
import pytest
from PIL import Image

from codesign.options import OptionsError
from sim_mpm import BoxWalls, HeightField, MPMSimulator, Plane
from sim_mpm.options import MPMOptions
from sim_mpm.scene import SceneError, build_scene_model, make_simulator

BOX = {"shape": "box", "lower": [0.2, 0.2], "size": [0.1, 0.05]}


def test_box_scene_defaults():
    model = build_scene_model(MPMOptions(grid_resolution=32, bodies=[BOX]))
    dx = 1.0 / 32
    assert model.dx == pytest.approx(dx)
    # lattice points (i + 1/2) dx/2 inside [0.2, 0.3) x [0.2, 0.25): 6 columns, 3 rows
    assert model.particle_count == 6 * 3
    np.testing.assert_allclose(model.volume, (dx / 2) ** 2)
    np.testing.assert_allclose(model.gravity, [0.0, -9.8])
    assert model.action_size == 0
    assert isinstance(model.boundaries[0], BoxWalls) and model.boundaries[0].kind == "sticky"


def test_bodies_groups_overrides_and_actuators():
    bodies = [
        {"shape": "box", "lower": [0.2, 0.2], "size": [0.1, 0.05], "youngs_modulus": 20.0},
        {"shape": "box", "lower": [0.3, 0.2], "size": [0.1, 0.05], "group": 7, "actuator": 1,
         "density": 2.0, "velocity": [1.0, 0.0]},
        {"shape": "sphere", "center": [0.6, 0.4], "radius": 0.05, "poissons_ratio": 0.2},
    ]
    actuators = [{"groups": [0], "axes": [0, 1], "max_stress": 4.0}, {"max_stress": 2.0}]
    model = build_scene_model(MPMOptions(grid_resolution=32, bodies=bodies, actuators=actuators,
                              youngs_modulus=10.0, initial_velocity=[0.0, -0.5]))
    group = model.particle_group
    assert set(np.unique(group)) == {0, 7, 2}
    np.testing.assert_array_equal(model.actuator_index[group == 0], 0)
    np.testing.assert_array_equal(model.actuator_index[group == 7], 1)
    np.testing.assert_array_equal(model.actuator_index[group == 2], -1)
    np.testing.assert_allclose(model.actuator_axes, [[0, 1], [1, 1]])
    np.testing.assert_allclose(model.actuator_max_stress, [4.0, 2.0])
    np.testing.assert_allclose(model.youngs_modulus[group == 0], 20.0)
    np.testing.assert_allclose(model.youngs_modulus[group == 7], 10.0)
    np.testing.assert_allclose(model.density[group == 7], 2.0)
    np.testing.assert_allclose(model.poissons_ratio[group == 2], 0.2)
    rest_v = model.particle_rest_v
    np.testing.assert_allclose(rest_v[group == 7], [[1.0, 0.0]] * (group == 7).sum())
    np.testing.assert_allclose(rest_v[group == 0], [[0.0, -0.5]] * (group == 0).sum())


def test_image_body_groups_come_from_colors(tmp_path):
    rgba = np.full((4, 4, 4), 255, np.uint8)
    rgba[2:] = [0, 0, 0, 255]
    rgba[:2, :2] = [255, 0, 0, 255]
    Image.fromarray(rgba, "RGBA").save(tmp_path / "robot.png")
    body = {"shape": "image", "path": "robot.png", "pixel_size": 1 / 32, "lower": [0.2, 0.2],
            "colors": {"#ff0000": 3, "#000000": 1}}
    model = build_scene_model(MPMOptions(grid_resolution=32, bodies=[body], asset_dir=str(tmp_path),
                              actuators=[{"groups": [3], "axes": [1, 0], "max_stress": 1.0}]))
    assert (model.particle_group == 3).sum() == 4 * 4
    assert (model.particle_group == 1).sum() == 8 * 4
    np.testing.assert_array_equal(model.actuator_index == 0, model.particle_group == 3)


def test_asset_paths_start_in_the_experiment_folder_not_the_working_directory(
        tmp_path, monkeypatch):
    Image.fromarray(np.zeros((4, 4, 3), np.uint8), "RGB").save(tmp_path / "robot.png")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    body = {"shape": "image", "path": "robot.png", "pixel_size": 1 / 32, "lower": [0.2, 0.2]}
    sim = make_simulator(grid_resolution=32, bodies=[body], base_dir=tmp_path,
                         kernels="reference")
    assert sim.model.particle_count == 8 * 8
    absolute = {**body, "path": str(tmp_path / "robot.png")}
    assert make_simulator(grid_resolution=32, bodies=[absolute], kernels="reference",
                          base_dir=tmp_path / "elsewhere").model.particle_count == 8 * 8
    assert make_simulator(grid_resolution=32, bodies=[body], kernels="reference",
                          base_dir=tmp_path.parent, asset_dir=tmp_path.name
                          ).model.particle_count == 8 * 8
    with pytest.raises(SceneError, match="asset file 'robot.png' not found in ") as error:
        make_simulator(grid_resolution=32, bodies=[body], kernels="reference")
    assert str(tmp_path / "elsewhere") in str(error.value)


def test_cables_snap_to_particles():
    cables = [{"points": [[0.205, 0.205], [0.295, 0.205]], "stiffness": 50.0,
               "max_contraction": 0.01}]
    model = build_scene_model(MPMOptions(grid_resolution=32, bodies=[BOX], cables=cables))
    assert model.action_size == 1
    route = np.asarray(model.cables[0].route)
    np.testing.assert_allclose(model.particle_rest_x[route[0]], [13.5 / 64, 13.5 / 64])
    assert model.cables[0].rest_length == pytest.approx(
        np.linalg.norm(np.diff(model.particle_rest_x[route], axis=0), axis=1).sum())
    by_index = build_scene_model(MPMOptions(grid_resolution=32, bodies=[BOX],
                                 cables=[{"particles": [0, 5], "max_contraction": 0.01}]))
    np.testing.assert_array_equal(by_index.cables[0].route, [0, 5])


def test_boundaries():
    boundaries = [
        {"type": "walls", "condition": "slip", "margin": 2},
        {"type": "plane", "point": [0, 0.1], "normal": [0.1, 1], "condition": "friction",
         "friction": 0.5},
        {"type": "terrain", "heights": [0.05, 0.08, 0.12], "spacing": 0.5,
         "condition": "separate"},
    ]
    model = build_scene_model(MPMOptions(grid_resolution=32, bodies=[BOX], boundaries=boundaries))
    walls, plane, terrain = model.boundaries
    assert isinstance(walls, BoxWalls) and walls.kind == "slip" and walls.margin == 2
    assert isinstance(plane, Plane) and plane.friction == 0.5 and plane.kind == "friction"
    assert isinstance(terrain, HeightField) and terrain.kind == "separate"


def test_geometry_groups_and_anchor():
    bodies = [dict(BOX, geometry_group=0),
              {"shape": "box", "lower": [0.3, 0.2], "size": [0.1, 0.05], "geometry_group": 1,
               "anchor": [0.3, 0.2]}]
    model = build_scene_model(MPMOptions(grid_resolution=32, bodies=bodies))
    assert model.geometry_group_count == 2
    np.testing.assert_allclose(model.geometry_anchor[1], [0.3, 0.2])
    np.testing.assert_allclose(model.geometry_anchor[0],
                               model.particle_rest_x[model.particle_geometry_group == 0].mean(0))


def test_a_simulator_pickles_for_process_executors():
    sim = make_simulator(grid_resolution=32, bodies=[BOX], kernels="reference",
                         color_by="actuation")
    clone = pickle.loads(pickle.dumps(sim))  # holds the array module: pickled by its choices
    assert clone.xp is np and clone.kernels == "reference" and clone.color_by == "actuation"
    design = sim.design_space().defaults()
    action = np.zeros(sim.action_size)
    np.testing.assert_array_equal(
        clone.step(clone.initial_state(design), action, design, 1e-3).particle_x,
        sim.step(sim.initial_state(design), action, design, 1e-3).particle_x)


def test_make_simulator_renders_and_steps():
    sim = make_simulator(grid_resolution=32, bodies=[BOX], kernels="reference",
                         actuators=[{"groups": [0], "max_stress": 1.0}], color_by="actuation")
    assert isinstance(sim, MPMSimulator)
    design = sim.design_space().defaults()
    state = sim.step(sim.initial_state(design), np.array([0.5]), design, 1e-3)
    frame = sim.render(state, design, width=64, height=48)
    assert frame.shape == (48, 64, 3) and frame.dtype == np.uint8
    contracting = sim.render(state, design, width=64, height=48, action=np.array([1.0]))
    expanding = sim.render(state, design, width=64, height=48, action=np.array([-1.0]))
    red = (contracting[..., 0].astype(int) - contracting[..., 2]).max()
    blue = (expanding[..., 2].astype(int) - expanding[..., 0]).max()
    assert red > 60 and blue > 60  # the actuator is drawn by its live signal


@pytest.mark.parametrize("options, message", [
    ({"bodies": []}, "no bodies"),
    ({"bodies": [{"shape": "blob"}]}, "unknown shape 'blob'"),
    ({"bodies": [{"shape": "box", "lower": [0.2, 0.2]}]}, "needs 'upper' \\(or 'size'\\)"),
    ({"bodies": [{"shape": "box", "lower": [0.2, 0.2], "size": [0.1, 0.1], "colour": 1}]},
     "unknown key"),
    ({"bodies": [{"shape": "box", "lower": [0.2, 0.2], "size": [-0.1, 0.1]}]}, "positive size"),
    ({"bodies": [{"shape": "box", "lower": [0.2, 0.2, 0.2], "size": [0.1, 0.1, 0.1]}]},
     "3D box in a dim=2 scene"),
    ({"bodies": [{"shape": "image", "path": "missing.png", "pixel_size": 0.01}]}, "not found"),
    ({"bodies": [BOX], "particle_spacing": 1.0}, "particle_spacing"),
    ({"bodies": [dict(BOX, actuator=0)]}, "only 0 actuator"),
    ({"bodies": [BOX], "actuators": [{"groups": [5]}]}, "acts on no particle"),
    ({"bodies": [BOX], "actuators": [{"groups": [0], "axis": [1, 0]}]}, "unknown key"),
    ({"bodies": [BOX], "boundaries": [{"type": "wall"}]}, "unknown boundary type"),
    ({"bodies": [BOX], "boundaries": [{"type": "walls", "condition": "glue"}]},
     "unknown condition"),
    ({"bodies": [BOX], "boundaries": [{"type": "walls", "condition": "friction"}]},
     "friction coefficient"),
    ({"bodies": [BOX], "boundaries": [{"type": "terrain", "heights": [[0.1, 0.1]],
                                        "spacing": 0.1}]}, "1-D terrain"),
    ({"bodies": [BOX], "cables": [{"max_contraction": 0.1}]}, "exactly one of"),
    ({"bodies": [BOX], "initial_velocity": [1.0]}, "initial_velocity must be 2"),
    ({"bodies": [{"shape": "box", "lower": [0.0, 0.0], "size": [0.1, 0.1]}]}, "invalid scene"),
])
def test_bad_options_raise_clear_errors(options, message):
    with pytest.raises(SceneError, match=message):
        build_scene_model(MPMOptions(grid_resolution=32, **options))


@pytest.mark.parametrize("options, message", [
    ({"grid_resolution": 4}, "'grid_resolution': 4 lies outside its physical bounds >= 8"),
    ({"dim": 4}, "'dim': 4 is not one of its choices: 2, 3"),
    ({"material": "rubber"}, "'material': 'rubber' is not one of its choices"),
    ({"poissons_ratio": 0.7}, "'poissons_ratio': 0.7 lies outside .* \\[0.001, 0.49\\]"),
    ({"density": -1.0}, "'density': -1 kg/m\\^dim lies outside"),
    ({"backend": "tpu"}, "'backend'"),
    ({"kernels": "fast"}, "'kernels'"),
    ({"color_by": "rainbow", "kernels": "reference"}, "'color_by'"),
])
def test_options_outside_their_declaration_raise(options, message):
    with pytest.raises(OptionsError, match=message):
        make_simulator(bodies=[BOX], **options)


def test_body_overrides_respect_the_declared_bounds():
    with pytest.raises(SceneError, match=r"bodies\[0\].youngs_modulus: -5 Pa lies outside"):
        make_simulator(bodies=[dict(BOX, youngs_modulus=-5.0)])


def test_a_passive_scene_rolls_out_with_an_empty_open_loop_table():
    """No actuators, no dummy: the open-loop controller takes action_size 0 and the rollout
    differentiates through the thrown body's initial velocity (a free body far from the
    walls, without gravity, moves at it)."""
    from codesign import Objective, OpenLoopController, Rollout, WeightedTerm
    from sim_mpm.terms import MeanPosition

    sim = make_simulator(grid_resolution=16, kernels="reference", gravity=[0.0, 0.0],
                         bodies=[{**BOX, "lower": [0.4, 0.4], "velocity": [0.5, 0.0]}])
    assert sim.action_size == 0
    controller = OpenLoopController(observation_size=0, action_size=0, control_steps=3)
    rollout = Rollout(sim, controller=controller, steps=3, substeps=2, dt=1e-3)
    objective = Objective((WeightedTerm(MeanPosition(simulator=sim, axis=0), weight=1.0),))
    result, (grad,) = rollout.value_and_grad(sim.design_space().defaults(),
                                             controller.parameter_space().defaults(), objective)
    x0 = float(np.mean(sim.model.particle_rest_x[:, 0]))
    assert result.values[0] == pytest.approx(x0 + 0.5 * 6e-3, rel=1e-6)
    np.testing.assert_allclose(grad.design["initial.velocity"], [6e-3, 0.0], atol=1e-9)
    assert grad.weights["table"].shape == (3, 0)
