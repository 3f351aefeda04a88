"""Issue 72: is a word for a pastime a missing thing? (docs/results/experiments.md, "A word for a pastime is no
missing thing"; protocol, probe and prediction written before the first run.)

Rule 4a tells missing one word that is no name nor a word of one ("owl"). The rule tried: a one-word item whose
form (itself, a singular, or past an article) is on `pastimes()`, WordNet 3.0's one-word nouns none of whose senses
is a physical entity and one of which is a kind of 'diversion, recreation' ("ballgame", "boxing", "tango"), is not
unknown to rule 4a, so the text encoder reads it as any one-word item is read with `missing="nearest"`. Here it
replaces `TaskResolver._unknown` while it runs.

Three measurements, each with and without the rule: every scored set (lab.word_sets), the probe written before the
run (PROBE) and the sweep (every listed word) on the four cached bundles of `python -m scripts.bench_words`.

    python -m lab.pastimes --out docs/results/pastimes          # needs Debian's wordnet-base; ~2 min here
"""

from __future__ import annotations

import argparse
from pathlib import Path

from scripts.results import write_result
from scripts.wordnet_files import PHYSICAL_ENTITY, WORDNET, ancestry, read_nouns

RECREATION = "00426928"   # WordNet 3.0's 'diversion, recreation': sports, games, dances, pastimes
PROBE = """ballgames fishing angling golf tennis boxing archery skiing skating skateboarding surfing snorkeling
swimming diving cycling bicycling motorcycling hunting racing rowing dancing ballet singing juggling gymnastics
wrestling judo sumo hockey soccer croquet badminton lacrosse gambling lottery carnival festival parade magic karaoke
fun entertainment bullfighting sledding tobogganing riding equitation pinball athletics recreation""".split()
BUNDLES = ("tiny-imagenet", "heldout", "heldout-b", "worked")
COMMAND = "python -m lab.pastimes --out docs/results/pastimes"


def pastimes(wordnet: Path = WORDNET) -> frozenset[str]:
    """The one-word nouns of ASCII letters none of whose senses is below 'physical entity' and one of which is below
    'diversion, recreation' (or is it)."""
    hypernyms, senses, _, _ = read_nouns(wordnet)
    ancestors = ancestry(hypernyms)
    return frozenset(lemma for lemma, offsets in senses.items()
                     if lemma.isascii() and lemma.isalpha()
                     and not any(PHYSICAL_ENTITY in ancestors(o) for o in offsets)
                     and any(o == RECREATION or RECREATION in ancestors(o) for o in offsets))


def reading_pastimes(listed: frozenset[str], shipped):
    """A `TaskResolver._unknown` under which a listed word (a singular of it, or it past an article) is not unknown."""
    from sdk.text.resolver.words import singular_forms, without_article

    def unknown(self, key: str) -> bool:
        bare = without_article(key)
        if " " not in bare and any(f in listed for f in (bare, *singular_forms(bare))):
            return False
        return shipped(self, key)

    return unknown


def answers(bundle, words: list[str]) -> dict[str, list[str]]:
    """The classes (names) each word takes; none where it is told missing or refused."""
    from lab.closed_compounds import answer

    return {w: answer(bundle.resolver, bundle.classes, w)["classes"] for w in words}


def changed(bundles: dict, words: list[str], rule, rows: bool = True) -> dict:
    """Per bundle: how many words take other classes with `rule` as `TaskResolver._unknown` and, with `rows`,
    those words' classes without -> with."""
    from lab.word_sets import patched
    from sdk.text.resolver import TaskResolver

    out = {}
    for name, bundle in bundles.items():
        before = answers(bundle, words)
        with patched(TaskResolver, "_unknown", rule):
            after = answers(bundle, words)
        differ = {w: {"without": before[w], "with": after[w]} for w in words if before[w] != after[w]}
        out[name] = {"words": len(words), "changed": len(differ), **({"rows": differ} if rows else {})}
    return out


def main(argv: list[str] | None = None) -> int:
    from lab.word_sets import cached_bundles, changed_answers, scored_with, without_answers
    from sdk.text.resolver import TaskResolver

    parser = argparse.ArgumentParser(prog="python -m lab.pastimes", description=__doc__.split("\n\n")[0])
    parser.add_argument("--wordnet", type=Path, default=WORDNET)
    parser.add_argument("--out", type=Path, default=None, help="write <OUT>.json")
    args = parser.parse_args(argv)
    listed = pastimes(args.wordnet)
    rule = reading_pastimes(listed, TaskResolver._unknown)
    before, after = scored_with(TaskResolver, "_unknown", None), scored_with(TaskResolver, "_unknown", rule)
    bundles = cached_bundles(BUNDLES)
    result = {"listed": len(listed), "without": without_answers(before), "with": without_answers(after),
              "changed_answers": changed_answers(before, after),
              "probe": changed(bundles, PROBE, rule), "sweep": changed(bundles, sorted(listed), rule, rows=False),
              "command": COMMAND}
    for name in ("probe", "sweep"):
        for bundle, part in result[name].items():
            for word, row in part.get("rows", {}).items():
                print(f"{name} {bundle} {word}: {row['without'][:3]} -> {row['with'][:6]}")
            print(f"{name} {bundle}: {part['changed']} of {part['words']} changed")
    print("changed scored answers:", result["changed_answers"])
    for name in before:
        for kind in before[name]:
            b, a = result["without"][name][kind], result["with"][name][kind]
            if a != b:
                print(name, kind, b, "->", a)
    if args.out:
        write_result(result, args.out.with_suffix(".json"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
