"""sensor_msgs/Image to BGR arrays."""

import numpy as np
import pytest

from ros_bridge.images import COMPRESSED_IMAGE, IMAGE, compressed_image_bgr, image_bgr
from ros_bridge.messages import MessageError, typestore


def image(encoding, pixels, *, pad=0):
    height, width = pixels.shape[:2]
    step = pixels[0].size + pad
    rows = np.zeros((height, step), np.uint8)
    rows[:, : pixels[0].size] = pixels.reshape(height, -1)
    header = typestore().types["std_msgs/msg/Header"](
        stamp=typestore().types["builtin_interfaces/msg/Time"](sec=1, nanosec=0), frame_id="")
    return typestore().types[IMAGE](header=header, height=height, width=width,
                                    encoding=encoding, is_bigendian=0, step=step,
                                    data=rows.reshape(-1))


def test_encodings_become_bgr_and_row_padding_is_dropped():
    bgr = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    np.testing.assert_array_equal(image_bgr(image("bgr8", bgr, pad=3)), bgr)
    np.testing.assert_array_equal(image_bgr(image("rgb8", bgr[:, :, ::-1].copy())), bgr)
    gray = image_bgr(image("mono8", bgr[:, :, 0].copy()))
    np.testing.assert_array_equal(gray, np.repeat(bgr[:, :, :1], 3, axis=2))


def test_unknown_encodings_and_short_data_are_refused():
    pixels = np.zeros((2, 2, 3), np.uint8)
    with pytest.raises(MessageError, match="encoding '16UC1' is not supported"):
        image_bgr(image("16UC1", pixels))
    short = image("bgr8", pixels)
    short.data = short.data[:-1]
    with pytest.raises(MessageError, match="holds 11 bytes"):
        image_bgr(short)


def compressed(data: bytes, fmt: str):
    header = typestore().types["std_msgs/msg/Header"](
        stamp=typestore().types["builtin_interfaces/msg/Time"](sec=1, nanosec=0), frame_id="")
    return typestore().types[COMPRESSED_IMAGE](header=header, format=fmt,
                                               data=np.frombuffer(data, np.uint8))


def test_compressed_images_decode_to_bgr():
    cv2 = pytest.importorskip("cv2", reason="OpenCV is the images extra")
    bgr = np.zeros((4, 6, 3), np.uint8)
    bgr[1, 2] = (10, 200, 30)
    png = cv2.imencode(".png", bgr)[1].tobytes()
    np.testing.assert_array_equal(compressed_image_bgr(compressed(png, "png")), bgr)
    flat = np.full((8, 8, 3), (40, 90, 160), np.uint8)  # a flat patch survives JPEG
    jpeg = cv2.imencode(".jpg", flat, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()
    decoded = compressed_image_bgr(compressed(jpeg, "rgb8; jpeg compressed bgr8"))
    assert decoded.shape == (8, 8, 3) and np.abs(decoded.astype(int) - flat).max() <= 2


def test_corrupt_or_empty_compressed_images_are_refused():
    pytest.importorskip("cv2", reason="OpenCV is the images extra")
    with pytest.raises(MessageError, match="does not decode"):
        compressed_image_bgr(compressed(b"\x89PNG garbage", "png"))
    with pytest.raises(MessageError, match="0 bytes"):
        compressed_image_bgr(compressed(b"", "jpeg"))
