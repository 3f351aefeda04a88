"""Enrolling a mix of the bundle's classes and new ones: can one head use the trained rows for the known
classes and prototypes for the new ones? (issue 14, an experiment; not in the SDK)

    python -m lab.fewshot_mixed_heads --run /root/taper-runs/holdout20

Stage-1 network of the run (features and trained rows), 5-shot 20-way tasks of trained classes (the
report's neighbourhood tasks), in each task a random half of the classes treated as new (prototype
rows) and the other half as known. Heads (accuracy over all query images, and over each half's):
- all_prototypes: what enrollment does today when one name is new (every class a prototype);
- rowdir: known classes' rows replaced by the unit trained row (a cosine head throughout);
- calibrated: linear trained logits for the known classes; a * cos(f, prototype) + c for the new ones,
  with (a, c) fitted by least squares on the support images (the known classes' linear logits against
  their prototype cosines);
- all_linear_trained: every class's trained rows (the reference when all are known).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from scripts.bench_fewshot import stage1_features
from sdk.media.preprocessing import Preprocessing
from sdk.prototypes import DEFAULT_TEMPERATURE, l2_normalize, prototype_rows
from trainer.config import TrainConfig
from trainer.data.tasks import TaskSampler
from trainer.run import load_model, network_config, open_data
from trainer.rundir import RunDir

SHOTS, WAY = 5, 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--tasks", type=int, default=100)
    args = parser.parse_args()
    config = TrainConfig.load(RunDir(args.run).config)
    data = open_data(config, progress=False)
    model = load_model(network_config(config, data.num_classes), RunDir(args.run).model("stage1"))
    preprocessing = Preprocessing(config.input_size)

    def features(images: np.ndarray) -> np.ndarray:
        return stage1_features(model, preprocessing, images).astype(np.float64)

    weight = model.fc.weight.detach().numpy().astype(np.float64)
    bias = model.fc.bias.detach().numpy().astype(np.float64)
    every = TaskSampler(data.hierarchy, k=WAY).evaluation_tasks(0)
    tasks = [every[i] for i in np.linspace(0, len(every) - 1, args.tasks).round().astype(int)]
    rng = np.random.default_rng(1)
    rows = np.concatenate([rng.choice(np.flatnonzero(data.train.labels == c), SHOTS, replace=False)
                           for c in range(data.num_classes)])
    support_all = features(np.asarray(data.train.images[rows]))   # class c's shots at rows c*SHOTS...
    val, val_labels = features(np.asarray(data.val.images)), data.val.labels
    results: dict[str, list[float]] = {}

    def record(name: str, logits: np.ndarray, labels: np.ndarray, known: np.ndarray) -> None:
        hits = logits.argmax(1) == labels
        for part, mask in (("all", np.ones_like(hits)), ("known half", known[labels]), ("new half", ~known[labels])):
            results.setdefault(f"{name}|{part}", []).append(100.0 * float(np.mean(hits[mask])))

    for task in tasks:
        query = np.flatnonzero(np.isin(val_labels, task))
        labels = np.searchsorted(task, val_labels[query])
        support = np.concatenate([support_all[c * SHOTS:(c + 1) * SHOTS] for c in task])
        support_labels = np.repeat(np.arange(WAY), SHOTS)
        known = np.zeros(WAY, bool)
        known[rng.choice(WAY, WAY // 2, replace=False)] = True
        unit_protos = prototype_rows(support, support_labels, WAY, 1.0).astype(np.float64)
        q_cos, q_lin = l2_normalize(val[query]) @ unit_protos.T, val[query] @ weight[task].T + bias[task]
        record("all_prototypes", q_cos, labels, known)
        row_dir = np.where(known[:, None], l2_normalize(weight[task]), unit_protos)
        record("rowdir", l2_normalize(val[query]) @ row_dir.T * DEFAULT_TEMPERATURE, labels, known)
        s_cos, s_lin = l2_normalize(support) @ unit_protos.T, support @ weight[task].T + bias[task]
        a, c = np.polyfit(s_cos[:, known].ravel(), s_lin[:, known].ravel(), 1)
        record("calibrated", np.where(known[None, :], q_lin, a * q_cos + c), labels, known)
        record("all_linear_trained", q_lin, labels, known)
    print(f"{SHOTS}-shot {WAY}-way, {args.tasks} tasks of trained classes, half of each task's classes as new; "
          f"stage-1 network of {args.run}")
    print(f"{'head':22s} {'all':>7s} {'known half':>11s} {'new half':>9s}")
    for name in ("all_prototypes", "rowdir", "calibrated", "all_linear_trained"):
        cells = [np.mean(results[f"{name}|{part}"]) for part in ("all", "known half", "new half")]
        print(f"{name:22s} {cells[0]:7.2f} {cells[1]:11.2f} {cells[2]:9.2f}")


if __name__ == "__main__":
    main()
