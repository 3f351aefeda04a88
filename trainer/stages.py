"""The three TAPER stages and the baseline, each a function from inputs to a saved result.

1. `train_stage1`: one ResNet-18 on all classes, cross-entropy (on a share of each class's images when
   `stage1_image_fraction` < 1).
2. `train_stage2`: Q copies of it, each fine-tuned gently on one hierarchy shard: full head, low
   learning rate, half of each batch from all classes (a basis is a specialist that still knows the
   rest: the pilot's lever 2). In a run over field conditions, basis q fine-tunes on condition q's
   images of every class instead.
3. `train_stage3`: bases and mixer predictor jointly on sampled k-way tasks, block-wise mixers, loss
   over the task's classes only (classifier selection); G tasks per batch as one grouped network.
Baseline: `train_continuation` trains the stage-1 network for as many more epochs as stages 2+3, so
the baseline and TAPER see the same total epochs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from sdk.media.preprocessing import Preprocessing

from . import distributed
from .basis_bank import BasisBank
from .batches import plain_batches, task_batches
from .config import TrainConfig
from .data.cache import DecodedDataset
from .data.condition_cache import ConditionData, MixtureSplit
from .data.image_subsets import first_rows_per_class
from .data.tasks import TaskSampler
from .data.transforms import random_crop_flip, random_resized_crop_flip, to_normalized_tensor
from .device import CPU, TrainDevice, host_to
from .grouped_forward import grouped_forward
from .loop import JsonLog, run_epochs
from .mixer import MixerPredictor
from .models import NUM_BLOCKS, ResNet18, ResNetConfig
from .task_embedding import TaskEmbedder


@dataclass
class StageContext:
    config: TrainConfig
    data: DecodedDataset
    model_config: ResNetConfig
    preprocessing: Preprocessing
    log: JsonLog
    device: TrainDevice = CPU   # data.train is a DeviceSplit on it when it is not the CPU (run.make_context)
    conditions: ConditionData | None = None   # the training images under every condition (config.conditions)

    def augment(self, images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        x = to_normalized_tensor(images, self.preprocessing)
        if self.config.aug_crop_scale > 0:
            return random_resized_crop_flip(x, self.config.aug_crop_scale, generator)
        return random_crop_flip(x, self.config.aug_pad, generator)

    def rank_slice(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """This rank's share of a global batch (all ranks draw the same batch stream)."""
        r, w = distributed.rank(), distributed.world_size()
        return tuple(t[r::w] for t in tensors) if w > 1 else tensors

    def sgd(self, groups: list[dict]) -> torch.optim.SGD:
        return torch.optim.SGD(groups, momentum=self.config.momentum, weight_decay=self.config.weight_decay)

    def stage1_view(self) -> StageContext:
        """The context stage 1 trains in: the first `stage1_image_fraction` of each class's training
        images (all of them at 1.0). Its epochs are passes over that share."""
        share = self.config.stage1_image_fraction
        if share >= 1:
            return self
        rows = first_rows_per_class(self.data.train.labels, share=share)
        return replace(self, data=replace(self.data, train=self.data.train.subset(rows)))

    def condition_view(self, condition: str | None = None, stream: int = 0) -> StageContext:
        """In a run over conditions, the context with the training images under `condition`, or with no
        condition named, every image of a batch in a condition drawn uniformly (`stream` seeds the draws;
        one per stage). Without conditions: this context."""
        if self.conditions is None:
            return self
        if condition is None:
            train = MixtureSplit(self.conditions, self.config.conditions, stream)
        else:
            train = self.conditions.train(condition)
        return replace(self, data=replace(self.data, train=train))

    def condition_splits(self) -> list | None:
        """Stage 3's training images per condition (config.conditions' order), or None without conditions."""
        if self.conditions is None:
            return None
        return [self.conditions.train(name) for name in self.config.conditions]


