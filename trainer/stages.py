"""The three TAPER stages and the baseline, each a function from inputs to a saved result.

1. `train_stage1`: one ResNet-18 on all classes, cross-entropy (on a share of each class's images when
   `stage1_image_fraction` < 1).
2. `train_stage2`: Q copies of it, each fine-tuned gently on one hierarchy shard: full head, low
   learning rate, half of each batch from all classes (a basis is a specialist that still knows the
   rest: the pilot's lever 2).
3. `train_stage3`: bases and mixer predictor jointly on sampled k-way tasks, block-wise mixers, loss
   over the task's classes only (classifier selection); G tasks per batch as one grouped network.
Baseline: `train_continuation` trains the stage-1 network for as many more epochs as stages 2+3, so
the baseline and TAPER see the same total epochs.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from sdk.preprocessing import Preprocessing

from . import distributed
from .basis_bank import BasisBank
from .batches import plain_batches, task_batches
from .config import TrainConfig
from .data.cache import DecodedDataset
from .data.image_subsets import first_rows_per_class
from .data.tasks import TaskSampler
from .data.transforms import random_crop_flip, random_resized_crop_flip, to_normalized_tensor
from .device import CPU, TrainDevice, host_to
from .grouped_forward import grouped_forward
from .layer_gates import LayerGates, NetworkGates
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


def stage2_class_prior(num_classes: int, shard_classes: np.ndarray, general_fraction: float) -> torch.Tensor:
    """The class distribution of a stage-2 batch: `general_fraction` drawn from all classes, the rest from
    the shard. With 10 shards of ~20 classes a shard class is ~11x as frequent as any other class."""
    prior = np.full(num_classes, general_fraction / num_classes)
    prior[shard_classes] += (1 - general_fraction) / len(shard_classes)
    return torch.from_numpy(prior).float()


def dustbin_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, outside: torch.Tensor) -> torch.Tensor:
    """Hinton et al.'s specialist loss with the head's rows kept: an image of a class outside the shard
    (`outside`, bool [classes]) has one target, "any outside class", so its loss is minus the log of the
    summed probability of the outside classes; an in-shard image's loss is the usual cross-entropy.

    >>> logits, outside = torch.tensor([[2.0, 0.0, 0.0]]), torch.tensor([False, True, True])
    >>> round(dustbin_cross_entropy(logits, torch.tensor([1]), outside).item(), 4)  # -log(p1 + p2)
    1.5464
    """
    log_p = logits.float().log_softmax(1)
    own = log_p.gather(1, labels[:, None])[:, 0]
    other = log_p.masked_fill(~outside, float("-inf")).logsumexp(1)
    return -torch.where(outside[labels], other, own).mean()


DISTILL_TEMPERATURE = 2.0  # Hinton et al.'s soft targets; the KL term is scaled by T^2 to keep its gradient size


def _plain_step(ctx: StageContext, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                generator: torch.Generator, data_parallel: bool, log_prior: torch.Tensor | None = None,
                teacher: torch.nn.Module | None = None, distill: float = 0.0,
                gates: NetworkGates | None = None, total_steps: int = 1, outside: torch.Tensor | None = None):
    def step(batch) -> dict:
        images, labels = ctx.rank_slice(*batch) if data_parallel else batch
        x = ctx.augment(images, generator).contiguous(memory_format=torch.channels_last)
        with ctx.device.autocast():
            logits = model(x)
            # Logit adjustment (Menon et al., 2021): training on logits + log prior makes the raw logits
            # estimate the class-balanced posterior, so the basis does not learn the batch's skewed prior.
            adjusted = logits if log_prior is None else logits + log_prior
            loss = (F.cross_entropy(adjusted, labels) if outside is None
                    else dustbin_cross_entropy(adjusted, labels, outside))
            if teacher is not None and distill > 0:
                with torch.no_grad():
                    soft = F.log_softmax(teacher(x) / DISTILL_TEMPERATURE, dim=1)
                kl = F.kl_div(F.log_softmax(logits / DISTILL_TEMPERATURE, dim=1), soft, log_target=True,
                              reduction="batchmean")
                loss = (1 - distill) * loss + distill * DISTILL_TEMPERATURE ** 2 * kl
        penalty = torch.zeros(()) if gates is None else gates.next_penalty(total_steps)
        optimizer.zero_grad(set_to_none=True)
        (loss + penalty).backward()
        optimizer.step()
        # Tensors, not floats: the loop reads them only at its log steps (a GPU is not synchronised every step).
        record = {"loss": loss.detach(), "acc": (logits.argmax(1) == labels).float().mean(), "images": len(labels)}
        if gates is not None:
            record.update(gates.log_fields(penalty))
        return record
    return step


def train_plain(ctx: StageContext, stage_dir: Path, stage: str, model: ResNet18, epochs: float, lr: float,
                classes_for_half: np.ndarray | None = None, general_fraction: float = 1.0,
                data_parallel: bool = True, logit_adjust: bool = False, teacher: ResNet18 | None = None,
                distill: float = 0.0, gates: NetworkGates | None = None, gate_lr: float = 0.0,
                warmup_epochs: float = 0.0, other_class: bool = False) -> ResNet18:
    """Cross-entropy training of one network; with `classes_for_half`, a (1 - general_fraction) share of
    every batch comes from those classes only (stage 2), and `logit_adjust` corrects the loss for that
    skewed class prior; `distill` > 0 adds a KL term to a frozen `teacher`'s predictions; `gates`
    (attached to `model`) add their penalty and are baked in at the end (their summary in gates.json);
    `warmup_epochs`: a linear learning-rate warm-up (stage 1); `other_class`: images outside
    `classes_for_half` are trained toward "any other class" (dustbin_cross_entropy).
    data_parallel=False: this rank trains it alone."""
    cfg = ctx.config
    model = model.to(ctx.device.device, memory_format=torch.channels_last).train()
    if gates is not None:
        gates.to(ctx.device.device)
    if teacher is not None:
        teacher = teacher.to(ctx.device.device, memory_format=torch.channels_last).eval()
    wrapped = distributed.wrap(model) if data_parallel else model
    groups = [{"params": model.parameters(), "lr": lr}]
    if gates is not None:
        groups.append({"params": [gates.scores], "lr": gate_lr, "weight_decay": 0.0})
    optimizer = ctx.sgd(groups)
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
    outside = None
    if other_class and classes_for_half is not None:
        outside = torch.ones(ctx.data.num_classes, dtype=torch.bool)
        outside[torch.as_tensor(classes_for_half)] = False
        outside = outside.to(ctx.device.device)
    total_steps = max(1, round(epochs * steps_per_epoch))   # as run_epochs counts them
    run_epochs(stage_dir, stage, cfg, epochs, steps_per_epoch, make_batches,
               _plain_step(ctx, wrapped, optimizer, generator, data_parallel, log_prior, teacher, distill,
                           gates, total_steps, outside),
               optimizer,
               {"model": model} if gates is None else {"model": model, "gates": gates}, ctx.log,
               data_parallel=data_parallel, warmup_epochs=warmup_epochs)
    if gates is not None:
        gates.bake(model)
        (stage_dir / "gates.json").write_text(json.dumps(gates.summary(), indent=1))
    return model.to("cpu", memory_format=torch.contiguous_format).eval()


def train_stage1(ctx: StageContext, stage_dir: Path) -> ResNet18:
    torch.manual_seed(ctx.config.seed)
    cfg = ctx.config
    return train_plain(ctx.stage1_view(), stage_dir, "stage1", ResNet18(ctx.model_config), cfg.stage1_epochs, cfg.lr,
                       warmup_epochs=cfg.warmup_epochs)


def train_continuation(ctx: StageContext, stage_dir: Path, stage1: ResNet18) -> ResNet18:
    model = ResNet18(ctx.model_config)
    model.load_state_dict(stage1.state_dict())
    epochs = ctx.config.stage2_epochs + ctx.config.stage3_epochs
    return train_plain(ctx, stage_dir, "baseline", model, epochs, ctx.config.continuation_lr)


def train_stage2_basis(ctx: StageContext, stage_dir: Path, stage1: ResNet18, shard_classes: np.ndarray,
                       q: int) -> ResNet18:
    cfg = ctx.config
    model = ResNet18(ctx.model_config)
    model.load_state_dict(stage1.state_dict())
    gates = None
    if cfg.stage2_gate_penalty > 0:
        gates = NetworkGates(stage1.state_dict(), cfg.stage2_gate_penalty, cfg.stage2_gate_warmup)
        gates.attach(model)
    epochs = cfg.stage2_epochs / cfg.num_bases
    return train_plain(ctx, stage_dir / f"basis{q}", f"stage2.basis{q}", model, epochs, cfg.stage2_lr,
                       classes_for_half=shard_classes, general_fraction=cfg.stage2_general_fraction,
                       data_parallel=False, logit_adjust=cfg.stage2_logit_adjust,
                       teacher=stage1 if cfg.stage2_distill else None, distill=cfg.stage2_distill,
                       gates=gates, gate_lr=cfg.stage2_gate_lr, other_class=cfg.stage2_other_class)


class Stage3Model(torch.nn.Module):
    """Bases + mixer predictor: (images [G, B, 3, H, W], task embeddings [G, d]) -> logits [G, B, classes].
    With `gates` (trainer.layer_gates), each basis's layers are gated back to W_0 while training."""

    def __init__(self, bank: BasisBank, mixer: MixerPredictor | None, frozen_bn: bool = False,
                 gates: LayerGates | None = None):
        super().__init__()
        self.bank, self.mixer, self.frozen_bn, self.gates = bank, mixer, frozen_bn, gates

    def alpha(self, task_embedding: torch.Tensor) -> torch.Tensor:
        device = self.bank.params(0).device
        if self.mixer is None:  # fixed uniform mixer (ablation: no task description)
            return torch.full((len(task_embedding), 4, self.bank.num_bases), 1.0 / self.bank.num_bases, device=device)
        return self.mixer(host_to(task_embedding, device))

    def forward(self, x: torch.Tensor, task_embedding: torch.Tensor):
        # Mixer and mixing in float32 even under bf16 autocast: a bf16 matmul would round the mixed
        # weights and batch-norm statistics themselves (convolutions still run in bf16).
        with torch.autocast(x.device.type, enabled=False):
            alpha = self.alpha(task_embedding)
            weights = self.bank.mix(alpha, with_stats=self.frozen_bn, gates=self.gates)
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


