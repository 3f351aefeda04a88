"""Everyday collections: kinds of things as people name them, written into Tiny ImageNet's vocabulary
(trainer/data/wordnet.py converts WordNet's words into one) as groups, which the bundle stores as concepts.

WordNet's hypernyms (the bundle's other concepts, `ClassHierarchy.concepts`) are not the kinds users
type: no synset holds "farm animals" or "sea creatures", and "farm animals" was nearest WordNet's
"domestic animal" (the dogs and cats). `everyday_collections.json` lists such kinds by hand, each with
its names and the Tiny ImageNet classes (WordNet ids) it holds. Every name becomes one group (one concept)
of its own (the resolver embeds a concept by its first name only), with all of the collection's names, so the
SDK's concept rules (`sdk/text/resolver/`, rules 3 and 5) apply to them unchanged: no format change, and the
Java mirror reads them as it reads any concept. A collection holding fewer than two of the data's
classes is left out.

`class_facets.json` has the same form and is read the same way. Where the collections were written from
phrasings users type, the facets were written along general dimensions (where an animal lives, what it
is like, where a thing is found, what it is for, where it comes from, what it is made of), so that a
phrasing nobody wrote a collection for still finds its kind (docs/results/experiments.md, "class
facets"). Their groups are keyed `facet/<name>`, the collections' `collection/<name>`.

    >>> collection_groups(["n02395406", "n02403003", "n01855672"])[0].aliases
    ('livestock', 'barnyard animals')
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from .glosses import WNID
from .vocabulary import GroupWords

COLLECTIONS_FILE = Path(__file__).with_suffix(".json")
FACETS_FILE = Path(__file__).with_name("class_facets.json")
ID_PREFIX = "collection/"
FACET_PREFIX = "facet/"


def read_collections(path: Path = COLLECTIONS_FILE) -> list[dict]:
    """The collections of `path`, checked: each has 1+ names and 2+ WordNet ids; no name is used twice."""
    collections = json.loads(path.read_text())["collections"]
    seen: set[str] = set()
    for i, collection in enumerate(collections):
        names, members = collection["names"], collection["members"]
        if not names or not all(isinstance(n, str) and n == n.strip().lower() and n for n in names):
            raise ValueError(f"{path}: collection {i}: names must be non-empty lower-case strings")
        if len(members) < 2 or not all(WNID.fullmatch(w) for w in members):
            raise ValueError(f"{path}: collection {i} ({names[0]!r}): members must be 2+ WordNet ids")
        if seen & set(names):
            raise ValueError(f"{path}: names {sorted(seen & set(names))} are used by two collections")
        seen.update(names)
    return collections


def collection_groups(class_ids: Sequence[str], path: Path = COLLECTIONS_FILE, prefix: str = ID_PREFIX,
                      kinds: Mapping[str, Collection[str]] | None = None) -> list[GroupWords]:
    """One vocabulary group per name of every collection holding 2+ of `class_ids`, keyed `prefix + name`,
    with this name first, the collection's other names as aliases and the members in class order. `kinds`: per
    class, the WordNet ids it is (its sense, the kinds above it and right below it: a vocabulary of one's own
    classes, trainer/data/english.py); by default each class id is itself a WordNet id (Tiny ImageNet's)."""
    return _groups(read_collections(path), class_ids, prefix, kinds)


def everyday_groups(class_ids: Sequence[str]) -> list[GroupWords]:
    """The collections' groups, then the class facets'; no name may be in both files.

    >>> [g.id for g in everyday_groups(["n02395406", "n02403003", "n01855672"])][:4]
    ['collection/farm animals', 'collection/livestock', 'collection/barnyard animals', 'collection/hoofed animals']
    """
    collections, facet_list = read_collections(COLLECTIONS_FILE), read_collections(FACETS_FILE)
    shared = {n for c in collections for n in c["names"]} & {n for c in facet_list for n in c["names"]}
    if shared:
        raise ValueError(f"names {sorted(shared)} are both a collection's and a facet's")
    return _groups(collections, class_ids, ID_PREFIX) + _groups(facet_list, class_ids, FACET_PREFIX)


def _groups(collections: list[dict], class_ids: Sequence[str], prefix: str,
            kinds: Mapping[str, Collection[str]] | None = None) -> list[GroupWords]:
    present = set(class_ids)
    kinds = kinds or {c: (c,) for c in class_ids}
    groups = []
    for collection in collections:
        listed = set(collection["members"])
        members = tuple(c for c in class_ids if listed.intersection(kinds.get(c, ())))
        if len(members) < 2 or not present:
            continue
        for name in collection["names"]:
            others = tuple(n for n in collection["names"] if n != name)
            groups.append(GroupWords(prefix + name, name, others, members))
    return groups
