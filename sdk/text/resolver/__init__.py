"""Description -> task: which of the bundle's classes the user means, and the task embedding.

A pipeline that reads in order (`pipeline.TaskResolver._resolve_phrase`), one module per rule family:

- `words`: checking and comparing text, plurals, edit distance, the word lists;
- `options`: `TaskOptions`, `Task` and the shared limits;
- `names`: rules 1-3, the names, groups and concepts a bundle answers to, and rule 2's cut at conjunctions;
- `composition`: rule 3b, phrases built from two groups, and rule 2b's reading of what an item leaves out;
- `spelling`: rule 3c, near-typos;
- `missing`: rules 3d and 4a, items the bundle lacks;
- `similarity`: rules 4 and 5 and padding, free text by its meaning;
- `described`: rules 6 and 6b, a described kind narrowed by the words it shares with its classes (and lacks);
- `pipeline`: `TaskResolver`, the rules in order.

Rules, in order:
1. A list of strings: each must name a class exactly (id, full name or any synonym; case-insensitive),
   else DescriptionError listing the unknown names.
2. A string with commas or semicolons ("bicycle, pedestrian, tree") is resolved item by item with rules 3-5 and
   the union is taken (an item's closing marks and surrounding quotes are no part of it: "Dogs!!" is "dogs"; before,
   it was told missing; a parenthesis that opens with a negation is cut off as a comma part: "insects (no bees)");
   so is an item joined by the words "and", "or", "&" or "/" (the last two unspaced too:
   "lemons/oranges") ("cars and trucks"), unless the
   whole item is a name (rule 3 or a class name: "devices and instruments" is one group) or reads as a
   gloss, holding an article, a preposition or a relative word (GLOSS_WORDS: "a drinking glass with a
   base and stem" is one phrase, not "a drinking glass with a base" and "stem"), unless each part is a name
   past its article ("a cat or a dog" is two items; as one gloss it had taken the cats alone). A comma part
   that describes the item before it rejoins it (`Names.items`): the item opens with "a" or "an" and the part, no
   name itself, with a preposition or relative word (APPOSITIVE_OPENERS) or a participle ("a dog, used by the
   police", where the cut gave 'a dog' and the vehicles of 'used by the police'); "X, without Y" stays an
   exclusion (rule 2b).
2b. An item, or a part of one, that opens with a negation ("not", "no", "without", "except", "except for",
   "excluding", "but not", "but no", "other than", "apart from", "aside from"; "everything", "anything", "all",
   "things", "something" or "a thing" before one of those, "but" or "that are not"; one word "non-X") leaves out the
   classes its rest names by rules 3-5 (a class named there is left out alone, without its look-alikes): "birds, not
   penguins", "birds and not penguins"; one that opens an item covers all its parts ("no birds or fish"). A
   description of nothing else takes every other class ("no birds", "everything except cats"), at most
   MAX_GROUP_CLASSES of them; padding (below) never brings back a class left out. Refused, with the reading: nothing
   left, or only negations that leave out nothing the bundle has ("no sharks"). Unless the whole item is a name ("no
   entry sign"). Before it, the text encoder read "no birds" as near 'birds' as "birds", and took exactly the classes
   the user had excluded.
2c. After a part that leaves something out of a name (rule 3b's cut: "all vehicles except cars"), each following part
   of the item that names only classes of that name is left out too ("... and buses": buses are vehicles), until
   one does not ("dogs except poodles and cats" takes the cats). Before, rule 2's cut at "and" took the buses.
3. A string naming a group (itself, else past an article: "the insects") selects every class under it (at most
   MAX_GROUP_CLASSES): a super-category ("insects"), else any name of a concept (bundles of format 5: every
   WordNet hypernym of the classes with all its synonyms, "clothing", "wear", "veggie", "household appliance",
   and the exporter's everyday collections and class facets, "farm animals", "livestock"), else a node of the
   classes' hierarchy paths ("dog"). A name that only concepts the exporter derived from WordNet give
   (keyed `wordnet/`, a bundle of one's own classes) is said to be so: "group 'feline' (from WordNet: a
   kind of thing each of its classes is)". An exact class name, or any of its aliases, selects that class
   and its look-alikes: the classes whose name embeddings lie within `margin` of its own (the resolution
   names them; no text encoder is needed). Plurals are made singular first
   (`singular_forms`: "butterflies" -> the butterfly group, "wolves" -> "wolf", "geese" -> "goose"), and a class
   name is read past an article, as rule 4b reads a kind ("a grizzly", an alias of the brown bear: before, the
   text encoder read it and took six animals by a concept).
3b. A phrase that is no name but is built from two groups (`TaskResolver._composed`): "non-X Y", "Y except X" (also
   "except for", "excluding", "but not", "but no", "other than", "apart from", "aside from", "besides", "minus", "not
   including", "without", "that are not"; "but" after "all", "every" or "any", which are read past before the
   exclusion as an article is: "every dog but the chihuahua") takes group Y's classes without those of X (a group, a
   modifier as below, or a class name: "non-insect invertebrates", "non-flying birds", "dogs except poodles"); where Y
   is no group ("small dogs except chihuahuas") or X takes nothing of it, Y is read as a phrase of its own (rules 1-6)
   and X left out of it as rule 6b leaves out ("read as 'small dogs', not 'chihuahuas'": the Yorkshire terrier;
   before, each of these took the Chihuahua alone: experiments.md, "What a phrase leaves out, in more words");
   "<modifier> Y" takes the classes of group Y that the modifier's group also holds, the modifier naming a group alone
   (not a singular made from a plural group name: 'drink' from 'drinks' does not make "drink containers" drinks) or
   before "animals", "things" or "creatures" ("small mammals": small animals and mammals; "large carnivores"). Only if
   both parts are understood and the result is a non-empty strict subset of Y, or, failing any such reading, all of Y
   where the modifier's group holds all of it and more ("pet dogs": every dog is a pet, so the dogs; the text encoder
   had taken the concept 'pet animals', cats and a goldfish too); never for a class name ("sea slug"); otherwise rules
   4-5 read the phrase as before.
3c. A phrase that names nothing, holds a word that is not real (`TaskResolver._real`: the text encoder's
   vocabulary has it, `is_word`: "horse" is a word, not a typo of 'hose'; or WordNet's one-word lemmas have it or
   a singular of it, sdk/text/english_words.py: "seahorse" is no typo of 'seashore', "steamboats" none of 'sea
   boat'), and is, or has a singular form that is, one edit from a name (two
   for one word of 8 or more characters; at least 4 characters) is read as that name, and the resolution
   says so: "insetcs" -> "insects", "retreivers" -> "retrievers" (`edit_distance`, `_spelling`). A phrase that
   is, or has a singular form that is, a name with its letters spaced otherwise is read as that name even
   when all its words are real ("jelly fish" -> "jellyfish", "tea pots" -> "teapot"; `joined`).
3d. One word that names nothing but ends names ("trains": "bullet train", "high-speed train") takes the
   classes so named: kinds of it, and the resolution says that the word itself is no class (MISSING).
   (Group names answer their singular too: "puppy" for "puppies".)
   Rule 3d is tried before 3c.
4a. An item that names nothing in the bundle is a missing item (one word or a compound below also past an article:
   "a drone", which the text encoder had read as a banana, a bee and a chihuahua on the worked example; "a hot
   dog"; other words past an article describe, "a steep rock face"): one word that is no name and no
   word of a name ("owl", "laptop"; "blue" among "blue disc" and "blue ring" is not), or a few words none of
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
4b. With `missing="tell"`, a phrase that names a kind of thing the bundle lacks but WordNet puts below one of
   its concepts (the concept's `kinds`, which the exporter writes for a vocabulary of one's own classes:
   trainer/data/english.py's `kinds_below`), itself, a plural or past an article ("beagle", "beagles", "a
   beagle"; not a phrase ending in one of DESCRIBING_NOUNS, which describes as in rule 4a: "farm animals"),
   takes nothing, and the resolution names the group: "'beagle' is a kind of 'hunting dog' (from
   WordNet), and no class here is one: nothing taken for it; 'hunting dog' takes its 2 classes (...)". No text
   encoder is needed. Tried after 3d, before 3c. Before it, "beagle" was told missing with three classes by
   text similarity, and "a beagle" took the concept 'animal' (11 classes; experiments.md, "A kind the bundle
   lacks names the group it belongs to").
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
6. A phrase alone (not one item of a list) that describes one kind of thing, "a" or "an" and at least two more words
   ("a big cat with a mane"), for which rule 4 or 5 took two or more classes, keeps those whose own words share the
   most of the phrase's (`described`): a class's words are its names, aliases and description (less what it says the
   class lacks, `affirmed`; a vocabulary's, or its WordNet sense's gloss) and the names of the concepts that hold it
   but not every candidate; a phrase word (no stop word, STOP_WORDS) counts for the candidates it matches (stems
   equal, or one begins the other and is five letters at least: "antarctic", "antarctica"), 1 / their number each,
   and is no evidence if it matches all or none. The best are kept if they are fewer than all, and the resolution
   names the words that decided ("described: kept 'lion' of those 5, whose words share 'mane' with it"). An
   embedding-scored rule tried first narrowed wrongly as often as rightly and was withdrawn (lab/described_kinds.py);
   this one, on 46 descriptions written for it and scored once: precision 0.31 -> 0.40, recall 0.87 -> 0.85 with
   padding (docs/results/experiments.md, "Words people use, part 3 again").
6b. Such a phrase that holds a negation after its first two words ("a bird that cannot fly and lives in antarctica",
   "a lobster with no pincers"; `negation`: "not", "no", "without", "never", "cannot", "isn't"..., the negated part
   ending at "and", "but", "that", "which", "who" or "with") is read as its rest ("a bird that lives in antarctica")
   by rules 1-6, and of what that takes, the classes whose words lack the negated ones are kept (a negated word
   counts for the candidates that lack it as a shared word counts for those that have it): "described: kept 'king
   penguin' of those 4, whose words lack 'fly'". Nothing is taken that the rest did not take. Where the rest takes
   nothing ("a swimsuit" on a bundle without that word), the whole phrase is read by rules 4-6 as before, rule 6
   counting the negated words against the classes that have them. Before, a negated word counted as a shared one
   ("a big cat without a mane" kept the lion) and the text encoder went to the thing negated ("a bear that is not a
   panda": the red panda); docs/results/experiments.md, "What a described thing is not".
Descriptions with control, invisible or unassigned characters, unpaired surrogates, empty lists and
options of the wrong type or range raise DescriptionError (`check_text`, `TaskOptions`).
A task has at least `min_classes` classes (nearest classes by text similarity are added if needed, and
the resolution says which); by default 1, a task of one class, whose model answers it or "anything else"
(`sdk.engines.rest`).
The task embedding is the normalised mean of its classes' embeddings, as in training.
"""

