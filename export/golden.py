"""Golden test vectors for the mobile mirror (android_demo/core): what the Python runtime computes for a
bundle, step by step, so the Java core can be checked on the JVM.

    python -m export golden tiny.taper --out golden/     # golden.json + its binary files

golden.json:
- "bundle": the bundle's path; "max_tokens": the text encoder's truncation length.
- "tokens": [{"text", "ids"}]: the bundle's tokenizer on PHRASES and on random strings (exact ids).
- "encoder": [{"ids", "embedding"}]: every text-encoder call the Python runtime made for the descriptions
  below (what the Java tests' replaying engine answers; ids it was not given are a failure there).
- "descriptions": [{"description" (string or list), "options", "classes" (sorted indices) or "error"}].
- "images": [{"width", "height", "rgb": file of uint8 RGB, "tensor": file of the float32 [3, S, S] input}].
- "cases": [{"name", "description", "task" (indices), "resolution" (the model's), "embedding", "alpha" [4][Q],
  "head" [K][C+1] (weights then bias), "folded": file of the backbone's external weight buffer (float32 LE),
  "features": [image][C] the backbone's output on each image above with those weights (onnxruntime; what
  the replaying engine answers), "logits": [image][K] those features through the head rows (float64;
  "rest", a model of one class: its "task" is the class and -1, its rows `sdk.engines.rest.rest_head`'s,
  its logits collapsed to 2),
  "int8": {"graph": file of the int8 backbone (sdk.engines.int8, image -> features) of those folded weights,
  "channels": file of the mixed per-channel tensors it was quantized from (float32 LE, in the order of
  "channel_names": [[name, count]]), "features": [image][C] that graph's output on the images above
  (onnxruntime), "step": the quantization step of that output (`output_step`)}: the Java core must write
  the same bytes from the same inputs, and the app's OnnxEngine must run the graph to those features}].
- "reprs": [{"text", "repr"}]: Python's repr of each REPR_TEXTS, which the Java core quotes names with too.
- "composed": {"classes": [name], "concepts": [[names], [members], id, [kinds]], "descriptions": [{"description",
  "classes", "how"}, {"description", "encoder": true} or {"description", "error"}]}: rules 2b and 3b of
  sdk/text/resolver/ on a hand-made class and concept table (COMPOSED_*; the synthetic bundle has no groups
  that cross), every description resolved without the text encoder, refused, or recorded as needing it.
- "hostile_bundles": files of the bundle with hostile concepts in classes.json, and re-checksummed forgeries
  only a check of the values finds (`semantic_forgeries`): every one a BundleError.
- "reader_cases": false when the golden set leaves the refusals that do not depend on the storage mode (the
  concepts edits, "limit_bundles", "grammar_bundles", "graphs", "signatures", "json", "companion") to another
  golden set of the same bundle (`write_golden`'s `reader_cases`).
- "graphs": {"encoder_structure": the bundle's text encoder's structure hash (sdk.format.graph_check),
  "known_encoder_structures", "hostile": [{"name", "member", "file", "python": "BundleError" or "accepted"}]}:
  hostile graph and tokenizer members given by the caller (scripts/fuzz_bundle.hostile_members) and the
  verdict of the Python check on each (the text encoder's weights may differ, so NaN weights pass it).
- "signatures": {"cases": [{"name", "file", "trusted" (hex keys or null), "python": "ok:<key id>", "ok:unsigned"
  or "BundleError"}], "sign": {"unsigned", "seed", "public_key", "expected"}}: the bundle signed with a
  golden key, damaged bytes in every part of the signed range and the trailer, other and rotated trusted
  keys, each with the Python reader's verdict; and a signing job for the Java test (its result must be
  the bytes of "expected": Ed25519 signatures are deterministic).
- "companion" (when a companion is given): {"file", "hostile": [{"name", "file", "python"}], "signatures":
  {"cases": [{"name", "file", "trusted", "python"}], "sign": {"unsigned", "seed", "public_key", "expected"}}}:
  hostile companions, and signed (version 3), damaged-signed, forged and unsigned companions with the trusted
  keys each is read with and the Python reader's verdict; and a signing job as for bundles.
- "json": [{"hex", "max_depth", "python": "ok" or "error"}]: documents at the edges of the one JSON grammar
  both readers parse (sdk/format/strict_json.py, Json.java): NaN and Infinity, number forms, control characters,
  whitespace, bad UTF-8, and nesting at and one past each bound the readers use.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

import sdk
from sdk.engines.int8 import Int8Plan
from sdk.engines.onnxruntime import backbone_session, ort  # onnxruntime as the SDK imports it (telemetry off)
from sdk.engines.rest import collapse
from sdk.engines.xnnpack_program import PREFIX, companion_bytes, companion_target, parse_companion, sign_companion
from sdk.errors import BundleError, DescriptionError
from sdk.format.bundle import HEADER, Bundle, ClassInfo, Concept, bundle_bytes, bundle_members, tensors_member
from sdk.format.graph_check import (
    KNOWN_ENCODER_STRUCTURES,
    check_backbone_graph,
    check_encoder_graph,
    encoder_structure,
)
from sdk.format.manifest import MAX_PROVENANCE_TEXT, MAX_PROVENANCE_VALUES, json_size
from sdk.format.signing import SigningKey
from sdk.format.strict_json import loads as strict_json_loads
from sdk.format.tokenizer_check import check_tokenizer_json
from sdk.fusion.folding import BACKBONE_FILE
from sdk.media.images import to_uint8_batch
from sdk.text.resolver import TaskOptions, TaskResolver
from sdk.text.resolver.described import affirmed, content_stems, negation

WORDS = ("moth", "butterfly", "Golden", "retriever", "kitchen", "appliances", "sea", "creatures", "farm", "animals",
         "things", "to", "wear", "cars", "and", "trucks", "a", "the", "of", "photo")
PHRASES = (
    "a photo of a moth.", "insects", "Café crème brûlée", "naïve résumé ÀÉÎÕÜ", "Ｆｕｌｌｗｉｄｔｈ ｔｅｘｔ",
    "ﬁsh ﬂies", "Straße", "İstanbul", "ΟΔΟΣ Σίσυφος ς", "Привет, мир!", "🐶 dogs & 🐱 cats!!",
    "👨‍👩‍👧 family", "狗和猫",
    "日本語のテキスト", "한국어 텍스트", "عربى", "हिन्दी", "...!!!???---***", "a---b", "(((nested)))",
    "tab\tnew\nline\r",
    "non\u00a0breaking\u2009thin\u3000ideographic", "[CLS] typed [MASK] tokens[SEP]", "[cls] lower", "x" * 150,
    "", "   ", "1,234.56 e-mail: a@b.com", "C++ & C# $5 <tag> ^_^ `q` |~|", "e\u0301 combining", "\ufffd replacement",
    "\u0000nul \u0007bell", "zero\u200bwidth", "soft\u00adhyphen", "½ ² ⅷ ㎏", "ǅungla Ǆ", "ＡＢＣ１２３",
    "unaffable unbelievably antidisestablishmentarianism", "Don't stop—won't stop… «quoted» „so“",
)
RANDOM_POOL = ("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789     .,;:!?'\"()[]{}-_/\\@#$%^&*+=<>|~`"
               "àáâãäåçèéêëìíîïñòóôõöùúûüýÿÀÉÑÖÜßæøœĳ" "αβγδεζηθΣσςΩ" "абвгдеёжзийклмнопрстуфхцчшщъыьэюяЁЖ"
               "中文字符测试汉字日本語漢字" "ひらがなカタカナ" "한국어글자" "\u0301\u0308\u0327\u00a0\u2003\u3000\t\n"
               "—–…«»“”‘’¡¿€£¥©®™°±×÷" "😀🐶🐱🚗🌊🦋🍎👍🏽")
DESCRIPTIONS: tuple[tuple[str | list[str], dict], ...] = (
    (["red disc", "blue ring"], {}), (["s00000003"], {}), (["Red  Disc"], {}), (["no such class"], {}), ([], {}),
    ("rings", {}), ("round shapes", {}), ("disc", {}), ("textures", {}), ("checkerboards", {}), ("red disc", {}),
    ("red disc, blue ring, stripes", {}), ("red disc, something yellow", {}), ("something round and red", {}),
    ("a striped pattern", {}), ("crimson circles", {}), ("tuesday", {}), ("quantum chromodynamics", {}),
    ("🐶🐶", {}), ("", {}), ("   ", {}), (",,,", {}), ("a\u200bb", {}), ("x" * 1001, {}), ("\u0007bell", {}),
    ("yellow things", {"max_classes": 3}), ("red disc", {"min_classes": 4}), ("green shapes", {"margin": 0.2}),
    ("a striped pattern", {"min_contrast": 0.9}), (["red disc"], {"min_classes": 5}),
    # issue 60: a word no name holds takes nothing by default, its nearest classes with missing="nearest"
    ("tuesday", {"missing": "nearest"}), ("red disc, owl", {}), ("red disc, owl", {"missing": "nearest"}),
    ("polar bear", {}), ("polar bear, rings", {}), ("discs", {}), ("red dsic, blue rnig", {}),
    # Concepts (format 5) by name and by similarity, and "and"/"or" lists.
    ("shapes", {}), ("angular shape", {}), ("round shapes and textures", {}), ("discs or rings", {}),
    ("stripes & squares", {}), ("red and blue", {}), ("and", {}), ("circles and stripes, squares", {}),
    ("checkered", {}), ("checkered or striped", {}), ("patterned things", {"max_classes": 8}),
    ("patterned things", {"max_classes": 4}), ("geometric figures", {}), ("polka dots or zebra stripes", {}),
    # Rule 3b on the bundle's own groups: exclusions, and phrases that do not compose.
    ("non-disc round shapes", {}), ("shapes except squares", {}), ("textures but not stripes", {}),
    ("round shapes other than red disc", {}), ("non-round shapes", {}), ("textures except shapes", {}),
    # Rule 2's glosses (not cut at "and") and rule 4a's missing one-word items: alone, in a list, left out.
    ("a round shape with a red rim and blue stripes", {}), ("red disc, crimson", {}), ("crimson", {}),
    ("red disc, tuesday, blue ring", {}), ("tuesday, wednesday", {}), ("circles and the stripes", {}),
    # Rule 4a's compounds that are no kind of their last word (sdk/text/compounds.py): told, alone and in a list
    ("compact disc", {}), ("blue ring, compact discs", {}), ("compact disc", {"missing": "nearest"}),
    # Rule 3c's spacing (issue 72): real words that spell a name spaced otherwise, alone, plural, in a list
    ("blue tri angle", {}), ("tri angles", {}), ("strip es, red disc", {}), ("bluering", {}),
    # Rule 2b (issue 72's review): what an item that opens with a negation names is left out, never taken; a
    # description of nothing else takes every other class; padding never brings a left-out class back
    ("no rings", {}), ("everything except textures", {}), ("non-textures", {}), ("no rings or discs", {}),
    ("rings, not blue ring", {"min_classes": 4}), ("rings and not blue ring", {}), ("no owl", {}),
    ("rings, not rings", {}), ("red disc, without owls", {}), ("red disc, not green disc", {}),
    ("rings other than red ring", {"min_classes": 4}),   # nor what a composition excluded (rule 3b)
    # Rule 6 (issue 72): a described kind narrowed by the words its classes share with it, alone; not in a list
    ("a round shape that is red", {}), ("a yellow angular shape", {"min_classes": 1}), ("a checkered red pattern", {}),
    ("a red shape", {"min_classes": 1}), ("a shape with a blue ring", {}), ("red disc, a round shape that is red", {}),
    # Rule 2 (issue 72): a comma part that describes the item before it ("a X, with ..."; a participle) rejoins it
    ("a round shape, with a red rim", {}), ("a round shape, coloured red", {"min_classes": 1}),
    ("red disc, with blue ring", {}), ("a round shape, without red", {}), ("a red shape, rings", {}),
    # Rule 4a past an article (issue 72): "a tuesday" is "tuesday", told missing, not read by meaning
    ("a tuesday", {}), ("red disc, an owl", {}), ("a compact disc", {}), ("an owl", {"missing": "nearest"}),
    # Rule 2's marks (issue 72): "Rings!!" is "rings"; ";" cuts as ","; "/" and "&" cut unspaced
    ("Rings!!", {}), ('"red disc"', {}), ("rings; textures", {}), ("red disc/blue ring", {}), ("discs&rings", {}),
    ("rings (not blue ring)", {"min_classes": 4}), ("round shapes (no discs)", {}),
    # Rule 6b (issue 72): what a described kind is not: its rest read alone, then the classes lacking the negated words
    ("a red shape that is not round", {"min_classes": 1}), ("a round shape without a blue rim", {}),
    ("an owl that cannot fly", {}), ("a shape with a blue rim that is not a blue ring", {}),
    ("a pattern with stripes that is not green stripes", {"min_classes": 4}),
    ("a shape with a blue rim that is not a blue rnig", {}), ("a thing that is not a ring", {}),
)
# Rule 3b (sdk/text/resolver/) on a class and concept table whose groups cross, as Tiny ImageNet's facets and
# WordNet groups do (tests/test_composed_phrases.py reads the same table).
COMPOSED_CLASSES = ("mouse", "hamster", "elephant", "lion", "weasel", "bee", "ant", "snail", "crab", "goose",
                    "penguin", "sea slug", "jack-o'-lantern")   # a name Python's repr quotes with double quotes
COMPOSED_CONCEPTS: tuple[tuple[tuple[str, ...], tuple[int, ...]], ...] = (
    (("mammal",), (0, 1, 2, 3, 4)), (("small animals", "little animals"), (0, 1, 4, 5, 6, 7)),
    (("large animals",), (2, 3)), (("carnivore", "predators"), (3, 4)), (("insect",), (5, 6)),
    (("invertebrate",), (5, 6, 7, 8, 11)), (("flying animals",), (5, 9)), (("bird",), (9, 10)),
    (("slug",), (7, 11)), (("sea",), (8, 11)),
    # the author's group, and a derived one that gives its alias and its name's singular: the author's words win
    (("crawlers", "critter"), (5, 6, 7)), (("critter", "crawler", "minibeast"), (5, 6)))
# Concepts keyed as the exporter keys those it derives from WordNet (sdk.format.bundle.DERIVED_CONCEPT_PREFIX): a
# resolution through a name only they give says so ("insects", "birds"; "mammals" is the author's).
COMPOSED_DERIVED = {4: "wordnet/n02159955", 7: "wordnet/n01503061", 11: "wordnet/n00015388"}
# A class's other name (issue 72): typed alone it answers as the class's own name does, by name, no encoder.
COMPOSED_ALIASES = {5: ("honeybee",)}
COMPOSED_IDS = tuple(COMPOSED_DERIVED.get(i, f"c{i}") for i in range(len(COMPOSED_CONCEPTS)))
# Kinds below a concept that no class is (rule 4b, issue 72): told missing with the concept's group. "honeybee"
# is also the bee's alias (rule 1 answers first); "Guinea pig" is found however it is typed; "work animals" ends
# in a describing noun and is read by meaning.
COMPOSED_KINDS = {0: ("giraffe", "fruit bat", "Guinea pig", "work animal"), 4: ("wasp", "honeybee"), 7: ("parrot",)}
COMPOSED_DESCRIPTIONS = (
    "an insect that does not make honey", "a mammal that is not large", "a bird that is not a penguin",   # rule 6b
    "a small animal that is not a mouse", "a small animal that is not an insect", "an insect that is not an insect",
    "something that is not an insect", "a thing that is not a bird",
    "small mammals", "little mammals", "large carnivores", "small flying animals", "sea invertebrates",
    "small mammals, birds", "non-insect invertebrates", "invertebrates except insects",
    "invertebrates excluding insects", "invertebrates but not insects", "invertebrates other than insects",
    "non-flying birds", "birds except penguins", "Non-Insect  Invertebrates", "small insects", "large insects",
    "purple mammals", "non-bird mammals", "mammals except", "except mammals", "non- mammals",
    "invertebrates except purple", "sea slug", "sea slugs", "small", "mammals", "non-mammals",
    # issue 60: near-typos read as names (rule 3c), a group's singular, words ending names (rule 3d)
    "mosue, lion", "elephnat and sea sulg", "insetcs", "mammmals", "hamstres, ant", "predator", "slugs, crabb",
    "mouse, elphant, bee", "Sea  Slgu", "sae sulg, lion", "penguinss", "predators", "carnivores, insect",
    # a singular made from a plural group name ('predators') answers the group but is no modifier
    "predator", "predator mammals", "small animal mammals",
    # a class by an alias, alone (plural, spaced) and in a list: the class and its look-alikes, no encoder
    "honeybees", "honey bee", "honeybee, lion",
    # ... past an article, as rule 4b reads a kind: alone, plural and in a list
    "a honeybee", "the honeybees", "an elephant", "a lion, the honey bees",
    # rule 2: a list of names each past its article is cut, though articles make a gloss; a group past one (rule 3)
    "a mammal or a bird", "the insects", "a lion and a goose", "the mammals and the birds", "an insect or a crab",
    "a mouse with a tail and a bee", "a lion and a striped insect",
    # rule 2b: left out (alone: every other class), never taken; "except mammals" and "non-mammals" above too
    "no mammals", "birds, not penguins", "birds and not penguins", "everything except insects", "all but insects",
    "without insects", "no mammals or birds", "not mammals, not birds", "mammals, not mammals",
    "no mammals, no birds, no invertebrates", "invertebrates without insects",
    "invertebrates that are not insects", "things that are not mammals", "invertebrates which are not insects",
    "things that are not mammals or birds", "mammals that is not elephant", "a mammal that is not a lion",
    "the invertebrates except the insects", "a mammal that is not a",
    # rule 2b's openings, each alone and after a kept item, on a group, a class and a name the table lacks
    *(f"{kept}{opening} {name}" for opening in ("not", "no", "without", "except", "other than", "everything except",
                                                 "anything but", "all but not", "things that are not", "non-")
      for name in ("insects", "penguin", "owls") for kept in ("", "birds, ", "invertebrates and ")),
    # a name with an apostrophe: both readers quote it as Python's repr does
    "jack-o'-lantern", "jack-o'-lanterns, mouse", "not jack-o'-lantern", "mammals, not jack-o'-lantern",
    "jack-o-lantern", "jack o'lanterns",
    # rule 4b: a kind the table lacks below a concept, alone, plural, past an article, in a list, left out
    "giraffe", "giraffes", "a giraffe", "the parrots", "fruit bats", "guinea pigs", "GUINEA  PIG", "wasps, lion",
    "parrots and penguins", "birds, not parrots", "no giraffes", "honeybee", "a wasp that stings", "giraffe neck",
    "work animal", "work animals", "a work animal",   # a phrase ending in "animals" describes (rule 4a's words)
    # rule 3c: real words are never corrected, WordNet's (sdk.text.english_words) as the encoder's: each of these is
    # one edit from a name ('mouse', 'weasel', 'goose', 'invertebrates', 'lion') and needs the encoder
    "louse", "easels", "noose, lion", "vertebrates", "loon",
    # rule 3: the author's names before WordNet's in either number ("critter", the author's alias, and "crawler", the
    # singular of the author's "crawlers", both given by a derived concept too); a name only WordNet's give
    "critter", "critters", "crawler", "a crawler", "crawlers", "minibeasts",
    # rule 2: a semicolon cuts as a comma; "/" and "&" cut unspaced; closing marks and quotes are no part of an item
    "mammals!!", "birds/insects", "mammals; birds", '"penguin"?', "lion&goose", "birds?, not penguins", "...",
    "\u201cinsects\u201d\u2026",
    # ... and a parenthesis that opens with a negation leaves out what it names; any other stays in its item
    "mammals (no lion)", "birds (except penguins)", "invertebrates (not ants or bees)", "mammals (small ones)",
    "(no birds)", "mammals ( without  elephant )",
    # rule 3b in more words: longer exclusion words, a quantifier read past, "but" after one, and a kept part that is
    # no group read as a phrase of its own (then what the rest names is left out, or narrows by words)
    "invertebrates except for insects", "mammals apart from lions", "birds aside from penguins",
    "invertebrates besides insects", "mammals minus elephants", "all invertebrates except the insects",
    "every mammal but the lion", "any bird but penguins", "all the mammals except a lion", "mammals but lions",
    "small mammals except mice", "small animals except for insects", "little animals minus the bees",
    "small mammals except purple", "flying animals without wings", "sea slugs except slugs", "mammals except mammals",
    "lion except lions", "birds, small mammals except mice", "except for insects", "apart from birds",
    "all but except insects", "every", "every but", "mammals minus", "small mammals besides insetcs",
    # rule 2c: after an exclusion, a part naming only classes of what it keeps is left out too; one that does not ends
    # the run and is taken
    "invertebrates except insects and snails", "invertebrates except insects and birds",
    "mammals except lions and bees",
    "all invertebrates except the insects or the crabs", "mammals except elephants and lions and birds and mice",
    "small mammals except mice and hamsters", "mammals except lions and not birds", "lion except lions and mammals",
    "birds, invertebrates except insects and crab",
    "shapes except squares and discs", "round shapes except rings and red disc",   # the same on the tiny bundle's
    "textures except stripes and round shapes",                                     # names (resolver_answers.json)
    "mammals but no lions", "but no birds", "mammals not including the lion", "birds, but no penguins",
    # rule 6b's and 3b's negated part: names joined by "and" or "or" (rule 2's cut) leave out their union
    "all mammals except for lions and mice", "every animal except the bees and the ants",
    "a mammal that is not a lion or a mouse", "small animals except for insects and snails",
    "mammals except for lions and owls", "a bird that is not a penguin or a pengiun")
# Rule 6 (issue 72): the table's classes with descriptions, the candidates rules 4 or 5 might take for a described kind,
# and texts cut into words as both readers must (TaskResolver.narrowed and sdk.text.resolver.described.content_stems)
COMPOSED_GLOSSES = {
    0: "any of numerous small rodents typically resembling diminutive rats having pointed snouts and small ears",
    1: "short-tailed Old World burrowing rodent with large cheek pouches",
    2: "five-toed pachyderm with a long trunk and large ears", 3: "large predatory feline having a shaggy mane",
    5: "a striped insect that makes honey; social and solitary species", 6: "social insect living in colonies",
    7: "a slow mollusc of swampy gardens", 9: "web-footed long-necked migratory aquatic birds; it honks",
    10: "short-legged flightless birds of cold southern especially Antarctic regions",
    12: "a lantern carved from a pumpkin"}
DESCRIBED_CASES: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("a big cat with a mane", (0, 1, 2, 3, 4)), ("a small rodent with cheek pouches", (0, 1, 4)),
    ("a bird that cannot fly and lives in antarctica", (9, 10)), ("a social insect", (5, 6)),
    ("a huge animal with a trunk and large ears", (0, 1, 2, 3)), ("an insect that stings", (5, 6)),
    ("a small animal", (0, 1, 4, 5, 6, 7)), ("a web-footed bird that honks", (10, 9)),
    ("a carved pumpkin lantern", (12, 7)), ("a mouse", (0,)), ("a striped insect that makes honey", (6, 5, 0)),
    ("a large animal", (0, 2, 3)), ("a small mammal or a large insect", (0, 1, 2, 5, 6)), ("a crab", (8, 11)),
    ("a sea animal", (7, 8, 11)), ("a jack-o'-lantern", (12, 0)), ("an insect or bird", (5, 9, 10)),
    ("a swamp dweller", (7, 11)))   # "swamp" begins "swampy": MIN_PREFIX letters exactly
# Rule 6b (issue 72): (rest, negated, candidates) narrowed as TaskResolver._unlike narrows, and phrases cut by
# sdk.text.resolver.described.negation into the rest and the negated part (or not cut)
NEGATED_CASES: tuple[tuple[str, str, tuple[int, ...]], ...] = (
    ("", "make honey", (5, 6)), ("a small animal", "large", (0, 1, 2, 3, 4)), ("", "a mane", (0, 3)),
    ("a slug", "sea", (7, 11)), ("", "fly", (9, 10)), ("an animal", "flightless", (9, 10)))
NEGATION_TEXTS = ("a bird that cannot fly and lives in antarctica", "a lobster with no pincers", "a big cat",
                  "a dog that isn't small", "a no entry sign", "a cat without", "a thing that is not a",
                  "an ape that is not orange or brown", "a ball that is not round but is used in rugby",
                  "a cat without stripes, spots", "not a bird", "a bird which has never flown", "an insect with no",
                  "a cat that does not have long fur", "a hat with no brim that is red")
AFFIRMED_TEXTS = ("large crustacean having a spiny carapace but lacking the large pincers of true lobsters; edible",
                  "slender-bodied non-stinging insect; Non-Toxic", "no external shell", "a(b)c,d;e:f.g", "  ", "",
                  "not highly venomous but hairy", "cannot fly with wings", "LACKING teeth, NOT eyes", "nonstop non-",
                  "tab\tsep\u00a0nbsp without x", "İnot x", "without\u2003em space", "lacks\nlines\rand more")
DESCRIBED_TEXTS = ("A Dog-Like face", "jack-o'-lantern", "naïve café—crème", "ÀNTARCTIC antarctica", "---", "x-y-z",
                   "glides gliding glided GLIDES", "the of and a with", "Straße İstanbul", "e-mail co-op", "", "ab",
                   "UPPER lower MiXeD", "tab\there new\nline", "🐶dogs🐱cats", "long-- -armed", "-lead trail-",
                   "ed ing es s ly", "curly sadly buses bused", "ＡＢＣ full-width")
# How a resolution quotes a phrase or a name: Python's repr, which the Java core's TaskResolver.repr must equal
REPR_TEXTS = ("plain", "it's", 'say "hi"', "both ' and \"", "tab\there", "back\\slash", "nbsp\u00a0x",
              "zero\u200bwidth", "emoji \U0001f436", "e\u0301", "line\u2028sep", "bell\x07", "del\x7f",
              "private\ue000", "tag\U000e0001", "\u00fcber", "nel\x85", "\u4e2d\u6587", "")
CASES: tuple[str | list[str], ...] = (["red disc", "blue ring", "yellow square"], ["green stripes"],
                                      ["s00000003", "red checkerboard"], "rings", "something red",
                                      "checkerboards or stripes")
IMAGE_SIZES = ((32, 32), (1, 1), (7, 5), (33, 31), (80, 48), (48, 80), (3, 1000), (1000, 3), (101, 257))
# Edits of classes.json's concepts (format 5) that every reader must refuse with a BundleError: used by
# tests/test_bundle.py, scripts/fuzz_bundle.py and, through "hostile_bundles", the Java core's test.
HOSTILE_CONCEPTS: dict[str, Callable[[dict], None]] = {
    "members_not_increasing": lambda s: s["concepts"][0].update(members=[3, 1]),
    "members_repeated": lambda s: s["concepts"][0].update(members=[1, 1]),
    "one_member": lambda s: s["concepts"][0].update(members=[1]),
    "member_out_of_range": lambda s: s["concepts"][0].update(members=[0, 10**6]),
    "members_not_integers": lambda s: s["concepts"][0].update(members=[False, True]),
    "members_floats": lambda s: s["concepts"][0].update(members=[0.0, 1.0]),
    "no_names": lambda s: s["concepts"][0].update(names=[]),
    "name_too_long": lambda s: s["concepts"][0].update(names=["x" * 1001]),
    "names_not_a_list": lambda s: s["concepts"][0].update(names="shapes"),
    "extra_field": lambda s: s["concepts"][0].update(extra=1),
    "ids_repeat": lambda s: s["concepts"][1].update(id=s["concepts"][0]["id"]),
    "concepts_not_a_list": lambda s: s.update(concepts={}),
    "more_concepts_than_embeddings": lambda s: s["concepts"].append({**s["concepts"][0], "id": "new"}),
    "no_concepts": lambda s: s.update(concepts=[]),
    # a concept's optional kinds (rule 4b): 1 to MAX_CONCEPT_KINDS short names
    "no_kinds": lambda s: s["concepts"][0].update(kinds=[]),
    "kinds_null": lambda s: s["concepts"][0].update(kinds=None),
    "kinds_not_a_list": lambda s: s["concepts"][0].update(kinds="beagle"),
    "kind_not_text": lambda s: s["concepts"][0].update(kinds=["beagle", 7]),
    "kind_empty": lambda s: s["concepts"][0].update(kinds=[""]),
    "kind_too_long": lambda s: s["concepts"][0].update(kinds=["x" * 1001]),
    "too_many_kinds": lambda s: s["concepts"][0].update(kinds=["k"] * 20_001),
}


def edited_json(data: bytes, edit: Callable[[dict], None]) -> bytes:
    """JSON bytes with `edit` applied to a fresh copy of what they hold."""
    spec = json.loads(data)
    edit(spec)
    return json.dumps(spec).encode()


def with_classes_json(blob: bytes, edit: Callable[[dict], None]) -> bytes:
    """A whole bundle (bytes) with its classes.json edited by `edit` and everything re-signed (the writer
    stamps the version classes.json implies, so the edit itself is what a reader must catch)."""
    from sdk.format.bundle import parse_manifest, replace_member

    entry = parse_manifest(np.frombuffer(blob, np.uint8)).members["classes.json"]
    return replace_member(blob, "classes.json", edited_json(blob[entry.offset:entry.offset + entry.size], edit))


def random_texts(count: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    pool = list(RANDOM_POOL)
    return ["".join(rng.choice(pool, int(rng.integers(1, 60)))) for _ in range(count)]


def long_text(words: int, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    return " ".join(str(w) + ("," if rng.random() < 0.1 else "") for w in rng.choice(WORDS, words))


def write_golden(bundle_path: Path, out_dir: Path, cases: Sequence[str | list[str]] = CASES,
                 hostile_members: Sequence[tuple[str, str, bytes]] = (), companion: Path | None = None,
                 refusals: bool = True, reader_cases: bool = True,
                 descriptions: Sequence[tuple[str | list[str], dict]] = DESCRIPTIONS) -> Path:
    """golden.json and its files in `out_dir` (the module docstring says what each key holds). With
    `refusals=False`, only the vectors (tokens, encoder, descriptions, images, cases, composed): what the app's engine
    test reads, without the ~120 case bundles of refusals and verdicts the Java core's golden test reads. With
    `reader_cases=False`, of the refusals only the semantic forgeries (the module docstring's "reader_cases" says
    which are left to another golden set of the same bundle; tests/test_android_core.py checks them in fp32).
    `descriptions` ((description, options) pairs) are those resolved for "descriptions": DESCRIPTIONS fits the
    synthetic bundle; a bundle of one's own classes is given its own (scripts/bench_words.py's java_agreement)."""
    bundle = sdk.load(bundle_path)
    out_dir.mkdir(parents=True, exist_ok=True)
    encoder = bundle.encoder
    tokenize = encoder.tokenizer.encode
    recorded: dict[tuple[int, ...], list[float]] = {}
    encode = encoder.encode

    def recording_encode(texts):  # every text the runtime embeds, keyed by its token ids
        out = encode(texts)
        for text, row in zip(texts, out, strict=True):
            recorded[tuple(tokenize(text).ids)] = row.tolist()
        return out

    encoder.encode = recording_encode
    try:
        spec = {"bundle": str(bundle_path), "max_tokens": bundle.bundle.manifest.text_encoder.max_tokens,
                "tokens": [{"text": t, "ids": tokenize(t).ids}
                           for t in (*PHRASES, long_text(1000), *random_texts(300))],
                "descriptions": [_resolution(bundle, d, o) for d, o in descriptions],
                "images": _images(bundle, out_dir)}
        spec["cases"] = [_case(bundle, i, d, out_dir, spec["images"]) for i, d in enumerate(cases)]
    finally:
        del encoder.encode
    spec["encoder"] = [{"ids": list(ids), "embedding": e} for ids, e in recorded.items()]
    spec["composed"] = composed_resolutions()
    spec["reprs"] = [{"text": t, "repr": repr(t)} for t in REPR_TEXTS]
    if refusals:
        _refusals(spec, bundle, Path(bundle_path), out_dir, hostile_members, companion, reader_cases)
    path = out_dir / "golden.json"
    path.write_text(json.dumps(spec))
    return path


def _refusals(spec: dict, bundle, bundle_path: Path, out_dir: Path, hostile_members: Sequence[tuple[str, str, bytes]],
              companion: Path | None, reader_cases: bool = True) -> None:
    """The refusal cases and the Python reader's verdicts, added to `spec`: the semantic forgeries, and with
    `reader_cases` hostile concepts, provenance limits, the manifest grammar (with `hostile_members`), hostile
    graphs, signatures, JSON, the companion."""
    blob = bundle_path.read_bytes()
    spec["hostile_bundles"] = []
    for name, edit in HOSTILE_CONCEPTS.items() if reader_cases else ():
        (out_dir / f"hostile_{name}.taper").write_bytes(with_classes_json(blob, edit))
        spec["hostile_bundles"].append(f"hostile_{name}.taper")
    for name, data in semantic_forgeries(blob):   # tensor values: each storage mode stores them otherwise
        try:
            Bundle.from_buffer(np.frombuffer(data, np.uint8))
            raise AssertionError(f"the Python reader accepts the forgery {name}")
        except BundleError:
            pass
        (out_dir / f"hostile_{name}.taper").write_bytes(data)
        spec["hostile_bundles"].append(f"hostile_{name}.taper")
    spec["reader_cases"] = reader_cases
    if not reader_cases:
        return
    spec["limit_bundles"] = _python_verdicts("limit", [*provenance_limits(blob), *kinds_limits(blob)], out_dir)
    if hostile_members:   # once per golden set, as the hostile graphs are (they do not depend on the storage)
        spec["grammar_bundles"] = _python_verdicts("grammar", grammar_bundles(blob), out_dir, loaded=True)
    spec["graphs"] = _graphs(bundle.bundle, hostile_members, out_dir)
    spec["signatures"] = _signatures(bundle_path, out_dir)
    spec["json"] = _json_cases()
    if companion is not None:
        spec["companion"] = _companion(bundle.bundle, companion, out_dir)


def semantic_forgeries(blob: bytes) -> Iterator[tuple[str, bytes]]:
    """Re-checksummed bundles whose damage only a check of the values finds: a negative running variance in
    the mixer and in a basis, NaN in the mixer and in the middle of a basis's weights, an infinite class
    embedding, class embeddings that are finite but not unit vectors."""
    bundle = Bundle.from_buffer(np.frombuffer(blob, np.uint8))
    manifest, members = bundle_members(blob)

    def with_tensors(member: str, tensors: dict) -> bytes:
        return bundle_bytes(manifest, {**members, member: tensors_member(tensors)})

    mixer = {k: np.array(v) for k, v in bundle.mixer.items()}
    variance = next(k for k in mixer if k.endswith("running_var"))
    yield "negative_mixer_variance", with_tensors("mixer.safetensors", {**mixer, variance: -np.abs(mixer[variance])})
    yield "nan_mixer", with_tensors("mixer.safetensors", {**mixer, "head.bias": mixer["head.bias"] * np.nan})
    bases = {k: np.array(v) for k, v in bundle.bases.tensors().items()}
    layer = next(lb.layer for lb in bundle.bases.layers if any(c.endswith("running_var") for c in lb.layer.channels))
    index = [c.endswith("running_var") for c in layer.channels].index(True)
    channels = bases[f"{layer.name}.channels"].copy()
    channels[..., index, :1] = -0.5
    yield "negative_basis_variance", with_tensors("bases.safetensors", {**bases, f"{layer.name}.channels": channels})
    weights = next(k for k in sorted(bases) if not k.endswith(".channels") and bases[k].dtype.kind == "f")
    nan = bases[weights].copy()
    nan.reshape(-1)[nan.size // 2] = np.nan
    yield "nan_basis", with_tensors("bases.safetensors", {**bases, weights: nan})
    text = np.array(bundle.class_embeddings)
    text[0, 0] = np.inf
    yield "inf_class_embedding", with_tensors("class_embeddings.safetensors",
                                              {"text": text, "concepts": np.array(bundle.concept_embeddings)})
    yield "long_class_embedding", with_tensors("class_embeddings.safetensors",
                                               {"text": np.array(bundle.class_embeddings) * 1.01,
                                                "concepts": np.array(bundle.concept_embeddings)})


def provenance_limits(blob: bytes) -> Iterator[tuple[str, bytes]]:
    """The bundle with its provenance at each bound both readers enforce (values, code points of keys and
    strings, depth: sdk/format/manifest.py) and one past it. A bundle past a bound is the one at it with its
    manifest edited in place, at the same length (the writer refuses to write it). The text is "é", one
    code point in two UTF-8 bytes, so a reader that counted bytes would disagree."""
    manifest, members = bundle_members(blob)
    provenance = manifest.provenance
    values, text = json_size(provenance)

    def at(extra: dict) -> bytes:
        return bundle_bytes(replace(manifest, provenance={**provenance, **extra}), members)

    n = MAX_PROVENANCE_VALUES - values - 1      # the list itself and n empty strings
    yield "values_at_limit", (limit := at({"k": [""] * n}))
    yield "values_past_limit", _manifest_edit(limit, b'"",""', b"0,0,0")        # one value more
    m = MAX_PROVENANCE_TEXT - text - 1          # the key "t" and m characters
    yield "text_at_limit", (limit := at({"t": "é" * m}))
    yield "text_past_limit", _manifest_edit(limit, "é".encode(), b"aa")         # one code point more
    yield "depth_at_limit", (limit := at({"d": [[[0, 0, 0]]]}))
    yield "depth_past_limit", _manifest_edit(limit, b"[[[0,0,0]]]", b"[[[[0]],0]]")  # one level more


def kinds_limits(blob: bytes) -> Iterator[tuple[str, bytes]]:
    """The bundle with a concept's kinds (rule 4b) at MAX_CONCEPT_KINDS names, the last at MAX_NAME_CHARS code
    points of "é", and one name past each bound."""
    from sdk.format.bundle import MAX_CONCEPT_KINDS, MAX_NAME_CHARS

    names = [f"kind {i}" for i in range(MAX_CONCEPT_KINDS - 1)]
    yield "kinds_at_limit", with_classes_json(blob, lambda s: s["concepts"][0].update(
        kinds=[*names, "é" * MAX_NAME_CHARS]))
    yield "kinds_past_count", with_classes_json(blob, lambda s: s["concepts"][0].update(
        kinds=[*names, "é", "é"]))
    yield "kinds_past_length", with_classes_json(blob, lambda s: s["concepts"][0].update(
        kinds=[*names, "é" * (MAX_NAME_CHARS + 1)]))


def transposed_text_embeddings(raw: bytes) -> bytes:
    """class_embeddings.safetensors with its `text` table stored transposed ([D, C]): as many floats, the
    wrong shape (issue 63: the Java core checked the size only)."""
    from sdk.format.bundle import safetensors_bytes
    from sdk.format.tensorfile import read_tensors

    tables = dict(read_tensors(raw)[0])
    tables["text"] = np.ascontiguousarray(tables["text"].T)
    return safetensors_bytes(tables)


def _extra(where: Callable[[dict], dict]) -> Callable[[dict], None]:
    return lambda m: where(m).update(extra_field=1)


# The manifest's grammar (sdk/format/manifest.py), one case per rule both readers must apply alike (issue 63: the
# Java core ignored unknown fields in every object, and took an integer width and a float block count).
GRAMMAR_EDITS: dict[str, Callable[[dict], None]] = {
    "unknown_top": _extra(lambda m: m),
    "unknown_architecture": _extra(lambda m: m["architecture"]),
    "unknown_mixer": _extra(lambda m: m["mixer"]),
    "unknown_text_encoder": _extra(lambda m: m["text_encoder"]),
    "unknown_preprocessing": _extra(lambda m: m["preprocessing"]),
    "unknown_member_entry": _extra(lambda m: m["members"]["NOTICE"]),
    "unknown_member": lambda m: m["members"].update({"extra.bin": dict(m["members"]["NOTICE"])}),
    "unknown_layer_field": _extra(lambda m: next(iter(m["bases"].values()))),
    "unknown_layer": lambda m: m["bases"].update(extra_layer=dict(next(iter(m["bases"].values())))),
    "width_integer": lambda m: m["architecture"].update(width=int(m["architecture"]["width"] * 4) or 1),
    "blocks_float": lambda m: m["mixer"].update(blocks=float(m["mixer"]["blocks"])),
    "num_classes_one": lambda m: m["architecture"].update(num_classes=1),
    "num_bases_257": lambda m: m.update(num_bases=257),
    "embed_dim_4097": lambda m: m["mixer"].update(embed_dim=4097),
    "version_true": lambda m: m.update(version=True),
    "sha256_upper": lambda m: m["members"]["NOTICE"].update(sha256=m["members"]["NOTICE"]["sha256"].upper()),
    "mean_text": lambda m: m["preprocessing"].update(mean=["0.5", 0.5, 0.5]),
}
GRAMMAR_MEMBERS: dict[str, tuple[str, Callable[[bytes], bytes]]] = {
    "tokenizer_truncation_text": ("tokenizer.json", lambda raw: edited_json(raw, lambda t: t.update(
        truncation="longest_first"))),
    "tokenizer_padding_number": ("tokenizer.json", lambda raw: edited_json(raw, lambda t: t.update(padding=128))),
    "class_embeddings_transposed": ("class_embeddings.safetensors", transposed_text_embeddings),
    # classes.json's optional aliases and description (issue 60), and the split of a name stored without them
    **{f"class_{name}": ("classes.json", lambda raw, edit=edit: edited_json(raw, lambda s: edit(s["classes"][0])))
       for name, edit in {
           "aliases": lambda c: c.update(aliases=["alias one", "alias two"], description="one line"),
           "aliases_empty_list": lambda c: c.update(aliases=[]),
           "aliases_not_a_list": lambda c: c.update(aliases="alias"),
           "aliases_empty_string": lambda c: c.update(aliases=[""]),
           "aliases_number": lambda c: c.update(aliases=[7]),
           "aliases_65": lambda c: c.update(aliases=[f"a{i}" for i in range(65)]),
           "alias_too_long": lambda c: c.update(aliases=["x" * 1001]),
           "description_number": lambda c: c.update(description=3),
           "description_empty": lambda c: c.update(description=""),
           "extra_key": lambda c: c.update(colour="red"),
           "stored_synonyms": lambda c: (c.pop("aliases", None), c.update(name=" , first ,second  ,, third\u00a0,")),
           "stored_only_commas": lambda c: (c.pop("aliases", None), c.update(name=" , ,")),
       }.items()},
}


def _python_verdicts(prefix: str, cases: Iterator[tuple[str, bytes]], out_dir: Path, loaded: bool = False
                     ) -> list[dict]:
    """Each case written as `<prefix>_<name>.taper` with the Python reader's verdict, for the Java core to match:
    of `Bundle.from_buffer`, or with `loaded` of `sdk.load` (which also checks the tokenizer and graphs)."""
    out = []
    for name, data in cases:
        path = out_dir / f"{prefix}_{name}.taper"
        path.write_bytes(data)
        try:
            opened = sdk.load(path, cache=False).bundle if loaded else Bundle.from_buffer(np.frombuffer(data, np.uint8))
            verdict = "accepted"
        except BundleError:
            verdict = "BundleError"
        out.append({"file": path.name, "python": verdict})
        if verdict == "accepted":  # the names each reader shows: display name first, then the aliases
            out[-1]["names"] = [[c.name, *c.aliases] for c in opened.classes]
            out[-1]["kinds"] = [c.kinds for c in opened.concepts]
    return out


def grammar_bundles(blob: bytes) -> Iterator[tuple[str, bytes]]:
    """(name, bundle) for each GRAMMAR_EDITS and GRAMMAR_MEMBERS case and the unedited bundle, each in format
    5 and again stamped 6 and signed (export.bundle_edits.signed_copy), so that both versions are pinned."""
    from export.bundle_edits import PAD, manifest_of, signed_copy, with_manifest, with_member_bytes

    manifest, members = bundle_members(blob)
    padded = bundle_bytes(replace(manifest, provenance={**manifest.provenance, "pad": "x" * PAD}), members)
    cases = [("pristine", padded)]
    for name, edit in GRAMMAR_EDITS.items():
        raw = manifest_of(padded)[0]
        edit(raw)
        cases.append((name, with_manifest(padded, raw)))
    for name, (member, edit) in GRAMMAR_MEMBERS.items():
        cases.append((name, with_member_bytes(padded, member, edit(members[member]))))
    key = SigningKey.from_seed(bytes(range(32)))
    for name, data in cases:
        yield f"{name}_v5", data
        yield f"{name}_v6", signed_copy(data, key)


def _manifest_edit(blob: bytes, old: bytes, new: bytes) -> bytes:
    """`blob` with the first `old` in its manifest replaced by `new` (same length) and the header's
    manifest checksum recomputed (sdk/format/bundle.py's header layout)."""
    _, _, _, length, _, _ = HEADER.unpack_from(blob)
    raw = blob[HEADER.size:HEADER.size + length]
    assert len(old) == len(new) and old in raw
    raw = raw.replace(old, new, 1)
    return blob[:24] + hashlib.sha256(raw).digest() + blob[56:HEADER.size] + raw + blob[HEADER.size + length:]


def _json_cases() -> list[dict]:
    """Each JSON_CASES document with the Python parser's verdict (see the module docstring)."""
    cases = []
    for text, max_depth in JSON_CASES:
        raw = text if isinstance(text, bytes) else text.encode()
        try:
            strict_json_loads(raw, "doc", max_depth)
            verdict = "ok"
        except ValueError:
            verdict = "error"
        cases.append({"hex": raw.hex(), "max_depth": max_depth, "python": verdict})
    return cases


def _nested(levels: int) -> str:
    return "[" * levels + "1" + "]" * levels


JSON_CASES = [
    *((doc, 16) for doc in ('{"a": 1}', '[1, -0, 2.5, -1e3, 1E+2, 0.5e-1, 123456789012]', '"é ☃ 🐶"', '"\\u00e9"',
                            'NaN', '[NaN]', '{"a": Infinity}', '-Infinity', '[01]', '[+5]', '[.5]', '[5.]', '[1e]',
                            '[-]', '[1.e5]', '"tab\tinside"', '"bell\x07"', '[1,]', '{"a":1,}', '[1]\x0b',
                            '\x0c[1]', ' \t\r\n[1] ', '[1] x', 'true', 'nul', '"\\x41"', '"\\u12"', '')),
    (b'"\xff"', 16), (b'"\xc3"', 16), (b'"\xed\xa0\x80"', 16), (b'\xef\xbb\xbf[1]', 16),
    *((_nested(n), bound) for bound in (8, 16) for n in (bound, bound + 1)),
    ('{"a": {"b": {"c": [[[[[1]]]]]}}}', 8), ('{"a": {"b": {"c": [[[[[[1]]]]]]}}}', 8),
]


# Golden keys (RFC 8032 seeds): public test vectors, never keys for real bundles.
GOLDEN_SEEDS = (bytes(range(32)), bytes(range(32, 64)))


def _signatures(bundle_path: Path, out_dir: Path) -> dict:
    """Signed, damaged-signed and unsigned copies of the bundle, each with the trusted keys it is opened
    with and the Python reader's verdict; and the job the Java test signs (see the module docstring)."""
    unsigned = bundle_path.read_bytes()
    manifest, members = bundle_members(unsigned)
    golden, other = (SigningKey.from_seed(seed) for seed in GOLDEN_SEEDS)
    signed = bundle_bytes(manifest, members, golden)
    a, b = golden.public_key.hex(), other.public_key.hex()
    header_end = 64 + int.from_bytes(signed[16:24], "little")
    blobs = {"signed": signed, "unsigned": unsigned, "resigned_other": bundle_bytes(manifest, members, other)}
    for name, offset in {"version": 8, "manifest_length": 16, "manifest_digest": 30, "manifest": header_end - 5,
                         "member": header_end + 200, "last_member_byte": len(signed) - 129,
                         "trailer_magic": len(signed) - 128, "scheme": len(signed) - 120,
                         "reserved": len(signed) - 114, "public_key": len(signed) - 100,
                         "signature": len(signed) - 40, "reserved_tail": len(signed) - 1}.items():
        damaged = bytearray(signed)
        damaged[offset] ^= 0x01
        blobs[f"flip_{name}"] = bytes(damaged)
    blobs["truncated_trailer"] = signed[:-1]
    blobs["trailer_removed"] = signed[:-128]
    return _signature_cases(blobs, lambda blob, trusted: Bundle.from_buffer(
        np.frombuffer(blob, np.uint8), trusted_keys=trusted).signer, "sig_{}.taper", out_dir, (a, b))


def _signature_cases(blobs: dict[str, bytes], read: Callable, file: str, out_dir: Path, keys: tuple[str, str]) -> dict:
    """Each blob written to `file`.format(name) and read by `read(blob, trusted keys or None)` (returning the
    signer or None) with no trusted keys, the golden key, the other key and both: the Python verdicts; and
    the signing job for the Java test (the unsigned blob, signed with the golden seed, must be "signed")."""
    a, b = keys
    cases = []
    for name, blob in blobs.items():
        (out_dir / file.format(name)).write_bytes(blob)
        for trusted in (None, [a], [b], [b, a]):
            try:
                signer = read(blob, trusted and frozenset(bytes.fromhex(k) for k in trusted))
                verdict = f"ok:{signer.key_id if signer else 'unsigned'}"
            except BundleError:
                verdict = "BundleError"
            cases.append({"name": name, "file": file.format(name), "trusted": trusted, "python": verdict})
    return {"cases": cases, "sign": {"unsigned": file.format("unsigned"), "seed": GOLDEN_SEEDS[0].hex(),
                                     "public_key": a, "expected": file.format("signed")}}


def _graphs(bundle: Bundle, hostile_members: Sequence[tuple[str, str, bytes]], out_dir: Path) -> dict:
    """The encoder's structure hash, and each hostile member with the Python check's verdict on it."""
    checks = {"backbone.onnx": lambda data: check_backbone_graph(data, bundle.backbone_layout,
                                                                 bundle.manifest.preprocessing.input_size),
              "text_encoder.onnx": check_encoder_graph, "tokenizer.json": check_tokenizer_json}
    hostile = []
    for name, member, data in hostile_members:
        if member not in checks:
            continue
        try:
            checks[member](data)
            verdict = "accepted"
        except BundleError:
            verdict = "BundleError"
        (out_dir / f"hostile_{name}.member").write_bytes(data)
        hostile.append({"name": name, "member": member, "file": f"hostile_{name}.member", "python": verdict})
    return {"encoder_structure": encoder_structure(bundle.member_bytes("text_encoder.onnx")),
            "known_encoder_structures": sorted(KNOWN_ENCODER_STRUCTURES), "hostile": hostile}


def _companion(bundle: Bundle, path: Path, out_dir: Path) -> dict:
    """The ExecuTorch companion for the Java core to read and write each case's program from
    (java<i>.program.pte), and each hostile variant with the Python reader's verdict on it."""
    architecture, shapes = companion_target(bundle)
    raw = path.read_bytes()
    hostile = []
    for name, data in hostile_companions(raw, shapes):
        try:
            parse_companion(data, architecture, shapes)
            verdict = "accepted"
        except BundleError:
            verdict = "BundleError"
        file = "hostile_" + "".join(c if c.isalnum() else "_" for c in name) + ".xnnpack"
        (out_dir / file).write_bytes(data)
        hostile.append({"name": name, "file": file, "python": verdict})
    return {"file": str(path), "hostile": hostile, "signatures": _companion_signatures(raw, architecture, shapes,
                                                                                       out_dir)}


def _companion_signatures(raw: bytes, architecture: dict, shapes: dict, out_dir: Path) -> dict:
    """Signed, damaged-signed, forged and unsigned companions, each with the trusted keys it is read with and
    the Python reader's verdict; and the job the Java test signs (its bytes must be Python's)."""
    golden, other = (SigningKey.from_seed(seed) for seed in GOLDEN_SEEDS)
    signed = sign_companion(raw, golden)
    _, _, size = PREFIX.unpack_from(signed)
    header = json.loads(signed[PREFIX.size:PREFIX.size + size])
    start, length = header["program"]["offset"], header["program"]["size"]
    program = bytearray(signed[start:start + length])
    program[200] ^= 0x01                             # the flatbuffer edited and its SHA-256 redone: a forgery
    forged = companion_bytes({k: v for k, v in header.items() if k != "program"}, bytes(program))
    blobs = {"signed": signed, "unsigned": raw, "resigned_other": sign_companion(raw, other),
             "forged_unsigned": forged, "truncated_trailer": signed[:-1], "trailer_removed": signed[:-128]}
    for name, offset in {"version": 8, "header_length": 14, "header": PREFIX.size + 10,
                         "header_end": PREFIX.size + size - 1, "program": start + length // 2,
                         "trailer_magic": len(signed) - 128,
                         "scheme": len(signed) - 120, "reserved": len(signed) - 114, "public_key": len(signed) - 100,
                         "signature": len(signed) - 40, "reserved_tail": len(signed) - 1}.items():
        damaged = bytearray(signed)
        damaged[offset] ^= 0x01
        blobs[f"flip_{name}"] = bytes(damaged)
    return _signature_cases(blobs, lambda blob, trusted: parse_companion(
        blob, architecture, shapes, trusted_keys=trusted).signer, "sigc_{}.xnnpack", out_dir,
        (golden.public_key.hex(), other.public_key.hex()))


def hostile_companions(raw: bytes, shapes: dict[str, tuple[int, ...]]) -> Iterator[tuple[str, bytes]]:
    """(what, companion bytes) for damaged or hostile ExecuTorch companions built from the good `raw` of a
    bundle whose folded parameters have `shapes`."""
    _, _, size = PREFIX.unpack_from(raw)
    header = json.loads(raw[PREFIX.size:PREFIX.size + size])
    program = raw[header["program"]["offset"]:][:header["program"]["size"]]
    base = {k: v for k, v in header.items() if k != "program"}

    def edited(change, program=program):
        copy = json.loads(json.dumps(base))
        change(copy)
        return companion_bytes(copy, program)

    names = sorted(base["slots"])
    first, second = names[0], names[1]
    conv = next(n for n in names if base["slots"][n]["axes"] == [0, 2, 3, 1])
    yield "truncated", raw[:10]
    yield "magic", b"X" + raw[1:]
    yield "version 1", raw[:8] + struct.pack("<I", 1) + raw[12:]
    yield "not JSON", raw[:PREFIX.size] + b"{" * size + raw[PREFIX.size + size:]
    yield "header too long", raw[:12] + struct.pack("<Q", 1 << 40) + raw[20:]
    yield "damaged program", raw[:-5] + bytes(5)
    yield "other architecture", edited(lambda h: h["architecture"].update(width=0.5))
    yield "max_batch 0", edited(lambda h: h.update(max_batch=0))
    yield "slot missing", edited(lambda h: h["slots"].pop(first))
    yield "unknown slot", edited(lambda h: h["slots"].update(extra=h["slots"][first]))
    yield "shared slot", edited(lambda h: h["slots"][second].update(offset=h["slots"][first]["offset"]))
    yield "misaligned", edited(lambda h: h["slots"][first].update(offset=h["slots"][first]["offset"] + 2))
    yield "in the program's header", edited(lambda h: h["slots"][first].update(offset=0))
    yield "past the end", edited(lambda h: h["slots"][first].update(offset=len(program)))
    yield "negative", edited(lambda h: h["slots"][first].update(offset=-4))
    yield "bad axes", edited(lambda h: h["slots"][first].update(axes=[3, 2, 1, 0]))
    yield "float axis", edited(lambda h: h["slots"][conv].update(axes=[0, 2.0, 3, 1]))
    yield "float offset", edited(lambda h: h["slots"][first].update(offset=float(h["slots"][first]["offset"])))
    yield "no segment header", edited(lambda h: None, program=program[:8] + b"xx00" + program[12:])
    yield "segments past the end", edited(lambda h: None, program=program[:32] + struct.pack("<Q", len(program))
                                          + program[40:])
    # Two parameters of one shape: exchanging their offsets passes every check but the slots' contents.
    pair = next((a, b) for a in names for b in names if a < b and shapes[a] == shapes[b])
    yield "slots swapped", edited(lambda h: (h["slots"][pair[0]].update(offset=base["slots"][pair[1]]["offset"]),
                                             h["slots"][pair[1]].update(offset=base["slots"][pair[0]]["offset"])))
    yield "conv read unpermuted", edited(lambda h: h["slots"][conv].update(axes=[0, 1, 2, 3]))
    at = base["slots"][first]["offset"]
    yield "weights edited, checksum redone", edited(lambda h: None, program=program[:at] + struct.pack("<f", 0.5)
                                                    + program[at + 4:])
    yield "section outside", raw[:PREFIX.size] + raw[PREFIX.size:].replace(
        f'"size":{header["program"]["size"]}'.encode(), f'"size":{header["program"]["size"] + 10 ** 9}'.encode())


def _resolution(bundle, description, options: dict) -> dict:
    record = {"description": description, "options": options}
    try:
        record["classes"] = bundle.resolver.resolve(description, TaskOptions(**options)).classes.tolist()
    except DescriptionError as e:
        record["error"] = str(e)
    return record


class NeedsEncoder(Exception):
    """Raised by composed_resolver's text encoder: the description was not resolved by name."""


def composed_resolver(embed: Callable[[str], np.ndarray] | None = None, compose: bool = True) -> TaskResolver:
    """A resolver over COMPOSED_CLASSES and COMPOSED_CONCEPTS, each class and concept on its own axis; `embed`
    (default: raise NeedsEncoder) is its text encoder."""
    def needs_encoder(text: str) -> np.ndarray:
        raise NeedsEncoder(text)

    n, eye = len(COMPOSED_CLASSES), np.eye(len(COMPOSED_CLASSES) + len(COMPOSED_CONCEPTS), dtype=np.float32)
    classes = [ClassInfo(f"n{i}", name, ["entity", name], list(COMPOSED_ALIASES.get(i, ())),
                         COMPOSED_GLOSSES.get(i, "")) for i, name in enumerate(COMPOSED_CLASSES)]
    concepts = [Concept(cid, list(names), list(members), list(COMPOSED_KINDS.get(i, ())))
                for i, (cid, (names, members)) in enumerate(zip(COMPOSED_IDS, COMPOSED_CONCEPTS, strict=True))]
    return TaskResolver(classes, eye[:n], {}, embed or needs_encoder, concepts, eye[n:], compose=compose)


def composed_resolutions() -> dict:
    resolver, rows = composed_resolver(), []
    for description in COMPOSED_DESCRIPTIONS:
        try:
            task = resolver.resolve(description, TaskOptions(min_classes=1))
            rows.append({"description": description, "classes": task.classes.tolist(), "how": task.how})
        except NeedsEncoder:
            rows.append({"description": description, "encoder": True})
        except DescriptionError as e:
            rows.append({"description": description, "error": str(e)})
    described = []
    for key, candidates in DESCRIBED_CASES:
        found = resolver.narrowed(key, list(candidates))
        described.append({"key": key, "candidates": list(candidates),
                          **({} if found is None else {"kept": found[0], "said": found[1]})})
    for key, negated_words, candidates in NEGATED_CASES:
        found = resolver.narrowed(key, list(candidates), negated_words)
        described.append({"key": key, "negated": negated_words, "candidates": list(candidates),
                          **({} if found is None else {"kept": found[0], "said": found[1]})})
    return {"classes": list(COMPOSED_CLASSES),
            "aliases": [list(COMPOSED_ALIASES.get(i, ())) for i in range(len(COMPOSED_CLASSES))],
            "glosses": [COMPOSED_GLOSSES.get(i, "") for i in range(len(COMPOSED_CLASSES))],
            "described": described, "words": [{"text": t, "stems": content_stems(t)} for t in DESCRIBED_TEXTS],
            "negations": [{"text": t, "split": negation(t)} for t in NEGATION_TEXTS],
            "affirmed": [{"text": t, "kept": affirmed(t)} for t in AFFIRMED_TEXTS],
            "concepts": [[list(a), list(b), cid, list(COMPOSED_KINDS.get(i, ()))]
                         for i, (cid, (a, b)) in enumerate(zip(COMPOSED_IDS, COMPOSED_CONCEPTS, strict=True))],
            "descriptions": rows}


def _images(bundle, out_dir: Path) -> list[dict]:
    rng, records = np.random.default_rng(1), []
    for i, (width, height) in enumerate(IMAGE_SIZES):
        rgb = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        tensor = bundle.preprocessing.normalize(to_uint8_batch(rgb, bundle.preprocessing.input_size)[0])[0]
        (out_dir / f"image{i}.rgb").write_bytes(rgb.tobytes())
        (out_dir / f"image{i}.f32").write_bytes(tensor.astype("<f4").tobytes())
        records.append({"width": width, "height": height, "rgb": f"image{i}.rgb", "tensor": f"image{i}.f32"})
    return records


def _case(bundle, i: int, description: str | list[str], out_dir: Path, images: list[dict]) -> dict:
    task = bundle.resolver.resolve(description, TaskOptions())
    model = bundle.personalize(description)
    buffer, views = bundle.folded_weights(bundle.fused_weights(model.alpha))
    (out_dir / f"case{i}.folded.f32").write_bytes(buffer.astype("<f4").tobytes())
    head = np.concatenate([model.head_weight, model.head_bias[:, None]], axis=1)
    size = bundle.preprocessing.input_size
    inputs = np.stack([np.fromfile(out_dir / im["tensor"], "<f4").reshape(3, size, size) for im in images])
    session = backbone_session(bundle.bundle.member_bytes("backbone.onnx"), BACKBONE_FILE, buffer,
                               ort.GraphOptimizationLevel.ORT_ENABLE_ALL, ["CPUExecutionProvider"], None)
    (features,) = session.run(None, {"image": inputs})
    logits = features.astype(np.float64) @ head[:, :-1].T.astype(np.float64) + head[:, -1]
    return {"name": f"case{i}", "description": description, "task": model.class_indices.tolist(),
            "rest": model.rest, "resolution": model.resolution, "embedding": task.embedding.tolist(),
            "alpha": model.alpha.tolist(),
            "head": head.tolist(), "folded": f"case{i}.folded.f32", "features": features.tolist(),
            "logits": (collapse(logits) if model.rest else logits).tolist(),
            "int8": _int8(bundle, model.alpha, views, f"case{i}", out_dir, inputs)}


def _int8(bundle, alpha: np.ndarray, folded: dict[str, np.ndarray], name: str, out_dir: Path,
          inputs: np.ndarray) -> dict:
    """The int8 backbone (image -> features, `sdk.engines.int8`) of these folded weights, the mixed batch norms it
    was quantized from (what the Java core is given to write the same bytes), and its features on `inputs`."""
    mixed = bundle.bundle.bases.mixed_channels(alpha)
    graph = Int8Plan(bundle.bundle.member_bytes("backbone.onnx"), bundle.preprocessing).quantize(folded, mixed)
    (out_dir / f"{name}.int8.onnx").write_bytes(graph)
    (out_dir / f"{name}.channels.f32").write_bytes(b"".join(v.astype("<f4").tobytes() for v in mixed.values()))
    (features,) = ort.InferenceSession(graph, providers=["CPUExecutionProvider"]).run(None, {"image": inputs})
    return {"graph": f"{name}.int8.onnx", "channels": f"{name}.channels.f32",
            "channel_names": [[k, len(v)] for k, v in mixed.items()], "features": features.tolist(),
            "step": output_step(graph)}


def output_step(graph: bytes) -> float:
    """The quantization step of an int8 graph's output: the scale of the DequantizeLinear it comes from."""
    import onnx  # the export side's dependency; the golden writer runs where the exporters do

    model = onnx.load_from_string(graph)
    made_by = {out: node for node in model.graph.node for out in node.output}
    scales = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    node = made_by[model.graph.output[0].name]
    while node.op_type != "DequantizeLinear":
        node = made_by[node.input[0]]
    return float(scales[node.input[1]])
