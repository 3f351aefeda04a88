"""Decoding images into the uint8 RGB arrays the models take (training cache and runtime alike).

Every image is untrusted, so decoding is bounded:
- a path must name a regular file (a FIFO, device or folder is refused before anything is read; the
  file is opened non-blocking and checked with fstat, so it cannot be swapped for a FIFO in between),
  of at most 100 MB, read with a bound;
- the pixel count is checked from the header before decoding (64 megapixels at most), and an empty
  image is refused;
- the geometry is "shorter side to `size`, then center crop" done as one bilinear resize of the
  source's centre box (`sdk.media.resample`, the SDK's own specification of Pillow's classic algorithm, which
  the Java core repeats exactly), so a 1 x 1,000,000 strip costs a 1 x 1 crop, not a 32 x 32,000,000
  intermediate; JPEGs are decoded at a reduced scale when they are much larger;
- EXIF orientation is applied (a phone photo is not classified sideways);
- 16-bit images and uint16 arrays are scaled to 8 bits (not saturated), float arrays must hold values
  in [0, 1]; other dtypes (int32 arrays among them: 0-255 or 0-65535? a caller must say, by converting)
  and 32-bit float images are refused with ImageError.

>>> fit_to_square(np.zeros((48, 80, 3), np.uint8), 64).shape
(64, 64, 3)
"""

from __future__ import annotations

import io
import os
import stat
import sys
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from sdk.errors import ImageError
from sdk.media.resample import resample

MAX_IMAGE_PIXELS = 64_000_000  # a larger image is refused before decoding (decompression bombs)
MAX_IMAGE_FILE_BYTES = 100 * 1024 * 1024
SIXTEEN_BIT_MODES = ("I;16", "I;16L", "I;16B", "I;16N", "I")
# What Pillow raises for a file or image it cannot read: a truncated file (OSError), a closed image
# (ValueError), a malformed header (SyntaxError, struct's errors as ValueError, a bad table's IndexError).
PIL_ERRORS = (UnidentifiedImageError, OSError, ValueError, SyntaxError, TypeError, KeyError, IndexError,
              ZeroDivisionError, Image.DecompressionBombError)


def decode_image(data: bytes, name: str = "<bytes>", size: int | None = None) -> Image.Image:
    """Decode encoded image bytes to an upright RGB PIL image; ImageError naming `name` if it is not a
    readable image. With `size`, a JPEG much larger than size x size is decoded at a reduced scale."""
    try:
        image = Image.open(io.BytesIO(data))
        _check_dimensions(image.width, image.height, name)
        if size is not None and image.format == "JPEG":
            image.draft("RGB", (size, size))  # decodes at 1/2, 1/4 or 1/8 scale, never below size x size
        image = ImageOps.exif_transpose(image)  # loads the pixels
        return _to_rgb(image, name)
    except ImageError:
        raise
    except PIL_ERRORS as e:
        raise ImageError(f"{name}: not a readable image ({type(e).__name__}: {e})") from None


def _check_dimensions(width: int, height: int, name: str) -> None:
    if width < 1 or height < 1:
        raise ImageError(f"{name}: the image is empty ({width}x{height})")
    if width * height > MAX_IMAGE_PIXELS:
        raise ImageError(f"{name}: {width}x{height} image is too large (at most {MAX_IMAGE_PIXELS:,} pixels)")


def _to_rgb(image: Image.Image, name: str) -> Image.Image:
    if image.mode in SIXTEEN_BIT_MODES:  # 16-bit grey (PNG): scale to 8 bits, as convert() would saturate
        return Image.fromarray(to_uint8(np.asarray(image), name, pil_sixteen_bit=True)).convert("RGB")
    if image.mode == "F":
        raise ImageError(f"{name}: 32-bit float images are not supported (convert to 8 or 16 bits)")
    return image.convert("RGB")


