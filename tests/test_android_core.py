"""The Java core (android_demo/core) against the Python runtime: golden vectors checked on the JVM (tokens,
task resolution, preprocessing, alpha, fused and folded weights, head rows, logits through a replaying
engine), then the weights the Java core wrote run in onnxruntime here."""

import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest

import sdk
from export.golden import output_step, write_golden
from scripts import fuzz_bundle
from sdk.engines.onnxruntime import Network, backbone_session, ort
from sdk.engines.rest import collapse
from sdk.fusion.folding import BACKBONE_FILE

SCRIPT = Path(__file__).parents[1] / "android_demo" / "core" / "run_tests.sh"


def java_logits(bundle, weights: np.ndarray, head: np.ndarray, images: np.ndarray) -> np.ndarray:
    """Logits of the Java core's folded weights and head rows, run by onnxruntime (the standard route)."""
    session = backbone_session(bundle.engine.graph, BACKBONE_FILE, weights, ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
                               ["CPUExecutionProvider"], None)
    return Network(session, {"head_weight": np.ascontiguousarray(head[:, :-1]),
                             "head_bias": np.ascontiguousarray(head[:, -1])}).run(images)


def has_executorch() -> bool:
    return importlib.util.find_spec("executorch") is not None


def executorch_logits(program: bytes, head: np.ndarray, images: np.ndarray) -> np.ndarray:
    """Logits of a program the Java core wrote (XnnpackProgram.withWeights), run by ExecuTorch here."""
    from sdk.engines.executorch import ExecutorchNetwork, _loader
    from sdk.exports import MAX_PTE_BATCH

    torch, load = _loader()
    module = load(program)
    return ExecutorchNetwork(module, program, np.ascontiguousarray(head[:, :-1]), np.ascontiguousarray(head[:, -1]),
                             MAX_PTE_BATCH, torch).run(images)


MODES = ["fp32", "drop:0.05+lowrank:2+fp16", "int8", "subspace:3+fp16"]


@pytest.fixture(scope="module")
def java_checked(tiny_bundle, tiny_run, tmp_path_factory, request) -> dict:
    """Plain bases, and compact ones in every delta storage (each mode's golden bundle is exported in it): the
    golden vectors of the four modes, checked by the Java core in one JVM (`run_tests.sh --classes`), which
    compiles the code they share once. The refusals that do not depend on the storage (export/golden.py's
    "reader_cases": the hostile graphs and tokenizers and the ExecuTorch companion among them) are written and
    checked in fp32 only; every mode keeps its semantic forgeries, whose tensors each storage holds otherwise.
    Per mode: the bundle, golden.json, the Java side's folder and its part of the output (its failures, then
    "golden ...: N passed, M failed")."""
    from export.bundle import bundle_run

    classes = tmp_path_factory.mktemp("java_classes")
    subprocess.run(["bash", str(SCRIPT), "--compile", str(classes)], check=True, timeout=300)
    checked, pairs = {}, []
    for mode in MODES:
        work = tmp_path_factory.mktemp("golden")
        reader_cases = mode == "fp32"
        path = tiny_bundle if reader_cases else bundle_run(tiny_run, work / "compact.taper", mode=mode)
        hostile = fuzz_bundle.hostile_members(path.read_bytes()) if reader_cases else []
        companion = request.getfixturevalue("tiny_companion") if reader_cases and has_executorch() else None
        golden = write_golden(path, work / "golden", hostile_members=hostile, companion=companion,
                              reader_cases=reader_cases)
        out = work / "java"
        out.mkdir()
        checked[mode] = {"bundle": path, "golden": golden, "out": out, "companion": companion}
        pairs += [str(golden), str(out)]
    result = subprocess.run(["bash", str(SCRIPT), "--classes", str(classes), *pairs], capture_output=True, text=True,
                            timeout=600)
    sections, lines = {}, []   # each file's failures, then its verdict line
    for line in result.stdout.splitlines():
        lines.append(line)
        if verdict := re.fullmatch(r"golden (.*): \d+ passed, \d+ failed", line):
            sections[verdict.group(1)], lines = "\n".join(lines), []
    for mode in MODES:   # no verdict: the JVM ended before this file's
        checked[mode]["stdout"] = sections.get(str(checked[mode]["golden"]),
                                               result.stdout[-3000:] + result.stderr[-3000:])
    yield checked
    for mode in MODES:   # damaged copies: 119 bundles, 4.0 GB in fp32; 6 forgeries, 0.2 GB in each compact mode
        shutil.rmtree(checked[mode]["golden"].parent, ignore_errors=True)


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK (javac)")
@pytest.mark.parametrize("mode", MODES)
def test_java_core_matches_the_python_runtime(mode, java_checked):
    """The Java core's verdict on each golden case of `mode`, then its weights run here."""
    path, golden, out, companion, stdout = (java_checked[mode][k]
                                            for k in ("bundle", "golden", "out", "companion", "stdout"))
    verdict = re.search(r": (\d+) passed, 0 failed$", stdout.strip())
    assert verdict, stdout[-3000:]
    spec = json.loads(golden.read_text())
    passed = int(verdict.group(1))
    vectors = 1 + len(spec["descriptions"]) + len(spec["images"]) + 8 * len(spec["cases"]) + 10 \
        + len(spec["hostile_bundles"])
    assert spec["reader_cases"] == (mode == "fp32")
    if mode != "fp32":   # the storage's own cases only; the reader's are fp32's
        assert passed >= vectors and "signatures" not in spec and spec["hostile_bundles"]
    else:
        companion_cases = 2 + len(spec["companion"]["hostile"]) + len(spec["companion"]["signatures"]["cases"]) \
            if companion else 0
        assert passed >= vectors + len(spec["graphs"]["hostile"]) + companion_cases \
            + len(spec["signatures"]["cases"]) + 2 + len(spec["json"]) + len(spec["limit_bundles"]) \
            + len(spec.get("grammar_bundles", []))
        _reader_cases(spec, out, companion)
    _logits_cross_check(path, golden, out, companion, spec)


