"""The Java core at the Python reader's bar (issue 49, part 2): the reliability suite's damaged bundles
loaded and personalized by both readers, each in its own worker process with a timeout. Writes
<out>.json and <out>.md.

    python -m scripts.java_fuzz --cases 5000 --out docs/results/java_fuzz    # trains the tiny preset first
    python -m scripts.java_fuzz --cases 200 --bundle x.taper --out /tmp/java_fuzz

The cases are scripts/fuzz_bundle.py's (its kinds and weights, unsigned and re-signed, on the same
mixed-storage base bundle), each given in both format versions the readers share: as damaged (format 5), and
stamped version 6 and signed by a key (`bundle_edits.signed_copy`: the signature holds, so each reader's
own checks decide), alternately. Each is given to a Python worker (`sdk.load`, `sdk.personalize(bundle,
[three class names])`) and to the Java core's harness (android_demo/core/src/test/.../FuzzHarness.java:
`Bundle.open`, `Personalizer.personalize(classNames)`), both without a text encoder. Outcomes per reader:
typed (BundleError / BundleException, DescriptionError / DescriptionException), escape (anything else),
hang (no answer within --timeout), crash (the process died), loaded. They agree when both refuse with a
typed error, or both load with the same classes, mixer alpha (1e-5) and head rows (1e-4).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from scripts.fuzz_bundle import SIGNED, UNSIGNED, Worker, base_bundle, draw_case, hostile_members

ROOT = Path(__file__).resolve().parents[1]
CORE_TESTS = ROOT / "android_demo" / "core" / "run_tests.sh"
PYTHON_WORKER = r"""
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
import sdk
names = sys.argv[1:]
for line in sys.stdin:
    try:
        model = sdk.personalize(sdk.load(line.strip()), names)
        head = [list(w) + [b] for w, b in zip(model.head_weight.tolist(), model.head_bias.tolist())]
        out = {"outcome": "loaded", "classes": model.classes, "alpha": model.alpha.tolist(), "head": head}
    except sdk.SdkError as e:
        out = {"outcome": "typed", "error": type(e).__name__, "message": str(e)[:200]}
    except BaseException as e:
        out = {"outcome": "escape", "error": type(e).__name__, "message": str(e)[:200]}
    print(json.dumps(out), flush=True)
