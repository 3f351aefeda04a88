"""Run configuration and presets.

- `tiny`: the synthetic data set, seconds; used by the tests.
- `bench`: Tiny ImageNet, ResNet-18 width 0.25 with the ImageNet stem at 64 px, Q=10, epochs 40/2/6
  (baseline 40+8), stage 2 with logit adjustment, stage 3 with frozen BN statistics, mixer lr 0.1 and
  2 tasks per batch (each measured in docs/results/experiments.md);
  sized for the 90-minute budget of a 2-core CPU, most of it on stage 1, which the whole method
  stands on. Width 0.25 trains ~2.8x faster than 0.5 here; width 0.5 with epochs cut to about the
  same budget (18/1/3) gave every row ~2.5 points more but TAPER -0.54 vs classifier selection
  (run 9 in docs/results/experiments.md), so the preset stays at 0.25.
- `bench-narrow`: issue 12's capacity-limited bench: width 0.125, Q=20 specialists on overlapping shards,
  a mixer fitted to each task's majority shard (stage 3 trains no weights), the report's ablations.
- `demo`: the bench model trained for a few epochs with issue 12's specialist stage 2 and no separate
  baseline: what `make demo` builds once.
- `paper`: full-width ResNet-18 with the paper's recipe (100/5/20 epochs, lr 0.1 step decay), for a GPU.
- `paper-b512`: the same epochs and schedule at batch 512, learning rates x4 (linear scaling) and a
  5-epoch warm-up: an H200 ran batch-128 steps at 14,400 images/s and batch-512 steps at 45,000 (four
  times the images for 1.25x the time: per-step overhead, not arithmetic; docs/results/experiments.md).
  At that rate this is the paper's recipe in about 6.3 minutes of training there instead of about 19
  (130 plain epochs x 2.2 s + 20 stage-3 epochs x 2.2 s x 2.06, the stage-3 cost measured at batch 128
  only); without the ablations (the naive one alone would double it). Run on an H100: 7.2 min of training
  (docs/results/paper_b512_h100.md; TAPER 1.8-3.2 below classifier selection). On the CPU (width
  0.25) this scaling lost 1.1 points of classifier selection against batch 128 at an 8-epoch stage 1,
  0.5 at a 20-epoch one.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

# stage3_mixer_init: "uniform" (zero head) or a key of trainer.headroom.ROUTING_PRIORS (kept apart so the
# config imports no torch; tests/test_headroom.py checks the two agree).
MIXER_INITS = ("uniform", "router", "majority")


def check_tasks_per_batch(groups: int, batch_size: int) -> None:
    # The mixer predictor's batch norm normalises over the tasks of a batch: one task cannot train it.
    if not 2 <= groups <= batch_size:
        raise ValueError(f"tasks_per_batch must be between 2 and batch_size ({batch_size}), got {groups}")


@dataclass(frozen=True)
class TrainConfig:
    data: str = "../shared/data/tiny-imagenet-200.tar.gz"   # or "synthetic"
    stem: str = "imagenet"
    width: float = 0.25
    input_size: int = 64
    num_bases: int = 10
    task_k: int = 20
    task_mode: str = "neighbourhood"        # tasks stage 3 trains on: "neighbourhood", "supercategory", "mixed"
    batch_size: int = 128
    tasks_per_batch: int = 4                # stage 3: G tasks x (batch_size / G) images
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 5e-4
    schedule: str = "cosine"                # or "step" (x0.1 every `step_every` epochs)
    step_every: int = 30
    warmup_epochs: float = 0                # networks trained from scratch (stage 1, the naive ablation): the
                                            # lr ramps up linearly over these epochs (large batches, Goyal et al.)
    stage1_init: str = ""                   # a ResNet-18 state dict in torchvision's layout to start stage 1
                                            # from (`--init FILE`; trainer/pretrained.py); "" = from scratch
    stage1_epochs: float = 40
    stage1_lr: float | None = None          # stage 1's learning rate; None: `lr` (a start from --init takes
                                            # FINETUNE's unless set: fine-tuning wants a gentler one)
    stage1_head_epochs: float = 0           # stage 1 first trains the classifier alone for this many epochs
                                            # (the body frozen, its batch norm statistics the start's), then
                                            # the whole network for stage1_epochs; only with stage1_init
    stage2_epochs: float = 2                # passes over the data summed over all Q bases
    stage2_lr: float = 0.01
    stage2_general_fraction: float = 0.5    # share of each basis's batches drawn from all classes
    stage2_logit_adjust: bool = False       # correct stage 2's loss for the shard-skewed class prior
                                            # (with general_fraction 0: the loss is over the shard's classes)
    stage2_shard_size: int = 0              # 0: the shards partition the classes; N: each basis trains on
                                            # the N classes nearest its shard (overlapping; trainer.shards)
    stage3_epochs: float = 6
    stage3_lr: float = 0.01
    mixer_lr: float = 1.0
    mixer_hidden: int = 256
    stage3_mixer_init: str = "uniform"      # "router": the mixer starts fitted to the shard router
                                            # (trainer.mixer.fit_to_router); "majority": fitted to the
                                            # task's majority shard alone; "uniform": zero head;
                                            # over conditions, both: the task's condition's basis
    stage3_bn: str = "batch"                # "batch": each task normalised with its batch statistics;
                                            # "frozen": the bases' mixed running statistics, as deployed
                                            # (the presets use "frozen": +2.8 points, docs/results/experiments.md;
                                            # the default stays "batch" so older run configs load unchanged)
    aug_pad: int = 8                        # pad-crop augmentation: zero padding each side, then a crop
    aug_crop_scale: float = 0.0             # > 0: random-resized crops instead (the standard ImageNet
                                            # augmentation the TAPER paper trains with; torchvision's
                                            # default is 0.08), their area share drawn from [this, 1];
                                            # aug_pad is then unused. 0: pad-crop. The full-width paper
                                            # recipe with pad-crop memorises Tiny ImageNet's training set
                                            # (a median 99.7% from epoch 60, experiments.md)
    eval_seeds: tuple[int, ...] = (0, 1, 2)
    eval_images_per_class: int = 0          # 0: all val images of each task's classes
    ablations: tuple[str, ...] = ()         # extra stage-3 runs: "naive", "fixed_uniform", "bow", "single_mixer"
    naive_epochs: float = 0                 # epochs of the "naive" ablation; 0: as many as stages 1+2+3 together
    baseline: bool = True                   # train the no-personalization baseline (the report's rows 1-2);
                                            # False saves its stage-2+3 epochs for runs that only need the bases
    baseline_lr: float | None = None        # the baseline continues stage 1 for stage 2+3's epochs at this lr;
                                            # None: stage3_lr (a recipe whose stage 3 trains at lr 0 names it)
    holdout_classes: int = 0                # classes left out of training, spread over the hierarchy
                                            # (trainer/data/holdout.py): the few-shot benchmark's unseen classes
    exclude_classes: tuple[str, ...] = ()   # class ids (folder names, WordNet ids) left out of training by name
                                            # (`--exclude-classes FILE`): an upstream run that never sees the
                                            # classes a transfer measurement is made on (issue 75)
    train_images_per_class: int = 0         # > 0: the run trains on the first N training images of each
                                            # class only (trainer/data/image_subsets.py); 0: all of them
    stage1_image_fraction: float = 1.0      # < 1: stage 1 trains on the first share of each class's
                                            # images; stages 2, 3 and the baseline's continuation on all,
                                            # so they also see images stage 1 never fitted
    seed: int = 0
    stage2_seed: int | None = None          # stage 2's own seed (batch order, augmentation; the shards stay
                                            # `seed`'s); None: `seed`. Reuses stage 1 and the baseline, so a
                                            # second stage-2 seed measures the bases' training noise
    stage3_seed: int | None = None          # stage 3's own seed (mixer init, task batches, augmentation);
                                            # None: `seed`. Not a stage-1/2 field, so a second stage-3 seed
                                            # reuses a run's stages 1 and 2 (stage3_seed_std)
    threads: int = 0                        # 0: torch's default
    log_every: int = 50
    strict_data: bool = False               # refuse a data set with unreadable files or val images equal to
                                            # training ones (default: skip and name them; trainer.data.checks)
    synthetic: dict = field(default_factory=dict)  # make_synthetic_dataset arguments for data="synthetic"
    conditions: tuple[str, ...] = ()        # field conditions (issue 50; names of trainer/data/conditions.py):
                                            # stage 1 and the baseline train on every image in a condition
                                            # drawn per batch, basis q on conditions[q] alone (so num_bases ==
                                            # len(conditions)), stage 3 on (condition, classes) tasks described
                                            # by the condition's phrases joined to the class names. (): clean

    def __post_init__(self):
        if self.stage3_bn not in ("batch", "frozen"):
            raise ValueError(f"stage3_bn must be 'batch' or 'frozen', got {self.stage3_bn!r}")
        if self.stage3_mixer_init not in MIXER_INITS:
            raise ValueError(f"stage3_mixer_init must be one of {MIXER_INITS}, got {self.stage3_mixer_init!r}")
        if not 0 <= self.aug_crop_scale <= 1:
            raise ValueError(f"aug_crop_scale must be 0 (pad-crop) or an area share in (0, 1], "
                             f"got {self.aug_crop_scale!r}")
        if not 0 < self.stage1_image_fraction <= 1:
            raise ValueError(f"stage1_image_fraction must be in (0, 1], got {self.stage1_image_fraction!r}")
        if self.train_images_per_class < 0:
            raise ValueError(f"train_images_per_class must be 0 (all) or positive, got {self.train_images_per_class!r}")
        check_tasks_per_batch(self.tasks_per_batch, self.batch_size)
        if self.stage1_head_epochs and not self.stage1_init:
            raise ValueError("stage1_head_epochs trains a classifier on a start's features: it needs --init")
        self.check_conditions()

    def check_conditions(self) -> None:
        """A run over conditions has one basis per condition (stage 2 shards by condition) and trains every
        stage on all images (the condition cache holds the whole training split)."""
        if not self.conditions:
            return
        if len(set(self.conditions)) != len(self.conditions):
            raise ValueError(f"conditions must not repeat, got {self.conditions!r}")
        if self.num_bases != len(self.conditions):
            raise ValueError(f"a run over {len(self.conditions)} conditions has one basis per condition: "
                             f"num_bases must be {len(self.conditions)}, got {self.num_bases}")
        if self.stage1_image_fraction < 1 or self.train_images_per_class or self.holdout_classes or \
                self.exclude_classes:
            raise ValueError("a run over conditions trains on every training image of every class: "
                             "stage1_image_fraction, train_images_per_class, holdout_classes and exclude_classes "
                             "are not supported")

    @property
    def stage1_learning_rate(self) -> float:
        """Stage 1's learning rate: `stage1_lr`, or `lr` when that is not set."""
        return self.lr if self.stage1_lr is None else self.stage1_lr

    def stage_seed(self, stage: str) -> int:
        """The seed of `stage` (the stage names of trainer.loop: "stage1", "stage2.basis3", "stage3_bow", ...)."""
        if stage.startswith("stage3") and self.stage3_seed is not None:
            return self.stage3_seed
        if stage.startswith("stage2") and self.stage2_seed is not None:
            return self.stage2_seed
        return self.seed

    @property
    def continuation_lr(self) -> float:
        """The baseline's learning rate: `baseline_lr`, or stage 3's when that is not set."""
        return self.stage3_lr if self.baseline_lr is None else self.baseline_lr

    def with_overrides(self, **overrides) -> TrainConfig:
        known = {f.name for f in fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ValueError(f"unknown config keys {unknown}")
        return replace(self, **overrides)

    def to_dict(self) -> dict:
        return asdict(self)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict(), indent=1))

    @classmethod
    def load(cls, path: Path) -> TrainConfig:
        """A saved configuration; fields added since it was written take their defaults, and the levers
        removed since (REMOVED_LEVERS) are dropped when they hold their old default, refused otherwise."""
        raw = json.loads(path.read_text())
        for name, default in REMOVED_LEVERS.items():
            if name in raw and raw.pop(name) != default:
                raise ValueError(f"{path} sets {name}, a lever removed from the trainer as a dead end; reproduce "
                                 f"that run at git tag {LEVERS_TAG} (docs/results/experiments.md)")
        raw["eval_seeds"] = tuple(raw["eval_seeds"])
        raw["ablations"] = tuple(raw["ablations"])
        raw["conditions"] = tuple(raw.get("conditions", ()))
        raw["exclude_classes"] = tuple(raw.get("exclude_classes", ()))
        return cls(**{**cls().to_dict(), **raw})

    def group(self, name: str) -> dict:
        """The fields of one configuration group (CONFIG_GROUPS) and their values."""
        return {f: getattr(self, f) for f in CONFIG_GROUPS[name]}


