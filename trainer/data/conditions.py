"""Field conditions (issue 50): nine seeded, deterministic image transforms at 64 px, five severities each.

The condition set, its severities and the reason for each were committed to docs/results/experiments.md
("Field conditions: the condition set, pre-registered") before any accuracy was measured on them.
Six conditions take their constants from Tiny-ImageNet-C (Hendrycks & Dietterich, ICLR 2019; the
constants of `ImageNet-C/create_c/make_tinyimagenet_c.py` in hendrycks/robustness, credited here; the
code below is our own, in numpy and torch, without ImageMagick or OpenCV): fog, snow, motion blur,
defocus, and the JPEG and pixelate halves of compression. Three are ours, since Tiny-ImageNet-C has no
counterpart: night infrared, low light (colour) and underwater; their constants are in this file.

Every transform maps float images [N, 3, H, W] in [0, 1] and a severity per image (1..5) to the same
shape, drawing its randomness from a numpy Generator, so the same (images, severities, seed) give the
same bytes on every machine.

>>> import numpy as np
>>> images = np.full((2, 64, 64, 3), 128, np.uint8)
>>> apply_condition("fog", images, np.array([1, 5]), seed=0).shape
(2, 64, 64, 3)
>>> [c.name for c in CONDITIONS][:3]
['clean', 'night_infrared', 'low_light']
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

SEVERITIES = (1, 2, 3, 4, 5)
REPORT_SEVERITIES = (3, 5)  # the middle and the hardest (pre-registered)

Transform = Callable[[torch.Tensor, np.ndarray, np.random.Generator], torch.Tensor]


# ---------------------------------------------------------------------------------------------- helpers


def _luma(x: torch.Tensor) -> torch.Tensor:
    """[N, 1, H, W] Rec. 601 luma of [N, 3, H, W] RGB."""
    return 0.299 * x[:, 0:1] + 0.587 * x[:, 1:2] + 0.114 * x[:, 2:3]


def _per_image(values, severity: np.ndarray) -> torch.Tensor:
    """[N, 1, 1, 1] float32: the constant of each image's severity."""
    table = torch.tensor(values, dtype=torch.float32)
    return table[torch.as_tensor(severity - 1, dtype=torch.long)].view(-1, 1, 1, 1)


def _normal(rng: np.random.Generator, shape, scale=1.0, loc=0.0) -> torch.Tensor:
    return torch.from_numpy(rng.normal(loc, scale, size=shape).astype(np.float32))


def gaussian_kernel_1d(sigma: float, radius: int | None = None) -> torch.Tensor:
    radius = radius if radius is not None else max(1, math.ceil(3 * sigma))
    t = torch.arange(-radius, radius + 1, dtype=torch.float32)
    k = torch.exp(-t * t / (2 * sigma * sigma))
    return k / k.sum()


