"""Issue 12's measurements (trainer/headroom.py, `python -m lab bases`) and stage-2 levers."""

import json

import numpy as np
import pytest
import torch

from lab import bn_recalibration as bn_recalibration_module
from lab import headroom_report as headroom_report_module
from lab import routing_smoothing as routing_smoothing_module
from trainer.evaluate import Evaluator
from trainer.headroom import (
    alternate_halves,
    best_single_basis,
    best_single_basis_crossval,
    crossval_correct,
    majority_shard,
    majority_shard_alpha,
    one_hot_members,
    shard_router_alpha,
    shards_per_task,
    specialist_margins,
)


def toy_evaluator(labels: np.ndarray, num_classes: int) -> Evaluator:
    """An Evaluator over given labels only (the headroom functions read labels and task membership)."""
    evaluator = Evaluator.__new__(Evaluator)
    evaluator.labels = torch.from_numpy(labels)
    evaluator.num_classes = num_classes
    return evaluator


def one_hot_logits(predictions: np.ndarray, num_classes: int) -> torch.Tensor:
    return torch.nn.functional.one_hot(torch.from_numpy(predictions), num_classes).float()


def test_router_puts_most_weight_on_the_shard_holding_most_classes():
    members = one_hot_members(np.array([0, 0, 0, 1, 1, 2, 2, 2, 2, 2]), 3)
    alpha = shard_router_alpha(members, np.array([0, 1, 2, 3, 5]))
    assert alpha.sum() == pytest.approx(1.0)
    assert alpha.argmax() == majority_shard(members, np.array([0, 1, 2, 3, 5])) == 0
    assert alpha.tolist() == pytest.approx([0.6, 0.2, 0.2])
    assert shards_per_task(members, [np.array([0, 1]), np.array([2, 3, 5, 6])]) == {
        "shards_touched": 2.0, "majority_share": 0.75}
    # Overlapping shards: a class counts for every shard holding it.
    members[1, [0, 1, 2]] = True
    assert shard_router_alpha(members, np.array([0, 1, 2, 3, 5])).tolist() == pytest.approx([3 / 8, 4 / 8, 1 / 8])
    assert majority_shard(members, np.array([0, 1, 2, 3, 5])) == 1
    # The sharpest router: everything on that shard.
    assert majority_shard_alpha(members, np.array([0, 1, 2, 3, 5])).tolist() == [0.0, 1.0, 0.0]


def test_specialist_margin_and_oracle_pick_on_known_predictions():
    # 4 classes, 2 shards {0,1} and {2,3}; 10 val images per class.
    labels = np.repeat(np.arange(4), 10)
    members = one_hot_members(np.array([0, 0, 1, 1]), 2)
    reference = labels.copy()
    reference[::2] = (labels[::2] + 1) % 4             # right on half of the images of every class
    basis0 = np.where(labels < 2, labels, reference)   # perfect on its own shard only
    basis1 = reference.copy()                          # no better than the reference anywhere
    evaluator = toy_evaluator(labels, 4)
    logits = [one_hot_logits(b, 4) for b in (basis0, basis1)]
    tasks = [np.array([0, 1]), np.array([2, 3])]
    margins = specialist_margins(evaluator, logits, one_hot_logits(reference, 4), members, tasks)
    # Task {0,1}: with selection the reference is right on 50% ([1 -> 2] is masked away: its label 0's
    # wrong guess 1 stays inside the task, label 1's wrong guess 2 is outside and falls back to 0 or 1).
    ref_acc = evaluator.correct(one_hot_logits(reference, 4)[:20], evaluator.labels[:20], tasks[0])[0] / 20
    assert margins[0] == pytest.approx(100 * (1.0 - ref_acc))
    assert margins[1] == pytest.approx(0.0)
    assert best_single_basis(evaluator, logits, tasks) == pytest.approx(
        100 * (20 + evaluator.correct(logits[1][20:], evaluator.labels[20:], tasks[1])[0]) / 40)
    # A basis that owns no task has no margin.
    assert specialist_margins(evaluator, logits, logits[1], members, tasks[:1])[1] is None


