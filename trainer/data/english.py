"""English knowledge for any vocabulary (issue 72): the WordNet sense of each class and group name, and the
kinds of thing above those senses, so that a bundle of a person's own classes understands "felines" or
"crustaceans" though its author wrote only "cats" and "sea animals".

Read at training and export time only, from WordNet 3.0's noun files (Debian's `wordnet-base`, installed by
`make setup`: /usr/share/wordnet/index.noun, data.noun, noun.exc). A device reads nothing of it: what it
needs, the concepts, their names and the class descriptions, goes into the bundle (export/bundle.py).

Which sense (`choose_senses`): the vocabulary's pin (`wordnet = "n02206856"`), none where it opts out
(`wordnet = false`), else, of the noun senses of the name (then of an alias, then of the id; plural or
not, "cats" -> cat), the one that is a kind of thing like the most other classes of its groups, WordNet's
first (its most used) on a tie. A class name WordNet lacks ("red sports car") is read as a kind of its last
word ("car"). A group's sense is the first of its name's that fits its classes (`_group_sense`):
"kitchen" is a room or a cuisine, neither of which holds a frying pan, so it gets none (the notes say so).
A kind that holds one class alone ("hat" for the only sombrero) names that class (`_kind_names`). Beside the
kinds above the senses: the kinds a class is of by other relations (`_related`, trainer/data/related_kinds.py:
"seafood" for lobsters) and the everyday collections that list its sense (`everyday_rows`: "kitchenware").

>>> wn = WordNet()                                       # doctest: +SKIP
>>> wn.synset(wn.first_sense("bees")).names[:2], wn.synset(wn.first_sense("bees")).gloss[:22]   # doctest: +SKIP
(('bee',), 'any of numerous hairy-b')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from sdk.format.bundle import DERIVED_CONCEPT_PREFIX, MAX_NAME_CHARS
from sdk.text.resolver.words import singular_forms

from .errors import DataError
from .everyday_collections import collection_groups
from .glosses import WNID, WORDNET_NOUNS, parse_gloss
from .related_kinds import related_groups
from .vocabulary import name_key

WORDNET_DIR = WORDNET_NOUNS.parent
ID_PREFIX = DERIVED_CONCEPT_PREFIX   # the concepts it adds are keyed wordnet/<offset>: derived, not the author's
# WordNet's own rules for noun endings (morphy): a plural form -> the singular to look up
SUFFIXES = (("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"), ("men", "man"),
            ("ies", "y"), ("s", ""))
CAMEL_CASE = re.compile(r"(?<=[a-z]{2})(?=[A-Z][a-z])")   # where "TeddyBear" splits (plain_words)
HYPERNYMS = ("@", "@i")      # pointer symbols of a noun's hypernyms and instance hypernyms
MEMBER_HOLONYM = "#m"         # ... and of the wholes it is a member of
HYPONYM = "~"                # ... and of its hyponyms (not "~i": an instance, "Beijing", is no kind of thing)
PART_MERONYM = "%p"          # ... and of its parts (an elephant's proboscis, "trunk", and its tusk)
PART_LEVELS = 1              # a class's parts: its sense's and those of the kinds right above it (two levels up gave
                             # every insect its wings: experiments.md, "Rule 6 with the names of a class's parts")
MAX_DEPTH = 40               # WordNet's noun hierarchy is at most ~20 deep; more is a damaged file
MAX_SENSES = 8               # the senses of a name compared with its neighbours (a lemma has at most ~30)
FIT_DEPTH = 4                # a kind this deep is specific: artifact, food, organism (not object, whole, matter)
# ... or this deep for two senses of one lexicographer file: 'geological formation' for a cliff and an alp, not
# 'physical entity' (1), all that the oak's wood (noun.plant, as the tree) shares with a rose
CATEGORY_DEPTH = 3
KIND_LEVELS = 3              # a kind that holds one class names it within this many steps up: hat, snake, dish
# a collection listing a kind right below a class's sense holds the class ("camel" for the Arabian camel); two
# levels made bread a meal (meat loaf is a kind of loaf of bread)
EVERYDAY_LEVELS_BELOW = 1
KIND_LEVELS_BELOW = 3        # a kind the bundle lacks is named below a concept within this many steps: dog -> beagle
# WordNet's lexicographer files of things a camera sees: animal, artifact, food, natural object, plant. A kind's name
# that one of these calls another kind of thing is no alias of a class ("drone": the male bee, and an aircraft)
SEEN_THINGS = frozenset({5, 6, 13, 17, 20})
ANIMAL_AND_FLESH = frozenset({5, 13})   # ... but an animal's name names its meat too ("buffalo", "lamb"): one thing
INFORMAL = "informal term"   # how WordNet glosses a hyponym that is another word for its hypernym ("pooch", "kitty")
GENERAL = " in general"      # ... or "<its hypernym's name> in general" ('apparel, clothes': "clothing in general")
# ... whose sense is this deep: animal, container, device, not organism or artifact (in a probe of the held-out
# vocabulary, before the most-used-sense filter, 2,788 names went below 'organism', mostly people: 'manslayer',
# 'humourist'; 1,530 below 'artifact')
HOLDER_DEPTH = 6
LICENSE = ("WordNet 3.0 (Princeton University): the WordNet licence, in the NOTICE member; the concepts keyed "
           "wordnet/, the WordNet synonyms among the class aliases, the descriptions taken from its glosses, the "
           "kinds below the concepts and WordNet's informal names for them are derived from it "
           "(provenance.english counts them)")


def lemma_key(phrase: str) -> str:
    """How WordNet's index files write a phrase: lower case, words joined by "_" ("Sea-Animals" -> "sea_animals")."""
    return "_".join(phrase.lower().replace("-", " ").split())


