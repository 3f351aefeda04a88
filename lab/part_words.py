"""Issue 72: would rule 6 (a described kind narrowed by the words its classes share with it) do better if a
class's words held the names of its parts, WordNet's part meronyms of its sense and of the kinds up to PART_LEVELS
above it ("a huge animal with a long trunk": the elephant's gloss says nothing of a trunk, but WordNet says an
elephant has a proboscis, "trunk", and a tusk)? docs/results/experiments.md, "Rule 6 with the names of a class's
parts"; tried as a wrapper of the resolver.

Each class of the cached bundles of `python -m scripts.bench_words` gets its sense as the exporter chose it
(`choose_senses` on the set's vocabulary; a Tiny ImageNet class's id is its sense), and the stems of the names of
the parts of that sense and of its hypernyms up to PART_LEVELS steps above join its rule 6 words. The project's
scored sets are resolved with and without.

    python -m lab.part_words --out docs/results/part_words     # needs wordnet-base; ~15 s here

One level ships since (trainer.data.english.described puts the parts' names in a derived description), so on
bundles exported after that the wrapper adds what they already hold and changes nothing; its result files
(part_words.json, part_words_two_levels.json) record the runs before.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from scripts.results import write_result
from trainer.data.glosses import WNID

COMMAND = "python -m lab.part_words --out docs/results/part_words"
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
    """The scored sets' figures and answers (lab.word_sets), with or without the parts' names in rule 6."""
    from lab.word_sets import OWN_SETS, scored_with
    from sdk.text.resolver.described import content_stems
    from sdk.text.resolver.pipeline import TaskResolver
    from trainer.data.english import WORDNET_DIR, WordNet

    wordnet = WordNet()
    parts = part_meronyms(WORDNET_DIR / "data.noun")
    senses: dict[str, str] = {}
    for source in OWN_SETS.values():   # folder names: no two sets share one
        found = own_senses(Path(source), wordnet)
        assert not set(found) & set(senses), "two sets share a class id"
        senses.update(found)
    shipped = TaskResolver.__init__

    def init(self, *args, **kwargs):
        shipped(self, *args, **kwargs)
        for i, c in enumerate(self.classes):
            sense = senses.get(c.id, c.id if WNID.fullmatch(c.id) else None)   # Tiny ImageNet's ids are senses
            if sense:
                self.own_stems[i] |= set(content_stems(" ".join(part_names(wordnet, parts, sense))))

    return scored_with(TaskResolver, "__init__", init if with_parts else None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="results path without suffix (.json written)")
    args = parser.parse_args(argv)
    from lab.word_sets import changed_answers, without_answers

    before, after = measure(False), measure(True)
    write_result({"without": without_answers(before), "with": without_answers(after),
                  "changed": changed_answers(before, after), "levels": PART_LEVELS,
                  "command": COMMAND}, None if args.out is None else args.out.with_suffix(".json"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
