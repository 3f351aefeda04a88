"""Rules 1-3: the names a bundle answers to. Every class's id, name and aliases; every group (super-categories
over concepts' primary names over their other names over hierarchy path nodes, and the singulars of plural
group names); the words that end class names (rule 3d's kinds); the kinds below its concepts that no class is
(rule 4b); and how a description is cut into items at its conjunctions (rule 2).

>>> names = Names(bundle.classes, bundle.supercategories, bundle.concepts)        # doctest: +SKIP
>>> names.group("insects")                                                        # doctest: +SKIP
('insects', [3, 7, 12])
"""

from __future__ import annotations

from collections.abc import Sequence

from sdk.format.bundle import ClassInfo, Concept

from .words import (
    APPOSITIVE_OPENERS,
    CONJUNCTIONS,
    DESCRIBING_NOUNS,
    GLOSS_WORDS,
    GLUED_CONJUNCTIONS,
    ITEM_SEPARATORS,
    PARTICIPLE_ENDINGS,
    normalize_name,
    opened_exclusions,
    singular_forms,
    unmarked,
    without_article,
)


class Names:
    """The index of a bundle's names: `by_name` (class names), `groups`, `singulars`, `heads`, `kinds`, and
    every name (`names`) and word (`words`) for the spelling and missing-item rules."""

    def __init__(self, classes: list[ClassInfo], supercategories: dict[str, list[int]],
                 concepts: Sequence[Concept] = ()):
        self.concepts = list(concepts)
        self.by_name: dict[str, int] = {}
        for i, c in enumerate(classes):
            for key in [c.id, c.name, *c.aliases]:
                self.by_name.setdefault(normalize_name(key), i)
        self.derived: set[str] = set()   # group names only WordNet-derived concepts give (the resolution says so)
        self.groups = self._groups(classes, supercategories)
        self.singulars: set[str] = set()   # the group names below, made from a plural one
        for name in list(self.groups):   # "puppies" (a group's alias) also answers "puppy"
            for form in singular_forms(name):   # every reading: "automobiles" -> "automobil", "automobile"
                if form not in self.groups and form not in self.by_name:
                    self.groups[form] = self.groups[name]
                    self.singulars.add(form)
                    if name in self.derived:
                        self.derived.add(form)
        self.heads: dict[str, list[int]] = {}   # rule 3d: "train" -> the classes named "... train"
        for key, i in self.by_name.items():
            if " " in key:
                members = self.heads.setdefault(key.rsplit(" ", 1)[1], [])
                if i not in members:
                    members.append(i)
        self.names = sorted(set(self.by_name) | set(self.groups))   # every name rule 3c may correct to
        self.closed: dict[str, str] = {}   # rule 3c: a name without its spaces -> the name (the first sorted)
        for name in self.names:
            self.closed.setdefault(name.replace(" ", ""), name)
        self.words = {w for name in self.names for w in name.split(" ")}   # rule 4a: words the bundle knows
        self.kinds: dict[str, int] = {}   # rule 4b: a kind no class is -> the index of the concept holding it
        for i, concept in enumerate(self.concepts):
            for name in concept.kinds:
                self.kinds.setdefault(normalize_name(name), i)

    def _groups(self, classes: list[ClassInfo], supercategories: dict[str, list[int]]) -> dict[str, list[int]]:
        """Name -> classes, for rule 3: super-categories over the author's concepts (primary names over their other
        names) over WordNet-derived concepts (likewise) over hierarchy path nodes. Concepts sharing a name are merged
        ("vessel": container and boat). A derived concept takes no name the author's give in either number: on the
        worked example "dog", an alias its author gave 'dogs', had taken WordNet's 'dog', which lacks the labrador,
        and "vehicle" WordNet's 'vehicle', which lacks the school bus (a bus is public transport there), while
        "dogs" and "vehicles" took the author's groups (the singulars are added after, in `__init__`)."""
        groups: dict[str, list[int]] = {}
        authored_singulars: set[str] = set()   # the singulars of the author's names, once those are all in
        for derived in (False, True):
            if derived:
                authored_singulars = {form for name in groups for form in singular_forms(name)}
            for synonyms in (False, True):
                named: dict[str, set[int]] = {}
                for concept in self.concepts:
                    if concept.derived == derived:
                        for name in concept.names[1:] if synonyms else concept.names[:1]:
                            named.setdefault(normalize_name(name), set()).update(concept.members)
                for name, members in named.items():
                    if name not in groups and name not in authored_singulars:
                        groups[name] = sorted(members)
                        if derived:
                            self.derived.add(name)
        nodes: dict[str, list[int]] = {}
        for i, c in enumerate(classes):  # inner nodes of the hierarchy ("dog", "insect", ...)
            for node in c.path[:-1]:
                nodes.setdefault(normalize_name(node), []).append(i)
        for name, members in nodes.items():
            groups.setdefault(name, members)
            self.derived.discard(name)   # the hierarchy's own word too: not only WordNet's
        for name, members in supercategories.items():
            groups[normalize_name(name)] = list(members)
            self.derived.discard(normalize_name(name))
        return groups

    def class_name(self, key: str) -> str:
        """Rule 1: the form of the normalised phrase (itself, or a singular: "geese" -> "goose"; past an article,
        as rule 4b reads a kind: "a grizzly" -> "grizzly") that names a class, else the phrase."""
        return next((c for c in self._forms(key) if c in self.by_name), key)

    @staticmethod
    def _forms(key: str) -> tuple[str, ...]:
        """The forms rules 1 and 3 look a normalised phrase up by: itself and its singulars, then the same past an
        article, as rule 4b reads a kind."""
        bare = without_article(key)
        return (key, *singular_forms(key), *((bare, *singular_forms(bare)) if bare != key else ()))

    def group(self, key: str) -> tuple[str, list[int]] | None:
        """Rule 3: (the name found, the whole group) for the normalised phrase or its singular, past an article too
        ("the insects"; as `class_name`); None if it names no group."""
        return next(((f, self.groups[f]) for f in self._forms(key) if f in self.groups), None)

    def head(self, key: str) -> str | None:
        """Rule 3d: the word (or its singular) that ends class names, for a one-word phrase; None otherwise."""
        return next((f for f in (key, *singular_forms(key)) if f in self.heads), None) if " " not in key else None

    def kind(self, key: str) -> tuple[str, int] | None:
        """Rule 4b: (the kind's name, the index of its concept) for a normalised phrase that names a kind the
        bundle lacks, itself or a singular, past an article ("a beagle", "beagles"); None otherwise, and for a
        phrase ending in one of DESCRIBING_NOUNS, which describes as in rule 4a ("farm animals": the ox and the
        pig are farm animals to a person, though WordNet puts neither under 'livestock')."""
        bare = without_article(key)
        if bare.rsplit(" ", 1)[-1] in DESCRIBING_NOUNS:
            return None
        return next(((f, self.kinds[f]) for f in (bare, *singular_forms(bare)) if f in self.kinds), None)

    def classes_named(self, key: str) -> set[int] | None:
        """The classes a group or a class name takes, for the normalised phrase or a form of it (`_forms`: its
        singular, past an article: "a panda"); None if it names none (rule 6b's negated names)."""
        group = self.group(key)
        if group is not None:
            return set(group[1])
        name = self.class_name(key)
        return {self.by_name[name]} if name in self.by_name else None

    def named(self, key: str) -> bool:
        """Whether the normalised phrase (or its singular) is a group or a class name (rule 3)."""
        return any(f in self.groups or f in self.by_name for f in (key, *singular_forms(key)))

    def items(self, text: str) -> list[str]:
        """Rule 2: the description cut at its commas, but a part that describes the item before it rejoins it: the
        item opens with "a" or "an", and the part, no name of its own, with a preposition or relative word
        (APPOSITIVE_OPENERS) or a participle ("a dog, used by the police"; "a beetle, with black spots").

        A semicolon cuts as a comma does, and so does a parenthesis that opens with a negation ("insects (no
        bees)"; `opened_exclusions`); an item's closing marks and surrounding quotes are no part of it ("Dogs!!";
        `unmarked`), unless it is a name as typed.

        >>> Names([], {}, []).items("a dog, used by the police, cats, without fleas")
        ['a dog, used by the police', 'cats', 'without fleas']
        >>> Names([], {}, []).items('"Dogs"!!; cats?')
        ['Dogs', 'cats']
        """
        cut = ITEM_SEPARATORS.split(opened_exclusions(text))
        if len(cut) == 1:
            return [self._unmarked(text)]
        items: list[str] = []
        for part in (self._unmarked(p.strip()) for p in cut):
            if not part:
                continue
            if items and self._describes(items[-1], part):
                items[-1] = f"{items[-1]}, {part}"
            else:
                items.append(part)
        return items

    def _unmarked(self, item: str) -> str:
        return item if self.named(normalize_name(item)) else unmarked(item)

    def _describes(self, item: str, part: str) -> bool:
        key = normalize_name(part)
        first = key.split(" ")[0]
        opener = first in APPOSITIVE_OPENERS or any(first.endswith(ending) and len(first) >= letters
                                                    for ending, letters in PARTICIPLE_ENDINGS.items())
        return opener and normalize_name(item).split(" ")[0] in ("a", "an") and not self.named(key)

    def conjuncts(self, item: str) -> list[str]:
        """Rule 2: the item's parts between the words "and", "or" and "&"; [item] if it is a name, a gloss (unless
        each part is a name past its article: "a cat or a dog" is two items) or has none."""
        key = normalize_name(item)
        if self.named(key):
            return [item]
        for mark in GLUED_CONJUNCTIONS:   # "lemons/oranges"
            key = key.replace(mark, f" {mark} ")
        key = normalize_name(key)
        parts, words = [], []
        for word in key.split(" ") + ["and"]:
            if word in CONJUNCTIONS:
                if words:
                    parts.append(" ".join(words))
                words = []
            else:
                words.append(word)
        if any(word in GLOSS_WORDS for word in key.split(" ")) and not all(   # a gloss, unless each part is a name
                self.named(without_article(part)) for part in parts):        # past its article: "a cat or a dog"
            return [item]
        return parts if len(parts) > 1 else [item]
