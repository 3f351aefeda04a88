"""Description -> task: which of the bundle's classes the user means, and the task embedding.

Rules, in order:
1. A list of strings: each must name a class exactly (id, full name or any synonym; case-insensitive),
   else DescriptionError listing the unknown names.
2. A string with commas ("bicycle, pedestrian, tree") is resolved item by item with rules 3-5 and the
   union is taken; so is an item joined by the words "and", "or" or "&" ("cars and trucks"), unless the
   whole item is a name (rule 3 or a class name: "devices and instruments" is one group) or reads as a
   gloss, holding an article, a preposition or a relative word (GLOSS_WORDS: "a drinking glass with a
   base and stem" is one phrase, not "a drinking glass with a base" and "stem").
3. A string naming a group selects every class under it (at most MAX_GROUP_CLASSES): a super-category
   ("insects"), else any name of a concept (bundles of format 5: every WordNet hypernym of the classes
   with all its synonyms, "clothing", "wear", "veggie", "household appliance", and the exporter's
   everyday collections and class facets, "farm animals", "livestock"), else a node of the
   classes' hierarchy paths ("dog"). An exact class name selects that class and the classes within
   `margin` of it by text similarity (the resolution names them). Plurals are made singular first
   (`singular_forms`: "butterflies" -> the butterfly group, "wolves" -> "wolf", "geese" -> "goose").
3b. A phrase that is no name but is built from two groups (`TaskResolver._composed`): "non-X Y", "Y except
   X" (also "excluding", "but not", "other than") takes group Y's classes without those of X (a group, a
   modifier as below, or a class name: "non-insect invertebrates", "non-flying birds", "dogs except
   poodles"); "<modifier> Y" takes the classes of group Y that the modifier's group also holds,
   the modifier naming a group alone (not a singular made from a plural group name: 'drink' from 'drinks' does
   not make "drink containers" drinks) or before "animals", "things" or "creatures" ("small mammals": small
   animals and mammals; "large carnivores"). Only if both parts are understood and the result is a
   non-empty strict subset of Y, and never for a class name ("sea slug"); otherwise rules 4-5 read the phrase as before.
3c. A phrase that names nothing, holds a word the text encoder's vocabulary does not (`is_word`: "horse"
   is a word, not a typo of 'hose'), and is, or has a singular form that is, one edit from a name (two
   for one word of 8 or more characters; at least 4 characters) is read as that name, and the resolution
   says so: "insetcs" -> "insects", "retreivers" -> "retrievers" (`edit_distance`, `_spelling`).
3d. One word that names nothing but ends names ("trains": "bullet train", "high-speed train") takes the
   classes so named: kinds of it, and the resolution says that the word itself is no class (MISSING).
   (Group names answer their singular too: "puppy" for "puppies".)
   Rule 3d is tried before 3c.
4a. An item that names nothing in the bundle is a missing item: one word that is no name and no word of
   a name ("owl", "laptop"; "blue" among "blue disc" and "blue ring" is not), or a few words none of
   which is a word of any name ("polar bear", "coffee mug"), or a two-word noun that is no kind of its
   last word ("hot dog" is no dog, "teddy bear" no bear: sdk/text/compounds.py's list, from WordNet; the text
   encoder puts "hot dog" as near 'dogs' as "sled dog"), unless
   they read as a description: a gloss word, "my", "all", "kinds"... (DESCRIBING_WORDS), or a last word
   "things", "animals", "creatures", "stuff", "items" or "objects" ("my pets", "seaside creatures").
   By default (`TaskOptions.missing="tell"`) nothing is taken for it: the resolution says so (MISSING)
   and names its CLOSEST_NAMES closest classes by text similarity, and a description whose items are
   all missing raises DescriptionError with that text. (Issue 60: taking the nearest classes instead
   gave "owl" five unrelated classes.) With `missing="nearest"` (the behaviour before), a one-word
   missing item takes its closest class by text similarity (as one item of a list) or the classes
   within `margin` of it (alone), never a concept (rule 5), since a concept near the word need not be a
   kind of it ("tree" is near the concept 'wood'); as one item of a list, one that nothing matches
   (rule 4's contrast) is left out, and said so, where alone it fails.
4. Otherwise the text is embedded (with the first prompt of the class names' ensemble). If the best
   class stands out from the mean score over all classes by less than `min_contrast`, nothing matches
   and DescriptionError is raised. (Absolute similarities do not separate: with the prompt ensemble even
   "tuesday" scores ~0.5 against some class. The contrast default 0.13 is calibrated on Tiny ImageNet by
   `scripts/calibrate_descriptions.py`: it rejects none of 200 WordNet glosses and 92 class synonyms
   but only the most meaningless ~14% of unrelated words; docs/results/description_calibration.md.)
5. If a concept of at most `max_classes` classes is at least as similar to the text as the best class
   ("things to wear" is nearer "clothing" than any garment), its classes are taken, with those of the
   concepts within CONCEPT_MARGIN of it while the task stays within `max_classes` (a concept holding the
   best one joins only if at most SUPERSET_RATIO times its size: "my pets" takes "domestic animal" beside
   "dog", "farm animals" does not take "animal" beside "domestic animal"). Otherwise the classes scoring
   within `margin` of the best class are taken, at most `max_classes` (one item of a list: the best).
   On Tiny ImageNet (scripts/bench_retrieval.py, docs/results/retrieval.md) rules 2, 3 and 5 took the
   27 tuning phrasings from precision/recall 0.68/0.50 to 0.81/0.73 with WordNet concepts, a
   clean held-out set from 0.50/0.57 to 0.59/0.73 once the everyday collections were added, and with
   the class facets a new set from 0.69/0.71 to 0.86/0.98, but CIFAR-100's superclass names only from
   0.48/0.66 to 0.51/0.72; rule 3b then took those to 0.64/0.85 (they were its motive) and left the
   50 Open Images category names of set F, scored once, at 0.83/0.90 (0.83/0.90 without it).
Descriptions with control, invisible or unassigned characters, unpaired surrogates, empty lists and
options of the wrong type or range raise DescriptionError (`check_text`, `TaskOptions`).
A task has at least `min_classes` classes (nearest classes by text similarity are added if needed, and
the resolution says which).
The task embedding is the normalised mean of its classes' embeddings, as in training.
"""

