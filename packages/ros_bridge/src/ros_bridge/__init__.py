"""ros_bridge: ROS 2 messages, rosbag2 files and a safe impedance controller for codesign."""
