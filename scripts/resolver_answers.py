"""Every answer the resolver gives on a bundle, for every phrasing this project has written: the retrieval sets
(A-F and their tuning set), the own-photos queries, the missing items, the golden descriptions, and each name of
the bundle's classes and groups with a typo, a plural and a composition made from it. Issue 73: the resolver
was cut into one module per rule family, and its answers must be the same before and after.

    python -m scripts.resolver_answers tiny-imagenet.taper --out before.json     # then, after a change:
    python -m scripts.resolver_answers tiny-imagenet.taper --compare before.json

tests/test_resolver_pipeline.py compares the tiny test bundle's answers with tests/data/resolver_answers.json,
recorded before the cut.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDED_MIN_CLASSES = 2   # the default when the answers were recorded (one class alone since: sdk.engines.rest)
PHRASING_FILES = sorted((ROOT / "scripts").glob("retrieval_phrasings*.json"))


def phrasings(bundle) -> list:
    """The descriptions to resolve (strings, and a few class lists), in a fixed order, without repeats."""
    from export.golden import COMPOSED_DESCRIPTIONS, DESCRIPTIONS

    texts: list = []
    for path in PHRASING_FILES:
        texts += [k for k in json.loads(path.read_text()) if not k.startswith("_")]
    own = json.loads((ROOT / "scripts" / "own_data" / "queries.json").read_text())
    texts += [*own["groups"], *own["phrasings"], *own["missing"]]
    texts += json.loads((ROOT / "lab" / "missing_items.json").read_text())["items"]
    texts += [d for d, _ in DESCRIPTIONS] + [d if isinstance(d, str) else d[0] for d in COMPOSED_DESCRIPTIONS]
    names = [c.name for c in bundle.bundle.classes] + [n for c in bundle.bundle.concepts for n in c.names[:2]]
    for name in names[:400]:
        texts += [name, name + "s", name[:-1] + name[-1] * 2 if len(name) > 4 else name,
                  f"small {name}", f"non-{name} things", f"{name} and owls"]
    texts += [[c.name for c in bundle.bundle.classes[:3]], [bundle.bundle.classes[0].id], ["no such class"]]
    seen, out = set(), []
    for t in texts:
        key = json.dumps(t)
        if t and key not in seen:
            seen.add(key)
            out.append(t)
    return out


def answers(bundle) -> dict[str, dict]:
    """json(description) -> {"classes": [ids], "how": [...]} or {"error": message}, padded to
    RECORDED_MIN_CLASSES."""
    from sdk.errors import DescriptionError
    from sdk.text.resolver import TaskOptions

    options = TaskOptions(min_classes=RECORDED_MIN_CLASSES)

    ids = [c.id for c in bundle.bundle.classes]
    out = {}
    for text in phrasings(bundle):
        try:
            task = bundle.resolver.resolve(text, options)
            out[json.dumps(text)] = {"classes": [ids[i] for i in task.classes], "how": task.how}
        except DescriptionError as e:
            out[json.dumps(text)] = {"error": str(e)}
    return out


def differences(before: dict, after: dict) -> list[str]:
    return [f"{k}: {before.get(k)} -> {after.get(k)}" for k in sorted(set(before) | set(after))
            if before.get(k) != after.get(k)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.resolver_answers", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--out", type=Path, default=None, help="write the answers here (JSON)")
    parser.add_argument("--compare", type=Path, default=None, help="compare with answers written before")
    args = parser.parse_args(argv)
    import sdk

    got = answers(sdk.load(args.bundle))
    print(f"{len(got)} descriptions resolved on {args.bundle.name}")
    if args.out:
        args.out.write_text(json.dumps(got, indent=0, ensure_ascii=False, sort_keys=True) + "\n")
    if args.compare:
        diff = differences(json.loads(args.compare.read_text()), got)
        print(f"{len(diff)} differ" + "".join(f"\n  {d}" for d in diff[:20]))
        return 1 if diff else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
