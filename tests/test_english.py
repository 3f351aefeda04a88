"""English knowledge for any vocabulary (issue 72, parts 1 and 2): trainer/data/english.py reads WordNet's noun files,
chooses each class's and group's sense, and the exporter adds the kinds above them as concepts."""

import os
from dataclasses import replace

import pytest

from trainer.data.english import (
    ID_PREFIX,
    WORDNET_DIR,
    WordNet,
    choose_senses,
    english_for,
    everyday_rows,
    kinds_of_classes,
)
from trainer.data.errors import DataError
from trainer.data.related_kinds import related_kinds
from trainer.data.vocabulary import Vocabulary, groups_text

needs_wordnet = pytest.mark.skipif(not (WORDNET_DIR / "data.noun").is_file() and not os.environ.get("CI"),
                                   reason="WordNet's noun files are not installed (make setup: wordnet-base)")


@pytest.fixture(scope="module")
def wordnet() -> WordNet:
    return WordNet()


def vocabulary(groups: dict[str, list[str]], extra: list[str] = (), body: str = "") -> Vocabulary:
    ids = sorted({c for members in groups.values() for c in members} | set(extra))
    return Vocabulary.from_text(groups_text(groups) + body, ids)


@needs_wordnet
def test_the_reader_gives_senses_in_wordnets_order_plurals_and_kinds(wordnet):
    assert wordnet.senses("bees")[0] == "n02206856"
    assert wordnet.senses("geese")[0] == wordnet.senses("goose")[0]          # noun.exc
    assert wordnet.senses("Sea-Animals")[0] == wordnet.senses("sea animal")[0]
    assert wordnet.senses("qwzx") == []
    bee = wordnet.synset("n02206856")
    assert bee.names == ("bee",) and bee.gloss.startswith("any of numerous hairy-bodied insects")
    insect = wordnet.senses("insect")[0]
    assert insect in wordnet.ancestors("n02206856") and wordnet.depth(insect) > wordnet.depth("n00001740")
    with pytest.raises(DataError, match="not a WordNet noun id"):
        wordnet.synset("bee")
    with pytest.raises(DataError, match="no noun sense"):
        wordnet.synset("n00000001")


def test_a_missing_wordnet_is_a_data_error_that_says_how_to_install_it(tmp_path):
    with pytest.raises(DataError, match="make setup"):
        WordNet(tmp_path)


@needs_wordnet
def test_a_sense_is_chosen_like_its_neighbours_and_a_misfit_is_told(wordnet):
    v = vocabulary({"fruit": ["banana", "lemon", "orange"], "dogs": ["chihuahua", "poodle", "labrador", "beagle"],
                    "mixed": ["labrador", "banana"]})   # labrador, with no sense, is no neighbour of banana
    senses, how, notes = choose_senses(v, wordnet)
    gloss = {c: wordnet.synset(s).gloss for c, s in senses.items()}
    assert "fruit" in gloss["banana"] and "banana tree" not in wordnet.synset(senses["banana"]).names
    assert wordnet.senses("banana")[0] != senses["banana"] and "sense 2" in how["banana"]
    assert "dog" in gloss["chihuahua"] and how["lemon"] == "name 'lemon'"          # WordNet's first, kept
    assert "labrador" not in senses and any("'labrador'" in n and "pin one" in n for n in notes)


@needs_wordnet
def test_of_senses_like_as_many_neighbours_the_one_sharing_the_most_specific_kinds_wins(wordnet):
    """WordNet's first "scorpion" is a person born under Scorpio: an organism, like every spider, so it was as
    like its neighbours as the arachnid (the second held-out set's bundle gave it the aliases 'person', 'someone')."""
    v = vocabulary({"creepy crawlies": ["tarantula", "black_widow", "scorpion", "centipede"]})
    senses, how, _ = choose_senses(v, wordnet)
    assert "arachnid" in wordnet.synset(senses["scorpion"]).gloss and "sense 3" in how["scorpion"]
    assert wordnet.senses("scorpion")[0] != senses["scorpion"]
    assert wordnet.alike(wordnet.senses("scorpion")[0], senses["tarantula"])   # the tie the count alone left
    # ... but frequency first: the farm tractor (tagged in WordNet's concordances), not the truck's cab, whose
    # 'motor vehicle' is the more specific kind shared with the cars (the worked example's vehicles)
    v = vocabulary({"vehicles": ["tractor", "convertible", "limousine", "sports_car"]})
    senses, how, _ = choose_senses(v, wordnet)
    assert senses["tractor"] == wordnet.senses("tractor")[0] and how["tractor"] == "name 'tractor'"
    assert wordnet.shared_depth(wordnet.senses("tractor")[1], senses["convertible"]) \
        > wordnet.shared_depth(senses["tractor"], senses["convertible"])


