"""Golden test vectors for the mobile mirror (android_demo/core): what the Python runtime computes for
a bundle and a few class lists, so the Java core can be checked step by step on the JVM.

    python -m export golden tiny.taper --out golden/     # golden.json + <case>.folded.f32

golden.json: {"bundle": path, "cases": [{"name", "classes" (names), "task" (indices), "embedding",
"alpha" [4][Q], "head" [K][C+1] (weights then bias), "folded": file of the backbone buffer (float32 LE)}]}
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import sdk
from sdk.tasks import TaskOptions


def write_golden(bundle_path: Path, out_dir: Path, cases: list[list[str]]) -> Path:
    bundle = sdk.load(bundle_path)
    out_dir.mkdir(parents=True, exist_ok=True)
    records = []
    for i, names in enumerate(cases):
        task = bundle.resolver.resolve(names, TaskOptions())
        model = bundle.personalize(names)
        weights = bundle.fused_weights(model.alpha)
        buffer, _ = bundle.folded_weights(weights)
        (out_dir / f"case{i}.folded.f32").write_bytes(buffer.astype("<f4").tobytes())
        head = np.concatenate([model.head_weight, model.head_bias[:, None]], axis=1)
        records.append({"name": f"case{i}", "classes": names, "task": task.classes.tolist(),
                        "embedding": task.embedding.tolist(), "alpha": model.alpha.tolist(), "head": head.tolist(),
                        "folded": f"case{i}.folded.f32"})
    path = out_dir / "golden.json"
    path.write_text(json.dumps({"bundle": str(bundle_path), "cases": records}))
    return path
