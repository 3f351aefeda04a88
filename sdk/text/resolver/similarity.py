"""Rules 4 and 5, and padding: free text read by its meaning. The text is embedded; if the best class stands
out from the mean score by less than `min_contrast`, nothing matches. A concept at least as near the text as
the best class takes its classes (with the concepts within CONCEPT_MARGIN of it); otherwise the classes
within `margin` of the best are taken. A task short of `min_classes` is padded with the nearest classes.

>>> contrast(embeddings @ embed("tuesday"))                                   # doctest: +SKIP
0.07
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sdk.format.bundle import Concept

from .options import TaskOptions

# Rule 5, chosen on the 27 tuning phrasings (scripts/retrieval_phrasings.json; exploration on the bench
# bundle, 143 concepts): margins 0.02 and 0.03 gave the same precision/recall (0.82/0.73), 0.05 traded
# precision for recall (0.81/0.74); superset ratio 2 over 1: +0.009 precision, +0.019 recall.
CONCEPT_MARGIN = 0.03
SUPERSET_RATIO = 2


def contrast(scores: np.ndarray) -> float:
    """How far the best class's similarity stands out from the mean over all classes (the match rule)."""
    return float(scores.max() - scores.mean())


def concept_match(concepts: Sequence[Concept], concept_sizes: np.ndarray, concept_embeddings: np.ndarray,
                  embedding: np.ndarray, best_class: float, options: TaskOptions) -> tuple[list[int], str] | None:
    """Rule 5: the classes of the concepts nearest the text, if one is at least as near as any class."""
    eligible = concept_sizes <= options.max_classes
    if not eligible.any():
        return None
    scores = np.where(eligible, concept_embeddings @ embedding, -np.inf)
    order = np.argsort(-scores, kind="stable")
    first_concept = int(order[0])
    if scores[first_concept] < best_class:
        return None
    first = set(concepts[first_concept].members)
    chosen, names = set(first), [concepts[first_concept].names[0]]
    for j in order[1:]:
        if scores[j] < scores[first_concept] - CONCEPT_MARGIN:
            break
        members = set(concepts[j].members)
        if members > first and len(members) > SUPERSET_RATIO * len(first):
            continue
        if len(chosen | members) <= options.max_classes and not members <= chosen:
            chosen |= members
            names.append(concepts[j].names[0])
    return (sorted(chosen), f"concept {' + '.join(map(repr, names))} (similarity {scores[first_concept]:.2f} >= "
                            f"best class {best_class:.2f})")


def top(scores: np.ndarray, options: TaskOptions, include: int | None = None) -> list[int]:
    """The classes within `margin` of the best score, at most `max_classes` (with `include` kept in)."""
    order = np.argsort(-scores)
    keep = [int(i) for i in order[: options.max_classes] if scores[i] >= scores[order[0]] - options.margin]
    if include is not None and include not in keep:
        keep = [include] + keep[: options.max_classes - 1]
    return keep


def pad(embeddings: np.ndarray, chosen: list[int], options: TaskOptions, avoid: set[int] = frozenset()) -> list[int]:
    """Add nearest classes (by embedding) until the task has min_classes, none of `avoid` (those a description
    left out, rule 2b)."""
    if len(chosen) >= options.min_classes:
        return chosen
    centre = embeddings[chosen].mean(0)
    for i in np.argsort(-(embeddings @ centre)):
        if len(chosen) >= options.min_classes:
            break
        if int(i) not in chosen and int(i) not in avoid:
            chosen.append(int(i))
    return sorted(chosen)
