"""The 3D examples: many-legged walkers, the hanging arm with constraints, the STL starfish.

Also the scene option they rely on (``regions``: actuator groups marked by boxes on one
body) and the script that writes the starfish mesh. Nothing here runs an optimization: the
cross-package tests quick-run every example.
"""

import collections
import importlib.resources
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import yaml

from codesign.config import load_config
from codesign.experiment import build_experiment
from codesign.plugins import get_plugin_manager, get_registry
from codesign.validation import validate_config
from sim_mpm import plugin
from sim_mpm.geometry import load_stl
from sim_mpm.options import MPMOptions
from sim_mpm.scene import SceneError, build_scene_model

EXAMPLES_DIR = importlib.resources.files("sim_mpm") / "examples"
SCRIPTS_DIR = Path(__file__).resolve().parents[3] / "examples" / "mpm"
BOX_3D = {"shape": "box", "lower": [0.3, 0.3, 0.3], "size": [0.2, 0.1, 0.1]}


@pytest.fixture(scope="module")
def registry():
    manager = get_plugin_manager(load_entry_points=False)
    manager.register(plugin, name="mpm")
    return get_registry(manager)


def build(name: str, registry):
    config = validate_config(load_config(EXAMPLES_DIR / f"{name}.yaml"), registry)
    return build_experiment(config, registry)


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- regions ----------------------------------------------------------------------------------


def test_regions_regroup_the_particles_inside_their_boxes_in_order():
    regions = [{"lower": [0.3, 0.3, 0.3], "upper": [0.4, 0.5, 0.5], "group": 5},
               {"lower": [0.35, 0.3, 0.3], "upper": [0.5, 0.5, 0.5], "group": 6}]
    actuators = [{"groups": [5], "axes": [1, 0, 0], "max_stress": 1.0}]
    model = build_scene_model(MPMOptions(dim=3, grid_resolution=16, bodies=[BOX_3D],
                                         regions=regions, actuators=actuators))
    x, group = model.particle_rest_x, model.particle_group
    np.testing.assert_array_equal(group[x[:, 0] < 0.35], 5)
    np.testing.assert_array_equal(group[x[:, 0] >= 0.35], 6)  # the later region wins
    np.testing.assert_array_equal(model.actuator_index, np.where(group == 5, 0, -1))
    # lattice spacing 1/32: x = 0.328 is the only column below 0.35, 3 x 3 points in y, z
    assert (group == 5).sum() == 1 * 3 * 3 and (group == 6).sum() == 5 * 3 * 3


def test_regions_keep_the_body_group_outside_them():
    model = build_scene_model(MPMOptions(dim=3, grid_resolution=16, bodies=[{**BOX_3D, "group": 2}],
                              regions=[{"lower": [0.0, 0.0, 0.0], "upper": [0.4, 1.0, 1.0],
                                        "group": 1}]))
    assert set(model.particle_group.tolist()) == {1, 2}


@pytest.mark.parametrize("region, message", [
    ({"lower": [0.8, 0.8, 0.8], "upper": [0.9, 0.9, 0.9], "group": 1}, "contains no particle"),
    ({"lower": [0.3, 0.3, 0.3], "upper": [0.4, 0.4, 0.4]}, "needs 'group'"),
    ({"lower": [0.3, 0.3, 0.3], "upper": [0.4, 0.4, 0.4], "group": -1}, "integer ≥ 0"),
    ({"lower": [0.3, 0.3], "upper": [0.4, 0.4, 0.4], "group": 1}, "lower must be 3"),
    ({"lower": [0.3, 0.3, 0.3], "upper": [0.4, 0.4, 0.4], "group": 1, "size": 1}, "unknown key"),
    ([0.3, 0.4], "must be a mapping"),
])
def test_bad_regions_are_named(region, message):
    with pytest.raises(SceneError, match=r"regions\[0\]") as error:
        build_scene_model(MPMOptions(dim=3, grid_resolution=16, bodies=[BOX_3D], regions=[region]))
    assert message in str(error.value)


# -- the starfish mesh ------------------------------------------------------------------------


def test_star_mesh_is_closed_and_outward_and_matches_the_committed_file(tmp_path):
    script = load_script("make_stl_robot")
    path = tmp_path / "star.stl"
    script.write_binary_stl(path, script.extrude(script.star_outline(), script.THICKNESS))
    assert path.read_bytes()[80:] == (EXAMPLES_DIR / "starfish.stl").read_bytes()[80:]
    assert path.stat().st_size < 200_000
    triangles = load_stl(path)
    # Closed and consistently wound: every directed edge appears once, its reverse once.
    edges = collections.Counter()
    for triangle in np.round(triangles, 6):
        for i in range(3):
            edges[(tuple(triangle[i]), tuple(triangle[(i + 1) % 3]))] += 1
    assert all(count == 1 for count in edges.values())
    assert all((end, start) in edges for start, end in edges)
    # Outward winding: the divergence-theorem volume is positive; hub + 4 trapezoid arms.
    volume = np.einsum("ij,ij->", triangles[:, 0], np.cross(triangles[:, 1], triangles[:, 2])) / 6
    outline = script.star_outline()
    area = 0.5 * abs(np.sum(outline[:, 0] * np.roll(outline[:, 1], -1)
                            - np.roll(outline[:, 0], -1) * outline[:, 1]))
    assert volume == pytest.approx(area * script.THICKNESS, rel=1e-9)
    assert area == pytest.approx(4 * 150 * (80 + 50) / 2 + 100 * 100 - 4 * 10 * 10 / 2)


