"""The words of a data set: one hand-written `vocabulary.toml` per ImageFolder (docs/training.md, "The
vocabulary file").

Per class (its id is its folder name under `train/`): a display name, aliases and an optional one-line
description. Groups, nested, a class in as many as you like, each with its own aliases. The trainer
embeds each class as "display name, alias, ..." (the same text Tiny ImageNet's WordNet synonyms give), the
exporter writes the display name, aliases and description into the bundle's classes.json and every group
of two or more classes as a concept, and the SDK resolves descriptions against all of them.

    [classes.golden_retriever]
    name = "golden retriever"          # optional: the folder name with "_" read as a space (folder_names)
    aliases = ["goldie"]
    description = "a large dog with a golden coat"
    wordnet = "n02099601"              # optional: its English sense (trainer/data/english.py), or false

    [groups.dogs]
    aliases = ["dog", "puppies"]
    members = ["golden_retriever", "retrievers"]   # class ids or other groups' names

>>> v = Vocabulary.from_text('[groups.pets]\\nmembers = ["cat", "dog"]\\n', ["cat", "dog", "fish"])
>>> v.classes["dog"].name, v.members("pets")
('dog', ['cat', 'dog'])
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

from sdk.errors import DescriptionError
from sdk.text.resolver import check_text

from .errors import DataError
from .glosses import WNID
from .hierarchy import ClassHierarchy

VOCABULARY_FILE = "vocabulary.toml"
MAX_TEXT = 160          # characters of a name or an alias (the bundle allows 1000; a label is short)
MAX_DESCRIPTION = 1000  # characters of a description
MAX_ALIASES = 63          # a group's name and aliases are its concept's names: at most 64 in a bundle
MAX_FILE_BYTES = 16 << 20   # a vocabulary is words: larger is a mistake (a photo saved under the name?)
MAX_GROUPS = 100_000      # a bundle holds at most this many concepts (sdk.format.bundle.MAX_CONCEPTS)
# A number or a WordNet id before the name, as published data sets number their folders: "001.Black_footed_Albatross"
# (CUB-200), "n02085620-Chihuahua" (Stanford Dogs), "01_cat". Dropped from the names only when every folder has one.
FOLDER_INDEX = re.compile(r"(?:n\d{8}|\d+)[._-]+(?=[^\W\d_]{2})")   # a word follows: not "3-d_printer"


@dataclass(frozen=True)
class ClassWords:
    """One class: its id (the folder name), the name a person sees, other names, a one-line description."""
    id: str
    name: str
    aliases: tuple[str, ...] = ()
    description: str = ""
    wordnet: str | bool | None = None   # its WordNet sense: an id pinned, False for none, None to choose one

    @property
    def synonyms(self) -> str:
        """The text the class is embedded by: its names, comma-separated (as WordNet's synonym lists)."""
        return ", ".join((self.name, *self.aliases))


@dataclass(frozen=True)
class GroupWords:
    """A group: its key (what `members` lists), the name a person types, other names, its direct members
    (class ids or group keys), a one-line description, and whether it is a super-category (a coarse group
    the trainer reports accuracy for and can draw tasks from, listed as such in the bundle, not as a concept)."""
    id: str
    name: str
    aliases: tuple[str, ...]
    members: tuple[str, ...]
    description: str = ""
    supercategory: bool = False
    wordnet: str | bool | None = None   # as ClassWords.wordnet


@dataclass
class Vocabulary:
    classes: dict[str, ClassWords]   # by class id, in the data's class order
    groups: dict[str, GroupWords]    # by key, in the file's order
    notes: list[str] = field(default_factory=list, compare=False)   # what to tell a person (a name given twice)

    @classmethod
    def default(cls, class_ids: list[str]) -> Vocabulary:
        """No file: each class named by its folder name (`folder_names`), no aliases, no groups."""
        return cls({c: ClassWords(c, name) for c, name in folder_names(class_ids).items()}, {})

    @classmethod
    def load(cls, path: str | Path, class_ids: list[str]) -> Vocabulary:
        path = Path(path)
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                raise DataError(f"{path}: larger than {MAX_FILE_BYTES >> 20} MiB, not a vocabulary")
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise DataError(f"{path}: file not found") from None
        except (OSError, UnicodeDecodeError) as e:
            raise DataError(f"{path}: cannot read ({e})") from None
        return cls.from_text(text, class_ids, where=str(path))

    @classmethod
    def from_text(cls, text: str, class_ids: list[str], where: str = VOCABULARY_FILE) -> Vocabulary:
        """Parse and check the TOML text against the data's class ids; DataError naming the fault."""
        if len(text) > MAX_FILE_BYTES:
            raise DataError(f"{where}: larger than {MAX_FILE_BYTES >> 20} MiB, not a vocabulary")
        try:
            spec = tomllib.loads(text)
        except (tomllib.TOMLDecodeError, RecursionError) as e:   # RecursionError: nesting deeper than Python's stack
            raise DataError(f"{where}: not valid TOML ({e})") from None
        _keys(spec, {"classes", "groups"}, where)
        raw_classes, raw_groups = spec.get("classes", {}), spec.get("groups", {})
        if not isinstance(raw_classes, dict) or not isinstance(raw_groups, dict):
            raise DataError(f"{where}: [classes.<id>] and [groups.<name>] must be tables")
        unknown = [c for c in raw_classes if c not in set(class_ids)]
        if unknown:
            more = "..." if len(class_ids) > 8 else ""
            raise DataError(f"{where}: classes with no folder under train/: {unknown[:5]} (the class id is the "
                            f"folder's name; the data has {sorted(class_ids)[:8]}{more})")
        classes = {c: _class_words(c, raw_classes.get(c, {}), f"{where}: [classes.{c}]", name)
                   for c, name in folder_names(class_ids).items()}
        if len(raw_groups) > MAX_GROUPS:
            raise DataError(f"{where}: {len(raw_groups)} groups, at most {MAX_GROUPS}")
        groups = {g: _group_words(g, body, f"{where}: [groups.{g}]") for g, body in raw_groups.items()}
        vocabulary = cls(classes, groups)
        vocabulary.check(where)
        return vocabulary

    def members(self, group: str, listed_order: bool = False) -> list[str]:
        """The class ids under a group, its subgroups' included, in class order (or in the order the file
        lists them, subgroups in place: a super-category's first member anchors the trainer's examples)."""
        found: dict[str, None] = {}
        seen, stack = {group}, [iter(self.groups[group].members)]   # depth first, without recursion
        while stack:
            m = next(stack[-1], None)
            if m is None:
                stack.pop()
            elif m in self.groups:
                if m not in seen:
                    seen.add(m)
                    stack.append(iter(self.groups[m].members))
            else:
                found[m] = None
        return list(found) if listed_order else [c for c in self.classes if c in found]

    def hierarchy(self) -> ClassHierarchy:
        """The ClassHierarchy the trainer and the exporter use: names are `ClassWords.synonyms`; each
        class's path (the tree the trainer draws nearby classes from) runs through the first group, in the
        file's order, that lists it, and that group's first lister, up to a top group; its ancestors are
        every group above it, and those groups are concepts named by their name and aliases. Super-category
        groups are the hierarchy's super-categories, and neither paths nor concepts."""
        ids = list(self.classes)
        concepts = {g: group for g, group in self.groups.items() if not group.supercategory}
        parent: dict[str, str] = {}
        for g, group in concepts.items():
            for m in group.members:
                parent.setdefault(m, g)
        members = {g: set(self.members(g)) for g in self.groups}   # once per group, not once per class
        paths, ancestors = [], []
        for c in ids:
            chain, node = [], c
            while node in parent:
                node = parent[node]
                chain.append(self.groups[node].name)
            paths.append((*reversed(chain), self.classes[c].name))
            ancestors.append(tuple(g for g in concepts if c in members[g]))
        concept_names = {g: [group.name, *group.aliases] for g, group in concepts.items()}
        supercategories = {group.name: self.members(g, listed_order=True)
                           for g, group in self.groups.items() if group.supercategory}
        return ClassHierarchy(ids, [self.classes[c].synonyms for c in ids], paths, supercategories, ancestors,
                              concept_names, descriptions=[self.classes[c].description for c in ids])

    def to_text(self) -> str:
        """This vocabulary as a vocabulary.toml that `from_text` reads back to an equal Vocabulary.

        >>> v = Vocabulary.from_text('[groups.pets]\\nmembers = ["cat", "dog"]\\n', ["cat", "dog"])
        >>> Vocabulary.from_text(v.to_text(), ["cat", "dog"]) == v
        True
        """
        lines = []
        for c, words in self.classes.items():
            lines += [f"[classes.{_toml_key(c)}]", f"name = {_toml_string(words.name)}"]
            if words.aliases:
                lines.append(f"aliases = {_toml_list(words.aliases)}")
            if words.description:
                lines.append(f"description = {_toml_string(words.description)}")
            lines += _wordnet_line(words.wordnet)
            lines.append("")
        for g, group in self.groups.items():
            lines.append(f"[groups.{_toml_key(g)}]")
            if group.name != g:
                lines.append(f"name = {_toml_string(group.name)}")
            if group.aliases:
                lines.append(f"aliases = {_toml_list(group.aliases)}")
            if group.description:
                lines.append(f"description = {_toml_string(group.description)}")
            if group.supercategory:
                lines.append("supercategory = true")
            lines += _wordnet_line(group.wordnet)
            lines += [f"members = {_toml_list(group.members)}", ""]
        return "\n".join(lines)

    def check(self, where: str) -> None:
        """DataError for a member that is no class or group, or a cycle; a note for a name given twice."""
        for g, group in self.groups.items():
            for m in group.members:
                if m not in self.classes and m not in self.groups:
                    raise DataError(f"{where}: group {g!r} lists {m!r}, which is neither a class id nor a group")
                if m == g:
                    raise DataError(f"{where}: group {g!r} lists itself")
        for g in self.groups:  # no cycles: a group may not contain itself through others
            seen, stack = set(), list(self.groups[g].members)
            while stack:
                m = stack.pop()
                if m == g:
                    raise DataError(f"{where}: group {g!r} contains itself through its subgroups")
                if m in self.groups and m not in seen:
                    seen.add(m)
                    stack.extend(self.groups[m].members)
        # A name given twice is allowed (WordNet gives 'vessel' to the container and the boat): a description
        # saying it takes every class of both, as the SDK merges concepts that share a name. It is said.
        owners: dict[str, dict[str, frozenset[str]]] = {}   # name -> owner -> the classes it means
        for c, words in self.classes.items():
            for name in (words.name, *words.aliases):
                owners.setdefault(name_key(name), {})[f"class {c!r}"] = frozenset([c])
        for g, group in self.groups.items():
            held = frozenset(self.members(g))
            for name in (group.name, *group.aliases):
                owners.setdefault(name_key(name), {})[f"group {g!r}"] = held
        shared = {name: list(who) for name, who in owners.items() if len(set(who.values())) > 1}
        if shared:
            shown = "; ".join(f"{name!r}: {', '.join(who)}" for name, who in list(shared.items())[:5])
            more = f" (and {len(shared) - 5} more)" if len(shared) > 5 else ""
            self.notes.append(f"{where}: {len(shared)} name(s) given to more than one class or group, so a "
                              f"description saying one takes them all: {shown}{more}")


def starter_text(class_ids: list[str], senses: dict[str, list[tuple[str, str]]] | None = None) -> str:
    """A vocabulary.toml to start from: every class with its default name, and a commented group to copy.

    `senses`: class id -> the WordNet senses of its name, as (id, "name: gloss"), most used first
    (trainer/data/english.py), listed as comments for a person to check and to pin one of: unpinned, the
    exporter takes the one like the other classes of the class's groups.

    >>> print(starter_text(["school_bus"]).splitlines()[3])
    [classes.school_bus]
    >>> print(starter_text(["bee"], {"bee": [("n02206856", "bee: a hairy-bodied insect")]}).splitlines()[10])
    #   wordnet = "n02206856"   # bee: a hairy-bodied insect
    """
    lines = ["# The words people will type for these classes (docs/training.md, \"The vocabulary file\").",
             "# Give each class a short name and aliases, then add groups; everything is optional."]
    if senses is not None:
        lines += ["# wordnet: the senses of each class's name in WordNet. Unpinned, the exporter takes the one like",
                  "# the other classes of its groups (WordNet's first on a tie) and adds its synonyms, description",
                  "# and the kinds above it to the bundle. Pin one by removing its '#', or write wordnet = false."]
    lines.append("")
    for c, name in folder_names(class_ids).items():
        lines += [f"[classes.{_toml_key(c)}]", f"name = {_toml_string(name)}", "aliases = []"]
        if senses is not None:
            lines += _sense_lines(senses.get(c, []))
        lines.append("")
    lines += ["# [groups.animals]", '# aliases = ["creatures"]', "# members = [" + ", ".join(
        json.dumps(c, ensure_ascii=False) for c in class_ids[:2]) + "]   # class ids or other groups' names", ""]
    return "\n".join(lines)


def _sense_lines(senses: list[tuple[str, str]]) -> list[str]:
    def line(sense: tuple[str, str]) -> str:
        return f"wordnet = {_toml_string(sense[0])}   # {' '.join(sense[1].split())[:100]}"

    if not senses:
        return ["# wordnet: none for this name; it is read as a kind of its last word (or write wordnet = false)"]
    return [f"# wordnet: {len(senses)} sense{'s' if len(senses) > 1 else ''}:", *(f"#   {line(s)}" for s in senses)]


def folder_names(class_ids: list[str]) -> dict[str, str]:
    """The name each folder gives its class: "_" and "," read as spaces (a comma separates a description's
    items), and the number or WordNet id before it dropped when every folder has one (FOLDER_INDEX).

    >>> folder_names(["001.Black_footed_Albatross", "002.Laysan_Albatross"])["001.Black_footed_Albatross"]
    'Black footed Albatross'
    >>> folder_names(["7_up", "cola"])["7_up"]    # one folder's number is part of its name
    '7 up'
    """
    found = [FOLDER_INDEX.match(c) for c in class_ids]
    numbered = bool(found) and all(found)
    names = {}
    for c, index in zip(class_ids, found, strict=True):
        name = c[index.end():] if numbered else c
        names[c] = " ".join(name.replace("_", " ").replace(",", " ").split()) or c
    return names


def name_key(name: str) -> str:
    """How two names are compared: case and runs of spaces do not count."""
    return " ".join(name.lower().split())


def _keys(table: dict, allowed: set[str], where: str) -> None:
    extra = sorted(set(table) - allowed)
    if extra:
        raise DataError(f"{where}: unknown key(s) {extra} (allowed: {sorted(allowed)})")


def _text(value, what: str, limit: int = MAX_TEXT) -> str:
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{what} must be a non-empty string, got {value!r}")
    value = " ".join(value.split())
    try:
        check_text(value, what)   # the SDK's rule for a description: no control, invisible or unassigned character
    except DescriptionError as e:
        raise DataError(str(e)) from None
    if len(value) > limit:
        raise DataError(f"{what} is longer than {limit} characters")
    if "," in value and limit == MAX_TEXT:
        raise DataError(f"{what} holds a comma ({value!r}): a comma separates the items of a description, "
                        "so a name cannot hold one; give each name as its own alias")
    return value


def _aliases(value, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > MAX_ALIASES:
        raise DataError(f"{what}: aliases must be a list of at most {MAX_ALIASES} strings, got {value!r}")
    return tuple(dict.fromkeys(_text(a, f"{what}: an alias") for a in value))


def _class_words(class_id: str, body, what: str, folder_name: str) -> ClassWords:
    if not isinstance(body, dict):
        raise DataError(f"{what} must be a table")
    _keys(body, {"name", "aliases", "description", "wordnet"}, what)
    name = _text(body["name"], f"{what}: name") if "name" in body else folder_name
    description = _text(body["description"], f"{what}: description", MAX_DESCRIPTION) if "description" in body else ""
    aliases = tuple(a for a in _aliases(body.get("aliases", []), what) if name_key(a) != name_key(name))
    return ClassWords(class_id, name, aliases, description, _wordnet(body.get("wordnet"), what))


def _group_words(key: str, body, what: str) -> GroupWords:
    if not isinstance(body, dict):
        raise DataError(f"{what} must be a table")
    _keys(body, {"name", "aliases", "members", "description", "supercategory", "wordnet"}, what)
    _text(key, f"{what}: the group's key")
    name = _text(body["name"], f"{what}: name") if "name" in body else _text(key, f"{what}: the group's key")
    supercategory = body.get("supercategory", False)
    if not isinstance(supercategory, bool):
        raise DataError(f"{what}: supercategory must be true or false, got {supercategory!r}")
    members = body.get("members")
    if not isinstance(members, list) or not members or not all(isinstance(m, str) and m for m in members):
        raise DataError(f"{what}: members must be a non-empty list of class ids or group names")
    description = _text(body["description"], f"{what}: description", MAX_DESCRIPTION) if "description" in body else ""
    aliases = tuple(a for a in _aliases(body.get("aliases", []), what) if name_key(a) != name_key(name))
    return GroupWords(key, name, aliases, tuple(dict.fromkeys(members)), description, supercategory,
                      _wordnet(body.get("wordnet"), what))


def _wordnet(value, what: str) -> str | bool | None:
    """`wordnet = "n02206856"` pins a WordNet noun sense, `wordnet = false` opts out; absent: one is chosen."""
    if value is None or value is False:
        return value
    if not isinstance(value, str) or not WNID.fullmatch(value):
        raise DataError(f"{what}: wordnet must be a WordNet noun id (\"n\" and 8 digits, as \"n02206856\") or "
                        f"false, got {value!r}")
    return value


def _wordnet_line(value: str | bool | None) -> list[str]:
    return [] if value is None else ["wordnet = false" if value is False else f"wordnet = {_toml_string(value)}"]


def groups_text(groups: dict[str, list[str]]) -> str:
    """A vocabulary.toml of these groups and nothing else (no names, aliases or descriptions), as a person writes
    one first.

    >>> groups_text({"sea life": ["whale", "crab"]})
    '[groups."sea life"]\\nmembers = ["whale", "crab"]\\n'
    """
    return "".join(f"[groups.{_toml_key(g)}]\nmembers = {_toml_list(members)}\n" for g, members in groups.items())


def _toml_string(text: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's (a vocabulary's text holds no control characters)."""
    return json.dumps(text, ensure_ascii=False)


def _toml_key(key: str) -> str:
    return key if key.isascii() and key.replace("_", "").replace("-", "").isalnum() else _toml_string(key)


def _toml_list(items) -> str:
    return "[" + ", ".join(_toml_string(i) for i in items) + "]"