from .composition import composed
from .missing import CLOSEST_NAMES
from .names import Names
from .options import (
    MAX_CLASS_LIST,
    MAX_DESCRIPTION_CHARS,
    MAX_GROUP_CLASSES,
    MAX_TASK_CLASSES,
    MISSING,
    MISSING_POLICIES,
    Task,
    TaskOptions,
)
from .pipeline import TaskResolver
from .similarity import CONCEPT_MARGIN, SUPERSET_RATIO, contrast
from .spelling import SPELLING_LONG_CHARS, SPELLING_MIN_CHARS, spelling
from .words import (
    CONJUNCTIONS,
    DESCRIBING_NOUNS,
    DESCRIBING_WORDS,
    GLOSS_WORDS,
    STOP_WORDS,
    check_text,
    edit_distance,
    normalize_name,
    singular_forms,
    unit_mean,
)

__all__ = [
    "CLOSEST_NAMES", "CONCEPT_MARGIN", "CONJUNCTIONS", "DESCRIBING_NOUNS", "DESCRIBING_WORDS", "GLOSS_WORDS",
    "MAX_CLASS_LIST", "MAX_DESCRIPTION_CHARS", "MAX_GROUP_CLASSES", "MAX_TASK_CLASSES", "MISSING", "MISSING_POLICIES",
    "SPELLING_LONG_CHARS", "SPELLING_MIN_CHARS", "STOP_WORDS", "SUPERSET_RATIO", "Names", "Task", "TaskOptions",
    "TaskResolver",
    "check_text", "composed", "contrast", "edit_distance", "normalize_name", "singular_forms", "spelling", "unit_mean",
]
