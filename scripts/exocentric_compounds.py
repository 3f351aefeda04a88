"""Write sdk/text/exocentric_compounds.txt: two-word nouns that are no kind of their last word, from WordNet 3.0.

    python -m scripts.exocentric_compounds            # needs Debian's wordnet-base (/usr/share/wordnet)

English compounds name a kind of their last word ("sled dog" is a dog, "fire truck" a truck), and the
resolver (rule 4a of sdk/text/resolver/) trusts that: a phrase whose last word is a word of a bundle's names is
no missing item. Some are not: a "hot dog" is a sausage, a "prairie dog" a rodent, a "teddy bear" a toy.
The text encoder cannot tell them apart (all-MiniLM-L6-v2 puts "hot dog" as near "dog" as "sled dog" is:
0.80 and 0.78), so issue 60's "hot dog" took a bundle's six dog breeds. WordNet can: a compound is listed
when it is a noun of exactly two lower-case alphabetic words, its last word has a sense under
'physical entity', at least one of its own senses is under 'physical entity' (things a camera sees),
and none of its senses has a physical sense of the last word among its hypernyms (instance hypernyms
included). A compound that is itself a synonym of one of the last word's senses ("hot dog": dog, sense 5,
a frankfurter; "big cat": cat, sense 7) is listed too: the bundle's 'dogs' mean the animal. The cost, said
in docs/training.md: such a phrase on a bundle that means that other sense ("musical instrument" on a
bundle whose group is 'instruments') is told missing rather than taken (the group's own name still works).

Both readers load the file (sdk/text/compounds.py; the Java core's Compounds.java from its class path).
"""

from __future__ import annotations

from pathlib import Path

from scripts.wordnet_files import PHYSICAL_ENTITY, WORDNET, ancestry, arguments, listing, read_nouns

OUT = Path(__file__).resolve().parents[1] / "sdk" / "text" / "exocentric_compounds.txt"


def exocentric(wordnet: Path = WORDNET) -> tuple[list[str], str]:
    """The listed compounds ("hot dog", ...), sorted, and WordNet's license text."""
    hypernyms, senses, lower, license_text = read_nouns(wordnet)
    ancestors = ancestry(hypernyms)

    def physical(offset: str) -> bool:
        return PHYSICAL_ENTITY in ancestors(offset)

    found = []
    for lemma, offsets in senses.items():
        words = lemma.split("_")
        if len(words) != 2 or not all(w.isalpha() for w in words) or lemma not in lower:
            continue
        head = {o for o in senses.get(words[1], []) if physical(o)}
        if head and any(map(physical, offsets)) and not any(ancestors(o) & head for o in offsets):
            found.append(" ".join(words))
    return sorted(found), license_text


def main(argv: list[str] | None = None) -> None:
    args = arguments(__doc__.split("\n\n")[0], OUT, argv)
    compounds, license_text = exocentric(args.wordnet)
    header = ["Two-word nouns that are no kind of their last word ('hot dog' is no dog), one per line:",
              "rule 4a of sdk/text/resolver/ tells them missing rather than taking the last word's group.",
              "Written by `python -m scripts.exocentric_compounds` from WordNet 3.0 (see that script for",
              "the criterion); do not edit by hand. WordNet's license, which asks for its notice on copies:"]
    tmp = args.out.with_name(args.out.name + ".tmp")
    tmp.write_text(listing(header, license_text, compounds), encoding="utf-8")
    tmp.replace(args.out)
    print(f"wrote {len(compounds)} compounds to {args.out}")


if __name__ == "__main__":
    main()