@dataclass(frozen=True)
class Synset:
    """One noun sense: its id (n + offset, as Tiny ImageNet's), its names (lemmas, spaces for "_"), the ids of
    its hypernyms, its gloss (the definition, without the quoted examples), the ids of its hyponyms and its
    lexicographer file (WordNet's 26 noun categories, its "supersense": 5 noun.animal, 6 noun.artifact, 17
    noun.object, natural objects; -1: not given)."""
    id: str
    names: tuple[str, ...]
    hypernyms: tuple[str, ...]
    gloss: str
    hyponyms: tuple[str, ...] = ()
    lexfile: int = -1
    members_of: tuple[str, ...] = ()   # its member holonyms: the wholes it is a member of (a railway car: train)
    parts: tuple[str, ...] = ()        # its part meronyms

    @property
    def unique_names(self) -> list[str]:
        """Its names as a concept's: each lemma once, whatever its case (the first spelling kept)."""
        seen: dict[str, str] = {}
        for name in self.names:
            seen.setdefault(name.lower(), name)
        return list(seen.values())


class WordNet:
    """WordNet 3.0's nouns from `folder`; DataError naming the file and `make setup` when it is missing."""

    def __init__(self, folder: Path = WORDNET_DIR):
        self.folder = Path(folder)
        self.index = _read_index(self._path("index.noun"))
        self.exceptions = _read_exceptions(self._path("noun.exc"))
        self._data = self._path("data.noun")
        self._counts: dict[str, dict[int, int]] | None = None   # cntlist.rev, read when first asked
        self._depths: dict[str, int] = {}
        self._kinds: dict[str, frozenset[str]] = {}   # asked for each pair of neighbours' senses

    def _path(self, name: str) -> Path:
        path = self.folder / name
        if not path.is_file():
            raise DataError(f"{path}: WordNet's noun files not found (Debian's wordnet-base: `make setup` installs "
                            "it, or apt-get install wordnet-base); they are read at training and export time only")
        return path

    def senses(self, phrase: str, every_form: bool = False) -> list[str]:
        """The noun senses of a phrase, most used first: itself, else its singular ("geese" -> goose); with
        `every_form`, those of itself then of its singulars ("primates": the order, then the animal)."""
        key = lemma_key(phrase)
        forms = [f for f in (key, *self.singulars(key)) if f in self.index]
        if every_form:
            return list(dict.fromkeys(s for f in forms for s in self.index[f]))
        return list(self.index[forms[0]]) if forms else []

    def singulars(self, key: str) -> list[str]:
        """WordNet's singular forms of a plural noun (its exception list, then its suffix rules), last word only."""
        head, _, last = key.rpartition("_")
        forms = list(self.exceptions.get(last, ()))
        forms += [last[: -len(end)] + to for end, to in SUFFIXES if last.endswith(end) and len(last) > len(end) + 1]
        return [f"{head}_{f}" if head else f for f in dict.fromkeys(forms)]

    def name_senses(self, phrase: str) -> tuple[list[str], str]:
        """The noun senses of a name as a folder or a person writes it, and the spelling that gave them: as
        written, else as plain words (`plain_words`: "TeddyBear", "Ladybugs!!", "cat (1)")."""
        for form in dict.fromkeys((phrase, plain_words(phrase))):
            found = self.senses(form)
            if found:
                return found, form
        return [], phrase

    def held(self, lemma: str, class_senses: set[str], above: set[str], besides: str | None = None) -> bool:
        """Whether some noun sense of the lemma (as written, not a singular of it), other than those at or below
        `besides`, is a class's sense, a kind above one (`above`) or a kind below one: the name may mean what the
        bundle has ("buffalo": the American bison, below the bison, as well as the Old World buffalo)."""
        key = lemma_key(lemma)
        return any(s in above or self.kinds(s) & class_senses for s in self.index.get(key, ())
                   if besides is None or besides not in self.kinds(s))

    def singular_other(self, lemma: str, synset_id: str) -> bool:
        """Whether a singular the resolver makes of the lemma (sdk.text.resolver.words.singular_forms, which a
        group's name also answers to), that is one by WordNet's morphology too (its exception list and suffix rules,
        `singulars`), is a noun WordNet gives other senses: "threads", an informal term for clothing, is the plural
        of "thread", which would take the clothes; "togs" is kept ("tog" is no noun), and so is "clothes": WordNet
        makes it "clothe", no noun, not "cloth" (the cost: the resolver's reading "cloth" answers the clothing too)."""
        key = lemma_key(lemma)
        forms = set(singular_forms(key)) & set(self.singulars(key))
        return any(synset_id not in self.index.get(form, (synset_id,)) for form in forms)

    def seen_otherwise(self, lemma: str, synset_id: str) -> bool:
        """Whether another noun sense of the lemma is a thing a camera sees (SEEN_THINGS) of another lexicographer
        file than `synset_id`'s: "drone" is the male bee (noun.animal) and a pilotless aircraft (noun.artifact);
        "locust" the insect and a tree; not "buffalo" (the bison, its meat, the water buffalo, an animal too, and a
        city)."""
        own = self.synset(synset_id).lexfile
        others = [self.synset(s).lexfile for s in self.index.get(lemma_key(lemma), ()) if s != synset_id]
        return any(other in SEEN_THINGS and other != own and {own, other} != ANIMAL_AND_FLESH for other in others)

    def part_names(self, synset_id: str, levels: int = PART_LEVELS) -> list[str]:
        """The names of the parts of a sense and of the kinds `levels` above it, each once: an African elephant has
        none of its own, an elephant "tusk", "proboscis", "trunk"; two levels up a pachyderm adds "thick skin"."""
        kinds, level = [synset_id], [synset_id]
        for _ in range(levels):
            level = [h for k in level for h in self.synset(k).hypernyms]
            kinds += level
        names: dict[str, str] = {}
        for kind in dict.fromkeys(kinds):
            for part in self.synset(kind).parts:
                for name in self.synset(part).unique_names:
                    names.setdefault(name.lower(), name)
        return list(names.values())

    def in_use_for(self, name: str, synset_id: str) -> bool:
        """Whether `synset_id` is one of the senses the name is most used for (`most_used`), as an alias must be: the
        cougar's synonym "painter" is mostly the artist (15 tags, the cougar 0), a plate's "home" where one lives."""
        return synset_id in self.most_used(name)

    def most_used(self, lemma: str) -> set[str]:
        """The lemma's noun senses that semantic concordances tag most often (cntlist.rev): "shoe" the footwear
        (27 tags), not the dealer's card shoe (0); "tiger" both the person and the feline (1 each); every sense
        when none is tagged, or the file is absent."""
        counts = self.tag_counts(lemma)
        return {s for s, c in counts.items() if c == max(counts.values())}

    def tag_counts(self, lemma: str) -> dict[str, int]:
        """The lemma's noun senses -> how often semantic concordances tag it in each (cntlist.rev; 0 without it)."""
        if self._counts is None:
            self._counts = _read_counts(self.folder / "cntlist.rev")
        key = lemma_key(lemma)
        senses = self.index.get(key, ())
        return {s: self._counts.get(key, {}).get(rank, 0) for rank, s in enumerate(senses, 1)}

    def first_sense(self, phrase: str) -> str | None:
        senses = self.senses(phrase)
        return senses[0] if senses else None

    def synset(self, synset_id: str) -> Synset:
        return _read_synset(self._data, synset_id)

    def depth(self, synset_id: str) -> int:
        """Edges on the longest hypernym path up to the root (entity: 0; animal: 6; artifact: 4; food: 4)."""
        if synset_id not in self._depths:
            hypernyms = self.synset(synset_id).hypernyms
            self._depths[synset_id] = 0   # a cycle in a damaged file ends here instead of recursing forever
            self._depths[synset_id] = 1 + max(map(self.depth, hypernyms)) if hypernyms else 0
        return self._depths[synset_id]

    def kinds(self, synset_id: str) -> frozenset[str]:
        """The sense and every kind of thing above it."""
        if synset_id not in self._kinds:
            self._kinds[synset_id] = frozenset((synset_id, *self.ancestors(synset_id)))
        return self._kinds[synset_id]

    def below(self, synset_id: str, levels: int) -> list[str]:
        """The kinds at most `levels` steps below a sense (its hyponyms, theirs, ...)."""
        found, level = [], [synset_id]
        for _ in range(levels):
            level = [k for s in level for k in self.synset(s).hyponyms]
            found += level
        return found

    def alike(self, a: str, b: str) -> bool:
        """Whether two senses are alike (`likeness`)."""
        return self.likeness(a, b)[0]

    def likeness(self, a: str, b: str) -> tuple[bool, int]:
        """(whether two senses are alike, `shared_depth`): alike if they share a kind at least FIT_DEPTH deep (an
        animal, an artifact, food), or one CATEGORY_DEPTH deep and are of one lexicographer file (`same_category`:
        a cliff and an alp, natural objects, share only 'geological formation', 3 deep; the oak's wood, filed
        with the plants, shares only 'physical entity' with a rose)."""
        depth = self.shared_depth(a, b)
        return depth >= FIT_DEPTH or depth >= CATEGORY_DEPTH and self.same_category(a, b), depth

    def same_category(self, a: str, b: str) -> bool:
        """Whether two senses are of one lexicographer file, WordNet's own coarse category of a noun sense."""
        category = self.synset(a).lexfile
        return category >= 0 and category == self.synset(b).lexfile

    def shared_depth(self, a: str, b: str) -> int:
        """The depth of the deepest kind two senses share (0: only the root), how alike they are: a scorpion
        the arachnid shares 'arachnid' (depth 9) with a tarantula, the astrological person only 'organism' (5)."""
        return max((self.depth(k) for k in self.kinds(a) & self.kinds(b)), default=0)

    def ancestors(self, synset_id: str) -> list[str]:
        """Every hypernym above a sense (all paths, instance hypernyms too), nearest first, itself excluded."""
        found: dict[str, None] = {}
        frontier, depth = [synset_id], 0
        while frontier and depth < MAX_DEPTH:
            frontier = [h for s in frontier for h in self.synset(s).hypernyms if h not in found]
            found.update(dict.fromkeys(frontier))
            depth += 1
        return list(found)


