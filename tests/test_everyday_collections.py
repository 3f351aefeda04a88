"""Everyday collections (trainer/data/everyday_collections.py): hand-written kinds of things that the WordNet
conversion writes into Tiny ImageNet's vocabulary as groups (the bundle's concepts), so that "farm animals"
finds the hog, the ox and the goose, which no WordNet hypernym holds together."""

import json

import pytest

import trainer.data.everyday_collections as everyday
from sdk.format.bundle import ClassInfo, Concept
from sdk.text.resolver import TaskOptions, TaskResolver
from trainer.data.everyday_collections import (
    FACET_PREFIX,
    FACETS_FILE,
    ID_PREFIX,
    collection_groups,
    everyday_groups,
    read_collections,
)
from trainer.data.vocabulary import ClassWords, Vocabulary

FARM = {"n02395406": "hog", "n02403003": "ox", "n01855672": "goose"}
SEA = {"n01910747": "jellyfish", "n01983481": "American lobster", "n02074367": "dugong"}
OTHERS = {"n02085620": "Chihuahua", "n04285008": "sports car", "n07747607": "orange", "n02129165": "lion",
          "n04133789": "sandal", "n03100240": "convertible"}


def write(tmp_path, collections) -> object:
    path = tmp_path / "collections.json"
    path.write_text(json.dumps({"collections": collections}))
    return path


def test_shipped_collections_are_well_formed():
    collections = read_collections()
    assert len(collections) >= 30
    for c in collections:
        assert len(set(c["members"])) == len(c["members"]) >= 2
    names = [n for c in collections for n in c["names"]]
    assert len(names) == len(set(names))


def test_shipped_facets_are_well_formed_and_share_no_name_with_a_collection():
    facets = read_collections(FACETS_FILE)
    assert len(facets) >= 80
    facet_names = {n for c in facets for n in c["names"]}
    assert not facet_names & {n for c in read_collections() for n in c["names"]}
    groups = everyday_groups(list(FARM))
    assert [g.id for g in groups if g.id.startswith(FACET_PREFIX)]  # "things on a farm" holds all three
    assert [g.id for g in groups if g.id.startswith(ID_PREFIX)]


def test_facets_holding_a_collection_name_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(everyday, "FACETS_FILE",
                        write(tmp_path, [{"names": ["things on a farm", "livestock"], "members": FARM}]))
    with pytest.raises(ValueError, match="both a collection's and a facet's"):
        everyday_groups(list(FARM))


def concepts(ids: list[str], groups) -> list[dict]:
    """The bundle's concepts of a vocabulary holding these groups."""
    return Vocabulary({c: ClassWords(c, c) for c in ids}, {g.id: g for g in groups}).hierarchy().concepts()


def test_one_concept_per_name_with_the_members_the_data_has(tmp_path):
    path = write(tmp_path, [{"names": ["farm animals", "livestock"], "members": {**FARM, "n09999999": "absent"}},
                            {"names": ["sea animals"], "members": {"n01910747": "jellyfish", "n09999998": "absent"}}])
    ids = list(OTHERS) + list(FARM) + ["n01910747"]
    farm = sorted(ids.index(w) for w in FARM)
    assert concepts(ids, collection_groups(ids, path)) == [  # the sea collection holds one class only: left out
        {"id": ID_PREFIX + "farm animals", "names": ["farm animals", "livestock"], "members": farm},
        {"id": ID_PREFIX + "livestock", "names": ["livestock", "farm animals"], "members": farm}]


@pytest.mark.parametrize("collections, problem", [
    ([{"names": ["a b"], "members": {"n02395406": "", "n02403003": ""}},
      {"names": ["c", "a b"], "members": {"n02395406": "", "n02403003": ""}}], "used by two collections"),
    ([{"names": ["pets"], "members": {"n02395406": "", "dog": ""}}], "WordNet ids"),
    ([{"names": ["pets"], "members": {"n02395406": ""}}], "WordNet ids"),
    ([{"names": ["Pets"], "members": {"n02395406": "", "n02403003": ""}}], "lower-case"),
    ([{"names": [], "members": {"n02395406": "", "n02403003": ""}}], "lower-case"),
])
def test_a_malformed_collections_file_is_refused(tmp_path, collections, problem):
    with pytest.raises(ValueError, match=problem):
        read_collections(write(tmp_path, collections))


@pytest.fixture(scope="module")
def encoder():
    from export.text_encoder import cached_text_encoder
    from sdk.text.encoder import PROMPTS, TextEncoder

    enc = TextEncoder.from_dir(cached_text_encoder())
    return enc, PROMPTS


def test_collections_resolve_by_name_and_by_meaning(encoder):
    """With the shipped collections and the real text encoder: a collection's names select it (rule 3), a
    paraphrase nearer it than any class takes it (rule 5), and without collections neither happens."""
    enc, prompts = encoder
    table = {**OTHERS, **FARM, **SEA}
    ids = list(table)
    classes = [ClassInfo(w, name, ["entity", name]) for w, name in table.items()]
    rows = concepts(ids, collection_groups(ids))
    bundle_concepts = [Concept(r["id"], r["names"], r["members"]) for r in rows]
    with_collections = TaskResolver(classes, enc.embed_class_names(list(table.values()), prompts), {},
                                    lambda text: enc.embed_class_names([text], prompts[:1])[0], bundle_concepts,
                                    enc.embed_class_names([r["names"][0] for r in rows], prompts))
    without = TaskResolver(classes, with_collections.embeddings, {}, with_collections.embed_phrase)
    farm, sea = {ids.index(w) for w in FARM}, {ids.index(w) for w in SEA}

    def chosen(resolver, text):
        return set(resolver.resolve(text, TaskOptions(min_classes=1)).classes.tolist())

    assert chosen(with_collections, "livestock") == chosen(with_collections, "farm animals") == farm
    assert chosen(with_collections, "animals on a farm") == farm
    assert chosen(with_collections, "creatures of the ocean") == sea
    assert chosen(without, "animals on a farm") != farm and chosen(without, "creatures of the ocean") != sea
    assert ids.index("n04285008") in chosen(with_collections, "sports car")  # a class name stays a class
