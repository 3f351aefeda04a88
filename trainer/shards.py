"""Stage-2 shards: Q groups of classes built the way tasks are built (close in the hierarchy).

k-medoids on the hierarchy's tree distance, so each basis specialises on a neighbourhood of classes
that tasks will also draw from (the pilot's first lever: shards aligned with tasks).
"""

from __future__ import annotations

import numpy as np


def hierarchy_shards(distances: np.ndarray, num_shards: int, seed: int = 0, iterations: int = 20,
                     max_share: float = 2.0) -> np.ndarray:
    """Shard index per class [C]; no shard larger than `max_share` x the mean size (so no basis is a
    generalist by accident) and every shard non-empty. Deterministic under `seed`."""
    n = len(distances)
    if not 1 <= num_shards <= n:
        raise ValueError(f"need 1 <= num_shards <= {n} classes, got {num_shards}")
    if num_shards == 1:  # one basis for all classes (the generic control of a stage-2 recipe)
        return np.zeros(n, dtype=np.int64)
    rng = np.random.default_rng(seed)
    # Ties in tree distance are common: a tiny random jitter makes assignments well defined.
    d = distances.astype(np.float64) + rng.random(distances.shape) * 1e-3
    medoids = _farthest_first(d, num_shards, rng)
    capacity = max(1, int(np.ceil(max_share * n / num_shards)))
    assignment = _assign_with_capacity(d, medoids, capacity)
    for _ in range(iterations):
        new = np.array([np.flatnonzero(assignment == s)[np.argmin(d[np.ix_(assignment == s, assignment == s)]
                                                                   .sum(1))] for s in range(num_shards)])
        new_assignment = _assign_with_capacity(d, new, capacity)
        if np.array_equal(new_assignment, assignment):
            break
        medoids, assignment = new, new_assignment
    return assignment


def _assign_with_capacity(d: np.ndarray, medoids: np.ndarray, capacity: int) -> np.ndarray:
    """Nearest medoid with room left; classes with the clearest preference choose first."""
    to_medoid = d[:, medoids]
    ranked = np.sort(to_medoid, axis=1)
    order = np.argsort(ranked[:, 0] - ranked[:, 1])  # most negative margin = clearest preference
    assignment = np.full(len(d), -1)
    assignment[medoids] = np.arange(len(medoids))  # a medoid always belongs to its own shard
    size = np.ones(len(medoids), int)
    for c in order:
        if assignment[c] >= 0:
            continue
        for s in np.argsort(to_medoid[c]):
            if size[s] < capacity:
                assignment[c], size[s] = s, size[s] + 1
                break
    return assignment


def _farthest_first(d: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    chosen = [int(rng.integers(len(d)))]
    for _ in range(k - 1):
        chosen.append(int(np.argmax(d[:, chosen].min(1))))
    return np.array(chosen)


def expand_shards(distances: np.ndarray, shard_of: np.ndarray, size: int) -> np.ndarray:
    """Overlapping shards [Q, C] (bool): each shard grown to the `size` classes with the smallest mean tree
    distance to its own classes (which it keeps). A 20-way neighbourhood task is drawn from the 40 classes
    nearest its anchor, so shards of ~2-3x the task size can hold a whole task, where a partition into
    shards of ~20 leaves its majority shard with about half of it (0.52 measured on Tiny ImageNet)."""
    num_shards = int(shard_of.max()) + 1
    if not 1 <= size <= len(shard_of):
        raise ValueError(f"shard size must be between 1 and {len(shard_of)}, got {size}")
    members = np.zeros((num_shards, len(shard_of)), bool)
    for q in range(num_shards):
        core = np.flatnonzero(shard_of == q)
        closeness = distances[:, core].mean(1)
        closeness[core] = -1  # the shard's own classes first
        members[q, np.argsort(closeness, kind="stable")[:max(size, len(core))]] = True
    return members
