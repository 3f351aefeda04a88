"""The head-final rule, measured before it could ship (issue 60, part 6; docs/results/experiments.md,
"Compounds that are no kind of their last word, and the head-final rule"; pre-registered).

    python -m lab.head_final --own <own-photos bundle> --tiny <demo bundle> --out docs/results/head_final.json

English compounds name a kind of their last word, so the rule reads a phrase of several words whose last word
(and its singular) is no word of any name in the bundle, while another word is, as an item the bundle lacks
("fruit fly", "car seat"). It patches rule 4a of sdk/text/resolver/ (`TaskResolver._unknown`) for the length of
one measurement, scores the own-data query lists (scripts/own_photos.score_queries) and Tiny ImageNet's
phrasing sets (scripts/bench_retrieval's), with and without it, and lists every phrasing whose classes change.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

import sdk
from scripts import bench_retrieval, own_photos
from sdk.text.resolver import DESCRIBING_NOUNS, DESCRIBING_WORDS, TaskOptions, TaskResolver, singular_forms

EXTRA = ["fruit fly", "car seat", "butterfly net", "bus stop", "bee hive", "orange juice", "dog food",
         "garden insects", "tropical fruit", "fast cars", "pet dogs", "dog breeds", "sled dog"]


@contextlib.contextmanager
def head_final():
    """TaskResolver._unknown with the head-final rule added, while the block runs."""
    original = TaskResolver._unknown

    def unknown(self: TaskResolver, key: str) -> bool:
        if original(self, key):
            return True
        words = key.split(" ")
        if len(words) < 2 or any(w in DESCRIBING_WORDS for w in words) or words[-1] in DESCRIBING_NOUNS:
            return False
        return not any(f in self.words for f in (words[-1], *singular_forms(words[-1])))

    TaskResolver._unknown = unknown
    try:
        yield
    finally:
        TaskResolver._unknown = original


def tiny_scores(bundle: sdk.TaperBundle) -> dict:
    from trainer.data.glosses import read_glosses

    glosses = read_glosses([c.id for c in bundle.bundle.classes])
    out = bench_retrieval.measure(bundle.resolver, bundle, glosses, TaskOptions(), rank1=float("nan"))
    return {k: v for k, v in out.items() if k == "glosses" or k == "groups" or k in bench_retrieval.PHRASING_SETS}


def own_scores(bundle: sdk.TaperBundle) -> dict:
    out = own_photos.score_queries(bundle)
    names = [c.name for c in bundle.bundle.classes]
    extra = {}
    for text in EXTRA:
        try:
            task = bundle.resolver.resolve(text)
            extra[text] = {"classes": [names[i] for i in task.classes], "how": task.how}
        except sdk.DescriptionError as e:
            extra[text] = {"classes": [], "how": [str(e)]}
    return {**out, "extra": {"rows": extra}}


def changes(before: dict, after: dict) -> list[dict]:
    """Every row (a phrasing, a missing name) whose chosen classes differ."""
    out = []
    for key, value in before.items():
        rows, new_rows = value.get("rows", {}) if isinstance(value, dict) else {}, after[key].get("rows", {})
        for text, row in rows.items():
            pick = ("chosen_classes", "chosen", "returned", "classes")
            old = next((row[p] for p in pick if p in row), None)
            new = next((new_rows[text][p] for p in pick if p in new_rows[text]), None)
            if old != new:
                out.append({"set": key, "text": text, "before": row, "after": new_rows[text]})
    return out


def summary(scores: dict) -> dict:
    return {k: {m: v[m] for m in ("precision", "recall", "told", "unrelated", "recall_at_set") if m in v}
            for k, v in scores.items() if isinstance(v, dict)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--own", type=Path, required=True)
    parser.add_argument("--tiny", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    own, tiny = sdk.load(args.own).warm_up(), sdk.load(args.tiny).warm_up()
    result = {"command": "python -m lab.head_final " + " ".join(sys.argv[1:] if argv is None else argv)}
    for name, bundle, score in (("own_data", own, own_scores), ("tiny_imagenet", tiny, tiny_scores)):
        before = score(bundle)
        with head_final():
            after = score(bundle)
        result[name] = {"without": summary(before), "with_head_final": summary(after),
                        "changed": changes(before, after)}
    args.out.write_text(json.dumps(result, indent=1))
    for name in ("own_data", "tiny_imagenet"):
        print(f"== {name}")
        for k in result[name]["without"]:
            print(f"  {k}: {result[name]['without'][k]} -> {result[name]['with_head_final'][k]}")
        for c in result[name]["changed"]:
            print(f"  changed [{c['set']}] {c['text']!r}: {c['before'].get('how', '')} -> {c['after'].get('how', '')}")


if __name__ == "__main__":
    main()
