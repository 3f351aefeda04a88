"""Issue 72, the kinds below Tiny ImageNet's classes and concepts (docs/results/experiments.md, "Tiny ImageNet's
words get the kinds below them"): what exporting a Tiny ImageNet bundle with them (export.bundle.with_wordnet_kinds)
changes for a person who types one English word. Every one-word WordNet lemma of the shipped list
(sdk/text/english_words.txt.gz, 75,962 words) is resolved with the default options on two bundles of one run, one
exported without (`--no-english`) and one with, and each word whose answer differs is put in one of these:

- `alias`: it now takes a class by a name of a kind below it ("grizzly" -> the brown bear);
- `informal`: it now takes a group by WordNet's informal term for it ("doggy" -> the dogs);
- `kind`: it is now told missing as a kind of a concept's group ("beagle", below 'hunting dog');
- `other`: anything else, the side effects, listed whole.

The first three are what the export means to add; `other` is what a reader should look at.

    python -m lab.tiny_imagenet_kinds --without ~/.cache/taper-sdk/words/tiny-imagenet-words-only.taper \\
        --with ~/.cache/taper-sdk/words/tiny-imagenet.taper --out docs/results/tiny_imagenet_kinds    # ~10 min here
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from lab.closed_compounds import answer
from scripts.results import write_result

COMMAND = ("python -m lab.tiny_imagenet_kinds --without ~/.cache/taper-sdk/words/tiny-imagenet-words-only.taper "
           "--with ~/.cache/taper-sdk/words/tiny-imagenet.taper --out docs/results/tiny_imagenet_kinds")
SAMPLE = 40   # rows of each expected kind of change kept in the result (seed 0); `other` is kept whole


def kind_of_change(after: dict) -> str:
    """Which of the module docstring's kinds a changed answer (`answer`'s dict, with the bundle) is."""
    how = after["how"][0]
    if after["classes"] and (how.endswith("': class name") or "class name," in how):
        return "alias"
    if after["classes"] and "': group '" in how:
        return "informal"
    if not after["classes"] and "is a kind of" in how:
        return "kind"
    return "other"


def main(argv: list[str] | None = None) -> int:
    import sdk
    from sdk.text.english_words import english_words

    parser = argparse.ArgumentParser(prog="python -m lab.tiny_imagenet_kinds", description=__doc__.split("\n\n")[0])
    parser.add_argument("--without", type=Path, required=True, help="the bundle exported with --no-english")
    parser.add_argument("--with", dest="with_", type=Path, required=True, help="the bundle exported with English")
    parser.add_argument("--out", type=Path, default=None, help="write <OUT>.json")
    parser.add_argument("--limit", type=int, default=None, help="only the first LIMIT words (a quick look)")
    args = parser.parse_args(argv)
    before, after = sdk.load(args.without), sdk.load(args.with_)
    words = sorted(english_words())[:args.limit]
    rows: dict[str, dict[str, dict]] = {"alias": {}, "informal": {}, "kind": {}, "other": {}}
    for n, word in enumerate(words, 1):
        old, new = answer(before.resolver, before.classes, word), answer(after.resolver, after.classes, word)
        if old != new:
            rows[kind_of_change(new)][word] = {"without": old, "with": new}
        if n % 5000 == 0:
            print(f"{n} of {len(words)} words: " + ", ".join(f"{k} {len(v)}" for k, v in rows.items()), flush=True)
    rng = random.Random(0)
    result = {"bundles": [args.without.name, args.with_.name], "words": len(words),
              "changed": {k: len(v) for k, v in rows.items()},
              "samples": {k: dict(sorted(rng.sample(sorted(v.items()), min(SAMPLE, len(v)))))
                          for k, v in rows.items() if k != "other"},
              "other": rows["other"], "command": COMMAND}
    for word, row in rows["other"].items():
        old, new = row["without"], row["with"]
        print(f"other {word}: {old['classes'][:4]} -> {new['classes'][:4]}  {new['how'][0][:100]}")
    print(f"changed of {len(words)}: {result['changed']}")
    if args.out:
        write_result(result, args.out.with_suffix(".json"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
