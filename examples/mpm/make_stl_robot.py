"""Write starfish.stl, the mesh of the stl_robot_3d example: a four-armed star, extruded.

The outline is a plus sign whose arms taper from 80 mm at the hub to 50 mm at the tips
(span 400 mm), drawn in the x-z plane and extruded 60 mm along y (up). The outline is
star-shaped about its centre, so each cap is a fan of triangles from the centre; the sides
are two triangles per outline edge. Facets are wound counter-clockwise seen from outside
(outward normals), and the file is binary STL in millimetres (scale: 0.001 in the scene).

Run from anywhere: ``python examples/mpm/make_stl_robot.py`` rewrites the file in the sim_mpm
package's examples folder (package data: the example and its assets ship in the wheel).
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

__all__ = ["star_outline", "extrude", "write_binary_stl", "OUTPUT"]

OUTPUT = (Path(__file__).resolve().parents[2] / "packages" / "sim_mpm" / "src" / "sim_mpm"
          / "examples" / "starfish.stl")
"""Where the mesh is written."""

HUB_HALF_WIDTH = 50.0  # mm
ROOT_HALF_WIDTH = 40.0  # mm, half the arm's width where it leaves the hub
TIP_HALF_WIDTH = 25.0  # mm
ARM_REACH = 200.0  # mm from the centre to an arm tip
THICKNESS = 60.0  # mm


def star_outline() -> np.ndarray:
    """Outline vertices (x, z) [mm], counter-clockwise, shape (16, 2)."""
    one_arm = np.array([[HUB_HALF_WIDTH, -ROOT_HALF_WIDTH], [ARM_REACH, -TIP_HALF_WIDTH],
                        [ARM_REACH, TIP_HALF_WIDTH], [HUB_HALF_WIDTH, ROOT_HALF_WIDTH]])
    quarter_turn = np.array([[0.0, -1.0], [1.0, 0.0]])  # (x, z) -> (-z, x): +x arm to +z arm
    arms = [one_arm @ np.linalg.matrix_power(quarter_turn, k).T for k in range(4)]
    return np.concatenate(arms)


def extrude(outline: np.ndarray, height: float) -> np.ndarray:
    """Triangles (m, 3, 3) [mm] of the prism over a star-shaped outline (x, z), y in
    [0, height], with outward (counter-clockwise from outside) winding."""
    count = len(outline)
    bottom = np.column_stack([outline[:, 0], np.zeros(count), outline[:, 1]])
    top = bottom + [0.0, height, 0.0]
    centre_bottom, centre_top = bottom.mean(axis=0), top.mean(axis=0)
    triangles = []
    for i in range(count):
        j = (i + 1) % count
        # Counter-clockwise in (x, z) is clockwise seen from +y, so the top cap reverses it.
        triangles.append([centre_top, top[j], top[i]])
        triangles.append([centre_bottom, bottom[i], bottom[j]])
        triangles.append([bottom[i], top[i], top[j]])
        triangles.append([bottom[i], top[j], bottom[j]])
    return np.asarray(triangles, dtype=np.float64)


def write_binary_stl(path: Path, triangles: np.ndarray, *, name: str = "starfish") -> None:
    """Write triangles (m, 3, 3) as binary STL with their unit normals."""
    normals = np.cross(triangles[:, 1] - triangles[:, 0], triangles[:, 2] - triangles[:, 0])
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    header = f"binary STL: {name}, millimetres".encode("ascii").ljust(80, b" ")
    with open(path, "wb") as handle:
        handle.write(header)
        handle.write(struct.pack("<I", len(triangles)))
        for normal, triangle in zip(normals, triangles, strict=True):
            handle.write(struct.pack("<12fH", *normal, *triangle.reshape(-1), 0))


def main() -> None:
    """Write :data:`OUTPUT` and say how big it is."""
    triangles = extrude(star_outline(), THICKNESS)
    write_binary_stl(OUTPUT, triangles)
    print(f"wrote {OUTPUT} ({len(triangles)} triangles, {OUTPUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
