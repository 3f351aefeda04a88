"""Q basis networks stored block by block as contiguous [Q, P_b] matrices, and their mixing.

Mixing a task's weights is one matmul per mixer block: alpha[:, b] @ params[b] gives every weight of
block b for every task at once (the layout the on-device runtime fuses from, too). Batch-norm running
statistics are stored the same way and mixed with the same alpha.

>>> bank = BasisBank.from_state_dicts(config, [model.state_dict()] * 10)              # doctest: +SKIP
>>> weights = bank.mix(alpha)           # alpha [G, 4, Q] -> {name: [G, *shape]}       # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from sdk.fusion.architecture import is_running_stat

from .models import NUM_BLOCKS, ResNet18, ResNetConfig, names_by_block


class BasisBank(nn.Module):
    """Q ResNet-18 bases of one shape: learnable weights [Q, P_b] and running statistics [Q, R_b] per block."""

    def __init__(self, config: ResNetConfig, num_bases: int):
        super().__init__()
        self.config = config
        self.num_bases = num_bases
        template = ResNet18(config).state_dict()
        self.shapes = {name: tuple(t.shape) for name, t in template.items()}
        self.param_names: list[list[str]] = []
        self.stat_names: list[list[str]] = []
        for b, names in enumerate(names_by_block(template)):
            params = [n for n in names if not is_running_stat(n)]
            stats = [n for n in names if is_running_stat(n)]
            self.param_names.append(params)
            self.stat_names.append(stats)
            self.register_parameter(f"params{b}", nn.Parameter(torch.zeros(num_bases, self._size(params))))
            self.register_buffer(f"stats{b}", torch.zeros(num_bases, self._size(stats)))

    def _size(self, names: Sequence[str]) -> int:
        return sum(int(torch.Size(self.shapes[n]).numel()) for n in names)

    def params(self, block: int) -> torch.Tensor:
        return getattr(self, f"params{block}")

    def stats(self, block: int) -> torch.Tensor:
        return getattr(self, f"stats{block}")

    @classmethod
    def from_state_dicts(cls, config: ResNetConfig, state_dicts: Sequence[dict[str, torch.Tensor]]) -> BasisBank:
        bank = cls(config, len(state_dicts))
        with torch.no_grad():
            for q, state in enumerate(state_dicts):
                for b in range(NUM_BLOCKS):
                    bank.params(b)[q] = torch.cat([state[n].reshape(-1) for n in bank.param_names[b]])
                    bank.stats(b)[q] = torch.cat([state[n].reshape(-1) for n in bank.stat_names[b]])
        return bank

    def _unflatten(self, flat: torch.Tensor, names: Sequence[str]) -> dict[str, torch.Tensor]:
        """[G, P] -> {name: [G, *shape]} as views."""
        out, offset = {}, 0
        for name in names:
            size = int(torch.Size(self.shapes[name]).numel())
            out[name] = flat[:, offset:offset + size].reshape(flat.shape[0], *self.shapes[name])
            offset += size
        return out

    def mix(self, alpha: torch.Tensor, with_stats: bool = True) -> dict[str, torch.Tensor]:
        """alpha [G, 4, Q] (rows sum to 1) -> weights {name: [G, *shape]} for G tasks."""
        if alpha.dim() != 3 or alpha.shape[1:] != (NUM_BLOCKS, self.num_bases):
            raise ValueError(f"alpha must be [G, {NUM_BLOCKS}, {self.num_bases}], got {tuple(alpha.shape)}")
        alpha = alpha.to(self.params(0).device)   # the bank may live on a GPU; callers' alphas on the CPU
        weights = {}
        for b in range(NUM_BLOCKS):
            weights.update(self._unflatten(alpha[:, b] @ self.params(b), self.param_names[b]))
            if with_stats:
                weights.update(self._unflatten(alpha[:, b].detach() @ self.stats(b), self.stat_names[b]))
        return weights

    def state_dict_for(self, alpha: torch.Tensor) -> dict[str, torch.Tensor]:
        """A plain ResNet18 state dict for one task: alpha [4, Q]."""
        weights = {n: t[0] for n, t in self.mix(alpha[None]).items()}
        weights.update({n: torch.zeros((), dtype=torch.long) for n in self.shapes if n.endswith("num_batches_tracked")})
        return weights

    def basis_state_dict(self, q: int) -> dict[str, torch.Tensor]:
        """Basis q as a plain ResNet18 state dict."""
        one_hot = torch.zeros(NUM_BLOCKS, self.num_bases)
        one_hot[:, q] = 1
        return {n: t.detach().clone() for n, t in self.state_dict_for(one_hot).items()}

    @torch.no_grad()
    def update_running_stats(self, alpha: torch.Tensor, batch_stats: dict[str, torch.Tensor],
                             momentum: float = 0.1) -> None:
        """Move each basis's running statistics toward the tasks' batch statistics, in proportion to
        each task's weight on that basis (a basis no task uses keeps its statistics).

        alpha [G, 4, Q]; batch_stats {running-stat name: [G, C]} (batch mean / unbiased variance).
        """
        for b in range(NUM_BLOCKS):
            if not self.stat_names[b]:
                continue
            a = alpha[:, b].detach()                          # [G, Q]
            total = a.sum(0)                                  # [Q]
            batch = torch.cat([batch_stats[n].reshape(a.shape[0], -1) for n in self.stat_names[b]], 1)  # [G, R]
            target = (a.T @ batch) / total.clamp(min=1e-12)[:, None]  # [Q, R]
            rate = momentum * total.clamp(max=1.0)[:, None]
            self.stats(b).mul_(1 - rate).add_(rate * target)
