"""`python -m trainer eval runs/<name>`: every method on the same fixed task sets -> bench.json + bench.md."""

from __future__ import annotations

import json
import platform
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from sdk.text.encoder import primary_name

from .basis_bank import BasisBank
from .checkpoints import load_state
from .config import TrainConfig
from .data.errors import DataError
from .data.tasks import TaskSampler
from .device import device_name
from .evaluate import Evaluator, pairwise_similarity_correlation
from .headroom import (
    best_single_basis,
    best_single_basis_crossval,
    majority_shard_accuracy,
    mean_margin,
    shard_router_alpha,
    specialist_margins,
)
from .mixer import MixerPredictor
from .models import NUM_BLOCKS
from .results import run_wall_times
from .run import (
    STAGE3_VARIANTS,
    load_model,
    load_stage3,
    make_context,
    output_fields,
    read_shards,
)
from .rundir import RunDir
from .task_embedding import TaskEmbedder
from .text_encoder import class_name_encoder

ROW_ORDER = ["standard", "classifier_selection", "stage1_selection", "naive", "shard_basis", "best_single_basis",
             "best_single_basis_crossval", "uniform_average", "shard_router", "fixed_uniform", "taper", "bow",
             "single_mixer", "taper_no_selection"]


def headroom_of(run: RunDir) -> dict | None:
    """The per-task fine-tuning oracle's summary for the report, from <run>/oracle.json (written by
    `python -m lab oracle`, which costs training and is run separately); None without it."""
    if not run.oracle.exists():
        return None
    o = json.loads(run.oracle.read_text())
    return {"per_task_finetune": o["per_task_finetune"], "per_task_finetune_cs": o["per_task_finetune_cs"],
            "gain": o["gain"], "tasks": len(o["tasks"]), "reference": o["reference"]}


