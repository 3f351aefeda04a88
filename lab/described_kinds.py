"""Rule 6, a described kind of thing by its description: measured, and not shipped (issue 72, part 3;
docs/results/experiments.md, "Words people use, part 3").

    python -m lab.described_kinds --out docs/results/described_kinds.json     # 5 s here

A phrase of three or more words that begins with "a" or "an" ("a striped insect that makes honey") describes
one kind of thing. Of the classes rule 5 (a concept) or rule 4 (the CANDIDATES nearest by name) of
sdk/text/resolver/ took for it, the rule keeps those whose class text reads nearest the phrase, within
DESCRIPTION_MARGIN of the best; only where a candidate has a description (the vocabulary's, or the gloss of its
WordNet sense, which the exporter adds to a bundle of one's own classes). Three scorings of a class:
- "mean" (the one built and measured on the held-out set): the mean of the name's similarity (the bundle's class
  embedding) and that of "name: description";
- "name_description": "name: description" alone;
- "description": the description alone (the name where there is none).

It is measured against the resolver of its day: the rule shipped since (rule 6 by shared words,
sdk/text/resolver/described.py) is switched off throughout (`without_word_rule`); a re-run also scores the
held-out set's "descriptions", added in the twenty-eighth session after described_kinds.json was written.
It patches `TaskResolver._resolve_phrase` for the length of one measurement and scores the worked example's
query lists (scripts/own_data, whose "descriptions" are the tuning set) and the held-out set's
(scripts/heldout_data) with scripts/own_photos.score_queries, on the bundles `python -m scripts.bench_words`
built (~/.cache/taper-sdk/words), without the rule and with each scoring, and lists every phrase whose classes
change. For the tuning set's descriptions it also counts, per scoring and for the name alone ("name"), how often
the best-scored candidate is a class the description means (`best_right`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import weakref
from collections.abc import Sequence
from pathlib import Path

import numpy as np

import sdk
from scripts import own_photos
from scripts.bench_words import HELDOUT, HELDOUT_B
from sdk.errors import DescriptionError
from sdk.format.bundle import ClassInfo
from sdk.media.cache import cache_root
from sdk.text.resolver import TaskOptions, TaskResolver, normalize_name

ARTICLES = frozenset({"a", "an"})
DESCRIPTION_MARGIN = 0.03
CANDIDATES = 5
SCORINGS = ("mean", "name_description", "description")
# Each resolver's class-text embeddings per scoring, freed with the resolver.
_TEXTS: weakref.WeakKeyDictionary[TaskResolver, dict[tuple[str, int], np.ndarray]] = weakref.WeakKeyDictionary()


def describes_one(key: str) -> bool:
    """An article first, then at least two words ("a tiny dog"; not "a dog", "my dogs")."""
    words = key.split(" ")
    return len(words) >= 3 and words[0] in ARTICLES


def class_text(info: ClassInfo, scoring: str) -> str:
    if scoring == "description":
        return info.description or info.name
    return f"{info.name}: {info.description}" if info.description else info.name


def text_scores(resolver: TaskResolver, candidates: Sequence[int], phrase: np.ndarray, scoring: str) -> np.ndarray:
    """Each candidate's similarity to the phrase by its class text (embedded once per resolver and scoring)."""
    texts = _TEXTS.setdefault(resolver, {})
    for i in candidates:
        if (scoring, i) not in texts:
            texts[(scoring, i)] = resolver.embed_phrase(class_text(resolver.classes[i], scoring))
    return np.array([float(texts[(scoring, i)] @ phrase) for i in candidates])


def candidate_scores(resolver: TaskResolver, candidates: Sequence[int], name_scores: np.ndarray,
                     phrase: np.ndarray, scoring: str) -> np.ndarray:
    """How a scoring ranks the candidates: "name" the class embeddings alone (rule 4's ranking)."""
    names = name_scores[list(candidates)]
    if scoring == "name":
        return names
    text = text_scores(resolver, candidates, phrase, scoring)
    return 0.5 * (names + text) if scoring == "mean" else text


def candidates_for(resolver: TaskResolver, indices: list[int], why: str, single: bool,
                   name_scores: np.ndarray) -> list[int] | None:
    """The classes rule 6 chooses among: rule 5's concept, or rule 4's CANDIDATES nearest by name (a phrase
    alone); None where the phrase was resolved otherwise."""
    if why.startswith("concept "):
        return indices
    if why.startswith("classes within ") and single:
        return [int(i) for i in np.argsort(-name_scores, kind="stable")[:CANDIDATES]]
    return None


def narrowed(scores: np.ndarray, candidates: Sequence[int], classes: Sequence[ClassInfo]) -> list[int] | None:
    """The candidates within DESCRIPTION_MARGIN of the best; None where none has a description or all stay."""
    if len(candidates) < 2 or not any(classes[i].description for i in candidates):
        return None
    kept = sorted(int(i) for i, s in zip(candidates, scores, strict=True) if s >= scores.max() - DESCRIPTION_MARGIN)
    return kept if len(kept) < len(candidates) else None


