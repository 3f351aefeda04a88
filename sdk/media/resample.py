"""Bilinear resampling of uint8 RGB images, specified here so that every runtime gives the same pixels.

The algorithm is Pillow's classic `ImagingResample` (libImaging/Resample.c) for 8-bit images: a
triangle filter widened by the scale when shrinking (antialiased), the source box given in C floats,
coefficients normalised per output pixel and rounded to 22-bit fixed point, a horizontal pass over the
rows the vertical pass needs, then the vertical pass, each rounding to uint8. The SDK does not call
Pillow for this: the installed Pillow 13 gives other pixels on some images (one grey level apart on 3 of
9 odd-sized test images; it matches this algorithm with the passes in the other order on most of them,
and no order rule explained all), so Pillow's output depends on the installed build. The Java
core (android_demo/core Preprocessing.java) implements this same specification, and the golden tests
check the two agree exactly.

>>> resample(np.zeros((48, 80, 3), np.uint8), 32, 32, (24.0, 0.0, 72.0, 48.0)).shape
(32, 32, 3)
"""

from __future__ import annotations

import math

import numpy as np

PRECISION_BITS = 32 - 8 - 2  # Pillow's fixed point for 8-bit images: sums of 255 * 2^22 fit in int32
MAX_GATHERED = 1 << 24       # values gathered at once by a pass (64 MiB of int32): rows are processed in chunks


def coefficients(in_size: int, in0: float, in1: float, out_size: int) -> tuple[np.ndarray, np.ndarray, int, int]:
    """(source index [out, K], fixed-point weight [out, K], first and last+1 source index used) of the
    bilinear filter mapping source span [in0, in1) onto out_size pixels (Pillow's precompute_coeffs and
    normalize_coeffs_8bpc; unused taps have weight 0 and a valid index)."""
    in0, in1 = np.float32(in0), np.float32(in1)
    scale = float(np.float32(in1 - in0)) / out_size  # the box is in C floats, its width a float difference
    filter_scale = max(scale, 1.0)
    support = filter_scale  # bilinear support 1, widened when shrinking
    taps = int(math.ceil(support)) * 2 + 1
    center = float(in0) + (np.arange(out_size) + 0.5) * scale
    first = np.maximum((center - support + 0.5).astype(np.int64), 0)  # C casts truncate toward zero
    count = np.minimum((center + support + 0.5).astype(np.int64), in_size) - first
    offsets = np.arange(taps)
    t = np.abs(((offsets[None] + first[:, None]) - center[:, None] + 0.5) * (1.0 / filter_scale))
    weight = np.where((t < 1.0) & (offsets[None] < count[:, None]), 1.0 - t, 0.0)
    total = np.cumsum(weight, axis=1)[:, -1]  # summed left to right, as the C loop does
    weight = np.divide(weight, total[:, None], out=weight.copy(), where=total[:, None] != 0)
    scaled = weight * (1 << PRECISION_BITS)
    fixed = np.where(scaled < 0, scaled - 0.5, scaled + 0.5).astype(np.int64).astype(np.int32)
    index = np.minimum(first[:, None] + offsets[None], in_size - 1)
    return index, fixed, int(first[0]), int(first[-1] + count[-1])


def _pass(image: np.ndarray, index: np.ndarray, weight: np.ndarray, axis: int) -> np.ndarray:
    """One separable pass along `axis` (0: rows, 1: columns) of a uint8 [H, W, 3] image."""
    out_size, taps = index.shape
    other = image.shape[1 - axis]
    out = np.empty((out_size, other, 3) if axis == 0 else (other, out_size, 3), np.uint8)
    step = max(1, MAX_GATHERED // max(1, taps * 3 * (other if axis == 0 else out_size)))
    half = np.int32(1 << (PRECISION_BITS - 1))
    for start in range(0, out_size if axis == 0 else other, step):
        if axis == 0:
            gathered = image[index[start:start + step]].astype(np.int32)        # [n, K, W, 3]
            sums = (gathered * weight[start:start + step, :, None, None]).sum(1, dtype=np.int32)
            out[start:start + step] = np.clip((sums + half) >> PRECISION_BITS, 0, 255)
        else:
            gathered = image[start:start + step][:, index].astype(np.int32)     # [n, out, K, 3]
            sums = (gathered * weight[None, :, :, None]).sum(2, dtype=np.int32)
            out[start:start + step] = np.clip((sums + half) >> PRECISION_BITS, 0, 255)
    return out


def resample(image: np.ndarray, width: int, height: int, box: tuple[float, float, float, float]) -> np.ndarray:
    """uint8 [H, W, 3] -> uint8 [height, width, 3]: the source `box` (left, top, right, bottom, in pixels)
    resampled with the bilinear filter (the specification in the module docstring)."""
    in_height, in_width = image.shape[:2]
    horizontal = width != in_width or box[0] != 0 or box[2] != width
    vertical = height != in_height or box[1] != 0 or box[3] != height
    rows, row_weights, first, last = coefficients(in_height, box[1], box[3], height)
    if horizontal:
        columns, column_weights, _, _ = coefficients(in_width, box[0], box[2], width)
        image = _pass(image[first:last], columns, column_weights, axis=1)
        rows = np.minimum(rows - first, last - first - 1)  # unused taps (weight 0) stay in the kept rows
    if vertical:
        image = _pass(image, rows, row_weights, axis=0)
    return np.ascontiguousarray(image)
