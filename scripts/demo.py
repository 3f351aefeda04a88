"""The main job: build (or reuse) a bundle, personalize it for a few descriptions, and show what the
personalized models do on real validation images, against classifier selection.

    make demo                                   # trains the `demo` preset once (~7 min), then reuses it
    .venv/bin/python -m scripts.demo --bundle tiny-imagenet.taper --run runs/bench   # a bundle you built

For each description: the classes it resolved to, top-1 accuracy of the personalized model on the val
images of those classes, the same for classifier selection (the run's baseline or stage-1 network with its
head pruned to the same classes; needs the run directory), and the personalization time. At the end: how many
descriptions the personalized model won, said plainly, beside the figures the longer training runs
measured (docs/results/bench.json and headroom.json), since the demo's few epochs are not the method's
result. The same, with a strip of the val photos and what the model called them, goes to a page
(`--report`, default demo-report.html: one self-contained file that opens offline).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import sdk
from sdk.engines.rest import REST_INDEX, one_against_rest
from sdk.media.cache import cache_root
from sdk.media.report_page import Section, Tile, cpu_name, render_page, thumbnail_uri, write_page
from sdk.text.encoder import primary_name
from sdk.text.resolver import MISSING
from trainer.data import DataError, load_dataset
from trainer.rundir import RunDir

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
PHOTOS_SHOWN = 14  # per description, spread evenly over its val images
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
    if classes[-1] == REST_INDEX:   # a model of one class: the same decision from every class's logit
        predicted = classes[one_against_rest(logits.numpy(), int(classes[0])).argmax(1)]
    else:
        predicted = classes[logits[:, torch.from_numpy(classes)].argmax(1).numpy()]
    return float((predicted == labels).mean() * 100)


def _num_classes(run_dir: Path) -> int:
    from trainer.checkpoints import load_state

    return int(load_state(RunDir(run_dir).classes)["text"].shape[0])


@dataclass
class Outcome:
    """One description's result, as the terminal and the page show it."""

    description: str
    error: str | None = None
    classes: list[str] = field(default_factory=list)
    resolution: list[str] = field(default_factory=list)
    images: int = 0
    accuracy: float = 0.0
    baseline: float | None = None
    timings: dict[str, float] = field(default_factory=dict)
    tiles: list[Tile] = field(default_factory=list)


def personalize_and_score(bundle, description: str, data, index: dict[str, int], run_dir: Path) -> Outcome:
    """Personalize for `description` and score the model and classifier selection on the val images of
    its classes; a strip of PHOTOS_SHOWN of those images with true and predicted labels for the page."""
    try:
        model = sdk.personalize(bundle, description)
    except sdk.DescriptionError as e:
        return Outcome(description, error=str(e))
    classes = np.array([index.get(c, REST_INDEX) for c in model.class_ids])
    pick = np.flatnonzero(np.isin(data.val.labels, classes))
    if model.rest:   # one class, or anything else: as many photos of other classes, drawn the same every run
        others = np.flatnonzero(data.val.labels != classes[0])
        pick = np.sort(np.concatenate([pick, np.random.default_rng(0).choice(others, len(pick), replace=False)]))
    images, labels = np.ascontiguousarray(data.val.images[pick]), data.val.labels[pick]
    if model.rest:
        labels = np.where(labels == classes[0], labels, REST_INDEX)
    probabilities = model.predict_proba(images)
    predicted = classes[probabilities.argmax(1)]
    names = {c: primary_name(model.classes[k]) for k, c in enumerate(classes)}
    shown = np.linspace(0, len(pick) - 1, min(PHOTOS_SHOWN, len(pick))).astype(int)
    tiles = [Tile(thumbnail_uri(images[i]), [f"true: {names[labels[i]]}",
                                             f"predicted: {names[predicted[i]]} ({probabilities[i].max():.2f})"],
                  "right" if predicted[i] == labels[i] else "wrong") for i in shown]
    return Outcome(description, classes=list(model.classes), resolution=list(model.resolution), images=len(pick),
                   accuracy=float((predicted == labels).mean() * 100),
                   baseline=baseline_accuracy(run_dir, images, labels, classes), timings=dict(model.timings),
                   tiles=tiles)


def timing_text(timings: dict[str, float]) -> str:
    """personalize()'s steps as the terminal and the page show them: "encode 0.0, resolve 0.3, ..."."""
    return ", ".join(f"{k} {v:.1f}" for k, v in timings.items())


def print_outcome(outcome: Outcome) -> None:
    if outcome.error:
        print(f"\n{outcome.description!r}: {outcome.error}")
        return
    names = ", ".join(map(primary_name, outcome.classes[:8])) + (" ..." if len(outcome.classes) > 8 else "")
    print(f"\n{outcome.description!r} -> {len(outcome.classes)} classes: {names}")
    print(f"  resolved by: {'; '.join(outcome.resolution)}")
    print(f"  top-1 on {outcome.images} val images: personalized {outcome.accuracy:.1f}%"
          + (f", classifier selection {outcome.baseline:.1f}%" if outcome.baseline is not None else
             " (no run directory: classifier selection not shown)"))
    print(f"  personalize (ms): {timing_text(outcome.timings)}")


