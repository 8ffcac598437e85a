"""Package data: the fake robot's URDF."""
