"""Issue 72: would rule 6 (a described kind narrowed by the words its classes share with it) do better if a
class's words held the names of its parts, WordNet's part meronyms of its sense and of the kinds up to PART_LEVELS
above it ("a huge animal with a long trunk": the elephant's gloss says nothing of a trunk, but WordNet says an
elephant has a proboscis, "trunk", and a tusk)? docs/results/experiments.md, "Rule 6 with the names of a class's
parts"; tried as a wrapper of the resolver.

Each class of the cached bundles of `python -m scripts.bench_words` gets its sense as the exporter chose it
(`choose_senses` on the set's vocabulary; a Tiny ImageNet class's id is its sense), and the stems of the names of
the parts of that sense and of its hypernyms up to PART_LEVELS steps above join its rule 6 words. The project's
scored sets are resolved with and without.

    python -m lab.part_words --out docs/results/part_words     # needs wordnet-base; ~1 min here
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from scripts.results import write_result

COMMAND = "python -m lab.part_words --out docs/results/part_words"
OWN_SETS = {"heldout": "scripts/heldout_data", "heldout-b": "scripts/heldout_b_data", "worked": "scripts/own_data"}
PART_LEVELS = 1   # the kind right above the sense; two levels gave every insect its wings (experiments.md)
PART_MERONYM = "%p"


def part_meronyms(data_noun: Path) -> dict[str, list[str]]:
    """Every noun sense with parts -> the ids of its part meronyms (WordNet's "%p" pointers)."""
    out: dict[str, list[str]] = {}
    for line in data_noun.read_text(encoding="latin-1").splitlines():
        if line.startswith(" "):
            continue
        cols = line.split(" | ")[0].split()
        at = 4 + 2 * int(cols[3], 16)
        pointers = int(cols[at])
        parts = [f"n{cols[at + 2 + 4 * i]}" for i in range(pointers)
                 if cols[at + 1 + 4 * i] == PART_MERONYM and cols[at + 3 + 4 * i] == "n"]
        if parts:
            out[f"n{cols[0]}"] = parts
    return out


def part_names(wordnet, parts: dict[str, list[str]], sense: str) -> list[str]:
    """The names of the parts of `sense` and of the kinds up to PART_LEVELS steps above it."""
    level, kinds = [sense], [sense]
    for _ in range(PART_LEVELS):
        level = [h for s in level for h in wordnet.synset(s).hypernyms]
        kinds += level
    return [n for k in dict.fromkeys(kinds) for p in parts.get(k, ()) for n in wordnet.synset(p).unique_names]


def own_senses(source: Path, wordnet) -> dict[str, str]:
    from trainer.data.english import choose_senses
    from trainer.data.vocabulary import Vocabulary

    ids = sorted(json.loads((source / "source_classes.json").read_text())["classes"])
    return choose_senses(Vocabulary.load(source / "vocabulary.toml", ids), wordnet)[0]


def measure(with_parts: bool) -> dict:
    import sdk
    from scripts.bench_retrieval import phrasing_sets
    from scripts.own_photos import score_queries
    from sdk.media.cache import cache_root
    from sdk.text.resolver import TaskOptions
    from sdk.text.resolver.described import content_stems
    from sdk.text.resolver.pipeline import TaskResolver
    from trainer.data.english import WORDNET_DIR, WordNet

    wordnet = WordNet()
    parts = part_meronyms(WORDNET_DIR / "data.noun")
    work = cache_root() / "words"
    out: dict = {}
    shipped = TaskResolver.__init__
    senses: dict[str, str] = {}

    def init(self, *args, **kwargs):
        shipped(self, *args, **kwargs)
        if with_parts:
            for i, c in enumerate(self.classes):
                sense = senses.get(c.id)
                if sense:
                    self.own_stems[i] |= set(content_stems(" ".join(part_names(wordnet, parts, sense))))

    TaskResolver.__init__ = init
    try:
        for name, source in OWN_SETS.items():
            senses = own_senses(Path(source), wordnet)
            scores = score_queries(sdk.load(work / f"{name}.taper"), Path(source))
            out[name] = {k: {"precision": v["precision"], "recall": v["recall"],
                             "chosen": {q: r["chosen"] for q, r in v["rows"].items()}}
                         for k, v in scores.items() if isinstance(v, dict) and "precision" in v}
            out[name]["missing"] = {k: scores["missing"][k] for k in ("told", "unrelated")}
        bundle = sdk.load(work / "tiny-imagenet.taper")
        senses = {c.id: c.id for c in bundle.bundle.classes}
        bundle = sdk.load(work / "tiny-imagenet.taper")   # a fresh resolver, built with the senses above
        sets, _, _ = phrasing_sets(bundle.resolver, bundle, TaskOptions())
        out["tiny-imagenet"] = {k: {"precision": v["precision"], "recall": v["recall"]} for k, v in sets.items()}
    finally:
        TaskResolver.__init__ = shipped
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="results path without suffix (.json written)")
    args = parser.parse_args(argv)
    before, after = measure(False), measure(True)
    changed = {f"{n}/{k}/{q}": [c, after[n][k]["chosen"][q]] for n, kinds in before.items()
               for k, f in kinds.items() for q, c in f.get("chosen", {}).items() if after[n][k]["chosen"][q] != c}
    strip = lambda m: {n: {k: {x: y for x, y in f.items() if x != "chosen"} for k, f in kinds.items()}  # noqa: E731
                       for n, kinds in m.items()}
    write_result({"without": strip(before), "with": strip(after), "changed": changed, "levels": PART_LEVELS,
                  "command": COMMAND}, None if args.out is None else args.out.with_suffix(".json"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