def gaussian_blur(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """Separable Gaussian blur of [N, C, H, W], edges reflected (as skimage's `gaussian` does)."""
    k = gaussian_kernel_1d(sigma)
    r, c = len(k) // 2, x.shape[1]
    x = F.conv2d(F.pad(x, (r, r, 0, 0), mode="reflect"), k.view(1, 1, 1, -1).repeat(c, 1, 1, 1), groups=c)
    return F.conv2d(F.pad(x, (0, 0, r, r), mode="reflect"), k.view(1, 1, -1, 1).repeat(c, 1, 1, 1), groups=c)


def _per_image_kernels(x: torch.Tensor, kernels: torch.Tensor) -> torch.Tensor:
    """Correlate each image of [N, C, H, W] with its own [K, K] kernel (kernels [N, K, K]): output pixel p is
    sum_k kernel[k] * x[p + k - K // 2]. Edges replicated."""
    n, c, h, w = x.shape
    r = kernels.shape[-1] // 2
    padded = F.pad(x, (r, r, r, r), mode="replicate").reshape(1, n * c, h + 2 * r, w + 2 * r)
    weight = kernels.repeat_interleave(c, dim=0).unsqueeze(1)  # [N*C, 1, K, K]
    return F.conv2d(padded, weight, groups=n * c).view(n, c, h, w)


def motion_kernels(radius: int, sigma: float, angles_deg: np.ndarray) -> torch.Tensor:
    """[N, K, K] one-sided motion-blur kernels, after ImageMagick's MotionBlurImage (which Tiny-ImageNet-C
    calls): `2 * radius + 1` taps along the angle, tap i weighted exp(-i^2 / 2 sigma^2), normalised.
    Taps beyond 4 sigma weigh < 3e-4 of the first and are dropped, which keeps the kernel small."""
    taps = min(2 * radius + 1, math.ceil(4 * sigma) + 1)
    size = 2 * taps + 1
    kernels = torch.zeros(len(angles_deg), size, size)
    weights = torch.exp(-(torch.arange(taps, dtype=torch.float32) ** 2) / (2 * sigma * sigma))
    for n, angle in enumerate(np.deg2rad(angles_deg)):
        for i in range(taps):
            # ImageMagick's output pixel is the weighted sum of the input pixels at offsets i along the angle.
            dy = int(math.ceil(i * math.sin(angle) - 0.5))
            dx = int(math.ceil(i * math.cos(angle) - 0.5))
            kernels[n, taps + dy, taps + dx] += weights[i]
    return kernels / kernels.sum(dim=(1, 2), keepdim=True)


def _clipped_zoom(x: torch.Tensor, factor: float) -> torch.Tensor:
    """Zoom into the centre of [N, C, H, W] by `factor` (>= 1), bilinear, back to H x W."""
    h = x.shape[-1]
    crop = int(math.ceil(h / factor))
    top = (h - crop) // 2
    patch = x[..., top : top + crop, top : top + crop]
    return F.interpolate(patch, size=(h, h), mode="bilinear", align_corners=False)


def plasma_fractal(count: int, mapsize: int, wibbledecay: float, rng: np.random.Generator) -> np.ndarray:
    """[count, mapsize, mapsize] height maps in [0, 1] by the diamond-square algorithm (Tiny-ImageNet-C's
    fog; its version draws one map per call, this one draws `count` at once)."""
    assert mapsize & (mapsize - 1) == 0
    maps = np.zeros((count, mapsize, mapsize))
    step, wibble = mapsize, 100.0

    def wibbled_mean(total: np.ndarray) -> np.ndarray:
        return total / 4 + wibble * rng.uniform(-wibble, wibble, total.shape)

    while step >= 2:
        half = step // 2
        corners = maps[:, 0::step, 0::step]
        squares = corners + np.roll(corners, -1, axis=1)
        squares = squares + np.roll(squares, -1, axis=2)
        maps[:, half::step, half::step] = wibbled_mean(squares)
        centres = maps[:, half::step, half::step]
        corners = maps[:, 0::step, 0::step]
        left = centres + np.roll(centres, 1, axis=1) + corners + np.roll(corners, -1, axis=2)
        maps[:, 0::step, half::step] = wibbled_mean(left)
        top = centres + np.roll(centres, 1, axis=2) + corners + np.roll(corners, -1, axis=1)
        maps[:, half::step, 0::step] = wibbled_mean(top)
        step //= 2
        wibble /= wibbledecay
    maps -= maps.min(axis=(1, 2), keepdims=True)
    return maps / maps.max(axis=(1, 2), keepdims=True)


def _by_severity(transform: Callable[[torch.Tensor, int, np.random.Generator], torch.Tensor]) -> Transform:
    """A transform written for one severity, applied to each severity's images of a batch in turn."""

    def apply(x: torch.Tensor, severity: np.ndarray, rng: np.random.Generator) -> torch.Tensor:
        out = torch.empty_like(x)
        for s in SEVERITIES:
            rows = np.flatnonzero(severity == s)
            if len(rows):
                out[torch.from_numpy(rows)] = transform(x[torch.from_numpy(rows)], s, rng)
        return out

    return apply


# ------------------------------------------------------------------------------------------- conditions


def clean(x: torch.Tensor, severity: np.ndarray, rng: np.random.Generator) -> torch.Tensor:
    return x


# Night infrared (ours): an IR-flash trail camera: greyscale, under-exposed, a flash hot spot that falls off
# towards the corners, Gaussian sensor noise, slightly soft. (A first draft took Tiny-ImageNet-C's
# gaussian_noise constants, 0.04-0.18, on top of exposures 0.7-0.25: at severity 3 nothing of the object was
# left to see. Changed before any accuracy was measured; experiments.md.)
NIGHT_EXPOSURE = (0.9, 0.8, 0.7, 0.6, 0.5)
NIGHT_VIGNETTE = (0.2, 0.3, 0.4, 0.5, 0.6)  # brightness lost at the corners
NIGHT_NOISE = (0.02, 0.04, 0.06, 0.08, 0.10)


def night_infrared(x: torch.Tensor, severity: np.ndarray, rng: np.random.Generator) -> torch.Tensor:
    h, w = x.shape[-2:]
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, h), torch.linspace(-1, 1, w), indexing="ij")
    falloff = (xx * xx + yy * yy) / 2  # 0 at the centre, 1 at the corners
    y = gaussian_blur(_luma(x), 0.5)
    y = y * _per_image(NIGHT_EXPOSURE, severity) * (1 - _per_image(NIGHT_VIGNETTE, severity) * falloff)
    y = y + _normal(rng, y.shape) * _per_image(NIGHT_NOISE, severity)
    return y.clamp(0, 1).expand(-1, 3, -1, -1).contiguous()


