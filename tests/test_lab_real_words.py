"""lab/real_words.py, the measurement behind rule 3c's WordNet words (docs/results/experiments.md, "Real words are
no typos"): its edits and its count of what the spelling rule would correct."""

import numpy as np

from lab.real_words import corrected, edits
from sdk.format.bundle import ClassInfo
from sdk.text.resolver.pipeline import TaskResolver


def test_edits_are_every_string_one_edit_away():
    found = edits("cat")
    assert {"act", "ct", "cart", "bat", "cats"} <= found and "cat" not in found and "tac" not in found
    assert "ba" in edits("ab") and "abcd" not in edits("ab") and "" not in edits("ab")   # two edits away, none


def test_corrected_lists_what_the_spelling_rule_would_read_as_a_name():
    classes = [ClassInfo("n1", "poodle", ["dog", "poodle"]), ClassInfo("n2", "beagle", ["dog", "beagle"])]
    resolver = TaskResolver(classes, np.eye(2, dtype=np.float32), {}, None)
    assert corrected(resolver, ["poodel", "poodels", "zebra", "poodle", "dogs"]) == [("poodel", "poodle"),
                                                                                  ("poodels", "poodle")]