# Every field belongs to exactly one group (tests/test_trainer.py checks it). What a run's outputs depend on
# is said in groups (trainer.rundir.OUTPUT_INPUTS), so `--reuse-from` copies an output only when the fields
# it was trained with are unchanged; a test records the fields each stage reads and fails on any outside.
CONFIG_GROUPS: dict[str, tuple[str, ...]] = {
    # which classes: the class embeddings
    "data": ("data", "synthetic", "holdout_classes", "exclude_classes", "conditions"),
    "network": ("stem", "width", "input_size"),
    "training": ("batch_size", "lr", "momentum", "weight_decay", "schedule", "step_every", "warmup_epochs",
                 "aug_pad", "aug_crop_scale", "seed", "train_images_per_class"),   # shared by every stage
    "stage1": ("stage1_epochs", "stage1_image_fraction", "stage1_init", "stage1_lr", "stage1_head_epochs"),
    "baseline": ("baseline_lr",),
    "stage2": ("num_bases", "stage2_epochs", "stage2_lr", "stage2_general_fraction", "stage2_logit_adjust",
               "stage2_shard_size", "stage2_seed"),
    "stage3": ("task_k", "task_mode", "tasks_per_batch", "stage3_epochs", "stage3_lr", "mixer_lr", "mixer_hidden",
               "stage3_mixer_init", "stage3_bn", "stage3_seed"),
    "naive": ("naive_epochs",),
    # What to train and evaluate, and how to log it: no trained output depends on these.
    "run": ("ablations", "baseline", "eval_seeds", "eval_images_per_class", "threads", "log_every", "strict_data"),
}

