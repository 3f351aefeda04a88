"""Batch augmentation and normalisation in torch, on uint8 NHWC batches from the decoded cache.

Training: random crop with zero padding (`pad` pixels each side) and random horizontal flip, or a
random-resized crop (the standard ImageNet augmentation) and flip.
Both: the runtime's normalisation (`sdk.media.preprocessing.Preprocessing`), so train and device agree.
"""

from __future__ import annotations

import math

import torch

from sdk.media.preprocessing import Preprocessing

from ..device import host_to


def to_normalized_tensor(images_uint8: torch.Tensor, spec: Preprocessing) -> torch.Tensor:
    """uint8 [N, H, W, 3] -> float32 [N, 3, H, W], normalised exactly like `Preprocessing.normalize`."""
    x = images_uint8.permute(0, 3, 1, 2).to(torch.float32) * (1 / 255)
    mean = torch.tensor(spec.mean, dtype=torch.float32, device=x.device).view(1, 3, 1, 1)
    std = torch.tensor(spec.std, dtype=torch.float32, device=x.device).view(1, 3, 1, 1)
    return ((x - mean) / std).contiguous()


def random_crop_flip(x: torch.Tensor, pad: int, generator: torch.Generator) -> torch.Tensor:
    """Per-image random crop of a zero-padded batch [N, C, H, W] and a random horizontal flip.
    The draws come from `generator` (a CPU generator) whatever x's device, so a CUDA batch is cropped
    and flipped exactly like the same batch on the CPU."""
    n, _, h, w = x.shape
    padded = torch.nn.functional.pad(x, (pad, pad, pad, pad))
    dy = host_to(torch.randint(0, 2 * pad + 1, (n,), generator=generator), x.device)
    dx = host_to(torch.randint(0, 2 * pad + 1, (n,), generator=generator), x.device)
    flip = host_to(torch.rand(n, generator=generator) < 0.5, x.device)
    # Gather rows and columns with index tensors: one op for the whole batch, no Python loop.
    rows = (dy[:, None] + torch.arange(h, device=x.device)[None]).view(n, 1, h, 1).expand(n, x.shape[1], h, w + 2 * pad)
    out = padded.gather(2, rows)
    cols = dx[:, None] + torch.arange(w, device=x.device)[None]
    cols = torch.where(flip[:, None], cols.flip(1), cols).view(n, 1, 1, w).expand(n, x.shape[1], h, w)
    return out.gather(3, cols)


def random_resized_crop_flip(x: torch.Tensor, min_scale: float, generator: torch.Generator) -> torch.Tensor:
    """Per-image random-resized crop of a batch [N, C, H, W], resized back to H x W (bilinear), and a random
    horizontal flip: torchvision's RandomResizedCrop with scale (min_scale, 1) and ratio (3/4, 4/3), except
    that a box wider or taller than the image is clipped to it where torchvision redraws (up to ten
    times) and then falls back to a centre crop. The draws come from `generator` (a CPU generator)
    whatever x's device; the crop is one affine_grid + grid_sample for the whole batch."""
    n = x.shape[0]
    scale = torch.empty(n).uniform_(min_scale, 1.0, generator=generator)
    log_ratio = torch.empty(n).uniform_(math.log(3 / 4), math.log(4 / 3), generator=generator)
    ratio = log_ratio.exp()
    width = (scale * ratio).sqrt().clamp(max=1.0)    # of the image's width, in (0, 1]
    height = (scale / ratio).sqrt().clamp(max=1.0)
    # Box centres in affine_grid's [-1, 1] coordinates, so that the box stays inside the image.
    cx = (torch.rand(n, generator=generator) * 2 - 1) * (1 - width)
    cy = (torch.rand(n, generator=generator) * 2 - 1) * (1 - height)
    flip = torch.where(torch.rand(n, generator=generator) < 0.5, -1.0, 1.0)
    theta = torch.zeros(n, 2, 3)
    theta[:, 0, 0], theta[:, 0, 2] = width * flip, cx
    theta[:, 1, 1], theta[:, 1, 2] = height, cy
    grid = torch.nn.functional.affine_grid(host_to(theta, x.device), list(x.shape), align_corners=False)
    return torch.nn.functional.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)
