"""Issue 72: should a group name and its singular answer one group? (docs/results/experiments.md, "A group name and
its singular as one group"; tried as a wrapper, not shipped.)

On Tiny ImageNet a plural name and its singular can be two concepts: the class facets' "measuring devices" (abacus,
beaker, hourglass, compass, stopwatch) beside WordNet's 'measuring device' (hourglass, parking meter, stopwatch);
"timers" beside 'timer', "tools" beside 'tool', "carnivores" beside 'carnivore'. The rule tried: where a concept's
name and a singular form of it are both concept names holding different classes, both answer the union (`overlap`:
only where the two share a class, so that "crafts" (potter's wheel, sewing machine) stays apart from "craft"
(gondola, lifeboat); `any`: always). Each Tiny ImageNet retrieval set (scripts/bench_retrieval.PHRASING_SETS) is
resolved with the default options with the rule off and on; the sets' figures and every row that differs are
written.

    python -m lab.plural_groups --bundle ~/.cache/taper-sdk/words/tiny-imagenet.taper \\
        --out docs/results/plural_groups                     # ~30 s here
"""

from __future__ import annotations

import argparse
from pathlib import Path

from scripts.results import write_result

MODES = ("off", "overlap", "any")
COMMAND = ("python -m lab.plural_groups --bundle ~/.cache/taper-sdk/words/tiny-imagenet.taper "
           "--out docs/results/plural_groups")


def pairs(groups: dict[str, list[int]], concept_names: set[str]) -> list[tuple[str, str]]:
    """The (name, singular form) pairs, both concept names, whose groups hold different classes.

    >>> pairs({"timers": [1, 2], "timer": [2, 3], "cats": [4]}, {"timers", "timer", "cats"})
    [('timers', 'timer')]
    """
    from sdk.text.resolver.words import singular_forms

    return [(name, form) for name in groups if name in concept_names for form in singular_forms(name)
            if form != name and form in groups and form in concept_names and set(groups[name]) != set(groups[form])]


def merged(groups: dict[str, list[int]], concept_names: set[str], mode: str) -> dict[str, list[int]]:
    """`groups` with each concept name and its singular forms that are concept names answering their union.

    >>> merged({"timers": [1, 2], "timer": [2, 3]}, {"timers", "timer"}, "overlap")
    {'timers': [1, 2, 3], 'timer': [1, 2, 3]}
    >>> merged({"crafts": [1], "craft": [2]}, {"crafts", "craft"}, "overlap")
    {'crafts': [1], 'craft': [2]}
    """
    out = dict(groups)
    for plural, form in pairs(groups, concept_names):
        a, b = set(out[plural]), set(out[form])
        if a != b and (a & b or mode == "any"):
            out[plural] = out[form] = sorted(a | b)
    return out


def measure(bundle_path: Path, mode: str) -> dict:
    """Each retrieval set's precision, recall and rows with the rule in `mode` (a fresh resolver each time), and
    under "pairs" the bundle's (name, singular) pairs that hold different classes -> whether they share one."""
    import sdk
    from scripts.bench_retrieval import phrasing_sets
    from sdk.text.resolver import TaskOptions
    from sdk.text.resolver.names import Names
    from sdk.text.resolver.words import normalize_name

    shipped = Names._groups

    found_pairs: dict[tuple[str, str], bool] = {}   # each pair -> whether its two groups share a class

    def groups(self, classes, supercategories):
        found = shipped(self, classes, supercategories)
        names = {normalize_name(n) for c in self.concepts for n in c.names}
        found_pairs.update({(a, b): bool(set(found[a]) & set(found[b])) for a, b in pairs(found, names)})
        return found if mode == "off" else merged(found, names, mode)

    Names._groups = groups
    try:
        bundle = sdk.load(bundle_path)
        sets, _, _ = phrasing_sets(bundle.resolver, bundle, TaskOptions())
    finally:
        Names._groups = shipped
    return {**sets, "pairs": found_pairs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=None, help="results path without suffix (.json written)")
    args = parser.parse_args(argv)
    runs = {mode: measure(args.bundle, mode) for mode in MODES}
    found = runs["off"].pop("pairs")
    for mode in MODES[1:]:
        runs[mode].pop("pairs")
    result = {"command": COMMAND, "bundle": args.bundle.name, "pairs": len(found),
              "pairs_sharing_a_class": sum(found.values()), "sets": {}, "changed": {}}
    for key, rows in runs["off"].items():
        result["sets"][key] = {mode: {"precision": runs[mode][key]["precision"], "recall": runs[mode][key]["recall"]}
                               for mode in MODES}
        for text, row in rows["rows"].items():
            after = {mode: runs[mode][key]["rows"][text] for mode in MODES[1:]}
            if any(a["chosen_classes"] != row["chosen_classes"] for a in after.values()):
                result["changed"][f"{key}: {text}"] = {
                    mode: {k: r[k] for k in ("precision", "recall", "chosen_classes")}
                    for mode, r in {"off": row, **after}.items()}
    write_result(result, None if args.out is None else args.out.with_suffix(".json"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
