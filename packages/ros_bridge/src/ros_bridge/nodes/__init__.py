"""The ROS 2 nodes, each a console script (``pyproject.toml``) and a colcon entry point.

These modules import rclpy (the ``ros`` extra); ``import ros_bridge`` never imports them.
"""