def stage3_logits(logits: torch.Tensor, tasks: list[np.ndarray], loss: str) -> torch.Tensor:
    """The logits stage 3's cross-entropy sees: [G, B, classes], each task's own classes only for
    loss "task" (classifier selection, as the paper trains), all of them for "all"."""
    if loss == "all":
        return logits
    return logits + host_to(task_mask(tasks, logits.shape[-1]), logits.device)[:, None, :]


def _entropy(p: torch.Tensor) -> torch.Tensor:
    return -(p * p.clamp(min=1e-12).log()).sum(-1)


def routing_entropy(alpha: torch.Tensor) -> torch.Tensor:
    """Mean entropy of the mixer's rows, alpha [G, 4, Q], over log Q: 1 for uniform routing, 0 for one
    basis per block. Stage 3's `stage3_route_entropy` penalises it."""
    return _entropy(alpha).mean() / math.log(alpha.shape[-1])


def routing_balance(alpha: torch.Tensor, running: torch.Tensor | None = None) -> torch.Tensor:
    """Entropy of the tasks' mean routing, alpha [G, 4, Q] -> mean over blocks of H(mean_g alpha) / log Q:
    high when a batch's tasks use different bases. Stage 3's `stage3_route_balance` rewards it, so that
    sharp routing does not send every task to one basis.

    running [4, Q] (a RunningRouting's mean, this batch folded in): the entropy of that mean instead,
    through its first-order term -sum(mean_g alpha * log running). Its value is H(running) when the
    batch's mean is the running mean; its gradient moves the batch's mean as d H(running) / d running
    says (the -1 of d H / d p cancels on the simplex), not scaled down by 1 - momentum. A batch of 2 tasks
    is then pushed towards the bases that the earlier batches left unused."""
    mean = alpha.mean(0)
    if running is None:
        return _entropy(mean).mean() / math.log(alpha.shape[-1])
    return -(mean * running.detach().clamp(min=1e-12).log()).sum(-1).mean() / math.log(alpha.shape[-1])


