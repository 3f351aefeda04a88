"""Issue 72: would rule 6 (a described kind narrowed by the words its classes share with it) do better if a
class's words held the names of its parts, WordNet's part meronyms of its sense and of the kinds up to `--levels`
above it (`WordNet.part_names`)? "a huge animal with a long trunk": the elephant's gloss says nothing of a trunk,
but WordNet says an elephant has a proboscis, "trunk", and a tusk. docs/results/experiments.md, "Rule 6 with the
names of a class's parts"; tried as a wrapper of the resolver.

Each class of the cached bundles of `python -m scripts.bench_words` gets its sense as the exporter chose it
(`choose_senses` on the set's vocabulary; a Tiny ImageNet class's id is its sense), and the stems of the names of
the parts of that sense and of its hypernyms up to `--levels` steps above join its rule 6 words. The project's
scored sets are resolved with and without.

    python -m lab.part_words --levels 1 --out docs/results/part_words     # needs wordnet-base; ~15 s here
    python -m lab.part_words --levels 2 --out docs/results/part_words_two_levels

One level ships since (trainer.data.english.derived_description puts the parts' names in a derived description), so on
bundles exported after that the wrapper adds what they already hold and changes nothing; its result files
(part_words.json, part_words_two_levels.json) record the runs before.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from scripts.results import write_result
from trainer.data.glosses import WNID

COMMAND = "python -m lab.part_words --levels {levels} --out {out}"


def own_senses(source: Path, wordnet) -> dict[str, str]:
    from trainer.data.english import choose_senses
    from trainer.data.vocabulary import Vocabulary

    ids = sorted(json.loads((source / "source_classes.json").read_text())["classes"])
    return choose_senses(Vocabulary.load(source / "vocabulary.toml", ids), wordnet)[0]


def measure(levels: int | None) -> dict:
    """The scored sets' figures and answers (lab.word_sets), with the names of the parts `levels` up in rule 6
    (None: without)."""
    from lab.word_sets import OWN_SETS, scored_with
    from sdk.text.resolver.described import content_stems
    from sdk.text.resolver.pipeline import TaskResolver
    from trainer.data.english import WordNet

    wordnet = WordNet()
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
                self.own_stems[i] |= set(content_stems(" ".join(wordnet.part_names(sense, levels))))

    return scored_with(TaskResolver, "__init__", None if levels is None else init)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", type=int, default=1, help="kinds above a sense whose parts count (1 ships)")
    parser.add_argument("--out", type=Path, default=None, help="results path without suffix (.json written)")
    args = parser.parse_args(argv)
    from lab.word_sets import changed_answers, without_answers

    before, after = measure(None), measure(args.levels)
    write_result({"without": without_answers(before), "with": without_answers(after),
                  "changed": changed_answers(before, after), "levels": args.levels,
                  "command": COMMAND.format(levels=args.levels, out=args.out)},
                 None if args.out is None else args.out.with_suffix(".json"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