def test_crossval_oracle_does_not_credit_a_basis_for_luck_on_the_images_it_was_picked_on():
    labels = np.repeat(np.arange(2), 4)
    assert alternate_halves(labels).tolist() == [True, False, True, False] * 2
    evaluator = toy_evaluator(labels, 2)
    wrong = 1 - labels
    steady = np.where(np.arange(8) % 4 < 2, labels, wrong)     # right on one image of each half per class
    lucky = np.where(np.arange(8) % 2 == 0, labels, wrong)     # right on the even half only
    logits = [one_hot_logits(b, 2) for b in (steady, lucky)]
    tasks = [np.array([0, 1])]
    assert best_single_basis(evaluator, logits, tasks) == 50.0  # both are 4 of 8 right
    # Picked on the even half, lucky scores 0 of 4 on the odd half; picked on the odd half, steady scores
    # 2 of 4 on the even half.
    assert best_single_basis_crossval(evaluator, logits, tasks) == 25.0
    assert best_single_basis_crossval(evaluator, logits[:1], tasks) == 50.0  # one basis: no selection, no bias
    hits = np.array([[1, 1, 1, 1], [0, 0, 0, 0]], bool)
    assert crossval_correct(hits, np.array([1, 0, 1, 0], bool)) == 4


def test_bases_report_on_a_stage2_only_run(tiny_run, tmp_path, monkeypatch, capsys):
    from lab.__main__ import main
    from lab.bases import evaluate_bases
    from trainer.run import run

    overrides = {"stage2_general_fraction": 0.0, "stage3_mixer_init": "router"}
    out = run(tmp_path / "s2", "tiny", overrides, progress=False, reuse_from=tiny_run, until="stage2")
    assert (out / "stage2" / "basis0.safetensors").exists() and not (out / "stage3").exists()
    assert main(["bases", str(out), "--device", "cpu", "--out", str(tmp_path / "bases.json")]) == 0
    result = json.loads((tmp_path / "bases.json").read_text())   # what evaluate_bases returned, as the CLI wrote it
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["bases", str(out), "--device", "cuda"]) == 2  # a clear error, not torch's
    assert "no CUDA GPU" in capsys.readouterr().err
    acc = result["accuracy"]
    assert "taper" not in acc
    assert result["reference"] == "classifier_selection"  # the tiny run's baseline was reused
    assert acc["best_single_basis"] >= acc["shard_basis"]
    assert acc["best_single_basis"] >= acc["best_single_basis_crossval"]
    assert len(result["specialist_margin_per_basis"]) == 3
    assert set(result["task_shard_alignment"]) == {"shards_touched", "majority_share"}
    run(out, progress=False)  # resumes: stage 3, its mixer first fitted to the router
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [r for r in log if r.get("event") == "mixer_fitted_to_router"]
    after = evaluate_bases(out, progress=False)["accuracy"]
    assert {"taper", "stage3_uniform_average", "stage3_shard_router"} <= set(after)
    assert after["best_single_basis"] == acc["best_single_basis"]  # stage 2 untouched by the resume
    # The same diagnostics on super-category tasks (the full report needs a baseline for them).
    from trainer.config import TrainConfig
    from trainer.data import DataError, TaskSampler
    from trainer.run import make_context

    hierarchy = make_context(out, TrainConfig.load(out / "config.json"), False).data.hierarchy
    pairs = zip(TaskSampler(hierarchy, k=20).evaluation_tasks(0),
                TaskSampler(hierarchy, k=20, mode="supercategory").evaluation_tasks(0), strict=True)
    assert not all(np.array_equal(a, b) for a, b in pairs)  # the two protocols are different task sets
    superc = evaluate_bases(out, progress=False, task_mode="supercategory")
    assert superc["task_mode"] == "supercategory" and {"taper", "reference"} <= set(superc["accuracy"])
    with pytest.raises(DataError, match="task_mode"):
        evaluate_bases(out, progress=False, task_mode="mixed")


