"""A whole run: data, class embeddings, the three stages, the baseline and ablations, into a run directory
(its layout: trainer.rundir). Every stage writes its result last; a stage whose result exists is skipped
on resume, and a stage cut off mid-way resumes from its last epoch checkpoint.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import torch

from sdk.media.cache import cache_root
from sdk.media.preprocessing import Preprocessing

from . import distributed
from .basis_bank import BasisBank
from .checkpoints import load_state, save_state
from .config import CONFIG_GROUPS, PRESETS, TrainConfig, fit_to_classes, fit_to_start
from .data.cache import DecodedDataset, DeviceSplit, load_dataset
from .data.holdout import held_out_classes, without_classes
from .data.image_subsets import with_train_images_per_class
from .data.synthetic import make_synthetic_dataset
from .data.tasks import TaskSampler
from .device import CPU, TrainDevice
from .headroom import ROUTING_PRIORS, one_hot_members
from .loop import JsonLog
from .mixer import MixerPredictor, fit_to_router
from .models import ResNet18, ResNetConfig
from .rundir import CLASSES, OUTPUT_INPUTS, RunDir, stage3_dir
from .shards import expand_shards, hierarchy_shards
from .stages import StageContext, train_continuation, train_stage1, train_stage2_basis, train_stage3
from .task_embedding import TaskEmbedder

STAGE3_VARIANTS = {  # name -> (description kind, mixer blocks, uses a mixer, bases from stage 2)
    "taper": ("text", 4, True, True),
    "naive": ("text", 4, True, False),
    "fixed_uniform": ("text", 4, False, True),
    "bow": ("bow", 4, True, True),
    "single_mixer": ("text", 1, True, True),
}


def resolve_config(run_dir: Path, preset: str | None, overrides: dict, reuse_from: Path | None = None) -> TrainConfig:
    """The run's saved configuration; for a new run, the preset's (or, with no preset, the configuration of
    the run it reuses, so `--reuse-from old --set stage3_seed=1` needs no preset name) with `overrides`."""
    saved = RunDir(run_dir).config
    if saved.exists():
        config = TrainConfig.load(saved)
        if overrides and config.with_overrides(**overrides) != config:
            changed = sorted(k for k, v in overrides.items() if getattr(config, k, None) != v)
            raise ValueError(f"{run_dir} exists with another configuration ({', '.join(changed)} differ); to "
                             f"change it, train into a new --out and add --reuse-from {run_dir}: the stages the "
                             "change does not touch are copied, not trained again")
        return config
    if preset is None and reuse_from is not None and RunDir(reuse_from).config.exists():
        return TrainConfig.load(RunDir(reuse_from).config).with_overrides(**overrides)
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    config = PRESETS[preset].with_overrides(**overrides)
    data = open_data(config)
    for line in data.report:   # what the cache build found in the images (trainer.data.checks)
        print(f"[data] {line}", flush=True)
    fitted, notes = fit_to_classes(config, data.num_classes, set(overrides))
    fitted, start_notes = fit_to_start(fitted, set(overrides))
    notes += start_notes
    if fitted.stage1_init:   # a start that does not fit is refused before the run directory holds anything
        from .pretrained import load_pretrained

        load_pretrained(ResNet18(network_config(fitted, data.num_classes)), fitted.stage1_init)
    if not data.hierarchy.concepts() and not data.hierarchy.supercategories:
        notes.append("the data has no groups, so group words ('insects') will not resolve in its bundle; a "
                     "vocabulary.toml beside train/ gives display names, aliases and groups (docs/training.md)")
    for note in notes:
        print(f"[run] {note}", flush=True)
    return fitted


def open_all_data(config: TrainConfig, progress: bool = True) -> DecodedDataset:
    """Every class of the run's data set, the held-out ones included."""
    if config.data == "synthetic":
        args = dict(config.synthetic)
        key = "-".join(f"{k}{v}" for k, v in sorted(args.items()))
        root = cache_root() / "synthetic" / f"shapes-{key}"
        if not (root / "supercategories.json").exists():
            make_synthetic_dataset(root, **args)
        return load_dataset(root, image_size=config.input_size, progress=progress)
    return load_dataset(config.data, image_size=config.input_size, progress=progress, strict=config.strict_data)


