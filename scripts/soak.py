"""Concurrency soak (issue 49, part 5): threads in one or more processes personalizing, predicting,
adapting, enrolling, exporting and dropping bundles for minutes, every result compared with the
single-threaded reference of the same operation. Writes <out>.json and <out>.md.

    python -m scripts.soak --bundle /tmp/demo.taper --seconds 300 --threads 8 --out docs/results/soak
    python -m scripts.soak --seconds 20 --threads 4 --processes 2        # trains the tiny preset bundle first
    python -m scripts.soak --full-width 224 --seconds 120 --threads 4 --out docs/results/soak_full_width

Operations, each drawn at random by every thread (seeded per thread):
- describe: `sdk.personalize(bundle, d).predict_proba(images)` for one of a few descriptions;
- int8: the same with `precision="int8"` (quantized on the device, its own sessions; `sdk.engines.int8_session`);
- stream: `sdk.personalize(bundle, stream=[...])` (adapt over unlabelled batches), then predict;
- examples: few-shot enrollment of two of the bundle's classes from fixed images, then predict;
- export: `model.export(<tmp>/x.onnx)`, the file's SHA-256 against the reference's;
- reload: a new `sdk.load` of the same file (its own mapping), personalize, predict, and drop it.
A mismatch is a result other than the reference (probabilities beyond 1e-5, or other classes or
bytes); a crash is an exception from any operation or a worker process that died. Memory is the
process's resident set (VmRSS), sampled each second: its peak, its median over each minute (each third
of a shorter run), and its growth: the last window's median minus the second's (the first is warm-up).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np

OPERATIONS = ("describe", "int8", "stream", "examples", "export", "reload")
TOLERANCE = 1e-5


def rss_mb() -> float:
    """This process's resident set, in MiB (Linux /proc)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Soak:
    """The operations on one loaded bundle and their single-threaded reference results."""

    def __init__(self, path: Path, work: Path):
        import sdk
        from scripts.fuzz_bundle import description_for
        from sdk.text.encoder import primary_name

        self.sdk, self.path, self.work = sdk, path, work
        self.bundle = sdk.load(path).warm_up()
        rng = np.random.default_rng(49)
        self.images = rng.integers(0, 256, (4, 48, 40, 3), dtype=np.uint8)
        names = [primary_name(c) for c in self.bundle.classes]
        self.descriptions = [description_for(path), names[:3], f"{names[0]}, {names[1]}"]
        self.stream = [rng.integers(0, 256, (48, 32, 32, 3), dtype=np.uint8) for _ in range(3)]
        self.examples = {names[0]: list(rng.integers(0, 256, (3, 32, 32, 3), dtype=np.uint8)),
                         names[1]: list(rng.integers(0, 256, (3, 32, 32, 3), dtype=np.uint8))}
        self.reference = {op: self.run(op, 0, slot="reference") for op in OPERATIONS}
        self.reference.update({f"{op}{i}": self.run(op, i, slot="reference")
                               for op in ("describe", "int8") for i in range(len(self.descriptions))})

    def run(self, op: str, choice: int, slot: str):
        """The result of one operation: (classes, probabilities) or an export's SHA-256."""
        sdk = self.sdk
        if op in ("describe", "int8"):
            model = sdk.personalize(self.bundle, self.descriptions[choice % len(self.descriptions)],
                                    precision="int8" if op == "int8" else "float32")
        elif op == "stream":
            model = sdk.personalize(self.bundle, stream=iter(self.stream), min_images=48)
        elif op == "examples":
            model = sdk.personalize(self.bundle, examples=self.examples)
        elif op == "export":
            target = self.work / f"{slot}.onnx"
            model = sdk.personalize(self.bundle, self.descriptions[0])
            digest = hashlib.sha256(model.export(target).read_bytes()).hexdigest()
            target.unlink()
            return digest
        elif op == "reload":
            fresh = sdk.load(self.path)
            model = sdk.personalize(fresh, self.descriptions[0])
            result = (tuple(model.classes), model.predict_proba(self.images))
            del model, fresh
            return result
        else:
            raise ValueError(op)
        return tuple(model.classes), model.predict_proba(self.images)

    def matches(self, op: str, choice: int, result) -> bool:
        expected = self.reference[f"{op}{choice % len(self.descriptions)}" if op in ("describe", "int8") else op]
        if isinstance(expected, str):
            return result == expected
        return expected[0] == result[0] and np.allclose(expected[1], result[1], atol=TOLERANCE, rtol=0)


