"""Warm start: `warm_up()` in a fresh process with and without the device cache (sdk/engines/device_cache.py).
Writes docs/results/warm_start.{json,md}.

    .venv/bin/python -m scripts.bench_warm_start [--repeats 6] [--bundle B.taper ...]

Cases: a full-width ResNet-18 (224 px, 1000 classes, Q=10), float32 and stored in the recommended compact
mode (RECOMMENDED, with the bench run's shared layers), and the bench model's shape (width 0.25, 64 px,
200 classes), random weights (`scripts.bench_runtime.random_bundle`: timing does not depend on the values),
unless --bundle names others. Each repeat starts three fresh processes in turn: a first process with an
empty cache (it compiles the backbone and writes the entries: the compiled backbone, sdk/engines/device_cache.py,
the text encoder's session, sdk/text/encoder_cache.py, and at its first int8 model the int8 route), one with the
cache off (`TAPER_DEVICE_CACHE=0`: what every launch cost before), and one reading the entries the first
wrote. Each process times `warm_up()` and its parts (the text encoder, the cache read, the compiled route's
set-up: the bases reordered into the device layout and one shared session), then personalizes once and
checks the route, then times its first int8 model (the int8 route made and checked, or read from its entry:
sdk/engines/int8_route_cache.py). Medians and ranges.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import json, sys, time
import sdk, sdk.engines.device_cache as dc, sdk.engines.onnxruntime as engine
parts = {}
def timed(name, fn):
    def wrapped(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            parts[name] = parts.get(name, 0.0) + (time.perf_counter() - start) * 1000
    return wrapped
dc.load = timed("cache_read", dc.load)
engine.compile_backbone = timed("compile_backbone", engine.compile_backbone)
engine.CompiledRoute.__init__ = timed("route_setup", engine.CompiledRoute.__init__)
import sdk.text.encoder as te
te.TextEncoder.from_checked_members = classmethod(timed("encoder", te.TextEncoder.from_checked_members.__func__))
bundle = sdk.load(sys.argv[1])
start = time.perf_counter()
bundle.warm_up()
warm = (time.perf_counter() - start) * 1000
model = sdk.personalize(bundle, bundle.classes[:2])
start = time.perf_counter()
sdk.personalize(bundle, bundle.classes[2:4], precision="int8")
first_int8 = (time.perf_counter() - start) * 1000
print(json.dumps({"warm_up_ms": round(warm, 1), "route": bundle.engine.route,
                  "parts_ms": {k: round(v, 1) for k, v in parts.items()},
                  "first_personalize_ms": round(model.timings["total"], 1),
                  "first_int8_ms": round(first_int8, 1), "int8_route": bundle.engine.int8_sessions.name}))
"""


RECOMMENDED = "drop:0.04+subspace:8+fp16"   # the compact mode docs/runtime.md recommends


def run_child(bundle: Path, cache: str) -> dict:
    env = {**os.environ, "TAPER_DEVICE_CACHE": cache}
    out = subprocess.run([sys.executable, "-c", CHILD, str(bundle)], capture_output=True, text=True, env=env,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def summary(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 1), "min": round(min(values), 1), "max": round(max(values), 1)}


