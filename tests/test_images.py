"""Hostile and unusual images: every bad input is an ImageError, decoding is bounded, and 16-bit, float
and EXIF-rotated images come out right."""

import io
import os
import struct
import threading
import zlib

import numpy as np
import pytest
from PIL import Image

from sdk.errors import ImageError
from sdk.media import images
from sdk.media import resample as resample_module
from sdk.media.images import decode_image, fit_to_square, read_image_file, to_uint8_batch


def png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header claims width x height (no pixel data)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")


def test_a_huge_image_is_refused_from_its_header():
    with pytest.raises(ImageError, match="too large"):
        decode_image(png_header_only(9000, 9000))  # 81 MP: above our 64 MP, below PIL's own limit


def test_an_extreme_aspect_ratio_resamples_only_the_kept_box(monkeypatch):
    calls = []
    one_pass = resample_module._pass

    def spy(image, index, weight, axis):
        out = one_pass(image, index, weight, axis)
        calls.append(out.shape)
        return out

    monkeypatch.setattr(resample_module, "_pass", spy)
    strip = Image.new("RGB", (1_000_000, 1), (200, 10, 10))
    out = fit_to_square(strip, 32)
    assert out.shape == (32, 32, 3) and all(s[0] * s[1] <= 32 * 32 for s in calls)  # no 32 x 32,000,000 intermediate
    assert tuple(out[0, 0]) == (200, 10, 10)


@pytest.mark.parametrize("shape", [(80, 48), (48, 80), (33, 31), (1000, 3), (3, 1000), (257, 101), (7, 5), (375, 500)])
def test_the_sdk_resampler_is_pillows_bilinear_to_a_grey_level(shape):
    """sdk.media.resample specifies Pillow's classic algorithm; Pillow 13's SIMD build rounds some pixels the other
    way (and the Java core must repeat one fixed rule), so: never more than one level apart, mostly equal."""
    array = np.random.default_rng(0).integers(0, 256, (*shape, 3), dtype=np.uint8)
    (h, w), size = shape, 64
    scale = size / min(w, h)
    wide, tall = max(size, round(w * scale)), max(size, round(h * scale))
    left, top = (wide - size) // 2, (tall - size) // 2
    box = (left * w / wide, top * h / tall, (left + size) * w / wide, (top + size) * h / tall)
    reference = np.asarray(Image.fromarray(array).resize((size, size), Image.BILINEAR, box=box), int)
    ours = fit_to_square(array, size).astype(int)
    assert np.abs(ours - reference).max() <= 1 and (ours != reference).mean() < 0.5


def test_resizing_by_box_matches_resize_then_crop():
    rng = np.random.default_rng(0)
    array = rng.integers(0, 256, (48, 80, 3), dtype=np.uint8)
    image = Image.fromarray(array)
    reference = image.resize((53, 32), Image.BILINEAR).crop((10, 0, 42, 32))
    assert np.abs(fit_to_square(array, 32).astype(int) - np.asarray(reference, int)).max() <= 2


@pytest.mark.parametrize("make", [lambda p: os.mkfifo(p), lambda p: os.mkdir(p)])
def test_special_files_are_refused_before_reading(tmp_path, make):
    path = tmp_path / "special"
    make(path)
    errors = []
    reader = threading.Thread(target=lambda: errors.append(pytest.raises(ImageError, read_image_file, path)))
    reader.start()
    reader.join(10)
    assert not reader.is_alive(), "reading a special file hung"
    assert "not a regular file" in str(errors[0].value)


def test_a_device_is_refused():
    with pytest.raises(ImageError, match="not a regular file"):
        read_image_file("/dev/zero")


def test_sixteen_bit_png_is_scaled_not_saturated():
    grey = np.array([[0, 32768, 65535, 257]], np.uint16)
    buffer = io.BytesIO()
    Image.fromarray(grey).save(buffer, "PNG")
    decoded = np.asarray(decode_image(buffer.getvalue()))
    assert decoded[0, :, 0].tolist() == [0, 128, 255, 1]
    assert to_uint8_batch(grey.reshape(1, 4).repeat(4, 0), 4)[0][0, 0, :, 0].tolist() == [0, 128, 255, 1]


def test_exif_orientation_is_applied():
    image = Image.new("RGB", (40, 20), (0, 0, 0))
    image.paste((255, 255, 255), (0, 0, 20, 20))  # left half white
    exif = Image.Exif()
    exif[0x0112] = 6  # the camera was turned: rotate 90 degrees clockwise to view
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", exif=exif, quality=95)
    upright = decode_image(buffer.getvalue())
    assert upright.size == (20, 40)
    assert np.asarray(upright)[5, 10].mean() > 200 and np.asarray(upright)[35, 10].mean() < 50  # white on top


@pytest.mark.parametrize("bad", [
    np.zeros((0, 5, 3), np.uint8), np.zeros((5, 0), np.uint8), np.zeros((0, 8, 8, 3), np.uint8),
    np.zeros((8, 8, 4), np.uint8), np.zeros((8, 8), bool), np.zeros((8, 8, 3), np.int64),
    np.full((8, 8, 3), 1.5, np.float32), np.full((8, 8, 3), np.nan, np.float32), [], "no-such-file.png", 3,
    Image.new("RGB", (0, 0)), np.zeros((1, 1, 1, 1, 3), np.uint8),
])
def test_bad_images_are_image_errors(bad):
    with pytest.raises(ImageError):
        to_uint8_batch(bad, 8)