@needs_wordnet
def test_senses_of_one_lexicographer_file_are_alike_though_what_they_share_is_shallow(wordnet):
    """A cliff shares only 'geological formation' (3 deep) with an alp or a seashore, less than FIT_DEPTH: its one
    sense was dropped (the second held-out set's bundle had no description for it). Both are natural objects."""
    v = vocabulary({"nature": ["cliff", "seashore", "coral_reef", "lakeside", "alp"]})
    senses, _, notes = choose_senses(v, wordnet)
    assert wordnet.synset(senses["cliff"]).gloss.startswith("a steep high face of rock")
    assert wordnet.shared_depth(senses["cliff"], senses["alp"]) < 4 and wordnet.same_category(senses["cliff"],
                                                                                               senses["alp"])
    assert not any("'cliff'" in n for n in notes)
    # ... and a category is no licence for another kind of thing: the Canadian region among dogs stays unlike them;
    # the oak's wood, which WordNet files with the plants and its concordances tag most, shares only 'physical
    # entity' with a rose: the oak among garden plants stays the tree
    v = vocabulary({"dogs": ["chihuahua", "poodle", "labrador"]})
    assert "labrador" not in choose_senses(v, wordnet)[0]
    # ... unless an alias says which dog: the worked example's "labrador retriever" (it had got no sense, so no
    # description and no place under WordNet's 'dog')
    v.classes["labrador"] = replace(v.classes["labrador"], aliases=("labrador retriever", "lab"))
    senses, how, notes = choose_senses(v, wordnet)
    assert "retriever" in wordnet.synset(senses["labrador"]).names[0] and not any("'labrador'" in n for n in notes)
    assert how["labrador"] == "name 'labrador retriever'; no sense of 'labrador' is like them"
    v = vocabulary({"garden": ["rose", "tulip", "daisy", "oak", "fern", "moss"]})
    assert "tree" in wordnet.synset(choose_senses(v, wordnet)[0]["oak"]).gloss
    wood = wordnet.senses("oak")[0]
    assert wordnet.same_category(wood, wordnet.senses("rose")[0]) and not wordnet.alike(wood, wordnet.senses("rose")[0])


@needs_wordnet
def test_a_pin_wins_and_false_opts_out(wordnet):
    body = '[classes.bee]\nwordnet = "n07975909"\n[classes.ant]\nwordnet = false\n'   # a spelling bee
    v = vocabulary({"insects": ["bee", "ant", "wasp"]}, body=body)
    senses, how, _ = choose_senses(v, wordnet)
    assert senses["bee"] == "n07975909" and how["bee"] == "pinned" and "ant" not in senses
    bad = vocabulary({"insects": ["bee", "ant"]}, body='[classes.bee]\nwordnet = "n00000001"\n')
    with pytest.raises(DataError, match="no noun sense"):
        choose_senses(bad, wordnet)


@needs_wordnet
def test_the_kinds_above_the_classes_become_concepts_with_synonyms(wordnet):
    v = vocabulary({"cats": ["lion", "cougar", "tabby_cat"], "sea animals": ["jellyfish", "american_lobster",
                                                                               "spiny_lobster", "dugong"],
                    "kitchen": ["frying_pan", "wok"]})
    english = english_for(v, wordnet)
    names = {n: c for c in english.concepts for n in c["names"]}
    ids = list(v.classes)
    held = {n: {ids[i] for i in c["members"]} for n, c in names.items()}
    assert held["feline"] == {"lion", "cougar", "tabby_cat"} and held["cat"] == {"cougar", "tabby_cat"}
    assert held["crustacean"] == {"american_lobster", "spiny_lobster"}   # the animals, not their flesh
    assert held["cooking utensil"] == {"frying_pan", "wok"}
    assert held["sea creature"] == {"jellyfish", "american_lobster", "spiny_lobster", "dugong"}   # the group's sense
    assert all(c["id"].startswith((ID_PREFIX, "collection/")) and 2 <= len(c["members"]) < len(ids)
               for c in english.concepts)
    assert held["marine life"] == held["sea creature"]   # the everyday collection that is the author's sea animals
    assert "kitchen" not in english.group_senses and any("'kitchen'" in n for n in english.notes)   # a room
    assert "mountain lion" in english.aliases["cougar"] and "tabby cat" not in english.aliases["tabby_cat"]
    assert english.descriptions["wok"].startswith("pan with a convex bottom")