def plain_words(name: str) -> str:
    """A folder name as plain words: words run together in camel case split ("TeddyBear" -> "Teddy Bear"; not
    "iPhone" or "McDonald": two lower-case letters must come first), a part in parentheses dropped ("cat (1)",
    a copy's number), other signs but hyphens, apostrophes and full stops read as spaces ("Ladybugs!!").

    >>> plain_words("TeddyBear"), plain_words("Ladybugs!!"), plain_words("cat (1)"), plain_words("St. Bernard")
    ('Teddy Bear', 'Ladybugs', 'cat', 'St. Bernard')
    """
    words = CAMEL_CASE.sub(" ", re.sub(r"\([^()]*\)", " ", name))
    return " ".join(re.sub(r"[^\w\s'.-]|_", " ", words).split()).strip(".-' ") or name


def modifiers(classes) -> set[str]:
    """The words (lower case, `plain_words`) the classes' names and aliases have before their last word: a related
    kind that such a word names is not named so (trainer/data/related_kinds.py: "meat", of "meat loaf").

    >>> from trainer.data.vocabulary import ClassWords
    >>> sorted(modifiers([ClassWords("a", "meat loaf", ("MeatLoaf",)), ClassWords("b", "bullet train", ())]))
    ['bullet', 'meat']
    """
    return {w for words in classes for name in (words.name, *words.aliases)
            for w in plain_words(name).lower().split()[:-1]}