def open_data(config: TrainConfig, progress: bool = True) -> DecodedDataset:
    """The classes the run trains on (all but `config.holdout_classes` held-out ones and the
    `config.exclude_classes` named ones), with the first `config.train_images_per_class` training images of
    each where that is set."""
    data = open_all_data(config, progress)
    if config.exclude_classes:
        data = without_classes(data, list(config.exclude_classes), "excluded")
    if config.holdout_classes:
        data = without_classes(data, held_out_classes(data.hierarchy, config.holdout_classes))
    if config.train_images_per_class:
        data = with_train_images_per_class(data, config.train_images_per_class)
    return data


def class_embeddings(run_dir: Path, names: list[str], conditions: tuple[str, ...] = ()) -> np.ndarray:
    """The class-name embeddings [C, d] (computed once into the run directory); a run over `conditions`
    also stores each condition's table [K, C, d] there (`condition_embeddings`)."""
    path = RunDir(run_dir).classes
    if not path.exists() and distributed.is_main():
        from sdk.text.encoder import primary_name

        from .data.conditions import condition_phrases
        from .task_embedding import embed_condition_classes
        from .text_encoder import class_name_encoder

        encoder = class_name_encoder()
        primary = [primary_name(n) for n in names]
        tensors = {"text": torch.from_numpy(encoder.embed_class_names(primary))}
        if conditions:
            tensors["conditions"] = torch.from_numpy(
                embed_condition_classes(encoder, primary, condition_phrases(conditions)))
        save_state(path, tensors)
    distributed.barrier()
    return load_state(path)["text"].numpy()


def condition_embeddings(run_dir: Path) -> np.ndarray | None:
    """A run over conditions' per-condition class embeddings [K, C, d] (config.conditions' order), or None."""
    saved = load_state(RunDir(run_dir).classes)
    return saved["conditions"].numpy() if "conditions" in saved else None


def network_config(config: TrainConfig, num_classes: int) -> ResNetConfig:
    """The ResNet-18 a run of `config` trains, over `num_classes` classes."""
    return ResNetConfig(config.stem, config.width, num_classes, config.input_size)


def make_context(run_dir: Path, config: TrainConfig, progress: bool = True, device: TrainDevice = CPU) -> StageContext:
    """The stages' shared inputs; on a GPU the training split is copied there once (`DeviceSplit`), and in
    a run over conditions each condition's training images too, when a stage first asks for them."""
    data = open_data(config, progress)
    conditions = None
    if config.conditions:
        from .data.condition_cache import ConditionData
        from .data.conditions import condition_phrases

        condition_phrases(config.conditions)  # unknown names fail here, before anything is built
        conditions = ConditionData.open(data, progress=progress)
    if device.data_on_device:
        data = dataclasses.replace(data, train=DeviceSplit.of(data.train, device.device))
        conditions = conditions.on(data, device.device) if conditions else None
    model_config = network_config(config, data.num_classes)
    return StageContext(config, data, model_config, Preprocessing(config.input_size), JsonLog(RunDir(run_dir).log),
                        device, conditions)


def load_model(model_config: ResNetConfig, path: Path) -> ResNet18:
    model = ResNet18(model_config)
    model.load_state_dict(load_state(path))
    return model.eval()


def load_stage3(ctx: StageContext, run_dir: Path, variant: str, embed_dim: int):
    from .stages import Stage3Model

    kind, blocks, uses_mixer, _ = STAGE3_VARIANTS[variant]
    bank = BasisBank(ctx.model_config, ctx.config.num_bases)
    mixer = None
    if uses_mixer:
        mixer = MixerPredictor(embed_dim, ctx.config.num_bases, ctx.config.mixer_hidden, blocks=blocks)
    model = Stage3Model(bank, mixer)
    model.load_state_dict(load_state(RunDir(run_dir).stage3_model(variant)))
    return model.eval()


