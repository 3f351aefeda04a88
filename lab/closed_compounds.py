"""Issue 72, set B's "ballgames": would reading a closed compound as its two words be safe? (docs/results/
experiments.md, "Closed compounds read as their two words"; the rule was tried in the resolver and both readers,
then reverted: this is its measurement, kept in the lab.)

The rule tried ("3e"): a one-word item that rule 4a tells missing, that the text encoder's vocabulary lacks, and
whose form (itself or a singular) is on a list of WordNet 3.0's closed nouns that are a kind of their last part
and name no thing a camera sees (`closed`: "ballgame", a kind of game) is read as its two words, keeping its
ending ("ballgames" -> "ball games"), and the reading kept if it takes classes. Here it wraps the resolver's
`_resolve_phrase` (the shipped resolver tried it after the spelling rule's spacing and before its edits; the
difference: a listed word the spelling rule corrects stays corrected here).

Two measurements on a bundle, each word resolved with the default options with and without the rule:
`probe`, 59 one-word compounds a person might type that the encoder lacks, written before the rule existed;
`sweep`, every listed word the encoder lacks. Rows that differ are listed.

    python -m lab.closed_compounds --bundle ~/.cache/taper-sdk/words/tiny-imagenet.taper \\
        --out docs/results/closed_compounds                  # needs Debian's wordnet-base; ~1 min here
    python -m lab.closed_compounds --bundle ~/.cache/taper-sdk/words/tiny-imagenet.taper --list spaced \\
        --out docs/results/closed_compounds_spaced           # the second list (`spaced`)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from scripts.results import write_result
from scripts.wordnet_files import PHYSICAL_ENTITY, WORDNET, ancestry, read_lemmas, read_nouns

MIN_PART_CHARS = 3   # "ballgame" -> "ball game"
PROBE = """ballgames housefly houseflies seabirds songbirds shorebirds warplanes racecars seashells rowboats
footwear swimwear sportswear tableware headgear bluebirds blackbirds sailboats shellfish starfish firefly
seahorse fireflies pineapple dragonflies ladybugs raincoats sunhats sweatshirts cookware kitchenware silverware
flatware glassware bakeware outerwear nightwear menswear farmyard wildfowl waterfowl gamebirds bobcats housecats
tomcats sheepdogs lapdogs watchdogs snowmobiles motorboats steamboats airships spaceships minivans streetcars
handcarts pushcarts wheelbarrows saltwater""".split()
COMMAND = ("python -m lab.closed_compounds --bundle ~/.cache/taper-sdk/words/tiny-imagenet.taper "
           "--out docs/results/closed_compounds")
SPACED_COMMAND = ("python -m lab.closed_compounds --bundle ~/.cache/taper-sdk/words/tiny-imagenet.taper --list spaced "
                  "--out docs/results/closed_compounds_spaced")


def closed(wordnet: Path = WORDNET) -> dict[str, str]:
    """The listed words -> their two words ("ballgame" -> "ball game"): nouns written in lower case in some synset,
    of ASCII letters, none of whose senses is under 'physical entity', that split into a WordNet word (any part of
    speech) and a noun, each of at least MIN_PART_CHARS letters, the noun's senses including one of the
    compound's hypernyms (instance hypernyms too); the first such split by the length of the first word."""
    hypernyms, senses, lower, _ = read_nouns(wordnet)
    lemmas, ancestors = read_lemmas(wordnet), ancestry(hypernyms)

    found = {}
    for lemma, offsets in senses.items():
        written = lemma.isascii() and lemma.isalpha() and lemma in lower
        if not written or any(PHYSICAL_ENTITY in ancestors(o) for o in offsets):
            continue
        for cut in range(MIN_PART_CHARS, len(lemma) - MIN_PART_CHARS + 1):
            first, last = lemma[:cut], lemma[cut:]
            if first in lemmas and any(ancestors(o) & set(senses.get(last, ())) for o in offsets):
                found[lemma] = f"{first} {last}"
                break
    return found


