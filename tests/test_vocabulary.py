"""The vocabulary file (trainer/data/vocabulary.py, issue 60): a hand-written TOML per ImageFolder that gives
each class a display name, aliases and a description, and nested groups; what the trainer, the exporter and
the SDK make of it; and its errors."""

import json
from pathlib import Path

import numpy as np
import pytest

from export.bundle import class_entry
from sdk.format.bundle import ClassInfo, Concept, display_name
from sdk.text.resolver import MISSING, TaskOptions, TaskResolver
from trainer.config import PRESETS, fit_to_classes
from trainer.data.errors import DataError
from trainer.data.vocabulary import Vocabulary, starter_text

OWN = Path(__file__).resolve().parents[1] / "scripts" / "own_data"
IDS = sorted(json.loads((OWN / "source_classes.json").read_text())["classes"])


@pytest.fixture(scope="module")
def vocabulary() -> Vocabulary:
    return Vocabulary.load(OWN / "vocabulary.toml", IDS)


def test_the_worked_example_vocabulary_gives_names_aliases_and_nested_groups(vocabulary):
    assert vocabulary.classes["yorkshire_terrier"].name == "Yorkshire terrier"
    assert vocabulary.classes["school_bus"].name == "school bus"          # the folder name, "_" read as a space
    assert vocabulary.classes["labrador"].synonyms == "labrador, labrador retriever, lab"
    assert vocabulary.members("dogs") == ["chihuahua", "german_shepherd", "golden_retriever", "labrador", "poodle",
                                          "yorkshire_terrier"]   # the subgroup 'retrievers' included
    assert set(vocabulary.members("animals")) == set(vocabulary.members("dogs")) | set(vocabulary.members("insects"))
    h = vocabulary.hierarchy()
    i = h.index("golden_retriever")
    assert h.paths[i] == ("animals", "dogs", "retrievers", "golden retriever")
    assert {"animals", "dogs", "retrievers", "pets"} == set(h.ancestors[i])
    concepts = {c["names"][0]: c for c in h.concepts()}
    assert concepts["dogs"]["names"] == ["dogs", "dog", "puppies", "hounds", "dog breeds"]
    assert [h.wnids[m] for m in concepts["citrus"]["members"]] == ["lemon", "orange"]
    assert h.supercategories == {}  # every group is a concept
    assert h.descriptions[h.index("chihuahua")] == "a very small dog with large ears"


def test_a_name_given_twice_is_told_and_takes_every_class_it_names():
    text = ("[classes.cat]\naliases = ['x']\n[classes.dog]\naliases = ['X']\n"
            "[groups.pets]\nname = 'cat'\nmembers = ['dog', 'fish']\n"
            "[groups.kin]\naliases = ['family']\nmembers = ['pets']\n"
            "[groups.kin2]\nname = 'family'\nmembers = ['pets']\n")
    v = Vocabulary.from_text(text, ["cat", "dog", "fish"])
    assert len(v.notes) == 1 and "2 name(s) given to more than one" in v.notes[0]   # 'family' names one set: not told
    assert "'x': class 'cat', class 'dog'" in v.notes[0] and "'cat': class 'cat', group 'pets'" in v.notes[0]
    assert {"id": "pets", "names": ["cat"], "members": [1, 2]} in v.hierarchy().concepts()


def test_super_category_groups_and_group_names_survive_the_round_trip():
    text = ('[classes.cat]\ndescription = "a small cat"\n[groups.n01]\nname = "pets"\naliases = ["friends"]\n'
            'members = ["cat", "dog"]\n[groups."supercategory/animals"]\nname = "animals"\nsupercategory = true\n'
            'members = ["fish", "n01"]\n')
    v = Vocabulary.from_text(text, ["cat", "dog", "fish"])
    assert Vocabulary.from_text(v.to_text(), ["cat", "dog", "fish"]) == v
    h = v.hierarchy()
    assert h.supercategories == {"animals": ["fish", "cat", "dog"]}   # as listed: the first anchors examples
    assert h.concepts() == [{"id": "n01", "names": ["pets", "friends"], "members": [0, 1]}]   # not a concept
    assert h.paths[h.index("fish")] == ("fish",)                       # nor a path node