def test_float_arrays_in_unit_range_are_pixels():
    out, single = to_uint8_batch(np.full((8, 8, 3), 0.5, np.float64), 8)
    assert single and out.dtype == np.uint8 and int(out[0, 0, 0, 0]) == 128


def test_garbage_bytes_and_truncated_files_are_image_errors(tmp_path):
    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), (1, 2, 3)).save(buffer, "PNG")
    for data in (b"", b"garbage", buffer.getvalue()[:40], png_header_only(0, 10)):
        (tmp_path / "x.png").write_bytes(data)
        with pytest.raises(ImageError):
            read_image_file(tmp_path / "x.png")


def test_large_jpegs_are_decoded_at_a_reduced_scale():
    buffer = io.BytesIO()
    Image.new("RGB", (2000, 1600), (10, 200, 10)).save(buffer, "JPEG")
    decoded = decode_image(buffer.getvalue(), size=64)
    assert 64 <= min(decoded.size) <= 400 and images.fit_to_square(decoded, 64).shape == (64, 64, 3)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int16, np.uint32, bool])
def test_integer_arrays_of_ambiguous_range_are_refused_not_rescaled(dtype):
    """An int32 array of 0-255 values used to be read as 16 bits (nearly black) without a word (issue 49)."""
    from sdk.media.images import to_uint8_batch

    with pytest.raises(ImageError, match="astype"):
        to_uint8_batch(np.full((8, 8, 3), 200, dtype), 8)


def test_a_16_bit_png_is_still_scaled_to_8_bits(tmp_path):
    from PIL import Image

    from sdk.media.images import to_uint8_batch

    path = tmp_path / "grey16.png"
    Image.fromarray(np.full((8, 8), 65535, np.uint16)).save(path)
    assert to_uint8_batch([path], 8)[0].min() == 255


RGB = (np.random.default_rng(3).random((40, 30, 3)) * 255).astype(np.uint8)


def _encoded(image: Image.Image, fmt: str = "PNG", **options) -> bytes:
    out = io.BytesIO()
    image.save(out, format=fmt, **options)
    return out.getvalue()


def _closed() -> Image.Image:
    image = Image.fromarray(RGB)
    image.close()
    return image


def _animated() -> Image.Image:
    frames = [Image.fromarray(RGB), Image.fromarray(255 - RGB)]
    return Image.open(io.BytesIO(_encoded(frames[0], "GIF", save_all=True, append_images=frames[1:])))


# Issue 63: objects a caller may pass by mistake. Each is an image (the same pixels as its plain form) or
# an ImageError, never numpy's or Pillow's own exception.
SAME_PIXELS = {
    "np.matrix (grey)": (lambda: np.matrix(RGB[..., 0]), RGB[..., 0]),
    "memmap": (lambda: _memmap(), RGB),
    "recarray view": (lambda: RGB.view(np.recarray), RGB),
    "big-endian uint16": (lambda: (RGB.astype(np.uint16) * 257).astype(">u2"), RGB),
    "lazy PIL (not yet decoded)": (lambda: Image.open(io.BytesIO(_encoded(Image.fromarray(RGB)))), RGB),
    "animated GIF (first frame)": (_animated, np.asarray(_animated().convert("RGB"))),
}
REFUSED = {
    "masked array": (lambda: np.ma.masked_array(RGB, mask=RGB > 200), "masked array"),
    "closed PIL image": (_closed, "closed image"),
    "truncated PIL image": (lambda: _truncated(), "truncated"),
    "object array": (lambda: RGB.astype(object), "got object"),
}


def _truncated() -> Image.Image:
    data = _encoded(Image.fromarray(RGB), "JPEG")
    return Image.open(io.BytesIO(data[:len(data) // 2]))   # the header reads; the pixels fail at decode


def _memmap() -> np.ndarray:
    import tempfile

    array = np.memmap(tempfile.NamedTemporaryFile(delete=False).name, np.uint8, "w+", shape=RGB.shape)
    array[:] = RGB
    return array


@pytest.mark.parametrize("case", sorted(SAME_PIXELS))
def test_numpy_and_pil_variants_read_as_their_plain_pixels(case):
    make, plain = SAME_PIXELS[case]
    got, _ = to_uint8_batch(make(), 32)
    want, _ = to_uint8_batch(np.ascontiguousarray(plain), 32)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_numpy_and_pil_variants_that_are_not_images_are_image_errors(case):
    make, message = REFUSED[case]
    with pytest.raises(ImageError, match=message):
        to_uint8_batch(make(), 32)


@pytest.mark.parametrize("mode", ["P", "CMYK", "LA", "RGBA", "1", "I;16", "L"])
def test_every_pil_mode_gives_pixels(mode):
    image = Image.fromarray(RGB).convert(mode) if mode != "I;16" else Image.fromarray(RGB[..., 0].astype(np.uint16))
    batch, single = to_uint8_batch(image, 16)
    assert single and batch.shape == (1, 16, 16, 3) and batch.dtype == np.uint8


@pytest.mark.parametrize("value", [5, None, b"/tmp/x.taper", 3.5, ["a.taper"]], ids=repr)
def test_every_path_argument_of_any_type_is_a_typed_error(value, tiny_bundle):
    """Issue 63: bytes or a number as a path was pathlib's TypeError."""
    import sdk

    with pytest.raises(sdk.SdkError, match="must be a path"):
        sdk.load(value)
    if value is not None:   # program=None is the default companion path
        with pytest.raises(sdk.SdkError, match="must be a path"):
            sdk.load(tiny_bundle, engine="executorch", program=value)
    with pytest.raises(sdk.SdkError):
        sdk.load(tiny_bundle, trusted_keys=value if value is not None else 5)
