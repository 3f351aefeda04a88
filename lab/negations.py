"""Issue 72: a description that says what a thing is not or lacks ("a bird that cannot fly"). A probe of 13 such
descriptions on the three own-data bundles, written before the resolver read negations and without reading any
gloss (docs/results/experiments.md, "What a described thing is not"), scored as scripts/own_photos scores its sets;
and on each bundle (Tiny ImageNet's too) how many class descriptions say what the class lacks (`lacking`).
The scored set of the same kind, `descriptions_negated` in the three query files, was printed before the rule was
designed, so this probe is the clean measure.

    python -m lab.negations --out docs/results/negations          # the cached bundles of scripts.bench_words; ~10 s
"""

from __future__ import annotations

import argparse
from pathlib import Path

from scripts.results import write_result

PROBE = {   # bundle (as cached by scripts.bench_words) -> description -> the folder names it means
    "heldout": {"a cat that does not have long fur": ["tabby_cat", "egyptian_cat"],
                "a pan without a flat bottom": ["wok"],
                "a monkey that is not an ape": ["baboon"],
                "a primate without a tail": ["orangutan", "chimpanzee"],
                "a bird that is not a seabird": ["black_stork", "goose"]},
    "heldout-b": {"a bottle without a long neck": ["pill_bottle"],
                  "a bridge that is not made of steel": ["viaduct"],
                  "an arachnid that is not a spider": ["scorpion"],
                  "a landscape without water": ["alp", "cliff"]},
    "worked": {"a dog that is not small": ["german_shepherd", "golden_retriever", "labrador", "poodle"],
               "a fruit that is not yellow": ["orange"],
               "an insect that is not a butterfly": ["bee", "dragonfly", "grasshopper", "ladybug"],
               "a car that is not long": ["sports_car", "convertible"]},
}
COMMAND = "python -m lab.negations --out docs/results/negations"


def lacking(bundle) -> dict:
    """How many of the bundle's classes have a description that says what they lack: rule 6's words of it lose some
    by `affirmed`."""
    from sdk.text.resolver.described import affirmed, content_stems

    said = sum(set(content_stems(affirmed(c.description))) != set(content_stems(c.description))
               for c in bundle.bundle.classes)
    return {"classes": len(bundle.bundle.classes), "descriptions_saying_lacks": said}


def main(argv: list[str] | None = None) -> int:
    from lab.word_sets import cached_bundles, scored_probe

    parser = argparse.ArgumentParser(prog="python -m lab.negations", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="write <OUT>.json")
    args = parser.parse_args(argv)
    bundles = cached_bundles((*PROBE, "tiny-imagenet"))
    result = scored_probe(bundles, PROBE)
    for name in PROBE:
        part = result[name] = {**result[name], **lacking(bundles[name])}
        print(f"{name}: {part['precision']} / {part['recall']} (n={part['n']}); "
              f"{part['descriptions_saying_lacks']} of {part['classes']} descriptions say what a class lacks")
    result["all"] = result.pop("all")   # after the bundles, where the file has had it
    result["tiny-imagenet"] = lacking(bundles["tiny-imagenet"])   # no probe there: its classes' descriptions only
    print(f"all: {result['all']}; tiny-imagenet: {result['tiny-imagenet']}")
    result["command"] = COMMAND
    if args.out:
        write_result(result, args.out.with_suffix(".json"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
