"""Transfer (issue 75): what a start from a network that already knows images is worth on your own photos,
measured on classes that network never saw.

    python -m scripts.bench_transfer --results docs/results/transfer          # about 40 min here, once

1. The upstream: the `demo` preset on Tiny ImageNet without the own-photos set's 24 classes
   (`--exclude-classes scripts/own_data/source_classes.json`, stage 1 for UPSTREAM_STAGE1_EPOCHS), exported
   as a bundle. `classes_overlap` counts the WordNet ids it trained on that the own photos come from: 0.
2. The own-photos set (scripts/own_photos.py builds it: 24 plain-named classes, 150 photos each), trained
   with the `demo` preset:
   - `scratch_same_epochs`: from nothing, for as many stage-1 epochs as the fine-tune's (head + body);
   - `scratch`: from nothing with the stage-1 epochs of SCRATCH_EPOCHS that score best on the val images
     the rows are scored on (the sceptic's baseline, given every advantage), or the above if it is better;
   - `init`: `--init upstream.taper`, the fine-tuning defaults (trainer.config.FINETUNE), every stage; its
     TAPER and classifier selection (`taper`, `classifier_selection`), and its wall time: train, eval, export;
   - `linear_probe`: the upstream's features as they are, a classifier trained on them alone;
   - `fewshot_5`, `fewshot_20`: `sdk.personalize(upstream, examples=...)` with the first 5 or 20 training
     photos of each of the task's classes (no training at all);
   - `input_128`: the fine-tune at 128 px (`--set input_size=128`) from the 64 px upstream.
   Every row is scored on the same 6-way neighbourhood tasks (eval seeds EVAL_SEEDS, every val image of
   each task's classes), with its 3 worst classes.
3. A page of the same val photos labelled by the from-scratch and the fine-tuned networks (<work>/transfer.html;
   not committed: Tiny ImageNet's images are not ours to publish).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from scripts.cpu import describe
from scripts.own_photos import DATA, HERE, build_folder
from scripts.results import write_result

UPSTREAM_STAGE1_EPOCHS = 16     # the upstream's stage 1 (the demo preset's is 4); stages 2-3 as the preset's
SCRATCH_EPOCHS = (4, 9, 16, 32, 64)  # the sceptic's baseline: from-scratch stage-1 epochs (64: 32 was the edge)
EVAL_SEEDS = (0, 1, 2)
PAGE_CLASSES = ("ladybug", "bee", "pretzel", "limousine")
PAGE_PHOTOS = 4
COMMAND = "python -m scripts.bench_transfer --results docs/results/transfer"


def own_class_ids() -> list[str]:
    """The WordNet ids the own photos come from (scripts/own_data/source_classes.json)."""
    return list(json.loads((HERE / "source_classes.json").read_text())["classes"].values())


def upstream_run(work: Path, data: Path = DATA, epochs: int = UPSTREAM_STAGE1_EPOCHS, until: str = "stage3",
                 extra: dict | None = None, name: str | None = None, exclude: bool = True) -> Path:
    """The upstream run directory (trained once: about 25 min here), its classes disjoint from the own photos':
    `work`/upstream, or `work`/upstream-e<epochs> for another stage-1 length (lab/upstream_epochs.py), or
    `work`/<name> with `extra` config fields (lab/upstream_width.py: width 0.5). With `exclude` False it trains
    on every class, the own photos' too (lab/upstream_ceiling.py: an upper bound, no fair start)."""
    from trainer.data.holdout import read_class_list
    from trainer.run import run

    run_dir = work / (name or ("upstream" if epochs == UPSTREAM_STAGE1_EPOCHS else f"upstream-e{epochs}"))
    if not (run_dir / until / "model.safetensors").is_file():
        print(f"[transfer] python -m trainer run --preset demo --data {data}"
              + (" --exclude-classes scripts/own_data/source_classes.json" if exclude else "")
              + f" --set stage1_epochs={epochs} --out {run_dir}"
              + "".join(f" --set {k}={v}" for k, v in (extra or {}).items())
              + (f" --until {until}" if until != "stage3" else ""), flush=True)
        overrides = {"data": str(data), "exclude_classes": read_class_list(HERE / "source_classes.json") if exclude
                     else (), "stage1_epochs": epochs, **(extra or {})}
        run(run_dir, None if (run_dir / "config.json").exists() else "demo",
            {} if (run_dir / "config.json").exists() else overrides, until=until)
    return run_dir


