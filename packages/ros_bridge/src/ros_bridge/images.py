"""``sensor_msgs/Image`` to a BGR array, the input of keypoint extractors."""

from __future__ import annotations

import numpy as np

from .messages import MessageError

__all__ = ["IMAGE", "ENCODINGS", "image_bgr"]

IMAGE = "sensor_msgs/msg/Image"

ENCODINGS = {"bgr8": (3, [0, 1, 2]), "rgb8": (3, [2, 1, 0]), "bgra8": (4, [0, 1, 2]),
             "rgba8": (4, [2, 1, 0]), "mono8": (1, [0, 0, 0])}
"""Encoding -> (channels, the source channels of B, G, R)."""


def image_bgr(message) -> np.ndarray:
    """A ``sensor_msgs/Image`` as a BGR ``uint8`` array, shape (height, width, 3).

    Raises:
        MessageError: an encoding other than those of :data:`ENCODINGS`, or data that does
            not fill ``height`` rows of ``step`` bytes.
    """
    encoding = str(message.encoding).lower()
    if encoding not in ENCODINGS:
        raise MessageError(f"image encoding {message.encoding!r} is not supported; publish one "
                           f"of {sorted(ENCODINGS)}")
    channels, order = ENCODINGS[encoding]
    height, width, step = int(message.height), int(message.width), int(message.step)
    data = np.frombuffer(bytes(message.data), dtype=np.uint8)
    if step < width * channels or data.size != height * step:
        raise MessageError(f"image data holds {data.size} bytes; {height} rows of step {step} "
                           f"(>= {width} px × {channels} channels) need {height * step}")
    pixels = data.reshape(height, step)[:, : width * channels].reshape(height, width, channels)
    return np.ascontiguousarray(pixels[:, :, order])