from __future__ import annotations

import math
import re
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from sdk.errors import DescriptionError
from sdk.format.bundle import ClassInfo, Concept
from sdk.text.compounds import exocentric_compounds

MAX_DESCRIPTION_CHARS = 1000
MAX_CLASS_LIST = 10_000
MAX_GROUP_CLASSES = 100  # a named group is taken whole (max_classes does not cut it), up to this many
MAX_TASK_CLASSES = 100_000
# Rule 5, chosen on the 27 tuning phrasings (scripts/retrieval_phrasings.json; exploration on the bench
# bundle, 143 concepts): margins 0.02 and 0.03 gave the same precision/recall (0.82/0.73), 0.05 traded
# precision for recall (0.81/0.74); superset ratio 2 over 1: +0.009 precision, +0.019 recall.
CONCEPT_MARGIN = 0.03
SUPERSET_RATIO = 2
CONJUNCTIONS = frozenset({"and", "or", "&"})
# Rule 2: words that make an item a gloss, which is not cut at its conjunctions (issue 50: "a drinking glass
# with a base and stem" was cut at "and", and 'stem' took the concept 'plant part').
GLOSS_WORDS = frozenset({"a", "an", "the", "with", "without", "of", "for", "in", "on", "at", "to", "from", "by",
                         "that", "which", "who", "whose", "having"})
