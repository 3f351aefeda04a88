import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import every_core

from lab import routing_usage as routing_usage_module
from lab import stage1_accuracy as stage1_accuracy_module
from lab import training_signal as training_signal_module
from trainer.basis_bank import BasisBank
from trainer.config import PRESETS
from trainer.grouped_forward import grouped_forward
from trainer.mixer import MixerPredictor
from trainer.models import ResNet18, ResNetConfig, functional_forward
from trainer.stages import Stage3Model, task_mask

CONFIG = ResNetConfig(stem="small", width=0.25, num_classes=6, input_size=16)
# The tiny preset's synthetic data at a quarter of its training images, for the tests of how a run is driven
# (cut off and resumed, spread over two processes) rather than of what it learns: the same stages, epochs
# and checks on 96 training images instead of 384.
FEW_IMAGES = {"synthetic": {"image_size": 32, "train_per_class": 4, "val_per_class": 2}}


def random_bases(q: int) -> list[dict[str, torch.Tensor]]:
    states = []
    for seed in range(q):
        torch.manual_seed(seed)
        model = ResNet18(CONFIG)
        for m in model.modules():  # distinct, non-trivial batch norms per basis
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.normal_()
                m.running_var.uniform_(0.5, 2)
                m.weight.data.normal_()
        states.append(model.state_dict())
    return states


def test_one_hot_mixer_gives_exactly_that_basis():
    bases = random_bases(3)
    bank = BasisBank.from_state_dicts(CONFIG, bases)
    x = torch.randn(4, 3, 16, 16)
    for q in range(3):
        reference = ResNet18(CONFIG)
        reference.load_state_dict(bases[q])
        one_hot = torch.zeros(4, 3)
        one_hot[:, q] = 1
        mixed = functional_forward(ResNet18(CONFIG).eval(), bank.state_dict_for(one_hot), x)
        assert torch.equal(mixed, reference.eval()(x))
        grouped, _ = grouped_forward(CONFIG, bank.mix(one_hot[None]), x[None])
        assert torch.allclose(grouped[0], reference(x), atol=1e-5)


def test_mixing_is_linear_in_alpha():
    bank = BasisBank.from_state_dicts(CONFIG, random_bases(2))
    alpha = torch.tensor([[0.25, 0.75]] * 4)
    mixed = bank.state_dict_for(alpha)
    b0, b1 = bank.basis_state_dict(0), bank.basis_state_dict(1)
    for name in ("stem.conv1.weight", "layer3.0.bn1.running_var", "fc.bias"):
        assert torch.allclose(mixed[name], 0.25 * b0[name] + 0.75 * b1[name], atol=1e-6)


def test_grouped_forward_runs_each_task_with_its_own_weights():
    bank = BasisBank.from_state_dicts(CONFIG, random_bases(3))
    alpha = torch.softmax(torch.randn(2, 4, 3), -1)
    x = torch.randn(2, 5, 3, 16, 16)
    logits, _ = grouped_forward(CONFIG, bank.mix(alpha), x)
    for g in range(2):
        single = functional_forward(ResNet18(CONFIG).eval(), bank.state_dict_for(alpha[g]), x[g])
        assert torch.allclose(logits[g], single, atol=1e-4)


def test_stage3_gradients_reach_bases_and_mixer():
    bank = BasisBank.from_state_dicts(CONFIG, random_bases(3))
    mixer = MixerPredictor(embed_dim=8, num_bases=3, hidden=16)
    torch.nn.init.normal_(mixer.head.weight, std=0.1)  # the zero-initialised head passes no gradient back
    model = Stage3Model(bank, mixer).train()
    logits, alpha, stats = model(torch.randn(2, 4, 3, 16, 16), torch.randn(2, 8))
    tasks = [np.array([0, 1, 2]), np.array([3, 4, 5])]
    masked = logits + task_mask(tasks, 6)[:, None, :]
    torch.nn.functional.cross_entropy(masked.reshape(-1, 6), torch.tensor([0, 1, 2, 0, 3, 4, 5, 3])).backward()
    for b in range(4):
        assert bank.params(b).grad is not None and bank.params(b).grad.abs().sum() > 0
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in mixer.parameters())
    assert set(stats) == {n for names in bank.stat_names for n in names}