def report_page(outcomes: list[Outcome], closing: list[str], bundle_name: str) -> str:
    """The demo's page: three lines that say what the numbers mean, then per description how it was read
    (missing items marked), the two accuracies side by side, the timings, and a strip of photos."""
    scored = [o for o in outcomes if not o.error]
    if closing and closing[0].startswith("personalized"):
        sizes = sorted(o.images for o in scored if o.baseline is not None)
        headline = (f"{closing[0][0].upper()}{closing[0][1:]}, on {sizes[0]}-{sizes[-1]} val images each (one "
                    f"point is {sizes[0] / 100:.1f}-{sizes[-1] / 100:.1f} images).")
    else:
        headline = "Classifier selection was not measured (no run directory), so there is nothing to compare against."
    longer = [line for line in closing if not line.startswith(("personalized", "At "))]
    meaning = next((line for line in closing if line.startswith("At ")), None) or (
        "A few descriptions are not the method's measurement; the longer runs below are, e.g. " + longer[0]
        if longer else "A few descriptions are not the method's measurement.")
    timed = [o for o in scored if "total" in o.timings]
    if timed:
        slowest = max(timed, key=lambda o: o.timings["total"])
        step, ms = max(((k, v) for k, v in slowest.timings.items() if k != "total"), key=lambda kv: kv[1])
        timing = (f"Personalizing took {min(o.timings['total'] for o in timed):.1f}-{slowest.timings['total']:.1f} "
                  f"ms per description on {cpu_name()}; the slowest ({slowest.description!r}) spent {ms:.1f} ms of "
                  f"it in {step}.")
    else:
        timing = "No description was personalized."
    overview = [["description", "classes", "personalized", "classifier selection", "difference", "personalize"]]
    overview += [[o.description, "not read: see below", "", "", "", ""] if o.error else
                 [o.description, str(len(o.classes)), f"{o.accuracy:.1f}%",
                  "-" if o.baseline is None else f"{o.baseline:.1f}%",
                  "-" if o.baseline is None else f"{o.accuracy - o.baseline:+.1f}",
                  f"{o.timings.get('total', 0):.1f} ms"] for o in outcomes]
    sections = [Section("Top-1 accuracy on the val images of each description's classes", table=overview)]
    for o in outcomes:
        if o.error:
            sections.append(Section(o.description, reading=[(o.error, MISSING in o.error)]))
            continue
        facts = [("classes", f"{len(o.classes)}: " + ", ".join(map(primary_name, o.classes))),
                 ("top-1, personalized", f"{o.accuracy:.1f}% on {o.images} val images"),
                 ("top-1, classifier selection", "not measured (no run directory)" if o.baseline is None
                  else f"{o.baseline:.1f}% on the same images ({o.accuracy - o.baseline:+.1f} points)"),
                 ("personalize (ms)", timing_text(o.timings))]
        right = sum(t.verdict == "right" for t in o.tiles)
        facts.append(("photos below", f"{len(o.tiles)} of the {o.images}, evenly spread: {right} right, "
                                      f"{len(o.tiles) - right} wrong"))
        sections.append(Section(o.description, facts, [(how, MISSING in how) for how in o.resolution], o.tiles))
    sections.append(Section("The longer runs (the method's measurement)", facts=[("run", line) for line in longer]))
    return render_page(f"TAPER demo: {bundle_name}", [headline, meaning, timing], sections,
                       footer="Made by scripts/demo.py. Photos: Tiny ImageNet validation images (ImageNet's terms).")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="../shared/data/tiny-imagenet-200.tar.gz")
    parser.add_argument("--bundle", type=Path, default=None, help="use this bundle instead of the demo one")
    parser.add_argument("--run", type=Path, default=None, help="its run directory (for the baseline)")
    parser.add_argument("--report", type=Path, default=Path("demo-report.html"),
                        help="the page to write (default: demo-report.html here)")
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
    outcomes = [personalize_and_score(bundle, d, data, index, run_dir) for d in DESCRIPTIONS]
    for outcome in outcomes:
        print_outcome(outcome)
    closing = summary([(o.accuracy, o.baseline) for o in outcomes if not o.error and o.baseline is not None],
                      _stage1_epochs(run_dir))
    print("\n" + "\n".join(closing))
    try:
        page = write_page(args.report, report_page(outcomes, closing, bundle_path.name))
    except sdk.SdkError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"\nthe same, with photos: {page.resolve()} (one file, opens offline in any browser)")
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
