"""lab/exclusions.py, the probe behind rules 3b's wider words and 2c (docs/results/experiments.md, "What a phrase leaves
out, in more words"): its expected classes are classes of the bundles it is scored on, and each row holds a cut the
resolver reads, so a mistyped row cannot pass as a miss or a hit."""

import json
import re
from pathlib import Path

from lab.exclusions import CONJOINED, PROBE
from sdk.text.resolver.composition import exclusion_cut

SOURCES = {"heldout": "heldout_data", "heldout-b": "heldout_b_data"}
SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def test_every_expected_class_is_one_of_its_bundle():
    for probe in (PROBE, CONJOINED):
        for bundle, rows in probe.items():
            for text, expected in rows.items():
                assert expected and len(set(expected)) == len(expected), text
                if bundle == "tiny-imagenet":
                    assert all(re.fullmatch(r"n\d{8}", c) for c in expected), text
                else:
                    folders = json.loads((SCRIPTS / SOURCES[bundle] / "source_classes.json").read_text())["classes"]
                    assert set(expected) <= set(folders), (text, set(expected) - set(folders))


def test_every_row_holds_an_exclusion_the_resolver_cuts():
    for probe in (PROBE, CONJOINED):
        for rows in probe.values():
            for text in rows:
                first = text.split(" and ")[0].split(" or ")[0]
                assert exclusion_cut(first) is not None, text