def _stage2_basis(tiny_run, tmp_path, name: str, **overrides):
    """A stage-2 basis on shard 0..3 of the tiny run."""
    from trainer.config import TrainConfig
    from trainer.run import load_model, make_context
    from trainer.stages import train_stage2_basis

    config = TrainConfig.load(tiny_run / "config.json").with_overrides(stage2_epochs=3, **overrides)
    ctx = make_context(tmp_path, config, progress=False)
    stage1 = load_model(ctx.model_config, tiny_run / "stage1" / "model.safetensors")
    torch.manual_seed(0)
    return ctx, stage1, train_stage2_basis(ctx, tmp_path / name, stage1, np.arange(4), q=0)


def test_shard_only_logit_adjusted_stage2_leaves_other_classes_rows_to_weight_decay(tiny_run, tmp_path):
    ctx, stage1, basis = _stage2_basis(tiny_run, tmp_path, "shard-only", stage2_general_fraction=0.0,
                                       stage2_logit_adjust=True)
    before, after = stage1.fc.weight.detach(), basis.fc.weight.detach()
    cos = torch.nn.functional.cosine_similarity(before, after, dim=1)
    # The loss is over the shard's classes only: other rows get no gradient, only decay (same direction).
    assert torch.allclose(cos[4:], torch.ones_like(cos[4:]), atol=1e-5)
    assert (after[4:].norm(dim=1) < before[4:].norm(dim=1)).all()
    assert cos[:4].min() < 0.9999


def test_finetune_oracle_starts_at_classifier_selection_and_reports_a_gain(tiny_run):
    from lab.finetune_oracle import LEARNING_RATES, MAX_EPOCHS, FinetuneGrid, evaluate_oracle, task_network
    from trainer.checkpoints import load_state
    from trainer.config import TrainConfig
    from trainer.data.transforms import to_normalized_tensor
    from trainer.run import load_model, make_context

    config = TrainConfig.load(tiny_run / "config.json")
    ctx = make_context(tiny_run, config, progress=False)
    state = load_state(tiny_run / "stage1" / "model.safetensors")
    task = np.array([1, 3, 4])
    x = to_normalized_tensor(torch.from_numpy(np.array(ctx.data.val.images[:16])), ctx.preprocessing)
    with torch.no_grad():
        full = load_model(ctx.model_config, tiny_run / "stage1" / "model.safetensors")(x)
        small = task_network(state, ctx.model_config, task).eval()(x)
    assert torch.allclose(small, full[:, task], atol=1e-5)  # step 0 is exactly classifier selection

    result = evaluate_oracle(tiny_run, num_tasks=2, progress=False)
    assert len(result["tasks"]) == 2 and result["reference"] == "classifier_selection"
    for row in result["tasks"]:
        assert row["lr"] in LEARNING_RATES and 1 <= row["epochs"] <= MAX_EPOCHS
        assert row["finetuned_best_on_val"] >= row["finetuned"]  # the peek is an upper bound of the choice
    edges = result["grid_edges"]
    assert edges["lowest_lr"] == sum(r["lr"] == min(LEARNING_RATES) for r in result["tasks"])
    assert edges["last_epoch"] == sum(r["epochs"] == MAX_EPOCHS for r in result["tasks"])
    with pytest.raises(ValueError, match="positive"):
        FinetuneGrid(learning_rates=(0.0,))
    gains = [r["finetuned"] - r["classifier_selection"] for r in result["tasks"]]
    assert result["gain"]["mean"] == pytest.approx(float(np.mean(gains)), abs=0.01)
    cv = [r["finetuned_crossval"] - r["classifier_selection"] for r in result["tasks"]]
    assert result["gain_crossval"] == pytest.approx(float(np.mean(cv)), abs=0.01)


