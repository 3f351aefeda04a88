"""Tiny ImageNet's words converted into a vocabulary (trainer/data/vocabulary.py): the trainer, the exporter
and the resolver read only vocabularies, and this module is the one reader of WordNet's files.

What it converts (the files of a Tiny ImageNet archive, ../shared/data/README.md):
- `wordnet_hierarchy.tsv`: per class (wnid) its names ("ladybug, ladybeetle, ..."; the first is the
  class's display name, the others its aliases), its first-hypernym path root -> leaf and all its ancestor
  ids. Every ancestor becomes a group keyed by its id and named by `words.txt` ("clothing, article of
  clothing, ..."), listing its children on the first-hypernym paths and, directly, the classes it holds by
  another hypernym. Groups are written so that each class's first lister is its first hypernym, so the
  vocabulary's paths are WordNet's and the trainer's nearby-class tasks are unchanged.
  Where the path nodes are not named ancestors (the synthetic data's files), the path nodes are groups too.
- `supercategories.json`: the 18 coarse groups, as `supercategory = true` groups keyed `supercategory/<name>`.
- WordNet's glosses (`/usr/share/wordnet/data.noun`, Debian's `wordnet-base`, when installed): each
  class's description.
- the everyday collections and class facets (trainer/data/everyday_collections.py): one group per name.

`python -m trainer vocabulary --data <tiny-imagenet-200.tar.gz> --out vocabulary.toml` writes the result
for a person to read or edit; a `vocabulary.toml` beside the data is read instead of all of the above.

>>> tsv = "wnid\\tname\\tpath\\tancestors\\nn1\\tcat\\tanimal > cat\\tn0\\nn2\\tdog, hound\\tanimal > dog\\tn0\\n"
>>> v = wordnet_vocabulary(["n1", "n2"], tsv, words="n0\\tanimal, beast\\n", glosses=False, collections=False)
>>> v.classes["n2"].aliases, v.groups["n0"].name, v.groups["n0"].members
(('hound',), 'animal', ('n1', 'n2'))
"""

from __future__ import annotations

import heapq
import json
from pathlib import Path

from .english import WordNet, modifiers
from .errors import DataError
from .everyday_collections import everyday_groups
from .glosses import WNID, WORDNET_NOUNS, read_glosses
from .related_kinds import related_groups
from .vocabulary import ClassWords, GroupWords, Vocabulary, name_key

HIERARCHY_FILE, SUPERCATEGORIES_FILE, WORDS_FILE = "wordnet_hierarchy.tsv", "supercategories.json", "words.txt"
CONCEPT_NAMES_FILE = "concept_names.tsv"   # the words.txt lines of the ancestors (older caches kept these)
RELATED_PREFIX = "related/"   # the groups of kinds beyond the hypernyms (`_related_groups`)
SUPERCATEGORY_PREFIX = "supercategory/"   # their groups' keys (a hypernym may have a super-category's name)


def wordnet_vocabulary(class_ids: list[str], tsv: str | None = None, supercategories: str | None = None,
                       words: str | None = None, where: str = "<memory>", glosses: bool = True,
                       collections: bool = True, data_noun: Path = WORDNET_NOUNS) -> Vocabulary:
    """The vocabulary of WordNet classes from the texts of the files above (any may be None).

    `words`: words.txt lines (id <TAB> "name, synonym, ..."), for the ancestors' names and, without a TSV,
    the classes'. `glosses`: read class descriptions from `data_noun` if it exists. `collections`: add the
    everyday collections and class facets. DataError names the file and the fault."""
    names = parse_words(words, set(class_ids)) if words else {}
    if tsv is not None:
        rows = _parse_tsv(tsv, f"{where}/{HIERARCHY_FILE}")
        missing = [c for c in class_ids if c not in rows]
        extra = sorted(set(rows) - set(class_ids))
        if missing or extra:
            raise DataError(f"{where}/{HIERARCHY_FILE} and the data disagree: classes not in the hierarchy "
                            f"{missing[:5]}, classes in the hierarchy but not in the data {extra[:5]}")
        names = {c: [n.strip() for n in rows[c][0].split(",") if n.strip()] or [c] for c in class_ids}
    classes = {c: _class_words(c, names.get(c, [c])) for c in class_ids}
    notes = []
    if glosses and data_noun.is_file() and class_ids and all(WNID.fullmatch(c) for c in class_ids):
        try:
            for c, gloss in zip(class_ids, read_glosses(class_ids, data_noun), strict=True):
                classes[c] = ClassWords(c, classes[c].name, classes[c].aliases, gloss[:1000])
        except DataError as e:   # ids that are not WordNet's (the synthetic data): no descriptions
            notes.append(f"no class descriptions: {e}")
    groups: list[GroupWords] = []
    if tsv is not None:
        ancestor_names = parse_words(words, {a for row in rows.values() for a in row[2]}) if words else {}
        groups = _hypernym_groups(class_ids, rows, ancestor_names)
    if supercategories is not None:
        groups += _supercategory_groups(supercategories, class_ids, f"{where}/{SUPERCATEGORIES_FILE}")
    if collections:
        taken = {g.id for g in groups}
        groups += [g for g in everyday_groups(class_ids) if g.id not in taken]
    if tsv is not None and data_noun.is_file() and all(WNID.fullmatch(c) for c in class_ids):
        try:
            groups += _related_groups(class_ids, rows, classes, data_noun)
        except DataError as e:   # WordNet's files damaged, or ids they lack: no related kinds, said
            notes.append(f"no related kinds: {e}")
    vocabulary = Vocabulary(classes, {g.id: g for g in groups})
    vocabulary.check(where)
    vocabulary.notes[:0] = notes
    return vocabulary


