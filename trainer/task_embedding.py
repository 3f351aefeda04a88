"""Task descriptions as vectors: the mean of the task's class-name text embeddings, or bag-of-words.

Class-name embeddings come from the text encoder the bundle ships (prompt-ensembled primary names),
computed once per run and stored in the run directory. A run over field conditions also stores, per
condition, each class's embedding with the condition's phrases joined to its name (the TAPER paper's
DomainNet recipe), and a (condition, classes) task is the mean over its classes in its condition's table.
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


def embed_condition_classes(encoder, names: Sequence[str], phrases: dict[str, list[str]]) -> np.ndarray:
    """[conditions, classes, dim]: per condition (in `phrases`' order), each class name joined to each of
    the condition's phrases ("red fox at night"), embedded over the prompt ensemble, averaged over the
    phrases and normalised. `encoder` is an sdk.text.encoder.TextEncoder."""
    tables = []
    for condition_phrases in phrases.values():
        per_phrase = [encoder.embed_class_names([f"{name} {p}" for name in names]) for p in condition_phrases]
        mean = np.mean(per_phrase, axis=0)
        tables.append(mean / np.linalg.norm(mean, axis=1, keepdims=True).clip(min=1e-12))
    return np.stack(tables).astype(np.float32)


class TaskEmbedder:
    """Maps tasks to mixer inputs for a run's description kind ("text" or "bow"); with
    `condition_embeddings` [conditions, classes, dim], a task may name its condition."""

    def __init__(self, kind: str, class_embeddings: np.ndarray, condition_embeddings: np.ndarray | None = None):
        if kind not in ("text", "bow"):
            raise ValueError(f"description must be 'text' or 'bow', got {kind!r}")
        self.kind, self.class_embeddings = kind, class_embeddings
        self.condition_embeddings = condition_embeddings
        self.dim = class_embeddings.shape[1] if kind == "text" else class_embeddings.shape[0]

    def __call__(self, tasks: Sequence[np.ndarray], class_embeddings: np.ndarray | None = None,
                 conditions: Sequence[int] | None = None) -> torch.Tensor:
        """[len(tasks), dim]; `conditions` (an index per task into condition_embeddings) describes each
        task with its condition's phrases, None with the class names alone."""
        if self.kind == "bow":
            return bow_task_embeddings(len(self.class_embeddings), tasks)
        if conditions is not None:
            if self.condition_embeddings is None:
                raise ValueError("these tasks name conditions but the embedder has no condition embeddings")
            return torch.cat([text_task_embeddings(self.condition_embeddings[c], [task])
                              for task, c in zip(tasks, conditions, strict=True)])
        table = self.class_embeddings if class_embeddings is None else class_embeddings
        return text_task_embeddings(table, tasks)