def test_every_mixer_init_but_uniform_is_a_routing_prior():
    from trainer.config import MIXER_INITS, TrainConfig
    from trainer.headroom import ROUTING_PRIORS

    assert set(MIXER_INITS) == {"uniform", *ROUTING_PRIORS}
    with pytest.raises(ValueError, match="stage3_mixer_init"):
        TrainConfig(stage3_mixer_init="sharp")


@pytest.mark.parametrize("router", [shard_router_alpha, majority_shard_alpha])
def test_mixer_fitted_to_the_router_starts_on_the_majority_shard(tiny_run, router):
    from trainer.checkpoints import load_state
    from trainer.config import TrainConfig
    from trainer.data.tasks import TaskSampler
    from trainer.mixer import MixerPredictor, fit_to_router
    from trainer.run import make_context, read_shards
    from trainer.task_embedding import TaskEmbedder

    config = TrainConfig.load(tiny_run / "config.json")
    ctx = make_context(tiny_run, config, progress=False)
    members = read_shards(tiny_run, config.num_bases)
    embedder = TaskEmbedder("text", load_state(tiny_run / "classes.safetensors")["text"].numpy())
    sampler = TaskSampler(ctx.data.hierarchy, k=config.task_k)
    tasks = sampler.evaluation_tasks(seed=5)
    torch.manual_seed(0)
    mixer = MixerPredictor(embedder.dim, config.num_bases, hidden=32)
    with torch.no_grad():
        assert torch.allclose(mixer.eval()(embedder(tasks)), torch.full((1,), 1 / config.num_bases))
    fit_to_router(mixer, embedder, lambda rng: sampler.sample(int(rng.integers(members.shape[1])), rng),
                  lambda t: router(members, t), steps=200)
    with torch.no_grad():
        alpha = mixer.eval()(embedder(tasks))
    target = np.stack([router(members, t) for t in tasks])
    shares = np.stack([shard_router_alpha(members, t) for t in tasks])
    clear = [i for i in range(len(tasks)) if np.sort(shares[i])[-1] > np.sort(shares[i])[-2]]  # one majority shard
    agree = [alpha[i, b].argmax().item() == target[i].argmax() for i in clear for b in range(4)]
    assert len(agree) >= 8 and np.mean(agree) >= 0.8
    assert np.abs(alpha.mean(1).numpy() - target).mean() < 0.15


def test_one_shard_holds_every_class():
    from trainer.shards import hierarchy_shards

    distances = np.random.default_rng(0).random((7, 7))
    assert hierarchy_shards(distances + distances.T, 1).tolist() == [0] * 7


def test_expanded_shards_keep_their_own_classes_and_hold_whole_neighbourhood_tasks():
    from trainer.config import PRESETS
    from trainer.data.tasks import TaskSampler
    from trainer.run import open_data
    from trainer.shards import expand_shards, hierarchy_shards

    hierarchy = open_data(PRESETS["tiny"], progress=False).hierarchy
    distances = hierarchy.distances
    shard_of = hierarchy_shards(distances, 3)
    members = expand_shards(distances, shard_of, size=12)
    assert (members.sum(1) == 12).all()
    assert members[shard_of, np.arange(len(shard_of))].all()  # every class stays in its own shard
    tasks = TaskSampler(hierarchy, k=5).evaluation_tasks(0)
    assert shards_per_task(members, tasks)["majority_share"] > shards_per_task(one_hot_members(shard_of, 3),
                                                                                tasks)["majority_share"]
    with pytest.raises(ValueError):
        expand_shards(distances, shard_of, size=0)