def lab_parser(prog: str, doc: str) -> argparse.ArgumentParser:
    """The arguments every transfer experiment of the lab takes (lab/upstream_*.py): --work and --out."""
    parser = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=None, help="the transfer work folder (default: the cache's)")
    parser.add_argument("--out", type=Path, default=None, help="write the result here (JSON; default: print it)")
    return parser


def work_folder(work: Path | None = None) -> Path:
    """Where the transfer runs live: `work`, else the SDK cache's transfer/ (its runs are reused across commands)."""
    from sdk.media.cache import cache_root

    return work or cache_root() / "transfer"


def own_photos(work: Path, data: Path = DATA) -> Path:
    """The own photos the transfer runs train on: the worked example's 24 classes, 150 photos each, beside `work`."""
    return build_folder(data, work.parent / "own-photos" / "my-photos", 150)


def upstream_bundle(work: Path, data: Path = DATA) -> Path:
    """The upstream exported as a bundle (`python -m export bundle`), built once."""
    from export.bundle import bundle_run

    path = work / "upstream.taper"
    if not path.is_file():
        bundle_run(upstream_run(work, data), path)
    return path


def trained_classes(run_dir: Path) -> list[str]:
    """The class ids a run trained on (its data less its excluded and held-out classes)."""
    from trainer.config import TrainConfig
    from trainer.run import open_data

    return list(open_data(TrainConfig.load(run_dir / "config.json"), progress=False).wnids)


def train_seconds(run_dir: Path, stage: str | None = None) -> float:
    """A run's own record of its training wall time (metrics.json): one stage's, or all stages' summed."""
    times = json.loads((run_dir / "metrics.json").read_text())["wall_time_s"]
    return times[stage] if stage else sum(times.values())


def summary(row: dict) -> dict:
    """A scored row (Scorer) without its per-class accuracies, as the result files hold it."""
    return {k: v for k, v in row.items() if k != "per_class"}


def own_run(work: Path, name: str, photos: Path, overrides: dict, until: str = "stage3") -> tuple[Path, float]:
    """A `demo` run on the own photos (trained once); (its directory, its training seconds: the run's own
    record of each stage's wall time, so a rerun of the benchmark reports the first training's)."""
    from trainer.run import run

    run_dir = work / name
    fresh = not (run_dir / "config.json").exists()
    print(f"[transfer] {name}: python -m trainer run --preset demo --data {photos} --out {run_dir} "
          + " ".join(f"--set {k}={v}" for k, v in overrides.items()), flush=True)
    run(run_dir, "demo" if fresh else None, {"data": str(photos), "eval_seeds": EVAL_SEEDS, **overrides}
        if fresh else {}, progress=False, until=until)
    return run_dir, train_seconds(run_dir)