def _related_groups(class_ids: list[str], rows: dict, classes: dict[str, ClassWords], data_noun: Path
                    ) -> list[GroupWords]:
    """A group, keyed `related/<id>`, for each kind two classes or more are of by a relation beyond the hypernyms
    (trainer/data/related_kinds.py: "seafood" for the lobsters, "train" for the freight car beside the bullet
    train), holding also the classes that are kinds of it (`rows`' ancestors). Written last, so that no class's
    path changes."""
    found = related_groups(WordNet(data_noun.parent), {c: c for c in class_ids},
                           lambda kind: [c for c in class_ids if kind in rows[c][2]], modifiers(classes.values()))
    return [GroupWords(RELATED_PREFIX + kind, names[0], tuple(names[1:]), tuple(members))
            for kind, (members, names) in found.items()]


def parse_words(text: str, wanted: set[str]) -> dict[str, list[str]]:
    """`id <TAB> name, synonym, ...` lines (words.txt's format) -> {id: [names]} for the wanted ids."""
    out = {}
    for line in text.splitlines():
        key, _, words = line.partition("\t")
        names = [w.strip() for w in words.split(",") if w.strip()]
        if key in wanted and names:
            out[key] = names
    return out


def _class_words(class_id: str, names: list[str]) -> ClassWords:
    return ClassWords(class_id, " ".join(names[0].split()), _aliases(names))


def _aliases(names: list[str]) -> tuple[str, ...]:
    """The names after the first, once each, as Vocabulary.from_text keeps them (so the file reads back equal)."""
    seen, out = {name_key(names[0])}, []
    for n in names[1:]:
        if name_key(n) not in seen:
            seen.add(name_key(n))
            out.append(" ".join(n.split()))
    return tuple(out)


def _parse_tsv(text: str, where: str) -> dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """wnid -> (names, first-hypernym path root -> leaf, ancestor ids); line 1 is the header."""
    rows: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {}
    for lineno, line in enumerate(text.splitlines()[1:], start=2):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) < 3 or not cols[0] or not cols[2]:
            raise DataError(f"{where}:{lineno}: expected wnid<TAB>name<TAB>path, got {line[:80]!r}")
        if cols[0] in rows:
            raise DataError(f"{where}:{lineno}: class {cols[0]} listed twice")
        ancestors = tuple(a.strip() for a in cols[3].split(",") if a.strip()) if len(cols) > 3 else ()
        rows[cols[0]] = (cols[1], tuple(p.strip() for p in cols[2].split(">")), ancestors)
    if not rows:
        raise DataError(f"{where}: no classes in hierarchy file")
    return rows


def _hypernym_groups(class_ids: list[str], rows: dict, ancestor_names: dict[str, list[str]]) -> list[GroupWords]:
    """One group per named ancestor, written in an order where every member's first lister is its first
    hypernym. Where the path nodes are not named ancestors (the synthetic data), the path nodes are groups
    too, keyed by their names."""
    prefix_ids = _prefix_ids(class_ids, rows, ancestor_names)
    named = prefix_ids is not None
    if not named:   # no ancestor ids (or names): the path nodes are the groups, one per path prefix
        prefix_ids = {}
        for c in class_ids:
            path = rows[c][1]
            for k in range(len(path) - 1):
                if path[:k + 1] not in prefix_ids:   # a node name under two parents gets a numbered key
                    same = sum(p[-1] == path[k] for p in prefix_ids)
                    prefix_ids[path[:k + 1]] = path[k] if not same else f"{path[k]}#{same + 1}"
    names = {key: ancestor_names[key] if named else [prefix[-1].replace("_", " ")]
             for prefix, key in prefix_ids.items()}
    tree_parent: dict[str, str] = {}       # class or group key -> its first hypernym's key
    holds: dict[str, set[str]] = {}         # group key -> the classes under it
    for c in class_ids:
        path = rows[c][1]
        keys = [prefix_ids[path[:k + 1]] for k in range(len(path) - 1)]
        for upper, lower in zip(keys, [*keys[1:], c], strict=True):
            tree_parent[lower] = upper
        for key in (rows[c][2] if named else keys):
            holds.setdefault(key, set()).add(c)
    names.update({a: ancestor_names[a] for c in class_ids for a in rows[c][2] if a in ancestor_names})
    members: dict[str, list[str]] = {g: [] for g in holds}
    for child, parent in tree_parent.items():
        members[parent].append(child)
    for c in class_ids:   # the classes a group holds through another hypernym are listed directly
        on_path = _chain(c, tree_parent)
        for a in rows[c][2]:
            if a not in on_path and a in names:
                members.setdefault(a, []).append(c)
                holds.setdefault(a, set()).add(c)
    order = _first_listers_first(members, tree_parent, holds)
    position = {c: i for i, c in enumerate(class_ids)}
    return [GroupWords(g, " ".join(names[g][0].split()), _aliases(names[g]),
                       tuple(sorted(members[g], key=lambda m: (m in position, position.get(m, 0), m))))
            for g in order]