def test_seed_spread_reports_both_target_margins():
    report = headroom_report_module

    def run(taper, uniform):
        return {"accuracy": {"taper": taper, "reference": 56.0, "stage3_uniform_average": uniform},
                "seeds": [0, 1, 2], "config": {"eval_seeds": [0]}}

    row = run(57.5, 57.0) | {"task_mode": "supercategory", "specialist_margin": 1.0,
                             "specialist_margin_per_basis": [1.0, None], "task_shard_alignment": {
                                 "shards_touched": 9.0, "majority_share": 0.9}}
    row["config"] |= {"stage1_epochs": 40, "num_bases": 2, "stage2_shard_size": 60, "stage2_epochs": 5,
                      "stage2_lr": 0.03, "stage2_general_fraction": 0.0}
    table_row = next(line for line in report.markdown({"bench": row}, None).splitlines() if line.startswith("| bench"))
    assert "stage 1 40 epochs; Q=2, shards of 60" in table_row and "[0, 1, 2] super-category" in table_row
    assert "stage-3 lr" not in table_row
    assert report.stage2_recipe(row["config"] | {"stage3_lr": 0}).endswith(", stage-3 lr 0")
    assert "stage-2 seed" not in table_row
    assert ", stage-2 seed 1" in report.stage2_recipe(row["config"] | {"stage2_seed": 1})
    assert "other class" not in table_row
    assert ", other class True" in report.stage2_recipe(row["config"] | {"stage2_other_class": True})
    assert "random-resized" not in table_row
    assert ", random-resized crops from area 0.08" in report.stage2_recipe(row["config"] | {"aug_crop_scale": 0.08})

    spread = report.seed_spread({"a": run(57.5, 57.0), "b": run(58.5, 57.0)}, ["a", "b"])
    assert spread["task_seeds"] == [0, 1, 2]
    assert spread["taper_minus_cs"] == [1.5, 2.5] and spread["taper_minus_uniform"] == [0.5, 1.5]
    assert spread["mean"] == 58.0 and spread["stage3_seed_std"] == pytest.approx(0.71)


def test_headroom_report_names_each_oracle_by_its_stage_one():
    report = headroom_report_module

    def oracle(gain, command):
        task = {"anchor": "king penguin, Aptenodytes", "lr": 0.01, "epochs": 2, "finetuned": 60.0 + gain,
                "classifier_selection": 60.0}
        return {"gain": {"mean": gain, "std": 0.0, "min": gain, "max": gain}, "run_command": command,
                "tasks": [task], "grid": {"learning_rates": [0.01], "max_epochs": 2, "selection_share": 0.1},
                "reference": "stage1_selection", "time_s": 60.0, "per_task_finetune": 60.0 + gain,
                "per_task_finetune_cs": 60.0}

    late = oracle(0.25, "run b") | {"gain_best_on_val": 0.9,
                                    "grid_edges": {"lowest_lr": 1, "highest_lr": 0, "last_epoch": 1}}
    text = report.markdown({}, {"stage 1 8 epochs": oracle(1.32, "run a"), "stage 1 40 epochs": late})
    assert "peeks at val): gain +0.90" in text and "1 at the lowest lr, 0 at the highest, 1 at the last" in text
    assert "## Per-task fine-tuning oracle: stage 1 8 epochs" in text and "gain +1.32" in text
    assert "## Per-task fine-tuning oracle: stage 1 40 epochs" in text and "gain +0.25" in text
    assert text.index("run a") < text.index("run b") and "| king penguin | 0.01 | 2 | 60.25 | 60.00 | +0.25 |" in text