@needs_wordnet
def test_a_name_wordnet_lacks_is_read_as_a_kind_of_its_last_word(wordnet):
    v = vocabulary({"vehicles": ["shiny_red_sportscar", "school_bus"]}, ["bee"], body='[classes.shiny_red_sportscar]\n'
                   'name = "my shiny red car"\ndescription = "mine"\n')
    english = english_for(v, wordnet)
    assert english.how["shiny_red_sportscar"] == "kind of 'car'"
    assert "shiny_red_sportscar" not in english.descriptions   # a car's gloss is not the author's car's
    assert english.aliases["shiny_red_sportscar"][:3] == ("car", "auto", "automobile")   # its only car: a kind
    held = {n: {list(v.classes)[i] for i in c["members"]} for c in english.concepts for n in c["names"]}
    assert held["conveyance"] == {"shiny_red_sportscar", "school_bus"}


@needs_wordnet
def test_the_exporter_adds_concepts_synonyms_and_glosses_marked_as_derived(tmp_path):
    from export.bundle import class_entry, with_english, words_are_wordnets

    ids = ["lion", "cougar", "tabby_cat", "wok", "frying_pan"]
    (tmp_path / "vocabulary.toml").write_text('[classes.wok]\ndescription = "mine"\n'
                                              '[groups.cats]\nmembers = ["lion", "cougar", "tabby_cat"]\n')
    rows = {"classes": [class_entry(c, c.replace("_", " "), [c], "mine" if c == "wok" else "") for c in ids],
            "supercategories": {},
            "concepts": [{"id": "cats", "names": ["cats"], "members": [0, 1, 2]}]}
    classes, added = with_english(rows, tmp_path, ids)
    assert classes["concepts"][0] == rows["concepts"][0]                     # the author's words stay first
    derived = {n: c["members"] for c in classes["concepts"][1:] for n in c["names"]}
    assert derived["feline"] == [0, 1, 2] and derived["cooking utensil"] == [3, 4]
    everyday = {n: c["members"] for c in classes["concepts"] if c["id"].startswith("collection/") for n in c["names"]}
    assert everyday["big cats"] == [0, 1] and everyday["cookware"] == [3, 4] and "cats" not in everyday
    assert all(c["id"].startswith((ID_PREFIX, "collection/")) for c in classes["concepts"][1:])
    assert added["collections"] == sum(c["id"].startswith("collection/") for c in classes["concepts"]) > 0
    without, _ = with_english(rows, tmp_path, ids, ("collection/",))             # export --no-collections
    assert not any(c["id"].startswith("collection/") for c in without["concepts"])
    by_id = {r["id"]: r for r in classes["classes"]}
    assert "mountain lion" in by_id["cougar"]["aliases"] and by_id["wok"]["description"] == "mine"
    assert by_id["frying_pan"]["description"].startswith("a pan used for frying")
    assert added["classes"] == 5 and added["concepts"] == len(classes["concepts"]) - 1 and added["descriptions"] == 4
    wnids = ["n02129165", "n02125311"]                                       # WordNet's own classes: as they are
    assert words_are_wordnets("tiny-imagenet-200.tar.gz", wnids) and words_are_wordnets("synthetic", ids)
    assert not words_are_wordnets("my-photos", ids) and not words_are_wordnets("my-photos", [*wnids, "lion"])


