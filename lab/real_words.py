"""Issue 72, rule 3c's real words (docs/results/experiments.md, "Real words are no typos"): what calling WordNet's
words real, beside the text encoder's vocabulary, changes on a bundle. Three measurements, each with the gate on
(the resolver as shipped) and off (a copy whose WordNet list is empty):

- `corrected`: of WordNet's one-word lemmas the encoder's vocabulary lacks (sdk/text/english_words.txt.gz), those
  the spelling rule corrects to a name of the bundle without the gate (`spelling` and `joined` on the bundle's
  names, as the pipeline tries them), their count and a random sample of 60 (seed 0);
- `typos`: every single edit (a letter dropped, added, changed, two neighbours swapped) of the bundle's one-word
  class names of 5 or more letters that is no name: how many the vocabulary has (never corrected, before or now),
  and how many of the rest are real by the gate and were corrected by the spelling rule without it (told missing
  now: the cost), with a sample of 40 (seed 1);
- `probe`: the 59 words of lab/closed_compounds.PROBE resolved both ways, the rows that differ;
- `missing`: the same for every missing name the project's sets hold (lab/missing_items.json and the `missing`
  queries of the worked example and both held-out sets), which must stay told missing.

    python -m lab.real_words --bundle ~/.cache/taper-sdk/words/tiny-imagenet.taper --out docs/results/real_words
    python -m lab.real_words --bundle ~/.cache/taper-sdk/words/heldout-b.taper --quick   # probe and missing only
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import string
from pathlib import Path

from scripts.results import write_result

COMMAND = "python -m lab.real_words --bundle ~/.cache/taper-sdk/words/tiny-imagenet.taper --out docs/results/real_words"
MISSING_ITEMS = Path(__file__).parent / "missing_items.json"


def missing_names() -> list[str]:
    """Every missing name the project's query sets hold, in order, each once."""
    from scripts.bench_words import HELDOUT, HELDOUT_B
    from scripts.own_photos import HERE

    names = json.loads(MISSING_ITEMS.read_text())["items"]
    for source in (HERE, HELDOUT, HELDOUT_B):
        names += list(json.loads((source / "queries.json").read_text())["missing"])
    return list(dict.fromkeys(names))


def corrected(resolver, words: list[str]) -> list[tuple[str, str]]:
    """(word, name) for each word rule 3c would read as a name if no word were real (names, groups, a class's
    singular and words ending names answer first, as in the pipeline)."""
    from sdk.text.resolver.spelling import joined, spelling
    from sdk.text.resolver.words import singular_forms

    index, out = resolver.index, []
    for word in words:
        if index.named(word) or index.class_name(word) != word or index.head(word):
            continue
        forms = (word, *singular_forms(word))
        if any(joined(index, f) for f in forms):
            continue
        name = next((n for n in (spelling(index, f) for f in forms) if n is not None), None)
        if name is not None:
            out.append((word, name))
    return out


def edits(word: str) -> set[str]:
    """Every string one edit from `word`."""
    out = set()
    for i in range(len(word) + 1):
        out |= {word[:i] + c + word[i:] for c in string.ascii_lowercase}
        if i < len(word):
            out |= {word[:i] + word[i + 1:], *(word[:i] + c + word[i + 1:] for c in string.ascii_lowercase)}
        if i < len(word) - 1:
            out.add(word[:i] + word[i + 1] + word[i] + word[i + 2:])
    return out - {word}


def main(argv: list[str] | None = None) -> int:
    import sdk
    from lab.closed_compounds import PROBE, compare
    from sdk.text.english_words import english_words

    parser = argparse.ArgumentParser(prog="python -m lab.real_words", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=None, help="write <OUT>.json")
    parser.add_argument("--quick", action="store_true", help="the probe and the missing names only (seconds)")
    args = parser.parse_args(argv)
    bundle = sdk.load(args.bundle)
    without = copy.copy(bundle.resolver)
    without.english = lambda: frozenset()
    both = {"before": without, "now": bundle.resolver}   # "before": as the resolver was without the gate
    result = {"bundle": args.bundle.name, "probe": compare(bundle.classes, both, PROBE),
              "missing": compare(bundle.classes, both, missing_names()), "command": COMMAND}
    print(f"probe: {result['probe']['changed']} of {result['probe']['words']} changed "
          f"{list(result['probe']['rows'])}; missing names: {result['missing']['changed']} of "
          f"{result['missing']['words']} changed")
    if args.quick:
        return 0
    is_word, english = bundle.embedder.is_word, english_words()
    outside = sorted(w for w in english if not is_word(w))
    hits = corrected(bundle.resolver, outside)
    names = sorted({n for n in bundle.resolver.index.by_name if " " not in n and n.isalpha() and len(n) >= 5})
    typos = sorted({(e, n) for n in names for e in edits(n) if e not in bundle.resolver.index.names})
    in_vocabulary = [t for t in typos if is_word(t[0])]
    outside_typos = sorted({e for e, _ in typos if not is_word(e)})
    real = corrected(bundle.resolver, [e for e in outside_typos if bundle.resolver._real(e)])
    result.update(english_words=len(english), outside_vocabulary=len(outside),
                  corrected={"count": len(hits), "still_corrected": sum(not bundle.resolver._real(w) for w, _ in hits),
                             "sample": random.Random(0).sample(hits, min(60, len(hits)))},
                  typos={"names": len(names), "edits": len(typos), "in_vocabulary": len(in_vocabulary),
                         "outside_vocabulary": len(outside_typos), "real_and_corrected_before": len(real),
                         "sample": random.Random(1).sample(real, min(40, len(real)))})
    print(f"{len(hits)} of {len(outside)} WordNet words outside the vocabulary corrected without the gate, "
          f"{result['corrected']['still_corrected']} with it; typos: {len(typos)} edits, {len(in_vocabulary)} in the "
          f"vocabulary, {len(real)} of the other {len(outside_typos)} real and corrected before")
    if args.out:
        write_result(result, args.out.with_suffix(".json"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