def soak_process(path: str, seconds: float, threads: int, seed: int) -> dict:
    """One process: `threads` threads for `seconds`; its counts, mismatches, crashes and memory."""
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        soak = Soak(Path(path), Path(tmp))
        counts, mismatches, crashes, lock = Counter(), [], [], threading.Lock()
        deadline = time.monotonic() + seconds

        def work(t: int) -> None:
            rng = np.random.default_rng([seed, t])
            i = 0
            while time.monotonic() < deadline:
                op, choice = OPERATIONS[int(rng.integers(len(OPERATIONS)))], int(rng.integers(3))
                try:
                    ok = soak.matches(op, choice, soak.run(op, choice, slot=f"t{t}-{i}"))
                except Exception as e:  # every exception here is a failure: the inputs are all valid
                    with lock:
                        crashes.append(f"{op}: {type(e).__name__}: {str(e)[:200]}")
                    continue
                with lock:
                    counts[op] += 1
                    if not ok:
                        mismatches.append(op)
                i += 1

        memory, start = [], time.monotonic()
        pool = [threading.Thread(target=work, args=(t,), daemon=True) for t in range(threads)]
        for thread in pool:
            thread.start()
        while any(thread.is_alive() for thread in pool):
            memory.append((round(time.monotonic() - start, 1), round(rss_mb(), 1)))
            time.sleep(1.0)
        for thread in pool:
            thread.join()
    settle = min(60.0, seconds / 3)
    # Growth is read from windows' medians, not two samples: with 8 threads the resident set swings by a
    # few hundred MiB with the sessions and copies in flight at that second.
    windows = [[m for t, m in memory if k * settle <= t < (k + 1) * settle] for k in range(int(seconds // settle))]
    medians = [round(float(np.median(w)), 1) for w in windows if w]
    after = [m for t, m in memory if t >= settle] or [memory[-1][1]]
    return {"operations": dict(counts), "mismatches": len(mismatches), "mismatched": sorted(set(mismatches)),
            "crashes": len(crashes), "crash_examples": crashes[:5], "rss_mb_peak": max(m for _, m in memory),
            "rss_mb_settled": after[0], "rss_mb_end": memory[-1][1],
            "rss_mb_median_per_window": medians, "window_s": settle,
            "rss_growth_after_settle_mb": round(medians[-1] - medians[1], 1) if len(medians) > 2 else
            round(memory[-1][1] - after[0], 1)}


def _child(args: tuple, queue) -> None:
    try:
        queue.put(soak_process(*args))
    except BaseException as e:  # reported as a crash of the whole process
        queue.put({"crashes": 1, "crash_examples": [f"process: {type(e).__name__}: {e}"]})


def run_soak(path: Path, seconds: float, threads: int, processes: int) -> dict:
    """`processes` worker processes (spawned, so each maps the bundle itself) of `threads` threads."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    children = [context.Process(target=_child, args=((str(path), seconds, threads, p), queue))
                for p in range(processes)]
    for child in children:
        child.start()
    results = []
    for _ in children:
        try:
            results.append(queue.get(timeout=seconds + 600))
        except Exception:
            results.append({"crashes": 1, "crash_examples": ["process: no result (died or hung)"]})
    for child in children:
        child.join(timeout=60)
        if child.exitcode not in (0, None) and not any(r.get("crash_examples") for r in results):
            results.append({"crashes": 1, "crash_examples": [f"process exit {child.exitcode}"]})
    operations = Counter()
    for r in results:
        operations.update(r.get("operations", {}))
    return {"seconds": seconds, "threads": threads, "processes": processes, "operations": dict(operations),
            "calls": sum(operations.values()), "mismatches": sum(r.get("mismatches", 0) for r in results),
            "crashes": sum(r.get("crashes", 0) for r in results), "per_process": results}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.soak", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", type=Path, default=None, help="default: the tiny preset's, trained first")
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="write <OUT>.json and <OUT>.md")
    parser.add_argument("--full-width", type=int, default=None, metavar="SIZE",
                        help="instead of --bundle: a random full-width bundle at this image size, in the recommended "
                        "compact mode (scripts/bench_int8's; random weights: concurrency and memory only), whose "
                        "int8 models run in two halves")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="soak-bundle-") as tmp:
        path = args.bundle
        if args.full_width:
            from scripts.bench_int8 import RECOMMENDED_MODE, compact_random_bundle

            path = compact_random_bundle(Path(tmp) / "wide.taper", args.full_width, RECOMMENDED_MODE)
        elif path is None:
            from export.bundle import bundle_run
            from trainer.run import run

            path = bundle_run(run(Path(tmp) / "tiny-run", "tiny", progress=False), Path(tmp) / "tiny.taper")
        result = {"command": " ".join(["python -m scripts.soak", *(argv if argv is not None else sys.argv[1:])]),
                  "bundle": str(args.bundle or (f"random full width, {args.full_width} px" if args.full_width
                                                else "tiny preset")),
                  **run_soak(path, args.seconds, args.threads, args.processes)}
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(text + "\n")
        memory = "; ".join(f"process {i}: peak {r.get('rss_mb_peak')} MiB, median per {r.get('window_s')} s "
                           f"{r.get('rss_mb_median_per_window')} MiB, growth after the first window "
                           f"{r.get('rss_growth_after_settle_mb')} MiB" for i, r in enumerate(result["per_process"]))
        args.out.with_suffix(".md").write_text(
            f"Soak (`{result['command']}`): {result['processes']} process(es) x {result['threads']} threads for "
            f"{result['seconds']:.0f} s, {result['calls']} calls ({result['operations']}): "
            f"{result['mismatches']} mismatches, {result['crashes']} crashes. Memory: {memory}.\n")
    return 1 if result["mismatches"] or result["crashes"] else 0


if __name__ == "__main__":
    sys.exit(main())
