"""Batch augmentation and normalisation in torch, on uint8 NHWC batches from the decoded cache.

Training: random crop with zero padding (`pad` pixels each side) and random horizontal flip.
Both: the runtime's normalisation (`sdk.preprocessing.Preprocessing`), so train and device agree.
"""

from __future__ import annotations

import torch

from sdk.preprocessing import Preprocessing

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
