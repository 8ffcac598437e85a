"""Boundary conditions behave as named: friction decelerates at μ g, slip keeps sliding,
sticky holds, separate lets go, planes and terrain act like the walls they replace."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

from sim_mpm import BoxWalls, HeightField, MPMSimulator, Plane, build_model
from sim_mpm.boundaries import BoundaryError, compile_boundaries

_spec = importlib.util.spec_from_file_location(
    "mpm_scenes", pathlib.Path(__file__).with_name("mpm_scenes.py"))
scenes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scenes)

RES = 32
DX = 1.0 / RES
FLOOR = 3 * DX  # BoxWalls(margin=3) holds nodes with y < 3 Δx


def _sliding_block(boundaries, *, vx=1.0, vy=0.0, gravity=-9.8, dim=2):
    lower = [0.2, FLOOR - 0.3 * DX] + [0.4] * (dim - 2)
    upper = [0.4, FLOOR - 0.3 * DX + 0.08] + [0.55] * (dim - 2)
    x = scenes.block_points(dim, lower, upper, 0.5 * DX)
    v = np.zeros_like(x)
    v[:, 0], v[:, 1] = vx, vy
    g = np.zeros(dim)
    g[1] = gravity
    model = build_model(particle_x=x, dim=dim, grid_resolution=RES, dx=DX, particle_v=v,
                        gravity=g, youngs_modulus=2e4, poissons_ratio=0.3, density=1000.0,
                        boundaries=boundaries)
    return MPMSimulator(model)


def _run(sim, steps, dt, record=None):
    design = sim.design_space().defaults()
    state = sim.initial_state(design)
    action = np.zeros(sim.action_size)
    history = [state]
    for _ in range(steps):
        state = sim.step(state, action, design, dt)
        history.append(state)
    sim.check_state(state, steps)
    return history


def _friction_history(mu, dim, steps):
    sim = _sliding_block((BoxWalls(kind="friction", friction=mu),), dim=dim)
    dt = 2e-4
    sim.check_time_step(sim.design_space().defaults(), dt)
    history = _run(sim, steps, dt)
    t = np.arange(len(history)) * dt
    vx = np.array([s.particle_v[:, 0].mean() for s in history])
    vy = np.array([s.particle_v[:, 1].mean() for s in history])
    return t, vx, vy


@pytest.mark.parametrize("dim,mu,steps", [(2, 0.2, 1500), (2, 0.4, 1000), (3, 0.3, 1000)])
def test_friction_decelerates_a_sliding_block_at_mu_g(dim, mu, steps):
    """Coulomb friction removes μ times the normal momentum the floor removes, so
    v_x(t) = v_x(0) − μ (g t + v_y(t) − v_y(0)) while the block slides, and once the
    landing bounce has settled the block decelerates at μ g."""
    t, vx, vy = _friction_history(mu, dim, steps)
    sliding = vx > 0.1
    assert sliding[-1] or dim == 2  # still sliding at the end of the 3D run
    predicted = 1.0 - mu * (9.8 * t + vy)
    assert np.max(np.abs(predicted - vx)[sliding]) < 5e-3
    window = sliding & (t > 0.04)
    slope = np.polyfit(t[window], vx[window], 1)[0]
    assert slope == pytest.approx(-mu * 9.8, rel=0.03 if dim == 2 else 0.05)


def test_slip_floor_does_not_brake():
    history = _run(_sliding_block((BoxWalls(kind="slip"),)), 500, 2e-4)
    vx = history[-1].particle_v[:, 0].mean()
    assert vx == pytest.approx(1.0, abs=0.01)
    assert history[-1].particle_x[:, 1].min() > FLOOR - DX  # and holds the block up


def test_sticky_floor_holds_the_bottom():
    history = _run(_sliding_block((BoxWalls(kind="sticky"),)), 300, 2e-4)
    final = history[-1]
    bottom = final.particle_x[:, 1] < FLOOR + 0.5 * DX
    assert np.abs(final.particle_v[bottom, 0]).mean() < 0.05
    assert abs(final.particle_v[:, 0].mean()) < 0.1  # from 1 m/s in 0.06 s


def test_separate_lets_the_block_leave_but_slip_holds_it():
    rise = {}
    for kind in ("separate", "slip", "sticky"):
        history = _run(_sliding_block((BoxWalls(kind=kind),), vx=0.0, vy=0.5, gravity=0.0),
                       100, 2e-4)
        rise[kind] = history[-1].particle_v[:, 1].mean()
    assert rise["separate"] == pytest.approx(0.5, abs=1e-9)
    assert rise["slip"] < 0.45 and rise["sticky"] < 0.45


@pytest.mark.parametrize("kind", ["sticky", "slip", "separate", "friction"])
def test_plane_and_flat_terrain_equal_the_floor_wall(kind):
    floor_nodes = FLOOR - 0.5 * DX  # nodes at y = 0, Δx, 2Δx lie below
    walls = (BoxWalls(kind=kind, friction=0.3),)
    plane = (Plane(point=[0.0, floor_nodes], normal=[0.0, 1.0], kind=kind, friction=0.3),)
    terrain = (HeightField(heights=[floor_nodes, floor_nodes], spacing=1.0, kind=kind,
                           friction=0.3),)
    finals = [_run(_sliding_block(b, vy=-0.3), 100, 2e-4)[-1] for b in (walls, plane, terrain)]
    for other in finals[1:]:
        np.testing.assert_allclose(other.particle_x, finals[0].particle_x, rtol=0, atol=1e-14)
        np.testing.assert_allclose(other.particle_v, finals[0].particle_v, rtol=0, atol=1e-12)


def test_block_slides_down_a_frictionless_slope_at_g_sin_theta():
    """A slip height field tilted by θ: the block accelerates along it at g sin θ."""
    theta = np.deg2rad(15.0)
    slope = np.tan(theta)
    terrain = HeightField(heights=[0.15, 0.15 + slope], spacing=1.0, kind="slip")
    side = scenes.block_points(2, [0.0, 0.0], [0.12, 0.06], 0.5 * DX)
    # rotate the block onto the slope, just above it, centred at x = 0.45
    c, s = np.cos(theta), np.sin(theta)
    x = side @ np.array([[c, s], [-s, c]]) + [0.45, 0.15 + 0.45 * slope + 0.6 * DX]
    model = build_model(particle_x=x, dim=2, grid_resolution=RES, dx=DX,
                        youngs_modulus=2e4, poissons_ratio=0.3, density=1000.0,
                        boundaries=(terrain,))
    history = _run(MPMSimulator(model), 600, 2e-4)
    t = np.arange(len(history)) * 2e-4
    downhill = np.array([c, s])
    along = np.array([(state.particle_v @ downhill).mean() for state in history])
    window = t > 0.03
    acceleration = np.polyfit(t[window], along[window], 1)[0]
    assert acceleration == pytest.approx(-9.8 * np.sin(theta), rel=0.05)


def test_height_field_normals_follow_the_slope():
    field = HeightField(heights=[0.0, 0.5], spacing=1.0)
    height, normal = field.surface(np.array([[0.5, 0.0]]))
    assert height[0] == pytest.approx(0.25)
    np.testing.assert_allclose(normal[0], np.array([-0.5, 1.0]) / np.sqrt(1.25))
    field3 = HeightField(heights=np.array([[0.0, 0.0], [1.0, 1.0]]), spacing=1.0)
    _, n3 = field3.surface(np.array([[0.5, 0.0, 0.5]]))
    np.testing.assert_allclose(n3[0], np.array([-1.0, 1.0, 0.0]) / np.sqrt(2))


def test_bad_boundaries_are_refused():
    with pytest.raises(BoundaryError, match="unknown boundary kind"):
        BoxWalls(kind="glue")
    with pytest.raises(BoundaryError, match="friction"):
        BoxWalls(kind="friction", friction=-1)
    with pytest.raises(BoundaryError, match="non-zero"):
        Plane(point=[0, 0], normal=[0, 0])
    with pytest.raises(BoundaryError, match="3D scene"):
        compile_boundaries((Plane(point=[0, 0], normal=[0, 1]),), dim=3, grid_resolution=8,
                           dx=0.1)
    with pytest.raises(BoundaryError, match="terrain heights"):
        compile_boundaries((HeightField(heights=[0, 1], spacing=1.0),), dim=3,
                           grid_resolution=8, dx=0.1)
