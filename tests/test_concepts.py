"""Concepts (format 5): the hierarchy's hypernyms with all their names, matched by name (rule 3) and by
text similarity (rule 5) in sdk/text/resolver/; "and"/"or" lists (rule 2); and where concepts come from
(trainer/data/hierarchy.py)."""

import numpy as np

from sdk.format.bundle import ClassInfo, Concept
from sdk.text.resolver import CONCEPT_MARGIN, TaskOptions, TaskResolver
from trainer.data.wordnet import wordnet_vocabulary

CLASSES = [ClassInfo(f"n{i}", name, ["entity", *path, name]) for i, (name, path) in enumerate([
    ("bikini", ["clothing", "garment"]), ("kimono", ["clothing", "garment"]), ("sock", ["clothing", "hosiery"]),
    ("goose", ["animal", "bird"]), ("tabby", ["animal", "cat"]), ("Chihuahua", ["animal", "dog"]),
    ("poodle", ["animal", "dog"]), ("orange", ["food", "fruit"]), ("lion", ["animal", "cat"])])]
CONCEPTS = [Concept("c0", ["clothing", "wear", "wearable"], [0, 1, 2]),
            Concept("c1", ["animal", "beast"], [3, 4, 5, 6, 8]),
            Concept("c2", ["domestic animal"], [4, 5, 6]),
            Concept("c3", ["dog", "domestic dog"], [5, 6]),
            Concept("c4", ["vessel"], [0, 7]),
            Concept("c5", ["vessel", "watercraft"], [1, 2])]
DIM = 16


def unit(*pairs: tuple[int, float]) -> np.ndarray:
    v = np.zeros(DIM, np.float32)
    for axis, value in pairs:
        v[axis] = value
    return v / np.linalg.norm(v)


def resolver(phrases: dict[str, np.ndarray], supercategories=None) -> TaskResolver:
    classes = np.stack([unit((i, 1.0)) for i in range(len(CLASSES))])
    # Concept c sits on its own axis 9 + c, a little towards its members, so a text on that axis is
    # nearer the concept than any class.
    rows = np.stack([unit((9 + c, 1.0), *[(m, 0.2) for m in concept.members]) for c, concept in enumerate(CONCEPTS)])
    return TaskResolver(CLASSES, classes, supercategories or {}, lambda text: phrases[text], CONCEPTS, rows)


# Between "dog" (axis 12), "domestic animal" (11) and "animal" (10), nearest "dog".
PETS = unit((10, 1.05), (11, 1.0), (12, 1.0), (5, 0.5), (6, 0.5))


def chosen(r: TaskResolver, description: str, **options) -> set[int]:
    return set(r.resolve(description, TaskOptions(min_classes=1, **options)).classes.tolist())


def test_any_name_of_a_concept_is_a_group_and_primary_names_win():
    r = resolver({})
    assert chosen(r, "clothing") == chosen(r, "wear") == {0, 1, 2}   # "wear": a synonym
    assert chosen(r, "wearables") == {0, 1, 2}                                             # plural made singular
    assert chosen(r, "domestic dogs") == {5, 6}
    assert chosen(r, "vessels") == {0, 1, 2, 7}   # two concepts named "vessel": both
    assert chosen(r, "watercraft") == {1, 2}
    # A path node that is no concept still names its classes; a super-category beats every other name.
    assert chosen(r, "garment") == {0, 1} and chosen(r, "hosiery") == {2}
    r = resolver({}, supercategories={"clothing": [0]})
    assert chosen(r, "clothing") == {0}


def test_without_concepts_path_nodes_are_the_groups_as_before():
    r = TaskResolver(CLASSES, np.eye(len(CLASSES), DIM, dtype=np.float32), {}, lambda text: None)
    assert chosen(r, "dog") == {5, 6} and chosen(r, "animal") == {3, 4, 5, 6, 8}
    assert r.concepts == [] and r.concept_embeddings.shape == (0, DIM)