def _prefix_ids(class_ids: list[str], rows: dict, ancestor_names: dict[str, list[str]]
                ) -> dict[tuple[str, ...], str] | None:
    """The ancestor id of each first-hypernym path node (a path prefix), or None when the ids or their
    names are not known. A node is matched by its first name ("physical_entity" ~ "physical entity") among
    the ancestors every class below it has (else any has); where two ancestors share a name (WordNet's
    'food': nutrient and solid food), the node is the one that no other node took (then the one holding
    more classes, then the smaller id)."""
    every: dict[tuple[str, ...], set[str]] = {}   # the ancestors of that name every class below has
    some: dict[tuple[str, ...], set[str]] = {}    # ... some class below has
    for c in class_ids:
        path, ancestors = rows[c][1], rows[c][2]
        if not ancestors or not all(a in ancestor_names for a in ancestors):
            return None
        for k in range(len(path) - 1):
            wanted = path[k].replace("_", " ").lower()
            found = {a for a in ancestors if ancestor_names[a][0].lower() == wanted}
            prefix = path[:k + 1]
            every[prefix] = every[prefix] & found if prefix in every else found
            some[prefix] = some.get(prefix, set()) | found
    # Tiny ImageNet's paths name two synsets 'table' alike (dining table's and the desk's): that node is
    # the synset most classes below it have, and the other holds the dining table as a second hypernym.
    candidates = {p: every[p] or some[p] for p in every}
    count = {a: sum(a in rows[c][2] for c in class_ids) for ids in candidates.values() for a in ids}
    resolved: dict[tuple[str, ...], str] = {}
    while len(resolved) < len(candidates):
        taken = set(resolved.values())
        open_ = {p: ids - taken for p, ids in candidates.items() if p not in resolved}
        if any(not ids for ids in open_.values()):
            return None
        single = {p: next(iter(ids)) for p, ids in open_.items() if len(ids) == 1}
        if single:
            resolved.update(single)
        else:   # only ties left: the most general node takes the ancestor holding most classes
            prefix = min(open_, key=len)
            resolved[prefix] = min(open_[prefix], key=lambda a: (-count[a], a))
    if len(set(resolved.values())) != len(resolved):
        return None
    return resolved


def _chain(node: str, tree_parent: dict[str, str]) -> set[str]:
    seen = set()
    while node in tree_parent:
        node = tree_parent[node]
        seen.add(node)
    return seen


def _first_listers_first(members: dict[str, list[str]], tree_parent: dict[str, str],
                         holds: dict[str, set[str]]) -> list[str]:
    """The groups in an order (largest first where free) in which each member's first hypernym comes
    before the other groups that list it: Vocabulary.hierarchy takes a member's first lister as its parent."""
    after: dict[str, set[str]] = {g: set() for g in members}
    for g, listed in members.items():
        for m in listed:
            if tree_parent.get(m) not in (None, g):
                after[tree_parent[m]].add(g)
    waiting = {g: 0 for g in members}
    for later in after.values():
        for h in later:
            waiting[h] += 1
    rank = {g: (-len(holds[g]), g) for g in members}
    ready = [rank[g] for g, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        g = heapq.heappop(ready)[1]
        order.append(g)
        for h in after[g]:
            waiting[h] -= 1
            if waiting[h] == 0:
                heapq.heappush(ready, rank[h])
    if len(order) != len(members):
        raise DataError(f"{HIERARCHY_FILE}: the hypernyms cannot be written with each class's first hypernym "
                        "listing it first (a cycle of second hypernyms)")
    return order


def _supercategory_groups(text: str, class_ids: list[str], where: str) -> list[GroupWords]:
    try:
        spec = json.loads(text)
        groups = {name: [m["wnid"] if isinstance(m, dict) else m for m in members]
                  for name, members in spec["supercategories"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise DataError(f"{where}: not a super-category file ({type(e).__name__}: {e})") from None
    unknown = sorted({w for ws in groups.values() for w in ws} - set(class_ids))
    if unknown:
        raise DataError(f"{where}: super-categories name classes not in the hierarchy: {unknown[:5]}")
    return [GroupWords(SUPERCATEGORY_PREFIX + name, name, (), tuple(dict.fromkeys(ws)), supercategory=True)
            for name, ws in groups.items() if ws]