@needs_wordnet
def test_a_folder_name_is_read_as_plain_words_and_hyphenated_lemmas_are_found(wordnet):
    """Names as folders are written ("TeddyBear", "Ladybugs!!", "cat (1)") find their sense, and so do the
    3,615 WordNet lemmas spelled with a hyphen ("T-shirt"), which `senses` looked up as spaced words and missed."""
    assert wordnet.senses("T-shirt") == wordnet.senses("t shirt") == ["n03595614"]   # jersey, T-shirt, tee shirt
    assert wordnet.senses("black-footed albatross") == wordnet.senses("Black footed Albatross") == ["n02058747"]
    assert wordnet.senses("battery acid") == ["n14773865"]   # a lemma of the spaced spelling keeps its own senses
    assert wordnet.senses("battery-acid") == ["n14773865"]   # (battery-acid, n02675657, is another sense)
    assert wordnet.name_senses("TeddyBear") == (wordnet.senses("teddy bear"), "Teddy Bear")
    assert wordnet.name_senses("fireTruck") == (wordnet.senses("fire truck"), "fire Truck")
    assert wordnet.name_senses("iPhone") == ([], "iPhone")   # not "i Phone"
    ids = ["TeddyBear", "Ladybugs!!", "cat (1)", "GoldenRetriever", "yo-yo"]
    english = english_for(Vocabulary.default(ids), wordnet)
    assert english.senses == {"TeddyBear": "n04399382", "Ladybugs!!": "n02165456", "cat (1)": "n02121620",
                              "GoldenRetriever": "n02099601", "yo-yo": "n04613555"}, english.notes
    assert english.how["Ladybugs!!"] == "name 'Ladybugs'"
    assert "teddy bear" in english.aliases["TeddyBear"] and "ladybug" in english.aliases["Ladybugs!!"]


@needs_wordnet
def test_the_starter_lists_each_names_senses_to_pin(tmp_path):
    from trainer.__main__ import main

    for name in ("bee", "labrador", "red fire truck", "TeddyBear"):
        (tmp_path / "train" / name).mkdir(parents=True)
    assert main(["vocabulary", "--data", str(tmp_path)]) == 0
    text = (tmp_path / "vocabulary.toml").read_text()
    assert '#   wordnet = "n02206856"   # bee: any of numerous hairy-bodied insects' in text
    assert "#   wordnet = \"n04399382\"   # teddy: plaything consisting of a child's toy bear" in text   # camel case
    assert "# wordnet: 1 sense:" in text and "none for this name" in text
    pinned = text.replace('#   wordnet = "n02206856"', 'wordnet = "n02206856"')
    assert Vocabulary.from_text(pinned, ["bee", "labrador", "red fire truck", "TeddyBear"]).classes["bee"].wordnet \
        == "n02206856"


@needs_wordnet
def test_a_groups_sense_is_the_one_that_fits_and_a_kind_of_one_class_names_it(wordnet):
    v = vocabulary({"primates": ["chimpanzee", "orangutan", "baboon"],
                    "amphibians": ["bullfrog", "tailed_frog", "european_fire_salamander"],
                    "clothes": ["sombrero", "kimono", "bikini"]}, ["boa_constrictor", "monkey_puzzle"],
                   body='[classes.monkey_puzzle]\naliases = ["monkey"]\n')
    english = english_for(v, wordnet)
    gloss = {g: wordnet.synset(s).gloss for g, s in english.group_senses.items()}
    # WordNet's first senses are the order Primates (a taxon, no kind) and an amphibious vehicle.
    assert gloss["primates"].startswith("any placental mammal") and gloss["amphibians"].startswith("cold-blooded")
    assert wordnet.senses("amphibians")[0] != english.group_senses["amphibians"] and not english.notes
    # A kind holding one class answers as the class, up to KIND_LEVELS up: the only hat, snake, salamander.
    assert {"hat", "headdress"} <= set(english.aliases["sombrero"])
    assert {"snake", "serpent"} <= set(english.aliases["boa_constrictor"])
    assert "salamander" in english.aliases["european_fire_salamander"]
    # Not a name the author gave another class ("monkey": the tree's alias), nor a concept's ("ape", "primate").
    assert "monkey" not in english.aliases["baboon"] and "Old World monkey" in english.aliases["baboon"]
    assert not {"ape", "primate", "clothing"} & {a for names in english.aliases.values() for a in names}
    # Not too general a kind: in a bundle of one animal, "animal" and "organism" are beyond KIND_LEVELS.
    alone = english_for(vocabulary({"things": ["sombrero", "wok"]}, ["boa_constrictor"]), wordnet)
    assert "snake" in alone.aliases["boa_constrictor"] and not {"organism", "animal", "being"} & set(
        alone.aliases["boa_constrictor"])


