"""A class hierarchy (WordNet) read from `wordnet_hierarchy.tsv` (+ optional `supercategories.json`
and `concept_names.tsv`).

TSV columns: wnid, name, hypernym path root->leaf (" > "-separated, first hypernyms), all ancestor
ids (comma-separated, optional). Tree distance between two classes is the number of edges between them
along their paths (through their deepest common ancestor). `concept_names.tsv` (id <TAB> "name, synonym,
...", the lines of Tiny ImageNet's words.txt for the ancestor ids) names the ancestors, so that
`concepts()` can offer every WordNet hypernym with all its synonyms ("clothing, ..., wear, wearable"),
not only the first-hypernym path's node names.

>>> h = ClassHierarchy.load("tiny-imagenet-200/wordnet_hierarchy.tsv")     # doctest: +SKIP
>>> h.nearest(h.index("n02124075"), 5)                                      # doctest: +SKIP
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import DataError

HIERARCHY_FILE, SUPERCATEGORIES_FILE = "wordnet_hierarchy.tsv", "supercategories.json"
CONCEPT_NAMES_FILE = "concept_names.tsv"


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
        `{"id", "names", "members"}` (members: sorted class indices): every named WordNet ancestor when the
        ancestors and their names are known, else the nodes of the first-hypernym paths (named by the path).

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
    def load(cls, tsv: str | Path, supercategories: str | Path | None = None) -> ClassHierarchy:
        """Read the TSV (and the super-category JSON if given or found beside it, and the concept names
        if found beside it)."""
        tsv = Path(tsv)
        if supercategories is None and (tsv.parent / SUPERCATEGORIES_FILE).is_file():
            supercategories = tsv.parent / SUPERCATEGORIES_FILE
        groups = _read_text(Path(supercategories)) if supercategories else None
        names_file = tsv.parent / CONCEPT_NAMES_FILE
        concept_names = _read_text(names_file) if names_file.is_file() else None
        return cls.from_text(_read_text(tsv), groups, where=str(tsv.parent), concept_names=concept_names)

    @classmethod
    def from_text(cls, tsv: str, supercategories: str | None = None, where: str = "<memory>",
                  concept_names: str | None = None) -> ClassHierarchy:
        """Parse the TSV text (and super-category JSON text, and concept-names TSV text); `where` names the
        source in errors."""
        wnids, names, paths, ancestors = _parse_tsv(tsv, f"{where}/{HIERARCHY_FILE}")
        groups = {}
        if supercategories is not None:
            groups = _parse_supercategories(supercategories, set(wnids), f"{where}/{SUPERCATEGORIES_FILE}")
        known = parse_concept_names(concept_names, {a for row in ancestors for a in row}) if concept_names else {}
        return cls(wnids, names, paths, groups, ancestors, known)

    @classmethod
    def flat(cls, wnids: list[str], names: list[str] | None = None) -> ClassHierarchy:
        """No hierarchy known: every class a child of one root (tasks are then random subsets)."""
        names = names or list(wnids)
        return cls(list(wnids), list(names), [("root", n) for n in names])

    def index(self, wnid: str) -> int:
        return self._index[wnid]

    def __len__(self) -> int:
        return len(self.wnids)

    def restrict_to(self, wnids: list[str], source: str = "the data") -> ClassHierarchy:
        """The hierarchy in the order of the data's classes; DataError if the two sets differ."""
        missing = [w for w in wnids if w not in self._index]
        extra = sorted(set(self.wnids) - set(wnids))
        if missing or extra:
            raise DataError(
                f"hierarchy and {source} disagree: classes not in the hierarchy {missing[:5]}, "
                f"classes in the hierarchy but not in the data {extra[:5]}"
            )
        return self.subset(wnids)

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


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"{path}: cannot read ({e})") from None


def parse_concept_names(text: str, wanted: set[str]) -> dict[str, list[str]]:
    """`id <TAB> name, synonym, ...` lines (words.txt's format) -> {id: [names]} for the wanted ids."""
    out = {}
    for line in text.splitlines():
        key, _, words = line.partition("\t")
        names = [w.strip() for w in words.split(",") if w.strip()]
        if key in wanted and names:
            out[key] = names
    return out


def _parse_tsv(text: str, where: str) -> tuple[list[str], list[str], list[tuple[str, ...]], list[tuple[str, ...]]]:
    wnids, names, paths, ancestors, seen = [], [], [], [], set()
    for lineno, line in enumerate(text.splitlines()[1:], start=2):  # line 1 is the header
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) < 3 or not cols[0] or not cols[2]:
            raise DataError(f"{where}:{lineno}: expected wnid<TAB>name<TAB>path, got {line[:80]!r}")
        if cols[0] in seen:
            raise DataError(f"{where}:{lineno}: class {cols[0]} listed twice")
        seen.add(cols[0])
        wnids.append(cols[0])
        names.append(cols[1])
        paths.append(tuple(p.strip() for p in cols[2].split(">")))
        ancestors.append(tuple(a.strip() for a in cols[3].split(",") if a.strip()) if len(cols) > 3 else ())
    if not wnids:
        raise DataError(f"{where}: no classes in hierarchy file")
    return wnids, names, paths, ancestors


def _parse_supercategories(text: str, known: set[str], where: str) -> dict[str, list[str]]:
    try:
        spec = json.loads(text)
        groups = {name: [m["wnid"] if isinstance(m, dict) else m for m in members]
                  for name, members in spec["supercategories"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise DataError(f"{where}: not a super-category file ({type(e).__name__}: {e})") from None
    unknown = sorted({w for ws in groups.values() for w in ws} - known)
    if unknown:
        raise DataError(f"{where}: super-categories name classes not in the hierarchy: {unknown[:5]}")
    return groups


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