@contextlib.contextmanager
def without_word_rule():
    """The resolver without the shipped rule 6 (by shared words), while the block runs."""
    original = TaskResolver._described
    TaskResolver._described = lambda self, key, candidates, why, single: (candidates, why)
    try:
        yield
    finally:
        TaskResolver._described = original


@contextlib.contextmanager
def described_kinds(scoring: str):
    """TaskResolver._resolve_phrase with this rule 6 after rules 4 and 5 (and without the shipped one), while the
    block runs."""
    original = TaskResolver._resolve_phrase

    def resolve_phrase(self: TaskResolver, phrase: str, options, single: bool, excluded: set[int] | None = None):
        indices, why, seconds = original(self, phrase, options, single, excluded)
        if not describes_one(normalize_name(phrase)):
            return indices, why, seconds
        embedding = self.embed_phrase(phrase)   # again: the resolver does not hand out its phrase's embedding
        name_scores = self.embeddings @ embedding
        candidates = candidates_for(self, indices, why, single, name_scores)
        if candidates is None or not any(self.classes[i].description for i in candidates):
            return indices, why, seconds
        kept = narrowed(candidate_scores(self, candidates, name_scores, embedding, scoring), candidates, self.classes)
        if kept is None:
            return indices, why, seconds
        names = ", ".join(repr(self.classes[i].name) for i in kept)
        return kept, f"{why}, then by their descriptions ({scoring}): {names}", seconds

    TaskResolver._resolve_phrase = resolve_phrase
    try:
        with without_word_rule():
            yield
    finally:
        TaskResolver._resolve_phrase = original


def best_right(bundle, source: Path) -> dict[str, int]:
    """Of the set's descriptions that rule 6 reads (n), how many each scoring ranks a meant class first."""
    spec = json.loads((source / "queries.json").read_text())
    resolver, counts = bundle.resolver, {"n": 0, **dict.fromkeys(("name", *SCORINGS), 0)}
    for text, expected in spec.get("descriptions", {}).items():
        if not describes_one(normalize_name(text)):
            continue
        meant = {c for e in expected for c in spec["sets"].get(e, [e])}
        try:
            indices, why, _ = resolver._resolve_phrase(text, TaskOptions(), single=True)
        except DescriptionError:   # nothing matches: no candidates to rank
            continue
        embedding = resolver.embed_phrase(text)
        name_scores = resolver.embeddings @ embedding
        candidates = candidates_for(resolver, indices, why, True, name_scores)
        if candidates is None or len(candidates) < 2:
            continue
        counts["n"] += 1
        for scoring in ("name", *SCORINGS):
            best = candidates[int(np.argmax(candidate_scores(resolver, candidates, name_scores, embedding, scoring)))]
            counts[scoring] += resolver.classes[best].id in meant
    return counts


def scored(bundle, source: Path, options: TaskOptions | None = None) -> dict:
    scores = own_photos.score_queries(bundle, source, options)
    return {"summary": own_photos.score_summary(scores),
            "chosen": {kind: {q: r["chosen"] for q, r in scores[kind]["rows"].items()}
                       for kind in own_photos.SCORED_KINDS if kind in scores}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.described_kinds", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--words", type=Path, default=cache_root() / "words",
                        help="where python -m scripts.bench_words left worked.taper and heldout.taper")
    parser.add_argument("--out", type=Path, default=Path("docs/results/described_kinds.json"))
    args = parser.parse_args(argv)
    sets = {"worked_example (tuning)": (args.words / "worked.taper", own_photos.HERE),
            "heldout": (args.words / "heldout.taper", HELDOUT),
            "heldout_b": (args.words / "heldout-b.taper", HELDOUT_B)}
    result: dict = {"command": "python -m lab.described_kinds", "margin": DESCRIPTION_MARGIN,
                    "candidates": CANDIDATES}
    for name, (path, source) in sets.items():
        bundle = sdk.load(path)
        # padded as sdk.personalize resolved when this was measured (min_classes=2, before sdk.engines.rest), and not
        padded, unpadded = TaskOptions(min_classes=2), TaskOptions(min_classes=1)
        with without_word_rule():
            base = scored(bundle, source, padded)
            right = best_right(bundle, source)
        with without_word_rule():
            entry = {"without": base["summary"], "without_unpadded": scored(bundle, source, unpadded)["summary"]}
        # the shipped rule 6 (by shared words), padded and not: experiments.md, "Words people use, part 3 again"
        entry["word_rule"] = scored(bundle, source, padded)["summary"]
        entry["word_rule_unpadded"] = scored(bundle, source, unpadded)["summary"]
        if right["n"]:   # a set with descriptions
            entry["best_right"] = right
        for scoring in SCORINGS:
            with described_kinds(scoring):
                got = scored(sdk.load(path), source, padded)
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
