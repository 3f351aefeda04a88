"""The main job, as far as it is built: text encoder + data + description -> classes.

    make demo                       # or: .venv/bin/python scripts/demo.py --data <Tiny ImageNet .tar.gz or folder>

Training (issue #3) and the bundle with `sdk.personalize` (issue #4) are not built yet; this prints
what it did and what it could not do yet.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from export.text_encoder import cached_text_encoder  # noqa: E402
from sdk.text_encoder import TextEncoder, primary_name  # noqa: E402
from trainer.data import DataError, load_dataset  # noqa: E402

DESCRIPTIONS = ["insects", "kitchen appliances", "a drinking glass with a base and stem", "dogs",
                "bicycle, pedestrian, tree"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="../shared/data/tiny-imagenet-200.tar.gz")
    parser.add_argument("--top", type=int, default=5)
    args = parser.parse_args()

    start = time.perf_counter()
    encoder = TextEncoder.from_dir(cached_text_encoder())
    print(f"text encoder ready in {time.perf_counter() - start:.1f} s")
    try:
        start = time.perf_counter()
        data = load_dataset(args.data)
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"data: {data.num_classes} classes, {len(data.train)} train / {len(data.val)} val images "
          f"({time.perf_counter() - start:.1f} s, cache {data.folder})")

    class_embeddings = encoder.embed_class_names([primary_name(n) for n in data.names])
    for description in DESCRIPTIONS:
        times = []
        for _ in range(5):
            t = time.perf_counter()
            scores = class_embeddings @ encoder.encode([description])[0]
            times.append(time.perf_counter() - t)
        top = np.argsort(-scores)[: args.top]
        n_val = int(np.isin(data.val.labels, top).sum())
        chosen = ", ".join(f"{primary_name(data.names[i])} ({scores[i]:.2f})" for i in top)
        print(f"\n{description!r} -> {chosen}\n  {n_val} val images of these classes; "
              f"text -> classes {statistics.median(times) * 1000:.1f} ms")
    print("\nNot built yet: training the bases and mixer (issue #3) and the bundle + sdk.personalize "
          "(issue #4), so no personalized model, accuracy or personalization time is reported.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