def load_taper(ctx: StageContext, run_dir: Path):
    """A finished run's TAPER (stage-3 model, eval mode) and the text embedder of its class names, the
    pair every script that routes tasks through the trained mixer needs: `model.mixer(embedder(tasks))`."""
    embeddings = load_state(RunDir(run_dir).classes)["text"].numpy()
    embedder = TaskEmbedder(STAGE3_VARIANTS["taper"][0], embeddings, condition_embeddings(run_dir))
    return load_stage3(ctx, run_dir, "taper", embedder.dim), embedder


def output_fields(output: str) -> tuple[str, ...]:
    """The configuration fields an output of a run (a key of trainer.rundir.OUTPUT_INPUTS or a stage-3
    folder) is trained from: `--reuse-from` copies it only when they are unchanged."""
    if output.startswith("stage3"):
        inputs = OUTPUT_INPUTS["stage3"] + (("naive",) if output == stage3_dir("naive") else ())
    else:
        inputs = OUTPUT_INPUTS[output]
    return tuple(f for name in inputs for f in CONFIG_GROUPS.get(name, (name,)))


def reuse_outputs(source: Path, run_dir: Path, config: TrainConfig) -> list[str]:
    """Copy the finished outputs of `source` that `config` would compute identically; returns their names."""
    import shutil

    done = RunDir(source)
    theirs = TrainConfig.load(done.config).to_dict()
    ours = config.to_dict()
    copied = []
    for name in (*OUTPUT_INPUTS, *(stage3_dir(v) for v in STAGE3_VARIANTS)):
        src, dst = source / name, run_dir / name
        if done.is_done(name) and not dst.exists() and all(theirs[f] == ours[f] for f in output_fields(name)):
            (shutil.copytree if src.is_dir() else shutil.copy)(src, dst)
            copied.append(name)
    return copied


def record_reused_wall_times(source: Path, run_dir: Path, copied: list[str]) -> None:
    """Carry the source's wall time of each reused stage into this run's metrics (named as reused)."""
    source_metrics = RunDir(source).metrics
    theirs = json.loads(source_metrics.read_text()).get("wall_time_s", {}) if source_metrics.exists() else {}
    path = RunDir(run_dir).metrics
    metrics = json.loads(path.read_text()) if path.exists() else {"wall_time_s": {}}
    for name in copied:
        key = {CLASSES: "class_embeddings", "stage3": "stage3_taper"}.get(name, name)
        if key in theirs:
            metrics["wall_time_s"][key] = theirs[key]
            metrics.setdefault("reused", {})[key] = str(source)
    path.write_text(json.dumps(metrics, indent=1))


STAGES = ("stage1", "stage2", "stage3")


