"""How much a mixer could gain, and whether the bases are specialists (issue 12).

All figures use the bench protocol (`trainer.evaluate`): every task of a seed's fixed set, classifier
selection over the task's classes, accuracy over (task, val image) pairs.

- `best_single_basis`: per task, the best of the Q bases alone (an oracle pick: it looks at val).
- `specialist_margins`: per basis, its accuracy on the tasks whose majority shard is its own minus a
  reference network's (classifier selection) on the same tasks. A specialist has a positive margin.
- `shard_router_alpha`: the parameter-free router, alpha_q = share of the task's classes in shard q
  (one vector for every block). If it does not beat the uniform average, the bases are not specialists.

Shards are a membership matrix [Q, classes] (bool): a partition (`one_hot_members`) or overlapping
shards (`trainer.shards.expand_shards`); with overlap a class counts for every shard that holds it.

>>> shard_router_alpha(one_hot_members(np.array([0, 0, 1, 2]), 3), np.array([0, 1, 2])).tolist()
[0.6666666666666666, 0.3333333333333333, 0.0]
"""

from __future__ import annotations

import numpy as np
import torch

from .evaluate import Evaluator


def one_hot_members(shard_of: np.ndarray, num_bases: int) -> np.ndarray:
    """[Q, C] membership of a partition given the shard of each class."""
    return np.arange(num_bases)[:, None] == np.asarray(shard_of)[None, :]


def coverage(members: np.ndarray, task: np.ndarray) -> np.ndarray:
    """[Q]: how many of the task's classes each shard holds."""
    return members[:, task].sum(1)


def majority_shard(members: np.ndarray, task: np.ndarray) -> int:
    """The shard holding most of the task's classes (ties: the lowest index)."""
    return int(coverage(members, task).argmax())


def shard_router_alpha(members: np.ndarray, task: np.ndarray) -> np.ndarray:
    """[Q]: each shard's share of the task's classes (sums to 1; with overlap, of the memberships)."""
    c = coverage(members, task).astype(np.float64)
    return c / c.sum()


def majority_shard_alpha(members: np.ndarray, task: np.ndarray) -> np.ndarray:
    """[Q]: all weight on the task's majority shard (the sharpest router; its basis alone is the
    `shard_basis` row: on 20 width-0.125 bases of shards of 60, 58.83 against the share router's 58.69)."""
    alpha = np.zeros(len(members))
    alpha[majority_shard(members, task)] = 1.0
    return alpha


# Stage 3's starting points other than "uniform" (TrainConfig.stage3_mixer_init): the mixer is first
# fitted to one of these (trainer.mixer.fit_to_router).
ROUTING_PRIORS = {"router": shard_router_alpha, "majority": majority_shard_alpha}


def shards_per_task(members: np.ndarray, tasks: list[np.ndarray]) -> dict[str, float]:
    """How well shards align with tasks: mean number of shards a task touches, mean share of the task's
    classes that its best-covering shard holds."""
    counts = [coverage(members, t) for t in tasks]
    return {"shards_touched": round(float(np.mean([np.count_nonzero(c) for c in counts])), 2),
            "majority_share": round(float(np.mean([c.max() / len(t) for c, t in zip(counts, tasks, strict=True)])), 3)}


def best_single_basis(evaluator: Evaluator, basis_logits: list[torch.Tensor], tasks: list[np.ndarray]) -> float:
    """Accuracy (%) when every task gets the best basis for it, judged on the val images themselves."""
    correct = total = 0
    for task in tasks:
        idx = evaluator.task_index(task)
        labels = evaluator.labels[idx]
        correct += max(evaluator.correct(logits[idx], labels, task)[0] for logits in basis_logits)
        total += len(idx)
    return 100.0 * correct / total


def alternate_halves(labels: np.ndarray) -> np.ndarray:
    """[N] bool: the even-numbered images of each class (in order) form one half, the odd ones the other,
    so each half holds every class about equally."""
    labels = np.asarray(labels)
    even = np.zeros(len(labels), bool)
    for c in np.unique(labels):
        even[np.flatnonzero(labels == c)[::2]] = True
    return even


def crossval_correct(hits: np.ndarray, even: np.ndarray) -> int:
    """Correct answers when each half of the images is scored by the candidate with the most hits on the
    other half: hits [candidates, N] bool, even [N] bool (one half; the rest is the other). Ties go to
    the first candidate.

    >>> crossval_correct(np.array([[1, 1, 0, 0], [1, 0, 1, 0]], bool), np.array([1, 0, 1, 0], bool))
    1
    """
    correct = 0
    for pick_on in (even, ~even):
        best = int(hits[:, pick_on].sum(1).argmax())
        correct += int(hits[best, ~pick_on].sum())
    return correct


def best_single_basis_crossval(evaluator: Evaluator, basis_logits: list[torch.Tensor],
                               tasks: list[np.ndarray]) -> float:
    """`best_single_basis` without its selection bias: each task's basis is picked on one half of its val
    images (`alternate_halves`) and scored on the other, both ways. The plain oracle also picks the val
    set's noise: on few-shot candidates a point apart its pick was +0.95 over the stage-1 features where
    this estimate was -0.22 (docs/results/fewshot_neighbourhood.md)."""
    correct = total = 0
    for task in tasks:
        idx = evaluator.task_index(task)
        labels = evaluator.labels[idx]
        hits = torch.stack([evaluator.selected_hits(logits[idx], labels, task) for logits in basis_logits]).numpy()
        correct += crossval_correct(hits, alternate_halves(labels.numpy()))
        total += len(idx)
    return 100.0 * correct / total


def majority_shard_accuracy(evaluator: Evaluator, basis_logits: list[torch.Tensor], members: np.ndarray,
                            tasks: list[np.ndarray]) -> float:
    """Accuracy (%) when every task gets the basis of its majority shard (the paper's shard basis)."""
    return evaluator.accumulate(tasks, lambda i, task, idx: basis_logits[majority_shard(members, task)][idx])[0]


def specialist_margins(evaluator: Evaluator, basis_logits: list[torch.Tensor], reference_logits: torch.Tensor,
                       members: np.ndarray, tasks: list[np.ndarray]) -> list[float | None]:
    """Per basis: accuracy on its own shard's tasks minus the reference's on them (points; None when no
    task has that majority shard)."""
    owner = [majority_shard(members, t) for t in tasks]
    margins: list[float | None] = []
    for q, logits in enumerate(basis_logits):
        own = [t for t, o in zip(tasks, owner, strict=True) if o == q]
        if not own:
            margins.append(None)
            continue
        mine = ref = total = 0
        for task in own:
            idx = evaluator.task_index(task)
            labels = evaluator.labels[idx]
            mine += evaluator.correct(logits[idx], labels, task)[0]
            ref += evaluator.correct(reference_logits[idx], labels, task)[0]
            total += len(idx)
        margins.append(100.0 * (mine - ref) / total)
    return margins


def mean_margin(margins: list[float | None]) -> float:
    """Mean over the bases that own at least one task."""
    return float(np.mean([m for m in margins if m is not None]))
