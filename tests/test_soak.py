"""A short slice of the concurrency soak (scripts/soak.py; the minutes-long run is in docs/results/soak.md)."""

from scripts.soak import OPERATIONS, soak_process
from sdk.engines import int8_session


def test_threads_doing_every_operation_at_once_match_the_serial_results(tiny_bundle, monkeypatch):
    monkeypatch.setattr(int8_session, "MIN_SPLIT_BYTES", 0)   # int8 sessions in two halves, as at full width
    result = soak_process(str(tiny_bundle), seconds=6, threads=4, seed=0)
    assert result["crashes"] == 0, result["crash_examples"]
    assert result["mismatches"] == 0, result["mismatched"]
    assert set(result["operations"]) == set(OPERATIONS)   # every operation ran at least once
    assert result["rss_mb_peak"] > 0