def stage2_class_prior(num_classes: int, shard_classes: np.ndarray, general_fraction: float) -> torch.Tensor:
    """The class distribution of a stage-2 batch: `general_fraction` drawn from all classes, the rest from
    the shard. With 10 shards of ~20 classes a shard class is ~11x as frequent as any other class."""
    prior = np.full(num_classes, general_fraction / num_classes)
    prior[shard_classes] += (1 - general_fraction) / len(shard_classes)
    return torch.from_numpy(prior).float()


def _plain_step(ctx: StageContext, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                generator: torch.Generator, data_parallel: bool, log_prior: torch.Tensor | None = None):
    def step(batch) -> dict:
        images, labels = ctx.rank_slice(*batch) if data_parallel else batch
        x = ctx.augment(images, generator).contiguous(memory_format=torch.channels_last)
        with ctx.device.autocast():
            logits = model(x)
            # Logit adjustment (Menon et al., 2021): training on logits + log prior makes the raw logits
            # estimate the class-balanced posterior, so the basis does not learn the batch's skewed prior.
            adjusted = logits if log_prior is None else logits + log_prior
            loss = F.cross_entropy(adjusted, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        # Tensors, not floats: the loop reads them only at its log steps (a GPU is not synchronised every step).
        return {"loss": loss.detach(), "acc": (logits.argmax(1) == labels).float().mean(), "images": len(labels)}
    return step


def train_plain(ctx: StageContext, stage_dir: Path, stage: str, model: ResNet18, epochs: float, lr: float,
                classes_for_half: np.ndarray | None = None, general_fraction: float = 1.0,
                data_parallel: bool = True, logit_adjust: bool = False, warmup_epochs: float = 0.0,
                trainable: str = "all") -> ResNet18:
    """Cross-entropy training of one network; with `classes_for_half`, a (1 - general_fraction) share of
    every batch comes from those classes only (stage 2), and `logit_adjust` corrects the loss for that
    skewed class prior; `warmup_epochs`: a linear learning-rate warm-up (stage 1).
    data_parallel=False: this rank trains it alone. trainable="head": only the classifier trains, on the
    body's features as they are (the body in eval mode: its batch norm statistics stay the start's)."""
    if trainable not in ("all", "head"):
        raise ValueError(f"trainable must be 'all' or 'head', got {trainable!r}")
    cfg = ctx.config
    model = model.to(ctx.device.device, memory_format=torch.channels_last).train()
    params = list(model.parameters())
    if trainable == "head":
        model.eval().fc.train()
        params = list(model.fc.parameters())
        for p in model.parameters():
            p.requires_grad_(False)
        for p in params:
            p.requires_grad_(True)
    wrapped = distributed.wrap(model) if data_parallel else model
    optimizer = ctx.sgd([{"params": params, "lr": lr}])
    generator = torch.Generator().manual_seed(cfg.stage_seed(stage))  # augmentation
    steps_per_epoch = max(1, len(ctx.data.train) // cfg.batch_size)

    def make_batches(rng, n):
        if classes_for_half is None:
            return plain_batches(ctx.data.train, cfg.batch_size, rng, n)
        n_general = round(cfg.batch_size * general_fraction)
        special = plain_batches(ctx.data.train, cfg.batch_size - n_general, rng, n, classes=classes_for_half)
        if n_general == 0:  # shard-only batches
            return special
        general = plain_batches(ctx.data.train, n_general, rng, n)
        return ((torch.cat([a[0], b[0]]), torch.cat([a[1], b[1]])) for a, b in zip(general, special, strict=True))

    log_prior = None
    if logit_adjust and classes_for_half is not None:
        prior = stage2_class_prior(ctx.data.num_classes, classes_for_half, general_fraction)
        log_prior = prior.log().to(ctx.device.device)
    run_epochs(stage_dir, stage, cfg, epochs, steps_per_epoch, make_batches,
               _plain_step(ctx, wrapped, optimizer, generator, data_parallel, log_prior), optimizer,
               {"model": model}, ctx.log, data_parallel=data_parallel, warmup_epochs=warmup_epochs)
    for p in model.parameters():
        p.requires_grad_(True)
    return model.to("cpu", memory_format=torch.contiguous_format).eval()


def train_stage1(ctx: StageContext, stage_dir: Path) -> ResNet18:
    torch.manual_seed(ctx.config.seed)
    cfg = ctx.config
    model = ResNet18(ctx.model_config)
    view = ctx.stage1_view().condition_view(stream=1)
    if cfg.stage1_init:  # a start that knows images (`--init`): copied key by key, the classifier fresh
        from .pretrained import load_pretrained

        for note in load_pretrained(model, cfg.stage1_init):
            print(f"[stage1] {note}", flush=True)
        if cfg.stage1_head_epochs:  # the fresh classifier first, so its first gradients do not reach the body
            model = train_plain(view, stage_dir / "head", "stage1.head", model, cfg.stage1_head_epochs,
                                cfg.stage1_learning_rate, trainable="head")
    if not cfg.stage1_epochs:
        return model
    return train_plain(view, stage_dir, "stage1", model, cfg.stage1_epochs, cfg.stage1_learning_rate,
                       warmup_epochs=cfg.warmup_epochs)


def train_continuation(ctx: StageContext, stage_dir: Path, stage1: ResNet18) -> ResNet18:
    model = ResNet18(ctx.model_config)
    model.load_state_dict(stage1.state_dict())
    epochs = ctx.config.stage2_epochs + ctx.config.stage3_epochs
    return train_plain(ctx.condition_view(stream=2), stage_dir, "baseline", model, epochs, ctx.config.continuation_lr)


def train_stage2_basis(ctx: StageContext, stage_dir: Path, stage1: ResNet18, shard_classes: np.ndarray,
                       q: int) -> ResNet18:
    cfg = ctx.config
    model = ResNet18(ctx.model_config)
    model.load_state_dict(stage1.state_dict())
    epochs = cfg.stage2_epochs / cfg.num_bases
    if cfg.conditions:  # the basis of condition q: that condition's images of every class
        return train_plain(ctx.condition_view(cfg.conditions[q]), stage_dir / f"basis{q}", f"stage2.basis{q}", model,
                           epochs, cfg.stage2_lr, data_parallel=False)
    return train_plain(ctx, stage_dir / f"basis{q}", f"stage2.basis{q}", model, epochs, cfg.stage2_lr,
                       classes_for_half=shard_classes, general_fraction=cfg.stage2_general_fraction,
                       data_parallel=False, logit_adjust=cfg.stage2_logit_adjust)


class Stage3Model(torch.nn.Module):
    """Bases + mixer predictor: (images [G, B, 3, H, W], task embeddings [G, d]) -> logits [G, B, classes]."""

    def __init__(self, bank: BasisBank, mixer: MixerPredictor | None, frozen_bn: bool = False):
        super().__init__()
        self.bank, self.mixer, self.frozen_bn = bank, mixer, frozen_bn

    def alpha(self, task_embedding: torch.Tensor) -> torch.Tensor:
        device = self.bank.params(0).device
        if self.mixer is None:  # fixed uniform mixer (ablation: no task description)
            return torch.full((len(task_embedding), NUM_BLOCKS, self.bank.num_bases), 1.0 / self.bank.num_bases,
                              device=device)
        return self.mixer(host_to(task_embedding, device))

    def forward(self, x: torch.Tensor, task_embedding: torch.Tensor):
        # Mixer and mixing in float32 even under bf16 autocast: a bf16 matmul would round the mixed
        # weights and batch-norm statistics themselves (convolutions still run in bf16).
        with torch.autocast(x.device.type, enabled=False):
            alpha = self.alpha(task_embedding)
            weights = self.bank.mix(alpha, with_stats=self.frozen_bn)
        if self.frozen_bn:  # normalise with the mixed running statistics: training sees what deployment sees
            logits, _ = grouped_forward(self.bank.config, weights, x, training=False)
            return logits, alpha, {}
        logits, stats = grouped_forward(self.bank.config, weights, x, training=True)
        return logits, alpha, stats


def task_mask(tasks: list[np.ndarray], num_classes: int) -> torch.Tensor:
    """[G, classes]: 0 for the task's classes, -inf elsewhere (classifier selection)."""
    mask = torch.full((len(tasks), num_classes), float("-inf"))
    for g, t in enumerate(tasks):
        mask[g, torch.as_tensor(t)] = 0.0
    return mask


def stage3_logits(logits: torch.Tensor, tasks: list[np.ndarray]) -> torch.Tensor:
    """The logits stage 3's cross-entropy sees: [G, B, classes] with each task's own classes only
    (classifier selection, as the paper trains)."""
    return logits + host_to(task_mask(tasks, logits.shape[-1]), logits.device)[:, None, :]


def routing_entropy(alpha: torch.Tensor) -> torch.Tensor:
    """Mean entropy of the mixer's rows, alpha [G, 4, Q], over log Q: 1 for uniform routing, 0 for one
    basis per block. Stage 3 logs it (`mixer_entropy`, in nats) to show how sharp the routing became."""
    entropy = -(alpha * alpha.clamp(min=1e-12).log()).sum(-1)
    return entropy.mean() / math.log(alpha.shape[-1])


def train_stage3(ctx: StageContext, stage_dir: Path, bank: BasisBank, mixer: MixerPredictor | None,
                 embedder: TaskEmbedder, sampler: TaskSampler, epochs: float,
                 from_scratch: bool = False) -> Stage3Model:
    """from_scratch (the "naive" ablation): bases start at random init, so they train at stage 1's learning
    rate with batch statistics (frozen running statistics of an untrained network would mean no BN)."""
    cfg = ctx.config
    model = Stage3Model(bank, mixer, frozen_bn=cfg.stage3_bn == "frozen" and not from_scratch)
    model = model.to(ctx.device.device).train()
    wrapped = distributed.wrap(model)
    # The naive ablation's random bases train like stage 1.
    lr, warmup = (cfg.lr, cfg.warmup_epochs) if from_scratch else (cfg.stage3_lr, 0.0)
    groups = [{"params": bank.parameters(), "lr": lr, "weight_decay": cfg.weight_decay}]
    if mixer is not None:
        groups.append({"params": mixer.parameters(), "lr": cfg.mixer_lr})
    optimizer = ctx.sgd(groups)
    generator = torch.Generator().manual_seed(cfg.stage_seed("stage3"))
    steps_per_epoch = max(1, len(ctx.data.train) // cfg.batch_size)

    splits = ctx.condition_splits()

    def make_batches(rng, n):
        return task_batches(ctx.data.train, sampler, cfg.batch_size, cfg.tasks_per_batch, rng, n,
                            condition_splits=splits)

    def step(batch) -> dict:
        g, b = batch.labels.shape
        images, labels = ctx.rank_slice(batch.images.transpose(0, 1), batch.labels.T)  # split along B
        images, labels = images.transpose(0, 1), labels.T
        x = ctx.augment(images.reshape(-1, *images.shape[2:]), generator).view(g, -1, 3, *images.shape[2:4])
        with ctx.device.autocast():
            logits, alpha, stats = wrapped(x, embedder(batch.tasks, conditions=batch.conditions))
            masked = stage3_logits(logits, batch.tasks)
            loss = F.cross_entropy(masked.reshape(-1, masked.shape[-1]), labels.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if stats:
            bank.update_running_stats(alpha, stats)
        return {"loss": loss.detach(), "acc": (masked.argmax(-1) == labels).float().mean(),
                "mixer_entropy": routing_entropy(alpha.detach()) * math.log(alpha.shape[-1]),
                "images": labels.numel()}

    run_epochs(stage_dir, stage_dir.name, cfg, epochs, steps_per_epoch, make_batches, step, optimizer,
               {"model": model}, ctx.log, warmup_epochs=warmup)
    return model.to("cpu").eval()