# Low light in colour (ours): exposure cut, photon (shot) noise at that exposure, and the camera's gain
# bringing part of the brightness back (gain = exposure^-1/2), which amplifies the noise with it.
LOW_LIGHT_EXPOSURE = (0.5, 0.35, 0.25, 0.18, 0.12)
LOW_LIGHT_PHOTONS = (600, 400, 250, 150, 100)  # photons at full scale and full exposure


def low_light(x: torch.Tensor, severity: np.ndarray, rng: np.random.Generator) -> torch.Tensor:
    exposure = _per_image(LOW_LIGHT_EXPOSURE, severity)
    photons = _per_image(LOW_LIGHT_PHOTONS, severity)
    rate = (x * exposure * photons).numpy().astype(np.float64)
    counted = torch.from_numpy(rng.poisson(rate).astype(np.float32)) / photons
    return (counted * exposure.rsqrt()).clamp(0, 1)


# Fog: Tiny-ImageNet-C's fog (strength, wibble decay of the plasma fractal).
FOG = ((0.4, 3), (0.7, 3), (1.0, 2.5), (1.5, 2), (2.0, 1.75))


@_by_severity
def fog(x: torch.Tensor, s: int, rng: np.random.Generator) -> torch.Tensor:
    strength, decay = FOG[s - 1]
    size = x.shape[-1]
    mapsize = 1 << max(0, (size - 1).bit_length())
    plasma = torch.from_numpy(plasma_fractal(len(x), mapsize, decay, rng)[:, :size, :size].astype(np.float32))
    peak = x.amax(dim=(1, 2, 3), keepdim=True)
    return ((x + strength * plasma[:, None]) * peak / (peak + strength)).clamp(0, 1)


# Snow: Tiny-ImageNet-C's snow (flake mean, spread, zoom, threshold, motion radius, motion sigma, blend).
SNOW = (
    (0.1, 0.2, 1, 0.6, 8, 3, 0.8),
    (0.1, 0.2, 1, 0.5, 10, 4, 0.8),
    (0.15, 0.3, 1.75, 0.55, 10, 4, 0.7),
    (0.25, 0.3, 2.25, 0.6, 12, 6, 0.65),
    (0.3, 0.3, 1.25, 0.65, 14, 12, 0.6),
)


@_by_severity
def snow(x: torch.Tensor, s: int, rng: np.random.Generator) -> torch.Tensor:
    loc, scale, zoom, threshold, radius, sigma, blend = SNOW[s - 1]
    n, _, h, w = x.shape
    flakes = _clipped_zoom(_normal(rng, (n, 1, h, w), scale, loc), zoom)
    flakes = torch.where(flakes < threshold, torch.zeros(()), flakes).clamp(0, 1)
    flakes = (flakes * 255).floor() / 255  # Tiny-ImageNet-C round-trips the layer through 8 bits
    flakes = _per_image_kernels(flakes, motion_kernels(radius, sigma, rng.uniform(-135, -45, n)))
    x = blend * x + (1 - blend) * torch.maximum(x, _luma(x) * 1.5 + 0.5)
    return (x + flakes + flakes.flip(-1, -2)).clamp(0, 1)


