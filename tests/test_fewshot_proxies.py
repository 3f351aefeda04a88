"""The proxy comparison of scripts/bench_fewshot.py (issue 14): the leave-one-out prototype scores and
the guarded rule are what their docstrings say."""

import numpy as np
import pytest

from sdk.prototypes import l2_normalize


def test_leave_one_out_prototype_similarities_match_recomputing_each_prototype(load_script):
    bench = load_script("bench_fewshot")
    rng = np.random.default_rng(0)
    features, labels = rng.normal(size=(12, 5)), np.repeat(np.arange(4), 3)
    fast = bench.loo_prototype_similarities(features, labels, 4)
    unit = l2_normalize(features)
    for i in range(len(labels)):
        keep = np.arange(len(labels)) != i
        protos = np.stack([unit[keep & (labels == k)].mean(0) for k in range(4)])
        np.testing.assert_allclose(fast[i], l2_normalize(protos) @ unit[i], atol=1e-9)


def test_rank_correlation_uses_average_ranks(load_script):
    bench = load_script("bench_fewshot")
    assert bench.rank_correlation([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert bench.rank_correlation([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert bench.rank_correlation([1, 1, 2], [1, 2, 3]) == pytest.approx(np.sqrt(3) / 2)  # ranks 1.5, 1.5, 3
    assert np.isnan(bench.rank_correlation([1, 1, 1], [1, 2, 3]))


def test_proxy_picks_name_the_sdk_rule_and_the_plain_maximum(load_script):
    bench = load_script("bench_fewshot")
    rng = np.random.default_rng(1)
    labels = np.repeat(np.arange(5), 5)
    separated = np.eye(8)[labels] * 5 + 0.1 * rng.normal(size=(25, 8))
    order = ["mixer", "basis"]
    picks, loo_1nn = bench.proxy_picks({"mixer": rng.normal(size=(25, 8)), "basis": separated}, labels, order)
    assert picks["most_accurate_1nn"] == "basis" and picks["sdk"] == "basis"  # 25 right against about 5
    assert loo_1nn[1] == 1.0 and loo_1nn[0] < 0.5  # the proxy's own scores, in `order`
    # Four examples better (b=4, c=0: z 2.0, not above SWITCH_Z) is not evidence: the plain maximum switches,
    # the SDK does not.
    worse = separated.copy()
    worse[0] = separated[5]  # example 0 (class 0) now sits on an example of class 1: 0, 5, 6 and 9 go wrong
    picks, loo_1nn = bench.proxy_picks({"mixer": worse, "basis": separated}, labels, order)
    assert loo_1nn == [21 / 25, 1.0]
    assert picks["most_accurate_1nn"] == "basis" and picks["sdk"] == "mixer"
    assert set(picks) == {"sdk", "most_accurate_1nn", "loo_prototype", "loo_prototype_nll"}


def test_unseen_tasks_are_neighbourhoods_of_held_out_classes_when_more_are_held_out_than_a_task_holds(load_script):
    from trainer.config import PRESETS
    from trainer.data.holdout import held_out_classes
    from trainer.run import open_data

    bench = load_script("bench_fewshot")
    hierarchy = open_data(PRESETS["tiny"], progress=False).hierarchy
    held = held_out_classes(hierarchy, 12)
    among = hierarchy.subset(held)
    sets = bench.unseen_task_sets(hierarchy, held, 5, 24, seed=0)
    assert len(sets) == 24
    for t, task in enumerate(sets):
        anchor = t % len(held)
        assert len(set(task.tolist())) == 5 and anchor in task
        others = np.setdiff1d(np.arange(len(held)), task)
        assert among.distances[anchor, task].max() <= among.distances[anchor, others].min()
    assert len({tuple(s) for s in sets}) > 1
    few = bench.unseen_task_sets(hierarchy, held[:5], 5, 3, seed=0)  # the protocol: all of them
    assert all(np.array_equal(s, np.arange(5)) for s in few)
