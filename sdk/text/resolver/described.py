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

A negation inside such a phrase ("a bird that cannot fly") says what the kind is not or lacks (rule 6b): `negation`
cuts the phrase into the rest, which the resolver reads as a phrase of its own ("a bird"), and the negated words,
which then count for the candidates whose words lack them. Before, a negated word counted as a shared one ("a big
cat without a mane" kept the lion; docs/results/experiments.md, "What a described thing is not").

>>> described("a big cat with a mane", [3, 5, 7], [{"tabbi", "cat"}, {"persian", "cat"}, {"lion", "mane"}])
([7], ['mane'])
>>> described("", [3, 7], [{"cougar"}, {"lion", "mane"}], negated="a mane")
([3], ['mane'])
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .words import STOP_WORDS

SUFFIXES = ("ing", "ed", "es", "s", "ly")   # cut once, the first that leaves at least MIN_STEM letters
MIN_STEM = 3
MIN_PREFIX = 5      # "antarctic" matches "antarctica": one stem begins the other, and is this long at least
MIN_WORDS = 3       # "a tiny dog": an article and at least two more words describe one kind of thing
OPENING = ("a", "an")
TIE = 1e-9
# Rule 6b: a negation inside a described kind, after its first NEGATION_FROM words ("a bird that cannot fly"; not
# words.NEGATIONS, rule 2b's, which open an item), with the words that lead into it ("that does not", "with no"); the
# negated part ends at a NEGATION_ENDS word
INNER_NEGATIONS = frozenset({"not", "no", "without", "never", "cannot", "isn't", "aren't", "doesn't", "don't",
                             "can't", "hasn't", "haven't", "won't", "didn't", "wasn't", "weren't"})
NEGATION_FROM = 2
NEGATION_LEADS = frozenset({"is", "are", "was", "were", "be", "does", "do", "did", "has", "have", "had", "can",
                            "could", "will", "would", "with"})
NEGATION_ENDS = frozenset({"and", "but", "that", "which", "who", "with"})   # "not orange or brown": one part
RELATIVES = frozenset({"that", "which", "who"})
# ... and a class's own description says what it lacks with these (`affirmed`), in clauses cut at CLAUSE_MARKS
LACKING = frozenset({"not", "no", "without", "never", "cannot", "lacking", "lacks", "lack"})
CLAUSE_MARKS = re.compile(r"[,;:.()]")
NON_WORD = re.compile(r"(?<![A-Za-z])[Nn][Oo][Nn]-[A-Za-z]+")
ASCII_SPACE = re.compile(r"[ \t\n\r\f\x0b]+")


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


def affirmed(description: str) -> str:
    """A class's description without what it says the class is not or lacks, for rule 6's words: each "non-X"
    left out, and within each clause (cut at CLAUSE_MARKS) the words from one of LACKING to a NEGATION_ENDS word or
    the clause's end. ASCII whitespace only, so that the Java mirror cuts every text the same way.

    >>> affirmed("marine crustacean having a spiny carapace but lacking the large pincers; edible")
    'marine crustacean having a spiny carapace but edible'
    >>> affirmed("slender-bodied non-stinging insect")
    'slender-bodied insect'
    """
    kept: list[str] = []
    for clause in CLAUSE_MARKS.split(NON_WORD.sub(" ", description)):
        negated = False
        for word in ASCII_SPACE.split(clause):
            lower = word.lower() if word.isascii() else ""   # ASCII case only, as the Java mirror folds it
            if lower in LACKING:
                negated = True
            elif lower in NEGATION_ENDS:
                negated = False
            if word and not negated:
                kept.append(word)
    return " ".join(kept)


def negation(key: str) -> tuple[str, str] | None:
    """(the rest, the negated part) of a normalised phrase that describes one kind of thing and says, after its
    first NEGATION_FROM words, what it is not or lacks; None if it says no such thing. The negated part runs from
    the negation to a NEGATION_ENDS word or the end ("or" is none: "not orange or brown" negates both); the rest
    is the phrase without it (and without the "and" or "but" that ends it, or a relative word left at the end).

    >>> negation("a bird that cannot fly and lives in antarctica")
    ('a bird that lives in antarctica', 'fly')
    >>> negation("a lobster with no pincers"), negation("a big cat")
    (('a lobster', 'pincers'), None)
    """
    if not describes_one(key):
        return None
    words = key.split(" ")
    at = next((i for i in range(NEGATION_FROM, len(words)) if words[i] in INNER_NEGATIONS), None)
    if at is None:
        return None
    start = at
    while start > NEGATION_FROM and words[start - 1] in NEGATION_LEADS:
        start -= 1
    end = next((j for j in range(at + 1, len(words)) if words[j] in NEGATION_ENDS), len(words))
    after = words[end + 1:] if end < len(words) and words[end] in ("and", "but") else words[end:]
    rest = words[:start]
    if not after:
        while rest and rest[-1] in RELATIVES:
            rest.pop()
    negated = " ".join(words[at + 1:end])
    if len(rest) < 2 or not content_stems(negated):
        return None
    return " ".join(rest + after), negated


def described(key: str, candidates: Sequence[int], class_stems: Sequence[set[str]],
              negated: str = "") -> tuple[list[int], list[str]] | None:
    """(the candidates kept, the phrase words that decided) if the phrase's words tell some candidates from the
    rest, else None. `class_stems[i]` holds candidate i's word stems (in the order of `candidates`). A word of
    `negated` (rule 6b) counts for the candidates that lack it, as a word of `key` counts for those that have it."""
    evidence = [0.0] * len(candidates)
    deciding: list[str] = []
    lacked = content_stems(negated)
    for word, against in [(w, False) for w in content_stems(key)] + [(w, True) for w in lacked]:
        hits = [i for i, stems in enumerate(class_stems) if any(matches(word, s) for s in stems) != against]
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
    return kept, [w for w in deciding if any(
        e >= best - TIE and any(matches(w, s) for s in stems) != (w in lacked)
        for e, stems in zip(evidence, class_stems, strict=True))]
