"""Final stage outputs as safetensors files (no pickle), readable by `export/` without the trainer's state."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from sdk.format.tensorfile import load_tensors, save_tensors


def save_state(path: Path, state: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_tensors(path, {k: v.detach().cpu().contiguous().numpy() for k, v in state.items()}, metadata)


def load_state(path: Path) -> dict[str, torch.Tensor]:
    return {k: torch.from_numpy(np.array(v)) for k, v in load_tensors(path).items()}