MISSING = "not a name this bundle knows"   # rule 4a's words in a resolution (the Java core's too)
MISSING_POLICIES = ("tell", "nearest")
CLOSEST_NAMES = 3        # rule 4a names this many closest classes for a missing item
# Rule 3c: a word of at least SPELLING_MIN_CHARS characters at most one edit (two from SPELLING_LONG_CHARS)
# from a name is read as that name ("insetcs" -> "insects"; an edit: a letter added, dropped, changed, or
# two neighbours swapped). Shorter words are left alone: "cat" is one edit from "car".
SPELLING_MIN_CHARS, SPELLING_LONG_CHARS = 4, 8
# Rule 3b. The kind nouns are those the exporter's class facets are named with ("small animals", "wooden
# things", "slimy creatures"), so a bare modifier ("small", "wooden") finds its facet.
EXCLUSION_PREFIX = "non-"
EXCLUSION_WORDS = ("except", "excluding", "but not", "other than")
KIND_NOUNS = ("animals", "things", "creatures")
# Rule 4a: a phrase ending in one of these describes (by meaning: rule 5) rather than names a missing item
DESCRIBING_NOUNS = frozenset({*KIND_NOUNS, "stuff", "items", "objects"})
# ... and so does a phrase holding a gloss word or one of these ("my pets", "all kinds of dogs")
DESCRIBING_WORDS = GLOSS_WORDS | {"my", "our", "your", "their", "his", "her", "its", "some", "all", "any", "every",
                                  "different", "kind", "kinds", "type", "types", "sort", "sorts"}
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


@dataclass(frozen=True)
class TaskOptions:
    """How a description becomes a task (see the module docstring). Checked on creation: a wrong type,
    a NaN or a value out of range raises DescriptionError.

    Args:
        max_classes: most classes taken from free text (1 to 100,000; a named group is taken whole).
        min_classes: fewest classes in a task (1 to max_classes); nearest classes pad it.
        margin: free text takes the classes within this of the best similarity (0 to 2).
        min_contrast: the best class must stand out from the mean similarity by this much (0 to 2).
        missing: what an item the bundle lacks gets (rule 4a): "tell" (default) nothing, only the closest
            names in the resolution; "nearest" its nearest classes by text similarity, as before issue 60.
    """
    max_classes: int = 20
    min_classes: int = 2
    margin: float = 0.08
    min_contrast: float = 0.13   # best similarity minus the mean over all classes; below: nothing matches
    missing: str = "tell"        # rule 4a: "tell" takes nothing for an item the bundle lacks; "nearest" its nearest

    def __post_init__(self) -> None:
        if self.missing not in MISSING_POLICIES:
            raise DescriptionError(f"missing must be one of {MISSING_POLICIES}, got {self.missing!r}")
        for name in ("max_classes", "min_classes"):
            value = getattr(self, name)
            if type(value) is not int or not 1 <= value <= MAX_TASK_CLASSES:
                raise DescriptionError(f"{name} must be an integer from 1 to {MAX_TASK_CLASSES}, got {value!r}")
        if self.min_classes > self.max_classes:
            raise DescriptionError(f"min_classes ({self.min_classes}) is larger than max_classes ({self.max_classes})")
        for name in ("margin", "min_contrast"):
            value = getattr(self, name)
            if type(value) not in (int, float) or not math.isfinite(value) or not 0 <= value <= 2:
                raise DescriptionError(f"{name} must be a number from 0 to 2 (cosine similarities), got {value!r}")


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


def contrast(scores: np.ndarray) -> float:
    """How far the best class's similarity stands out from the mean over all classes (the match rule)."""
    return float(scores.max() - scores.mean())


@dataclass
class Task:
    classes: np.ndarray           # sorted class indices
    embedding: np.ndarray         # [dim], unit length
    how: list[str] = field(default_factory=list)  # how each part of the description was resolved
    encode_ms: float = 0.0        # time spent embedding text (part of resolving)


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


