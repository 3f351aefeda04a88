"""Does a feature transform before the prototype head help on unseen classes? (issue 14, an experiment)

    python -m lab.fewshot_feature_transforms --run /root/taper-runs/holdout20 --shots 5

Stage-1 features of a run trained with `holdout_classes`; 5-shot 20-way tasks over its held-out classes
(support from their training images, all their val images as queries), as `scripts/bench_fewshot.py`
draws them. Rows: the SDK's head (L2-normalised features, `sdk.prototypes`) and the transforms of the
few-shot literature that need no training: centering on the support mean or on the mean feature of
seen classes (SimpleShot's CL2N), and the element-wise square root (a power transform). Paired
differences against the SDK's head, mean and 95% interval over tasks.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from scripts.bench_fewshot import stage1_features
from sdk.media.preprocessing import Preprocessing
from sdk.prototypes import DEFAULT_TEMPERATURE, CosineHead, l2_normalize, prototype_rows
from trainer.config import TrainConfig
from trainer.data.holdout import held_out_classes
from trainer.run import load_model, network_config, open_all_data
from trainer.rundir import RunDir


def centered_on(mean: np.ndarray):
    return lambda support, query: (support - mean, query - mean)


def support_centered(support: np.ndarray, query: np.ndarray):
    return support - support.mean(0), query - support.mean(0)


def square_root(support: np.ndarray, query: np.ndarray):
    return np.sqrt(np.maximum(support, 0)), np.sqrt(np.maximum(query, 0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--shots", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=100)
    args = parser.parse_args()

    config = TrainConfig.load(RunDir(args.run).config)
    data = open_all_data(config, progress=False)
    held = set(held_out_classes(data.hierarchy, config.holdout_classes))
    seen = [i for i, w in enumerate(data.wnids) if w not in held]
    model = load_model(network_config(config, len(seen)), RunDir(args.run).model("stage1"))
    preprocessing = Preprocessing(config.input_size)

    def features(rows: np.ndarray, split=data.train) -> np.ndarray:
        return stage1_features(model, preprocessing, np.asarray(split.images[rows])).astype(np.float64)

    ids = [data.wnids.index(w) for w in sorted(held, key=data.wnids.index)]
    support_pool = [features(np.flatnonzero(data.train.labels == c)) for c in ids]
    query_parts = [features(np.flatnonzero(data.val.labels == c), data.val) for c in ids]
    query = np.concatenate(query_parts)
    query_labels = np.repeat(np.arange(len(ids)), [len(q) for q in query_parts])
    rng = np.random.default_rng(1)  # the seen-class mean: 50 training images of each seen class
    base_rows = np.sort(np.concatenate([rng.choice(np.flatnonzero(data.train.labels == c), 50, replace=False)
                                        for c in seen]))
    transforms = {"sdk_l2": lambda s, q: (s, q), "center_support": support_centered,
                  "center_seen_mean": centered_on(features(base_rows).mean(0)), "sqrt": square_root,
                  "l2_then_center_support": lambda s, q: support_centered(l2_normalize(s), l2_normalize(q))}
    rng = np.random.default_rng(0)
    accuracy: dict[str, list[float]] = {name: [] for name in transforms}
    for _ in range(args.tasks):
        support = np.concatenate([pool[rng.choice(len(pool), args.shots, replace=False)] for pool in support_pool])
        labels = np.repeat(np.arange(len(ids)), args.shots)
        for name, transform in transforms.items():
            s, q = transform(support, query)
            head = CosineHead(prototype_rows(s, labels, len(ids), DEFAULT_TEMPERATURE))
            accuracy[name].append(100.0 * float(np.mean(head.logits(q).argmax(1) == query_labels)))
    reference = np.asarray(accuracy["sdk_l2"])
    print(f"{args.shots}-shot {len(ids)}-way, {args.tasks} tasks, stage-1 features of {args.run}")
    for name, values in accuracy.items():
        diff = np.asarray(values) - reference
        half = 1.96 * diff.std(ddof=1) / np.sqrt(len(diff))
        print(f"{name:24s} {np.mean(values):6.2f}   minus sdk_l2 {diff.mean():+.2f} +- {half:.2f}")


if __name__ == "__main__":
    main()