def test_stage3_loss_is_over_the_task_classes():
    from trainer.stages import stage3_logits

    logits, tasks = torch.randn(2, 3, 6), [np.array([0, 1]), np.array([2, 5])]
    task = stage3_logits(logits, tasks)
    assert torch.isinf(task[0, :, 2:]).all() and torch.equal(task[0, :, :2], logits[0, :, :2])
    assert torch.isinf(task[1, :, [0, 1, 3, 4]]).all() and torch.equal(task[1, :, [2, 5]], logits[1, :, [2, 5]])


def test_running_stats_move_toward_tasks_in_proportion_to_their_weight():
    bank = BasisBank.from_state_dicts(CONFIG, random_bases(2))
    before = bank.stats(0).clone()
    alpha = torch.zeros(1, 4, 2)
    alpha[0, :, 0] = 1  # the task uses basis 0 only
    stats = {n: torch.full((1, int(np.prod(bank.shapes[n]))), 7.0) for names in bank.stat_names for n in names}
    bank.update_running_stats(alpha, stats, momentum=0.5)
    assert torch.allclose(bank.stats(0)[0], 0.5 * before[0] + 0.5 * 7.0)
    assert torch.equal(bank.stats(0)[1], before[1])


def test_task_mask_keeps_only_the_task_classes():
    mask = task_mask([np.array([1, 3])], 5)
    assert mask[0, 1] == 0 and mask[0, 3] == 0 and torch.isinf(mask[0, [0, 2, 4]]).all()


def test_stage2_prior_is_the_batch_class_distribution():
    from trainer.stages import stage2_class_prior

    prior = stage2_class_prior(200, np.arange(20), general_fraction=0.5).numpy()
    assert prior.sum() == pytest.approx(1.0)
    # A shard class is drawn 0.5/200 + 0.5/20 of the time, any other 0.5/200: 11x as often.
    assert prior[0] / prior[100] == pytest.approx(11.0)


def test_logit_adjusted_stage2_basis_favours_its_shard_less(tiny_run, tmp_path):
    from trainer.config import TrainConfig
    from trainer.data.transforms import to_normalized_tensor
    from trainer.run import load_model, make_context
    from trainer.stages import train_stage2_basis

    config = TrainConfig.load(tiny_run / "config.json").with_overrides(stage2_epochs=3)
    shard = np.arange(4)
    bias = {}
    for adjust in (False, True):
        ctx = make_context(tmp_path, config.with_overrides(stage2_logit_adjust=adjust), progress=False)
        stage1 = load_model(ctx.model_config, tiny_run / "stage1" / "model.safetensors")
        torch.manual_seed(0)
        basis = train_stage2_basis(ctx, tmp_path / f"adjust{adjust}", stage1, shard, q=0)
        x = to_normalized_tensor(torch.from_numpy(np.array(ctx.data.val.images)), ctx.preprocessing)
        with torch.no_grad():
            logits = basis(x)
        others = np.setdiff1d(np.arange(ctx.data.num_classes), shard)
        bias[adjust] = (logits[:, shard].mean() - logits[:, others].mean()).item()
    # Plain stage 2 learns the batches' skew toward the shard; the adjusted loss does not.
    assert bias[True] < bias[False] - 0.3


