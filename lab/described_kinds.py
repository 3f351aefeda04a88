"""Rule 6, a described kind of thing by its description: measured, and not shipped (issue 72, part 3;
docs/results/experiments.md, "Words people use, part 3").

    python -m lab.described_kinds --out docs/results/described_kinds.json     # about a minute here

A phrase of three or more words that begins with "a" or "an" ("a striped insect that makes honey") describes
one kind of thing. Of the classes rule 5 (a concept) or rule 4 (the CANDIDATES nearest by name) of
sdk/text/resolver/ took for it, the rule keeps those whose class text reads nearest the phrase, within
DESCRIPTION_MARGIN of the best; only where a candidate has a description (the vocabulary's, or the gloss of its
WordNet sense, which the exporter adds to a bundle of one's own classes). Three scorings of a class:
- "mean" (the one chosen on the tuning set): the mean of the name's similarity (the bundle's class embedding)
  and that of "name: description";
- "name_description": "name: description" alone;
- "description": the description alone (the name where there is none).

It patches `TaskResolver._resolve_phrase` for the length of one measurement and scores the worked example's
query lists (scripts/own_data, whose "descriptions" are the tuning set) and the held-out set's
(scripts/heldout_data) with scripts/own_photos.score_queries, on the bundles `python -m scripts.bench_words`
built (~/.cache/taper-sdk/words), without the rule and with each scoring, and lists every phrase whose classes
change.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

import sdk
from scripts import own_photos
from scripts.bench_words import HELDOUT
from sdk.format.bundle import ClassInfo
from sdk.media.cache import cache_root
from sdk.text.resolver import TaskResolver, normalize_name

ARTICLES = frozenset({"a", "an"})
DESCRIPTION_MARGIN = 0.03
CANDIDATES = 5
SCORINGS = ("mean", "name_description", "description")


def describes_one(key: str) -> bool:
    """An article first, then at least two words ("a tiny dog"; not "a dog", "my dogs")."""
    words = key.split(" ")
    return len(words) >= 3 and words[0] in ARTICLES


def class_text(info: ClassInfo, scoring: str) -> str:
    if scoring == "description":
        return info.description or info.name
    return f"{info.name}: {info.description}" if info.description else info.name


def narrowed(classes: Sequence[ClassInfo], candidates: Sequence[int], name_scores: np.ndarray, phrase: np.ndarray,
             text_embedding: Callable[[int], np.ndarray], scoring: str) -> list[int] | None:
    """The candidates within DESCRIPTION_MARGIN of the best; None where none has a description or all stay."""
    if len(candidates) < 2 or not any(classes[i].description for i in candidates):
        return None
    text = np.array([float(text_embedding(i) @ phrase) for i in candidates])
    scores = 0.5 * (name_scores[list(candidates)] + text) if scoring == "mean" else text
    kept = sorted(int(i) for i, s in zip(candidates, scores, strict=True) if s >= scores.max() - DESCRIPTION_MARGIN)
    return kept if len(kept) < len(candidates) else None


@contextlib.contextmanager
def described_kinds(scoring: str):
    """TaskResolver._resolve_phrase with rule 6 after rules 4 and 5, while the block runs."""
    original = TaskResolver._resolve_phrase
    memo: dict[tuple[int, int], np.ndarray] = {}

    def resolve_phrase(self: TaskResolver, phrase: str, options, single: bool):
        indices, why, seconds = original(self, phrase, options, single)
        by_concept, by_top = why.startswith("concept "), why.startswith("classes within ")
        if not (by_concept or (by_top and single)) or not describes_one(normalize_name(phrase)):
            return indices, why, seconds
        embedding = self.embed_phrase(phrase)
        scores = self.embeddings @ embedding
        candidates = indices if by_concept else [int(i) for i in np.argsort(-scores, kind="stable")[:CANDIDATES]]

        def text_embedding(i: int) -> np.ndarray:
            if (id(self), i) not in memo:
                memo[(id(self), i)] = self.embed_phrase(class_text(self.classes[i], scoring))
            return memo[(id(self), i)]

        kept = narrowed(self.classes, candidates, scores, embedding, text_embedding, scoring)
        if kept is None:
            return indices, why, seconds
        names = ", ".join(repr(self.classes[i].name) for i in kept)
        return kept, f"{why}, then by their descriptions ({scoring}): {names}", seconds

    TaskResolver._resolve_phrase = resolve_phrase
    try:
        yield
    finally:
        TaskResolver._resolve_phrase = original


def scored(bundle, source: Path) -> dict:
    scores = own_photos.score_queries(bundle, source)
    return {"summary": own_photos.score_summary(scores),
            "chosen": {kind: {q: r["chosen"] for q, r in scores[kind]["rows"].items()}
                       for kind in ("groups", "phrasings", "descriptions") if kind in scores}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.described_kinds", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--words", type=Path, default=cache_root() / "words",
                        help="where python -m scripts.bench_words left worked.taper and heldout.taper")
    parser.add_argument("--out", type=Path, default=Path("docs/results/described_kinds.json"))
    args = parser.parse_args(argv)
    sets = {"worked_example (tuning)": (args.words / "worked.taper", own_photos.HERE),
            "heldout": (args.words / "heldout.taper", HELDOUT)}
    result: dict = {"command": "python -m lab.described_kinds", "margin": DESCRIPTION_MARGIN,
                    "candidates": CANDIDATES}
    for name, (path, source) in sets.items():
        bundle = sdk.load(path)
        base = scored(bundle, source)
        entry = {"without": base["summary"]}
        for scoring in SCORINGS:
            with described_kinds(scoring):
                got = scored(sdk.load(path), source)
            entry[scoring] = got["summary"]
            entry[f"{scoring}_changed"] = {q: {"before": base["chosen"][k][q], "after": c}
                                           for k, rows in got["chosen"].items() for q, c in rows.items()
                                           if c != base["chosen"][k][q]}
        result[name] = entry
        print(name, json.dumps({k: v for k, v in entry.items() if not k.endswith("_changed")}))
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