# Levers that experiments.md records as dead ends, removed from the trainer (issue 47). Each row of the log
# that used one reproduces from this git tag; a saved run configuration that holds one at its old default
# (every run made before the removal) still loads.
LEVERS_TAG = "lab-levers-2026-11"   # commit 6aca508
REMOVED_LEVERS: dict[str, object] = {
    "stage2_distill": 0.0, "stage2_other_class": False, "stage2_gate_penalty": 0.0, "stage2_gate_lr": 0.1,
    "stage2_gate_warmup": 0.1, "stage3_bases": "each", "stage3_weight_decay": None, "stage3_warmup_epochs": 0,
    "stage3_loss": "task", "stage3_route_entropy": 0.0, "stage3_route_balance": 0.0,
    "stage3_route_balance_momentum": 0.0, "gate_penalty": 0.0, "gate_lr": 1.0, "gate_warmup": 0.1,
    "description": "text", "mixer_blocks": 4,
}


# What the experiment log found to work, on top of the dataclass defaults (which stay as they were so
# that older run configurations load unchanged).
RECIPE = {"stage3_bn": "frozen", "mixer_lr": 0.1, "stage2_logit_adjust": True, "tasks_per_batch": 2}
# Issue 12's specialist stage 2: each basis trains on its own 60 nearest classes only, at lr 0.03. On an
# 8-epoch stage 1 (experiments.md, "Stage-2 learning rate on the overlapping shards") the bases beat the
# generic network on their own tasks by +0.98 and TAPER - CS rose from +0.61 to +1.37 (seed-0 tasks; +1.31
# over 3 task seeds). Not in `bench`: on the bench preset's 40-epoch stage 1 the same stage 2 makes bases
# that are *worse* than the generic network on their own tasks (margin -0.97) and TAPER is +0.14 over CS
# (experiments.md, "Specialist stage 2 on the bench preset's 40-epoch stage 1"). It stays in `demo`, whose
# short stage 1 is the under-trained regime where it helped.
SPECIALIST_STAGE2 = {"stage2_shard_size": 60, "stage2_general_fraction": 0.0, "stage2_lr": 0.03}

