"""Issue 72: would rule 6 (a described kind narrowed by the words its classes share with it) do better if a concept's
words were its names and its WordNet gloss? (docs/results/experiments.md, "Rule 6 with the glosses of the concepts
that hold a class"; tried as a wrapper, not shipped: a bundle carries no concept glosses.)

Each WordNet-keyed concept ("n02503517", "wordnet/n02503517") gets its gloss's word stems beside its names' (the
resolver's `concept_stems`); the project's scored sets are resolved with and without on the cached bundles of
`python -m scripts.bench_words`: the two held-out sets and the worked example (groups, phrasings, descriptions) and
the Tiny ImageNet retrieval sets.

    python -m lab.concept_glosses --out docs/results/concept_glosses     # needs wordnet-base; ~1 min here
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from scripts.results import write_result

COMMAND = "python -m lab.concept_glosses --out docs/results/concept_glosses"
SENSE = re.compile(r"n\d{8}")


def with_glosses(concept_ids: list[str], concept_stems: list[set[str]], gloss) -> list[set[str]]:
    """Each concept's stems, with those of `gloss(sense)` for a concept keyed by a WordNet sense (None: none).

    >>> [sorted(s) for s in with_glosses(["wordnet/n02084071", "c2"], [{"dog"}, {"pet"}], lambda s: "tame carnivores")]
    [['carnivor', 'dog', 'tame'], ['pet']]
    """
    from sdk.text.resolver.described import content_stems

    out = []
    for cid, stems in zip(concept_ids, concept_stems, strict=True):
        found = SENSE.search(cid)
        text = gloss(found.group(0)) if found else None
        out.append(stems | set(content_stems(text)) if text else stems)
    return out


def measure(glosses: bool) -> dict:
    """The scored sets' precision and recall, with or without the concepts' glosses in rule 6."""
    from lab.word_sets import only, scored_with
    from sdk.text.resolver.pipeline import TaskResolver
    from trainer.data.english import WordNet
    from trainer.data.errors import DataError

    wordnet = WordNet()

    def gloss(sense: str) -> str | None:
        try:
            return wordnet.synset(sense).gloss
        except DataError:
            return None

    shipped = TaskResolver.__init__

    def init(self, *args, **kwargs):
        shipped(self, *args, **kwargs)
        self.concept_stems = with_glosses([c.id for c in self.concepts], self.concept_stems, gloss)

    return only(scored_with(TaskResolver, "__init__", init if glosses else None))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="results path without suffix (.json written)")
    args = parser.parse_args(argv)
    result = {"without": measure(False), "with": measure(True), "command": COMMAND}
    write_result(result, None if args.out is None else args.out.with_suffix(".json"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