def test_tiny_preset_end_to_end_and_resume(tiny_run, tmp_path):
    """A tiny preset run from nothing, as `run(folder, "tiny")` made it: conftest's `tiny_run` is that call,
    trained once for the whole suite; this test reads and resumes a copy of it."""
    import shutil

    from trainer.report import evaluate_run, headroom_of
    from trainer.run import run
    from trainer.rundir import RunDir

    out = shutil.copytree(tiny_run, tmp_path / "run")
    for path in ("config.json", "log.jsonl", "metrics.json", "classes.safetensors", "stage1/model.safetensors",
                 "baseline/model.safetensors", "stage2/shards.json", "stage2/basis2.safetensors",
                 "stage3/model.safetensors"):
        assert (out / path).exists(), path
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert {r["stage"] for r in records} >= {"stage1", "baseline", "stage2.basis0", "stage3"}
    result = evaluate_run(out, progress=False)
    acc = result["accuracy"]
    assert acc["classifier_selection"] > acc["standard"] > 100 / 24  # above chance, selection helps
    assert acc["taper"] > 100 / PRESETS["tiny"].task_k and set(result["accuracy_supercategory"]) == set(acc)
    assert acc["best_single_basis"] >= acc["shard_basis"] and "shard_router" in acc
    assert len(result["specialist_margin_per_basis"]) == PRESETS["tiny"].num_bases
    assert result["wall_time_method_s"] == result["wall_time_s"]  # no ablation variants in this run
    assert "headroom" not in result
    from lab.__main__ import main

    assert main(["oracle", str(out), "--tasks", "2"]) == 0  # writes <run>/oracle.json, which the report reads
    assert headroom_of(RunDir(out))["tasks"] == 2           # (evaluate_run's "headroom", without evaluating again)
    # Resume: a finished stage is not trained again.
    stamp = (out / "stage1" / "model.safetensors").stat().st_mtime_ns
    run(out, progress=False)
    assert (out / "stage1" / "model.safetensors").stat().st_mtime_ns == stamp


def test_cut_off_stage_resumes_from_its_last_epoch(tmp_path, monkeypatch):
    from trainer import stages
    from trainer.run import run

    calls = []
    original = stages.train_continuation

    def crash(*args, **kwargs):
        calls.append(1)
        raise KeyboardInterrupt

    monkeypatch.setattr("trainer.run.train_continuation", crash)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "run", "tiny", {"stage1_epochs": 2, **FEW_IMAGES}, progress=False)
    assert (tmp_path / "run" / "stage1" / "model.safetensors").exists()
    assert (tmp_path / "run" / "stage1" / "checkpoint.pt").exists()
    monkeypatch.setattr("trainer.run.train_continuation", original)
    run(tmp_path / "run", progress=False)
    assert (tmp_path / "run" / "stage3" / "model.safetensors").exists()
    with pytest.raises(ValueError, match="another configuration"):
        run(tmp_path / "run", "tiny", {"stage1_epochs": 5}, progress=False)


def test_a_runs_threads_are_its_own_and_given_back_after_it(tmp_path, monkeypatch):
    """`threads` is set for the run and the caller's count restored after it, even when a stage fails (the
    conditions tests' runs once left two busy-waiting threads to every later test of their pytest worker)."""
    from trainer.run import run

    before = torch.get_num_threads()
    seen = []

    def fail(*args, **kwargs):
        seen.append(torch.get_num_threads())
        raise KeyboardInterrupt

    monkeypatch.setattr("trainer.run.make_context", fail)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "run", "tiny", {"threads": before + 1}, progress=False)
    assert seen == [before + 1] and torch.get_num_threads() == before


def test_the_class_name_encoder_is_loaded_once_and_gives_a_batch_it_saw_exactly_again():
    from sdk.errors import DescriptionError
    from sdk.text.encoder import TextEncoder
    from trainer.text_encoder import class_name_encoder, text_encoder_dir

    encoder = class_name_encoder()
    assert class_name_encoder() is encoder
    texts = ["a photo of a red fox at night", "a photo of a goose"]
    first = encoder.encode(texts)
    first[:] = 0   # the caller's copy: what the encoder remembers is not changed through it
    plain = TextEncoder.from_dir(text_encoder_dir())   # a fresh encoder, remembering nothing
    fresh = plain.encode(texts)
    assert np.array_equal(encoder.encode(texts), fresh) and fresh.any()
    assert np.array_equal(encoder.embed_class_names(["goose"]), plain.embed_class_names(["goose"]))
    with pytest.raises(DescriptionError):   # a str is no batch, as for any encoder
        encoder.encode("a photo of a goose")


