"""ros_bridge tests: the test plugin (``joint_plugin.py``) importable by its file name."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
