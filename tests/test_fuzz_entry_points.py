"""A slice of the entry-points harness (scripts/fuzz_entry_points.py; the 2,000-case run is
docs/results/entry_points.md): every family's hostile cases end typed or accepted and checked."""

import json

import numpy as np
import pytest

from scripts import fuzz_entry_points


def test_hostile_entry_point_cases_end_typed_or_checked(tiny_bundle, tiny_companion, tmp_path):
    out = tmp_path / "entry"
    # One of each family: 10.5 s here alone. 42 drawn in proportion (the slice before 2026-11-30) took 37 s, 20 of
    # them missed 'cli', and two of each took 42 s (a .pte export among them); the scale run is the script's.
    fuzz_entry_points.main(["--cases", str(len(fuzz_entry_points.FAMILIES)), "--each-family", "1",
                            "--bundle", str(tiny_bundle), "--companion", str(tiny_companion),
                            "--seed", "5", "--timeout", "120", "--workers", "2", "--out", str(out)])
    report = json.loads(out.with_suffix(".json").read_text())
    counts = report["entry_points"]
    assert counts["cases"] == len(fuzz_entry_points.FAMILIES)
    assert counts["escapes"] == counts["hangs"] == counts["crashes"] == 0, report["failures"]
    assert counts["silent_wrong"] == counts["partial_files"] == 0, report["failures"]
    assert counts["typed"] > 0 and counts["ok"] > 0   # the slice reached both refusals and accepted inputs
    signed = ("companion_signed", "companion_forged")   # companion cases read with trusted keys, reported apart
    reached = {"companion" if f in signed else f for f, outcomes in report["families"].items() if outcomes}
    assert reached == set(fuzz_entry_points.FAMILIES)


def test_the_harness_calls_wrong_probabilities_and_leftovers_failures(tmp_path):
    assert fuzz_entry_points.checked_probabilities(np.full((2, 3), 1 / 3))["outcome"] == "ok"
    assert fuzz_entry_points.checked_probabilities(np.full((2, 3), np.nan))["outcome"] == "silent_wrong"
    assert fuzz_entry_points.checked_probabilities(np.full((2, 3), 1 / 3), reference=np.eye(2, 3))["outcome"] \
        == "silent_wrong"
    (tmp_path / "mine.txt").write_text("x")
    (tmp_path / "left").mkdir()
    assert fuzz_entry_points.leftovers(tmp_path, {"made": ["mine.txt"]}) == ["left"]


@pytest.mark.parametrize("family", list(fuzz_entry_points.FAMILIES))
def test_cases_are_drawn_reproducibly_for_every_family(family):
    a = fuzz_entry_points.draw(family, np.random.default_rng(3))
    assert a == fuzz_entry_points.draw(family, np.random.default_rng(3)) and a["family"] == family


def test_signed_and_forged_companions_under_trusted_keys(tiny_bundle, tiny_companion, tmp_path):
    """The companion family alone: signed cases are read with trusted_keys, and not one forged one loads."""
    out = tmp_path / "companion"
    fuzz_entry_points.main(["--cases", "16", "--families", "companion", "--bundle", str(tiny_bundle),
                            "--companion", str(tiny_companion), "--seed", "2", "--workers", "1", "--out", str(out)])
    report = json.loads(out.with_suffix(".json").read_text())
    assert set(report["families"]) <= {"companion", "companion_signed", "companion_forged"}
    assert report["companion_forged"]["cases"] > 0 and report["companion_forged"]["loaded"] == 0, report["failures"]
    assert sum(report["families"].get("companion_signed", {}).values()) > 0
    counts = report["entry_points"]
    assert counts["escapes"] == counts["hangs"] == counts["crashes"] == counts["silent_wrong"] == 0, report["failures"]


def test_a_short_slice_takes_each_family_first_and_a_seed_its_own_cases():
    names = list(fuzz_entry_points.FAMILIES)
    slice_ = fuzz_entry_points.cases(2 * len(names) + 3, seed=5, each_family=2)
    assert [c["family"] for c in slice_[:2 * len(names)]] == [n for n in names for _ in range(2)]
    assert slice_ == fuzz_entry_points.cases(2 * len(names) + 3, seed=5, each_family=2)
    assert fuzz_entry_points.cases(12, seed=5) != fuzz_entry_points.cases(12, seed=6)