def test_text_nearer_a_concept_than_any_class_takes_the_concept():
    r = resolver({"things to put on": unit((9, 1.0), (0, 0.5)), "an orange thing": unit((7, 1.0), (9, 0.3)),
                  "my pets": PETS})
    task = r.resolve("things to put on", TaskOptions(min_classes=1))
    assert set(task.classes.tolist()) == {0, 1, 2} and "concept 'clothing'" in task.how[0]
    assert chosen(r, "an orange thing") == {7}               # a class is nearer: rule 4 as before
    # "dog" is nearest; "domestic animal" (within the margin, 1.5x its size) joins; "animal" (within the
    # margin too, but 2.5x) does not.
    scores = r.concept_embeddings @ PETS
    assert scores[3] > scores[1] > scores[2] > scores[3] - CONCEPT_MARGIN
    assert chosen(r, "my pets") == {4, 5, 6}


def test_concept_matching_respects_max_classes_and_the_margin():
    near = {"pets": PETS, "beasts": unit((10, 1.0), (3, 0.5))}
    r = resolver(near)
    assert chosen(r, "beasts") == {3, 4, 5, 6, 8}
    # A concept larger than max_classes is not matched by similarity (its name still is: rule 3).
    beasts = r.resolve("beasts", TaskOptions(min_classes=1, max_classes=3))
    assert "concept" not in beasts.how[0]
    assert chosen(r, "beast", max_classes=3) == {3, 4, 5, 6, 8}
    # A near concept that would take the task past max_classes stays out.
    assert chosen(r, "pets", max_classes=2, missing="nearest") == {5, 6}   # one word, no name: rule 4a
    # Only concepts within CONCEPT_MARGIN of the best join.
    far = unit((10, 0.6), (11, 0.6), (12, 1.0), (5, 0.5), (6, 0.5))
    rows = r.concept_embeddings
    assert far @ rows[3] - far @ rows[2] > CONCEPT_MARGIN > near["pets"] @ rows[3] - near["pets"] @ rows[2]
    assert chosen(resolver({"pets": far}), "pets", missing="nearest") == {5, 6}


def test_and_or_lists_are_resolved_item_by_item_unless_the_whole_is_a_name():
    r = resolver({}, supercategories={"socks and shoes": [2]})
    assert chosen(r, "clothing and dogs") == {0, 1, 2, 5, 6}
    assert chosen(r, "goose or tabby") == {3, 4}
    assert chosen(r, "dog & goose") == {3, 5, 6}
    assert chosen(r, "socks and shoes") == {2}                 # one super-category, not two items
    # nothing but a conjunction: one phrase (a word no name holds: rule 4a, here with its nearest class)
    assert chosen(resolver({"and": unit((3, 1.0))}), "and", missing="nearest") == {3}


def test_hierarchy_concepts_use_all_ancestors_and_their_names():
    tsv = ("wnid\tname\tpath\tancestors\n"
           "n1\tbikini\tentity > clothing > bikini\tn0,n9,n8\n"
           "n2\tsock\tentity > clothing > sock\tn0,n9\n"
           "n3\tgoose\tentity > bird > goose\tn0,n7\n")
    names = "n0\tentity\nn9\tclothing, wear\nn8\tswimwear, bathing suit\nn7\tbird\nn5\tunused\n"
    ids = ["n1", "n2", "n3"]
    h = wordnet_vocabulary(ids, tsv, words=names, glosses=False, collections=False).hierarchy()
    # n0 holds every class and n8, n7 a single one: none is a concept.
    assert h.concepts() == [{"id": "n9", "names": ["clothing", "wear"], "members": [0, 1]}]
    assert h.subset(["n2", "n1"]).concepts() == []             # all classes: no longer a concept
    plain = wordnet_vocabulary(ids, tsv, glosses=False, collections=False).hierarchy()   # no names: the path nodes
    assert plain.concepts() == [{"id": "clothing", "names": ["clothing"], "members": [0, 1]}]