def test_paper_preset_starts_on_cpu(tmp_path, monkeypatch):
    # Full width, the paper's recipe: run a few steps of stage 1 on the synthetic data, then stop.
    from trainer import loop
    from trainer.run import make_context
    from trainer.stages import train_plain

    config = PRESETS["paper"].with_overrides(data="synthetic", synthetic=PRESETS["tiny"].synthetic, input_size=32,
                                             batch_size=16, stage1_epochs=1, log_every=1)
    ctx = make_context(tmp_path, config, progress=False)
    assert ctx.model_config.width == 1.0
    original = loop.run_epochs

    def few_steps(stage_dir, stage, cfg, epochs, steps_per_epoch, *args, **kwargs):
        return original(stage_dir, stage, cfg, 3 / steps_per_epoch, steps_per_epoch, *args, **kwargs)

    monkeypatch.setattr("trainer.stages.run_epochs", few_steps)
    train_plain(ctx, tmp_path / "stage1", "stage1", ResNet18(ctx.model_config), 1, config.lr)
    steps = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines() if "loss" in line]
    assert len(steps) == 3 and all(np.isfinite(s["loss"]) for s in steps)


@pytest.mark.skipif(sys.platform != "linux", reason="torchrun with gloo is tested on Linux")
def test_two_process_torchrun_runs_the_tiny_preset(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # --standalone: torchrun picks a free port (a fixed one fails the run if anything else holds it)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "trainer", "run", "--preset", "tiny", "--out", str(tmp_path / "run"),
           "--set", "stage1_epochs=1", "--set", "stage3_epochs=1",
           "--set", f"synthetic={json.dumps(FEW_IMAGES['synthetic'])}"]
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    for q in range(3):  # stage-2 bases were spread over both ranks
        assert (tmp_path / "run" / "stage2" / f"basis{q}.safetensors").exists()
    assert (tmp_path / "run" / "stage3" / "model.safetensors").exists()


def test_reuse_copies_only_stages_the_new_config_does_not_change(tiny_run, tmp_path):
    from trainer.config import TrainConfig
    from trainer.run import reuse_outputs

    config = TrainConfig.load(tiny_run / "config.json")
    (tmp_path / "a").mkdir()
    copied = reuse_outputs(tiny_run, tmp_path / "a", config.with_overrides(mixer_lr=0.5))
    assert set(copied) == {"classes.safetensors", "stage1", "baseline", "stage2"}
    (tmp_path / "d").mkdir()  # adding ablations keeps the finished TAPER stage 3
    copied = reuse_outputs(tiny_run, tmp_path / "d", config.with_overrides(ablations=("bow",)))
    assert set(copied) == {"classes.safetensors", "stage1", "baseline", "stage2", "stage3"}
    (tmp_path / "b").mkdir()
    copied = reuse_outputs(tiny_run, tmp_path / "b", config.with_overrides(stage3_epochs=3, stage2_lr=0.02))
    assert set(copied) == {"classes.safetensors", "stage1"}  # the baseline gets the same total epochs
    (tmp_path / "c").mkdir()
    copied = reuse_outputs(tiny_run, tmp_path / "c", config.with_overrides(stage2_logit_adjust=True))
    assert set(copied) == {"classes.safetensors", "stage1", "baseline"}
    (tmp_path / "f").mkdir()  # the baseline's own learning rate retrains the baseline only
    copied = reuse_outputs(tiny_run, tmp_path / "f", config.with_overrides(baseline_lr=0.05))
    assert set(copied) == {"classes.safetensors", "stage1", "stage2", "stage3"}
    (tmp_path / "e").mkdir()  # a second stage-3 seed retrains stage 3 only
    copied = reuse_outputs(tiny_run, tmp_path / "e", config.with_overrides(stage3_seed=1))
    assert set(copied) == {"classes.safetensors", "stage1", "baseline", "stage2"}
    (tmp_path / "g").mkdir()  # a second stage-2 seed retrains stages 2 and 3
    copied = reuse_outputs(tiny_run, tmp_path / "g", config.with_overrides(stage2_seed=1))
    assert set(copied) == {"classes.safetensors", "stage1", "baseline"}
    (tmp_path / "h").mkdir()  # the shards' size is a stage-2 recipe
    copied = reuse_outputs(tiny_run, tmp_path / "h", config.with_overrides(stage2_shard_size=6))
    assert set(copied) == {"classes.safetensors", "stage1", "baseline"}
    (tmp_path / "i").mkdir()  # the augmentation is every stage's, stage 1's first
    copied = reuse_outputs(tiny_run, tmp_path / "i", config.with_overrides(aug_crop_scale=0.08))
    assert set(copied) == {"classes.safetensors"}
    for key, field in enumerate(({"stage1_image_fraction": 0.5}, {"train_images_per_class": 8})):
        (tmp_path / f"j{key}").mkdir()  # stage 1's images, and with them everything after it
        copied = reuse_outputs(tiny_run, tmp_path / f"j{key}", config.with_overrides(**field))
        assert set(copied) == {"classes.safetensors"}