def test_no_vocabulary_names_classes_by_their_folders():
    h = Vocabulary.default(["school_bus", "my__cat", "Dog"]).hierarchy()
    assert h.names == ["school bus", "my cat", "Dog"] and h.concepts() == []


def test_the_number_every_folder_of_a_published_data_set_carries_is_no_part_of_its_names():
    cub = ["001.Black_footed_Albatross", "002.Laysan_Albatross", "200.Common_Yellowthroat"]
    assert Vocabulary.default(cub).hierarchy().names == ["Black footed Albatross", "Laysan Albatross",
                                                         "Common Yellowthroat"]
    dogs = ["n02085620-Chihuahua", "n02085782-Japanese_spaniel"]            # Stanford Dogs: a WordNet id first
    assert [w.name for w in Vocabulary.default(dogs).classes.values()] == ["Chihuahua", "Japanese spaniel"]
    # Read so in a vocabulary file that names only some classes, and in the starter a person edits.
    v = Vocabulary.from_text('[classes."002.Laysan_Albatross"]\nname = "Laysan"\n', cub)
    assert [w.name for w in v.classes.values()] == ["Black footed Albatross", "Laysan", "Common Yellowthroat"]
    assert 'name = "Common Yellowthroat"' in starter_text(cub)
    # A number only some folders have is part of their names; nor is a name that is only a number cut.
    assert Vocabulary.default(["7_up", "cola"]).hierarchy().names == ["7 up", "cola"]
    assert Vocabulary.default(["3-d_printer", "01_lathe"]).hierarchy().names == ["3-d printer", "01 lathe"]
    assert Vocabulary.default(["001", "002"]).hierarchy().names == ["001", "002"]
    assert Vocabulary.default(["n02085620", "n02085782"]).hierarchy().names == ["n02085620", "n02085782"]


@pytest.mark.parametrize("text,message", [
    ("[classes.cat\n", "not valid TOML"),
    ("colour = 1\n", "unknown key"),
    ("[classes.owl]\nname = 'owl'\n", "no folder under train/"),
    ("[classes.cat]\nnickname = 'kitty'\n", "unknown key"),
    ("[classes.cat]\nname = ''\n", "non-empty string"),
    ("[classes.cat]\nname = 'cat, kitty'\n", "comma"),
    ("[classes.cat]\naliases = 'kitty'\n", "aliases must be a list"),
    ("[classes.cat]\naliases = [3]\n", "non-empty string"),
    ("[classes.cat]\nname = '" + "x" * 161 + "'\n", "longer than 160"),
    ("[classes.cat]\naliases = [" + ", ".join(f"'a{i}'" for i in range(64)) + "]\n", "at most 63"),
    ("[groups.pets]\nmembers = []\n", "non-empty list"),
    ("[groups.pets]\naliases = ['x']\n", "non-empty list"),
    ("[groups.pets]\nmembers = ['cat', 'owl']\n", "'owl', which is neither"),
    ("[groups.pets]\nmembers = ['pets']\n", "lists itself"),
    ("[groups.a]\nmembers = ['b']\n[groups.b]\nmembers = ['a']\n", "contains itself"),
    ("[groups.pets]\nmembers = ['cat']\nsupercategory = 'yes'\n", "true or false"),
    ("[groups.pets]\nmembers = ['cat']\nname = 'a, b'\n", "comma"),
    ("[groups.pets]\nmembers = ['cat']\ndescription = 7\n", "non-empty string"),
    ("[classes.cat]\nname = 'c\u202et'\n", "invisible formatting character"),   # bidi override: looks like 'ct'
    ("[classes.cat]\naliases = ['\u200b']\n", "invisible formatting character"),
    ("[classes.cat]\nname = 1979-05-27\n", "non-empty string"),
    ("a = " + "[" * 100_000 + "]" * 100_000, "not valid TOML"),   # nesting past Python's stack: typed
    ("[classes.cat]\nname = 'c\x00t'\n", "not valid TOML"),
])
def test_a_faulty_vocabulary_is_a_data_error_naming_the_fault(text, message):
    with pytest.raises(DataError, match=message):
        Vocabulary.from_text(text, ["cat", "dog", "fish"])


