"""``sensor_msgs/Image`` and ``sensor_msgs/CompressedImage`` to a BGR array, the input of
keypoint extractors. Compressed images (JPEG, PNG: whatever OpenCV decodes) need OpenCV, the
``images`` extra, imported when the first one arrives."""

from __future__ import annotations

import numpy as np

from .messages import MessageError

__all__ = ["COMPRESSED_IMAGE", "ENCODINGS", "IMAGE", "compressed_image_bgr", "image_bgr"]

IMAGE = "sensor_msgs/msg/Image"
COMPRESSED_IMAGE = "sensor_msgs/msg/CompressedImage"

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


def compressed_image_bgr(message) -> np.ndarray:
    """A ``sensor_msgs/CompressedImage`` (``format`` e.g. ``jpeg``, ``png``, ``rgb8; jpeg
    compressed bgr8``) as a BGR ``uint8`` array, shape (height, width, 3).

    Raises:
        MessageError: data OpenCV cannot decode (corrupt, truncated or an unknown format).
        ImportError: OpenCV is not installed (the ``images`` extra).
    """
    try:
        import cv2
    except ImportError as exc:
        raise ImportError("decoding a CompressedImage needs OpenCV: pip install "
                          "'ros_bridge[images]' (opencv-python-headless)") from exc
    data = np.frombuffer(bytes(message.data), dtype=np.uint8)
    pixels = cv2.imdecode(data, cv2.IMREAD_COLOR) if data.size else None
    if pixels is None:
        raise MessageError(f"compressed image ({message.format!r}, {data.size} bytes) does not "
                           "decode: corrupt, truncated or a format OpenCV does not read")
    return pixels