class Scorer:
    """The 6-way tasks of the own photos and the val images they are scored on, for any predictor."""

    def __init__(self, run_dir: Path):
        from trainer.config import TrainConfig
        from trainer.data.tasks import TaskSampler
        from trainer.evaluate import Evaluator
        from trainer.run import make_context

        self.config = TrainConfig.load(run_dir / "config.json")
        self.ctx = make_context(run_dir, self.config, progress=False)
        self.evaluator = Evaluator(self.ctx.data, self.ctx.model_config, self.ctx.preprocessing)
        sampler = TaskSampler(self.ctx.data.hierarchy, k=self.config.task_k)
        self.tasks = [t for seed in EVAL_SEEDS for t in sampler.evaluation_tasks(seed)]
        self.names = list(self.ctx.data.names)
        self.labels = self.evaluator.labels.numpy()

    def score(self, predict) -> dict:
        """`predict(i, task, rows)` -> the predicted class index of each val row of `rows` (within `task`):
        accuracy over (task, image) pairs, per class, and the 3 worst classes."""
        hits = np.zeros(len(self.names))
        counts = np.zeros(len(self.names))
        for i, task in enumerate(self.tasks):
            rows = self.evaluator.task_index(task).numpy()
            right = np.asarray(predict(i, task, rows)) == self.labels[rows]
            np.add.at(hits, self.labels[rows], right)
            np.add.at(counts, self.labels[rows], 1)
        per_class = {self.names[c]: round(100 * hits[c] / counts[c], 1) for c in range(len(self.names)) if counts[c]}
        worst = sorted(per_class.items(), key=lambda kv: kv[1])[:3]
        return {"accuracy": round(100 * hits.sum() / counts.sum(), 2), "worst_classes": dict(worst),
                "per_class": per_class}

    def static(self, logits) -> dict:
        """A task-independent network's logits [N, C] over the val images, with classifier selection."""
        logits = np.asarray(logits)
        return self.score(lambda i, task, rows: task[logits[rows][:, task].argmax(1)])

    def network(self, run_dir: Path) -> dict:
        """The classifier selection of a run's reference network (its baseline, or stage 1)."""
        from trainer.run import RunDir, load_model

        model = load_model(self.ctx.model_config, RunDir(run_dir).reference_model())
        return self.static(self.evaluator.logits(model.state_dict()).numpy())

    def taper(self, run_dir: Path) -> dict:
        """TAPER: one fused network per task from the run's trained mixer, with classifier selection."""
        import torch

        from trainer.run import load_taper

        model, embedder = load_taper(self.ctx, run_dir)
        with torch.no_grad():
            alphas = model.alpha(embedder(self.tasks))

        def predict(i, task, rows):
            logits = self.evaluator.logits(model.bank.state_dict_for(alphas[i]), torch.from_numpy(rows)).numpy()
            return task[logits[:, task].argmax(1)]
        return self.score(predict)

    def fewshot(self, bundle, shots: int) -> dict:
        """`sdk.personalize(bundle, examples=...)` per task, from the first `shots` training photos of each class."""
        import sdk

        train = self.ctx.data.train
        photos = {c: list(np.asarray(train.images[np.flatnonzero(train.labels == c)[:shots]]))
                  for c in range(len(self.names))}   # read once, not once per task
        val = self.ctx.data.val.images[self.evaluator.rows]

        def predict(i, task, rows):
            examples = {self.names[c]: photos[c] for c in task}
            model = sdk.personalize(bundle, examples=examples)
            order = np.array([self.names.index(name) for name in model.classes])
            return order[model.logits(np.asarray(val[rows])).argmax(1)]
        return self.score(predict)


