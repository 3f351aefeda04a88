"""TAPS gates (Wallingford et al., 2022, ../shared/seeds: Task Adaptive Parameter Sharing): `LayerGates` over
stage 3's basis bank, `NetworkGates` on one stage-2 basis (a network trained alone). For each basis q and
layer l a learned score s_ql; basis q's layer is W_0 + I(s_ql >= threshold) D_ql, where
W_0 is the shared start of every basis (the stage-1 network) and D_ql = W_ql - W_0, so a closed gate puts
the layer back to W_0. The indicator's gradient is taken straight through (d/ds of W_0 + s D, = D), and a
weighted L1 penalty on the scores, ramped in over a warm-up, pushes layers back to W_0.

A layer is the unit a bundle stores (`sdk.architecture.Layer`): a conv with its batch norm, or the
classifier with its bias; its running statistics follow the gate too (hard, no gradient). A layer whose
gates are closed for every basis is identical in all of them and is exported without deltas (`shared`,
`export.compress`): that is what saves bytes and fusion time. A layer closed for some bases only is
still stored for all of them (the format stores per layer, not per basis and layer).

Mind the start: a score's gradient <dL/dW, D> is zero while its delta is zero. In stage 2 every delta
starts at zero (the basis is the stage-1 network), as in the TAPS code, so the deltas grow first and the
penalty ramps in over a warm-up; in stage 3 the deltas are what stage 2 learned and the scores get a
gradient at once. Scores start at 1, above the threshold 0.1, as in the TAPS code. Figures (the scores'
gradient, what closes at which lambda): docs/results/experiments.md, "TAPS-gated training".

>>> gates = LayerGates(bank, stage1_state, penalty=0.5)          # doctest: +SKIP
>>> weights = bank.mix(alpha, gates=gates)                      # doctest: +SKIP
>>> loss = task_loss + gates.penalty(progress=0.3)              # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from sdk.architecture import NUM_BLOCKS, mixed_layers

SCORE_INIT = 1.0        # the TAPS code's initial score
THRESHOLD = 0.1         # the TAPS paper's tau, fixed for all its data sets


class _StraightThrough(torch.autograd.Function):
    """I(s >= threshold) forward, the identity backward."""

    @staticmethod
    def forward(ctx, scores: torch.Tensor, threshold: float) -> torch.Tensor:
        return (scores >= threshold).to(scores.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad, None


def layer_weights(shapes: dict, layers) -> torch.Tensor:
    """Each layer's share of the parameters times the number of layers (mean 1): a layer costs what it stores."""
    sizes = np.array([sum(int(np.prod(shapes[n])) for n in (layer.weight, *layer.channels)) for layer in layers],
                     dtype=np.float64)
    return torch.tensor(sizes / sizes.mean(), dtype=torch.float32)


class _Gates(nn.Module):
    """Scores [*, L] (L = the network's layers, `sdk.architecture.mixed_layers`) with what both kinds of
    gates share: the straight-through gate, the size-weighted L1 penalty ramped in over `warmup` (a share
    of training), and a step count that resumes with the checkpoint."""

    def __init__(self, shapes: dict, leading: tuple[int, ...], penalty: float, warmup: float, threshold: float):
        super().__init__()
        self.layers = mixed_layers(shapes)
        self.lam, self.warmup, self.threshold = float(penalty), float(warmup), float(threshold)
        self.scores = nn.Parameter(torch.full((*leading, len(self.layers)), SCORE_INIT))
        self.register_buffer("weights", layer_weights(shapes, self.layers))
        self.register_buffer("step", torch.zeros((), dtype=torch.long))

    def open(self) -> torch.Tensor:
        """Gates like the scores, 1 open / 0 closed, with the straight-through gradient to the scores."""
        return _StraightThrough.apply(self.scores, self.threshold)

    def is_open(self) -> torch.Tensor:
        return self.scores.detach() >= self.threshold

    def open_fraction(self) -> float:
        return float(self.is_open().float().mean())

    def penalty(self, progress: float) -> torch.Tensor:
        """lambda (ramped from 0 over the first `warmup` of training) * mean_l w_l |s_l|, summed over bases;
        progress: the share of training done."""
        ramp = min(1.0, progress / self.warmup) if self.warmup > 0 else 1.0
        return self.lam * ramp * (self.scores.abs() * self.weights).mean(-1).sum()

    def next_penalty(self, total_steps: int) -> torch.Tensor:
        """The penalty for this training step (of `total_steps`), counting the step."""
        penalty = self.penalty(float(self.step) / total_steps)
        self.step += 1
        return penalty

    def log_fields(self, penalty: torch.Tensor) -> dict:
        """What a training step's log record says about the gates."""
        return {"gate_penalty": round(penalty.item(), 5), "gates_open": round(self.open_fraction(), 4)}

    def summary(self) -> dict:
        """Open gates per layer (and basis), the scores, and the layers closed in every basis (gates.json)."""
        is_open = self.is_open()
        closed = ~is_open.reshape(-1, len(self.layers)).any(0)
        return {"threshold": self.threshold, "penalty": self.lam, "warmup": self.warmup,
                "layers": [layer.name for layer in self.layers], "open": is_open.int().tolist(),
                "scores": self.scores.detach().numpy().round(4).tolist(),
                "layers_closed_for_every_basis": [layer.name for layer, c in zip(self.layers, closed.tolist(),
                                                                                 strict=True) if c],
                "open_fraction": self.open_fraction()}


