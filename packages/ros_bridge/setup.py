"""colcon's ament_python build runs setup.py; everything but the ament index files comes
from pyproject.toml (``pip install`` uses hatchling and never runs this file)."""

from setuptools import setup

setup(data_files=[("share/ament_index/resource_index/packages", ["resource/ros_bridge"]),
                  ("share/ros_bridge", ["package.xml"])])