def unit_mean(rows) -> np.ndarray:
    """The normalised mean of embedding rows, float32: a task's embedding from its classes' (as in training)."""
    mean = np.mean(rows, axis=0)
    return (mean / max(float(np.linalg.norm(mean)), 1e-12)).astype(np.float32)


def normalize_name(text: str) -> str:
    """How names are compared: case, surrounding space, runs of spaces/underscores and the Unicode spelling
    (NFC: "é" as one code point or as "e" plus an accent) do not count."""
    return unicodedata.normalize("NFC", re.sub(r"[\s_]+", " ", text.strip().lower()))


class TaskResolver:
    """Resolves descriptions against one bundle's classes (see the module docstring for the rules).

    >>> resolver = TaskResolver(bundle.classes, bundle.class_embeddings, bundle.supercategories, embed,
    ...                         bundle.concepts, bundle.concept_embeddings)                 # doctest: +SKIP
    >>> resolver.resolve("things to wear").how                                             # doctest: +SKIP
    ["'things to wear': concept 'clothing' (similarity 0.84 >= best class 0.68)"]
    """

    def __init__(self, classes: list[ClassInfo], class_embeddings: np.ndarray,
                 supercategories: dict[str, list[int]], embed_phrase: Callable[[str], np.ndarray],
                 concepts: Sequence[Concept] = (), concept_embeddings: np.ndarray | None = None,
                 compose: bool = True, is_word: Callable[[str], bool] | None = None,
                 exocentric: frozenset[str] | None = None):
        self.classes, self.embeddings, self.embed_phrase = classes, class_embeddings, embed_phrase
        # rule 4a: compounds that are no kind of their last word ("hot dog"); the shipped list by default
        self.exocentric = exocentric_compounds() if exocentric is None else exocentric
        self.is_word = is_word or (lambda word: False)   # rule 3c: real words are not corrected
        self.compose = compose  # rule 3b; False only to measure what it adds (scripts/bench_retrieval.py)
        self.concepts = list(concepts)
        self.concept_embeddings = (concept_embeddings if concept_embeddings is not None
                                   else np.zeros((0, class_embeddings.shape[1]), np.float32))
        self.concept_sizes = np.array([len(c.members) for c in self.concepts], np.int64)
        self.by_name: dict[str, int] = {}
        for i, c in enumerate(classes):
            for key in [c.id, c.name, *c.aliases]:
                self.by_name.setdefault(normalize_name(key), i)
        self.groups = self._groups(classes, supercategories)
        self.singulars: set[str] = set()   # the group names below, made from a plural one
        for name in list(self.groups):   # "puppies" (a group's alias) also answers "puppy"
            for form in singular_forms(name):   # every reading: "automobiles" -> "automobil", "automobile"
                if form not in self.groups and form not in self.by_name:
                    self.groups[form] = self.groups[name]
                    self.singulars.add(form)
        self.heads: dict[str, list[int]] = {}   # rule 3d: "train" -> the classes named "... train"
        for key, i in self.by_name.items():
            if " " in key:
                members = self.heads.setdefault(key.rsplit(" ", 1)[1], [])
                if i not in members:
                    members.append(i)
        self.names = sorted(set(self.by_name) | set(self.groups))   # every name rule 3c may correct to
        self.words = {w for name in self.names for w in name.split(" ")}   # rule 4a: words the bundle knows

    def _groups(self, classes: list[ClassInfo], supercategories: dict[str, list[int]]) -> dict[str, list[int]]:
        """Name -> classes, for rule 3: super-categories over concepts' primary names over their other
        names over hierarchy path nodes. Concepts sharing a name are merged ("vessel": container and boat)."""
        groups: dict[str, list[int]] = {}
        for synonyms in (False, True):
            named: dict[str, set[int]] = {}
            for concept in self.concepts:
                for name in concept.names[1:] if synonyms else concept.names[:1]:
                    named.setdefault(normalize_name(name), set()).update(concept.members)
            for name, members in named.items():
                groups.setdefault(name, sorted(members))
        nodes: dict[str, list[int]] = {}
        for i, c in enumerate(classes):  # inner nodes of the hierarchy ("dog", "insect", ...)
            for node in c.path[:-1]:
                nodes.setdefault(normalize_name(node), []).append(i)
        for name, members in nodes.items():
            groups.setdefault(name, members)
        for name, members in supercategories.items():
            groups[normalize_name(name)] = list(members)
        return groups

    def resolve(self, description: str | Sequence[str], options: TaskOptions | None = None) -> Task:
        options = options or TaskOptions()
        if isinstance(description, str):
            if len(description) > MAX_DESCRIPTION_CHARS:
                raise DescriptionError(f"the description is longer than {MAX_DESCRIPTION_CHARS} characters")
            text = check_text(description).strip()
            if not text:
                raise DescriptionError("the description is empty")
            items = [p for p in (s.strip() for s in text.split(",")) if p] if "," in text else [text]
            parts = [part for item in items for part in self._conjuncts(item)]
            if not parts:
                raise DescriptionError("the description has no words")
            chosen, how, encode = set(), [], 0.0
            for part in parts:
                indices, why, seconds = self._resolve_phrase(part, options, single=len(parts) == 1)
                chosen.update(indices)
                how.append(f"{part!r}: {why}")
                encode += seconds
            if not chosen:  # every item was a missing item that nothing matches (rule 4a)
                raise DescriptionError(f"nothing in this bundle matches any of {parts[:10]}: " + "; ".join(how))
        elif isinstance(description, (list, tuple)) and all(isinstance(d, str) for d in description):
            if not description:
                raise DescriptionError("the list of class names is empty")
            if len(description) > MAX_CLASS_LIST or any(len(d) > MAX_DESCRIPTION_CHARS for d in description):
                raise DescriptionError(f"at most {MAX_CLASS_LIST} class names of at most {MAX_DESCRIPTION_CHARS} "
                                       "characters each")
            for d in description:
                check_text(d, "a class name")
            unknown = [d for d in description if normalize_name(d) not in self.by_name]
            if unknown:
                raise DescriptionError(f"unknown class names: {unknown[:10]}")
            chosen, how, encode = {self.by_name[normalize_name(d)] for d in description}, ["explicit class list"], 0.0
        else:
            raise DescriptionError("a description is a string or a list of class names, "
                                   f"not {type(description).__name__}")
        asked = set(chosen)
        chosen = self._pad(sorted(chosen), options)
        added = [self.classes[i].name for i in chosen if i not in asked]
        if added:   # said, so that a class the user did not ask for is never silent (issue 60)
            how.append(f"added {', '.join(map(repr, added))}, the nearest by text similarity: a task holds at "
                       f"least {options.min_classes} classes")
        return Task(np.array(chosen, np.int64), unit_mean(self.embeddings[chosen]), how, round(encode * 1000, 3))

    def _named(self, key: str) -> bool:
        """Whether the normalised phrase (or its singular) is a group or a class name (rule 3)."""
        return any(f in self.groups or f in self.by_name for f in (key, *singular_forms(key)))

    def _conjuncts(self, item: str) -> list[str]:
        """The item's parts between the words "and", "or" and "&" (rule 2); [item] if it is a name, a gloss
        or has none."""
        key = normalize_name(item)
        if self._named(key) or any(word in GLOSS_WORDS for word in key.split(" ")):
            return [item]
        parts, words = [], []
        for word in key.split(" ") + ["and"]:
            if word in CONJUNCTIONS:
                if words:
                    parts.append(" ".join(words))
                words = []
            else:
                words.append(word)
        return parts if len(parts) > 1 else [item]

    def _resolve_phrase(self, phrase: str, options: TaskOptions, single: bool) -> tuple[list[int], str, float]:
        """(class indices, how they were found, seconds spent embedding the phrase)."""
        key = normalize_name(phrase)
        group = self._group(key)
        if group is not None:
            return group[1][:MAX_GROUP_CLASSES], f"group {group[0]!r}", 0.0
        key = next((c for c in (key, *singular_forms(key)) if c in self.by_name), key)  # "geese" -> "goose"
        composed = None if key in self.by_name or not self.compose else self._composed(key)
        if composed is not None:
            return (*composed, 0.0)
        if key in self.by_name and not single:  # one item of a list: the class itself, no embedding needed
            return [self.by_name[key]], "class name", 0.0
        head = next((f for f in (key, *singular_forms(key)) if f in self.heads), None) if " " not in key else None
        if head is not None and key not in self.by_name:
            members = sorted(self.heads[head])[:MAX_GROUP_CLASSES]
            return members, f"{MISSING} as one class: took the classes named '... {head}' (kinds of {head!r})", 0.0
        fixed = None if key in self.by_name or all(map(self.is_word, key.split(" "))) else next(
            (f for f in map(self._spelling, (key, *singular_forms(key))) if f is not None), None)
        if fixed is not None:
            indices, why, seconds = self._resolve_phrase(fixed, options, single)
            return indices, f"read as {fixed!r} (spelling): {why}", seconds
        start = time.perf_counter()
        embedding = self.embed_phrase(phrase)
        seconds = time.perf_counter() - start
        scores = self.embeddings @ embedding
        best = int(np.argmax(scores))
        if key in self.by_name:  # a single class name: it and its nearest neighbours
            chosen = self._top(scores, options, include=self.by_name[key])
            others = [self.classes[i].name for i in chosen if i != self.by_name[key]]
            why = ("class name" if not others else f"class name, with the classes within {options.margin} of its "
                   f"similarity ({', '.join(map(repr, others[:5]))}{', ...' if len(others) > 5 else ''}): a model "
                   "tells its classes apart, so it holds the class's look-alikes; give a list to choose them")
            return chosen, why, seconds
        standout = contrast(scores)
        if options.missing == "tell" and self._unknown(key):
            return [], self._told(scores, self._exocentric(key)), seconds
        if " " not in key:
            return (*self._missing(phrase, scores, standout, options, single), seconds)
        if standout < options.min_contrast:
            raise DescriptionError(f"nothing in this bundle matches {phrase!r} (closest: {self.classes[best].name!r}, "
                                   f"which stands out by only {standout:.2f} < min_contrast {options.min_contrast})")
        by_concept = self._concept_match(embedding, float(scores[best]), options)
        if by_concept is not None:
            return (*by_concept, seconds)
        if not single:
            return [best], f"closest class (similarity {scores[best]:.2f})", seconds
        closest = f"{self.classes[best].name!r}: {scores[best]:.2f}, contrast {standout:.2f}"
        return (self._top(scores, options), f"classes within {options.margin} of the best similarity ({closest})",
                seconds)

    def _unknown(self, key: str) -> bool:
        """Rule 4a: whether the normalised phrase names nothing here: one word that is no name nor a word of
        one (nor is its singular), or a few words
        (no DESCRIBING_WORDS word, not ending in a DESCRIBING_NOUNS one: "my pets", "seaside creatures"
        describe) none of which,
        nor its singular, is a word of any name ("polar bear", "coffee mug")."""
        words = key.split(" ")
        if len(words) == 1:   # "blue" on a bundle of "blue disc", "blue ring": a word its names use, not missing
            return key not in self.by_name and key not in self.groups and not any(
                f in self.words for f in (key, *singular_forms(key)))
        if any(w in DESCRIBING_WORDS for w in words) or words[-1] in DESCRIBING_NOUNS:
            return False
        return self._exocentric(key) is not None or not any(
            f in self.words for w in words for f in (w, *singular_forms(w)))

    def _exocentric(self, key: str) -> str | None:
        """Rule 4a: the form of `key` (itself or a singular: "hot dogs") that is a compound no kind of its last
        word, or None."""
        return next((f for f in (key, *singular_forms(key)) if f in self.exocentric), None)

    def _told(self, scores: np.ndarray, compound: str | None = None) -> str:
        """Rule 4a with missing="tell": what the resolution says of an item the bundle lacks (`compound`: the
        exocentric compound it is, said so)."""
        closest = ", ".join(repr(self.classes[int(i)].name) for i in np.argsort(-scores, kind="stable")[:CLOSEST_NAMES])
        why = "" if compound is None else f" (read whole, not as a kind of {compound.rsplit(' ', 1)[1]!r})"
        return f"{MISSING}{why}: nothing taken for it (closest classes: {closest})"

    def _spelling(self, key: str) -> str | None:
        """Rule 3c: the name one edit from `key` (two from SPELLING_LONG_CHARS characters for one word), the
        nearest and then the first in sorted order; None if there is none or `key` is short."""
        n = len(key)
        if n < SPELLING_MIN_CHARS:
            return None
        limit = 1 if n < SPELLING_LONG_CHARS or " " in key else 2   # a phrase: one edit ("medical things" is
        #                                                               two from "musical things")
        best, best_distance = None, limit + 1
        for name in self.names:
            if abs(len(name) - n) <= limit and len(name) >= SPELLING_MIN_CHARS:
                d = edit_distance(key, name, limit)
                if d < best_distance:
                    best, best_distance = name, d
        return best

    def _missing(self, phrase: str, scores: np.ndarray, standout: float, options: TaskOptions,
                 single: bool) -> tuple[list[int], str]:
        """Rule 4a: a one-word item that names nothing in the bundle, and what is taken instead of it."""
        best = int(np.argmax(scores))
        closest = f"{self.classes[best].name!r} (similarity {scores[best]:.2f}"
        if standout < options.min_contrast:
            if single:
                raise DescriptionError(f"nothing in this bundle matches {phrase!r}, {MISSING} (closest: {closest}, "
                                       f"standing out by only {standout:.2f} < min_contrast {options.min_contrast}))")
            return [], f"{MISSING}, and nothing in it is close (closest: {closest})): left out"
        if not single:
            return [best], f"{MISSING}: took the closest class {closest}) instead"
        return self._top(scores, options), (f"{MISSING}: took the classes within {options.margin} of the best "
                                            f"similarity instead (closest: {closest}, contrast {standout:.2f}))")

    def _group(self, key: str) -> tuple[str, list[int]] | None:
        """Rule 3: (the name found, the whole group) for the normalised phrase or its singular; None if it
        names no group."""
        return next(((f, self.groups[f]) for f in (key, *singular_forms(key)) if f in self.groups), None)

    def _composed(self, key: str) -> tuple[list[int], str] | None:
        """Rule 3b: (classes, how) of a phrase built from two groups, or None (see the module docstring).

        >>> resolver.resolve("small mammals").how                                  # doctest: +SKIP
        ["'small mammals': 'small animals' within group 'mammals'"]
        """
        words = key.split(" ")
        if len(words) < 2:
            return None
        excluded = self._exclusion(words)
        if excluded is not None:
            return excluded
        for k in range(1, len(words)):  # the longest head first: "small household items" tries "household items"
            head, modifier = " ".join(words[k:]), " ".join(words[:k])
            group = self._group(head)
            named = None if group is None else self._modifier(modifier)
            if named is not None:
                whole = group[1]
                kept = sorted(set(whole) & set(self.groups[named]))
                if 0 < len(kept) < len(set(whole)):
                    return kept[:MAX_GROUP_CLASSES], f"{named!r} within group {head!r}"
        return None

    def _modifier(self, words: str) -> str | None:
        """The group name a modifier stands for: itself, else itself before a kind noun ("small" -> "small
        animals"); None if neither is a group. Not a singular made from a plural group name: those answer the
        group's own name ("puppy"), and as modifiers they composed phrases the rule was never chosen on
        ("drink containers", which hold drinks, took the two drinks that are containers: issue 60)."""
        return next((n for n in (words, *(f"{words} {noun}" for noun in KIND_NOUNS))
                     if n in self.groups and n not in self.singulars), None)

    def _exclusion(self, words: list[str]) -> tuple[list[int], str] | None:
        """Rule 3b's "non-X Y" and "Y except X": Y's classes without X's, or None."""
        key = " ".join(words)
        if words[0].startswith(EXCLUSION_PREFIX) and len(words[0]) > len(EXCLUSION_PREFIX):
            kept_name, dropped_name = " ".join(words[1:]), words[0][len(EXCLUSION_PREFIX):]
        else:
            marker = next((w for w in EXCLUSION_WORDS if f" {w} " in f" {key} "), None)
            if marker is None:
                return None
            kept_name, _, dropped_name = f" {key} ".partition(f" {marker} ")
            kept_name, dropped_name = kept_name.strip(), dropped_name.strip()
        group = self._group(kept_name) if kept_name else None
        dropped = self._dropped(dropped_name) if dropped_name else None
        if group is None or dropped is None:
            return None
        whole = group[1]
        kept = sorted(set(whole) - set(dropped))
        if not 0 < len(kept) < len(set(whole)):
            return None
        return kept[:MAX_GROUP_CLASSES], f"group {kept_name!r} without {dropped_name!r}"

    def _dropped(self, name: str) -> list[int] | None:
        """The classes an exclusion names: a group, a modifier's group ("non-flying") or one class."""
        group = self._group(name)
        if group is not None:
            return group[1]
        if (modifier := self._modifier(name)) is not None:
            return self.groups[modifier]
        return next(([self.by_name[f]] for f in (name, *singular_forms(name)) if f in self.by_name), None)

    def _concept_match(self, embedding: np.ndarray, best_class: float, options: TaskOptions
                       ) -> tuple[list[int], str] | None:
        """Rule 5: the classes of the concepts nearest the text, if one is at least as near as any class."""
        eligible = self.concept_sizes <= options.max_classes
        if not eligible.any():
            return None
        scores = np.where(eligible, self.concept_embeddings @ embedding, -np.inf)
        order = np.argsort(-scores, kind="stable")
        top = int(order[0])
        if scores[top] < best_class:
            return None
        first = set(self.concepts[top].members)
        chosen, names = set(first), [self.concepts[top].names[0]]
        for j in order[1:]:
            if scores[j] < scores[top] - CONCEPT_MARGIN:
                break
            members = set(self.concepts[j].members)
            if members > first and len(members) > SUPERSET_RATIO * len(first):
                continue
            if len(chosen | members) <= options.max_classes and not members <= chosen:
                chosen |= members
                names.append(self.concepts[j].names[0])
        return (sorted(chosen), f"concept {' + '.join(map(repr, names))} (similarity {scores[top]:.2f} >= "
                                f"best class {best_class:.2f})")

    def _top(self, scores: np.ndarray, options: TaskOptions, include: int | None = None) -> list[int]:
        order = np.argsort(-scores)
        keep = [int(i) for i in order[: options.max_classes] if scores[i] >= scores[order[0]] - options.margin]
        if include is not None and include not in keep:
            keep = [include] + keep[: options.max_classes - 1]
        return keep

    def _pad(self, chosen: list[int], options: TaskOptions) -> list[int]:
        """Add nearest classes (by embedding) until the task has min_classes."""
        if len(chosen) >= options.min_classes:
            return chosen
        centre = self.embeddings[chosen].mean(0)
        for i in np.argsort(-(self.embeddings @ centre)):
            if len(chosen) >= options.min_classes:
                break
            if int(i) not in chosen:
                chosen.append(int(i))
        return sorted(chosen)