def test_baseline_lr_defaults_to_stage3s_and_a_frozen_stage3_recipe_names_its_own():
    from trainer.config import TrainConfig

    assert TrainConfig(stage3_lr=0.02).continuation_lr == 0.02
    assert TrainConfig(stage3_lr=0.0, baseline_lr=0.01).continuation_lr == 0.01
    for name, preset in PRESETS.items():  # a baseline at lr 0 would be stage 1 itself, not a same-compute baseline
        assert not preset.baseline or preset.continuation_lr > 0, name


def test_eval_reads_stage3_seed_runs_and_refuses_other_runs(tiny_run, tmp_path):
    from trainer.config import TrainConfig
    from trainer.data.errors import DataError
    from trainer.report import evaluate_run
    from trainer.results import markdown, run_wall_times
    from trainer.run import run

    # No preset named: the new run takes the configuration of the run it reuses (device_run.sh's seed run).
    seed1 = run(tmp_path / "seed1", None, {"stage3_seed": 1}, reuse_from=tiny_run, progress=False)
    assert TrainConfig.load(seed1 / "config.json") == TrainConfig.load(tiny_run / "config.json").with_overrides(
        stage3_seed=1)
    result = evaluate_run(tiny_run, progress=False, seed_runs=[seed1])
    spread = result["stage3_seeds"]
    assert spread["stage3_seed"] == [0, 1] and spread["taper"][0] == result["accuracy"]["taper"]
    assert spread["taper"][1] != spread["taper"][0]  # another stage 3 really was evaluated
    assert result["stage3_seed_std"] == pytest.approx(abs(spread["taper"][1] - spread["taper"][0]) / 2 ** 0.5, abs=0.01)
    assert spread["taper_minus_cs"][1] == pytest.approx(spread["taper"][1] - result["accuracy"]["classifier_selection"])
    assert f"sample std **{result['stage3_seed_std']:.2f}**" in markdown(result, "python -m trainer run", [])
    # A run that copied stages from another says so in its report, whether made by `eval` or `report`: both
    # carry run_wall_times (evaluate_run's result holds its keys), read here without a second evaluation.
    assert result.items() >= run_wall_times(tiny_run).items()
    reused = {**result, **run_wall_times(seed1)}
    assert set(reused["reused"]) >= {"stage1", "stage2", "baseline"} and "stage3_taper" not in reused["reused"]
    assert f"(reused from {tiny_run}" in markdown(reused, "python -m trainer run", [])
    other = tmp_path / "lr"  # checked before anything is loaded: a configuration and a stage-3 file suffice
    (other / "stage3").mkdir(parents=True)
    (other / "stage3" / "model.safetensors").write_bytes(b"")
    TrainConfig.load(seed1 / "config.json").with_overrides(stage2_lr=0.02).save(other / "config.json")
    with pytest.raises(DataError, match="stage2_lr"):
        evaluate_run(tiny_run, progress=False, seed_runs=[other])
    with pytest.raises(DataError, match="same stage-3 seed"):
        evaluate_run(tiny_run, progress=False, seed_runs=[tiny_run])