# Issue 12's capacity-limited bench (experiments.md, "A capacity-limited bench: width 0.125" and the
# sections after it): at width 0.125 one network fits the 200 classes worse (stage-1 selection 57.60
# against 64.77 at 0.25), and 20 bases on overlapping shards of 60 classes, each trained for 2 epochs'
# worth of steps (about 6.7 passes over its shard) at lr 0.01 on its shard alone, beat the stage-1
# network on their own tasks (+1.22). Every stage-3 training of the weights tried lost accuracy (the
# common movement of the bases, not a collapse of their differences: "Stage 3 with shared updates"), so
# the mixer is only fitted to the task's majority shard and no weights train in stage 3. The baseline continues
# stage 1 for the same 40 epochs at stage 2's lr (stage 3 is at lr 0); it gains 0.87 on its own, and
# TAPER ends +0.32 / +0.38 over its classifier selection (-0.46 on super-category tasks, +1.10 over the
# bases' average): docs/results/bench_narrow.md.
NARROW_SPECIALISTS = {
    "width": 0.125, "num_bases": 20, "stage2_shard_size": 60, "stage2_general_fraction": 0.0, "stage2_lr": 0.01,
    "stage2_epochs": 40, "stage3_lr": 0.0, "stage3_epochs": 0.01, "stage3_mixer_init": "majority",
    "baseline_lr": 0.01,
}
ABLATIONS = ("fixed_uniform", "bow", "single_mixer", "naive")
PAPER = {**RECIPE, "width": 1.0, "schedule": "step", "step_every": 30, "stage1_epochs": 100, "stage2_epochs": 5,
         "stage3_epochs": 20, "stage2_lr": 0.01, "stage3_lr": 0.01, "weight_decay": 1e-4}

