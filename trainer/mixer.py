"""The mixer predictor: task embedding -> block-wise mixer alpha [4, Q] (a softmax per block).

A 4-layer MLP with batch norm and ReLU between layers (the paper found 2-4 layers equally good).
The last layer starts at zero, so every task starts from the uniform average of the bases.
`blocks=1` gives the ablation with one mixer vector for the whole network.

>>> mixer = MixerPredictor(embed_dim=384, num_bases=10)
>>> mixer(torch.randn(8, 384)).shape
torch.Size([8, 4, 10])
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from sdk.fusion.architecture import BN_EPS
from sdk.fusion.mixer import tensor_shapes

from .models import NUM_BLOCKS

MIXER_LAYERS = 4   # linear layers of every mixer the trainer builds (the bundle's manifest records it)


class MixerPredictor(nn.Module):
    def __init__(self, embed_dim: int, num_bases: int, hidden: int = 256, layers: int = MIXER_LAYERS,
                 blocks: int = NUM_BLOCKS):
        super().__init__()
        if blocks not in (1, NUM_BLOCKS):
            raise ValueError(f"blocks must be 1 or {NUM_BLOCKS}")
        self.num_bases, self.blocks, self.layers = num_bases, blocks, layers
        dims = [embed_dim] + [hidden] * (layers - 1)
        body: list[nn.Module] = []
        for d_in, d_out in zip(dims[:-1], dims[1:], strict=True):
            body += [nn.Linear(d_in, d_out), nn.BatchNorm1d(d_out, eps=BN_EPS), nn.ReLU()]
        self.body = nn.Sequential(*body)
        self.head = nn.Linear(dims[-1], blocks * num_bases)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)
        # The tensor names and shapes are the runtime's (sdk.fusion.mixer.tensor_shapes): what the bundle stores.
        ours = {k: tuple(v.shape) for k, v in self.state_dict().items() if not k.endswith("num_batches_tracked")}
        if ours != tensor_shapes(embed_dim, hidden, layers, blocks, num_bases):
            raise AssertionError("MixerPredictor's tensors no longer match sdk.fusion.mixer.tensor_shapes")

    def logits(self, task_embedding: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(task_embedding)).view(-1, self.blocks, self.num_bases)

    def forward(self, task_embedding: torch.Tensor) -> torch.Tensor:
        """[G, embed_dim] -> alpha [G, 4, Q], each row on the simplex."""
        alpha = torch.softmax(self.logits(task_embedding), dim=-1)
        return alpha.expand(-1, NUM_BLOCKS, -1) if self.blocks == 1 else alpha


def smooth_toward_uniform(alpha, smoothing: float):
    """Routing weights (numpy or torch, bases on the last axis) moved `smoothing` of the way to uniform:
    the mixer's fit to a routing prior uses 0.05 so that no basis starts at zero weight.

    >>> smooth_toward_uniform(np.array([0.0, 1.0]), 0.5).tolist()
    [0.25, 0.75]
    """
    return (1 - smoothing) * alpha + smoothing / alpha.shape[-1]


def fit_to_router(mixer: MixerPredictor, embed: Callable[[list[np.ndarray]], torch.Tensor],
                  sample_task: Callable[[np.random.Generator], np.ndarray],
                  router: Callable[[np.ndarray], np.ndarray], steps: int = 300, batch: int = 64,
                  smoothing: float = 0.05, seed: int = 0) -> float:
    """Start stage 3 from a routing prior (issue 12): fit the mixer's outputs, every block, to
    `router(task)` (e.g. the task's class share per shard, smoothed toward uniform so no basis starts at
    zero weight) on sampled tasks, by KL divergence with Adam. Only the mixer moves; returns the last
    batch's KL. The deployed mixer stays a plain MLP, so bundles and runtimes need nothing new."""
    rng = np.random.default_rng(seed)
    optimizer = torch.optim.Adam(mixer.parameters(), lr=1e-3)
    mixer.train()
    kl = torch.zeros(())
    for _ in range(steps):
        tasks = [sample_task(rng) for _ in range(batch)]
        target = torch.from_numpy(np.stack([router(t) for t in tasks])).float()
        target = smooth_toward_uniform(target, smoothing)
        log_alpha = torch.log_softmax(mixer.logits(embed(tasks)), dim=-1)  # [G, blocks, Q]
        kl = (target[:, None] * (target[:, None].log() - log_alpha)).sum(-1).mean()
        optimizer.zero_grad(set_to_none=True)
        kl.backward()
        optimizer.step()
    return kl.item()