@pytest.mark.parametrize("field, own, others", [
    ("stage3_seed", ("stage3", "stage3_bow"), ("stage1", "stage2.basis3", "baseline")),
    ("stage2_seed", ("stage2.basis0", "stage2.basis3"), ("stage1", "baseline", "stage3")),
])
def test_a_stage_seed_changes_only_its_stages_batches(field, own, others):
    from trainer.config import TrainConfig
    from trainer.loop import epoch_rng

    base, other = TrainConfig(), TrainConfig(**{field: 1})
    draw = lambda config, stage: epoch_rng(config, stage, 0).integers(1 << 30, size=4).tolist()  # noqa: E731
    for stage in others:
        assert draw(base, stage) == draw(other, stage)
    for stage in own:
        assert draw(base, stage) != draw(other, stage)
    assert draw(TrainConfig(**{field: 0}), own[0]) == draw(base, own[0])  # None means `seed`


def test_a_stage2_seed_retrains_the_bases_from_the_same_stage1(tiny_run, tmp_path):
    from trainer.checkpoints import load_state
    from trainer.run import run

    def bases(run_dir):
        return [load_state(path) for path in sorted((run_dir / "stage2").glob("basis*.safetensors"))]

    with every_core():   # as the fixture was trained: bit for bit needs the same float sums
        same = run(tmp_path / "s0", "tiny", {"stage2_seed": 0}, reuse_from=tiny_run, progress=False, until="stage2")
        other = run(tmp_path / "s1", "tiny", {"stage2_seed": 1}, reuse_from=tiny_run, progress=False, until="stage2")
    ours, theirs, seed1 = bases(tiny_run), bases(same), bases(other)
    assert len(ours) == len(seed1) > 0
    for a, b, c in zip(ours, theirs, seed1, strict=True):  # seed 0 named trains as `seed` does, bit for bit
        assert all(torch.equal(a[k], b[k]) for k in a)
        assert not all(torch.equal(a[k], c[k]) for k in a)


def test_stage2_augments_with_its_own_seed(tiny_run, tmp_path, monkeypatch):
    from trainer import stages
    from trainer.run import run

    seeds = set()
    real = stages.StageContext.augment
    monkeypatch.setattr(stages.StageContext, "augment",
                        lambda self, images, generator: seeds.add(generator.initial_seed()) or real(self, images,
                                                                                                   generator))
    run(tmp_path / "s7", "tiny", {"stage2_seed": 7}, reuse_from=tiny_run, progress=False, until="stage2")
    assert seeds == {7}   # stage 1 and the baseline reused; every basis's crops and flips follow stage2_seed


def test_frozen_bn_stage3_trains_exactly_the_deployed_network():
    bank = BasisBank.from_state_dicts(CONFIG, random_bases(3))
    mixer = MixerPredictor(embed_dim=8, num_bases=3, hidden=16)
    torch.nn.init.normal_(mixer.head.weight, std=0.5)
    model = Stage3Model(bank, mixer, frozen_bn=True).train()
    x, embedding = torch.randn(2, 4, 3, 16, 16), torch.randn(2, 8)
    logits, alpha, stats = model(x, embedding)
    assert stats == {}
    for g in range(2):
        deployed = functional_forward(ResNet18(CONFIG).eval(), bank.state_dict_for(alpha[g].detach()), x[g])
        assert torch.allclose(logits[g], deployed, atol=1e-4)
    logits.sum().backward()
    assert bank.params(0).grad.abs().sum() > 0 and mixer.head.weight.grad.abs().sum() > 0


def test_mixer_correlation_is_undefined_for_a_constant_mixer():
    from trainer.evaluate import pairwise_similarity_correlation

    embeddings = torch.randn(6, 8)
    assert pairwise_similarity_correlation(embeddings, torch.ones(6, 4, 3) / 3) is None
    r = pairwise_similarity_correlation(embeddings, embeddings[:, :6].reshape(6, 2, 3).softmax(-1))
    assert r is not None and -1 <= r <= 1


def test_one_task_per_batch_is_rejected_up_front():
    from trainer.config import TrainConfig

    with pytest.raises(ValueError, match="tasks_per_batch"):
        TrainConfig(tasks_per_batch=1)  # the mixer's batch norm would fail at the first stage-3 step