def _read_index(path: Path) -> dict[str, tuple[str, ...]]:
    """index.noun: lemma -> its synset ids in sense order (lemma, pos, synset_cnt, p_cnt, p_cnt pointer
    symbols, sense_cnt, tagsense_cnt, then synset_cnt offsets)."""
    index = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith(" "):   # the licence at the top of the file
                continue
            cols = line.split()
            try:
                count, pointers = int(cols[2]), int(cols[3])
                offsets = cols[6 + pointers: 6 + pointers + count]
            except (IndexError, ValueError):
                raise DataError(f"{path}: not WordNet's index.noun (line {line[:60]!r})") from None
            index[cols[0]] = tuple(f"n{o}" for o in offsets)
    # A lemma spelled with a hyphen ("t-shirt", "black-footed_albatross": 3,615 of them) under its spaced form
    # too, which is how `WordNet.senses` looks a phrase up; a lemma of that spelling keeps its own senses.
    for lemma in [k for k in index if "-" in k]:
        index.setdefault(lemma.replace("-", "_"), index[lemma])
    return index


def _read_counts(path: Path) -> dict[str, dict[int, int]]:
    """cntlist.rev's nouns: lemma -> {sense number: tag count} (lines "lemma%1:lexfile:id:: number count");
    {} without the file (every sense then counts the same)."""
    counts: dict[str, dict[int, int]] = {}
    if not path.is_file():
        return counts
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        cols = line.split()
        lemma, _, kind = cols[0].partition("%") if cols else ("", "", "")
        if len(cols) == 3 and kind.startswith("1:") and cols[1].isdigit() and cols[2].isdigit():
            counts.setdefault(lemma, {})[int(cols[1])] = int(cols[2])
    return counts


def _read_exceptions(path: Path) -> dict[str, tuple[str, ...]]:
    """noun.exc: irregular plural -> its singulars ("geese" -> goose)."""
    out = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        cols = line.split()
        if len(cols) >= 2:
            out[cols[0]] = tuple(cols[1:])
    return out


@lru_cache(maxsize=200_000)
def _read_synset(data: Path, synset_id: str) -> Synset:
    """The synset at its byte offset in data.noun (WordNet's offsets are byte offsets)."""
    if not WNID.fullmatch(synset_id):
        raise DataError(f"{synset_id!r} is not a WordNet noun id (n and 8 digits, as n02206856)")
    with open(data, "rb") as f:
        f.seek(int(synset_id[1:]))
        line = f.readline().decode("utf-8", errors="replace")
    if not line.startswith(synset_id[1:] + " "):
        raise DataError(f"{data}: no noun sense {synset_id}")
    cols = line.partition(" | ")[0].split()
    count = int(cols[3], 16)
    names = tuple(cols[4 + 2 * i].replace("_", " ") for i in range(count))
    at = 4 + 2 * count
    pointers = int(cols[at])
    pointed = [(cols[at + 1 + 4 * i], f"n{cols[at + 2 + 4 * i]}") for i in range(pointers)
               if cols[at + 3 + 4 * i] == "n"]
    hypernyms = tuple(target for symbol, target in pointed if symbol in HYPERNYMS)
    hyponyms = tuple(target for symbol, target in pointed if symbol == HYPONYM)
    members_of = tuple(target for symbol, target in pointed if symbol == MEMBER_HOLONYM)
    parts = tuple(target for symbol, target in pointed if symbol == PART_MERONYM)
    return Synset(synset_id, tuple(re.sub(r"\([a-z]+\)$", "", n) for n in names), hypernyms, parse_gloss(line),
                  hyponyms, int(cols[1]) if cols[1].isdigit() else -1, members_of, parts)


@dataclass
class English:
    """What WordNet adds to a vocabulary: per class its sense (and how it was found), the concepts above the
    senses, the synonyms of each class's sense and the glosses of the classes without a description."""
    senses: dict[str, str]            # class id -> synset id
    how: dict[str, str]               # class id -> "pinned", "name 'bee'", "kind of 'car'" (its last word)
    group_senses: dict[str, str]      # group key -> synset id, kept where it fits the group's classes
    concepts: list[dict]              # {"id": "wordnet/n...", "names", "members"}: ClassHierarchy.concepts' form
    aliases: dict[str, tuple[str, ...]]
    descriptions: dict[str, str]
    notes: list[str]
    # the name of a kind no class is -> the concepts that hold it, most specific first: concept ids, wordnet/<id>
    # or a group's key (`kinds_below`)
    kinds_below: dict[str, list[str]] = field(default_factory=dict)
    informal: dict[str, list[str]] = field(default_factory=dict)   # WordNet's informal terms for a concept, the same


