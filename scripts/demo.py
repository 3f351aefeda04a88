"""The main job: build (or reuse) a bundle, personalize it for a few descriptions, and show what the
personalized models do on real validation images, against classifier selection.

    make demo                                   # trains the `demo` preset once (~7 min), then reuses it
    .venv/bin/python -m scripts.demo --bundle tiny-imagenet.taper --run runs/bench   # a bundle you built

For each description: the classes it resolved to, top-1 accuracy of the personalized model on the val
images of those classes, the same for classifier selection (the run's baseline or stage-1 network with its
head pruned to the same classes; needs the run directory), and the personalization time. At the end: how many
descriptions the personalized model won, said plainly, beside the figures the longer training runs
measured (docs/results/bench.json and headroom.json), since the demo's few epochs are not the method's
result.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

import sdk
from sdk.cache import cache_root
from sdk.text_encoder import primary_name
from trainer.data import DataError, load_dataset
from trainer.rundir import RunDir

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
DESCRIPTIONS = ["insects", "dogs", "a drinking glass with a base and stem", "vehicles", "bicycle, pedestrian, tree",
                "kitchen appliances"]


def build_demo_bundle(data: str, folder: Path) -> tuple[Path, Path]:
    """Train the `demo` preset once per preset configuration (a changed preset trains into a new folder)."""
    from export.bundle import bundle_run
    from trainer.config import PRESETS
    from trainer.run import run

    config = PRESETS["demo"].with_overrides(data=str(Path(data).resolve()))
    folder = folder / hashlib.sha256(json.dumps(config.to_dict(), sort_keys=True).encode()).hexdigest()[:10]
    run_dir, bundle = folder / "run", folder / "tiny-imagenet-demo.taper"
    if not bundle.exists():
        print(f"[demo] training the `demo` preset into {run_dir} (once; resumes if cut off)", flush=True)
        start = time.perf_counter()
        run(run_dir, "demo", {"data": str(Path(data).resolve())})
        bundle_run(run_dir, bundle)
        print(f"[demo] trained and packed {bundle} in {(time.perf_counter() - start) / 60:.1f} min", flush=True)
    return bundle, run_dir


def baseline_accuracy(run_dir: Path, images: np.ndarray, labels: np.ndarray, classes: np.ndarray) -> float | None:
    """Classifier selection: the run's baseline network (or, in a run without one such as the `demo`
    preset's, its stage-1 network, which the bench measured 0.08 points from it), argmax over the same classes."""
    path = next((p for p in (RunDir(run_dir).model("baseline"), RunDir(run_dir).model("stage1"))
                 if p.exists()), None)
    if path is None:
        return None
    import torch

    from trainer.config import TrainConfig
    from trainer.data.transforms import to_normalized_tensor
    from trainer.models import ResNetConfig
    from trainer.run import load_model

    config = TrainConfig.load(RunDir(run_dir).config)
    model = load_model(ResNetConfig(config.stem, config.width, _num_classes(run_dir), config.input_size), path)
    with torch.no_grad():
        logits = model(to_normalized_tensor(torch.from_numpy(images), sdk.Preprocessing(config.input_size)))
    predicted = classes[logits[:, torch.from_numpy(classes)].argmax(1).numpy()]
    return float((predicted == labels).mean() * 100)