# Motion blur: Tiny-ImageNet-C's (radius, sigma), angle uniform in [-45, 45] degrees.
MOTION_BLUR = ((10, 1), (10, 1.5), (10, 2), (10, 2.5), (12, 3))


@_by_severity
def motion_blur(x: torch.Tensor, s: int, rng: np.random.Generator) -> torch.Tensor:
    radius, sigma = MOTION_BLUR[s - 1]
    return _per_image_kernels(x, motion_kernels(radius, sigma, rng.uniform(-45, 45, len(x)))).clamp(0, 1)


# Defocus / dirty lens: Tiny-ImageNet-C's defocus_blur (disk radius, anti-alias sigma).
DEFOCUS = ((0.5, 0.6), (1, 0.1), (1.5, 0.1), (2.5, 0.01), (3, 0.1))


def disk_kernel(radius: float, alias_sigma: float) -> torch.Tensor:
    """A normalised disk, anti-aliased with a 3 x 3 Gaussian (Tiny-ImageNet-C's `disk` for radius <= 8)."""
    t = torch.arange(-8, 9, dtype=torch.float32)
    yy, xx = torch.meshgrid(t, t, indexing="ij")
    disk = ((xx * xx + yy * yy) <= radius * radius).float()
    disk = disk / disk.sum()
    g = gaussian_kernel_1d(alias_sigma, radius=1)
    blurred = F.conv2d(F.pad(disk[None, None], (1, 1, 1, 1), mode="reflect"), (g[:, None] * g[None, :])[None, None])
    return blurred[0, 0]


@_by_severity
def defocus(x: torch.Tensor, s: int, rng: np.random.Generator) -> torch.Tensor:
    kernel = disk_kernel(*DEFOCUS[s - 1])
    r = kernel.shape[-1] // 2
    weight = kernel.expand(3, 1, -1, -1)  # symmetric: correlation is convolution
    return F.conv2d(F.pad(x, (r, r, r, r), mode="reflect"), weight, groups=3).clamp(0, 1)


# Underwater (ours): water absorbs red first, then green; light scattered back veils the scene in a
# blue-green (the water's own colour varies per image); particles blur. Transmission per severity, raised
# to a per-channel power (red 2.5, green 0.8, blue 0.6).
UNDERWATER_TRANSMISSION = (0.85, 0.7, 0.55, 0.45, 0.35)
UNDERWATER_ABSORPTION = (2.5, 0.8, 0.6)
UNDERWATER_VEIL = (0.05, 0.35, 0.45)
UNDERWATER_BLUR = (0.4, 0.6, 0.8, 1.0, 1.2)


def underwater(x: torch.Tensor, severity: np.ndarray, rng: np.random.Generator) -> torch.Tensor:
    t = _per_image(UNDERWATER_TRANSMISSION, severity) ** torch.tensor(UNDERWATER_ABSORPTION).view(1, 3, 1, 1)
    tint = torch.from_numpy(rng.uniform(-0.1, 0.1, len(x)).astype(np.float32))
    veil = torch.tensor(UNDERWATER_VEIL).view(1, 3, 1, 1).repeat(len(x), 1, 1, 1)
    veil[:, 1, 0, 0] += tint
    veil[:, 2, 0, 0] -= tint
    out = x * t + veil * (1 - t)
    for s in SEVERITIES:
        rows = torch.from_numpy(np.flatnonzero(severity == s))
        if len(rows):
            out[rows] = gaussian_blur(out[rows], UNDERWATER_BLUR[s - 1])
    return out.clamp(0, 1)


# Compression: Tiny-ImageNet-C's pixelate (share of the side kept, box filter) then its JPEG quality.
PIXELATE = (0.9, 0.8, 0.7, 0.6, 0.5)
JPEG_QUALITY = (65, 58, 50, 40, 25)


