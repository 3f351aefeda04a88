"""Self-improvement benchmark (issue 14, TAPER 5.2): accuracy against the number of unlabelled batches
seen. Writes <out>.json, <out>.md and <out>.svg.

    python -m scripts.bench_self_improvement --run /root/taper-runs/bench-nb --bundle bench.taper

For each evaluation task (the report's task sampler: 20 classes around an anchor class in the
hierarchy, seed 0, evenly spaced over the anchors), the val images of its classes are shuffled; the
first `batches x batch` stream in as unlabelled batches (`PersonalizedModel.adapt`, from
`bundle.generic()`), the rest are the test images. After b batches the current model is evaluated on
the test images: a prediction is right if it is the image's class (a class left out of the adapted
task is always wrong). Beside the curve: the generic model (b = 0: every class, uniform mix) and the
model for the true description (the task's class list). Also recorded per b: the adapted task's size,
its recall and precision against the true classes, and the Jaccard overlap with the task of b - 1
(how stable the choice is).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

import sdk
from sdk.adapt import AdaptRule, adapt
from trainer.rundir import RunDir


def accuracy(model: sdk.PersonalizedModel, images: np.ndarray, labels: np.ndarray) -> float:
    predicted = model.class_indices[model.logits(images).argmax(1)]
    return 100.0 * float(np.mean(predicted == labels))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", type=Path, required=True, help="the run the bundle was exported from (its data)")
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--batch", type=int, default=32, help="images per unlabelled batch")
    parser.add_argument("--min-count", type=int, default=AdaptRule.min_count)
    parser.add_argument("--pad-to", type=int, default=AdaptRule.pad_to)
    parser.add_argument("--min-images", type=int, default=AdaptRule.min_images)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("docs/results/self_improvement"))
    args = parser.parse_args()

    from trainer.config import TrainConfig
    from trainer.data.tasks import TaskSampler
    from trainer.run import open_data

    config = TrainConfig.load(RunDir(args.run).config)
    data = open_data(config, progress=False)
    bundle = sdk.load(args.bundle).warm_up()
    if [c.id for c in bundle.bundle.classes] != data.wnids:
        raise SystemExit(f"{args.bundle} does not hold the classes of {args.run}")
    sampler = TaskSampler(data.hierarchy, k=config.task_k, mode=config.task_mode)
    every = sampler.evaluation_tasks(args.seed)
    tasks = [every[i] for i in np.linspace(0, len(every) - 1, args.tasks).round().astype(int)]
    rule = AdaptRule(min_count=args.min_count, pad_to=args.pad_to, min_images=args.min_images)
    rng = np.random.default_rng(args.seed)
    streamed = args.batches * args.batch
    curves = {k: [[] for _ in range(args.batches + 1)] for k in ("accuracy", "size", "recall", "precision", "jaccard")}
    generic, true_description = [], []
    start = time.perf_counter()
    for t, task in enumerate(tasks):
        rows = rng.permutation(np.flatnonzero(np.isin(data.val.labels, task)))
        if len(rows) <= streamed:
            raise SystemExit(f"a task has {len(rows)} val images: fewer than the {streamed} streamed")
        images, labels = np.asarray(data.val.images[rows]), data.val.labels[rows]
        test_images, test_labels = images[streamed:], labels[streamed:]
        model = bundle.generic()
        true_description.append(accuracy(bundle.personalize([data.wnids[c] for c in task]), test_images, test_labels))
        previous = set(model.class_indices.tolist())
        for b in range(args.batches + 1):
            if b:
                model = adapt(model, images[(b - 1) * args.batch: b * args.batch], rule)
            chosen = set(model.class_indices.tolist())
            hits = len(chosen & set(task.tolist()))
            for key, value in (("accuracy", accuracy(model, test_images, test_labels)), ("size", len(chosen)),
                               ("recall", hits / len(task)), ("precision", hits / len(chosen)),
                               ("jaccard", len(chosen & previous) / len(chosen | previous))):
                curves[key][b].append(value)
            previous = chosen
        generic.append(curves["accuracy"][0][-1])
        if t % 10 == 0:
            print(f"[task {t}] generic {generic[-1]:.1f}, after {args.batches} batches "
                  f"{curves['accuracy'][-1][-1]:.1f}, true description {true_description[-1]:.1f}", flush=True)
    mean = {k: [round(float(np.mean(v)), 3) for v in values] for k, values in curves.items()}
    spread = [round(1.96 * float(np.std(v, ddof=1)) / np.sqrt(len(v)), 2) for v in curves["accuracy"]]
    result = {"batches": list(range(args.batches + 1)), "accuracy": [round(a, 2) for a in mean["accuracy"]],
              "accuracy_ci95": spread, "true_description": round(float(np.mean(true_description)), 2),
              "generic": round(float(np.mean(generic)), 2), "task_size": mean["size"], "recall": mean["recall"],
              "precision": mean["precision"], "jaccard_with_previous": mean["jaccard"],
              "tasks": len(tasks), "batch": args.batch, "rule": vars(rule), "bundle": str(args.bundle),
              "run": str(args.run), "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}",
              "seconds": round(time.perf_counter() - start, 1),
              "command": "python -m scripts.bench_self_improvement " + " ".join(sys.argv[1:])}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    args.out.with_suffix(".svg").write_text(svg(result))
    args.out.with_suffix(".md").write_text(markdown(result, args.out.with_suffix(".svg").name))
    print(markdown(result, ""))


def svg(r: dict) -> str:
    """The accuracy curve, with the generic and true-description levels as dashed lines."""
    w, h, pad = 640, 400, 60
    ys = r["accuracy"] + [r["true_description"], r["generic"]]
    y0, y1 = min(ys) - 2, max(ys) + 2
    n = len(r["batches"]) - 1

    def px(b: float) -> float:
        return pad + b / n * (w - 2 * pad)

    def py(y: float) -> float:
        return h - pad - (y - y0) / (y1 - y0) * (h - 2 * pad)

    points = " ".join(f"{px(b):.1f},{py(a):.1f}" for b, a in zip(r["batches"], r["accuracy"], strict=True))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" '
             'font-size="11">',
             f'<text x="{pad}" y="20" font-size="13" font-weight="bold">Self-improvement: accuracy vs unlabelled '
             f'batches of {r["batch"]}</text>',
             f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="black"/>',
             f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="black"/>',
             f'<text x="{w / 2}" y="{h - 20}" text-anchor="middle">batches seen (0 to {n})</text>',
             f'<text x="15" y="{h / 2}" transform="rotate(-90 15 {h / 2})" text-anchor="middle">'
             f'top-1 % ({y0:.1f} to {y1:.1f})</text>',
             f'<polyline points="{points}" fill="none" stroke="#1f77b4" stroke-width="2"/>']
    for label, y, colour in (("true description", r["true_description"], "#2ca02c"),
                             ("generic", r["generic"], "#d62728")):
        parts.append(f'<line x1="{pad}" y1="{py(y):.1f}" x2="{w - pad}" y2="{py(y):.1f}" stroke="{colour}" '
                     'stroke-dasharray="5,4"/>')
        parts.append(f'<text x="{w - pad - 4}" y="{py(y) - 4:.1f}" text-anchor="end" fill="{colour}">{label} '
                     f'({y:.2f})</text>')
    for b, a in zip(r["batches"], r["accuracy"], strict=True):
        parts.append(f'<circle cx="{px(b):.1f}" cy="{py(a):.1f}" r="3" fill="#1f77b4"/>')
    parts.append("</svg>")
    return "\n".join(parts)


def markdown(r: dict, plot: str) -> str:
    lines = ["# Self-improvement without a description (TAPER 5.2)", "", f"Command: `{r['command']}`  ",
             f"Bundle `{r['bundle']}`, {r['tasks']} tasks, batches of {r['batch']} unlabelled val images; rule "
             f"{r['rule']} (sdk/adapt.py). Machine: {r['machine']}; {r['seconds']} s.", "",
             f"Generic model (every class, uniform mix): {r['generic']:.2f}. True description (the task's class "
             f"list): {r['true_description']:.2f}.", "",
             "| batches seen | accuracy | ±95% | task size | recall of true classes | precision "
             "| Jaccard with previous |",
             "|---|---|---|---|---|---|---|"]
    for i, b in enumerate(r["batches"]):
        lines.append(f"| {b} | {r['accuracy'][i]:.2f} | {r['accuracy_ci95'][i]:.2f} | {r['task_size'][i]:.1f} | "
                     f"{r['recall'][i]:.3f} | {r['precision'][i]:.3f} | {r['jaccard_with_previous'][i]:.3f} |")
    if plot:
        lines += ["", f"![curve]({plot})"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
