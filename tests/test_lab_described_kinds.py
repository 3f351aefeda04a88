"""lab/described_kinds.py, the description rule measured and not shipped (issue 72, part 3): on a hand-made
table, it narrows a described kind to the class its description reads as, keeps plural phrases and bundles
without descriptions as they were, and gives the resolver back unpatched."""

import numpy as np

from lab.described_kinds import (
    candidate_scores,
    described_kinds,
    describes_one,
    narrowed,
    text_scores,
    without_word_rule,
)
from sdk.format.bundle import ClassInfo, Concept
from sdk.text.resolver import TaskOptions, TaskResolver

CLASSES = [ClassInfo("n1", "beagle", ["dog", "beagle"], [], "a small hound with long ears"),
           ClassInfo("n2", "poodle", ["dog", "poodle"], [], "a dog with a curly coat"),
           ClassInfo("n3", "labrador", ["dog", "labrador"]),
           ClassInfo("n4", "bee", ["insect", "bee"])]


def unit(*values: float) -> np.ndarray:
    v = np.array(values, np.float32)
    return v / np.linalg.norm(v)


PHRASES = {"beagle": unit(1, 0, 0, 0, 0), "poodle": unit(0, 1, 0, 0, 0), "labrador": unit(0, 0, 1, 0, 0),
           "bee": unit(0, 0, 0, 1, 0), "dog": unit(1, 1, 1, 0, 0),
           "beagle: a small hound with long ears": unit(1, 0, 0, 0, 0.5),
           "poodle: a dog with a curly coat": unit(0, 1, 0, 0, 0.5),
           "a dog with curly fur": unit(0.5, 1, 0.5, 0, 0.3), "my dogs": unit(1, 1, 1, 0, 0.1)}


def resolver(classes=CLASSES) -> TaskResolver:
    return TaskResolver(classes, np.stack([PHRASES[c.name] for c in classes]), {}, PHRASES.__getitem__,
                        [Concept("c1", ["dog"], [0, 1, 2])], PHRASES["dog"][None])


def test_a_described_kind_is_an_article_and_two_more_words():
    assert describes_one("a tiny dog") and describes_one("an insect that stings")
    assert not any(map(describes_one, ("a dog", "my dogs", "tiny dogs", "the tiny dog")))


def test_the_rule_narrows_a_described_kind_while_patched_and_only_then():
    options = TaskOptions(min_classes=1)
    with without_word_rule():    # the resolver of its day: the shipped rule 6 (by shared words) off
        assert resolver().resolve("a dog with curly fur", options).classes.tolist() == [0, 1, 2]
    with described_kinds("mean"):
        task = resolver().resolve("a dog with curly fur", options)
        assert task.classes.tolist() == [1] and "then by their descriptions (mean): 'poodle'" in task.how[0]
        assert resolver().resolve("my dogs", options).classes.tolist() == [0, 1, 2]
        plain = [ClassInfo(c.id, c.name, c.path) for c in CLASSES]   # no descriptions: no narrowing
        assert resolver(plain).resolve("a dog with curly fur", options).classes.tolist() == [0, 1, 2]
    with without_word_rule():
        assert resolver().resolve("a dog with curly fur", options).classes.tolist() == [0, 1, 2]
    task = resolver().resolve("a dog with curly fur", options)    # unpatched: the shipped rule, by "curly"
    assert task.classes.tolist() == [1] and "described: kept 'poodle'" in task.how[0]


def test_candidates_within_the_margin_all_stay():
    assert narrowed(np.array([0.9, 0.5, 0.4]), [0, 1, 2], CLASSES) == [0]
    assert narrowed(np.array([0.9, 0.88, 0.4]), [0, 1, 2], CLASSES) == [0, 1]     # within DESCRIPTION_MARGIN
    assert narrowed(np.array([0.9, 0.88]), [0, 1], CLASSES) is None               # every candidate stays
    assert narrowed(np.array([0.9, 0.1]), [2, 3], CLASSES) is None                # neither has a description


def test_each_resolver_embeds_a_class_text_once_and_the_scorings_differ():
    calls = []

    def embed(text: str) -> np.ndarray:
        calls.append(text)
        return PHRASES[text]

    r = TaskResolver(CLASSES, np.stack([PHRASES[c.name] for c in CLASSES]), {}, embed,
                     [Concept("c1", ["dog"], [0, 1, 2])], PHRASES["dog"][None])
    names = r.embeddings @ PHRASES["a dog with curly fur"]
    mean = candidate_scores(r, [0, 1], names, PHRASES["a dog with curly fur"], "mean")
    assert calls.count("poodle: a dog with a curly coat") == 1
    candidate_scores(r, [0, 1], names, PHRASES["a dog with curly fur"], "mean")
    assert calls.count("poodle: a dog with a curly coat") == 1                  # remembered for this resolver
    by_name = candidate_scores(r, [0, 1], names, PHRASES["a dog with curly fur"], "name")
    assert np.allclose(mean, 0.5 * (by_name + text_scores(r, [0, 1], PHRASES["a dog with curly fur"], "mean")))