def _num_classes(run_dir: Path) -> int:
    from trainer.checkpoints import load_state

    return int(load_state(RunDir(run_dir).classes)["text"].shape[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="../shared/data/tiny-imagenet-200.tar.gz")
    parser.add_argument("--bundle", type=Path, default=None, help="use this bundle instead of the demo one")
    parser.add_argument("--run", type=Path, default=None, help="its run directory (for the baseline)")
    args = parser.parse_args()
    try:
        data = load_dataset(args.data)
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.bundle:
        bundle_path, run_dir = args.bundle, args.run or Path("/nonexistent")
    else:
        bundle_path, run_dir = build_demo_bundle(args.data, cache_root() / "demo")
    start = time.perf_counter()
    bundle = sdk.load(bundle_path)
    print(f"loaded {bundle_path} ({bundle_path.stat().st_size / 1e6:.0f} MB, checksums verified) in "
          f"{(time.perf_counter() - start) * 1000:.0f} ms")
    bundle.warm_up()  # the text encoder session, created once as an app does at start
    index = {w: i for i, w in enumerate(data.wnids)}
    comparisons: list[tuple[float, float]] = []
    for description in DESCRIPTIONS:
        try:
            model = sdk.personalize(bundle, description)
        except sdk.DescriptionError as e:
            print(f"\n{description!r}: {e}")
            continue
        classes = np.array([index[c] for c in model.class_ids])
        pick = np.flatnonzero(np.isin(data.val.labels, classes))
        images, labels = np.ascontiguousarray(data.val.images[pick]), data.val.labels[pick]
        predicted = classes[model.predict_proba(images).argmax(1)]
        accuracy = float((predicted == labels).mean() * 100)
        baseline = baseline_accuracy(run_dir, images, labels, classes)
        names = ", ".join(primary_name(c) for c in model.classes[:8]) + (" ..." if len(model.classes) > 8 else "")
        print(f"\n{description!r} -> {len(model.classes)} classes: {names}")
        print(f"  resolved by: {'; '.join(model.resolution)}")
        print(f"  top-1 on {len(pick)} val images: personalized {accuracy:.1f}%"
              + (f", classifier selection {baseline:.1f}%" if baseline is not None else
                 " (no run directory: classifier selection not shown)"))
        print("  personalize: " + ", ".join(f"{k} {v:.1f} ms" for k, v in model.timings.items()))
        if baseline is not None:
            comparisons.append((accuracy, baseline))
    print("\n" + "\n".join(summary(comparisons, _stage1_epochs(run_dir))))
    return 0


def _stage1_epochs(run_dir: Path) -> int | None:
    try:
        return int(json.loads(RunDir(run_dir).config.read_text())["stage1_epochs"])
    except (OSError, KeyError, ValueError, TypeError):
        return None


def summary(comparisons: list[tuple[float, float]], stage1_epochs: int | None) -> list[str]:
    """Say plainly whether the personalized models won here, and print the longer runs' figures beside.

    >>> summary([(60.0, 55.0), (50.0, 52.0)], 4)[0]
    'personalized above classifier selection on 1 of 2 descriptions (mean difference +1.5 points)'
    """
    lines = []
    if comparisons:
        wins = sum(ours > theirs for ours, theirs in comparisons)
        mean = float(np.mean([ours - theirs for ours, theirs in comparisons]))
        lines.append(f"personalized above classifier selection on {wins} of {len(comparisons)} descriptions "
                     f"(mean difference {mean:+.1f} points)")
        if wins * 2 <= len(comparisons) or mean <= 0:
            budget = f"{stage1_epochs} epochs of stage 1" if stage1_epochs else "this bundle's training budget"
            lines.append(f"At {budget} the personalized model does NOT beat classifier selection here; "
                         "these few descriptions are not the method's measurement. The longer runs below are.")
    return lines + bench_figures(RESULTS)


# The bench reports the demo quotes: (file in docs/results, what trained it).
BENCH_REPORTS = (("bench.json", "bench preset"),
                 ("bench_w1_h200.json", "bench preset at full width, trained on an H200"))


def bench_figures(results: Path) -> list[str]:
    """The measured figures of the longer training runs, read from docs/results (nothing if absent)."""
    lines = []
    for name, label in BENCH_REPORTS:
        try:
            bench = json.loads((results / name).read_text())
            acc, epochs = bench["accuracy"], bench["config"]["stage1_epochs"]
            lines.append(f"{label} ({epochs}-epoch stage 1, 200 tasks x {len(bench['config']['eval_seeds'])} "
                         f"seeds; docs/results/{name[:-5]}.md): TAPER {acc['taper']:.2f}, classifier selection "
                         f"{acc['classifier_selection']:.2f} ({acc['taper'] - acc['classifier_selection']:+.2f}), "
                         f"stage-1 network {acc['stage1_selection']:.2f}, uniform average {acc['uniform_average']:.2f}"
                         + (f", stage-3 seed std {bench['stage3_seed_std']:.2f}" if "stage3_seed_std" in bench else ""))
        except (OSError, KeyError, ValueError, TypeError):
            pass
    try:
        headroom = json.loads((results / "headroom.json").read_text())
        seeds = headroom["stage3_seeds"]
        gains = ", ".join(f"{g:+.2f}" for g in seeds["taper_minus_cs"])
        run = headroom.get("bases", {}).get(seeds.get("runs", [None])[0], {})
        epochs = run.get("config", {}).get("stage1_epochs")
        stage1 = f"{epochs:g}-epoch stage 1, " if epochs else ""
        lines.append(f"specialist bases (issue 12; {stage1}task seeds {seeds.get('task_seeds', [0])}; "
                     f"docs/results/headroom.md): TAPER {seeds['mean']:.2f} over {len(seeds['taper'])} stage-3 "
                     f"seeds, TAPER - classifier selection {gains}")
    except (OSError, KeyError, ValueError, TypeError):
        pass
    return lines


if __name__ == "__main__":
    sys.exit(main())
