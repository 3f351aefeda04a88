"""Classes held out of training, for measuring what a bundle does with classes it has never seen.

The held-out classes are spread over the hierarchy: the classes are put in tree order (sorted by their
hypernym path, so neighbours in the list are neighbours in WordNet) and every (n_classes / n)-th is
taken, starting half a step in. Deterministic: the same data set always holds out the same classes.

>>> held = held_out_classes(data.hierarchy, 20)            # doctest: +SKIP
>>> train_data = without_classes(data, held)               # doctest: +SKIP
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from .cache import DecodedDataset, Split
from .errors import DataError
from .hierarchy import ClassHierarchy


def held_out_classes(hierarchy: ClassHierarchy, n: int) -> list[str]:
    """`n` class ids spread evenly over the hierarchy's tree order (sorted as in the data)."""
    if not 0 < n < len(hierarchy):
        raise DataError(f"cannot hold out {n} of {len(hierarchy)} classes")
    tree_order = sorted(range(len(hierarchy)), key=lambda i: (hierarchy.paths[i], hierarchy.wnids[i]))
    step = len(tree_order) / n
    picked = {tree_order[int(step * (k + 0.5))] for k in range(n)}
    return [hierarchy.wnids[i] for i in sorted(picked)]


def read_class_list(path: Path) -> tuple[str, ...]:
    """The class ids a file names (`trainer run --exclude-classes FILE`): a JSON list of ids, a JSON object whose
    "classes" maps folder names to ids (scripts/own_data/source_classes.json), or text with one id per line
    ('#' starts a comment). A file that names none is a DataError.

    >>> import tempfile; f = Path(tempfile.mkdtemp()) / "ids.txt"; _ = f.write_text("n01443537  # goldfish\\n\\n")
    >>> read_class_list(f)
    ('n01443537',)
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"--exclude-classes {path}: not readable ({e})") from None
    if Path(path).suffix == ".json":
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            raise DataError(f"--exclude-classes {path}: not JSON ({e})") from None
        ids = list(value["classes"].values()) if isinstance(value, dict) and isinstance(value.get("classes"), dict) \
            else value
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise DataError(f"--exclude-classes {path}: expected a list of class ids or {{\"classes\": {{name: id}}}}")
    else:
        ids = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    ids = tuple(dict.fromkeys(i for i in ids if i))
    if not ids:
        raise DataError(f"--exclude-classes {path}: names no class")
    return ids


def without_classes(data: DecodedDataset, held_out: list[str], what: str = "held-out") -> DecodedDataset:
    """The data set with the `held_out` classes' images removed and the rest relabelled 0..C-n-1 in the
    original order (the images of the kept classes are copied into memory); `what` names them in errors."""
    unknown = sorted(set(held_out) - set(data.wnids))
    if unknown:
        raise DataError(f"{what} classes not in the data: {unknown[:5]} (its class ids are its folder names, "
                        f"e.g. {data.wnids[:3]})")
    dropped = set(held_out)
    kept = [w for w in data.wnids if w not in dropped]
    new_label = np.full(len(data.wnids), -1, np.int64)
    new_label[[data.wnids.index(w) for w in kept]] = np.arange(len(kept))

    def split(s: Split) -> Split:
        kept_rows = s.subset(np.flatnonzero(new_label[s.labels] >= 0))
        return Split(kept_rows.images, new_label[kept_rows.labels])

    names = [data.names[data.wnids.index(w)] for w in kept]
    return replace(data, wnids=kept, names=names, hierarchy=data.hierarchy.subset(kept),
                   train=split(data.train), val=split(data.val))
