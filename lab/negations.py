"""Issue 72: a description that says what a thing is not or lacks ("a bird that cannot fly"). A probe of 13 such
descriptions on the three own-data bundles, written before the resolver read negations and without reading any
gloss (docs/results/experiments.md, "What a described thing is not"), scored as scripts/own_photos scores its sets.
The scored set of the same kind, `descriptions_negated` in the three query files, was printed before the rule was
designed, so this probe is the clean measure.

    python -m lab.negations --out docs/results/negations          # the cached bundles of scripts.bench_words; ~10 s
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

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


def scored(bundle, probe: dict[str, list[str]]) -> dict:
    """The probe's rows on `bundle` (precision, recall, the classes taken by folder name, how) and their means."""
    from scripts.own_photos import precision_recall
    from sdk.errors import DescriptionError

    ids = [c.id for c in bundle.bundle.classes]
    rows = {}
    for text, expected in probe.items():
        try:
            task = bundle.resolver.resolve(text)
            chosen, how = {ids[i] for i in task.classes}, task.how
        except DescriptionError as e:
            chosen, how = set(), [str(e)]
        p, r = precision_recall(chosen, set(expected))
        rows[text] = {"precision": round(p, 3), "recall": round(r, 3), "chosen": sorted(chosen), "how": how}
    return {"precision": round(float(np.mean([v["precision"] for v in rows.values()])), 3),
            "recall": round(float(np.mean([v["recall"] for v in rows.values()])), 3), "n": len(rows), "rows": rows}


def main(argv: list[str] | None = None) -> int:
    import sdk
    from sdk.media.cache import cache_root

    parser = argparse.ArgumentParser(prog="python -m lab.negations", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="write <OUT>.json")
    args = parser.parse_args(argv)
    result = {name: scored(sdk.load(cache_root() / "words" / f"{name}.taper"), probe)
              for name, probe in PROBE.items()}
    for name, part in result.items():
        for text, row in part["rows"].items():
            print(f"{name} {text!r}: {row['precision']} / {row['recall']} {row['chosen']}")
        print(f"{name}: {part['precision']} / {part['recall']} (n={part['n']})")
    result["command"] = COMMAND
    if args.out:
        write_result(result, args.out.with_suffix(".json"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