class RunningRouting:
    """Exponential moving average of the batches' mean routing, [blocks, Q], from uniform; a stage-3 stateful
    object, so a resumed stage 3 keeps it. momentum 0.99 averages about the last 100 batches."""

    def __init__(self, blocks: int, num_bases: int, momentum: float):
        self.momentum = momentum
        self.mean = torch.full((blocks, num_bases), 1.0 / num_bases)

    def update(self, alpha: torch.Tensor) -> torch.Tensor:
        """Fold in alpha [G, 4, Q]'s mean over tasks; returns the new running mean."""
        batch = alpha.detach().float().mean(0)   # on alpha's device: no host sync per step on a GPU
        self.mean = self.momentum * self.mean.to(batch.device) + (1 - self.momentum) * batch
        return self.mean

    def state_dict(self) -> dict:
        return {"mean": self.mean.clone()}

    def load_state_dict(self, state: dict) -> None:
        self.mean = state["mean"].clone()


def train_stage3(ctx: StageContext, stage_dir: Path, bank: BasisBank, mixer: MixerPredictor | None,
                 embedder: TaskEmbedder, sampler: TaskSampler, epochs: float, from_scratch: bool = False,
                 gates: LayerGates | None = None) -> Stage3Model:
    """from_scratch (the "naive" ablation): bases start at random init, so they train at stage 1's learning
    rate with batch statistics (frozen running statistics of an untrained network would mean no BN).
    gates: TAPS gates (config gate_*); at the end they are baked into the bank (closed layers = W_0) and
    their summary written to stage_dir/gates.json, and the model returned has none."""
    cfg = ctx.config
    model = Stage3Model(bank, mixer, frozen_bn=cfg.stage3_bn == "frozen" and not from_scratch, gates=gates)
    model = model.to(ctx.device.device).train()
    if gates is not None:
        gates.to(ctx.device.device)
    wrapped = distributed.wrap(model)
    if from_scratch:   # the naive ablation's random bases train like stage 1 (and have no deltas to keep)
        lr, decay, warmup, shared = cfg.lr, cfg.weight_decay, cfg.warmup_epochs, False
    else:
        lr, warmup, shared = cfg.stage3_lr, cfg.stage3_warmup_epochs, cfg.stage3_bases == "shared"
        decay = cfg.weight_decay if cfg.stage3_weight_decay is None else cfg.stage3_weight_decay
    # Shared updates decay W_0 in their hooks; the optimizer's decay would shrink the deltas too.
    hooks = bank.share_updates(decay) if shared else []
    groups = [{"params": bank.parameters(), "lr": lr, "weight_decay": 0.0 if shared else decay}]
    if mixer is not None:
        groups.append({"params": mixer.parameters(), "lr": cfg.mixer_lr})
    if gates is not None:
        groups.append({"params": [gates.scores], "lr": cfg.gate_lr, "weight_decay": 0.0})
    optimizer = ctx.sgd(groups)
    generator = torch.Generator().manual_seed(cfg.stage_seed("stage3"))
    steps_per_epoch = max(1, len(ctx.data.train) // cfg.batch_size)
    total_steps = max(1, round(epochs * steps_per_epoch))   # as run_epochs counts them

    stateful: dict[str, object] = {"model": model}
    running = None
    if mixer is not None and cfg.stage3_route_balance and cfg.stage3_route_balance_momentum:
        running = stateful["routing"] = RunningRouting(NUM_BLOCKS, bank.num_bases, cfg.stage3_route_balance_momentum)

    def make_batches(rng, n):
        return task_batches(ctx.data.train, sampler, cfg.batch_size, cfg.tasks_per_batch, rng, n)

    def step(batch) -> dict:
        g, b = batch.labels.shape
        images, labels = ctx.rank_slice(batch.images.transpose(0, 1), batch.labels.T)  # split along B
        images, labels = images.transpose(0, 1), labels.T
        x = ctx.augment(images.reshape(-1, *images.shape[2:]), generator).view(g, -1, 3, *images.shape[2:4])
        with ctx.device.autocast():
            logits, alpha, stats = wrapped(x, embedder(batch.tasks))
            masked = stage3_logits(logits, batch.tasks, cfg.stage3_loss)
            loss = F.cross_entropy(masked.reshape(-1, masked.shape[-1]), labels.reshape(-1))
        penalty = torch.zeros(()) if gates is None else gates.next_penalty(total_steps)
        routing = routing_entropy(alpha)
        routing_terms = torch.zeros(())   # sharp routing, balanced over the batch's (or the running) tasks
        if mixer is not None and (cfg.stage3_route_entropy or cfg.stage3_route_balance):
            mean = running.update(alpha) if running is not None else None
            routing_terms = (cfg.stage3_route_entropy * routing
                             - cfg.stage3_route_balance * routing_balance(alpha, mean))
        optimizer.zero_grad(set_to_none=True)
        (loss + penalty + routing_terms).backward()
        optimizer.step()
        if stats:
            bank.update_running_stats(alpha, stats)
        record = {"loss": loss.detach(), "acc": (masked.argmax(-1) == labels).float().mean(),
                  "mixer_entropy": routing.detach() * math.log(alpha.shape[-1]), "images": labels.numel()}
        if gates is not None:
            record.update(gates.log_fields(penalty))
        return record

    run_epochs(stage_dir, stage_dir.name, cfg, epochs, steps_per_epoch, make_batches, step, optimizer,
               stateful, ctx.log, warmup_epochs=warmup)
    for hook in hooks:
        hook.remove()
    if gates is not None:
        gates.bake(bank)
        if distributed.is_main():
            (stage_dir / "gates.json").write_text(json.dumps(gates.summary(), indent=1))
        model.gates = None
    return model.to("cpu").eval()