def test_lr_warms_up_linearly_then_follows_the_schedule():
    from trainer.loop import lr_scale

    step_cfg = PRESETS["paper"]
    assert lr_scale(step_cfg, 0.0, 0, step=0, warmup_steps=4) == pytest.approx(0.25)
    assert lr_scale(step_cfg, 0.0, 0, step=3, warmup_steps=4) == pytest.approx(1.0)
    assert lr_scale(step_cfg, 0.5, 30, step=100, warmup_steps=4) == pytest.approx(0.1)
    assert lr_scale(step_cfg, 0.0, 0, step=0) == 1.0  # no warm-up
    cosine = PRESETS["bench"]
    assert lr_scale(cosine, 0.5, 20, step=1, warmup_steps=4) == pytest.approx(0.5 * 0.5)


def test_paper_b512_is_the_paper_recipe_at_batch_512_with_scaled_rates():
    paper, big = PRESETS["paper"].to_dict(), PRESETS["paper-b512"].to_dict()
    changed = {k for k in paper if paper[k] != big[k]}
    assert changed == {"batch_size", "lr", "stage2_lr", "stage3_lr", "warmup_epochs", "ablations"}
    assert big["lr"] / paper["lr"] == big["stage2_lr"] / paper["stage2_lr"] == big["batch_size"] / paper["batch_size"]


