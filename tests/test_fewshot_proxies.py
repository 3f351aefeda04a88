"""The proxy comparison of scripts/bench_fewshot.py (issue 14): the leave-one-out prototype scores and
the guarded rule are what their docstrings say."""

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from scripts import bench_fewshot as bench_fewshot_module
from sdk.prototypes import l2_normalize, leave_one_out_prototype_similarities


def test_leave_one_out_prototype_similarities_match_recomputing_each_prototype():
    rng = np.random.default_rng(0)
    features, labels = rng.normal(size=(12, 5)), np.repeat(np.arange(4), 3)
    fast = leave_one_out_prototype_similarities(features, labels, 4)
    unit = l2_normalize(features)
    for i in range(len(labels)):
        keep = np.arange(len(labels)) != i
        protos = np.stack([unit[keep & (labels == k)].mean(0) for k in range(4)])
        np.testing.assert_allclose(fast[i], l2_normalize(protos) @ unit[i], atol=1e-9)


def test_rank_correlation_uses_average_ranks():
    bench = bench_fewshot_module
    assert bench.rank_correlation([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert bench.rank_correlation([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert bench.rank_correlation([1, 1, 2], [1, 2, 3]) == pytest.approx(np.sqrt(3) / 2)  # ranks 1.5, 1.5, 3
    assert np.isnan(bench.rank_correlation([1, 1, 1], [1, 2, 3]))


def test_proxy_picks_name_the_sdk_rule_and_the_plain_maximum():
    bench = bench_fewshot_module
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


def test_unseen_tasks_are_neighbourhoods_of_held_out_classes_when_more_are_held_out_than_a_task_holds():
    from trainer.config import PRESETS
    from trainer.data.holdout import held_out_classes
    from trainer.run import open_data

    bench = bench_fewshot_module
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


def test_torch_leave_one_out_log_likelihood_matches_the_numpy_similarities():
    import torch

    bench = bench_fewshot_module
    rng = np.random.default_rng(2)
    features, labels = rng.normal(size=(20, 6)), np.repeat(np.arange(4), 5)
    logits = leave_one_out_prototype_similarities(features, labels, 4) * bench.DEFAULT_TEMPERATURE
    expected = (logits - np.log(np.exp(logits).sum(1, keepdims=True)))[np.arange(20), labels]
    got = bench.loo_prototype_log_likelihood(torch.from_numpy(features), torch.from_numpy(labels), 4)
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-9)


def test_crossval_oracle_does_not_reward_a_candidate_that_is_only_lucky_on_one_half():
    bench = bench_fewshot_module
    labels = np.repeat(np.arange(2), 4)  # per class, positions 0 and 2 are one half, 1 and 3 the other
    steady = np.array([1, 1, 0, 0, 1, 1, 0, 0], bool)  # 50% on both halves
    lucky = np.array([1, 0, 1, 0, 1, 0, 1, 0], bool)   # 100% on the even half, 0% on the odd half
    # Over all query images both are 50%. Picked on the even half, lucky scores 0% on the odd half; picked
    # on the odd half, steady scores 50% on the even half.
    assert bench.crossval_oracle({"steady": steady, "lucky": lucky}, labels) == 25.0
    assert bench.crossval_oracle({"steady": steady}, labels) == 50.0
    best = np.ones(8, bool)
    assert bench.crossval_oracle({"best": best, "lucky": lucky}, labels) == 100.0
    # Ties go to the first candidate: on the even half lucky ties with best, and then scores 0 on the odd.
    assert bench.crossval_oracle({"lucky": lucky, "best": best}, labels) == 50.0


def test_mixture_fitter_raises_the_support_log_likelihood_and_returns_a_mixture(tmp_path):
    import torch

    from sdk.media.preprocessing import Preprocessing
    from trainer.basis_bank import BasisBank
    from trainer.checkpoints import save_state
    from trainer.grouped_forward import GroupedForward
    from trainer.models import ResNet18, ResNetConfig

    bench = bench_fewshot_module
    config = ResNetConfig(num_classes=6, stem="small", width=0.25, input_size=16)
    torch.manual_seed(0)
    bank = BasisBank.from_state_dicts(config, [ResNet18(config).state_dict() for _ in range(3)])
    save_state(tmp_path / "stage3" / "model.safetensors", {f"bank.{k}": v for k, v in bank.state_dict().items()})
    preprocessing = Preprocessing(16)
    fitter = bench.MixtureFitter(tmp_path, config, 3, preprocessing, steps=15, lr=0.2)
    images = np.random.default_rng(3).integers(0, 256, (12, 16, 16, 3), dtype=np.uint8)
    labels = np.repeat(np.arange(3), 4)
    start = np.full((4, 3), 1 / 3, np.float32)

    def objective(alpha):
        x = torch.from_numpy(preprocessing.normalize(images))[None]
        with torch.no_grad():
            feats = GroupedForward(fitter.bank.mix(torch.from_numpy(alpha)[None]), 1, False).features(config, x)[:, 0]
        return float(bench.loo_prototype_log_likelihood(feats, torch.from_numpy(labels), 3).mean())

    alpha = fitter.fit(start, images, labels)
    assert alpha.shape == (4, 3) and np.allclose(alpha.sum(1), 1) and (alpha > 0).all()
    assert not np.allclose(alpha, start)
    assert objective(alpha) > objective(start)


def test_report_states_the_share_of_the_way_and_says_when_it_is_undefined():
    bench = bench_fewshot_module
    result = json.loads((Path(__file__).parents[1] / "docs/results/fewshot.json").read_text())
    unseen = result["unseen_5shot"]
    unseen.update(stage1_proto=40.0, proxy_selected=41.0, oracle_selected=42.0)
    assert "share of the way from stage1_proto to the oracle: 0.50 " in bench.report(result)
    below = copy.deepcopy(result)
    below["unseen_5shot"]["oracle_selected"] = 39.5  # the oracle under the stage-1 features: no way to go
    text = bench.report(below)
    assert "undefined, the oracle is not above stage1_proto (-0.50)" in text
    assert "nan" not in text.split("share of the way")[1].splitlines()[0]