"""


def compile_core(build: Path) -> None:
    """The Java core, its tests and benchmarks compiled into `build` by android_demo/core/run_tests.sh --compile."""
    build.mkdir(parents=True, exist_ok=True)
    subprocess.run(["bash", str(CORE_TESTS), "--compile", str(build)], check=True)


def compile_harness(build: Path) -> list[str]:
    """The Java core and its test sources compiled into `build` (android_demo/core/run_tests.sh --compile, the
    one place they are compiled, the resolver's compound list beside them); the command that runs the harness."""
    compile_core(build)
    return ["java", "-Xmx2g", "-Xss4m", "-XX:ActiveProcessorCount=1", "-cp", str(build), "org.taper.sdk.FuzzHarness"]


def run_both(workers: dict[str, Worker], path: Path, timeout: float) -> dict[str, dict]:
    """Each reader's answer for one bundle, the two run at once."""
    results: dict[str, dict] = {}

    def one(reader: str) -> None:
        results[reader] = workers[reader].run(str(path), timeout)

    threads = [threading.Thread(target=one, args=(r,)) for r in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def same_load(a: dict, b: dict) -> bool:
    """Both loaded the same task: classes, alpha and head rows (non-finite values on the same places)."""
    if a["classes"] != b["classes"]:
        return False
    for key, tolerance in (("alpha", 1e-5), ("head", 1e-4)):
        x = np.array(a[key], dtype=float)
        y = np.array(b[key], dtype=float)   # the harness writes null for a non-finite value
        if x.shape != y.shape or not np.allclose(x, y, atol=tolerance, rtol=1e-5, equal_nan=True):
            return False
    return True


def agree(python: dict, java: dict) -> bool:
    if python["outcome"] == "typed" and java["outcome"] == "typed":
        return True
    return python["outcome"] == java["outcome"] == "loaded" and same_load(python, java)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.java_fuzz", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=5000)
    parser.add_argument("--bundle", type=Path, help="bundle to damage (default: train the tiny preset and pack it)")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "java_fuzz")
    args = parser.parse_args(argv)
    if shutil.which("javac") is None:
        raise SystemExit("needs a JDK (javac, java 15+)")
    start = time.time()
    counts: dict[str, Counter] = defaultdict(Counter)
    examples: dict[str, list[str]] = defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        blob = base_bundle(args.bundle, work)
        pristine_path = work / "pristine.taper"
        pristine_path.write_bytes(blob)
        import sdk

        names = [c.split(",")[0].strip() for c in sdk.load(pristine_path).classes[:3]]
        java_command = compile_harness(work / "build") + [str(args.timeout), *names]
        workers = {"python": Worker(command=[sys.executable, "-c", PYTHON_WORKER, *names]),
                   "java": Worker(command=java_command)}
        pristine = {reader: w.run(str(pristine_path), args.timeout) for reader, w in workers.items()}
        if not (pristine["python"]["outcome"] == "loaded" and agree(pristine["python"], pristine["java"])):
            raise SystemExit(f"the pristine bundle does not load alike: {pristine}")
        hostile = hostile_members(blob)
        rng = np.random.default_rng(args.seed)
        path = work / "case.taper"
        from export.bundle_edits import signed_copy
        from sdk.format.signing import SigningKey

        key = SigningKey.from_seed(bytes(range(32)))
        for i in range(args.cases):
            kind, label, data = draw_case(blob, rng, hostile)
            version = "5"
            if i % 2:   # every other case in format 6, signed (one whose header is damaged stays as it is)
                signed = signed_copy(data, key)
                version = "6" if signed is not data else "5"
                data = signed
            path.write_bytes(data)
            results = run_both(workers, path, args.timeout)
            for reader, w in workers.items():
                counts[f"{reader}:{kind}"][results[reader]["outcome"]] += 1
                if not w.alive():
                    workers[reader] = w.restarted()
            agreed = agree(results["python"], results["java"])
            counts["agreement"]["agree" if agreed else "disagree"] += 1
            counts[f"agreement_v{version}"]["agree" if agreed else "disagree"] += 1
            if not agreed and len(examples[kind]) < 10:
                examples[kind].append(f"{label}: python {results['python']['outcome']} "
                                      f"{results['python'].get('error', '')}; java {results['java']['outcome']} "
                                      f"{results['java'].get('error', '')} {results['java'].get('message', '')[:120]}")
            if (i + 1) % 500 == 0:  # the report so far, so a run cut short still leaves its counts
                write(summarise(counts, examples, args, argv, time.time() - start), args.out)
                print(f"[java_fuzz] {i + 1}/{args.cases} cases, {time.time() - start:.0f} s, "
                      f"{counts['agreement']['disagree']} disagreements", flush=True)
        for w in workers.values():
            w.process.kill()
    report = summarise(counts, examples, args, argv, time.time() - start)
    write(report, args.out)
    print(markdown(report))
    return 0 if report["failures"] == 0 else 1


def write(report: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    out.with_suffix(".md").write_text(markdown(report))


def summarise(counts, examples, args, argv, seconds: float) -> dict:
    outcomes = ("typed", "escape", "hang", "crash", "loaded")
    kinds = UNSIGNED + SIGNED
    by_kind = {reader: {k: {o: counts[f"{reader}:{k}"][o] for o in outcomes} for k in kinds}
               for reader in ("python", "java")}
    java = {o: sum(by_kind["java"][k][o] for k in kinds) for o in outcomes}
    cases = sum(counts["agreement"].values())
    result = {"cases": cases, "planned": args.cases, "seed": args.seed, "timeout_s": args.timeout,
              "seconds": round(seconds, 1),
              "untyped": java["escape"], "hangs": java["hang"], "crashes": java["crash"],
              "agreement": round(counts["agreement"]["agree"] / max(cases, 1), 4),
              "disagreements": counts["agreement"]["disagree"], "by_kind": by_kind,
              "python_totals": {o: sum(by_kind["python"][k][o] for k in kinds) for o in outcomes},
              "java_totals": java, "examples": dict(examples),
              "command": " ".join(["python -m scripts.java_fuzz", *(argv if argv is not None else sys.argv[1:])])}
    result["python_untyped"] = result["python_totals"]["escape"]
    result["by_version"] = {v: {"cases": sum(counts[f"agreement_v{v}"].values()),
                                "agreement": round(counts[f"agreement_v{v}"]["agree"]
                                                   / max(sum(counts[f"agreement_v{v}"].values()), 1), 4)}
                            for v in ("5", "6")}
    result["failures"] = result["untyped"] + result["hangs"] + result["crashes"] + result["disagreements"] \
        + result["python_untyped"]
    return result


def markdown(r: dict) -> str:
    lines = [f"# The Java core on the reliability suite's damaged bundles (`{r['command']}`)", "",
             f"{r['cases']} cases in {r['seconds']:.0f} s: Java untyped {r['untyped']}, hangs {r['hangs']}, "
             f"crashes {r['crashes']}; agreement with Python on accept/refuse (and on the loaded task) "
             f"{r['agreement']:.2%} ({r['disagreements']} disagreements); Python untyped {r.get('python_untyped', 0)}.",
             "", "By format version: " + ", ".join(f"{v}: {c['cases']} cases, agreement {c['agreement']:.2%}"
                                                  for v, c in r.get("by_version", {}).items()), "",
             "| kind | Python typed / loaded / other | Java typed / loaded / other |", "|---|---|---|"]
    for kind in r["by_kind"]["python"]:
        p, j = r["by_kind"]["python"][kind], r["by_kind"]["java"][kind]
        lines.append(f"| {kind} | {p['typed']} / {p['loaded']} / {p['escape'] + p['hang'] + p['crash']} | "
                     f"{j['typed']} / {j['loaded']} / {j['escape'] + j['hang'] + j['crash']} |")
    for kind, rows in r["examples"].items():
        lines += ["", f"Disagreements, {kind}:"] + [f"- {row}" for row in rows]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