def test_a_vocabulary_file_that_is_not_utf8_or_missing_is_a_data_error(tmp_path):
    (tmp_path / "v.toml").write_bytes(b"\xff\xfe[classes]")
    with pytest.raises(DataError, match="cannot read"):
        Vocabulary.load(tmp_path / "v.toml", ["cat"])
    with pytest.raises(DataError, match="not found"):
        Vocabulary.load(tmp_path / "none.toml", ["cat"])


def test_the_exporter_writes_the_display_name_and_the_reader_splits_older_names():
    assert class_entry("n1", "ladybug, ladybeetle, lady beetle", ["insect", "ladybug"], "a small beetle") == {
        "id": "n1", "name": "ladybug", "aliases": ["ladybeetle", "lady beetle"], "path": ["insect", "ladybug"],
        "description": "a small beetle"}
    assert display_name("Egyptian cat") == ("Egyptian cat", [])
    assert display_name(" , a , b\u00a0,,") == ("a", ["b\u00a0"])   # ASCII spaces only (Bundle.java too)
    assert display_name(",") == (",", [])


def test_the_resolver_reads_the_vocabulary_as_a_user_writes(vocabulary):
    """Through the exporter's classes.json rows and concepts, with each class and group on its own axis."""
    h = vocabulary.hierarchy()
    rows = [class_entry(w, n, p, d) for w, n, p, d in zip(h.wnids, h.names, h.paths, h.descriptions, strict=True)]
    classes = [ClassInfo(r["id"], r["name"], r["path"], r["aliases"]) for r in rows]
    concepts = [Concept(c["id"], c["names"], c["members"]) for c in h.concepts()]
    dim = len(classes) + len(concepts)
    eye = np.eye(dim, dtype=np.float32)
    resolver = TaskResolver(classes, eye[:len(classes)], {}, lambda text: eye[0], concepts, eye[len(classes):])

    def ids(text: str) -> set[str]:
        return {h.wnids[i] for i in resolver.resolve(text, TaskOptions(min_classes=1)).classes}

    assert ids("retrievers") == {"labrador", "golden_retriever"}
    assert ids("puppy") == set(vocabulary.members("dogs"))           # a group's alias in the singular
    assert ids("insetcs") == set(vocabulary.members("insects"))      # one edit from a group's name
    assert ids("yorkie, lab") == {"yorkshire_terrier", "labrador"}   # aliases
    assert ids("trains, limo") == {"bullet_train", "limousine"}      # 'train' ends "bullet train": a kind of it
    assert MISSING in resolver.resolve("trains", TaskOptions(min_classes=1)).how[0]   # ... and no class itself
    assert ids("Yellow Things") == {"banana", "lemon", "school_bus", "sulphur_butterfly"}
    task = resolver.resolve("cars, owl", TaskOptions(min_classes=1))
    assert {h.wnids[i] for i in task.classes} == set(vocabulary.members("cars")) and "owl" in task.how[1]


def test_presets_are_fitted_to_the_class_count_and_say_so():
    config, notes = fit_to_classes(PRESETS["demo"], 24)
    assert (config.task_k, config.stage2_shard_size, config.num_bases) == (6, 12, 8) and len(notes) == 3
    assert "stage2_shard_size 60 -> 12 for 24 classes" in notes[1]
    kept, notes = fit_to_classes(PRESETS["demo"], 24, fixed={"task_k"})
    assert kept.task_k == 20 and len(notes) == 2                      # what the user set stays
    assert fit_to_classes(PRESETS["bench"], 200) == (PRESETS["bench"], [])
    with pytest.raises(ValueError, match="at least 2"):
        fit_to_classes(PRESETS["demo"], 1)


def test_a_starter_vocabulary_is_written_for_any_folder_names_and_loads(tmp_path, capsys):
    from trainer.__main__ import main

    names = ["school_bus", "my cat", "a,b", 'q"x', "back\\slash", "émile"]
    for name in names:
        (tmp_path / "train" / name).mkdir(parents=True)
    assert main(["vocabulary", "--data", str(tmp_path)]) == 0
    loaded = Vocabulary.load(tmp_path / "vocabulary.toml", names)
    assert loaded.classes["a,b"].name == "a b" and loaded.classes["émile"].name == "émile"
    assert main(["vocabulary", "--data", str(tmp_path)]) == 2   # never overwrites
    assert "exists" in capsys.readouterr().err
    assert main(["vocabulary", "--data", str(tmp_path / "nowhere")]) == 2
