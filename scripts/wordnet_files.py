"""WordNet 3.0's files, read for the lists the resolver ships (scripts/exocentric_compounds.py,
scripts/english_words.py) and the lab's experiments on them: one owner for where WordNet lies, how its noun files
are parsed, and how a list derived from it is written (a '#' header with WordNet's license, which asks for its
notice on copies, then one entry a line).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import cache
from pathlib import Path

WORDNET = Path("/usr/share/wordnet")   # Debian's wordnet-base, which set-up installs
PHYSICAL_ENTITY = "00001930"   # WordNet 3.0's synset offset of 'physical entity'
PARTS_OF_SPEECH = ("noun", "verb", "adj", "adv")


def read_nouns(wordnet: Path) -> tuple[dict[str, list[str]], dict[str, list[str]], set[str], str]:
    """(synset offset -> its hypernym offsets, lemma -> its synset offsets, lemmas written in lower case
    in some synset, WordNet's license text) from data.noun and index.noun."""
    hypernyms: dict[str, list[str]] = {}
    lower: set[str] = set()
    with open(wordnet / "data.noun", encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("  "):
                continue
            fields = line.split(" ")
            count = int(fields[3], 16)
            lower.update(w for w in (fields[4 + 2 * i].split("(")[0] for i in range(count)) if w == w.lower())
            i = 4 + 2 * count
            pointers = int(fields[i])
            i += 1
            hypernyms[fields[0]] = [fields[i + 4 * k + 1] for k in range(pointers)
                                    if fields[i + 4 * k] in ("@", "@i") and fields[i + 4 * k + 2] == "n"]
    senses: dict[str, list[str]] = {}
    with open(wordnet / "index.noun", encoding="utf-8") as f:
        for line in f:
            if line.startswith("  "):
                continue
            fields = line.split()
            pointer_count = int(fields[3])
            senses[fields[0]] = fields[4 + pointer_count + 2:]
    return hypernyms, senses, lower, read_license(wordnet)


def read_license(wordnet: Path) -> str:
    """WordNet's license text: data.noun's header, its lines that start with two spaces and a line number."""
    lines = []
    with open(wordnet / "data.noun", encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.startswith("  "):
                break
            lines.append(line[2:].split(" ", 1)[1].rstrip() if " " in line[2:] else "")
    return "\n".join(lines).strip()


def read_lemmas(wordnet: Path) -> set[str]:
    """Every lemma of WordNet's four index files (noun, verb, adjective, adverb), as written there."""
    lemmas: set[str] = set()
    for pos in PARTS_OF_SPEECH:
        with open(wordnet / f"index.{pos}", encoding="utf-8") as f:
            lemmas.update(line.split(" ", 1)[0] for line in f if not line.startswith("  "))
    return lemmas


def ancestry(hypernyms: dict[str, list[str]]) -> Callable[[str], frozenset[str]]:
    """A synset offset -> every offset above it (hypernyms, instance hypernyms too), cached."""
    @cache
    def ancestors(offset: str) -> frozenset[str]:
        out: set[str] = set()
        for parent in hypernyms[offset]:
            out |= {parent, *ancestors(parent)}
        return frozenset(out)

    return ancestors


def arguments(description: str, out: Path, argv: list[str] | None) -> argparse.Namespace:
    """A list script's `--wordnet` and `--out`, and a clear exit where WordNet's files are missing."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--wordnet", type=Path, default=WORDNET)
    parser.add_argument("--out", type=Path, default=out)
    args = parser.parse_args(argv)
    if not (args.wordnet / "data.noun").is_file():
        raise SystemExit(f"{args.wordnet}/data.noun not found (apt-get install wordnet-base)")
    return args


def listing(header: list[str], license_text: str, entries: list[str]) -> str:
    """A derived list's text: the header and WordNet's license as '#' lines, then one entry a line."""
    lines = [*header, "", *license_text.splitlines()]
    return "".join(f"# {line}".rstrip() + "\n" for line in lines) + "".join(e + "\n" for e in entries)
