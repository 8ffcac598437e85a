"""colcon's ament_python build runs setup.py; everything but the ament index files comes
from pyproject.toml (``pip install`` uses hatchling and never runs this file).

``python_requires`` repeats pyproject's ``requires-python`` as a string: colcon reads the
setup arguments back with ``ast.literal_eval``, which fails on the ``SpecifierSet`` that
setuptools makes of pyproject's value (colcon-python-setup-py 0.2.9, setuptools 65).
setup.cfg puts the console scripts in ``lib/ros_bridge``, where ``ros2 run`` looks.
"""

from setuptools import setup

setup(data_files=[("share/ament_index/resource_index/packages", ["resource/ros_bridge"]),
                  ("share/ros_bridge", ["package.xml"])],
      python_requires=">=3.11")
