"""Issue 72, set B's "snails and slugs" (the sea slug missed): should a class name's plural also take the classes
whose names end in it ("slugs" -> the slug and the sea slug)? Counted, not built (docs/results/experiments.md, "Set
B's other rows, looked at again"): every class name or alias that ends another class's name, the compounds it
would take, and whether the shipped list of compounds that are no kind of their last word (rule 4a,
sdk/text/exocentric_compounds.txt, from WordNet) holds each of them.

    python -m lab.class_heads --bundle ~/.cache/taper-sdk/words/tiny-imagenet.taper --out docs/results/class_heads
"""

from __future__ import annotations

import argparse
from pathlib import Path

from scripts.results import write_result

COMMAND = ("python -m lab.class_heads --bundle ~/.cache/taper-sdk/words/tiny-imagenet.taper "
           "--out docs/results/class_heads")


def heading_names(by_name: dict[str, int], exocentric: frozenset[str]) -> dict[str, dict]:
    """{a name of one class: {"class": its index, "compounds": {another class's name ending in it: whether the
    list of compounds that are no kind of their last word holds it}}}, for the names that end another class's.

    >>> heading_names({"slug": 0, "sea slug": 1, "lion": 2, "cat": 3}, frozenset({"sea slug"}))
    {'slug': {'class': 0, 'compounds': {'sea slug': True}}}
    """
    out: dict[str, dict] = {}
    for compound, other in sorted(by_name.items()):
        head = compound.rsplit(" ", 1)[-1]
        if " " in compound and head in by_name and by_name[head] != other:
            entry = out.setdefault(head, {"class": by_name[head], "compounds": {}})
            entry["compounds"][compound] = compound in exocentric
    return out


def main(argv: list[str] | None = None) -> int:
    import sdk

    parser = argparse.ArgumentParser(prog="python -m lab.class_heads", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=None, help="write <OUT>.json")
    args = parser.parse_args(argv)
    bundle = sdk.load(args.bundle)
    resolver, classes = bundle.resolver, bundle.bundle.classes
    found = heading_names(resolver.index.by_name, resolver.exocentric)
    rows = {head: {"class": classes[entry["class"]].name, "compounds": entry["compounds"]}
            for head, entry in found.items()}
    for head, row in rows.items():
        print(f"{head} ({row['class']}): {row['compounds']}")
    result = {"bundle": args.bundle.name, "names": len(rows), "rows": rows,
              "compounds_listed_as_no_kind": sum(v for row in rows.values() for v in row["compounds"].values()),
              "compounds": sum(len(row["compounds"]) for row in rows.values()), "command": COMMAND}
    print({k: v for k, v in result.items() if k != "rows"})
    if args.out:
        write_result(result, args.out.with_suffix(".json"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