def test_prepare_writes_what_a_gpu_run_needs_and_run_resumes_it(tmp_path):
    from trainer.__main__ import main

    out = tmp_path / "run"
    assert main(["prepare", "--preset", "tinyy", "--out", str(out)]) == 2  # a typo fails; the next command is kept
    assert main(["prepare", "--preset", "tiny", "--out", str(out), "--set", "stage1_epochs=2",
                 "--set", "warmup_epochs=1", "--set", "baseline=false"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["classes.safetensors", "command.txt", "config.json"]
    stamp = (out / "classes.safetensors").stat().st_mtime_ns
    assert main(["run", "--out", str(out), "--until", "stage1"]) == 0
    assert (out / "classes.safetensors").stat().st_mtime_ns == stamp  # not recomputed
    assert (out / "command.txt").read_text().startswith("python -m trainer prepare --preset tiny")
    lrs = [r["lr"] for r in map(json.loads, (out / "log.jsonl").read_text().splitlines())
           if r.get("stage") == "stage1" and "lr" in r]
    # warm-up over the first epoch, then the cosine decay
    base = PRESETS["tiny"].lr
    assert lrs[0] < lrs[1] < base and max(lrs) <= base and lrs[-1] < max(lrs)


def test_stage1_accuracy_script_scores_the_stage1_network(tiny_run, tiny_data):
    result = stage1_accuracy_module.stage1_accuracy(tiny_run)
    assert len(result["classifier_selection_per_seed"]) == len(PRESETS["tiny"].eval_seeds)
    assert result["classifier_selection"] == pytest.approx(np.mean(result["classifier_selection_per_seed"]), abs=0.01)
    assert 100 / tiny_data.num_classes < result["top1_all_classes"] <= 100  # above chance
    assert 100 / PRESETS["tiny"].task_k < result["classifier_selection"] <= 100


def test_random_resized_crops_train_stage1_on_other_images_than_pad_crops(tiny_run, tmp_path):
    from trainer.checkpoints import load_state
    from trainer.run import run

    out = run(tmp_path / "rrc", "tiny", {"aug_crop_scale": 0.5}, progress=False, until="stage1")
    ours = load_state(out / "stage1" / "model.safetensors")
    pad_crop = load_state(tiny_run / "stage1" / "model.safetensors")
    assert ours.keys() == pad_crop.keys()
    assert all(torch.isfinite(t).all() for t in ours.values())
    assert not torch.equal(ours["fc.weight"], pad_crop["fc.weight"])  # the same recipe but for the crops


def test_stage1_trains_on_its_share_of_each_class_and_the_later_stages_on_all(tmp_path, monkeypatch):
    import trainer.stages as stages
    from trainer.config import TrainConfig
    from trainer.run import open_data, run

    seen = {}
    train_plain = stages.train_plain

    def recording(ctx, stage_dir, stage, *args, **kwargs):
        seen[stage] = np.bincount(ctx.data.train.labels, minlength=ctx.data.num_classes)
        return train_plain(ctx, stage_dir, stage, *args, **kwargs)

    monkeypatch.setattr(stages, "train_plain", recording)
    out = run(tmp_path / "half", "tiny", {"train_images_per_class": 10, "stage1_image_fraction": 0.25},
              progress=False, until="stage2")
    data = open_data(TrainConfig.load(out / "config.json"), progress=False)
    assert np.bincount(data.train.labels).tolist() == [10] * data.num_classes
    assert seen["stage1"].tolist() == [3] * data.num_classes     # ceil(0.25 x 10) of each class
    assert seen["baseline"].tolist() == [10] * data.num_classes  # the continuation sees every image
    assert all(seen[f"stage2.basis{q}"].tolist() == [10] * data.num_classes for q in range(3))


@pytest.mark.parametrize("field", [{"stage1_image_fraction": 0.0}, {"stage1_image_fraction": 1.5},
                                   {"train_images_per_class": -1}])
def test_image_shares_outside_their_range_are_refused(field):
    with pytest.raises(ValueError, match=next(iter(field))):
        PRESETS["tiny"].with_overrides(**field)


def test_training_signal_reads_each_stage_from_the_log(tiny_run):
    result = training_signal_module.training_signal(tiny_run)
    records = [json.loads(line) for line in (tiny_run / "log.jsonl").read_text().splitlines()]
    first = {}
    for r in records:
        if "loss" in r and "step" in r:
            first.setdefault(r["stage"], r["loss"])
    assert result["stage1"]["first_loss"] == pytest.approx(first["stage1"], abs=1e-4)
    assert result["stage3"]["first_loss"] == pytest.approx(first["stage3"], abs=1e-4)
    assert result["stage2_first_loss_per_basis"]["n"] == PRESETS["tiny"].num_bases
    assert result["stage2_first_loss_per_basis"]["min"] == pytest.approx(
        min(v for k, v in first.items() if k.startswith("stage2.basis")), abs=1e-4)
    assert 0 <= result["stage1"]["end_acc"]["min"] <= result["stage1"]["end_acc"]["median"] <= 100


def test_routing_entropy_is_one_for_uniform_rows_and_zero_for_one_basis():
    from trainer.stages import routing_entropy

    uniform = torch.full((2, 4, 5), 0.2)
    one_hot = torch.zeros(2, 4, 5)
    one_hot[..., 3] = 1
    assert routing_entropy(uniform).item() == pytest.approx(1.0)
    assert routing_entropy(one_hot).item() == pytest.approx(0.0, abs=1e-6)
    half = torch.cat([uniform[:1], one_hot[:1]])   # mean over the tasks
    assert routing_entropy(half).item() == pytest.approx(0.5)


def test_routing_usage_counts_where_the_mixer_sends_each_task(tiny_run):
    script = routing_usage_module
    alpha = np.zeros((3, 4, 5))
    alpha[:, :, 1] = 0.6
    alpha[:, :, 4] = 0.4
    alpha[2, :, 1], alpha[2, :, 3] = 0.1, 0.5     # the third task goes to basis 3
    blocks = script.routing_usage(alpha, majority=np.array([1, 0, 3]))
    assert blocks[0] == {"tasks_per_basis": [0, 2, 0, 1, 0], "bases_used": 2,
                         "mean_top_weight": pytest.approx(0.567, abs=1e-3),
                         "top_is_majority_shard": pytest.approx(0.667, abs=1e-3)}
    run = script.run_usage(tiny_run, seed=0)   # the tiny run's own mixer, on its evaluation tasks
    assert all(sum(b["tasks_per_basis"]) == run["tasks"] > 0 for b in run["blocks"])
    assert len(run["blocks"]) == 4 and all(len(b["tasks_per_basis"]) == PRESETS["tiny"].num_bases
                                           for b in run["blocks"])
    assert all(b["basis_spread"] > 0 for b in run["blocks"])   # stages 2-3 moved the bases apart a little
    mean, delta = np.array([3.0, 4.0]), np.array([[0.3, 0.0], [-0.3, 0.0]])
    assert script.basis_spread(mean + delta) == pytest.approx(0.3 / 5)
    assert script.basis_spread(np.tile(mean, (4, 1))) == 0.0