def compression(x: torch.Tensor, severity: np.ndarray, rng: np.random.Generator) -> torch.Tensor:
    images = (x.permute(0, 2, 3, 1) * 255).round().to(torch.uint8).numpy()
    out = np.empty_like(images)
    size = images.shape[1]
    for i, (image, s) in enumerate(zip(images, severity, strict=True)):
        small = int(size * PIXELATE[s - 1])
        picture = Image.fromarray(image).resize((small, small), Image.BOX).resize((size, size), Image.BOX)
        buffer = io.BytesIO()
        picture.save(buffer, "JPEG", quality=JPEG_QUALITY[s - 1])
        out[i] = np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"))
    return torch.from_numpy(out).permute(0, 3, 1, 2).float() / 255


@dataclass(frozen=True)
class Condition:
    name: str
    transform: Transform
    source: str  # "Tiny-ImageNet-C" or "ours"


CONDITIONS: tuple[Condition, ...] = (
    Condition("clean", clean, "-"),
    Condition("night_infrared", night_infrared, "ours"),
    Condition("low_light", low_light, "ours"),
    Condition("fog", fog, "Tiny-ImageNet-C"),
    Condition("snow", snow, "Tiny-ImageNet-C"),
    Condition("motion_blur", motion_blur, "Tiny-ImageNet-C"),
    Condition("defocus", defocus, "Tiny-ImageNet-C"),
    Condition("underwater", underwater, "ours"),
    Condition("compression", compression, "Tiny-ImageNet-C"),
)
CONDITION_NAMES = tuple(c.name for c in CONDITIONS)


def condition(name: str) -> Condition:
    for c in CONDITIONS:
        if c.name == name:
            return c
    raise ValueError(f"unknown condition {name!r}; known: {', '.join(CONDITION_NAMES)}")


def apply_condition(name: str, images: np.ndarray, severity: np.ndarray, seed: int | list[int]) -> np.ndarray:
    """uint8 [N, H, W, 3] images under condition `name` at `severity` (one per image, 1..5), as uint8.
    Deterministic in (name, images, severity, seed)."""
    severity = np.asarray(severity, dtype=np.int64)
    if images.ndim != 4 or images.shape[-1] != 3 or images.dtype != np.uint8:
        raise ValueError(f"expected uint8 images [N, H, W, 3], got {images.dtype} {images.shape}")
    if severity.shape != (len(images),) or not np.isin(severity, SEVERITIES).all():
        raise ValueError(f"expected one severity in 1..5 per image, got {severity.shape} for {len(images)} images")
    rng = np.random.default_rng(seed)
    x = torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2).float() / 255
    with torch.no_grad():
        y = condition(name).transform(x, severity, rng)
    return (y.clamp(0, 1) * 255).round().to(torch.uint8).permute(0, 2, 3, 1).contiguous().numpy()


def psnr(reference: np.ndarray, distorted: np.ndarray) -> float:
    """Mean PSNR in dB over images (uint8 [N, H, W, 3])."""
    error = ((reference.astype(np.float64) - distorted.astype(np.float64)) ** 2).mean(axis=(1, 2, 3))
    return float(np.mean(10 * np.log10(255.0**2 / np.maximum(error, 1e-10))))


# ------------------------------------------------------------------------------------------- phrases
PHRASES_FILE = Path(__file__).with_name("condition_phrases.json")


def condition_phrases(names: tuple[str, ...] = CONDITION_NAMES) -> dict[str, list[str]]:
    """The phrases that name each condition (condition_phrases.json, written before any training on the
    conditions): what a run over conditions describes its tasks with and what a bundle may embed.

    >>> condition_phrases(("fog",))["fog"][:2]
    ['in fog', 'foggy']
    """
    table = json.loads(PHRASES_FILE.read_text())
    unknown = [n for n in names if n not in CONDITION_NAMES]
    if unknown:
        raise ValueError(f"unknown conditions {unknown}; choose from {list(CONDITION_NAMES)}")
    return {n: list(table[n]) for n in names}
