"""A task of one class: what should its model be? (issue 72, padding; docs/results/experiments.md, "A task of
one class").

    python -m lab.one_class --out docs/results/one_class.json      # 11 s here (AMD EPYC, 2 cores)
    python -m lab.one_class --bundle ~/.cache/taper-sdk/own-photos/my-photos.taper \
        --photos ~/.cache/taper-sdk/own-photos/my-photos/val --out docs/results/one_class_own_photos.json

Until this measurement a description that names one class ("a bee") was padded to two: the nearest class by text
similarity was added (`TaskOptions.min_classes=2`), so the model answered "bee" or "lemon" for every photo. A user
who asks for bees wants "bee, or anything else". This measures, on Tiny ImageNet validation photos and the
transfer upstream bundle (`python -m scripts.bench_transfer` builds it: 176 classes, the held-out own-data classes
out), for tasks of one class X mixed as a task of X alone is mixed, six ways of deciding "X or not X" from the
same network:
- "padded": the two-class model shipped before, X against the nearest class P; X when z_X > z_P;
- "rest_lse": X against the rest of the bundle's classes, exactly: z_X > logsumexp of the others' logits
  (the full head's softmax gives X more than half);
- "rest_balanced": the same with X's prior made even against all others together: z_X > logsumexp(others) -
  log(n), n the number of others (`sdk.engines.rest.one_against_rest`: what ships since, for a task of one class);
- "rest_linear": a linear lower bound of "rest_lse" (Jensen), one more head row: z_X > mean(others) + log(n);
- "rest_mean": z_X > mean(others), a linear lower bound of "rest_balanced";
- "argmax": the generic answer, X when X is the arg max of every class's logit.
Scored per task on X's 40 validation photos and on `--others` photos of other classes (a fixed random draw),
and on the padded class P's photos alone: true positive rate, true negative rate, and their mean (balanced).
Each task also checks that the shipped model of one class (`sdk.personalize(bundle, [X])`) decides as
"rest_balanced" does (`shipped_agrees_with_rest_balanced`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

import sdk
from sdk.engines.rest import one_against_rest
from sdk.stopwatch import Stopwatch
from sdk.text.resolver.options import TaskOptions

UPSTREAM = Path.home() / ".cache/taper-sdk/transfer/upstream.taper"
DATA = Path.home() / ".cache/taper-sdk/data"


def validation(bundle) -> tuple[np.ndarray, np.ndarray]:
    """Tiny ImageNet's validation photos of the bundle's classes, labelled by bundle class index."""
    folder = next(DATA.glob("tiny-imagenet-200.tar.gz-64px-*"))
    wnids = json.loads((folder / "meta.json").read_text())["wnids"]
    index = {c.id: i for i, c in enumerate(bundle.bundle.classes)}
    images, labels = np.load(folder / "val_images.npy", mmap_mode="r"), np.load(folder / "val_labels.npy")
    bundle_labels = np.array([index.get(wnids[k], -1) for k in labels])
    keep = np.flatnonzero(bundle_labels >= 0)
    return np.asarray(images[keep]), bundle_labels[keep]


def photo_folders(bundle, folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """A folder of one folder of photos per class, named by class id (an own-photos `val/`), labelled by bundle
    class index; a class without a folder has no photos."""
    from sdk.media.images import to_uint8_batch

    files, labels = [], []
    for i, c in enumerate(bundle.bundle.classes):
        found = sorted(p for p in (folder / c.id).glob("*") if p.is_file()) if (folder / c.id).is_dir() else []
        files += found
        labels += [i] * len(found)
    return to_uint8_batch(files, bundle.preprocessing.input_size)[0], np.array(labels)


def decisions(z: np.ndarray, x: int, pad: int) -> dict[str, np.ndarray]:
    """Per photo, True where each way says X; z is [N, classes] logits of every class."""
    others = np.delete(z, x, axis=1)
    top = others.max(1, keepdims=True)
    lse = (top + np.log(np.exp(others - top).sum(1, keepdims=True)))[:, 0]
    return {"padded": z[:, x] > z[:, pad], "rest_lse": z[:, x] > lse,
            "rest_linear": z[:, x] > others.mean(1) + np.log(others.shape[1]), "argmax": z.argmax(1) == x,
            "rest_balanced": one_against_rest(z, x).argmax(1) == 0, "rest_mean": z[:, x] > others.mean(1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, default=UPSTREAM)
    parser.add_argument("--tasks", type=int, default=24)
    parser.add_argument("--others", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--photos", type=Path, help="photos by class id (an own-photos val/ folder) instead of "
                        "Tiny ImageNet's validation set")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    bundle = sdk.load(args.bundle)
    images, labels = validation(bundle) if args.photos is None else photo_folders(bundle, args.photos)
    rng = np.random.default_rng(args.seed)
    every = np.arange(len(bundle.classes))
    rows, sums = [], {}
    for x in rng.choice(every, min(args.tasks, len(every)), replace=False):
        name = bundle.classes[x]
        padded = bundle.personalize([name], TaskOptions(min_classes=2))
        one = bundle.personalize([name], TaskOptions(min_classes=1))
        assert one.class_indices[0] == x and one.rest, (name, one.classes)   # the shipped model of one class
        pad = int(next(i for i in padded.class_indices if i != x))
        full = bundle._model(every, one.alpha, [], Stopwatch())
        own = np.flatnonzero(labels == x)
        rest = rng.choice(np.flatnonzero(labels != x), args.others, replace=False)
        pads = np.flatnonzero(labels == pad)
        shown = images[np.concatenate([own, rest, pads])]
        z = full.logits(shown)
        said = decisions(z, x, pad)
        agree = float(np.mean((one.logits(shown).argmax(1) == 0) == said["rest_balanced"]))
        row = {"class": name, "padded_with": bundle.classes[pad], "shipped_agrees_with_rest_balanced": agree}
        for way, says in said.items():
            tpr, tnr = says[: len(own)].mean(), 1 - says[len(own): len(own) + len(rest)].mean()
            tnr_pad = 1 - says[len(own) + len(rest):].mean()
            row[way] = {"tpr": round(float(tpr), 3), "tnr": round(float(tnr), 3),
                        "tnr_padded_class": round(float(tnr_pad), 3), "balanced": round(float(tpr + tnr) / 2, 3)}
            for key, value in row[way].items():
                sums.setdefault(way, {}).setdefault(key, []).append(value)
        rows.append(row)
        print(name, "+", row["padded_with"], {w: row[w]["balanced"] for w in said})
    summary = {way: {k: round(float(np.mean(v)), 3) for k, v in keys.items()} for way, keys in sums.items()}
    print(json.dumps(summary, indent=1))
    if args.out:
        from scripts.results import write_result

        write_result({"summary": summary, "tasks": rows, "bundle": str(args.bundle), "others": args.others,
                      "command": " ".join(["python -m lab.one_class", *(sys.argv[1:] if argv is None else argv)])},
                     args.out, echo=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
