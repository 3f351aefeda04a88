"""Issue 72's held-out own-data set (scripts/heldout_data) is what the issue asks for: at least 30 plain-named
classes from other families than the worked example's, a vocabulary of group names only, and at least 60
queries whose expected classes all exist."""

import json
from pathlib import Path

import tomllib

from trainer.data.vocabulary import Vocabulary

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
HELDOUT, WORKED = SCRIPTS / "heldout_data", SCRIPTS / "own_data"


def test_the_held_out_set_is_other_classes_with_a_minimal_vocabulary_and_enough_queries():
    classes = json.loads((HELDOUT / "source_classes.json").read_text())["classes"]
    worked = json.loads((WORKED / "source_classes.json").read_text())["classes"]
    assert len(classes) >= 30 and set(classes.values()).isdisjoint(worked.values())
    assert all(name.islower() and " " not in name for name in classes)          # plain folder names
    text = (HELDOUT / "vocabulary.toml").read_text()
    raw = tomllib.loads(text)
    assert set(raw) == {"groups"} and all(set(g) == {"members"} for g in raw["groups"].values())  # no aliases
    vocabulary = Vocabulary.from_text(text, sorted(classes), str(HELDOUT / "vocabulary.toml"))
    assert list(vocabulary.groups) == list(raw["groups"]) and set(vocabulary.classes) == set(classes)
    spec = json.loads((HELDOUT / "queries.json").read_text())
    assert len(spec["groups"]) + len(spec["phrasings"]) + len(spec["missing"]) >= 60
    for kind in ("groups", "phrasings"):
        for text_, expected in spec[kind].items():
            assert all(e in spec["sets"] or e in classes for e in expected), text_
    assert set().union(*spec["missing"].values()) <= set(raw["groups"])
    assert not set(spec["missing"]) & {n.replace("_", " ") for n in classes}
