"""Kinds a class is of by WordNet relations other than "is a kind of": what people call it besides its hypernyms.

Two relations, each narrow enough that a probe of Tiny ImageNet's 200 classes found nothing it should not give
(docs/results/experiments.md, "Seafood and trains: two WordNet relations beyond the hypernyms"):

- **Its flesh as food.** An animal whose name also names its flesh (WordNet's regular animal/food polysemy: the
  American lobster and "American lobster", a shellfish; the goose and "goose", poultry) is of the kinds above
  that flesh, from the flesh itself up to, not including, 'food': "seafood" and "shellfish" take the lobsters.
  Only flesh below 'meat' or 'seafood' whose gloss names the animal: "grasshopper" also names a cocktail, "slug"
  a drink of liquor, and "coral" lobster roe, none of them their flesh.
- **What it is a member of.** An artifact that WordNet lists as a member of a whole (a member holonym of its
  sense or of the kind right above it) is of that whole: the freight car (a railway car, a member of a train) is
  of "train", beside the bullet train that is a kind of one. Animals are members of their genus and family
  (Latin names nobody types), so only artifacts.

A name a class name has before its last word is no related kind's ("meat", of "meat loaf": the goose is no answer
to it); the callers (trainer/data/wordnet.py for Tiny ImageNet's vocabulary, trainer/data/english.py for one's
own) pass those words (`english.modifiers`). A name a class name ends in stays ("train": the bullet train is one).

>>> wn = WordNet()                                                       # doctest: +SKIP
>>> [wn.synset(k).names[0] for k in related_kinds(wn, "n01983481")]      # doctest: +SKIP
['American lobster', 'lobster', 'shellfish', 'seafood']
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .english import WordNet

ANIMAL, ARTIFACT, FOOD = 5, 6, 13        # WordNet's lexicographer files: noun.animal, noun.artifact, noun.food
FOOD_ROOTS = frozenset({"n00021265", "n07555863"})   # 'food, nutrient' and 'food, solid food': no kind to ask for
FLESH = frozenset({"n07649854", "n07776866"})        # 'meat', 'seafood': the flesh of animals eaten


def related_kinds(wordnet: WordNet, sense: str) -> list[str]:
    """The WordNet ids of the kinds a class of this sense is of by the relations the module docstring names, in
    order: its flesh and the kinds above it, then the wholes it is a member of."""
    synset = wordnet.synset(sense)
    found: list[str] = []
    if synset.lexfile == ANIMAL:
        for name in synset.names:
            for flesh in wordnet.senses(name):
                food = wordnet.synset(flesh)
                if flesh == sense or food.lexfile != FOOD or name not in food.names or not _mentions(food.gloss, name):
                    continue
                above = wordnet.ancestors(flesh)
                if FLESH.isdisjoint(above) and flesh not in FLESH:
                    continue
                found += [flesh, *_until(above, FOOD_ROOTS)]
    elif synset.lexfile == ARTIFACT:
        for kind in (sense, *synset.hypernyms):
            found += wordnet.synset(kind).members_of
    return list(dict.fromkeys(found))


def related_groups(wordnet: WordNet, senses: Mapping[str, str], kinds_of: Callable[[str], Iterable[str]],
                   used: set[str]) -> dict[str, tuple[list[str], list[str]]]:
    """Each kind two classes or more are of by these relations -> (those classes, in `senses`' order, with the
    classes that are kinds of it, `kinds_of(kind)`; its names, WordNet's less the words in `used`, those the class
    names have before their last word: `english.modifiers`). `senses`: class id -> its WordNet sense."""
    found: dict[str, set[str]] = {}
    for c, sense in senses.items():
        for kind in related_kinds(wordnet, sense):
            found.setdefault(kind, set()).add(c)
    out = {}
    for kind, members in found.items():
        members |= set(kinds_of(kind))
        names = [n for n in wordnet.synset(kind).unique_names if n.lower() not in used]
        if len(members) >= 2 and names:
            out[kind] = ([c for c in senses if c in members], names)
    return out


def _mentions(gloss: str, name: str) -> bool:
    """Whether a gloss names the animal (its name's last word, a plural too): "flesh of a goose" for the goose;
    not "unfertilized lobster roe", the food WordNet also calls "coral"."""
    return re.search(rf"\b{re.escape(name.split()[-1].lower())}", gloss.lower()) is not None


def _until(ancestors: list[str], stops: frozenset[str]) -> list[str]:
    """The ancestors (nearest first) before the first of `stops`."""
    return ancestors[:next((i for i, a in enumerate(ancestors) if a in stops), len(ancestors))]