def evaluate_run(run_dir: Path, progress: bool = True, seed_runs: Sequence[Path] = (),
                 device: torch.device | str = "cpu") -> dict:
    """Every method of a finished run on the fixed task sets. `seed_runs`: runs made from this one with
    `--reuse-from` and only another `stage3_seed`; their TAPER on the same tasks gives `stage3_seed_std`.
    `device`: where the networks run and the bases are mixed (the scoring stays on the CPU)."""
    run = RunDir(run_dir)
    config = TrainConfig.load(run.config)
    seed_configs = [_check_seed_run(config, path) for path in seed_runs]
    ctx = make_context(run_dir, config, progress)
    evaluator = Evaluator(ctx.data, ctx.model_config, ctx.preprocessing, config.eval_images_per_class,
                          device=device)
    embeddings = load_state(run.classes)["text"].numpy()
    # Without a separate baseline (the demo preset), the stage-1 network is the generic one: its rows are
    # then the same network's (the result's "baseline_network" says so).
    baseline = load_model(ctx.model_config, run.model("baseline" if config.baseline else "stage1")).state_dict()
    stage1 = load_model(ctx.model_config, run.model("stage1")).state_dict()
    bases = [load_state(run.basis(q)) for q in range(config.num_bases)]
    members = read_shards(run_dir, config.num_bases)
    variants = {v: load_stage3(ctx, run_dir, v, TaskEmbedder(STAGE3_VARIANTS[v][0], embeddings).dim).to(device)
                for v in ("taper", *config.ablations) if run.stage3_model(v).exists()}
    uniform = torch.full((NUM_BLOCKS, config.num_bases), 1.0 / config.num_bases)

    protocols = {"neighbourhood": TaskSampler(ctx.data.hierarchy, k=config.task_k)}
    if ctx.data.hierarchy.supercategories:
        protocols["supercategory"] = TaskSampler(ctx.data.hierarchy, k=config.task_k, mode="supercategory")

    start = time.perf_counter()
    # Task-independent networks: logits over val once, then masked per task for every seed and protocol.
    baseline_logits, stage1_logits = evaluator.logits(baseline), evaluator.logits(stage1)
    shard_logits = [evaluator.logits(b) for b in bases]
    uniform_logits = {name: evaluator.logits(model.bank.state_dict_for(uniform)) for name, model in variants.items()}
    per_protocol: dict[str, dict[str, list[float]]] = {}
    margins: list[list[float | None]] = []  # per seed, per basis (neighbourhood tasks)
    for protocol, sampler in protocols.items():
        rows: dict[str, list[float]] = {}
        for seed in config.eval_seeds:
            tasks = sampler.evaluation_tasks(seed)

            def add(name: str, accuracy: float, rows: dict = rows) -> None:
                rows.setdefault(name, []).append(accuracy)

            sel, plain = evaluator.static(baseline_logits, tasks)
            add("standard", plain)
            add("classifier_selection", sel)
            add("stage1_selection", evaluator.static(stage1_logits, tasks)[0])
            add("shard_basis", majority_shard_accuracy(evaluator, shard_logits, members, tasks))
            add("best_single_basis", best_single_basis(evaluator, shard_logits, tasks))
            add("best_single_basis_crossval", best_single_basis_crossval(evaluator, shard_logits, tasks))
            if protocol == "neighbourhood":
                margins.append(specialist_margins(evaluator, shard_logits, baseline_logits, members, tasks))
            for name, model in variants.items():
                embedder = TaskEmbedder(STAGE3_VARIANTS[name][0], embeddings)
                if name == "taper":
                    add("uniform_average", evaluator.static(uniform_logits[name], tasks)[0])
                    add("shard_router", _router_accuracy(evaluator, model.bank, members, tasks))
                if model.mixer is None:
                    add(name, evaluator.static(uniform_logits[name], tasks)[0])
                    continue
                sel, plain = _mixer_accuracy(evaluator, model, embedder(tasks), tasks)
                add(name, sel)
                if name == "taper":
                    add("taper_no_selection", plain)
        per_protocol[protocol] = rows
        if progress:
            print(f"[eval] {protocol}: " + ", ".join(f"{k} {np.mean(v):.1f}" for k, v in rows.items()), flush=True)

    taper = variants.get("taper")
    free_language, free_language_note = None, None
    if taper is not None:
        try:
            glosses = ctx.data.hierarchy.descriptions   # Tiny ImageNet's: WordNet's glosses (trainer/data/wordnet.py)
            if not all(glosses):
                raise DataError(f"{sum(not g for g in glosses)} of {len(glosses)} classes have no description in the "
                                "vocabulary (the free-language rows need one per class)")
            encoder = class_name_encoder()
            gloss_embeddings = np.concatenate([encoder.encode(glosses[i:i + 64]) for i in range(0, len(glosses), 64)])
            accuracies = []
            for seed in config.eval_seeds:
                tasks = protocols["neighbourhood"].evaluation_tasks(seed)
                accuracies.append(_mixer_accuracy(evaluator, taper, TaskEmbedder("text", gloss_embeddings)(tasks),
                                                  tasks)[0])
            free_language = float(np.mean(accuracies))
        except DataError as e:  # e.g. no WordNet glosses on this machine, or a vocabulary without descriptions
            free_language_note = str(e)
    tasks0 = protocols["neighbourhood"].evaluation_tasks(config.eval_seeds[0])
    task_emb = TaskEmbedder("text", embeddings)(tasks0)
    pearson = untrained = None
    if taper is not None:
        with torch.no_grad():
            pearson = pairwise_similarity_correlation(task_emb, taper.alpha(task_emb))
            torch.manual_seed(0)
            fresh = MixerPredictor(task_emb.shape[1], config.num_bases, config.mixer_hidden)
            torch.nn.init.normal_(fresh.head.weight, std=0.1)  # the zero-initialised head would give constant mixers
            untrained = pairwise_similarity_correlation(task_emb, fresh.eval()(task_emb))
    primary = per_protocol["neighbourhood"]
    result = {
        "accuracy": {k: round(float(np.mean(v)), 2) for k, v in _ordered(primary)},
        "accuracy_std": {k: round(float(np.std(v)), 2) for k, v in _ordered(primary)},
        "accuracy_supercategory": {k: round(float(np.mean(v)), 2)
                                   for k, v in _ordered(per_protocol.get("supercategory", {}))},
        "free_language_accuracy": None if free_language is None else round(free_language, 2),
        "free_language_note": free_language_note or "each class described by its WordNet gloss instead of its name",
        "baseline_network": "baseline" if config.baseline else "stage1 (the run trained no separate baseline)",
        "specialist_margin": round(mean_margin(_per_basis_mean(margins)), 2),
        "specialist_margin_per_basis": [_rounded(m) for m in _per_basis_mean(margins)],
        "mixer_task_pearson_r": _rounded(pearson),
        "mixer_task_pearson_r_untrained": _rounded(untrained),
        **run_wall_times(run_dir),
        "eval_time_s": round(time.perf_counter() - start, 1),
        "config": config.to_dict(),
        "machine": f"{platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}, "
                   f"{device_name(evaluator.device)}",
        "protocol": {"tasks_per_seed": len(tasks0), "seeds": list(config.eval_seeds), "k": config.task_k},
    }
    if (headroom := headroom_of(run)) is not None:
        result["headroom"] = headroom
    if seed_runs and taper is not None:
        result["stage3_seeds"] = _seed_spread(ctx, evaluator, embeddings, protocols["neighbourhood"], config,
                                              float(np.mean(primary["taper"])),
                                              result["accuracy"]["classifier_selection"], seed_runs, seed_configs)
        result["stage3_seed_std"] = result["stage3_seeds"]["stage3_seed_std"]
    if taper is not None:
        result["mixer_examples"] = _mixer_examples(ctx, taper, embeddings, config)
    run.eval.write_text(json.dumps(result, indent=1))
    return result