@needs_wordnet
def test_the_kinds_below_a_concept_that_no_class_is_go_to_its_most_specific_holder(tmp_path):
    """Rule 4b's table (issue 72, part 2) and the informal names: "beagle" lies below the dogs (the author's
    group wins the tie with WordNet's 'dog', which holds the same classes), "tiger" below the cats (its most
    used senses are a person and the feline: the feline is the one below a concept here), "shoe" is footwear,
    not the card shoe below 'container'; no class, no kind above one and no kind below one is listed; "pooch"
    is another word for the dogs, a name of their group."""
    from export.bundle import class_entry, with_english

    ids = ["chihuahua", "poodle", "golden_retriever", "lion", "tabby_cat", "wok", "frying_pan"]
    (tmp_path / "vocabulary.toml").write_text('[groups.dogs]\nmembers = ["chihuahua", "poodle", "golden_retriever"]\n')
    rows = {"classes": [class_entry(c, c.replace("_", " "), [c], "") for c in ids], "supercategories": {},
            "concepts": [{"id": "dogs", "names": ["dogs"], "members": [0, 1, 2]}]}
    classes, added = with_english(rows, tmp_path, ids)
    holder = {k.lower(): c for c in classes["concepts"] for k in c.get("kinds", ())}
    assert holder["beagle"]["id"] == "dogs" and holder["puppy"]["id"] == "dogs"
    assert holder["tiger"]["names"][0] == "feline"
    assert "shoe" not in holder and "poodle" not in holder and "hunting dog" not in holder   # a sense, a kind above
    assert "toy poodle" not in holder and "dog" not in holder     # below a class's sense; the group's own sense
    assert added["kinds"] == sum(len(c.get("kinds", ())) for c in classes["concepts"]) > 100
    # WordNet's informal terms for dogs are another word for the dogs, not a kind of dog: names of the group
    dogs = next(c for c in classes["concepts"] if c["id"] == "dogs")
    assert dogs["names"][0] == "dogs" and {"doggie", "doggy", "pooch"} <= set(dogs["names"]) and "pooch" not in holder
    assert added["informal_names"] == len(dogs["names"]) - 1 >= 3
    assert all(c["kinds"] == sorted(c["kinds"]) for c in classes["concepts"] if "kinds" in c)
    # ... so is a general term ("clothes": "clothing in general"), but not "dress", most used for the frock, nor
    # "threads", the plural of "thread" by WordNet's morphology; "clothes" is none of "cloth" (WordNet: "clothe")
    garments = ["bikini", "kimono", "sock", "poncho", "wok", "frying_pan"]
    rows = {"classes": [class_entry(c, c, [c], "") for c in garments], "supercategories": {}, "concepts": []}
    (tmp_path / "vocabulary.toml").write_text("")
    classes, _ = with_english(rows, tmp_path, garments)
    clothing = next(c for c in classes["concepts"] if "clothing" in c["names"])
    names = set(clothing["names"])
    assert {"clothes", "apparel", "togs"} <= names and not {"dress", "threads"} & names
    assert "wearing apparel" not in names   # "wearing" would become a word the bundle knows (rule 4a reads it)


def test_an_everyday_collection_reaches_own_classes_by_their_senses_and_the_authors_words_win():
    """trainer/data/everyday_collections.json lists Tiny ImageNet's WordNet ids; a vocabulary of one's own classes
    gets a collection where it lists a class's sense, a kind above it or one right below it (`kinds`)."""
    def rows(groups: dict[str, list[str]], kinds: dict[str, list[str]]) -> dict[str, list[str]]:
        v = vocabulary(groups, extra=["penguin"])
        kinds = {**kinds, "penguin": ["n02056570"]}
        return {r["names"][0]: [list(v.classes)[i] for i in r["members"]] for r in everyday_rows(v, kinds)}

    kitchen = {"frying_pan": ["n03400231"], "wok": ["n04596000", "n04596742"], "teapot": ["n99999999"]}
    found = rows({"kitchen": ["frying_pan", "wok", "teapot"]}, kitchen)
    assert found["cookware"] == ["frying_pan", "wok"] and found["kitchenware"] == ["frying_pan", "wok"]
    assert "kitchen" not in found                            # no collection is named so: the author's group stays
    # a collection sharing a name with the author's group, holding more than half of it and nothing else, is that
    # group under its other names; one holding less keeps its own classes, and the author's name is not added again
    monuments = {"arch": ["n04486054"], "obelisk": ["n03837869"]}
    found = rows({"landmarks": ["arch", "obelisk", "bridge"]}, {**monuments, "bridge": ["n04366367"]})
    assert found["monuments"] == ["arch", "bridge", "obelisk"] and "landmarks" not in found
    found = rows({"landmarks": ["arch", "obelisk", "bridge", "viaduct", "tower"]}, monuments)
    assert found["monuments"] == ["arch", "obelisk"] and "landmarks" not in found