def read_image_file(path: str | os.PathLike, size: int | None = None) -> Image.Image:
    """Decode the image file at `path` (a regular file of at most 100 MB); ImageError otherwise."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise ImageError(f"{path}: {e.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_IMAGE_FILE_BYTES:
        os.close(fd)
        raise ImageError(f"{path}: not a regular file" if not stat.S_ISREG(info.st_mode)
                         else f"{path}: {info.st_size} bytes is too large for an image")
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_IMAGE_FILE_BYTES + 1)
    if len(data) > MAX_IMAGE_FILE_BYTES:
        raise ImageError(f"{path}: more than {MAX_IMAGE_FILE_BYTES} bytes")
    return decode_image(data, str(path), size)


def to_uint8(array: np.ndarray, name: str = "image array", pil_sixteen_bit: bool = False) -> np.ndarray:
    """uint8 pixels from uint8, uint16 (scaled by 255/65535, rounded) or float ([0, 1]) arrays.
    `pil_sixteen_bit`: the array is a decoded 16-bit PIL image, which PIL gives as int32 ("I" mode). A
    caller's int32 array is refused instead: its range (8 or 16 bits) cannot be told from its values."""
    if array.dtype == np.uint8:
        return array
    if array.dtype.kind in "uif" and not array.dtype.isnative:   # big-endian pixels: the same values, native
        array = array.astype(array.dtype.newbyteorder("="))
    sixteen_bit = array.dtype == np.uint16 or (pil_sixteen_bit and
        array.dtype == np.int32 and array.size > 0 and array.min() >= 0 and array.max() <= 65535)
    if sixteen_bit:
        return ((array.astype(np.uint32) * 255 + 32767) // 65535).astype(np.uint8)
    if array.dtype.kind == "f":
        if not np.isfinite(array).all() or array.min() < 0 or array.max() > 1:
            raise ImageError(f"{name}: float pixels must be finite and in [0, 1]")
        return np.rint(array * 255).astype(np.uint8)
    raise ImageError(f"{name}: pixels must be uint8, uint16 or float in [0, 1], got {array.dtype} (convert it: "
                     "array.astype(np.uint8) for 0-255 values, np.uint16 for 0-65535)")


def fit_to_square(image: Image.Image | np.ndarray, size: int) -> np.ndarray:
    """Resize so the shorter side is `size` (bilinear), center-crop to size x size; uint8 [size, size, 3].
    Done as one resize of the matching box of the source, so only the kept region is resampled."""
    if isinstance(image, np.ndarray):
        image = _check_array(image)
        if image.ndim == 2:
            image = np.repeat(image[..., None], 3, axis=2)
    else:
        _check_dimensions(image.width, image.height, "image")
        image = np.asarray(image if image.mode == "RGB" else image.convert("RGB"), dtype=np.uint8)
    height, width = image.shape[:2]
    if (height, width) == (size, size):
        return image
    scale = size / min(width, height)
    w, h = max(size, round(width * scale)), max(size, round(height * scale))
    left, top = (w - size) // 2, (h - size) // 2
    box = (left * width / w, top * height / h, (left + size) * width / w, (top + size) * height / h)
    return resample(image, size, size, box)


def to_uint8_batch(images, size: int) -> tuple[np.ndarray, bool]:
    """Paths, PIL images, arrays [H, W, 3] / [H, W] / [N, H, W, 3] (uint8, uint16 or float in [0, 1]), or a
    list of those -> uint8 [N, size, size, 3] and whether a single image was given. Other sizes are
    resized (shorter side) and center-cropped; other channel counts or dtypes raise ImageError."""
    if isinstance(images, np.ndarray):
        images = _plain_array(images)
    if isinstance(images, np.ndarray) and images.ndim == 4:
        if len(images) == 0:
            raise ImageError("no images given (an empty batch)")
        return np.stack([fit_to_square(i, size) for i in images]), False
    if isinstance(images, (list, tuple)):
        if not images:
            raise ImageError("no images given")
        return np.stack([_one(i, size) for i in images]), False
    return _one(images, size)[None], True


def _one(image, size: int) -> np.ndarray:
    if isinstance(image, (str, os.PathLike)):
        return fit_to_square(read_image_file(image, size), size)
    if isinstance(image, Image.Image):
        try:  # a lazy image decodes here: a truncated or closed one fails here
            _check_dimensions(image.width, image.height, "image")
            return fit_to_square(_to_rgb(ImageOps.exif_transpose(image), "image"), size)
        except ImageError:
            raise
        except PIL_ERRORS as e:
            raise ImageError(f"PIL image: not readable ({type(e).__name__}: {e})") from None
    if isinstance(image, np.ndarray):
        return fit_to_square(_plain_array(image), size)
    raise ImageError(f"cannot read an image from {type(image).__name__}")


def _plain_array(image: np.ndarray) -> np.ndarray:
    """A numpy subclass as a plain array (np.matrix keeps 2 dimensions under every operation; a memmap
    or recarray view reads the same): a masked array is refused, since its mask would be silently lost."""
    masked = sys.modules.get("numpy.ma")   # not np.ma: its first import leaves cyclic garbage; without it
    if masked is not None and isinstance(image, masked.MaskedArray):   # loaded, no masked array exists
        raise ImageError("a masked array is not an image: fill it first (array.filled(0))")
    return image if type(image) is np.ndarray else np.asarray(image)


def _check_array(image: np.ndarray) -> np.ndarray:
    if image.ndim == 3 and image.shape[2] != 3:
        raise ImageError(f"image arrays must have 3 channels (RGB), got {image.shape[2]}")
    if image.ndim not in (2, 3) or min(image.shape[:2]) < 1:
        raise ImageError(f"image array has shape {image.shape}")
    _check_dimensions(image.shape[1], image.shape[0], "image array")
    return to_uint8(image)