class LayerGates(_Gates):
    """Gates for a `BasisBank` of Q bases: scores [Q, L], and W_0 laid out like the bank's rows. `penalty` is
    lambda: the penalty is lambda * mean_l(w_l |s_ql|) summed over bases, w_l the layer's share of the
    parameters times L (a layer costs what it stores)."""

    def __init__(self, bank, base_state: dict[str, torch.Tensor], penalty: float, warmup: float = 0.1,
                 threshold: float = THRESHOLD):
        super().__init__(bank.shapes, (bank.num_bases,), penalty, warmup, threshold)
        layer_of = {name: i for i, layer in enumerate(self.layers) for name in (layer.weight, *layer.channels)}
        for b in range(NUM_BLOCKS):
            for kind, names in (("params", bank.param_names[b]), ("stats", bank.stat_names[b])):
                flat = [base_state[n].reshape(-1).float() for n in names]
                index = [torch.full((int(np.prod(bank.shapes[n])),), layer_of[n]) for n in names]
                self.register_buffer(f"base_{kind}{b}", torch.cat(flat) if flat else torch.zeros(0))
                self.register_buffer(f"layer_{kind}{b}",
                                     torch.cat(index) if index else torch.zeros(0, dtype=torch.long))

    def gated(self, block: int, kind: str, rows: torch.Tensor) -> torch.Tensor:
        """A block's bank rows [Q, n] (`params` or `stats`) as the gates make them: W_0 + gate * (rows - W_0)."""
        base, layer = getattr(self, f"base_{kind}{block}"), getattr(self, f"layer_{kind}{block}")
        gate = self.open() if kind == "params" else self.is_open().to(rows.dtype)
        return base + gate[:, layer] * (rows - base)

    @torch.no_grad()
    def bake(self, bank) -> None:
        """Write the gated rows into `bank` (closed layers become W_0 exactly): the bank is then a plain one,
        saved, evaluated and exported as any other."""
        is_open = self.is_open()
        for b in range(NUM_BLOCKS):
            for kind, rows in (("params", bank.params(b)), ("stats", bank.stats(b))):
                base, layer = getattr(self, f"base_{kind}{b}"), getattr(self, f"layer_{kind}{b}")
                rows.copy_(torch.where(is_open[:, layer], rows, base))


class _GatedTensor(nn.Module):
    """A parametrization (torch.nn.utils.parametrize): value -> W_0 + gate * (value - W_0)."""

    def __init__(self, gates: NetworkGates, index: int, base: torch.Tensor):
        super().__init__()
        self._gates = [gates]           # a list: the gates are not a submodule of every tensor they gate
        self.index = index
        self.register_buffer("base", base)   # NetworkGates.base_state owns the copy

    def forward(self, value: torch.Tensor) -> torch.Tensor:
        return self.base + self._gates[0].open()[self.index] * (value - self.base)


class NetworkGates(_Gates):
    """TAPS gates on one network (a stage-2 basis): scores [L], one per layer, gating the layer's weight and
    batch-norm affine parameters back to W_0 through parametrizations (`attach`); `bake` removes them and
    puts closed layers' running statistics back to W_0's too.

    >>> gates = NetworkGates(stage1_state, penalty=0.002); gates.attach(model)      # doctest: +SKIP
    """

    def __init__(self, base_state: dict[str, torch.Tensor], penalty: float, warmup: float = 0.1,
                 threshold: float = THRESHOLD):
        super().__init__({n: tuple(t.shape) for n, t in base_state.items()}, (), penalty, warmup, threshold)
        self.base_state = {n: t.detach().clone() for n, t in base_state.items()}

    def _learned(self, layer) -> list[str]:
        """The layer's learned tensors (running statistics are buffers: `bake` sets them)."""
        return [n for n in (layer.weight, *layer.channels) if not n.endswith(("running_mean", "running_var"))]

    def attach(self, model: nn.Module) -> None:
        from torch.nn.utils import parametrize

        for i, layer in enumerate(self.layers):
            for name in self._learned(layer):
                owner, _, attr = name.rpartition(".")
                parametrize.register_parametrization(model.get_submodule(owner), attr,
                                                     _GatedTensor(self, i, self.base_state[name]))

    @torch.no_grad()
    def bake(self, model: nn.Module) -> None:
        """Remove the parametrizations, keeping the gated values (closed layers: W_0 exactly), and put the
        running statistics of closed layers back to W_0's."""
        from torch.nn.utils import parametrize

        is_open = self.is_open().tolist()
        for i, layer in enumerate(self.layers):
            for name in self._learned(layer):
                owner, _, attr = name.rpartition(".")
                parametrize.remove_parametrizations(model.get_submodule(owner), attr, leave_parametrized=True)
                if not is_open[i]:   # exactly W_0 even where a delta went non-finite (0 * inf is NaN)
                    model.get_parameter(name).copy_(self.base_state[name])
            if not is_open[i]:
                for name in (layer.weight, *layer.channels):
                    if name.endswith(("running_mean", "running_var")):
                        model.get_buffer(name).copy_(self.base_state[name])
