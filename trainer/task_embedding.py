"""Task descriptions as vectors: the mean of the task's class-name text embeddings, or bag-of-words.

Class-name embeddings come from the text encoder the bundle ships (prompt-ensembled primary names),
computed once per run and stored in the run directory.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch


def text_task_embeddings(class_embeddings: np.ndarray | torch.Tensor, tasks: Sequence[np.ndarray]) -> torch.Tensor:
    """[len(tasks), dim]: normalised mean of the class embeddings of each task."""
    table = torch.as_tensor(np.asarray(class_embeddings), dtype=torch.float32)
    out = torch.stack([table[torch.as_tensor(t)].mean(0) for t in tasks])
    return torch.nn.functional.normalize(out, dim=-1)


def bow_task_embeddings(num_classes: int, tasks: Sequence[np.ndarray]) -> torch.Tensor:
    """[len(tasks), num_classes]: multi-hot over the label space, scaled to unit length."""
    out = torch.zeros(len(tasks), num_classes)
    for i, t in enumerate(tasks):
        out[i, torch.as_tensor(t)] = 1.0 / np.sqrt(len(t))
    return out


class TaskEmbedder:
    """Maps tasks to mixer inputs for a run's description kind ("text" or "bow")."""

    def __init__(self, kind: str, class_embeddings: np.ndarray):
        if kind not in ("text", "bow"):
            raise ValueError(f"description must be 'text' or 'bow', got {kind!r}")
        self.kind, self.class_embeddings = kind, class_embeddings
        self.dim = class_embeddings.shape[1] if kind == "text" else class_embeddings.shape[0]

    def __call__(self, tasks: Sequence[np.ndarray], class_embeddings: np.ndarray | None = None) -> torch.Tensor:
        if self.kind == "bow":
            return bow_task_embeddings(len(self.class_embeddings), tasks)
        table = self.class_embeddings if class_embeddings is None else class_embeddings
        return text_task_embeddings(table, tasks)