@needs_wordnet
def test_kinds_beyond_the_hypernyms_its_flesh_as_food_and_the_whole_it_is_a_member_of(wordnet):
    """trainer/data/related_kinds.py: the lobsters' flesh is seafood; a freight car is a member of a train."""
    names = {k: wordnet.synset(k).names[0] for k in related_kinds(wordnet, "n01983481")}
    assert list(names.values()) == ["American lobster", "lobster", "shellfish", "seafood"]
    assert [wordnet.synset(k).names[0] for k in related_kinds(wordnet, "n03393912")] == ["freight train", "train"]
    for no_flesh in ("n02226429", "n01945685", "n01915811"):   # grasshopper (a cocktail), slug (a drink), coral (roe)
        assert not any(wordnet.synset(k).lexfile == 13 for k in related_kinds(wordnet, no_flesh))
    v = vocabulary({"sea": ["american_lobster", "spiny_lobster", "jellyfish"], "farm": ["goose", "duck"],
                    "rail": ["bullet_train", "freight_car"], "food": ["meat_loaf"]})
    english = english_for(v, wordnet)
    ids = list(v.classes)
    held = {n: sorted(ids[i] for i in c["members"]) for c in english.concepts for n in c["names"]}
    assert held["seafood"] == held["shellfish"] == ["american_lobster", "spiny_lobster"]
    assert held["poultry"] == ["duck", "goose"] and held["train"] == ["bullet_train", "freight_car"]
    assert "meat" not in held                               # a word of "meat loaf": not the goose and the duck


@needs_wordnet
def test_a_kind_below_a_class_names_that_class(wordnet):
    """A grizzly is a brown bear: the names of the kinds below a class's sense are its aliases (issue 72's kinds
    below a class), where the kind is the name's one most used sense ("buffalo", the American bison, below the
    bison; not "silverfish", as often the insect as the goldfish) and each word of the name is the class's or
    such a name's ("grizzly bear", not "Kodiak bear": "kodiak" would become a word the bundle knows)."""
    english = english_for(vocabulary({"animals": ["brown_bear", "bison", "goldfish", "lion", "wok"]}), wordnet)
    assert {"grizzly", "grizzly bear"} <= set(english.aliases["brown_bear"])
    assert "Kodiak bear" not in english.aliases["brown_bear"] and "Kodiak" not in english.aliases["brown_bear"]
    assert "buffalo" in english.aliases["bison"] and "lioness" in english.aliases["lion"]
    assert "silverfish" not in english.aliases["goldfish"]
    # a general class has more such names than aliases (MAX_ALIASES): the most used come first
    from sdk.format.bundle import MAX_ALIASES

    general = english_for(vocabulary({"animals": ["bird", "dog", "horse"]}), wordnet)
    assert len(general.aliases["bird"]) > MAX_ALIASES
    assert {"owl", "pigeon", "eagle"} <= set(general.aliases["bird"][:MAX_ALIASES])
    # a name that also names another kind of thing a camera sees is no alias: "drone" (the male bee, an aircraft),
    # "locust" (the insect, a tree); "buffalo" stays (its meat and the water buffalo are no other kind of thing)
    kinds = kinds_of_classes(wordnet, {c: wordnet.senses(c)[0] for c in ("bee", "grasshopper", "bison")},
                             {c: [c] for c in ("bee", "grasshopper", "bison")}, set())
    assert "honeybee" in kinds["bee"] and "drone" not in kinds["bee"] and "locust" not in kinds["grasshopper"]
    assert "buffalo" in kinds["bison"] and wordnet.seen_otherwise("drone", wordnet.most_used("drone").pop())
    # a name that is such a kind's is no kind the bundle lacks: "buffalo" is not told missing below 'bovid'
    assert "buffalo" not in {k.lower() for k in english.kinds_below}
    assert "aardvark" in {k.lower() for k in english.kinds_below}   # a kind of placental, as bears and lions are
    # an informal term whose singular is another noun is no name of its concept: "threads" would make "thread"
    # take the clothes (a group's name answers its singular too); "togs" has none
    clothing = wordnet.index["threads"][0]
    assert wordnet.singular_other("threads", clothing) and not wordnet.singular_other("togs", clothing)