def _reader_cases(spec: dict, out: Path, companion) -> None:
    """What the Python reader's verdicts on the storage-independent refusals are (Java gave each: above)."""
    # Provenance and a concept's kinds at each bound load in Python, one past it is refused; Java gave the same
    # verdicts and read the same kinds (above).
    assert [c["python"] for c in spec["limit_bundles"]] == ["accepted", "BundleError"] * 3 + [
        "accepted", "BundleError", "BundleError"]
    assert len(spec["limit_bundles"][6]["kinds"][0]) == 20_000
    # The manifest's grammar in formats 5 and 6: the unedited bundle loads, every edit is refused, and Java
    # gave each verdict (above; before issue 63 it loaded the unknown fields, the option types, the transposed table).
    grammar = {c["file"]: c["python"] for c in spec["grammar_bundles"]}
    loads = ("pristine", "class_aliases", "class_aliases_empty_list", "class_stored_synonyms",
             "class_stored_only_commas")   # issue 60: a class's optional aliases and description
    accepted = {f"grammar_{name}_v{v}.taper" for name in loads for v in (5, 6)}
    assert len(grammar) == 2 * 33 and {f for f, v in grammar.items() if v == "accepted"} == accepted
    assert {v for f, v in grammar.items() if f not in accepted} == {"BundleError"}
    # A name stored without aliases (older exporters) is split at commas, ASCII spaces trimmed, in both readers
    # (Java compared every accepted case's names with these, above).
    names = {c["file"]: c.get("names") for c in spec["grammar_bundles"]}
    assert names["grammar_class_stored_synonyms_v5.taper"][0] == ["first", "second", "third\u00a0"]
    assert names["grammar_class_stored_only_commas_v6.taper"][0] == [" , ,"]
    assert names["grammar_class_aliases_v5.taper"][0][1:] == ["alias one", "alias two"]
    # Signatures, both ways: every Python verdict was the Java one (above); a bundle signed in Java verifies here.
    verdicts = {c["python"] for c in spec["signatures"]["cases"]}
    assert "BundleError" in verdicts and "ok:unsigned" in verdicts and len(verdicts) == 4  # 2 keys, none, refused
    job = spec["signatures"]["sign"]
    java_signed = sdk.load(out / "java_signed.taper", trusted_keys=[job["public_key"]])
    assert java_signed.signer.public_key == job["public_key"]
    assert len(spec["graphs"]["hostile"]) == 9 + 4 + 12  # backbone, encoder, tokenizer
    if companion is not None:
        assert len(spec["companion"]["hostile"]) == 24
        assert {h["python"] for h in spec["companion"]["hostile"]} == {"BundleError"}
        # Companion signatures (version 3): Java gave every Python verdict (above); here what those verdicts are.
        by_case = {(c["name"], tuple(c["trusted"] or ())): c["python"]
                   for c in spec["companion"]["signatures"]["cases"]}
        a = spec["companion"]["signatures"]["sign"]["public_key"]
        assert by_case[("signed", (a,))].startswith("ok:") and by_case[("unsigned", ())] == "ok:unsigned"
        assert by_case[("unsigned", (a,))] == by_case[("forged_unsigned", (a,))] == "BundleError"
        assert by_case[("forged_unsigned", ())] == "ok:unsigned"      # what only a signature can refuse
        assert all(v == "BundleError" for (name, _), v in by_case.items() if name.startswith("flip_")
                   or name.startswith("trailer") or name == "truncated_trailer")


