"""Rules 3d, 4a and 4b: items the bundle lacks. One word that names nothing but ends class names ("trains")
takes the classes so named and says the word itself is no class. A kind the bundle lacks below one of its
concepts ("beagle" below 'hunting dog') is told missing with that concept's group (rule 4b). An item that
names nothing (one word that is no name and no word of a name, "owl"; a few words none of which is a word of
a name, "polar bear"; a two-word noun that is no kind of its last word, "hot dog") is told missing with its
closest classes (`missing="tell"`, the default), or, with `missing="nearest"`, takes its nearest classes.

>>> unknown(names, exocentric, "owl"), told(classes, scores)                # doctest: +SKIP
(True, "not a name this bundle knows: nothing taken for it (closest classes: 'goose', 'bee', 'pig'); to add it, ...")
"""

from __future__ import annotations

import re

import numpy as np

from sdk.errors import DescriptionError
from sdk.format.bundle import ClassInfo

from .names import Names
from .options import MAX_GROUP_CLASSES, MISSING, TaskOptions
from .similarity import top
from .words import DESCRIBING_NOUNS, DESCRIBING_WORDS, normalize_name, singular_forms, without_article

CLOSEST_NAMES = 3        # rule 4a names this many closest classes for a missing item
# ... and says how to have it anyway: few-shot enrollment (sdk.personalize's `examples`, sdk/fewshot.py)
ADD_IT = "to add it, give a few photos of it as examples"


def unknown(names: Names, exocentric: frozenset[str], key: str) -> bool:
    """Whether the normalised phrase names nothing here: one word that is no name nor a word of one (nor is
    its singular), or a few words (no DESCRIBING_WORDS word, not ending in a DESCRIBING_NOUNS one: "my
    pets", "seaside creatures" describe) none of which, nor its singular, is a word of any name ("polar
    bear", "coffee mug"), or a compound that is no kind of its last word. One word or such a compound past an
    article is read without it ("a drone" is "drone": by the text encoder it had taken a banana, a bee and a
    chihuahua on the worked example; "a hot dog"); other words past one describe ("a steep rock face", by meaning)."""
    bare = without_article(key)
    if bare != key and (" " not in bare or exocentric_form(exocentric, bare) is not None):
        return unknown(names, exocentric, bare)
    words = key.split(" ")
    if len(words) == 1:   # "blue" on a bundle of "blue disc", "blue ring": a word its names use, not missing
        return key not in names.by_name and key not in names.groups and not any(
            f in names.words for f in (key, *singular_forms(key)))
    if any(w in DESCRIBING_WORDS for w in words) or words[-1] in DESCRIBING_NOUNS:
        return False
    return exocentric_form(exocentric, key) is not None or not any(
        f in names.words for w in words for f in (w, *singular_forms(w)))


def exocentric_form(exocentric: frozenset[str], key: str) -> str | None:
    """The form of `key` (itself or a singular: "hot dogs"; past an article: "a hot dog") that is a compound no kind
    of its last word, or None."""
    bare = without_article(key)
    return next((f for f in (bare, *singular_forms(bare)) if f in exocentric), None)


def told(classes: list[ClassInfo], scores: np.ndarray, compound: str | None = None) -> str:
    """With missing="tell": what the resolution says of an item the bundle lacks (`compound`: the exocentric
    compound it is, said so)."""
    closest = ", ".join(repr(classes[int(i)].name) for i in np.argsort(-scores, kind="stable")[:CLOSEST_NAMES])
    why = "" if compound is None else f" (read whole, not as a kind of {compound.rsplit(' ', 1)[1]!r})"
    return f"{MISSING}{why}: nothing taken for it (closest classes: {closest}); {ADD_IT}"


# Rule 4b's words naming the group (the Java core's toldKind writes the same), and how to read them back
KIND_OF, FROM_WORDNET = "is a kind of", "(from WordNet)"
_KIND_OF = re.compile(rf"{KIND_OF} (['\"])(.+?)\1 {re.escape(FROM_WORDNET)}")


def told_kind(classes: list[ClassInfo], names: Names, kind: str, concept: int) -> str:
    """Rule 4b: what the resolution says of a kind the bundle lacks (`names.kind`): missing, the group it
    belongs to, and what that group's name takes."""
    group = names.concepts[concept].names[0]
    found = names.group(normalize_name(group))
    members = found[1][:MAX_GROUP_CLASSES] if found else names.concepts[concept].members
    shown = ", ".join(repr(classes[i].name) for i in members[:CLOSEST_NAMES])
    more = ", ..." if len(members) > CLOSEST_NAMES else ""
    return (f"{MISSING}: {kind!r} {KIND_OF} {group!r} {FROM_WORDNET}, and no class here is one: nothing taken "
            f"for it; {group!r} takes its {len(members)} classes ({shown}{more}); {ADD_IT}")


def kind_group(how: str) -> str | None:
    """The group name a resolution's text gives a missing kind (rule 4b, `told_kind`), or None.

    >>> kind_group("'beagle': not a name this bundle knows: 'beagle' is a kind of 'hunting dog' (from WordNet), ...")
    'hunting dog'
    """
    found = _KIND_OF.search(how)
    return found.group(2) if found else None


def nearest_instead(classes: list[ClassInfo], phrase: str, scores: np.ndarray, standout: float,
                    options: TaskOptions, single: bool) -> tuple[list[int], str]:
    """A one-word item that names nothing in the bundle, and what is taken instead of it (missing="nearest",
    or an item rule 4a does not call unknown)."""
    best = int(np.argmax(scores))
    closest = f"{classes[best].name!r} (similarity {scores[best]:.2f}"
    if standout < options.min_contrast:
        if single:
            raise DescriptionError(f"nothing in this bundle matches {phrase!r}, {MISSING} (closest: {closest}, "
                                   f"standing out by only {standout:.2f} < min_contrast {options.min_contrast}))")
        return [], f"{MISSING}, and nothing in it is close (closest: {closest})): left out"
    if not single:
        return [best], f"{MISSING}: took the closest class {closest}) instead"
    return top(scores, options), (f"{MISSING}: took the classes within {options.margin} of the best "
                                  f"similarity instead (closest: {closest}, contrast {standout:.2f}))")