def choose_senses(vocabulary, wordnet: WordNet) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """Each class's sense, and how it was found: the pinned one; none for `wordnet = false`; else, of the
    senses of its name (then of an alias, then of its id), the one that is a kind of thing like the most of
    its neighbours (the other classes of its groups; all other classes for a class in none), then one that
    WordNet's concordances tag most (`most_used`), then the one whose shared kinds are the most specific (summed
    depths), WordNet's first on a tie. "banana" among lemons and oranges is the fruit, not WordNet's first, the
    banana tree; "scorpion" among spiders the arachnid, not the astrological person WordNet lists first (both are
    organisms, like a spider; no sense is tagged); "tractor" among cars the farm tractor WordNet's tags favour,
    though the truck's cab shares the more specific 'motor vehicle' with them;
    "american lobster" among jellyfish and corals the animal, not its flesh; "labrador" among dogs has only
    the Canadian region, like none of them, so its alias "labrador retriever" gives the dog; without such an alias
    it gets none, and a note says to pin one (a class in no group keeps its name's best then; `_sense_like`).

    Like (`WordNet.likeness`): the two share a kind at least FIT_DEPTH deep (an animal, an artifact, food), not
    only "object" or "matter", or one CATEGORY_DEPTH deep and are of one lexicographer file: "cliff" among alps and
    seashores, natural objects that share only 'geological formation' (3 deep), has the steep face of rock. The
    neighbours' senses are their first ones, then, in a second pass, the ones chosen."""
    pinned, asked, notes = {}, {}, []
    for c, words in vocabulary.classes.items():
        if words.wordnet is False:
            continue
        if isinstance(words.wordnet, str):
            wordnet.synset(words.wordnet)   # a pin that is no sense is the author's mistake: DataError
            pinned[c] = words.wordnet
            continue
        candidates = _name_senses(wordnet, c, words)
        if candidates:
            asked[c] = candidates
        else:
            notes.append(f"class {c!r}: no English noun in WordNet for {words.name!r}")
    members = {g: vocabulary.members(g) for g in vocabulary.groups}
    grouped = {c: [m for held in members.values() if c in held for m in held if m != c] for c in asked}
    neighbours = {c: grouped[c] or [m for m in vocabulary.classes if m != c] for c in asked}
    chosen = {**{c: candidates[0][0][0] for c, candidates in asked.items()}, **pinned}
    source = dict.fromkeys(asked, 0)   # which of a class's phrases gave its sense
    for _ in range(2):
        current = dict(chosen)
        for c, candidates in asked.items():
            around = [current[m] for m in dict.fromkeys(neighbours[c]) if current.get(m)]   # not those with none
            if around:
                chosen[c], source[c] = _sense_like(wordnet, candidates, around, bool(grouped[c]))
    senses, how = dict(pinned), dict.fromkeys(pinned, "pinned")
    for c, candidates in asked.items():
        found, phrase, said = candidates[source[c]]
        if chosen[c] is None:
            notes.append(f"class {c!r}: no WordNet sense of {phrase!r} is a kind of thing like the "
                         f"other classes of its groups (the first: {wordnet.synset(found[0]).gloss[:60]!r}); none "
                         "used: pin one with wordnet = \"n...\" (its id), or opt out with wordnet = false")
        else:
            senses[c] = chosen[c]
            rank = found.index(chosen[c])
            how[c] = said + ("" if rank == 0 else f", its sense {rank + 1}: WordNet's first is unlike its neighbours")
            if source[c]:
                how[c] += f"; no sense of {candidates[0][1]!r} is like them"
    return senses, how, notes


def _sense_like(wordnet: WordNet, candidates: list[tuple[list[str], str, str]], around: list[str],
                grouped: bool) -> tuple[str | None, int]:
    """The sense a class gets among its neighbours' senses `around`, and which of its phrases gave it: of the first
    phrase (its name, else an alias, else its id) with a sense like at least one neighbour, the sense like the most
    of them, then one of the phrase's most used senses, then the one whose shared kinds are the most specific. None
    if no phrase has one and the class is in a group ("labrador" among dogs is only the Canadian region, but its
    alias "labrador retriever" is the dog); a class in no group keeps its name's best."""
    best = None
    for i, (found, phrase, _) in enumerate(candidates):
        used = wordnet.most_used(phrase)
        liked = [_liking(s in used, [wordnet.likeness(s, n) for n in around]) for s in found]
        top = max(liked)
        if top[0]:
            return found[liked.index(top)], i
        if best is None:
            best = found[liked.index(top)]
    return (None if grouped else best), 0


def _liking(most_used: bool, likeness: list[tuple[bool, int]]) -> tuple[int, bool, int]:
    """How a sense ranks against its neighbours' (`WordNet.likeness` with each): how many it is like, whether it
    is one of its name's most used senses, the summed depth of what it shares with those."""
    alike = [depth for like, depth in likeness if like]
    return len(alike), most_used, sum(alike)


def _name_senses(wordnet: WordNet, class_id: str, words) -> list[tuple[list[str], str, str]]:
    """A class's candidate senses by phrase, in the order they are tried: for each of its name, aliases and id that
    WordNet has, its senses, the spelling that gave them and how to say so; failing all, those of its name's last
    word (a kind of it); [] if none."""
    out, seen = [], set()
    for phrase in (words.name, *words.aliases, class_id.replace("_", " ")):
        found, form = wordnet.name_senses(phrase)
        if found and tuple(found) not in seen:
            seen.add(tuple(found))
            out.append((found[:MAX_SENSES], form, f"name {form!r}"))
    if out:
        return out
    plain = plain_words(words.name)
    head = plain.split()[-1]
    found = wordnet.senses(head)[:MAX_SENSES] if head != plain else []
    return [(found, head, f"kind of {head!r}")] if found else []