@needs_wordnet
def test_tiny_imagenets_words_get_the_kinds_below_its_classes_and_concepts():
    """A bundle whose class ids are WordNet's senses (Tiny ImageNet's) gets, at export, the kinds below its
    classes as aliases and the kinds below its concepts and WordNet's informal names for them
    (export.bundle.with_wordnet_kinds); what the bundle already answers to is left as it is."""
    from export.bundle import class_entry, with_wordnet_kinds

    ids = ["n02132136", "n02410509", "n02085620", "n02099601"]   # brown bear, bison, Chihuahua, golden retriever
    names = ["brown bear, bruin", "bison", "Chihuahua", "golden retriever"]
    rows = {"classes": [class_entry(c, n, [n]) for c, n in zip(ids, names, strict=True)], "supercategories": {},
            "concepts": [{"id": "n02084071", "names": ["dog", "domestic dog"], "members": [2, 3]},
                         {"id": "facet/small", "names": ["small animals"], "members": [2, 3]}]}
    classes, added = with_wordnet_kinds(rows)
    aliases = {r["id"]: r["aliases"] for r in classes["classes"]}
    assert aliases["n02132136"][0] == "bruin" and "grizzly" in aliases["n02132136"]
    assert "buffalo" in aliases["n02410509"]
    dog, facet = classes["concepts"]
    assert dog["names"][:2] == ["dog", "domestic dog"] and {"doggy", "pooch"} <= set(dog["names"])
    assert "beagle" in dog["kinds"] and "Chihuahua" not in dog["kinds"] and "kinds" not in facet
    assert added == {"source": "WordNet 3.0",
                     "kinds_of_classes": sum(len(a) for a in aliases.values()) - 1,
                     "kinds": len(dog["kinds"]), "informal_names": len(dog["names"]) - 2}


@needs_wordnet
def test_an_alias_is_a_name_in_ordinary_use_for_the_classs_sense(wordnet):
    """A synonym, or a holding kind's name, goes only where the sense is one the name is most used for: the cougar
    keeps "puma" and "mountain lion", not "painter" (the artist, 15 tags); a kitchen's plate, given WordNet's most
    tagged sense (home plate), does not answer "bag" or "home"."""
    assert wordnet.in_use_for("puma", "n02125311") and not wordnet.in_use_for("painter", "n02125311")
    v = vocabulary({"cats": ["lion", "cougar", "tabby_cat"],
                    "kitchen": ["frying_pan", "wok", "teapot", "water_jug", "wooden_spoon", "plate"]})
    aliases = english_for(v, wordnet).aliases
    assert {"puma", "mountain lion"} <= set(aliases["cougar"]) and "painter" not in aliases["cougar"]
    assert not {"home", "bag", "base"} & set(aliases["plate"]) and "home plate" in aliases["plate"]


@needs_wordnet
def test_a_derived_description_names_the_parts_rule_6_reads(wordnet):
    """The elephant's gloss names no trunk; WordNet's parts of an elephant do, one kind up from the African
    elephant, and rule 6 (sdk.text.resolver.described) then reads "a beast with a trunk" as it."""
    from sdk.text.resolver.described import content_stems, described

    v = vocabulary({"animals": ["african_elephant", "koala", "scorpion", "camel"]})
    descriptions = english_for(v, wordnet).descriptions
    assert descriptions["african_elephant"].endswith("; with tusk, proboscis, trunk")
    ids = list(v.classes)
    stems = [set(content_stems(f"{c.replace('_', ' ')} {descriptions[c]}")) for c in ids]
    assert described("a beast with a trunk", list(range(len(ids))), stems)[0] == [ids.index("african_elephant")]


@needs_wordnet
def test_no_class_takes_the_singular_of_a_group_name_as_its_alias(wordnet):
    # "big cat", the kind above the lion alone among these, would answer "a big cat" with the lion; the singular of the
    # everyday collection "big cats" (the cougar and the lion) answers it instead
    from sdk.text.resolver.words import singular_forms

    v = vocabulary({"cats": ["lion", "cougar", "tabby_cat"], "birds": ["goose", "albatross"]})
    english = english_for(v, wordnet)
    groups = {n.lower() for c in english.concepts for n in c["names"]} | {"cats", "birds"}
    singulars = {f for g in groups for f in singular_forms(g)}
    assert "big cats" in groups and "big cat" not in english.aliases["lion"]
    assert not {a.lower() for aliases in english.aliases.values() for a in aliases} & singulars