def test_stl_robot_has_one_actuated_region_per_arm(registry):
    experiment = build("stl_robot_3d", registry)
    model = experiment.simulator.model
    x, group = model.particle_rest_x, model.particle_group
    counts = np.bincount(group)
    assert len(counts) == 5 and counts[1:].min() == counts[1:].max() > 0  # symmetric arms
    centre = x.mean(axis=0)
    for k, (axis, sign) in enumerate([(0, 1), (2, 1), (0, -1), (2, -1)]):
        arm = group == k + 1
        np.testing.assert_array_equal(model.actuator_index[arm], k)
        assert np.all(sign * (x[arm, axis] - centre[axis]) > 0.05)  # beyond the hub
        assert np.all(x[arm, 1] > np.median(x[:, 1]))  # top layers
        np.testing.assert_array_equal(model.actuator_axes[k], np.eye(3)[axis])
    assert np.all(model.actuator_index[group == 0] == -1)


# -- many legs --------------------------------------------------------------------------------


@pytest.mark.parametrize("name, legs", [("quadruped_3d", 4), ("hexapod_3d", 6),
                                        ("octoped_3d", 8)])
def test_legged_walkers_have_four_chambers_per_leg(name, legs, registry):
    experiment = build(name, registry)
    model = experiment.simulator.model
    group = model.particle_group
    assert model.stress_actuator_count == 4 * legs
    assert sorted(set(group.tolist())) == list(range(legs + 1))  # torso 0, legs 1..legs
    for leg in range(1, legs + 1):
        assert sorted(set(model.actuator_index[group == leg].tolist())) == \
            list(range(4 * (leg - 1), 4 * leg))
    np.testing.assert_allclose(model.actuator_axes, [[0.0, 1.0, 0.0]] * 4 * legs)
    assert experiment.observer.size == (legs + 1) * 3 * 2 + 3


# -- the hanging arm --------------------------------------------------------------------------


def hang(simulator, substeps: int):
    """Positions after ``substeps`` steps of 1.5 ms with every chamber off."""
    design = simulator.design_space().defaults()
    state = simulator.initial_state(design)
    for _ in range(substeps):
        state = simulator.step(state, np.zeros(simulator.action_size), design, 1.5e-3)
    return state


def test_the_sticky_ceiling_holds_the_arm_which_falls_without_it(registry):
    experiment = build("hanging_arm_3d_fixed", registry)
    simulator = experiment.simulator
    group = simulator.model.particle_group
    rest = simulator.model.particle_rest_x
    state = hang(simulator, 100)
    top_drop = rest[group == 0, 1].mean() - state.particle_x[group == 0, 1].mean()
    tip_drop = rest[group == 3, 1].mean() - state.particle_x[group == 3, 1].mean()
    assert abs(top_drop) < 0.01 and abs(tip_drop) < 0.03  # it hangs, slightly stretched

    options = yaml.safe_load((EXAMPLES_DIR / "hanging_arm_3d_fixed.yaml").read_text())
    options = options["simulator"]["options"]
    options["boundaries"] = [b for b in options["boundaries"] if b["type"] != "plane"]
    free = registry.get("simulators", "mpm").factory(**options)
    fallen = hang(free, 100)
    fall = rest[group == 3, 1].mean() - fallen.particle_x[group == 3, 1].mean()
    assert fall > 0.5 * 3.8 * 0.15**2 * 0.9  # free fall over 0.15 s


def test_hanging_arm_experiments_differ_only_in_the_stiffness_design(registry):
    fixed, cooptimized = build("hanging_arm_3d_fixed", registry), \
        build("hanging_arm_3d_cooptimized", registry)
    for experiment in (fixed, cooptimized):
        assert [(c.name, c.lower, c.upper) for c in experiment.constraints] == \
            [("reach", 0.0, 0.0), ("stop", 0.0, 0.0)]
        assert experiment.simulator.action_size == 4
        assert type(experiment.optimizer).__name__ == "SLSQP"
    free = [{p.name for p in e.problem.space} for e in (fixed, cooptimized)]
    assert "design.particle.youngs_modulus" not in free[0]
    assert free[1] - free[0] == {"design.particle.youngs_modulus"}
    np.testing.assert_array_equal(fixed.simulator.model.particle_rest_x,
                                  cooptimized.simulator.model.particle_rest_x)


def test_hanging_arm_constraint_gradients_match_finite_differences(registry):
    from codesign import Objective, Rollout
    from codesign.testing import check_rollout_gradients

    experiment = build("hanging_arm_3d_cooptimized", registry)
    rollout = Rollout(experiment.simulator, controller=experiment.controller,
                      observer=experiment.observer, steps=2, substeps=3, dt=1.5e-3)
    design = experiment.simulator.design_space().defaults()
    weights = {"table": np.random.default_rng(0).uniform(-1, 1, (30, 4))}
    for constraint in experiment.constraints:
        objective = Objective(constraint.objective.terms)
        report = check_rollout_gradients(rollout, {"particle.youngs_modulus":
                                                   design["particle.youngs_modulus"]},
                                         weights, objective, tolerance=1e-6)
        assert report.passed, f"{constraint.name}: {report}"