def english_for(vocabulary, wordnet: WordNet | None = None) -> English:
    """What WordNet adds to `vocabulary` (trainer/data/vocabulary.py), as the module docstring says.

    Concepts: every sense that is a class's or a kind above one, holding at least two classes but not all
    (nor all that have a sense), named by all its synonyms, keyed wordnet/<id>; a group's own sense, kept
    where it fits (`_group_sense`), adds its synonyms as a concept of the group's classes ("sea animals" ->
    "marine creature", "sea creature"). Aliases: the synonyms of a class's own sense (not of a "kind of"
    one). Descriptions: its gloss, for a class whose author wrote none."""
    wordnet = wordnet or WordNet()
    senses, how, notes = choose_senses(vocabulary, wordnet)
    ids = list(vocabulary.classes)
    position = {c: i for i, c in enumerate(ids)}
    held: dict[str, list[int]] = {}
    for i, c in enumerate(ids):
        if c in senses:
            for kind in [senses[c], *wordnet.ancestors(senses[c])]:
                held.setdefault(kind, []).append(i)
    # A kind above every class that has a sense tells none apart ("entity", "whole" when one class has none).
    concepts = {kind: members for kind, members in held.items() if 2 <= len(members) < min(len(ids), len(senses))}
    group_senses = {}
    for g, group in vocabulary.groups.items():
        sense = _group_sense(vocabulary, wordnet, g, group, senses)
        if sense is None:
            if group.wordnet is not False:
                notes.append(f"group {g!r}: no WordNet sense of {group.name!r} fits its classes; its names are only "
                             "the vocabulary's")
            continue
        group_senses[g] = sense
        members = sorted(position[c] for c in vocabulary.members(g))
        if 2 <= len(members) < len(ids) and sense not in concepts:
            concepts[sense] = members
    names = {kind: wordnet.synset(kind).unique_names for kind in concepts}
    for kind, (members, kind_names) in _related(vocabulary, wordnet, senses, held).items():   # "seafood": lobsters
        names.setdefault(kind, kind_names)
        concepts[kind] = members
    rows = [{"id": ID_PREFIX + kind, "names": names[kind], "members": sorted(set(members))}
            for kind, members in concepts.items()]
    rows += everyday_rows(vocabulary, {c: [*wordnet.kinds(s), *wordnet.below(s, EVERYDAY_LEVELS_BELOW)]
                                       for c, s in senses.items()})
    rows.sort(key=lambda r: (-len(r["members"]), r["id"]))
    aliases, descriptions = {}, {}
    kind_of = {c for c in senses if how[c].startswith("kind of")}   # its sense is its last word's: "my red car"
    kinds = _kind_names(vocabulary, wordnet, senses, kind_of, held, position, rows)
    written = {c: [c.replace("_", " "), w.name, *w.aliases] for c, w in vocabulary.classes.items()}
    taken = _group_names(vocabulary, rows) | {n.lower() for names in (*written.values(), *kinds.values())
                                              for n in names}
    below = kinds_of_classes(wordnet, {c: s for c, s in senses.items() if c not in kind_of}, written, taken)
    for c, sense in senses.items():
        words = vocabulary.classes[c]
        known = {w.lower() for w in (words.name, *words.aliases)}
        own = [] if c in kind_of else [n for n in wordnet.synset(sense).unique_names if wordnet.in_use_for(n, sense)]
        aliases[c] = tuple(dict.fromkeys(n for n in own + kinds[c] + below.get(c, []) if n.lower() not in known))
        if not words.description and c not in kind_of:
            descriptions[c] = derived_description(wordnet, sense)
    holders = {kind: (ID_PREFIX + kind, len(set(members))) for kind, members in concepts.items()}
    groups = [(g, sense, len(vocabulary.members(g))) for g, sense in group_senses.items()]
    below, informal = kinds_below(wordnet, set(senses.values()), set(held), holders,
                                  [(g, sense, n) for g, sense, n in groups if 2 <= n < len(ids)])
    return English(senses, how, group_senses, rows, aliases, descriptions, notes, below, informal)


def derived_description(wordnet: WordNet, sense: str) -> str:
    """The description a class of `sense` gets when its author wrote none: the gloss, and the names of its parts
    after "with" (`WordNet.part_names`), so that rule 6 of sdk.text.resolver reads "a huge animal with a long trunk"
    as the elephant, whose gloss names no trunk (experiments.md, "Rule 6 with the names of a class's parts").

    >>> derived_description(WordNet(), "n02504458")[-40:]                                 # doctest: +SKIP
    'ivory tusks; with tusk, proboscis, trunk'
    """
    synset = wordnet.synset(sense)
    parts = wordnet.part_names(sense)
    text = synset.gloss + (f"; with {', '.join(parts)}" if parts else "")
    return text[:MAX_NAME_CHARS]   # the readers' bound on a description


def _related(vocabulary, wordnet: WordNet, senses: dict[str, str], held: dict[str, list[int]]
             ) -> dict[str, tuple[list[int], list[str]]]:
    """The kinds at least two classes, not all, are of by a relation beyond the hypernyms
    (trainer/data/related_kinds.py: the lobsters' flesh is seafood; the freight car is a member of a train), each
    with its classes (those that are kinds of it too, `held`) and its names."""
    ids = list(vocabulary.classes)
    found = related_groups(wordnet, {c: senses[c] for c in ids if c in senses},
                           lambda kind: [ids[i] for i in held.get(kind, ())], modifiers(vocabulary.classes.values()))
    position = {c: i for i, c in enumerate(ids)}
    return {kind: ([position[c] for c in members], names) for kind, (members, names) in found.items()
            if len(members) < len(ids)}


def everyday_rows(vocabulary, kinds: dict[str, list[str]]) -> list[dict]:
    """The everyday collections (trainer/data/everyday_collections.py, the groups Tiny ImageNet's vocabulary gets)
    of a vocabulary of one's own classes, as concept rows keyed `collection/`: a class is in one whose list holds
    its sense, a kind above it or one just below it (`kinds`: class id -> those WordNet ids; "camel" for the listed
    Arabian camel). The author's words win: a name the vocabulary uses is not added again, and a collection that
    shares a name with one of its groups and holds more than half of that group's classes, and none outside it, is
    that group under its other names ("marine life" takes the author's sea animals, the jellyfish too, whose sense
    the collection does not list; "monuments" does not take the author's landmarks, bridges among them). The
    class facets are not added: on the held-out vocabularies their many words took "apes" to the baboon and kept
    "desert" from being told missing (docs/results/experiments.md, "The everyday collections for a vocabulary of
    one's own classes").

    >>> from trainer.data.vocabulary import Vocabulary
    >>> v = Vocabulary.default(["pan", "wok", "cardigan"])
    >>> kinds = {"pan": ["n03400231"], "wok": ["n04596742"], "cardigan": ["n02963159"]}
    >>> [r["names"][:2] for r in everyday_rows(v, kinds)][:2]
    [['kitchenware', 'kitchen utensils'], ['kitchen utensils', 'kitchenware']]
    """
    ids = list(vocabulary.classes)
    position = {c: i for i, c in enumerate(ids)}
    authored = {name_key(w): key for key, words in vocabulary.groups.items() for w in (words.name, *words.aliases)}
    taken = set(authored) | {name_key(w) for words in vocabulary.classes.values() for w in (words.name, *words.aliases)}
    taken |= {name_key(c.replace("_", " ")) for c in ids}
    rows = []
    for group in collection_groups([c for c in ids if c in kinds], kinds=kinds):
        own = next((authored[n] for n in (group.name, *group.aliases) if n in authored), None)
        held = vocabulary.members(own) if own is not None else ()
        same = set(group.members) <= set(held) and 2 * len(group.members) > len(held)
        members = sorted(position[c] for c in (held if same else group.members))
        if group.name in taken or len(members) >= len(ids):
            continue
        rows.append({"id": group.id, "names": [group.name, *(a for a in group.aliases if a not in taken)],
                     "members": members})
    return rows


