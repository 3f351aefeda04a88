"""Rule 3c: a phrase that names nothing and holds a word the text encoder's vocabulary does not is read as the
name one edit away (two for one word of SPELLING_LONG_CHARS or more characters): "insetcs" -> "insects",
"retreivers" -> "retrievers". Real words are never corrected ("horse" is no typo of 'hose', nor "seahorse", which
the vocabulary lacks and WordNet has, of 'seashore'; the pipeline's `_real`), nor short ones;
but a name written with its spaces elsewhere is read as that name, real words or not ("jelly fish").

>>> spelling(names, "insetcs")                                              # doctest: +SKIP
'insects'
"""

from __future__ import annotations

from .names import Names
from .words import edit_distance

# A word of at least SPELLING_MIN_CHARS characters at most one edit (two from SPELLING_LONG_CHARS) from a name
# is read as that name (an edit: a letter added, dropped, changed, or two neighbours swapped). Shorter words
# are left alone: "cat" is one edit from "car".
SPELLING_MIN_CHARS, SPELLING_LONG_CHARS = 4, 8


def joined(names: Names, key: str) -> str | None:
    """The name `key` writes with its letters spaced otherwise ("jelly fish" -> 'jellyfish', "tea pot" ->
    'teapot', "seaslug" -> 'sea slug'), None if none or `key` is short. Tried before the real-word gate of
    `spelling`: "jelly" and "fish" are real words, and 'jellyfish' is no correction of them but their compound."""
    closed = key.replace(" ", "")
    name = names.closed.get(closed) if len(closed) >= SPELLING_MIN_CHARS else None
    return name if name != key else None


def spelling(names: Names, key: str) -> str | None:
    """The name one edit from `key` (two from SPELLING_LONG_CHARS characters for one word), the nearest and
    then the first in sorted order; None if there is none or `key` is short."""
    n = len(key)
    if n < SPELLING_MIN_CHARS:
        return None
    limit = 1 if n < SPELLING_LONG_CHARS or " " in key else 2   # a phrase: one edit ("medical things" is
    #                                                               two from "musical things")
    best, best_distance = None, limit + 1
    for name in names.names:
        if abs(len(name) - n) <= limit and len(name) >= SPELLING_MIN_CHARS:
            d = edit_distance(key, name, limit)
            if d < best_distance:
                best, best_distance = name, d
    return best