# Issue 50's field conditions, in trainer/data/conditions.py's order (a test checks they agree; the config
# imports no torch). The `conditions` preset: the bench's recipe at width 0.25 with one basis per
# condition. Stage 1 is the headroom protocol's 10 epochs on all nine conditions; each basis fine-tunes one
# epoch on its condition (stage2_epochs is the sum over the nine); stage 3 mixes for two epochs. Its
# baseline (b) continues stage 1 on all nine for the same 11 epochs. The epochs were fixed before any
# accuracy of this preset was measured (experiments.md, "TAPER over conditions, pre-registered").
CONDITION_SET = ("clean", "night_infrared", "low_light", "fog", "snow", "motion_blur", "defocus", "underwater",
                 "compression")
CONDITIONS_RECIPE = {**RECIPE, "conditions": CONDITION_SET, "num_bases": len(CONDITION_SET), "stage1_epochs": 10,
                     "stage2_epochs": 9, "stage2_lr": 0.01, "stage3_epochs": 2, "log_every": 100}

def fit_to_classes(config: TrainConfig, num_classes: int,
                   fixed: set[str] = frozenset()) -> tuple[TrainConfig, list[str]]:
    """A preset made for Tiny ImageNet's 200 classes fitted to a data set of `num_classes`: (configuration,
    one line per change saying why). A task holds at most a quarter of the classes (so tasks differ), a
    basis's shard at most half, and there are at most a third as many bases as classes. Fields the user set
    (`fixed`) are left alone; ValueError, naming the fix, for fewer than 2 classes.

    >>> fit_to_classes(PRESETS["demo"], 24)[0].stage2_shard_size
    12
    """
    if num_classes < 2:
        raise ValueError(f"the data has {num_classes} class(es): a personalized model tells classes apart, so it "
                         "needs at least 2 (add a folder per class under train/)")
    limits = {"task_k": max(2, num_classes // 4), "stage2_shard_size": max(2, num_classes // 2),
              "num_bases": max(2, num_classes // 3)}
    why = {"task_k": "a task holds at most a quarter of the classes",
           "stage2_shard_size": "a basis trains on at most half of them",
           "num_bases": "at most a third as many bases as classes"}
    changes = {k: limit for k, limit in limits.items() if k not in fixed and getattr(config, k) > limit}
    notes = [f"{k} {getattr(config, k)} -> {v} for {num_classes} classes ({why[k]}; --set {k}=N to choose)"
             for k, v in changes.items()]
    return config.with_overrides(**changes), notes


# Stage 1 from a start that knows images (`--init`, issue 75): the defaults a fine-tune takes in place of the
# preset's from-scratch ones. The best cell of lab/finetune_defaults.py's grid (lr x epochs x classifier-alone
# epochs, on held-out training photos of 24 classes the upstream never saw: docs/results/finetune_defaults.json)
# at 76.9%; at lr 0.1 and 0.03 every cell from 8 epochs on is within 1.2 points of it (experiments.md, "Transfer").
FINETUNE = {"stage1_lr": 0.01, "stage1_epochs": 16, "stage1_head_epochs": 1}


def fit_to_start(config: TrainConfig, fixed: set[str] = frozenset()) -> tuple[TrainConfig, list[str]]:
    """A preset fitted to a start from `--init`: FINETUNE's stage-1 fields in place of the preset's, except
    those the user set (`fixed`); (configuration, one line per change). Without a start: unchanged.

    >>> fit_to_start(PRESETS["demo"].with_overrides(stage1_init="up.taper"))[0].stage1_lr
    0.01
    """
    if not config.stage1_init:
        return config, []
    changes = {k: v for k, v in FINETUNE.items() if k not in fixed and getattr(config, k) != v}
    notes = [f"{k} {getattr(config, k)} -> {v}: fine-tuning a start (--init; --set {k}=... to choose)"
             for k, v in changes.items()]
    return config.with_overrides(**changes), notes


PRESETS: dict[str, TrainConfig] = {
    "tiny": TrainConfig(
        stage3_bn="frozen", data="synthetic", stem="small", width=0.25, input_size=32, num_bases=3, task_k=5,
        batch_size=32,
        tasks_per_batch=4, stage1_epochs=3, stage2_epochs=1, stage3_epochs=2, aug_pad=4, eval_seeds=(0, 1),
        log_every=5, synthetic={"image_size": 32, "train_per_class": 16, "val_per_class": 4},
    ),
    "bench": TrainConfig(**RECIPE),
    "bench-narrow": TrainConfig(**{**RECIPE, **NARROW_SPECIALISTS}, ablations=ABLATIONS, naive_epochs=8),
    # The main job's quick bundle (`make demo`): the bench model with a few epochs, specialist stage 2, and
    # no separate baseline (classifier selection uses the stage-1 network: 0.08 from the baseline's on the bench).
    "demo": TrainConfig(**RECIPE, **SPECIALIST_STAGE2, stage1_epochs=4, stage2_epochs=2, stage3_epochs=1,
                        baseline=False, eval_seeds=(0,), log_every=100),
    "conditions": TrainConfig(**CONDITIONS_RECIPE),
    "paper": TrainConfig(**PAPER, ablations=("naive", "fixed_uniform", "bow", "single_mixer")),
    "paper-b512": TrainConfig(**{**PAPER, "batch_size": 512, "lr": 0.4, "stage2_lr": 0.04, "stage3_lr": 0.04},
                              warmup_epochs=5),
}