def test_headroom_report_extends_an_earlier_report_without_its_run_files(tmp_path, monkeypatch):
    """--extend keeps every earlier row, oracle and seed spread (their run directories may be gone), adds the
    new rows after them, refuses a name already used, and labels a width other than the bench's 0.25."""
    report = headroom_report_module

    def row(reference, width=0.25):
        return {"accuracy": {"reference": reference, "taper": reference + 1}, "specialist_margin": 0.5,
                "specialist_margin_per_basis": [0.5], "task_shard_alignment": {"shards_touched": 3.0,
                                                                               "majority_share": 0.5},
                "config": {"eval_seeds": [0], "stage1_epochs": 40, "num_bases": 1, "stage2_epochs": 2,
                           "stage2_lr": 0.01, "stage2_general_fraction": 0.5, "width": width}}

    def main(*argv):
        monkeypatch.setattr("sys.argv", ["headroom_report", *argv])
        report.main()

    (tmp_path / "old.json").write_text(json.dumps(row(60.0)))
    (tmp_path / "new.json").write_text(json.dumps(row(50.0, width=0.125)))
    main("--bases", f"old={tmp_path / 'old.json'}", "--out", str(tmp_path / "first"))
    (tmp_path / "old.json").unlink()
    main("--extend", str(tmp_path / "first.json"), "--bases", f"narrow={tmp_path / 'new.json'}",
         "--out", str(tmp_path / "second"))
    text = (tmp_path / "second.md").read_text()
    assert text.index("| old | stage 1 40") < text.index("| narrow | width 0.125, stage 1 40")
    assert json.loads((tmp_path / "second.json").read_text())["bases"]["old"] == row(60.0)
    with pytest.raises(SystemExit, match="already in the report"):
        main("--extend", str(tmp_path / "second.json"), "--bases", f"old={tmp_path / 'new.json'}",
             "--out", str(tmp_path / "third"))


def test_smoothed_majority_routing_runs_from_the_majority_basis_to_the_uniform_average():
    smoothing = routing_smoothing_module
    members = np.array([[1, 1, 0, 0], [0, 1, 1, 1], [0, 0, 0, 1]])  # [Q, classes]: shard 1 holds most of the task
    task = np.array([1, 2, 3])
    assert smoothing.smoothed_alpha(members, task, 0.0)[0].tolist() == [0.0, 1.0, 0.0]
    assert np.allclose(smoothing.smoothed_alpha(members, task, 1.0).numpy(), 1 / 3)
    alpha = smoothing.smoothed_alpha(members, task, 0.3)
    assert alpha.shape == (4, 3) and np.allclose(alpha.sum(1).numpy(), 1.0) and alpha[0].argmax() == 1


