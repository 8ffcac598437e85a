"""The first run says on stderr that the kernels compile; a run with a warm cache does not."""

import os
import subprocess
import sys

from sim_mpm.kernels import COMPILE_NOTICE

STEP = """
import numpy as np
from sim_mpm.scene import make_simulator
sim = make_simulator(grid_resolution=16, bodies=[{"shape": "box", "lower": [0.4, 0.4],
                                                  "size": [0.1, 0.1]}])
design = sim.design_space().defaults()
sim.step(sim.initial_state(design), np.zeros(0), design, 1e-3)
"""


def test_compiling_is_announced_once_and_only_on_a_cache_miss(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", STEP], env=env, capture_output=True,
                           text=True, check=True) for _ in range(2)]
    assert runs[0].stderr.count(COMPILE_NOTICE) == 1
    assert COMPILE_NOTICE not in runs[1].stderr
