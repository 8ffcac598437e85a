"""Reading a node's ROS parameters as numbers and arrays."""

from __future__ import annotations

import numpy as np
from rclpy.exceptions import ParameterUninitializedException
from rclpy.node import Node
from rclpy.parameter import Parameter

__all__ = ["array_parameter", "optional_parameter", "required_parameter"]


def optional_parameter(node: Node, name: str, kind: Parameter.Type):
    """The value of parameter ``name`` (declared with its type only), or ``None`` if unset."""
    node.declare_parameter(name, kind)
    try:
        return node.get_parameter(name).value
    except ParameterUninitializedException:
        return None


def required_parameter(node: Node, name: str, kind: Parameter.Type):
    """The value of parameter ``name``, which has no default: a missing one is a clear error."""
    value = optional_parameter(node, name, kind)
    if value is None:
        raise ValueError(f"node {node.get_name()!r} needs the parameter {name!r} "
                         f"(--ros-args -p {name}:=...)")
    return value


def array_parameter(node: Node, name: str, default) -> np.ndarray:
    """A DOUBLE_ARRAY parameter as a float array (an empty array when unset and no
    default)."""
    if default is None:
        value = optional_parameter(node, name, Parameter.Type.DOUBLE_ARRAY)
    else:
        value = node.declare_parameter(name, [float(v) for v in default]).value
    return np.asarray([] if value is None else value, dtype=np.float64)
