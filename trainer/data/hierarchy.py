"""A class hierarchy: the form in which the trainer and the exporter use a vocabulary.

Built only by `Vocabulary.hierarchy()` (trainer/data/vocabulary.py; Tiny ImageNet's WordNet files are
converted into a vocabulary first, trainer/data/wordnet.py). Per class: its names ("name, alias, ..."), its
path root -> leaf, which decides the tree distance (the number of edges between two classes through their
deepest common node: nearby-class tasks), its ancestors (group keys) and its description; the groups'
names (`concept_names`) make the bundle's concepts, and the super-categories the trainer's coarse groups.

>>> h = ClassHierarchy(["a", "b", "c"], ["a", "b", "c"], [("r", "x", "a"), ("r", "x", "b"), ("r", "c")])
>>> h.nearest(h.index("a"), 1).tolist()
[1]
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class ClassHierarchy:
    wnids: list[str]
    names: list[str]
    paths: list[tuple[str, ...]]
    supercategories: dict[str, list[str]] = field(default_factory=dict)  # name -> wnids
    ancestors: list[tuple[str, ...]] = field(default_factory=list)  # per class: all ancestor ids ([] if unknown)
    concept_names: dict[str, list[str]] = field(default_factory=dict)  # ancestor id -> its names, first = primary
    descriptions: list[str] = field(default_factory=list)  # per class: one line ("" if none; vocabulary.toml's)

    def __post_init__(self):
        self._index = {w: i for i, w in enumerate(self.wnids)}
        self.distances = _tree_distances(self.paths)
        self.ancestors = self.ancestors or [() for _ in self.wnids]
        self.descriptions = self.descriptions or ["" for _ in self.wnids]

    def concepts(self) -> list[dict]:
        """The inner nodes that hold at least two classes but not all of them, largest first, as
        `{"id", "names", "members"}` (members: sorted class indices): every named ancestor (a vocabulary's
        groups) when the ancestors and their names are known, else the nodes of the paths (named by the path).

        >>> ClassHierarchy(["a", "b", "c"], ["a", "b", "c"], [("r", "x", "a"), ("r", "x", "b"), ("r", "c")]).concepts()
        [{'id': 'x', 'names': ['x'], 'members': [0, 1]}]
        """
        named = bool(self.concept_names) and any(self.ancestors)
        groups: dict[str, list[int]] = {}
        for i in range(len(self)):
            keys = [a for a in self.ancestors[i] if a in self.concept_names] if named else self.paths[i][:-1]
            for key in dict.fromkeys(keys):
                groups.setdefault(key, []).append(i)
        order = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        return [{"id": key, "names": self.concept_names[key] if named else [key.replace("_", " ")], "members": members}
                for key, members in order if 2 <= len(members) < len(self)]

    @classmethod
    def flat(cls, wnids: list[str], names: list[str] | None = None) -> ClassHierarchy:
        """No hierarchy known: every class a child of one root (tasks are then random subsets)."""
        names = names or list(wnids)
        return cls(list(wnids), list(names), [("root", n) for n in names])

    def index(self, wnid: str) -> int:
        return self._index[wnid]

    def __len__(self) -> int:
        return len(self.wnids)

    def subset(self, wnids: list[str]) -> ClassHierarchy:
        """The hierarchy of these classes only, in this order (each must be one of ours)."""
        order = [self._index[w] for w in wnids]
        kept = set(wnids)
        groups = {g: [w for w in ws if w in kept] for g, ws in self.supercategories.items()}
        return ClassHierarchy(list(wnids), [self.names[i] for i in order], [self.paths[i] for i in order],
                              {g: ws for g, ws in groups.items() if ws}, [self.ancestors[i] for i in order],
                              self.concept_names, [self.descriptions[i] for i in order])

    def nearest(self, label: int, n: int, rng: np.random.Generator | None = None) -> np.ndarray:
        """The n classes nearest to `label` (itself excluded); ties broken at random if rng is given."""
        d = self.distances[label].astype(np.float64)
        tiebreak = rng.random(len(d)) if rng is not None else np.arange(len(d)) / len(d)
        order = np.lexsort((tiebreak, d))
        return order[order != label][:n]

    def supercategory_of(self) -> np.ndarray:
        """Index of each class's super-category in sorted(supercategories), -1 if none."""
        group_names = sorted(self.supercategories)
        out = np.full(len(self), -1, np.int64)
        for g, name in enumerate(group_names):
            for w in self.supercategories[name]:
                out[self._index[w]] = g
        return out


def _tree_distances(paths: list[tuple[str, ...]]) -> np.ndarray:
    n = len(paths)
    d = np.zeros((n, n), np.int32)
    for i in range(n):
        for j in range(i + 1, n):
            common = 0
            for a, b in zip(paths[i], paths[j], strict=False):
                if a != b:
                    break
                common += 1
            d[i, j] = d[j, i] = len(paths[i]) + len(paths[j]) - 2 * common
    return d
