"""Decoding images into the uint8 RGB arrays the models take (training cache and runtime alike).

>>> fit_to_square(np.zeros((48, 80, 3), np.uint8), 64).shape
(64, 64, 3)
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from .errors import ImageError

MAX_IMAGE_PIXELS = 64_000_000  # a larger image is refused before decoding (decompression bombs)
MAX_IMAGE_FILE_BYTES = 100 * 1024 * 1024


def decode_image(data: bytes, name: str = "<bytes>") -> Image.Image:
    """Decode encoded image bytes to an RGB PIL image; ImageError naming `name` if it is not an image."""
    try:
        image = Image.open(io.BytesIO(data))
        if image.width * image.height > MAX_IMAGE_PIXELS:
            raise ImageError(f"{name}: {image.width}x{image.height} image is too large")
        image.load()
        return image.convert("RGB")
    except ImageError:
        raise
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        raise ImageError(f"{name}: not a readable image ({e})") from None


def read_image_file(path: str | os.PathLike) -> Image.Image:
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as e:
        raise ImageError(f"{path}: {e.strerror}") from None
    if size > MAX_IMAGE_FILE_BYTES:
        raise ImageError(f"{path}: {size} bytes is too large for an image")
    return decode_image(path.read_bytes(), str(path))


def fit_to_square(image: Image.Image | np.ndarray, size: int) -> np.ndarray:
    """Resize so the shorter side is `size` (bilinear), center-crop to size x size; uint8 [size, size, 3]."""
    if isinstance(image, np.ndarray):
        if image.ndim == 2:
            image = np.repeat(image[..., None], 3, axis=2)
        if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
            raise ImageError(f"expected a uint8 [H, W, 3] array, got {image.dtype} {image.shape}")
        if image.shape[:2] == (size, size):
            return image
        image = Image.fromarray(image)
    if image.size != (size, size):
        scale = size / min(image.size)
        w, h = max(size, round(image.width * scale)), max(size, round(image.height * scale))
        image = image.resize((w, h), Image.BILINEAR)
        left, top = (w - size) // 2, (h - size) // 2
        image = image.crop((left, top, left + size, top + size))
    return np.asarray(image, dtype=np.uint8)


def to_uint8_batch(images, size: int) -> tuple[np.ndarray, bool]:
    """Paths, PIL images, uint8 arrays [H, W, 3] / [H, W] / [N, H, W, 3], or a list of those ->
    uint8 [N, size, size, 3] and whether a single image was given. Other sizes are resized
    (shorter side) and center-cropped; other channel counts or dtypes raise ImageError."""
    if isinstance(images, np.ndarray) and images.ndim == 4:
        return np.stack([fit_to_square(_check_array(i), size) for i in images]), False
    if isinstance(images, (list, tuple)):
        if not images:
            raise ImageError("no images given")
        return np.stack([_one(i, size) for i in images]), False
    return _one(images, size)[None], True


def _one(image, size: int) -> np.ndarray:
    if isinstance(image, (str, os.PathLike)):
        return fit_to_square(read_image_file(image), size)
    if isinstance(image, Image.Image):
        return fit_to_square(image.convert("RGB"), size)
    if isinstance(image, np.ndarray):
        return fit_to_square(_check_array(image), size)
    raise ImageError(f"cannot read an image from {type(image).__name__}")


def _check_array(image: np.ndarray) -> np.ndarray:
    if image.dtype != np.uint8:
        raise ImageError(f"image arrays must be uint8 RGB, got {image.dtype}")
    if image.ndim == 3 and image.shape[2] != 3:
        raise ImageError(f"image arrays must have 3 channels (RGB), got {image.shape[2]}")
    if image.ndim not in (2, 3) or min(image.shape[:2]) < 1:
        raise ImageError(f"image array has shape {image.shape}")
    return image
