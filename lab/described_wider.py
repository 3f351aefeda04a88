"""Issue 72: would rule 6 do better if, for a described kind that rule 4 answers (no concept), it chose among the
WIDE classes nearest by name instead of those within `margin` of the best? (docs/results/experiments.md, "Rule 6
among more of the nearest classes"; tried as a wrapper of the resolver.)

Rule 4 takes the classes within `margin` (0.08) of the best similarity; rule 6 (sdk/text/resolver/described.py)
then keeps those whose words say most of what the phrase says. Where the class meant lies just outside the margin
("a castrated bull used to pull carts": the bison at 0.62 alone), rule 6 cannot reach it. The wrapper, for a
phrase alone that describes one kind of thing and that rule 4 answered, narrows the union of those classes and
the WIDE nearest by rule 6's words; where no word tells them apart the answer is rule 4's as before. The
project's scored sets are resolved with and without it, on the cached bundles of `python -m scripts.bench_words`:
the two held-out sets and the worked example (groups, phrasings, descriptions, fresh descriptions, missing) and
the Tiny ImageNet retrieval sets.

    python -m lab.described_wider --out docs/results/described_wider     # ~2 min here
"""

from __future__ import annotations

import argparse
from pathlib import Path

from scripts.results import write_result

COMMAND = "python -m lab.described_wider --out docs/results/described_wider"
WIDTHS = (3, 5, 8)


def widened(wide: int):
    """A `_resolve_phrase` that reads a described kind among rule 4's classes and the `wide` nearest."""
    import numpy as np

    from sdk.text.resolver.described import describes_one
    from sdk.text.resolver.pipeline import TaskResolver
    from sdk.text.resolver.similarity import top
    from sdk.text.resolver.words import normalize_name

    shipped = TaskResolver._resolve_phrase

    def resolve_phrase(self, phrase, options, single, excluded=None):
        indices, why, seconds = shipped(self, phrase, options, single, excluded)
        key = normalize_name(phrase)
        if not (single and why.startswith("classes within ") and describes_one(key)):
            return indices, why, seconds
        scores = self.embeddings @ self.embed_phrase(phrase)
        candidates = top(scores, options)
        candidates += [int(i) for i in np.argsort(-scores, kind="stable")[:wide] if int(i) not in candidates]
        found = self.narrowed(key, candidates)
        if found is None:
            return indices, why, seconds
        return found[0], f"{why.split(';')[0]}, and the {wide} nearest; {found[1]}", seconds

    return resolve_phrase


def measure(wide: int | None) -> dict:
    """The scored sets' figures and answers (lab.word_sets), with rule 6 among the `wide` nearest (None: as
    shipped)."""
    from lab.word_sets import scored_with
    from sdk.text.resolver.pipeline import TaskResolver

    return scored_with(TaskResolver, "_resolve_phrase", None if wide is None else widened(wide))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="results path without suffix (.json written)")
    args = parser.parse_args(argv)
    from lab.word_sets import changed_answers, without_answers

    base = measure(None)
    result = {"shipped": without_answers(base)}
    for wide in WIDTHS:
        after = measure(wide)
        result[f"wide_{wide}"] = {"figures": without_answers(after), "changed": changed_answers(base, after)}
    result["command"] = COMMAND
    write_result(result, None if args.out is None else args.out.with_suffix(".json"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