def test_recomputed_batch_norm_statistics_are_those_of_the_images_under_the_weights(tiny_run):
    from trainer.checkpoints import load_state
    from trainer.config import TrainConfig
    from trainer.models import ResNet18
    from trainer.run import network_config

    recalibrated = bn_recalibration_module.recalibrated
    config = TrainConfig.load(tiny_run / "config.json")
    state = load_state(tiny_run / "stage1" / "model.safetensors")
    model = ResNet18(network_config(config, len(state["fc.bias"])))
    norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    seen = {}
    for i in (0, len(norms) - 1):  # the stem's and the last block's
        norms[i].register_forward_hook(lambda m, args, out, i=i: seen.setdefault(i, args[0].detach().clone()))
    x = torch.randn(24, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    names = [n for n, m in model.named_modules() if isinstance(m, torch.nn.BatchNorm2d)]
    new = recalibrated(model, state, x)
    for i in seen:
        assert torch.allclose(new[f"{names[i]}.running_mean"], seen[i].mean((0, 2, 3)), atol=1e-5)
        assert torch.allclose(new[f"{names[i]}.running_var"], seen[i].var((0, 2, 3)), rtol=1e-4, atol=1e-6)
        assert not torch.allclose(new[f"{names[i]}.running_mean"], state[f"{names[i]}.running_mean"])
    assert all(torch.equal(new[k], state[k]) for k in state if "running" not in k and "num_batches" not in k)


def test_bn_recalibration_loads_the_bases_stage_3_left(tiny_run):
    """`--bases stage3` must measure the bases the run's TAPER mixes (stage 3 trains them), not stage 2's."""
    from trainer.basis_bank import NUM_BLOCKS, BasisBank
    from trainer.checkpoints import load_state
    from trainer.config import TrainConfig
    from trainer.run import make_context

    script = bn_recalibration_module
    config = TrainConfig.load(tiny_run / "config.json")
    ctx = make_context(tiny_run, config, progress=False)
    after = BasisBank.from_state_dicts(ctx.model_config, script.load_bases(ctx, tiny_run, "stage3"))
    before = BasisBank.from_state_dicts(ctx.model_config, script.load_bases(ctx, tiny_run, "stage2"))
    trained = load_state(tiny_run / "stage3" / "model.safetensors")
    for b in range(NUM_BLOCKS):
        assert torch.equal(after.params(b), trained[f"bank.params{b}"])
        assert not torch.equal(before.params(b), trained[f"bank.params{b}"])   # stage 3 moved them


def test_bn_recalibration_static_only_measures_the_task_independent_networks(tiny_run):
    result = bn_recalibration_module.measure(tiny_run, [0], 2, 2, "stage3", static_only=True)
    assert result["bases"] == "stage3" and result["static_only"]
    assert set(result["accuracy"]) == {"reference_cs", "stage1", "uniform", "stage1 | recomputed, all classes",
                                       "uniform | recomputed, all classes"}
    assert all(0 <= v <= 100 for v in result["accuracy"].values())


@pytest.mark.parametrize("bn", ["train", "frozen"])
def test_finetune_oracle_with_frozen_batch_norm_keeps_stage1_statistics(tiny_run, bn):
    from lab.finetune_oracle import TaskData, finetune, task_data, task_network
    from trainer.checkpoints import load_state
    from trainer.config import TrainConfig
    from trainer.run import make_context

    config = TrainConfig.load(tiny_run / "config.json")
    ctx = make_context(tiny_run, config, progress=False)
    state = load_state(tiny_run / "stage1" / "model.safetensors")
    task = np.array([0, 2, 5])
    data: TaskData = task_data(ctx.data.train, ctx.data.val, task, seed=0)
    model = finetune(task_network(state, ctx.model_config, task), data.train, 0.05, 1, ctx, seed=0, bn=bn)
    after = model.state_dict()
    stats = [k for k in after if k.endswith(("running_mean", "running_var"))]
    affine = [k[: -len("running_mean")] + "weight" for k in stats if k.endswith("running_mean")]
    assert stats and affine
    same_stats = all(torch.equal(after[k], state[k]) for k in stats)
    assert same_stats == (bn == "frozen")  # training mode moves them; frozen keeps stage 1's exactly
    assert not all(torch.equal(after[k], state[k]) for k in affine)  # the scale still trains in both modes
    assert not model.training


def test_finetune_oracle_grid_of_epochs_and_batch_norm(tiny_run):
    from lab.finetune_oracle import FinetuneGrid, evaluate_oracle

    with pytest.raises(ValueError, match="bn must be"):
        FinetuneGrid(bn="batch")
    with pytest.raises(ValueError, match="max_epochs"):
        FinetuneGrid(max_epochs=0)
    assert FinetuneGrid(learning_rates=(0.03, 0.01)).learning_rates == (0.01, 0.03)
    grid = FinetuneGrid(learning_rates=(0.05,), max_epochs=3, bn="frozen")
    result = evaluate_oracle(tiny_run, num_tasks=2, progress=False, grid=grid)
    assert result["grid"]["max_epochs"] == 3 and result["bn"] == "frozen"
    assert all(1 <= r["epochs"] <= 3 for r in result["tasks"])
    assert result["grid_edges"]["last_epoch"] == sum(r["epochs"] == 3 for r in result["tasks"])
    # With one snapshot there is nothing to pick: the cross-validated pick scores it on all of val.
    (row,) = evaluate_oracle(tiny_run, num_tasks=1, progress=False, grid=FinetuneGrid((0.05,), 1))["tasks"]
    assert row["finetuned_crossval"] == row["finetuned"] == row["finetuned_best_on_val"]
