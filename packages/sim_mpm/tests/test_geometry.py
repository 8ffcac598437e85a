"""Particle sampling from boxes, spheres, PNG images and STL meshes."""

import struct

import numpy as np
import pytest
from PIL import Image

from sim_mpm.geometry import (
    Box,
    GeometryError,
    ImageShape,
    MeshShape,
    Sphere,
    lattice_points,
    load_stl,
    parse_color,
    sample_shapes,
    winding_number,
)


def cube_triangles(lower=(0.0, 0.0, 0.0), size=1.0):
    """12 outward-oriented triangles of an axis-aligned cube."""
    corners = np.array([[i, j, k] for i in (0, 1) for j in (0, 1) for k in (0, 1)], float)
    corners = np.asarray(lower) + size * corners
    index = lambda i, j, k: 4 * i + 2 * j + k  # noqa: E731
    faces = []
    for axis in range(3):
        for side in (0, 1):
            quad = []
            for a, b in ((0, 0), (1, 0), (1, 1), (0, 1)):
                ijk = [0, 0, 0]
                ijk[axis] = side
                ijk[(axis + 1) % 3], ijk[(axis + 2) % 3] = a, b
                quad.append(index(*ijk))
            if side == 0:
                quad = quad[::-1]
            faces += [[quad[0], quad[1], quad[2]], [quad[0], quad[2], quad[3]]]
    return corners[np.array(faces)]


def write_binary_stl(path, triangles):
    with open(path, "wb") as handle:
        handle.write(b"binary stl".ljust(80, b" "))
        handle.write(struct.pack("<I", len(triangles)))
        for tri in triangles:
            handle.write(struct.pack("<3f", 0, 0, 0))
            handle.write(struct.pack("<9f", *tri.reshape(-1)))
            handle.write(struct.pack("<H", 0))


def write_ascii_stl(path, triangles):
    lines = ["solid cube"]
    for tri in triangles:
        lines += ["  facet normal 0 0 0", "    outer loop"]
        lines += [f"      vertex {v[0]} {v[1]} {v[2]}" for v in tri]
        lines += ["    endloop", "  endfacet"]
    lines.append("endsolid cube")
    path.write_text("\n".join(lines))


def test_box_regular_sampling_counts_and_bounds():
    x = sample_shapes([Box.from_size([0.1, 0.2], [0.1, 0.05])], spacing=0.01)[0]
    assert x.shape == (10 * 5, 2)
    assert x.min(axis=0) == pytest.approx([0.105, 0.205])
    assert x.max(axis=0) == pytest.approx([0.195, 0.245])


def test_box_3d_and_jitter_is_seeded_and_bounded():
    cube = [Box.from_size([0, 0, 0], [0.04, 0.04, 0.04])]
    a = sample_shapes(cube, spacing=0.01, jitter=0.5, seed=3)[0]
    b = sample_shapes(cube, spacing=0.01, jitter=0.5, seed=3)[0]
    regular = sample_shapes(cube, spacing=0.01)[0]
    assert a.shape == (64, 3)
    np.testing.assert_array_equal(a, b)
    assert np.max(np.abs(a - regular)) <= 0.25 * 0.01 + 1e-15
    assert not np.allclose(a, regular)


def test_union_shares_lattice_and_first_shape_wins():
    left = Box.from_size([0.0, 0.0], [0.1, 0.1])
    overlapping = Box.from_size([0.05, 0.0], [0.1, 0.1])
    x, _, group = sample_shapes([left, overlapping], spacing=0.01, groups=[3, 7])
    assert len(x) == 150  # 10x10 + the 5x10 new columns
    assert len(np.unique(np.round(x / 0.005).astype(int), axis=0)) == len(x)
    assert np.all(group[x[:, 0] < 0.1] == 3) and np.all(group[x[:, 0] > 0.1] == 7)


def test_sphere_volume_matches_particle_count():
    x = sample_shapes([Sphere([0.5, 0.5, 0.5], 0.2)], spacing=0.01)[0]
    assert len(x) * 0.01**3 == pytest.approx(4 / 3 * np.pi * 0.2**3, rel=0.02)


def test_bad_shapes_raise_clear_errors():
    with pytest.raises(GeometryError, match="positive size"):
        Box([0, 0], [0, 1])
    with pytest.raises(GeometryError, match="2 entries"):
        Box([0, 0], [1, 1, 1])
    with pytest.raises(GeometryError, match="radius"):
        Sphere([0, 0], -1.0)
    with pytest.raises(GeometryError, match="no shapes"):
        sample_shapes([], spacing=0.1)
    with pytest.raises(GeometryError, match="same dimension"):
        sample_shapes([Box([0, 0], [1, 1]), Sphere([0, 0, 0], 1)], spacing=0.1)
    with pytest.raises(GeometryError, match="holds no lattice point"):
        sample_shapes([Box([0, 0], [0.001, 0.001])], spacing=0.1)
    with pytest.raises(GeometryError, match="jitter"):
        sample_shapes([Box([0, 0], [1, 1])], spacing=0.1, jitter=1.5)


def test_lattice_points_are_global():
    points, index = lattice_points([0.02, 0.0], [0.05, 0.01], 0.01)
    np.testing.assert_allclose(points[:, 0], [0.025, 0.035, 0.045])
    np.testing.assert_array_equal(index[:, 0], [2, 3, 4])