def prepare(run_dir: Path, preset: str, overrides: dict | None = None) -> Path:
    """A run directory with its configuration and class embeddings and nothing trained: what a machine
    without the text encoder (a lent GPU) needs to `run` it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    config = resolve_config(run_dir, preset, overrides or {})
    config.save(RunDir(run_dir).config)
    class_embeddings(run_dir, open_data(config, progress=False).names, config.conditions)
    return run_dir


def run(run_dir: Path, preset: str | None = None, overrides: dict | None = None, progress: bool = True,
        reuse_from: Path | None = None, until: str = "stage3", device: TrainDevice = CPU) -> Path:
    """Train (or resume) a run on `device`; `until` stops after that stage (the baseline belongs to stage
    1's side: it is trained with stage 1 unless `baseline` is false)."""
    if until not in STAGES:
        raise ValueError(f"until must be one of {STAGES}, got {until!r}")
    distributed.init(device.distributed_backend)
    device.make_current()
    run_dir.mkdir(parents=True, exist_ok=True)
    config = resolve_config(run_dir, preset, overrides or {}, reuse_from)
    if reuse_from is not None and distributed.is_main():
        copied = reuse_outputs(reuse_from, run_dir, config)
        record_reused_wall_times(reuse_from, run_dir, copied)
        print(f"[run] reused from {reuse_from}: {copied or 'nothing'}", flush=True)
    distributed.barrier()
    threads = torch.get_num_threads()
    if config.threads:
        torch.set_num_threads(config.threads)
    try:
        return _train(run_dir, config, progress, until, device)
    finally:   # `threads` is the run's, not the calling process's from then on (a notebook, a test worker)
        torch.set_num_threads(threads)


def _train(run_dir: Path, config: TrainConfig, progress: bool, until: str, device: TrainDevice) -> Path:
    """`run`'s stages, each skipped where its output exists, on the threads the run asked for."""
    if distributed.is_main():
        config.save(RunDir(run_dir).config)
    metrics_path = RunDir(run_dir).metrics
    metrics = json.loads(metrics_path.read_text()) if metrics_path.exists() else {"wall_time_s": {}}
    metrics.setdefault("devices", [])
    if device.describe() not in metrics["devices"]:   # a run resumed elsewhere lists both
        metrics["devices"].append(device.describe())

    def timed(name: str, fn):
        start = time.perf_counter()
        result = fn()
        if distributed.is_main():
            metrics["wall_time_s"][name] = metrics["wall_time_s"].get(name, 0) + round(time.perf_counter() - start, 1)
            metrics_path.write_text(json.dumps(metrics, indent=1))
        return result

    ctx = timed("data", lambda: make_context(run_dir, config, progress, device))
    embeddings = timed("class_embeddings", lambda: class_embeddings(run_dir, ctx.data.names, config.conditions))
    stage1 = timed("stage1", lambda: _cached_model(ctx, RunDir(run_dir), "stage1", lambda d: train_stage1(ctx, d)))
    if config.baseline:
        timed("baseline", lambda: _cached_model(ctx, RunDir(run_dir), "baseline",
                                                lambda d: train_continuation(ctx, d, stage1)))
    if until == "stage1":
        return run_dir
    bases = timed("stage2", lambda: _stage2(ctx, run_dir, stage1))
    if until == "stage2":
        return run_dir
    sampler = TaskSampler(ctx.data.hierarchy, k=config.task_k, mode=config.task_mode)
    for variant in ("taper", *config.ablations):
        timed(f"stage3_{variant}", lambda v=variant: _stage3(ctx, run_dir, v, bases, embeddings, sampler))
    return run_dir


def _cached_model(ctx: StageContext, run: RunDir, stage: str, train) -> ResNet18:
    path = run.model(stage)
    if not path.exists():
        model = train(run.stage(stage))
        if distributed.is_main():
            save_state(path, model.state_dict())
        distributed.barrier()
    return load_model(ctx.model_config, path)


def read_shards(run_dir: Path, num_bases: int) -> np.ndarray:
    """The run's stage-2 shards as membership [Q, C] (runs before overlapping shards stored only the partition)."""
    saved = json.loads(RunDir(run_dir).shards.read_text())
    shard_of = np.array(saved["shard_of_class"])
    if "members" not in saved:
        return one_hot_members(shard_of, num_bases)
    members = np.zeros((num_bases, len(shard_of)), bool)
    for q, rows in enumerate(saved["members"]):
        members[q, rows] = True
    return members


def _stage2(ctx: StageContext, run_dir: Path, stage1: ResNet18) -> list[dict[str, torch.Tensor]]:
    run = RunDir(run_dir)
    stage_dir = run.stage("stage2")
    stage_dir.mkdir(parents=True, exist_ok=True)
    distances = ctx.data.hierarchy.distances
    if ctx.config.conditions:  # basis q is condition q's, over every class
        shards = np.zeros(len(distances), np.int64)
        members = np.ones((ctx.config.num_bases, len(distances)), bool)
    else:
        shards = hierarchy_shards(distances, ctx.config.num_bases, seed=ctx.config.seed)
        size = ctx.config.stage2_shard_size
        members = expand_shards(distances, shards, size) if size else one_hot_members(shards, ctx.config.num_bases)
    if distributed.is_main():
        run.shards.write_text(json.dumps(
            {"shard_of_class": shards.tolist(), "members": [np.flatnonzero(m).tolist() for m in members],
             "conditions": list(ctx.config.conditions)}))
    for q in range(ctx.config.num_bases):  # independent fine-tunes, spread over ranks
        path = run.basis(q)
        if q % distributed.world_size() == distributed.rank() and not path.exists():
            save_state(path, train_stage2_basis(ctx, stage_dir, stage1, np.flatnonzero(members[q]), q).state_dict())
    distributed.barrier()
    return [load_state(run.basis(q)) for q in range(ctx.config.num_bases)]


def _fit_mixer_prior(run_dir: Path, config: TrainConfig, mixer: MixerPredictor, embedder: TaskEmbedder,
                     sampler: TaskSampler, seed: int) -> float:
    """Fit the mixer to the run's routing prior before stage 3 (trainer.mixer.fit_to_router); over field
    conditions every prior is the task's own condition's basis (stage 2 shards by condition)."""
    members = read_shards(run_dir, config.num_bases)
    classes = members.shape[1]
    if config.conditions:
        def sample(rng):  # a (task, condition) pair
            return sampler.sample(int(rng.integers(classes)), rng), int(rng.integers(config.num_bases))

        return fit_to_router(mixer, lambda pairs: embedder([t for t, _ in pairs], conditions=[c for _, c in pairs]),
                             sample, lambda pair: np.eye(config.num_bases, dtype=np.float32)[pair[1]], seed=seed)
    router = ROUTING_PRIORS[config.stage3_mixer_init]
    return fit_to_router(mixer, embedder, lambda rng: sampler.sample(int(rng.integers(classes)), rng),
                         lambda task: router(members, task), seed=seed)


def _stage3(ctx: StageContext, run_dir: Path, variant: str, bases, embeddings: np.ndarray, sampler: TaskSampler):
    stage_dir = RunDir(run_dir).stage(stage3_dir(variant))
    path = RunDir(run_dir).stage3_model(variant)
    if path.exists():
        return
    kind, blocks, uses_mixer, from_stage2 = STAGE3_VARIANTS[variant]
    config = ctx.config
    seed = config.stage_seed("stage3")
    torch.manual_seed(seed + 3)
    if from_stage2:
        bank = BasisBank.from_state_dicts(ctx.model_config, bases)
        epochs = config.stage3_epochs
    else:  # naive: bases from scratch, stage 3 only, by default for as many epochs as all three stages
        bank = BasisBank.from_state_dicts(ctx.model_config, [ResNet18(ctx.model_config).state_dict()
                                                             for _ in range(config.num_bases)])
        epochs = config.naive_epochs or config.stage1_epochs + config.stage2_epochs + config.stage3_epochs
    embedder = TaskEmbedder(kind, embeddings, condition_embeddings(run_dir))
    mixer = MixerPredictor(embedder.dim, config.num_bases, config.mixer_hidden, blocks=blocks) if uses_mixer else None
    if mixer is not None and config.stage3_mixer_init != "uniform":
        kl = _fit_mixer_prior(run_dir, config, mixer, embedder, sampler, seed)
        ctx.log.write(stage=stage_dir.name, event="mixer_fitted_to_router", kl=round(kl, 4))
    model = train_stage3(ctx, stage_dir, bank, mixer, embedder, sampler, epochs, from_scratch=not from_stage2)
    if distributed.is_main():
        save_state(path, model.state_dict())
    distributed.barrier()
