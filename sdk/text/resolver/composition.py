"""Rule 3b: a phrase that is no name but is built from two groups. "non-X Y" and "Y except X" (also "excluding",
"but not", "other than", "without", "that are not" and the rest of EXCLUSION_WORDS; "every Y but X") take group Y's
classes without those of X (a group, a modifier,
or a class name: "non-insect invertebrates", "non-flying birds", "dogs except poodles"); "<modifier> Y" takes the
classes of group Y that the modifier's group also holds ("small mammals"). Only a non-empty strict subset of Y
counts, or, where no reading narrows, all of Y when the modifier's group holds it and more ("pet dogs": before,
the text encoder took the concept 'pet animals', cats and a goldfish too); anything else is left to the later
rules. Rule 2b (`negated`) shares its words: an item that opens with a negation leaves out what the rest names.

>>> composed(names, "small mammals")                                        # doctest: +SKIP
([4, 9], "'small animals' within group 'mammals'", [])
"""

from __future__ import annotations

from .names import Names
from .options import MAX_GROUP_CLASSES
from .words import (
    EVERYTHING,
    EXCLUSION_PREFIX,
    EXCLUSION_WORDS,
    KIND_NOUNS,
    NEGATIONS,
    QUANTIFIED_EXCLUSION,
    QUANTIFIERS,
    singular_forms,
    without_article,
)

# Rule 2b's openings, longest first among those that share a start ("all but not" before "all but")
NEGATED_STARTS = (*NEGATIONS, *(f"{e} {m}" for e in EVERYTHING for m in (*EXCLUSION_WORDS, "but")))


def composed(names: Names, key: str) -> tuple[list[int], str, list[int]] | None:
    """(classes, how, the classes an exclusion left out) of a normalised phrase built from two groups, or None.
    What an exclusion left out is no padding class, as in rule 2b ("a vehicle which is not a car" took the
    tractor, then a sports car as padding)."""
    words = key.split(" ")
    if len(words) < 2:
        return None
    excluded = exclusion(names, words)
    if excluded is not None:
        return excluded
    every = None   # a modifier whose group holds all of Y: Y ("pet dogs": every dog here is a pet), if none narrows
    for k in range(1, len(words)):  # the longest head first: "small household items" tries "household items"
        head, modifier_words = " ".join(words[k:]), " ".join(words[:k])
        group = names.group(head)
        named = None if group is None else modifier(names, modifier_words)
        if named is not None:
            whole = group[1]
            kept = sorted(set(whole) & set(names.groups[named]))
            if 0 < len(kept) < len(set(whole)):
                return kept[:MAX_GROUP_CLASSES], f"{named!r} within group {head!r}", []
            if kept and every is None and len(set(names.groups[named])) > len(kept):   # not Y itself ("insect insects")
                every = kept[:MAX_GROUP_CLASSES], f"{named!r} within group {head!r}: all of it", []
    return every


def modifier(names: Names, words: str) -> str | None:
    """The group name a modifier stands for: itself, else itself before a kind noun ("small" -> "small
    animals"); None if neither is a group. Not a singular made from a plural group name: those answer the
    group's own name ("puppy"), and as modifiers they composed phrases the rule was never chosen on
    ("drink containers", which hold drinks, took the two drinks that are containers: issue 60)."""
    return next((n for n in (words, *(f"{words} {noun}" for noun in KIND_NOUNS))
                 if n in names.groups and n not in names.singulars), None)


def exclusion(names: Names, words: list[str]) -> tuple[list[int], str, list[int]] | None:
    """"non-X Y" and "Y except X": Y's classes without X's, and X's, or None."""
    key = " ".join(words)
    if words[0].startswith(EXCLUSION_PREFIX) and len(words[0]) > len(EXCLUSION_PREFIX):
        kept_name, dropped_name = " ".join(words[1:]), words[0][len(EXCLUSION_PREFIX):]
    else:
        cut = exclusion_cut(key)
        if cut is None:
            return None
        kept_name, dropped_name = cut
    group = names.group(kept_name) if kept_name else None
    dropped_classes = dropped(names, dropped_name) if dropped_name else None
    if group is None or dropped_classes is None:
        return None
    whole = group[1]
    kept = sorted(set(whole) - set(dropped_classes))
    if not 0 < len(kept) < len(set(whole)):
        return None
    return kept[:MAX_GROUP_CLASSES], f"group {kept_name!r} without {dropped_name!r}", sorted(set(dropped_classes))


def exclusion_cut(key: str) -> tuple[str, str] | None:
    """Rule 3b: (what is kept, what is left out) of a normalised phrase "Y <exclusion word> X", each past an article,
    and the kept part past a quantifier too; "but" is an exclusion word after a quantifier. None without an exclusion
    word or where either part is empty. The pipeline reads a kept part that is no group as a phrase of its own
    (`TaskResolver._unlike`).

    >>> exclusion_cut("all the dogs except for poodles"), exclusion_cut("every dog but the chihuahua")
    (('dogs', 'poodles'), ('dog', 'chihuahua'))
    >>> exclusion_cut("dogs but cats"), exclusion_cut("except cats")
    (None, None)
    """
    padded = f" {key} "
    marker = next((w for w in EXCLUSION_WORDS if f" {w} " in padded), None)
    if marker is None and key.split(" ", 1)[0] in QUANTIFIERS and f" {QUANTIFIED_EXCLUSION} " in padded:
        marker = QUANTIFIED_EXCLUSION
    if marker is None:
        return None
    kept, _, left_out = padded.partition(f" {marker} ")
    kept, left_out = without_article(without_article(kept.strip(), QUANTIFIERS)), without_article(left_out.strip())
    return (kept, left_out) if kept and left_out else None


def dropped(names: Names, name: str) -> list[int] | None:
    """The classes an exclusion names: a group, a modifier's group ("non-flying") or one class."""
    group = names.group(name)
    if group is not None:
        return group[1]
    if (named := modifier(names, name)) is not None:
        return names.groups[named]
    return next(([names.by_name[f]] for f in (name, *singular_forms(name)) if f in names.by_name), None)


def negated(names: Names, key: str) -> str | None:
    """Rule 2b: what a normalised item or part leaves out, or None when it names something itself or opens
    with no negation: "not penguins" -> "penguins", "everything except cats" -> "cats", one word "non-mammals"
    -> "mammals" (with more words, "non-X Y" is rule 3b's)."""
    if names.named(key):
        return None
    if " " not in key and key.startswith(EXCLUSION_PREFIX) and len(key) > len(EXCLUSION_PREFIX):
        return key[len(EXCLUSION_PREFIX):]
    return next((key[len(start) + 1:] for start in NEGATED_STARTS
                 if key.startswith(start + " ") and len(key) > len(start) + 1), None)