def _logits_cross_check(path: Path, golden: Path, out: Path, companion, spec: dict) -> None:
    """The Java core's weights and head rows, run in onnxruntime (and its programs in ExecuTorch), give the
    Python logits."""
    bundle = sdk.load(path)
    size = bundle.preprocessing.input_size
    rgbs = [np.fromfile(golden.parent / im["rgb"], np.uint8).reshape(im["height"], im["width"], 3)
            for im in spec["images"]]
    images = np.stack([np.fromfile(golden.parent / im["tensor"], "<f4").reshape(3, size, size)
                       for im in spec["images"]])
    for i, case in enumerate(spec["cases"]):
        model = bundle.personalize(case["description"])
        expected = np.concatenate([model.logits(rgb) for rgb in rgbs])
        weights = np.fromfile(out / f"java{i}.folded.f32", "<f4")
        head = np.fromfile(out / f"java{i}.head.f32", "<f4").reshape(len(model.head_bias), -1)
        rows = collapse if model.rest else np.asarray   # one class: the rest's rows collapse to one (sdk.engines.rest)
        got = rows(java_logits(bundle, weights, head, images))
        assert np.abs(got - expected).max() <= 1e-4 * max(1.0, float(np.abs(expected).max())), case["name"]
        # int8 (sdk.engines.int8): GoldenTest checked that Java writes Python's bytes from Python's inputs; here the
        # graph Java made from its own fusion runs in onnxruntime beside Python's (its folded weights differ
        # in the last float bits, so a weight may land one int8 step away).
        graphs = [str(golden.parent / case["int8"]["graph"]), str(out / f"java{i}.int8.onnx")]
        want, have = (ort.InferenceSession(g, providers=["CPUExecutionProvider"]).run(None, {"image": images})[0]
                      for g in graphs)
        # A weight one int8 step away flips some activations by one step downstream, so the two graphs agree
        # to a few steps of their output's grid (its scale), never by a step on average: the same in steps
        # whatever the ranges' width (RANGE_SIGMAS 8: at most 8 steps, 0.4-0.8 on average; 24: 3-5, 0.4-0.7). How
        # far the few largest go depends on the data and the CPU's kernels: on an AVX2-only EPYC (2026-11-30) the
        # first case reached 16 steps in 4 of its 1,152 outputs (mean 0.5; the others 3-6), where random one-step
        # changes of as many of Python's own weights reached 4-7; so the bound on the largest is loose and the
        # mean, which a wrong layout or scale would move by many steps, is the tight check.
        step = output_step(Path(graphs[0]).read_bytes())
        assert float(np.abs(have - want).max()) <= 24 * step, (case["name"], float(np.abs(have - want).max()) / step)
        assert float(np.abs(have - want).mean()) <= step, (case["name"], float(np.abs(have - want).mean()) / step)
        python_q, java_q = ({t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(g).graph.initializer
                             if t.name.endswith(".weight_q")} for g in graphs)
        steps = np.concatenate([np.abs(java_q[k].astype(int) - python_q[k]).ravel() for k in python_q])
        assert steps.max() <= 1 and np.mean(steps == 0) >= 0.999, (case["name"], np.mean(steps == 0))
        if companion is not None:  # the program the Java core wrote for the app's ExecuTorch engine
            got = rows(executorch_logits((out / f"java{i}.program.pte").read_bytes(), head, images))
            assert np.abs(got - expected).max() <= 1e-4 * max(1.0, float(np.abs(expected).max())), case["name"]
