"""Rule 6: a described kind of thing picked by the words its description shares with a class's.

A phrase that describes one kind of thing ("a big cat with a mane") is read by its meaning (rules 4 and 5), which
takes a whole concept (every cat) or the classes nearest by name. Of those candidates, this rule keeps the ones
whose own words say what the phrase says: a class's words are its name, its aliases, its description (the
vocabulary's, or the gloss of its WordNet sense, which the exporter adds to a bundle of one's own classes) and the
names of the concepts that hold it but not every candidate. A phrase word that matches some candidates but not all
is evidence for each of them, weighted 1 / (how many it matches): "mane" (only the lion's gloss) outweighs "cat"
(three cats' names). The candidates with the most evidence are kept, if that is fewer than all; where no word tells
them apart nothing changes. Words only, no text encoder: the embedding-scored rule measured before it narrowed as
often wrongly as rightly (docs/results/experiments.md, "Words people use, part 3").

>>> described("a big cat with a mane", [3, 5, 7], [{"tabbi", "cat"}, {"persian", "cat"}, {"lion", "mane"}])
([7], ['mane'])
"""

from __future__ import annotations

from collections.abc import Sequence

from .words import STOP_WORDS

SUFFIXES = ("ing", "ed", "es", "s", "ly")   # cut once, the first that leaves at least MIN_STEM letters
MIN_STEM = 3
MIN_PREFIX = 5      # "antarctic" matches "antarctica": one stem begins the other, and is this long at least
MIN_WORDS = 3       # "a tiny dog": an article and at least two more words describe one kind of thing
OPENING = ("a", "an")
TIE = 1e-9


def describes_one(key: str) -> bool:
    """Whether a normalised phrase describes one kind of thing: "a"/"an" first, then at least two words.

    >>> describes_one("a big cat with a mane"), describes_one("a dog"), describes_one("big cats")
    (True, False, False)
    """
    words = key.split(" ")
    return len(words) >= MIN_WORDS and words[0] in OPENING


def letter_words(text: str) -> list[str]:
    """The runs of ASCII letters in `text`, lower-cased, and each hyphenated run also joined ("dog-like" gives
    "dog", "like", "doglike"). ASCII only, so that the Java mirror cuts every text the same way.

    >>> letter_words("A dog-like face, Antarctic")
    ['a', 'dog', 'like', 'doglike', 'face', 'antarctic']
    """
    out: list[str] = []
    run: list[str] = []          # the letter runs of the current hyphenated word
    word = ""
    for ch in text + " ":
        if "A" <= ch <= "Z" or "a" <= ch <= "z":
            word += ch.lower()
            continue
        if word:
            run.append(word)
            out.append(word)
            word = ""
        if ch != "-":
            if len(run) > 1:
                out.append("".join(run))
            run = []
    return out


def stem(word: str) -> str:
    """`word` with one of SUFFIXES cut, if at least MIN_STEM letters remain ("glides", "gliding" -> "glid")."""
    for suffix in SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= MIN_STEM:
            return word[: -len(suffix)]
    return word


def content_stems(text: str) -> list[str]:
    """The stems of `text`'s words that carry meaning: no stop word, none under MIN_STEM letters; each once, in
    order."""
    out: list[str] = []
    for word in letter_words(text):
        if len(word) >= MIN_STEM and word not in STOP_WORDS and stem(word) not in out:
            out.append(stem(word))
    return out


def matches(a: str, b: str) -> bool:
    """Whether two stems are one word: equal, or one begins the other and is MIN_PREFIX letters at least."""
    if a == b:
        return True
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    return len(short) >= MIN_PREFIX and long.startswith(short)


def described(key: str, candidates: Sequence[int],
              class_stems: Sequence[set[str]]) -> tuple[list[int], list[str]] | None:
    """(the candidates kept, the phrase words that decided) if the phrase's words tell some candidates from the
    rest, else None. `class_stems[i]` holds candidate i's word stems (in the order of `candidates`)."""
    evidence = [0.0] * len(candidates)
    deciding: list[str] = []
    for word in content_stems(key):
        hits = [i for i, stems in enumerate(class_stems) if any(matches(word, s) for s in stems)]
        if not hits or len(hits) == len(candidates):
            continue
        deciding.append(word)
        for i in hits:
            evidence[i] += 1.0 / len(hits)
    best = max(evidence, default=0.0)
    if best <= 0:
        return None
    kept = [c for c, e in zip(candidates, evidence, strict=True) if e >= best - TIE]
    if len(kept) == len(candidates):
        return None
    return kept, [w for w in deciding if any(e >= best - TIE and any(matches(w, s) for s in stems)
                                             for e, stems in zip(evidence, class_stems, strict=True))]