def kinds_below(wordnet: WordNet, class_senses: set[str], above: set[str], concepts: dict[str, tuple[str, int]],
                groups: list[tuple[str, str, int]]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """The kinds of thing the bundle lacks that lie below its concepts, by name, and WordNet's informal terms
    for a concept, each as name -> the ids of the concepts that hold it, most specific first (fewest classes;
    a group the author wrote first on a tie; the deepest sense).

    A kind is a hyponym at most KIND_LEVELS_BELOW steps below a concept's sense (or an author's group's: "dogs"
    is the dog) at least HOLDER_DEPTH deep, that is no class's sense, no kind above one (`above`) and no kind
    below one (a "toy poodle" is the bundle's poodle, not a dog it lacks). A name goes with such a kind only
    where the kind is one of its most used senses (`WordNet.most_used`: "shoe" is footwear, not the card shoe
    below 'container'; "tiger" is an audacious person and a feline, tagged once each, and only the feline lies
    below a concept here). The resolver tells such a name missing and names its group: "beagle" -> a kind of
    'hunting dog'. A hyponym right below a concept's sense whose gloss begins INFORMAL ("pooch, doggie, doggy:
    informal terms for dogs"; 31 synsets in WordNet 3.0) or "<the concept> in general" ("clothes": "clothing in
    general"; `_other_word`) is no kind of it but another word for it: its names go to the second dict, to be the
    concept's names ("doggies" -> the dogs), but for a plural of another noun (`WordNet.singular_other`).

    `concepts`: sense -> (concept id, number of classes); `groups`: (group key, its sense, number of classes)."""
    holders = [(n, 1, -wordnet.depth(sense), key, sense) for sense, (key, n) in concepts.items()]
    holders += [(n, 0, -wordnet.depth(sense), key, sense) for key, sense, n in groups]
    found: dict[str, dict[str, tuple]] = {}   # name (lower case) -> holder id -> its order key
    informal: dict[str, dict[str, tuple]] = {}
    spelled: dict[str, str] = {}              # name (lower case) -> as WordNet spells it
    for n, authored_last, depth, key, sense in holders:
        if -depth < HOLDER_DEPTH:
            continue
        seen, level = {sense}, [sense]
        for steps in range(1, KIND_LEVELS_BELOW + 1):
            level = [k for s in level for k in wordnet.synset(s).hyponyms if k not in seen and k not in class_senses]
            seen.update(level)
            for kind in level:
                if kind in above or wordnet.kinds(kind) & class_senses:
                    continue
                other_word = steps == 1 and _other_word(wordnet.synset(kind).gloss, wordnet.synset(sense).names)
                for name in wordnet.synset(kind).names:
                    if not wordnet.in_use_for(name, kind):   # "shoe" is footwear, not the card shoe below 'container'
                        continue
                    if wordnet.held(name, class_senses, above):   # "buffalo" is also the bison's American bison
                        continue
                    if other_word and wordnet.singular_other(name, kind):   # "threads": "thread" would take clothes
                        continue
                    spelled.setdefault(name.lower(), name)
                    (informal if other_word else found).setdefault(name.lower(), {})[key] = (n, authored_last, depth,
                                                                                              key)
    return tuple({spelled[name]: sorted(by, key=by.__getitem__) for name, by in sorted(table.items())}
                 for table in (found, informal))


def _other_word(gloss: str, above: tuple[str, ...]) -> bool:
    """Whether a hyponym's gloss says it is another word for its hypernym (named `above`), not a kind of it: an
    informal term ("pooch, doggie, doggy: informal terms for dogs"), or the hypernym "in general" ('apparel, clothes':
    "clothing in general"; 3 synsets in WordNet 3.0, 'folk' and 'populace' the others).

    >>> _other_word("clothing in general; \"she was refined in her choice of apparel\"", ("clothing", "vesture"))
    True
    """
    return gloss.startswith(INFORMAL) or any(gloss.lower().startswith(n.lower() + GENERAL) for n in above)


def kinds_of_classes(wordnet: WordNet, senses: dict[str, str], own_names: dict[str, list[str]],
                     taken: set[str]) -> dict[str, list[str]]:
    """Per class, the names of the kinds below its sense, at most KIND_LEVELS_BELOW steps and above no other
    class's sense: a grizzly is a brown bear, so "grizzly" names the bundle's brown bear, as an alias of it.

    A name goes with such a kind only where the kind is its one most used sense (`WordNet.most_used`: "buffalo",
    tagged as the American bison, below the bison, not as the Old World buffalo; not "silverfish", as often the
    insect as the goldfish), where no other sense of it is a class's, a kind above one or below another class,
    where no other sense is another kind of thing a camera sees (`WordNet.seen_otherwise`: not "drone", also an
    aircraft, though its concordances tag the male bee most),
    where it is none of `taken` (lower case: what the bundle's names already say) and where it names one class
    only. A name of several words goes only if each of its words is a word of the class's names (`own_names`,
    and the one-word names found): "grizzly bear" for the brown bear, not "Kodiak bear", whose "kodiak" would
    then be a word the bundle knows, which the resolver reads by its nearest classes (sdk.text.resolver, rule
    4a: it took a koala, a gas mask and a wok). The names concordances tag most first (a class holds at most
    sdk.format.bundle.MAX_ALIASES aliases: "eagle" and "owl" before "archaeopteryx" for a bundle's "bird"), then
    the nearest kinds, then common (lower-case) names before proper ones.

    >>> kinds_of_classes(WordNet(), {"b": "n02132136"}, {"b": ["brown bear"]}, set())["b"][:2]   # doctest: +SKIP
    ['grizzly', 'grizzly bear']
    """
    class_senses = set(senses.values())
    above = set().union(*(wordnet.kinds(s) for s in class_senses))
    found: dict[str, list[str]] = {}
    for c, sense in senses.items():
        names, seen, level = [], {sense}, [sense]
        for steps in range(KIND_LEVELS_BELOW):
            level = [k for s in level for k in wordnet.synset(s).hyponyms if k not in seen and k not in class_senses]
            seen.update(level)
            names += [(steps, n, k) for k in level for n in wordnet.synset(k).unique_names
                      if wordnet.most_used(n) == {k} and n.lower() not in taken
                      and not wordnet.held(n, class_senses, above, besides=sense)
                      and not wordnet.seen_otherwise(n, k)]
        # the aliases a class may hold are few (sdk.format.bundle.MAX_ALIASES): the most used names first
        names.sort(key=lambda r: (-wordnet.tag_counts(r[1])[r[2]], r[0], r[1] != r[1].lower()))
        found[c] = list(dict.fromkeys(n for _, n, _ in names))
    owners: dict[str, int] = {}
    for names in found.values():
        for name in {n.lower() for n in names}:
            owners[name] = owners.get(name, 0) + 1
    out = {}
    for c, names in found.items():
        alone = [n for n in names if owners[n.lower()] == 1]
        words = {w for n in (*own_names.get(c, ()), *(n for n in alone if " " not in n)) for w in n.lower().split()}
        out[c] = [n for n in alone if set(n.lower().split()) <= words]
    return out


def wordnet_kinds(wordnet: WordNet, class_senses: list[str], concepts: list[tuple[str, int]]
                  ) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """`kinds_below` for a bundle whose class ids are WordNet's senses (Tiny ImageNet's): the holders are its
    concepts keyed by a sense (`concepts`: (concept id, number of classes); the everyday collections, facets and
    related kinds, keyed otherwise, hold none), the kinds above the classes those of their senses.

    >>> below, informal = wordnet_kinds(WordNet(), ["n02085620", "n02099601"], [("n02084071", 2)])  # doctest: +SKIP
    >>> below["beagle"], informal["doggy"]                                                           # doctest: +SKIP
    (['n02084071'], ['n02084071'])
    """
    above = set().union(*(wordnet.kinds(s) for s in class_senses))
    holders = {c: (c, n) for c, n in concepts if WNID.fullmatch(c)}
    return kinds_below(wordnet, set(class_senses), above, holders, [])


def _kind_names(vocabulary, wordnet: WordNet, senses: dict[str, str], kind_of: set[str],
                held: dict[str, list[int]], position: dict[str, int], rows: list[dict]) -> dict[str, list[str]]:
    """Per class, the names of the kinds that hold it alone, up to KIND_LEVELS above its sense (the sense
    itself too for a class that is a kind of it, "my red car" -> car) and at least FIT_DEPTH deep: "hat" and
    "headdress" for the only sombrero of a bundle, "snake" for its only boa constrictor. Such a kind is no
    concept (a concept holds two classes at least), so its names answer as the class's own. A name that
    names anything else (another class, a group, a concept) or would go to two classes is left out: the
    author's words and the concepts win."""
    found: dict[str, list[str]] = {}
    for c, sense in senses.items():
        names, level = [], [sense]
        for _ in range(KIND_LEVELS + 1):
            for kind in level:
                alone = held.get(kind) == [position[c]] and wordnet.depth(kind) >= FIT_DEPTH
                if alone and (kind != sense or c in kind_of):
                    names += [n for n in wordnet.synset(kind).unique_names if wordnet.in_use_for(n, kind)]
            level = [h for k in level for h in wordnet.synset(k).hypernyms]
        found[c] = list(dict.fromkeys(names))
    taken = _group_names(vocabulary, rows)
    owners: dict[str, set[str]] = {}
    for c, words in vocabulary.classes.items():
        for w in (c.replace("_", " "), words.name, *words.aliases, *found.get(c, ())):
            owners.setdefault(w.lower(), set()).add(c)
    return {c: [n for n in names if n.lower() not in taken and owners[n.lower()] == {c}]
            for c, names in found.items()}


def _group_names(vocabulary, rows: list[dict]) -> set[str]:
    """The names (lower case) of the vocabulary's groups and of the concept rows, and their singulars, which the
    resolver reads as those groups: no WordNet name of a class's ("big cat", the kind above the lion alone, stays
    the collection "big cats", the cougar and the lion, as "a big cat that is not a lion" needs)."""
    names = {w.lower() for g in vocabulary.groups.values() for w in (g.name, *g.aliases)} | {
        n.lower() for r in rows for n in r["names"]}
    return names | {form for name in names for form in singular_forms(name)}


def _group_sense(vocabulary, wordnet: WordNet, key: str, group, senses: dict[str, str]) -> str | None:
    """A group's sense: the pinned one, else, of the senses of its name (or of its first alias WordNet
    knows), in WordNet's order, the first that is one of its classes' senses or a kind above one ("birds" ->
    bird; "primates" -> the mammals' order, not its first sense, a senior bishop), or whose own kind is the
    deepest kind all its classes share ("sea animals" -> marine animal, a kind of animal, as jellyfish and
    lobsters are). "kitchen" is a room or a cuisine, neither of which holds its pans: no sense."""
    if group.wordnet is False:
        return None
    if isinstance(group.wordnet, str):
        wordnet.synset(group.wordnet)
        return group.wordnet
    members = [senses[c] for c in vocabulary.members(key) if c in senses]
    if not members:
        return None
    above = set().union(*(wordnet.kinds(s) for s in members))
    shared = frozenset.intersection(*(wordnet.kinds(s) for s in members))
    deepest = max(shared, key=wordnet.depth, default=None)
    for phrase in (group.name, *group.aliases):
        found = wordnet.senses(phrase, every_form=True)[:MAX_SENSES]
        if found:
            return next((s for s in found if s in above or deepest in wordnet.synset(s).hypernyms), None)
    return None

