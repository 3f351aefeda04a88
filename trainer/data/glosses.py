"""WordNet glosses (definitions) of classes, for the free-language evaluation (paper 5.1).

Read from WordNet 3.0's `data.noun` (Debian package `wordnet-base`: /usr/share/wordnet/data.noun),
keyed by the synset offsets of Tiny ImageNet's ids ("n02124075" -> offset 02124075).

>>> read_glosses(["n02124075"])          # doctest: +SKIP
['a domestic cat of Egypt']
"""

from __future__ import annotations

import re
from pathlib import Path

from .errors import DataError

WORDNET_NOUNS = Path("/usr/share/wordnet/data.noun")
WNID = re.compile(r"n\d{8}")   # a WordNet 3.0 noun sense: "n" and its offset in data.noun (Tiny ImageNet's ids)


def parse_gloss(line: str) -> str:
    """The definition part of a data.noun line: after ' | ', before the first quoted example."""
    _, sep, gloss = line.partition(" | ")
    if not sep:
        raise ValueError("no gloss separator")
    return gloss.split('; "')[0].strip().rstrip(";").strip()


def read_glosses(wnids: list[str], data_noun: Path = WORDNET_NOUNS) -> list[str]:
    """One gloss per class id; DataError naming the file if it is missing or lacks an id."""
    wanted = {w[1:]: w for w in wnids if w.startswith("n") and w[1:].isdigit()}
    if len(wanted) != len(wnids):
        odd = [w for w in wnids if w[1:] not in wanted][:3]
        raise DataError(f"glosses need WordNet noun ids like n02124075; got {odd}")
    found: dict[str, str] = {}
    try:
        with open(data_noun, encoding="utf-8", errors="replace") as f:
            for line in f:
                offset = line[:8]
                if offset in wanted:
                    found[wanted[offset]] = parse_gloss(line)
    except FileNotFoundError:
        raise DataError(f"{data_noun}: WordNet data not found (apt-get install wordnet-base)") from None
    missing = [w for w in wnids if w not in found]
    if missing:
        raise DataError(f"{data_noun}: no synset for {missing[:5]}")
    return [found[w] for w in wnids]