def contact_page(scorer: Scorer, runs: dict[str, Path], out: Path) -> Path:
    """The same val photos of PAGE_CLASSES, labelled by each run's network (classifier selection over all
    the own classes), one section per run: what a start changes, by eye."""
    from sdk.media.report_page import Section, Tile, render_page, thumbnail_uri, write_page
    from sdk.text.encoder import primary_name
    from trainer.run import RunDir, load_model

    labels = scorer.labels
    shown = [primary_name(n) for n in scorer.names]   # "labrador", not "labrador, labrador retriever, lab"
    rows = [r for name in PAGE_CLASSES if name in shown
            for r in np.flatnonzero(labels == shown.index(name))[:PAGE_PHOTOS]]
    images = scorer.ctx.data.val.images[scorer.evaluator.rows[rows]]
    sections = []
    for title, run_dir in runs.items():
        model = load_model(scorer.ctx.model_config, RunDir(run_dir).reference_model())
        logits = scorer.evaluator.logits(model.state_dict()).numpy()[rows]
        tiles = [Tile(thumbnail_uri(np.asarray(images[j])),
                      [f"true: {shown[labels[r]]}", f"said: {shown[logits[j].argmax()]}"],
                      "right" if logits[j].argmax() == labels[r] else "wrong") for j, r in enumerate(rows)]
        sections.append(Section(title, facts=[("right", f"{sum(t.verdict == 'right' for t in tiles)} of {len(tiles)}")],
                                tiles=tiles))
    summary = [f"The same {len(rows)} val photos of {', '.join(PAGE_CLASSES)}, each labelled among all "
               f"{len(scorer.names)} own classes by a network trained from nothing and by one fine-tuned from "
               "an upstream that never saw these classes."]
    return write_page(out, render_page("Own photos: from scratch and from the upstream", summary, sections))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.bench_transfer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA, help="the Tiny ImageNet archive")
    parser.add_argument("--work", type=Path, default=None, help="work folder (default: the SDK's cache folder)")
    parser.add_argument("--results", type=Path, default=None, help="write <RESULTS>.json")
    args = parser.parse_args(argv)

    import sdk
    from export.bundle import bundle_run
    from trainer.config import FINETUNE
    from trainer.report import evaluate_run

    start = time.perf_counter()
    work = work_folder(args.work)
    photos = own_photos(work, args.data)
    bundle_path = upstream_bundle(work, args.data)
    upstream_s = train_seconds(work / "upstream")
    upstream_ids = trained_classes(work / "upstream")
    overlap = sorted(set(upstream_ids) & set(own_class_ids()))

    finetune_epochs = FINETUNE["stage1_epochs"] + FINETUNE["stage1_head_epochs"]
    init_dir, init_train_s = own_run(work, "init", photos, {"stage1_init": str(bundle_path)})
    eval_start = time.perf_counter()
    evaluation = evaluate_run(init_dir, progress=False)
    (init_dir / "eval.json").write_text(json.dumps(evaluation, indent=1))
    bundle_run(init_dir, work / "init.taper")
    init_wall = init_train_s + time.perf_counter() - eval_start

    scorer = Scorer(init_dir)
    rows: dict = {"init": scorer.network(init_dir), "taper": scorer.taper(init_dir)}
    rows["classifier_selection"] = rows["init"]
    sweep = {}
    for epochs in sorted({*SCRATCH_EPOCHS, finetune_epochs}):
        run_dir, seconds = own_run(work, f"scratch-{epochs}", photos, {"stage1_epochs": epochs}, until="stage1")
        sweep[epochs] = {**scorer.network(run_dir), "train_s": round(seconds, 1)}
    rows["scratch_same_epochs"] = {**sweep[finetune_epochs], "stage1_epochs": finetune_epochs}
    best = max(sweep, key=lambda e: sweep[e]["accuracy"])
    rows["scratch"] = {**sweep[best], "stage1_epochs": best}
    probe_dir, _ = own_run(work, "linear-probe", photos, {"stage1_init": str(bundle_path), "stage1_epochs": 0,
                                                          "stage1_head_epochs": finetune_epochs}, until="stage1")
    rows["linear_probe"] = {**scorer.network(probe_dir), "head_epochs": finetune_epochs}
    upstream = sdk.load(bundle_path)
    for shots in (5, 20):
        rows[f"fewshot_{shots}"] = scorer.fewshot(upstream, shots)
    big_dir, big_s = own_run(work, "init-128px", photos, {"stage1_init": str(bundle_path), "input_size": 128})
    rows["input_128"] = {**Scorer(big_dir).network(big_dir), "train_s": round(big_s, 1)}
    page = contact_page(scorer, {f"From scratch ({best} epochs)": work / f"scratch-{best}",
                                 "Fine-tuned from the upstream": init_dir}, work / "transfer.html")

    result = {
        **{k: summary(v) for k, v in rows.items()},
        "trainer_eval": {k: evaluation["accuracy"].get(k) for k in ("taper", "classifier_selection")},
        "init_gain_over_scratch": round(rows["init"]["accuracy"] - rows["scratch"]["accuracy"], 2),
        "taper_minus_classifier_selection": round(rows["taper"]["accuracy"] - rows["init"]["accuracy"], 2),
        "scratch_sweep": {str(e): {"accuracy": v["accuracy"], "train_s": v["train_s"]} for e, v in sweep.items()},
        "classes_overlap": len(overlap), "upstream_classes": len(upstream_ids), "own_classes": len(scorer.names),
        "finetune_defaults": FINETUNE, "task_k": scorer.config.task_k, "eval_seeds": list(EVAL_SEEDS),
        "tasks": len(scorer.tasks), "val_images": int(len(scorer.labels)),
        "wall_s": {"init_train_eval_export": round(init_wall, 1), "upstream": round(upstream_s, 1),
                   "total": round(time.perf_counter() - start, 1)},
        "page": str(page), "cpu": describe(), "command": COMMAND,
    }
    print(json.dumps({k: v for k, v in result.items() if k not in ("scratch_sweep",)}, indent=1))
    if args.results:
        write_result(result, args.results.with_suffix(".json"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