def measure(bundle: Path, repeats: int, tmp: Path) -> dict:
    """`repeats` alternated triples: a first process (an empty cache: compiles, checks, writes the entries),
    one with the cache off, one reading what that first process wrote."""
    runs = {"first": [], "uncached": [], "cached": []}
    for i in range(repeats):
        runs["first"].append(run_child(bundle, str(tmp / f"cache-{i}")))
        runs["uncached"].append(run_child(bundle, "0"))
        runs["cached"].append(run_child(bundle, str(tmp / f"cache-{i}")))
        shutil.rmtree(tmp / f"cache-{i}")
    if any(r["route"] != "compiled" for rs in runs.values() for r in rs):
        raise SystemExit(f"{bundle}: a process did not end on the compiled route")
    out = {}
    for name, rs in runs.items():
        out[f"warm_up_ms_{name}"] = summary([r["warm_up_ms"] for r in rs])
        parts = sorted({k for r in rs for k in r["parts_ms"]})
        out[f"parts_ms_{name}"] = {k: summary([r["parts_ms"].get(k, 0.0) for r in rs]) for k in parts}
        out[f"first_int8_ms_{name}"] = summary([r["first_int8_ms"] for r in rs])
    out["int8_routes"] = sorted({r["int8_route"] for rs in runs.values() for r in rs})
    out["first_over_uncached"] = round(out["warm_up_ms_first"]["median"] / out["warm_up_ms_uncached"]["median"], 3)
    out["cached_over_uncached"] = round(out["warm_up_ms_cached"]["median"] / out["warm_up_ms_uncached"]["median"], 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", type=Path, nargs="*", default=None, help="bundles to measure (default: random)")
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--out", type=Path, default=Path("docs/results/warm_start"))
    args = parser.parse_args()
    from export.compress import Mode, compress
    from scripts.bench_bundle import run_shared
    from scripts.bench_runtime import random_bundle

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        bundles = {p.stem: p for p in args.bundle} if args.bundle else {
            "resnet18_full_224px_q10": random_bundle(tmp / "full.taper", "imagenet", 1.0, 1000, 224, 10),
            f"resnet18_full_224px_q10_{RECOMMENDED}": random_bundle(
                tmp / "full-compact.taper", "imagenet", 1.0, 1000, 224, 10,
                store=lambda b: compress(b, Mode.parse(RECOMMENDED), run_shared(Mode.parse(RECOMMENDED),
                                                                                 "imagenet", 1.0, 1000))),
            "bench_w025_64px_q10_random": random_bundle(tmp / "bench.taper", "imagenet", 0.25, 200, 64, 10)}
        cases = {}
        for name, path in bundles.items():
            cases[name] = measure(path, args.repeats, tmp)
            print(name, json.dumps(cases[name]), flush=True)
    import onnxruntime as ort

    result = {"command": " ".join(["python -m scripts.bench_warm_start", *sys.argv[1:]]), "repeats": args.repeats,
              "machine": f"{platform.machine()}, {os.cpu_count()} cores, onnxruntime {ort.__version__}",
              "cases": cases}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    lines = ["# Warm start: warm_up() in a fresh process, with and without the device cache", "",
             f"`{result['command']}` ({result['machine']}; {args.repeats} alternated triples of fresh processes, "
             "medians [min-max], ms). Written by scripts/bench_warm_start.py.", "",
             "| case | first process (miss, writes) | no cache | first / no cache | cached | cached / no cache | "
             "cached: route set-up | cached: text encoder | cached: rest |", "|---|---|---|---|---|---|---|---|---|"]
    for name, c in cases.items():
        f, u, k = c["warm_up_ms_first"], c["warm_up_ms_uncached"], c["warm_up_ms_cached"]
        setup = c["parts_ms_cached"].get("route_setup", {"median": 0.0})["median"]
        encoder = c["parts_ms_cached"].get("encoder", {"median": 0.0})["median"]
        lines.append(f"| {name} | {f['median']} [{f['min']}-{f['max']}] | {u['median']} [{u['min']}-{u['max']}] | "
                     f"{c['first_over_uncached']} | {k['median']} [{k['min']}-{k['max']}] | "
                     f"{c['cached_over_uncached']} | {setup} | {encoder} | {round(k['median'] - setup - encoder, 1)} |")
    lines += ["", "The first int8 model after warm_up() (`personalize(..., precision=\"int8\")`: its plan, and its "
              "session route made and checked, or read from the cache's int8 route entry, "
              "sdk/engines/int8_route_cache.py; "
              "then the model itself), ms:", "",
              "| case | first process (makes the route, writes it) | no cache | cached | int8 route |",
              "|---|---|---|---|---|"]
    for name, c in cases.items():
        f, u, k = (c[f"first_int8_ms_{run}"] for run in ("first", "uncached", "cached"))
        lines.append(f"| {name} | {f['median']} [{f['min']}-{f['max']}] | {u['median']} [{u['min']}-{u['max']}] | "
                     f"{k['median']} [{k['min']}-{k['max']}] | {', '.join(c['int8_routes'])} |")
    lines += ["", "route set-up: the compiled route from the cache entry (the bases reordered into the device layout, "
              "one shared session); text encoder: its session from the encoder's entry (sdk/text/encoder_cache.py: the "
              "graph as onnxruntime optimized it, with its packed weights, checked by SHA-256 while it loads) and "
              "the tokenizer; rest: whatever warm_up() does besides (locks, the cache read's checks)."]
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out.with_suffix('.json')} and {args.out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
