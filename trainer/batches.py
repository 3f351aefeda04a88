"""Batch iteration over the decoded cache: plain shuffled batches, and task-grouped batches for stage 3.

A task-grouped batch holds G tasks with batch_size / G images each. For each group an anchor image is
taken from the epoch's permutation, a task is sampled around its label (so every image is seen in a
task containing its label, resampled every epoch) and the group is filled with images of the task's
classes, drawn from per-class queues. Over field conditions (`condition_splits`, one split per condition
with the same labels), each group also draws its condition uniformly and takes its images from it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from .data.cache import DeviceSplit, Split
from .data.tasks import TaskSampler


def plain_batches(split: Split | DeviceSplit, batch_size: int, rng: np.random.Generator, num_batches: int | None = None,
                  classes: np.ndarray | None = None) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Shuffled (uint8 images [B, H, W, 3], labels [B]) on the split's device; restricted to `classes` if given."""
    pool = np.arange(len(split)) if classes is None else np.flatnonzero(np.isin(split.labels, classes))
    num_batches = num_batches if num_batches is not None else len(pool) // batch_size
    order = np.empty(0, np.int64)
    for _ in range(num_batches):
        if len(order) < batch_size:
            order = np.concatenate([order, rng.permutation(pool)])
        index, order = np.sort(order[:batch_size]), order[batch_size:]
        yield split.take(index)


@dataclass
class TaskBatch:
    images: torch.Tensor   # uint8 [G, B, H, W, 3]
    labels: torch.Tensor   # int64 [G, B]
    tasks: list[np.ndarray]
    conditions: list[int] | None = None   # each task's condition (an index into condition_splits)


class ClassQueues:
    """Per-class shuffled queues of image indices, refilled when empty."""

    def __init__(self, labels: np.ndarray, rng: np.random.Generator):
        self.rng = rng
        self.members = [np.flatnonzero(labels == c) for c in range(int(labels.max()) + 1)]
        self.queues = [np.empty(0, np.int64) for _ in self.members]

    def take(self, cls: int) -> int:
        if len(self.queues[cls]) == 0:
            self.queues[cls] = self.rng.permutation(self.members[cls])
        head, self.queues[cls] = self.queues[cls][0], self.queues[cls][1:]
        return int(head)


def task_batches(split: Split | DeviceSplit, sampler: TaskSampler, batch_size: int, groups: int,
                 rng: np.random.Generator, num_batches: int | None = None,
                 condition_splits: list | None = None) -> Iterator[TaskBatch]:
    per_group = batch_size // groups
    queues = ClassQueues(split.labels, rng)
    anchors = rng.permutation(len(split))
    num_batches = num_batches if num_batches is not None else len(split) // batch_size
    for step in range(num_batches):
        tasks, index = [], []
        for g in range(groups):
            anchor = int(anchors[(step * groups + g) % len(anchors)])
            task = sampler.sample(int(split.labels[anchor]), rng)
            members = [anchor] + [queues.take(int(c)) for c in rng.choice(task, per_group - 1)]
            tasks.append(task)
            index.append(members)
        if condition_splits is None:
            images, labels = split.take(np.asarray(index).reshape(-1))
            conditions = None
        else:
            conditions = [int(c) for c in rng.integers(len(condition_splits), size=groups)]
            parts = [condition_splits[c].take(np.asarray(rows)) for c, rows in zip(conditions, index, strict=True)]
            images, labels = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
        yield TaskBatch(images.view(groups, per_group, *images.shape[1:]), labels.view(groups, per_group), tasks,
                        conditions)