def spaced(wordnet: Path = WORDNET) -> dict[str, str]:
    """A second list (`--list spaced`, thirty-fourth session): the one-word nouns of ASCII letters whose own synset
    also holds them written as two words, WordNet's spaced synonym ("ballgame" and "ball game" are one sense; so are
    "postcard" and "post card") -> those two words. No test of kind or of what a camera sees: WordNet's word alone."""
    _, senses, _, _ = read_nouns(wordnet)
    by_synset: dict[str, set[str]] = {}
    for lemma, offsets in senses.items():
        for offset in offsets:
            by_synset.setdefault(offset, set()).add(lemma)
    found = {}
    for lemmas in by_synset.values():
        for lemma in lemmas:
            two = [m for m in lemmas if m.count("_") == 1 and m.replace("_", "") == lemma]
            if lemma.isascii() and lemma.isalpha() and two:
                found[lemma] = two[0].replace("_", " ")
    return found


def with_rule(resolver, listed: dict[str, str]):
    """A copy of `resolver` that reads a listed word rule 4a tells missing as its two words, if they take classes."""
    import copy

    from sdk.errors import DescriptionError
    from sdk.text.resolver.options import MISSING
    from sdk.text.resolver.words import normalize_name, singular_forms

    tried = copy.copy(resolver)
    plain = resolver._resolve_phrase

    def resolve_phrase(phrase, options, single, excluded=None):
        indices, why, seconds = plain(phrase, options, single, excluded)
        key = normalize_name(phrase)
        form = next((f for f in (key, *singular_forms(key)) if f in listed), None)
        if indices or not why.startswith(MISSING) or " " in key or form is None or resolver.is_word(key):
            return indices, why, seconds
        cut = listed[form].index(" ")
        split = f"{key[:cut]} {key[cut:]}"
        try:
            found, how, more = plain(split, options, single, excluded)
        except DescriptionError:
            return indices, why, seconds
        return (found, f"read as {split!r} (a compound, WordNet's): {how}", seconds + more) if found else (
            indices, why, seconds)

    tried._resolve_phrase = resolve_phrase
    return tried


def answer(resolver, names: list[str], text: str) -> dict:
    """The classes a description takes (names) and how, or the refusal."""
    from sdk.errors import DescriptionError

    try:
        task = resolver.resolve(text)
        return {"classes": [names[i] for i in task.classes], "how": task.how}
    except DescriptionError as e:
        return {"classes": [], "how": [str(e)]}


def compare(classes: list[str], resolvers: dict, words: list[str]) -> dict:
    """Each word's answer by each of two resolvers (label -> resolver), for the words whose answers differ; and how
    many words there were and how many differ."""
    changed = {}
    for word in words:
        answers = {label: answer(resolver, classes, word) for label, resolver in resolvers.items()}
        if len({repr(a) for a in answers.values()}) > 1:
            changed[word] = answers
    return {"words": len(words), "changed": len(changed), "rows": changed}


def main(argv: list[str] | None = None) -> int:
    import sdk

    parser = argparse.ArgumentParser(prog="python -m lab.closed_compounds", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--wordnet", type=Path, default=WORDNET)
    parser.add_argument("--out", type=Path, default=None, help="write <OUT>.json")
    parser.add_argument("--list", choices=("closed", "spaced"), default="closed",
                        help="closed: the rule as tried (default); spaced: WordNet's spaced synonyms (`spaced`)")
    args = parser.parse_args(argv)
    bundle = sdk.load(args.bundle)
    listed = (closed if args.list == "closed" else spaced)(args.wordnet)
    both = {"without": bundle.resolver, "with": with_rule(bundle.resolver, listed)}
    result = {"bundle": args.bundle.name, "list": args.list, "listed": len(listed),
              "probe": compare(bundle.classes, both, PROBE),
              "sweep": compare(bundle.classes, both, [w for w in sorted(listed) if not bundle.embedder.is_word(w)]),
              "command": COMMAND if args.list == "closed" else SPACED_COMMAND}
    for name in ("probe", "sweep"):
        part = result[name]
        for word, row in part["rows"].items():
            print(f"{name} {word}: {row['without']['classes'][:4]} -> {row['with']['classes'][:6]}")
        print(f"{name}: {part['changed']} of {part['words']} changed")
    if args.out:
        write_result(result, args.out.with_suffix(".json"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