# A stage-3 seed run may differ in its stage-3 seed and in every field TAPER's stage 3 is not trained from.
_SEED_RUN_FREE = {"stage3_seed"} | set(TrainConfig().to_dict()) - set(output_fields("stage3"))


def _check_seed_run(config: TrainConfig, path: Path) -> TrainConfig:
    """The configuration of a stage-3 seed run, refused unless it differs from `config` only in its
    stage-3 seed (and a stage-3 seed run has its own finished stage 3)."""
    seed_run = RunDir(path)
    if not seed_run.config.exists() or not seed_run.stage3_model().exists():
        raise DataError(f"{path}: not a run with a finished stage 3")
    other = TrainConfig.load(seed_run.config)
    mine = config.to_dict()
    differ = sorted(k for k, v in other.to_dict().items() if k not in _SEED_RUN_FREE and mine[k] != v)
    if differ:
        raise DataError(f"{path} is not a stage-3 seed run of this run: it also differs in {differ}")
    if other.stage_seed("stage3") == config.stage_seed("stage3"):
        raise DataError(f"{path} has the same stage-3 seed ({config.stage_seed('stage3')}) as this run")
    return other


def _mixer_accuracy(evaluator: Evaluator, model, task_embeddings: torch.Tensor, tasks) -> tuple[float, float]:
    """(with, without classifier selection) of a stage-3 model whose mixer gives each task its alpha."""
    with torch.no_grad():
        alphas = model.alpha(task_embeddings)
    return evaluator.per_task(lambda i, t: model.bank.state_dict_for(alphas[i]), tasks)


def _seed_spread(ctx, evaluator: Evaluator, embeddings: np.ndarray, sampler: TaskSampler, config: TrainConfig,
                 taper: float, cs: float, seed_runs: Sequence[Path], seed_configs: list[TrainConfig]) -> dict:
    """TAPER (mean over the task seeds) of this run, `taper`, and of runs that differ only in their stage-3
    seed, on the same tasks; each minus classifier selection `cs`, their mean and sample std (the statistic
    of lab/headroom_report.py)."""
    embedder = TaskEmbedder(STAGE3_VARIANTS["taper"][0], embeddings)
    values = [taper]
    for run in seed_runs:
        model = load_stage3(ctx, run, "taper", embedder.dim).to(evaluator.device)
        per_seed = []
        for seed in config.eval_seeds:
            tasks = sampler.evaluation_tasks(seed)
            per_seed.append(_mixer_accuracy(evaluator, model, embedder(tasks), tasks)[0])
        values.append(float(np.mean(per_seed)))
    return {"runs": ["(this run)", *map(str, seed_runs)],
            "stage3_seed": [c.stage_seed("stage3") for c in (config, *seed_configs)],
            "taper": [round(v, 2) for v in values], "taper_minus_cs": [round(v - cs, 2) for v in values],
            "mean": round(statistics.mean(values), 2),
            "stage3_seed_std": round(statistics.stdev(values), 2)}


def _mixer_examples(ctx, taper, embeddings: np.ndarray, config: TrainConfig, count: int = 6) -> list[dict]:
    """alpha of a few tasks anchored in different super-categories (for the heatmap)."""
    groups = sorted(ctx.data.hierarchy.supercategories.items())[:count] or [("all", ctx.data.wnids[:count])]
    sampler = TaskSampler(ctx.data.hierarchy, k=config.task_k)
    rng = np.random.default_rng(0)
    out = []
    for name, wnids in groups:
        task = sampler.sample(ctx.data.hierarchy.index(wnids[0]), rng)
        with torch.no_grad():
            alpha = taper.alpha(TaskEmbedder("text", embeddings)([task]))[0]
        out.append({"group": name, "anchor": primary_name(ctx.data.names[ctx.data.hierarchy.index(wnids[0])]),
                    "alpha": [[round(float(v), 3) for v in row] for row in alpha]})
    return out


def _rounded(value: float | None) -> float | None:
    return None if value is None or not np.isfinite(value) else round(value, 3)


def _ordered(rows: dict[str, list[float]]):
    return sorted(rows.items(), key=lambda kv: ROW_ORDER.index(kv[0]) if kv[0] in ROW_ORDER else 99)


def _router_accuracy(evaluator: Evaluator, bank: BasisBank, members: np.ndarray, tasks) -> float:
    """Accuracy of the parameter-free shard router: alpha = the task's class share per shard, every block."""
    def state_for(i, task):
        alpha = torch.from_numpy(shard_router_alpha(members, task)).float()
        return bank.state_dict_for(alpha.expand(NUM_BLOCKS, -1))
    return evaluator.per_task(state_for, tasks)[0]


def _per_basis_mean(margins: list[list[float | None]]) -> list[float | None]:
    """Mean over seeds of each basis's margin (None where no seed gave it a task)."""
    out = []
    for q in range(len(margins[0])):
        seen = [m[q] for m in margins if m[q] is not None]
        out.append(float(np.mean(seen)) if seen else None)
    return out
