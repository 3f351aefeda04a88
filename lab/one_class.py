"""A task of one class: what should its model be? (issue 72, padding; docs/results/experiments.md, "A task of
one class").

    python -m lab.one_class --out docs/results/one_class.json      # 11 s here (AMD EPYC, 2 cores)
    python -m lab.one_class --bundle ~/.cache/taper-sdk/own-photos/my-photos.taper \
        --data ~/.cache/taper-sdk/own-photos/my-photos --out docs/results/one_class_own_photos.json

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
from scripts.own_photos import DATA
from sdk.engines.rest import collapse, one_against_rest, rest_order
from sdk.stopwatch import Stopwatch
from sdk.text.resolver.options import TaskOptions

UPSTREAM = Path.home() / ".cache/taper-sdk/transfer/upstream.taper"


def validation(bundle, source: Path) -> tuple[np.ndarray, np.ndarray]:
    """The validation photos of `source` (the Tiny ImageNet archive, or an own-photos folder with val/), decoded as
    the trainer decodes them (`trainer.data.load_dataset`: its cache), of the bundle's classes, labelled by bundle
    class index."""
    from trainer.data import load_dataset

    data = load_dataset(source, bundle.preprocessing.input_size, progress=False)
    labels = by_bundle_class([c.id for c in bundle.bundle.classes], data.wnids, data.val.labels)
    keep = np.flatnonzero(labels >= 0)
    return np.asarray(data.val.images[keep]), labels[keep]


def by_bundle_class(bundle_ids: list[str], wnids: list[str], labels: np.ndarray) -> np.ndarray:
    """Data set labels (indices into `wnids`) as indices into the bundle's classes; -1 for a class it lacks."""
    index = {c: i for i, c in enumerate(bundle_ids)}
    return np.array([index.get(w, -1) for w in wnids])[labels]


def decisions(z: np.ndarray, x: int, pad: int) -> dict[str, np.ndarray]:
    """Per photo, True where each way says X; z is [N, classes] logits of every class."""
    others = np.delete(z, x, axis=1)
    lse = collapse(z[:, rest_order(x, z.shape[1])])[:, 1]   # the others' log-sum-exp, not lowered
    return {"padded": z[:, x] > z[:, pad], "rest_lse": z[:, x] > lse,
            "rest_linear": z[:, x] > others.mean(1) + np.log(others.shape[1]), "argmax": z.argmax(1) == x,
            "rest_balanced": one_against_rest(z, x).argmax(1) == 0, "rest_mean": z[:, x] > others.mean(1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, default=UPSTREAM)
    parser.add_argument("--tasks", type=int, default=24)
    parser.add_argument("--others", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=DATA, help="whose val photos: the Tiny ImageNet archive "
                        "(default) or an own-photos folder (train/ and val/ by class id)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    bundle = sdk.load(args.bundle)
    images, labels = validation(bundle, args.data)
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
