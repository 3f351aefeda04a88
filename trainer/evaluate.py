"""Personalized top-1 accuracy over fixed task sets (the paper's protocol and a super-category one).

Each task of a seed's fixed set (one task anchored at each class) is evaluated on the val images of
its classes, so every val image is evaluated in tasks that contain its label. Accuracy is the mean
over (task, image) pairs; mean and spread are over the seeds of task sampling.

Networks that do not depend on the task (standard, classifier selection, uniform average, a stage-2
basis) are run once over val and masked per task; TAPER builds one network per task.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from sdk.media.preprocessing import Preprocessing

from .data.cache import DecodedDataset
from .data.transforms import to_normalized_tensor
from .models import ResNet18, ResNetConfig, functional_forward


class Evaluator:
    def __init__(self, data: DecodedDataset, model_config: ResNetConfig, preprocessing: Preprocessing,
                 images_per_class: int = 0, batch_size: int = 500, device: torch.device | str = "cpu"):
        """Networks run on `device` (float32); logits come back on the CPU, where tasks are scored."""
        self.device = torch.device(device)
        self.template = ResNet18(model_config).eval().to(self.device)
        labels = data.val.labels
        keep = np.arange(len(labels))
        if images_per_class:
            keep = np.concatenate([np.flatnonzero(labels == c)[:images_per_class] for c in range(data.num_classes)])
        self.rows = keep   # the val rows scored (all, or the first images_per_class of each class)
        self.labels = torch.from_numpy(labels[keep])
        self.x = to_normalized_tensor(torch.from_numpy(np.ascontiguousarray(data.val.images[keep])),
                                      preprocessing).to(self.device)
        self.batch_size = batch_size
        self.num_classes = data.num_classes

    @torch.no_grad()
    def logits(self, state: dict[str, torch.Tensor], index: torch.Tensor | None = None) -> torch.Tensor:
        x = self.x if index is None else self.x[index.to(self.device)]
        # channels-last, as training runs (trainer/stages.py): oneDNN's convolutions are faster in NHWC. A 20-image
        # per-task forward of the tiny network took 37.2 -> 32.0 ms on one thread, and the tiny run's accuracies
        # stayed the same (experiments.md, "The suite's time: one JVM for the four golden modes, ..."). Here, not
        # once on self.x: the lab swaps other images into `x`, and reads it as a C-ordered array.
        x = x.contiguous(memory_format=torch.channels_last)
        state = {name: t.to(self.device) for name, t in state.items()}
        return torch.cat([functional_forward(self.template, state, x[i:i + self.batch_size])
                          for i in range(0, len(x), self.batch_size)]).float().cpu()

    def task_index(self, task: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.flatnonzero(np.isin(self.labels.numpy(), task)))

    def selected_hits(self, logits: torch.Tensor, labels: torch.Tensor, task: np.ndarray) -> torch.Tensor:
        """[N] bool: right with classifier selection (the argmax over the task's classes only)."""
        mask = torch.full((self.num_classes,), float("-inf"))
        mask[torch.as_tensor(task)] = 0
        return (logits + mask).argmax(1) == labels

    def correct(self, logits: torch.Tensor, labels: torch.Tensor, task: np.ndarray) -> tuple[int, int]:
        """(correct with classifier selection, correct over all classes)."""
        return int(self.selected_hits(logits, labels, task).sum()), int((logits.argmax(1) == labels).sum())

    def static(self, logits: torch.Tensor, tasks: list[np.ndarray]) -> tuple[float, float]:
        """(accuracy with selection, without) of one task-independent network over all tasks, from its
        logits on the whole val set (`self.logits(state)`, computed once per network, not per task set)."""
        return self.accumulate(tasks, lambda i, task, idx: logits[idx])

    def per_task(self, state_for: Callable[[int, np.ndarray], dict], tasks: list[np.ndarray]) -> tuple[float, float]:
        """(accuracy with selection, without) building one network per task with `state_for(i, task)`."""
        return self.accumulate(tasks, lambda i, task, idx: self.logits(state_for(i, task), idx))

    def accumulate(self, tasks: list[np.ndarray], logits_for: Callable) -> tuple[float, float]:
        """(accuracy with selection, without) over all tasks, with `logits_for(i, task, idx)` the logits of
        the val images `idx` of task i."""
        selected = plain = total = 0
        for i, task in enumerate(tasks):
            idx = self.task_index(task)
            s, p = self.correct(logits_for(i, task, idx), self.labels[idx], task)
            selected, plain, total = selected + s, plain + p, total + len(idx)
        return 100.0 * selected / total, 100.0 * plain / total


def pairwise_similarity_correlation(embeddings: torch.Tensor, alphas: torch.Tensor) -> float | None:
    """Pearson r between off-diagonal cosine similarities of task embeddings and of mixers (supp. B.2);
    None when the mixer gives (numerically) the same alpha for every task: no correlation is defined."""
    def offdiag_cos(v: torch.Tensor) -> np.ndarray:
        v = torch.nn.functional.normalize(v.reshape(len(v), -1), dim=1)
        sim = (v @ v.T).cpu().numpy()
        return sim[~np.eye(len(sim), dtype=bool)]
    a, b = offdiag_cos(embeddings), offdiag_cos(alphas)
    if a.std() < 1e-6 or b.std() < 1e-6:
        return None
    return float(np.corrcoef(a, b)[0, 1])
