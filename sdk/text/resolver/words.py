"""The words of descriptions: how text is checked and compared, English plurals, the edit distance, and the
word lists the rules read (each list's rule is named beside it)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

import numpy as np

from sdk.errors import DescriptionError

CONJUNCTIONS = frozenset({"and", "or", "&", "/"})
GLUED_CONJUNCTIONS = ("&", "/")   # rule 2 cuts at these unspaced too: "lemons/oranges"
ITEM_SEPARATORS = re.compile(r"[,;]")   # rule 2: an item ends at a comma or a semicolon ("cars; trucks")
END_MARKS = "!?.\u2026"   # rule 2: the marks that close an item say nothing of what it names ("Dogs!!", "cats?")
PARENTHESIS = re.compile(r"\(([^()]*)\)")   # rule 2: "insects (no bees)" (`opened_exclusions`)
QUOTES = {'"': '"', "'": "'", "\u201c": "\u201d", "\u2018": "\u2019"}   # ... nor the quotes around it
# Rule 2: words that make an item a gloss, which is not cut at its conjunctions (issue 50: "a drinking glass
# with a base and stem" was cut at "and", and 'stem' took the concept 'plant part').
GLOSS_WORDS = frozenset({"a", "an", "the", "with", "without", "of", "for", "in", "on", "at", "to", "from", "by",
                         "that", "which", "who", "whose", "having"})
# Rule 2: a comma part that opens with one of these, or with a participle (a word with one of PARTICIPLE_ENDINGS and
# at least as many letters as it gives: "used", "flying"; not "king"), after an item that opens with "a" or "an",
# describes that item and rejoins it ("a dog, used by the police": cut at the comma, 'used by the police' took the
# vehicles). "without" opens an exclusion (rule 2b) instead.
APPOSITIVE_OPENERS = GLOSS_WORDS - {"a", "an", "the", "without"}
PARTICIPLE_ENDINGS = {"ed": 4, "ing": 5}
# Rule 3b. The kind nouns are those the exporter's class facets are named with ("small animals", "wooden
# things", "slimy creatures"), so a bare modifier ("small", "wooden") finds its facet.
EXCLUSION_PREFIX = "non-"
# Each list is searched in order, so a word that begins a longer one comes after it ("except for" before "except").
OPENING_EXCLUSIONS = ("except for", "except", "excluding", "but not", "but no", "other than", "apart from",
                      "aside from", "without")   # may open an item too (rule 2b)
EXCLUSION_WORDS = (*OPENING_EXCLUSIONS, "besides", "minus", "not including", "that are not", "that aren't",
                   "which are not", "which aren't", "that is not", "that isn't", "which is not", "which isn't")
# Rule 3b reads the part before an exclusion past one of these as past an article ("all dogs except the chihuahua"),
# and after one "but" excludes too ("every dog but the chihuahua"; experiments.md, "What a phrase leaves out, in more
# words": each of these had taken the Chihuahua alone)
QUANTIFIERS = ("all", "every", "any")
QUANTIFIED_EXCLUSION = "but"
# Rule 2b: an item or part that begins with one of these leaves out what the rest of it names ("birds, not
# penguins"), and so does one of EVERYTHING before an exclusion word or "but" ("everything except cats", "all
# but insects"); a description of nothing else takes every other class ("no birds"). Without the rule, the text
# encoder read "no birds" as near 'birds' as "birds", and took them (experiments.md, "What an item leaves out").
NEGATIONS = ("not", "no", *OPENING_EXCLUSIONS)
EVERYTHING = ("everything", "anything", "all", "things", "something", "a thing")   # "a thing that is not food" too
ARTICLES = ("a", "an", "the")   # rules 1, 3b and 4b read a name past one: "a grizzly", "a dog that is not a poodle"
KIND_NOUNS = ("animals", "things", "creatures")
# Rule 4a: a phrase ending in one of these describes (by meaning: rule 5) rather than names a missing item
DESCRIBING_NOUNS = frozenset({*KIND_NOUNS, "stuff", "items", "objects"})
# ... and so does a phrase holding a gloss word or one of these ("my pets", "all kinds of dogs")
DESCRIBING_WORDS = GLOSS_WORDS | {"my", "our", "your", "their", "his", "her", "its", "some", "all", "any", "every",
                                  "different", "kind", "kinds", "type", "types", "sort", "sorts"}
# Rule 6: words that say nothing of what a class is, in a description or a gloss ("a bird that cannot fly")
STOP_WORDS = GLOSS_WORDS | {
    "and", "or", "but", "not", "nor", "into", "onto", "over", "under", "about", "as", "like", "than", "where", "when",
    "what", "whom", "has", "have", "had", "is", "are", "was", "were", "be", "been", "being", "it", "its", "they",
    "them", "their", "you", "your", "one", "ones", "can", "cannot", "could", "may", "might", "will", "would", "does",
    "do", "did", "very", "any", "some", "all", "each", "other", "such", "often", "usually", "especially", "typically",
    "various", "use", "used", "uses", "thing", "things", "kind", "kinds", "type", "sort", "also", "etc", "this",
    "these", "those", "there", "here", "so", "too", "more", "most", "much"}
# Unicode categories refused in a description: control (tab and newlines aside), format (zero-width and
# bidirectional marks: invisible, and able to make two different strings look alike), surrogate, private
# use and unassigned.
REFUSED_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn"}
ALLOWED_CONTROLS = {"\t", "\n", "\r"}
IRREGULAR_PLURALS = {
    "geese": "goose", "mice": "mouse", "lice": "louse", "teeth": "tooth", "feet": "foot", "oxen": "ox",
    "children": "child", "men": "man", "women": "woman", "people": "person", "dice": "die", "cacti": "cactus",
    "fungi": "fungus", "octopi": "octopus", "larvae": "larva", "antennae": "antenna", "wolves": "wolf",
    "knives": "knife", "leaves": "leaf", "loaves": "loaf", "halves": "half", "shelves": "shelf", "calves": "calf",
    "thieves": "thief", "wives": "wife", "lives": "life", "scarves": "scarf", "hooves": "hoof",
}


def check_text(text: str, what: str = "the description") -> str:
    """`text` if it is valid, visible Unicode text; DescriptionError naming the first bad character."""
    for i, ch in enumerate(text):
        category = unicodedata.category(ch)
        if category in REFUSED_CATEGORIES and ch not in ALLOWED_CONTROLS:
            kind = {"Cs": "an unpaired surrogate", "Cf": "an invisible formatting character",
                    "Co": "a private-use character", "Cn": "an unassigned code point"}.get(category,
                                                                                           "a control character")
            raise DescriptionError(f"{what} holds {kind} (U+{ord(ch):04X}) at position {i}")
    return text


def singular_forms(phrase: str) -> list[str]:
    """`phrase` with its last word made singular by English rules, most likely first ("butterflies" ->
    ["butterfly", ...], "wolves" -> ["wolf", ...], "geese" -> ["goose"]); [] if it does not look plural."""
    head, _, word = phrase.rpartition(" ")
    prefix = head + " " if head else ""
    if word in IRREGULAR_PLURALS:
        return [prefix + IRREGULAR_PLURALS[word]]
    forms = []
    if word.endswith("ies") and len(word) > 4:
        forms.append(word[:-3] + "y")
    if word.endswith("ves") and len(word) > 4:
        forms += [word[:-3] + "f", word[:-3] + "fe"]
    if word.endswith("es") and len(word) > 3:
        forms.append(word[:-2])
    if word.endswith("s") and not word.endswith("ss") and len(word) > 2:
        forms.append(word[:-1])
    return [prefix + f for f in forms]


def edit_distance(a: str, b: str, limit: int) -> int:
    """Optimal string alignment distance of two strings (insertions, deletions, substitutions and swaps of
    neighbours, each 1), or limit + 1 if it is more than `limit`. Rule 3c's measure (TaskResolver.java too).

    >>> edit_distance("insetcs", "insects", 2), edit_distance("cat", "dog", 1)
    (1, 2)
    """
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], prev2[j - 2] + 1)
        if min(row) > limit:
            return limit + 1
        prev2, prev = prev, row
    return min(prev[len(b)], limit + 1)


def without_article(name: str, leading: Sequence[str] = ARTICLES) -> str:
    """The name without an article (or another of `leading`: rule 3b's QUANTIFIERS) before it: "a dog that is not a
    poodle" composes as "dogs except poodles" (rule 3b); "a beagle" is the kind "beagle" (rule 4b).

    >>> without_article("a beagle"), without_article("all the dogs", QUANTIFIERS), without_article("a")
    ('beagle', 'the dogs', 'a')
    """
    first, _, rest = name.partition(" ")
    return rest if first in leading and rest else name


def unit_mean(rows) -> np.ndarray:
    """The normalised mean of embedding rows, float32: a task's embedding from its classes' (as in training)."""
    mean = np.mean(rows, axis=0)
    return (mean / max(float(np.linalg.norm(mean)), 1e-12)).astype(np.float32)


def opened_exclusions(text: str) -> str:
    """Rule 2: a parenthesis that opens with a negation (NEGATIONS) cut off as a comma part is, so that rule 2b leaves
    out what it names (the text encoder took "insects (no bees)" whole, and the bee with it); any other parenthesis
    stays in its item.

    >>> opened_exclusions("insects (no bees), dogs (small ones)")
    'insects , no bees, dogs (small ones)'
    """
    def cut(found: re.Match) -> str:
        inner = normalize_name(found.group(1))
        return f", {found.group(1)}" if any(inner.startswith(f"{n} ") for n in NEGATIONS) else found.group(0)
    return PARENTHESIS.sub(cut, text)


def unmarked(item: str) -> str:
    """Rule 2: the item without the marks that close it (END_MARKS) and the quotes around it; itself if nothing is left.

    >>> unmarked('"Dogs"!!'), unmarked("cats?"), unmarked("..."), unmarked("St. Bernard.")
    ('Dogs', 'cats', '...', 'St. Bernard')
    """
    text = item.rstrip(END_MARKS).strip()
    if len(text) >= 2 and QUOTES.get(text[0]) == text[-1]:
        text = text[1:-1].rstrip(END_MARKS).strip()
    return text or item


def normalize_name(text: str) -> str:
    """How names are compared: case, surrounding space, runs of spaces/underscores and the Unicode spelling
    (NFC: "é" as one code point or as "e" plus an accent) do not count."""
    return unicodedata.normalize("NFC", re.sub(r"[\s_]+", " ", text.strip().lower()))
