"""The field-conditions data of issue 50 (trainer/data/conditions.py, trainer/data/condition_cache.py): deterministic,
graded by severity, refused when malformed, and cached all or nothing."""

import json

import numpy as np
import pytest
import torch

from lab.condition_headroom import ROWS, summarise, table
from trainer.data.condition_cache import CONDITIONS_VERSION, ConditionData, MixtureSplit, train_severities
from trainer.data.conditions import CONDITION_NAMES, apply_condition, motion_kernels, psnr


def natural_like(count: int = 12, size: int = 64, seed: int = 0) -> np.ndarray:
    """Smooth colour gradients with edges and texture: what a blur, a cast or noise visibly changes."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size] / size
    images = []
    for _ in range(count):
        base = np.stack([np.sin(6 * xx * rng.uniform(0.5, 2) + c) for c in range(3)], -1) * 0.3 + 0.5
        # Edges 5 px apart, off the pixel grid of any pixelation, and fine texture.
        base += ((((xx * size + 2) // 5) + ((yy * size + 1) // 5)) % 2)[..., None] * 0.2 - 0.1
        base += rng.normal(0, 0.03, base.shape)
        images.append(np.clip(base * 255, 0, 255).astype(np.uint8))
    return np.stack(images)


@pytest.mark.parametrize("name", CONDITION_NAMES)
def test_deterministic_and_graded(name):
    x = natural_like()
    a = apply_condition(name, x, np.full(len(x), 3), seed=[1, 2])
    assert a.dtype == np.uint8 and a.shape == x.shape
    assert np.array_equal(a, apply_condition(name, x, np.full(len(x), 3), seed=[1, 2]))
    if name == "clean":
        assert np.array_equal(a, x)
        return
    by_severity = [psnr(x, apply_condition(name, x, np.full(len(x), s), seed=[1, s])) for s in (1, 3, 5)]
    assert by_severity[0] > by_severity[1] > by_severity[2], by_severity
    assert by_severity[0] < 40  # severity 1 already changes the image


def test_each_image_gets_its_own_severity():
    x = natural_like(4)
    mixed = apply_condition("defocus", x, np.array([1, 5, 1, 5]), seed=0)  # no randomness in defocus
    assert np.array_equal(mixed[0], apply_condition("defocus", x[:1], np.array([1]), seed=0)[0])
    assert np.array_equal(mixed[1], apply_condition("defocus", x[1:2], np.array([5]), seed=0)[0])


def test_night_infrared_has_no_colour_and_underwater_loses_red():
    x = natural_like()
    night = apply_condition("night_infrared", x, np.full(len(x), 3), seed=0).astype(int)
    assert (night[..., 0] == night[..., 1]).all() and (night[..., 1] == night[..., 2]).all()
    water = apply_condition("underwater", x, np.full(len(x), 5), seed=0).astype(float)
    assert water[..., 0].mean() < 0.5 * x[..., 0].mean() and water[..., 2].mean() > water[..., 0].mean()


def test_motion_kernel_is_a_normalised_line_along_its_angle():
    k = motion_kernels(10, 2, np.array([0.0, 90.0]))
    assert torch.allclose(k.sum(dim=(1, 2)), torch.ones(2))
    centre = k.shape[-1] // 2
    assert k[0, centre, centre:].sum() == pytest.approx(1.0)  # 0 degrees: along the row, one side
    assert k[1, centre:, centre].sum() == pytest.approx(1.0)  # 90 degrees: along the column


@pytest.mark.parametrize(
    "images, severity",
    [
        (np.zeros((2, 8, 8, 3), np.float32), [1, 1]),  # not uint8
        (np.zeros((2, 8, 8), np.uint8), [1, 1]),  # no channels
        (np.zeros((2, 8, 8, 3), np.uint8), [0, 1]),  # severity out of range
        (np.zeros((2, 8, 8, 3), np.uint8), [1]),  # one severity for two images
    ],
)
def test_malformed_input_is_refused(images, severity):
    with pytest.raises(ValueError):
        apply_condition("fog", images, np.array(severity), seed=0)


def test_unknown_condition_is_refused():
    with pytest.raises(ValueError, match="unknown condition"):
        apply_condition("sandstorm", natural_like(1), np.array([1]), seed=0)


def test_cache_builds_every_condition_once_and_mixes_them(synthetic_root, tmp_path):
    from trainer.data.cache import load_dataset

    data = load_dataset(synthetic_root, cache_dir=tmp_path / "data", progress=False)
    conditions = ConditionData.open(data, progress=False)
    assert conditions.folder.name.endswith(f"-conditions-v{CONDITIONS_VERSION}")
    fog = conditions.train("fog")
    assert fog.images.shape == data.train.images.shape and np.array_equal(fog.labels, data.train.labels)
    assert np.array_equal(
        np.load(conditions.folder / "fog" / "train_severity.npy"), train_severities("fog", len(data.train))
    )
    assert conditions.val("snow", 5).images.shape == data.val.images.shape
    with pytest.raises(ValueError):
        conditions.val("snow", 4)  # only the reported severities are stored
    meta = json.loads((conditions.folder / "fog" / "meta.json").read_text())
    assert meta["train"] == len(data.train) and meta["build_seconds"] >= 0
    built = (conditions.folder / "fog" / "train_images.npy").stat().st_mtime_ns
    ConditionData.open(data, progress=False)  # already there: not rebuilt
    assert (conditions.folder / "fog" / "train_images.npy").stat().st_mtime_ns == built

    mixture = MixtureSplit(conditions, CONDITION_NAMES, seed=0)
    index = np.arange(len(data.train))
    images, labels = mixture.take(index)
    assert torch.equal(labels, torch.from_numpy(data.train.labels))
    sources = [conditions.train(n).images for n in CONDITION_NAMES]
    origin = [next(i for i, s in enumerate(sources) if np.array_equal(images[j].numpy(), s[j])) for j in index]
    assert len(set(origin)) > 3  # images come from several conditions

    # The CUDA path (on the CPU): the same mixture from the conditions' training images held as device
    # tensors, gathered there, for the same seed.
    on_device = conditions.on(data, torch.device("cpu"))
    assert type(on_device.train("fog")).__name__ == "DeviceSplit" and on_device.train("fog") is on_device.train("fog")
    for rows in (index, np.array([5, 1, 5, 9])):
        a, b = MixtureSplit(conditions, CONDITION_NAMES, seed=3), MixtureSplit(on_device, CONDITION_NAMES, seed=3)
        for _ in range(2):
            (xa, ya), (xb, yb) = a.take(rows), b.take(rows)
            assert torch.equal(xa, xb) and torch.equal(ya, yb)


def test_stage3_batches_over_conditions_on_the_device_are_the_memory_mapped_ones(synthetic_root, tmp_path):
    from trainer.batches import task_batches
    from trainer.data.cache import load_dataset
    from trainer.data.tasks import TaskSampler

    data = load_dataset(synthetic_root, cache_dir=tmp_path / "data", progress=False)
    conditions = ConditionData.open(data, progress=False)
    on_device = conditions.on(data, torch.device("cpu"))
    names = ("clean", "fog", "underwater")
    sampler = TaskSampler(data.hierarchy, k=4)
    a = task_batches(data.train, sampler, 16, 2, np.random.default_rng(7), 5, [conditions.train(n) for n in names])
    b = task_batches(data.train, sampler, 16, 2, np.random.default_rng(7), 5, [on_device.train(n) for n in names])
    for x, y in zip(a, b, strict=True):
        assert x.conditions == y.conditions and torch.equal(x.images, y.images) and torch.equal(x.labels, y.labels)


def test_conditions_built_in_worker_processes_are_the_same_bytes(synthetic_root, tmp_path):
    from trainer.data.cache import load_dataset

    one, two = (load_dataset(synthetic_root, cache_dir=tmp_path / d, progress=False) for d in ("one", "two"))
    serial, parallel = ConditionData.open(one, progress=False), ConditionData.open(two, progress=False, workers=3)
    for name in CONDITION_NAMES[1:]:
        for file in ("train_images.npy", "train_severity.npy", "val_s3_images.npy", "val_s5_images.npy"):
            assert (serial.folder / name / file).read_bytes() == (parallel.folder / name / file).read_bytes()


def test_headroom_summary_is_the_mean_over_non_clean_conditions():
    per = {
        row: {c: ({"clean": 50.0} if c == "clean" else {"s3": 40.0, "s5": 30.0}) for c in CONDITION_NAMES}
        for row in ROWS
    }
    per["condition_oracle"]["fog"] = {"s3": 48.0, "s5": 38.0}  # +8 on one of eight conditions
    result = summarise(per)
    assert result["accuracy"]["generic_cs"] == 35.0 and result["clean"]["generic_cs"] == 50.0
    assert result["headroom_per_condition"]["fog"] == 8.0
    assert result["headroom_mean_non_clean"] == 1.0
    assert "| (e) - (b) |" in table({**result, "per_condition": per})


def test_ceiling_summary_is_the_condition_network_minus_the_longer_generic_one():
    from lab.condition_ceiling import ROWS as CEILING_ROWS
    from lab.condition_ceiling import summarise as ceiling_summary
    from lab.condition_ceiling import table as ceiling_table

    cells = {row: {c: ({"clean": 50.0} if c == "clean" else {"s3": 40.0, "s5": 30.0}) for c in CONDITION_NAMES}
             for row in CEILING_ROWS}
    cells["condition_oracle"]["underwater"] = {"s3": 56.0, "s5": 46.0}   # +16 on one of eight conditions
    cells["generic_more"]["fog"] = {"s3": 36.0, "s5": 26.0}              # the longer generic network: -4 on fog
    result = ceiling_summary(cells, CONDITION_NAMES)
    assert result["ceiling_minus_generic_more_per_condition"]["underwater"] == 16.0
    assert result["ceiling_minus_generic_more_per_condition"]["fog"] == 4.0
    assert result["ceiling_minus_generic_more"] == 2.5 and result["ceiling_minus_generic"] == 2.0
    assert "**+2.50**" in ceiling_table(result, CONDITION_NAMES)


def test_width_ceiling_headline_is_the_condition_network_minus_the_same_compute_generic_one():
    from lab.condition_width import ROWS as WIDTH_ROWS
    from lab.condition_width import summarise as width_summary
    from lab.condition_width import table as width_table

    cells = {row: {c: ({"clean": 50.0} if c == "clean" else {"s3": 40.0, "s5": 30.0}) for c in CONDITION_NAMES}
             for row in WIDTH_ROWS}
    cells["condition_oracle"]["fog"] = {"s3": 48.0, "s5": 38.0}                # +8 on one of eight conditions
    cells["generic_same_compute"]["snow"] = {"s3": 44.0, "s5": 34.0}           # the same-compute network: +4 on snow
    result = width_summary(cells, CONDITION_NAMES)
    assert result["ceiling_minus_same_compute_per_condition"] == {
        **{c: 0.0 for c in CONDITION_NAMES}, "fog": 8.0, "snow": -4.0}
    assert result["ceiling_minus_same_compute"] == 0.5 and result["ceiling_minus_generic_more"] == 1.0
    assert "**+0.50**" in width_table(result, CONDITION_NAMES)


def test_the_config_knows_the_condition_set_and_one_basis_per_condition():
    from trainer.config import CONDITION_SET, PRESETS, TrainConfig

    assert CONDITION_SET == CONDITION_NAMES
    assert PRESETS["conditions"].num_bases == len(CONDITION_NAMES)
    with pytest.raises(ValueError, match="num_bases must be 2"):
        TrainConfig(conditions=("clean", "fog"), num_bases=3)
    with pytest.raises(ValueError, match="must not repeat"):
        TrainConfig(conditions=("fog", "fog"), num_bases=2)
    with pytest.raises(ValueError, match="every training image"):
        TrainConfig(conditions=("clean", "fog"), num_bases=2, stage1_image_fraction=0.5)


def test_stage3_batches_take_each_task_from_its_own_condition():
    from trainer.batches import task_batches
    from trainer.data.cache import Split
    from trainer.data.hierarchy import ClassHierarchy
    from trainer.data.tasks import TaskSampler

    labels = np.repeat(np.arange(6), 10)
    splits = [Split(np.full((60, 4, 4, 3), 10 * (c + 1), np.uint8), labels) for c in range(3)]
    hierarchy = ClassHierarchy.flat([f"n{c}" for c in range(6)])
    sampler = TaskSampler(hierarchy, k=3)
    rng = np.random.default_rng(0)
    seen = set()
    for batch in task_batches(splits[0], sampler, 12, 3, rng, num_batches=20, condition_splits=splits):
        assert len(batch.conditions) == 3
        for g, c in enumerate(batch.conditions):
            assert (batch.images[g] == 10 * (c + 1)).all()
            seen.add(c)
    assert seen == {0, 1, 2}


def test_task_embeddings_name_the_condition():
    from trainer.task_embedding import TaskEmbedder

    rng = np.random.default_rng(0)
    plain = rng.normal(size=(5, 8)).astype(np.float32)
    tables = rng.normal(size=(2, 5, 8)).astype(np.float32)
    embedder = TaskEmbedder("text", plain, tables)
    tasks = [np.array([0, 1]), np.array([2, 3])]
    by_condition = embedder(tasks, conditions=[1, 0])
    assert torch.allclose(by_condition[0], torch.nn.functional.normalize(torch.from_numpy(tables[1][[0, 1]].mean(0)),
                                                                         dim=0))
    assert not torch.allclose(by_condition, embedder(tasks))
    with pytest.raises(ValueError, match="no condition embeddings"):
        TaskEmbedder("text", plain)(tasks, conditions=[0, 0])


def test_a_run_over_conditions_trains_a_basis_per_condition(tmp_path):
    from trainer.checkpoints import load_state
    from trainer.config import TrainConfig
    from trainer.run import condition_embeddings, load_taper, make_context, run
    from trainer.rundir import RunDir

    names = ["clean", "night_infrared", "fog"]
    out = run(tmp_path / "cond", "tiny", {"conditions": names, "num_bases": 3, "stage1_epochs": 1,
                                          "stage3_epochs": 1, "baseline": False}, progress=False)
    shards = json.loads(RunDir(out).shards.read_text())
    assert shards["conditions"] == names
    bases = [load_state(RunDir(out).basis(q)) for q in range(3)]
    stage1 = load_state(RunDir(out).model("stage1"))
    key = next(k for k in stage1 if k.endswith("running_mean"))
    # Each basis fine-tuned on its own condition: the night basis's input statistics are its own.
    assert not torch.equal(bases[0][key], bases[1][key]) and not torch.equal(bases[1][key], bases[2][key])
    tables = condition_embeddings(out)
    assert tables.shape[0] == 3 and not np.allclose(tables[0], tables[1])
    config = TrainConfig.load(RunDir(out).config)
    taper, embedder = load_taper(make_context(out, config, progress=False), out)
    tasks = [np.array([0, 1, 2])] * 3
    alphas = taper.alpha(embedder(tasks, conditions=[0, 1, 2]))
    assert alphas.shape == (3, 4, 3) and torch.allclose(alphas.sum(-1), torch.ones(3, 4))


def test_a_run_over_conditions_on_the_cuda_path_trains_what_the_cpu_path_trains(tmp_path, monkeypatch):
    """`--device cuda` over conditions: the training images of every condition on the device, batches
    gathered there. On the CPU (the CUDA path's data handling without a GPU) its networks equal the plain
    run's to the bit, stage 1 over the mixture and each condition's basis alike."""
    from trainer.checkpoints import load_state
    from trainer.data.cache import DeviceSplit
    from trainer.device import TrainDevice
    from trainer.run import run
    from trainer.rundir import RunDir

    cuda_path_on_cpu = TrainDevice(torch.device("cpu"), bf16=False, data_on_device=True)
    overrides = {"conditions": ["clean", "night_infrared", "fog"], "num_bases": 3, "stage1_epochs": 1,
                 "baseline": False}
    gathered = set()   # the device splits batches were gathered from: clean's and each condition's
    device_take = DeviceSplit.take
    monkeypatch.setattr(DeviceSplit, "take", lambda self, index: gathered.add(id(self)) or device_take(self, index))
    plain = run(tmp_path / "cpu", "tiny", overrides, progress=False, until="stage2")
    assert not gathered
    device = run(tmp_path / "dev", "tiny", overrides, progress=False, until="stage2", device=cuda_path_on_cpu)
    assert len(gathered) == 3
    for name in ("stage1", "basis0", "basis1", "basis2"):
        path = RunDir(plain).model(name) if name == "stage1" else RunDir(plain).basis(int(name[-1]))
        other = RunDir(device).model(name) if name == "stage1" else RunDir(device).basis(int(name[-1]))
        a, b = load_state(path), load_state(other)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name


def test_the_conditions_report_summarises_every_row_and_checks_the_targets():
    from lab.condition_report import ROWS as REPORT_ROWS
    from lab.condition_report import summarise as report_summary
    from lab.condition_report import targets

    names = CONDITION_NAMES
    cells = {row: {c: ({"clean": 50.0} if c == "clean" else {"s3": 40.0, "s5": 30.0}) for c in names}
             for row in REPORT_ROWS}
    cells["taper"]["fog"] = {"s3": 60.0, "s5": 50.0}            # +20 on one of eight non-clean conditions
    summary = report_summary(cells, names)
    assert summary["accuracy"]["generic_cs"] == 35.0 and summary["clean"]["taper"] == 50.0
    assert summary["taper_minus_generic"] == 2.5 and summary["taper_minus_generic_per_condition"]["fog"] == 20.0
    met = {k: v["met"] for k, v in targets(summary, names).items()}
    assert met == {"taper_minus_generic >= +3.0": False, "no condition below (b) - 0.5": True,
                   "clean not below (b) - 0.5": True, "taper_minus_best_of_c_d >= +1.0": True,
                   "taper_minus_uniform_average >= +1.0": True}


def test_the_conditions_report_reads_the_phrase_target_from_the_resolvers_result(tmp_path):
    from lab.condition_report import phrase_scores

    assert phrase_scores(tmp_path / "absent.json")["precision"] is None
    scored = {"phrasings": {"n": 36, "precision": 0.9, "recall": 0.95},
              "together": {"n": 195, "precision": 0.7, "recall": 0.75}}
    (tmp_path / "phrases.json").write_text(json.dumps(scored))
    read = phrase_scores(tmp_path / "phrases.json")
    assert (read["precision"], read["recall"], read["met"]) == (0.9, 0.95, True)
    assert read["pooled_with_negatives"] == scored["together"]
    scored["phrasings"]["recall"] = 0.72
    (tmp_path / "phrases.json").write_text(json.dumps(scored))
    assert phrase_scores(tmp_path / "phrases.json")["met"] is False


class _LetterEncoder:
    """A stand-in encoder: a text's unit vector of letter counts (similar words, similar vectors)."""

    def encode(self, texts):
        out = np.zeros((len(texts), 26), np.float32)
        for i, t in enumerate(texts):
            for ch in t:
                if "a" <= ch <= "z":
                    out[i, ord(ch) - 97] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def test_the_condition_phrase_resolver_names_exact_and_near_phrases_and_keeps_tau():
    from lab.condition_phrase_resolver import ConditionPhraseResolver, choose_tau, windows

    assert windows("Owls, at night!") == ["owls", "owls at", "owls at night", "at", "at night", "night"]
    resolver = ConditionPhraseResolver(_LetterEncoder(), {"fog": ["in fog", "foggy"], "night": ["at night"]})
    assert resolver.scores("owls at night")["night"] == pytest.approx(1.0)            # an exact span
    assert resolver.scores("owls at night", exact=False, leave_out="at night")["night"] < 1.0
    resolver.tau = 0.95
    assert resolver.decide(resolver.scores("birds in fog")) == "fog"
    assert resolver.decide(resolver.scores("zebra")) is None                        # nothing reaches tau
    positives = [("fog", {"fog": 0.9, "night": 0.1}), ("night", {"fog": 0.2, "night": 0.7})]
    negatives = [{"fog": 0.5, "night": 0.3}]
    tau, counts = choose_tau(positives, negatives)
    assert tau == 0.7 and counts == {"right": 3, "wrong": 0}


def test_condition_fewshot_draws_each_class_from_its_own_images_and_reads_the_choice():
    from lab.condition_fewshot import chosen_candidate, examples_for
    from trainer.data.cache import Split

    labels = np.repeat(np.arange(4), 6)
    images = np.arange(len(labels), dtype=np.uint8)[:, None, None, None] * np.ones((1, 2, 2, 3), np.uint8)
    drawn = examples_for(Split(images, labels), np.array([1, 3]), ["a", "b", "c", "d"], 4, np.random.default_rng(0))
    assert sorted(drawn) == ["b", "d"]
    for name, c in (("b", 1), ("d", 3)):
        rows = [int(image[0, 0, 0]) for image in drawn[name]]
        assert len(set(rows)) == 4 and all(labels[r] == c for r in rows)
    assert chosen_candidate(["2 classes from 10 example images", "basis 3: trained rows' accuracy 0.900, margin 0.1",
                             "selected 'basis 3'"]) == "basis 3"
    assert chosen_candidate(["selected 'mixer: class names'"]) == "mixer: class names"


def test_a_stream_picks_the_basis_whose_batch_norm_statistics_it_matches():
    from lab.bn_recalibration import recalibrated
    from lab.condition_stream import BatchNormInputs, basis_pass, choose, mean_entropy, statistics_mismatch
    from trainer.models import ResNet18, ResNetConfig

    torch.manual_seed(0)
    model = ResNet18(ResNetConfig(stem="imagenet", width=0.125, num_classes=20))
    bright, dark = torch.randn(32, 3, 32, 32) + 1.0, 0.3 * torch.randn(32, 3, 32, 32) - 1.0
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    bases = [recalibrated(model, weights, bright[:16]), recalibrated(model, weights, dark[:16])]
    probe = ResNet18(ResNetConfig(stem="imagenet", width=0.125, num_classes=20))
    recorder = BatchNormInputs(probe)
    x = torch.cat([bright[16:], dark[16:]])
    passes = [basis_pass(probe, recorder, state, x) for state in bases]
    # A stream's statistics are exact averages of its images' moments: the stem's input (which no batch norm
    # has touched) over the first 16 images equals a batch's statistics (recalibrated keeps the unbiased var).
    means, squares = passes[0]["moments"][0]
    stem = recalibrated(model, weights, x[:16])
    n = 16 * 16 * 16   # images x H x W of the stem's 16 x 16 output at 32 px (stride 2)
    mu = means[:16].mean(0)
    assert torch.allclose(mu, stem["stem.bn1.running_mean"], atol=1e-5)
    assert torch.allclose((squares[:16].mean(0) - mu * mu) * n / (n - 1), stem["stem.bn1.running_var"], rtol=1e-3)
    bright_rows, dark_rows = np.arange(16), np.arange(16, 32)
    assert statistics_mismatch(passes[0]["moments"], passes[0]["running"], bright_rows) < \
        statistics_mismatch(passes[1]["moments"], passes[1]["running"], bright_rows)
    assert choose(passes, bright_rows, np.arange(20))["bn"] == 0
    assert choose(passes, dark_rows, np.arange(20))["bn"] == 1
    task = np.array([2, 5, 7])
    assert mean_entropy(torch.zeros(4, 20), task) == pytest.approx(np.log(3))
    assert mean_entropy(torch.zeros(4, 20).index_fill_(1, torch.tensor([5]), 50.0), task) < 1e-6


def test_streams_are_the_same_draws_for_every_reader():
    from lab.condition_headroom import STREAMS, stream_rows

    class Rows:   # the two things stream_rows reads of an evaluator
        labels = torch.from_numpy(np.repeat(np.arange(30), 10))

        def task_index(self, task):
            return torch.from_numpy(np.flatnonzero(np.isin(self.labels.numpy(), task)))

    tasks = [np.arange(20), np.arange(5, 25)]
    first, again, other = (stream_rows(Rows(), tasks, seed) for seed in (3, 3, 5))
    assert set(first) == set(STREAMS)
    for name, k in STREAMS.items():
        for i, task in enumerate(tasks):
            rows = first[name][i]
            assert len(rows) == abs(k) and len(set(rows)) == abs(k)
            assert np.isin(Rows.labels.numpy()[rows], task).all()
            assert np.array_equal(rows, again[name][i])
    assert np.array_equal(first["sorted_64"][1], np.arange(50, 114))                 # the first 64 in class order
    assert not np.array_equal(first["iid_64"][0], other["iid_64"][0])                # the seed moves the draws