def test_parse_color():
    assert parse_color("#ff8000") == (255, 128, 0)
    assert parse_color([1, 2, 3]) == (1, 2, 3)
    with pytest.raises(GeometryError):
        parse_color("#ff80")
    with pytest.raises(GeometryError):
        parse_color([1, 2, 300])


def test_png_pixels_become_labelled_particles(tmp_path):
    rgba = np.zeros((4, 6, 4), np.uint8)  # transparent
    rgba[:, :, :] = [255, 255, 255, 255]  # white background: empty
    rgba[2:4, 0:6] = [0, 0, 0, 255]  # bottom two rows: black body
    rgba[0:2, 0:2] = [255, 0, 0, 255]  # top-left 2x2: red actuator
    rgba[0, 5] = [0, 0, 255, 0]  # transparent pixel: empty
    path = tmp_path / "robot.png"
    Image.fromarray(rgba, "RGBA").save(path)
    shape = ImageShape.from_file(path, origin=(1.0, 2.0), pixel_size=0.1,
                                 colors={"#ff0000": 1, "#000000": 0})
    x, _, group = sample_shapes([shape], spacing=0.05, groups=[None])
    assert len(x) == (12 + 4) * 4
    red = group == 1
    assert red.sum() == 16
    # image row 0 is the top: red particles sit above the body, at the left.
    assert x[red, 1].min() > x[~red, 1].max()
    assert x[red, 0].max() < 1.2 + 1e-12
    assert x.min(axis=0) == pytest.approx([1.025, 2.025])


def test_png_unknown_colors_and_empty_images(tmp_path):
    rgba = np.full((2, 2, 4), 255, np.uint8)
    empty = tmp_path / "empty.png"
    Image.fromarray(rgba, "RGBA").save(empty)
    with pytest.raises(GeometryError, match="no filled pixels"):
        ImageShape.from_file(empty, pixel_size=0.1)
    rgba[0, 0] = [10, 200, 10, 255]
    green = tmp_path / "green.png"
    Image.fromarray(rgba, "RGBA").save(green)
    with pytest.raises(GeometryError, match="not in the color map"):
        ImageShape.from_file(green, pixel_size=0.1, colors={"#ff0000": 1}, default_group=None)
    shape = ImageShape.from_file(green, pixel_size=0.1, colors={"#ff0000": 1}, default_group=5)
    assert set(np.unique(shape.labels)) == {-1, 5}
    with pytest.raises(GeometryError, match="does not exist"):
        ImageShape.from_file(tmp_path / "missing.png", pixel_size=0.1)
    corrupt = tmp_path / "corrupt.png"
    corrupt.write_bytes(b"\x89PNG not really")
    with pytest.raises(GeometryError, match="cannot read image"):
        ImageShape.from_file(corrupt, pixel_size=0.1)


def test_winding_number_of_a_cube():
    triangles = cube_triangles()
    w = winding_number(np.array([[0.5, 0.5, 0.5], [1.5, 0.5, 0.5], [0.1, 0.9, 0.2]]), triangles)
    np.testing.assert_allclose(w, [1.0, 0.0, 1.0], atol=1e-12)


@pytest.mark.parametrize("writer", [write_binary_stl, write_ascii_stl])
def test_stl_cube_fills_its_volume(tmp_path, writer):
    path = tmp_path / "cube.stl"
    writer(path, cube_triangles(size=2.0))
    np.testing.assert_allclose(load_stl(path), cube_triangles(size=2.0), atol=1e-6)
    shape = MeshShape.from_file(path, scale=0.05, origin=(0.2, 0.3, 0.4))
    x = sample_shapes([shape], spacing=0.01)[0]
    assert len(x) == 10**3
    assert x.min(axis=0) == pytest.approx([0.205, 0.305, 0.405])


def test_stl_inward_facing_mesh_still_fills(tmp_path):
    path = tmp_path / "inward.stl"
    write_binary_stl(path, cube_triangles()[:, ::-1])
    x = sample_shapes([MeshShape.from_file(path, scale=0.1)], spacing=0.02)[0]
    assert len(x) == 125


def test_corrupt_stl_files_raise(tmp_path):
    truncated = tmp_path / "truncated.stl"
    write_binary_stl(truncated, cube_triangles())
    truncated.write_bytes(truncated.read_bytes()[:-7])
    with pytest.raises(GeometryError, match="truncated or corrupt"):
        load_stl(truncated)
    bad_vertex = tmp_path / "bad.stl"
    bad_vertex.write_text("solid x\nfacet normal 0 0 1\nouter loop\nvertex 0 0\nendsolid x\n")
    with pytest.raises(GeometryError, match="line 4"):
        load_stl(bad_vertex)
    partial = tmp_path / "partial.stl"
    partial.write_text("solid x\nvertex 0 0 0\nvertex 1 0 0\nendsolid x\n")
    with pytest.raises(GeometryError, match="multiple of 3"):
        load_stl(partial)
    empty = tmp_path / "empty.stl"
    empty.write_text("solid x\nendsolid x\n")
    with pytest.raises(GeometryError, match="no 'vertex'"):
        load_stl(empty)
    nan = tmp_path / "nan.stl"
    write_binary_stl(nan, np.full((1, 3, 3), np.nan))
    with pytest.raises(GeometryError, match="NaN"):
        load_stl(nan)
    with pytest.raises(GeometryError, match="does not exist"):
        load_stl(tmp_path / "missing.stl")
    with pytest.raises(GeometryError, match=r"shape \(m, 3, 3\)"):
        MeshShape(np.zeros((2, 3)))
