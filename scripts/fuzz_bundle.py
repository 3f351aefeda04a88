"""Reliability suite: damaged and hostile bundles, each loaded, personalized and run in a worker subprocess
with a timeout. Writes docs/results/reliability.md and .json.

    python -m scripts.fuzz_bundle --cases 10000                      # trains the tiny preset bundle first
    python -m scripts.fuzz_bundle --cases 200 --bundle x.taper --out /tmp/rel
    python -m scripts.fuzz_bundle --cases 2000 --signed --out docs/results/reliability_signed

Each case is one damaged bundle; a worker (one per core, restarted after a hang or crash) runs
`sdk.load` (verify on), `sdk.personalize(bundle, DESCRIPTION)` and `predict_proba` on a fixed image. Outcomes:
- typed: an SdkError (BundleError, EncoderError, ...): the intended failure;
- escape: any other exception; hang: no answer within --timeout seconds; crash: the worker died;
- same: it loaded and gave the pristine bundle's probabilities; different: it loaded and gave others.
Kinds of damage: unsigned (byte flips in the header, the manifest or a member; truncation), where
"different" is a silent change and must be 0; and re-signed (forged: the checksums recomputed after the
edit): manifest edits, member byte flips, hostile members (graphs, tokenizers, classes), non-finite
weights and forged compact bases (a tensor dropped, renamed to no layer, cut short, of another dtype, a
NaN or negative int8 scale), where "different" means a forged bundle the format accepts (reported, not a
failure). The base bundle's layers are stored in every kind in turn (full, shared, dense float16, int8,
low rank), so every compact member is damaged.

--signed: the base bundle is signed with a key made for the run, and every case is loaded with
`trusted_keys=[that key]` (an app that requires its own bundles). A manifest edit keeps the original
signature trailer in place; a member edit re-encodes the bundle (unsigned), and for half of those the
original trailer is replayed on the edited bundle (`signed.signature_replayed`); the report's
`signed.loaded` counts forged bundles that still loaded (target 0).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from export.bundle_edits import PAD, manifest_of, with_manifest, with_member, with_member_bytes, with_signature_of
from export.golden import HOSTILE_CONCEPTS, edited_json, transposed_text_embeddings

ROOT = Path(__file__).resolve().parents[1]

DESCRIPTION = "blue, round shapes"  # "blue" is free text: the text encoder runs
UNSIGNED = ("flip_header", "flip_manifest", "flip_member", "truncate")
SIGNED = ("manifest_edit", "resigned_member_flip", "hostile_member", "non_finite_weights", "bases_edit")
# The base bundle's layers are stored in every kind the format has, in turn (full, shared, dense float16,
# int8, low rank, shared-subspace low rank), so damage reaches every compact member (`mixed_storage`).
STORAGE_CYCLE = ("fp32", "drop:0.99+delta", "delta+fp16", "int8", "lowrank:2", "subspace:2")
WORKER = r"""
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))  # a runaway allocation fails instead of the machine
import numpy as np
import sdk
image = np.random.default_rng(0).integers(0, 256, (2, 40, 36, 3), dtype=np.uint8)
trusted = sys.argv[2:] or None          # --signed: the run's public key
for line in sys.stdin:
    try:
        bundle = sdk.load(line.strip(), trusted_keys=trusted)
        p = sdk.personalize(bundle, sys.argv[1]).predict_proba(image)
        out = {"outcome": "loaded", "probabilities": p.tolist()}
    except sdk.SdkError as e:
        out = {"outcome": "typed", "error": type(e).__name__, "message": str(e)[:200]}
    except BaseException as e:
        out = {"outcome": "escape", "error": type(e).__name__, "message": str(e)[:200]}
    print(json.dumps(out), flush=True)
"""


def description_for(path: Path) -> str:
    """The description every case is personalized with: DESCRIPTION where the bundle resolves it (the tiny
    preset's), else one built from the bundle's own first two classes, one of them as free text so that
    the text encoder still runs (a Tiny ImageNet bundle has no "blue" or "round shapes")."""
    import sdk
    from sdk.text.encoder import primary_name

    bundle = sdk.load(path)
    first, second = (primary_name(c) for c in bundle.classes[:2])
    for description in (DESCRIPTION, f"{first}, a photo of a {second}"):
        try:
            sdk.personalize(bundle, description)
            return description
        except sdk.DescriptionError:
            continue
    raise SystemExit(f"{path}: neither {DESCRIPTION!r} nor its own class names resolve to a task")


class Worker:
    """A subprocess that answers one JSON line per bundle path written to it (WORKER's protocol; `command`
    runs another program with the same protocol, e.g. the Java core's harness in scripts/java_fuzz.py)."""

    def __init__(self, description: str = DESCRIPTION, trusted_key: str | None = None,
                 command: list[str] | None = None):
        self.args = (description, trusted_key, command)
        if command is None:
            command = [sys.executable, "-c", WORKER, description, *([trusted_key] if trusted_key else [])]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True, cwd=ROOT)

    def restarted(self) -> Worker:
        return Worker(*self.args)

    def run(self, path: str, timeout: float) -> dict:
        try:
            self.process.stdin.write(path + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            return {"outcome": "crash", "error": f"exit {self.process.wait()}"}
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        if not ready:
            self.process.kill()
            self.process.wait()
            return {"outcome": "hang"}
        line = self.process.stdout.readline()
        if not line:
            return {"outcome": "crash", "error": f"exit {self.process.wait()}"}
        return json.loads(line)

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        """End a worker that is still running (its input closed: it finishes its loop)."""
        if self.alive():
            self.process.stdin.close()
            self.process.wait(timeout=60)


def hostile_members(blob: bytes) -> list[tuple[str, str, bytes]]:
    """(name, member, bytes): graphs, tokenizers and class files an attacker would write."""
    import onnx
    from onnx import helper

    manifest, _ = manifest_of(blob)

    def member(name: str) -> bytes:
        entry = manifest["members"][name]
        return blob[entry["offset"]:entry["offset"] + entry["size"]]

    out = []
    backbone = onnx.load_from_string(member("backbone.onnx"))

    def edited(graph_edit) -> bytes:
        model = onnx.ModelProto()
        model.CopyFrom(backbone)
        graph_edit(model)
        return model.SerializeToString()

    body = helper.make_graph([helper.make_node("Identity", ["c"], ["c_out"])], "body",
                             [helper.make_tensor_value_info(n, onnx.TensorProto.INT64, []) for n in ("i", "c")],
                             [helper.make_tensor_value_info("c_out", onnx.TensorProto.INT64, [])])
    out += [
        ("backbone_loop", "backbone.onnx", edited(lambda m: m.graph.node.insert(0, helper.make_node(
            "Loop", ["", ""], ["loop_out"], body=body)))),
        ("backbone_custom_domain", "backbone.onnx", edited(lambda m: m.graph.node.insert(0, helper.make_node(
            "Evil", ["image"], ["evil"], domain="com.evil")))),
        ("backbone_swapped_weights", "backbone.onnx", edited(lambda m: _swap_offsets(m))),
        ("backbone_dilated_conv", "backbone.onnx", edited(lambda m: m.graph.node[0].attribute.append(
            helper.make_attribute("dilations", [100, 100])))),
        ("backbone_resize_bomb", "backbone.onnx", edited(lambda m: m.graph.node.append(helper.make_node(
            "Resize", ["features"], ["huge"])))),
        ("backbone_input_size", "backbone.onnx", edited(
            lambda m: m.graph.input[0].type.tensor_type.shape.dim[2].__setattr__("dim_value", 4096))),
        ("backbone_function", "backbone.onnx", edited(lambda m: m.functions.append(onnx.FunctionProto(name="f")))),
        ("backbone_garbage", "backbone.onnx", os.urandom(5000)),
        ("backbone_truncated", "backbone.onnx", member("backbone.onnx")[:500]),
    ]
    encoder = onnx.load_from_string(member("text_encoder.onnx"))
    constant = next(n for n in encoder.graph.node if n.op_type == "Constant")

    def encoder_edit(edit) -> bytes:
        model = onnx.ModelProto()
        model.CopyFrom(encoder)
        edit(model)
        return model.SerializeToString()

    out += [
        ("encoder_constant_changed", "text_encoder.onnx", encoder_edit(lambda m: next(
            n for n in m.graph.node if n.name == constant.name).attribute[0].t.CopyFrom(
            onnx.numpy_helper.from_array(np.array(10**9, np.int64))))),
        ("encoder_expand_added", "text_encoder.onnx", encoder_edit(lambda m: m.graph.node.append(
            helper.make_node("Expand", ["embedding", "input_ids"], ["big"])))),
        ("encoder_nan_weights", "text_encoder.onnx", encoder_edit(lambda m: _nan_initializer(m))),
        ("encoder_garbage", "text_encoder.onnx", os.urandom(100_000)),
    ]
    replace = {"type": "Replace", "pattern": {"Regex": "(a|a?)+"}, "content": "aaaaaaaaaa"}
    for name, edit in (
        ("tokenizer_nested_replace",
         lambda t: t.update(normalizer={"type": "Sequence", "normalizers": [replace] * 40})),
        ("tokenizer_bpe", lambda t: t["model"].update(type="BPE")),
        ("tokenizer_split_regex", lambda t: t.update(pre_tokenizer={"type": "Split", "pattern": {"Regex": "(x+x+)+y"},
                                                                    "behavior": "Isolated", "invert": False})),
        ("tokenizer_bad_ids", lambda t: t["model"]["vocab"].update({"zzz": 10**9})),
        ("tokenizer_huge_token", lambda t: t["model"]["vocab"].update({"x" * 5000: len(t["model"]["vocab"])})),
        ("tokenizer_empty", lambda t: t.clear()),
        # Option types (issue 63: the Java core took these; the SDK sets its own values, but checks the types)
        ("tokenizer_truncation_text", lambda t: t.update(truncation="longest_first")),
        ("tokenizer_padding_number", lambda t: t.update(padding=128)),
        ("tokenizer_normalized_added_token", lambda t: t["added_tokens"][0].update(normalized=True, lstrip=True)),
        ("tokenizer_template_without_text",
         lambda t: t["post_processor"].update(single=t["post_processor"]["single"][:1])),
    ):
        out.append((name, "tokenizer.json", edited_json(member("tokenizer.json"), edit)))
    out += [("tokenizer_not_utf8", "tokenizer.json", b"\xff\xfe" + member("tokenizer.json")[2:]),
            ("tokenizer_deep", "tokenizer.json", b"[" * 100_000 + b"]" * 100_000)]

    for name, edit in (
        ("classes_duplicate_ids", lambda c: c["classes"][1].update(id=c["classes"][0]["id"])),
        ("classes_missing_one", lambda c: c["classes"].pop()),
        ("classes_name_not_text", lambda c: c["classes"][0].update(name=7)),
        ("classes_bad_group", lambda c: c["supercategories"].update(evil=[10**6])),
        ("classes_group_type", lambda c: c.update(supercategories=[])),
        # a class's optional aliases and description (issue 60)
        ("classes_aliases_not_a_list", lambda c: c["classes"][0].update(aliases="alias")),
        ("classes_alias_not_text", lambda c: c["classes"][0].update(aliases=["ok", 7])),
        ("classes_alias_empty", lambda c: c["classes"][0].update(aliases=[""])),
        ("classes_aliases_65", lambda c: c["classes"][0].update(aliases=[f"a{i}" for i in range(65)])),
        ("classes_description_not_text", lambda c: c["classes"][0].update(description=["x"])),
        ("classes_extra_key", lambda c: c["classes"][0].update(colour="red")),
    ):
        out.append((name, "classes.json", edited_json(member("classes.json"), edit)))
    out.append(("classes_deep", "classes.json", b"[" * 5000 + b"]" * 5000))
    out.append(("class_embeddings_transposed", "class_embeddings.safetensors",
                transposed_text_embeddings(member("class_embeddings.safetensors"))))
    if "concepts" in json.loads(member("classes.json")):  # format 5
        out += [(f"concepts_{name}", "classes.json", edited_json(member("classes.json"), edit))
                for name, edit in HOSTILE_CONCEPTS.items()]
    return out


def _swap_offsets(model) -> None:
    """Two same-shaped weights exchange places in the external file."""
    inits = [i for i in model.graph.initializer if len(i.dims) == 4]
    a, b = next((a, b) for a in inits for b in inits if a.name < b.name and list(a.dims) == list(b.dims))
    offset_a = next(e for e in a.external_data if e.key == "offset")
    offset_b = next(e for e in b.external_data if e.key == "offset")
    offset_a.value, offset_b.value = offset_b.value, offset_a.value


def _nan_initializer(model) -> None:
    init = next(i for i in model.graph.initializer if i.data_type == 1 and len(i.raw_data) >= 4)
    init.raw_data = b"\x00\x00\xc0\x7f" + init.raw_data[4:]


MANIFEST_VALUES = [None, -1, 0, "x", 1.5, {}, [], 10**20, True, float("nan"), "🦋", [1, 2, 3]]


# How often each kind of UNSIGNED + SIGNED is drawn (relative weights).
KIND_WEIGHTS = np.array([8, 17, 20, 8, 15, 14, 12, 6, 8], float)


def draw_case(blob: bytes, rng: np.random.Generator, hostile: list) -> tuple[str, str, bytes]:
    """(kind, label, damaged bundle) of one case: a kind drawn by KIND_WEIGHTS, then `make_case`."""
    kinds = UNSIGNED + SIGNED
    kind = kinds[int(rng.choice(len(kinds), p=KIND_WEIGHTS / KIND_WEIGHTS.sum()))]
    return (kind, *make_case(kind, blob, rng, hostile))


def make_case(kind: str, blob: bytes, rng: np.random.Generator, hostile: list) -> tuple[str, bytes]:
    manifest, length = manifest_of(blob)
    members = sorted(manifest["members"])
    if kind == "truncate":
        cut = int(rng.integers(0, len(blob)))
        return f"truncate at {cut}", blob[:cut]
    if kind.startswith("flip"):
        if kind == "flip_header":
            low, high, where = 0, 64, "header"
        elif kind == "flip_manifest":
            low, high, where = 64, 64 + length, "manifest"
        else:
            where = str(rng.choice(members))
            low = manifest["members"][where]["offset"]
            high = low + max(1, manifest["members"][where]["size"])
        data = bytearray(blob)
        for pos in rng.integers(low, high, int(rng.integers(1, 4))):
            data[pos] ^= int(rng.integers(1, 256))
        return f"{kind} {where}", bytes(data)
    if kind == "manifest_edit":
        m = json.loads(json.dumps(manifest))
        section = str(rng.choice(["architecture", "mixer", "preprocessing", "text_encoder", "members", "bases",
                                  "root"]))
        target = m if section == "root" else m[section]
        if section in ("members", "bases"):
            target = target[str(rng.choice(sorted(target)))]
        key = str(rng.choice(sorted(target)))
        draw = rng.random()
        if draw < 0.2:
            target.pop(key)
            what = f"drop {section}.{key}"
        elif draw < 0.35:   # a field the version does not define: an error in both readers (issue 63)
            target[f"{key}_extra"] = MANIFEST_VALUES[int(rng.integers(len(MANIFEST_VALUES)))]
            what = f"unknown field {section}.{key}_extra"
        else:
            value = MANIFEST_VALUES[int(rng.integers(len(MANIFEST_VALUES)))]
            if isinstance(target[key], int) and not isinstance(target[key], bool) and rng.random() < 0.5:
                value = target[key] + int(rng.choice([-64, -1, 1, 64, 2**31, 2**40]))
            target[key] = value
            what = f"{section}.{key} = {value!r}"[:80]
        return f"manifest_edit {what}", with_manifest(blob, m, length)
    if kind == "resigned_member_flip":
        name = str(rng.choice(members))
        positions = rng.integers(0, max(1, manifest["members"][name]["size"]), int(rng.integers(1, 4)))

        def flip(member: bytearray) -> None:
            for pos in positions:
                if pos < len(member):
                    member[pos] ^= int(rng.integers(1, 256))
        return f"resigned_member_flip {name}", with_member(blob, name, flip)
    if kind == "hostile_member":
        name, member, data = hostile[int(rng.integers(len(hostile)))]
        return f"hostile_member {name}", with_member_bytes(blob, member, data)
    if kind == "non_finite_weights":
        name = str(rng.choice(["bases.safetensors", "mixer.safetensors", "class_embeddings.safetensors"]))
        value = float(rng.choice([np.nan, np.inf, -np.inf]))

        def poison(member: bytearray) -> None:
            (n,) = struct.unpack("<Q", member[:8])
            header = {k: v for k, v in json.loads(member[8:8 + n]).items() if k != "__metadata__"
                      and v["dtype"] in ("F32", "F16") and v["data_offsets"][1] > v["data_offsets"][0]}
            tensor = header[str(rng.choice(sorted(header)))]
            begin, end = tensor["data_offsets"]
            fmt, size = ("<f", 4) if tensor["dtype"] == "F32" else ("<e", 2)
            pos = 8 + n + begin + size * int(rng.integers(0, (end - begin) // size))
            member[pos:pos + size] = struct.pack(fmt, value)
        return f"non_finite_weights {name} {value}", with_member(blob, name, poison)
    if kind == "bases_edit":
        what, data = bases_edit(blob, rng)
        return f"bases_edit {what}", data
    raise ValueError(kind)


def bases_edit(blob: bytes, rng: np.random.Generator) -> tuple[str, bytes]:
    """A forged compact bases member: a tensor dropped, renamed to a layer that does not exist, cut short
    (wrong rank or length), of another dtype, or a scale made NaN or negative; everything re-signed."""
    from sdk.format.bundle import Bundle, tensors_member

    tensors = dict(Bundle.from_buffer(np.frombuffer(blob, np.uint8)).bases.tensors())
    key = str(rng.choice(sorted(tensors)))
    edit = str(rng.choice(["drop", "rename", "cut", "dtype", "scale"]))
    if edit == "drop":
        tensors.pop(key)
    elif edit == "rename":
        tensors["layer9." + key.split(".", 1)[1]] = tensors.pop(key)
    elif edit == "cut":
        tensors[key] = np.ascontiguousarray(tensors[key][..., : max(1, tensors[key].shape[-1] - 1)])
    elif edit == "dtype":
        tensors[key] = tensors[key].astype(np.float64 if tensors[key].dtype != np.float64 else np.float32)
    else:
        key = str(rng.choice(sorted(k for k in tensors if k.endswith(".scale"))))
        tensors[key] = np.array(tensors[key])
        tensors[key][int(rng.integers(len(tensors[key])))] = float(rng.choice([np.nan, -1.0, np.inf]))
    return f"{edit} {key}", with_member_bytes(blob, "bases.safetensors", tensors_member(tensors))


def mixed_storage(bases):
    """`bases` with layer i stored as STORAGE_CYCLE[i % len(STORAGE_CYCLE)] says."""
    from export.compress import Mode, compress
    from sdk.fusion.bases import CompactBases

    stored = [compress(bases, Mode.parse(mode)).layers for mode in STORAGE_CYCLE]
    return CompactBases([stored[i % len(stored)][i] for i in range(len(bases.layers))], bases.shapes, bases.num_bases)


def base_bundle(path: Path | None, work: Path) -> bytes:
    """The bundle to damage, its bases re-stored in every kind (`mixed_storage`) and slack in its manifest
    (so re-signed edits keep its length)."""
    from dataclasses import replace

    from sdk.format.bundle import Bundle, bundle_bytes

    if path is None:
        from export.bundle import bundle_run
        from trainer.run import run

        path = bundle_run(run(work / "tiny-run", "tiny", progress=False), work / "tiny.taper")
    from sdk.format.bundle import bases_bytes
    from sdk.fusion.bases import CompactBases

    bundle = Bundle.open(path)
    members = {n: bundle.member_bytes(n) for n in bundle.manifest.members}
    bases = mixed_storage(CompactBases.full(bundle.bases.block_rows(), bundle.shapes))
    members["bases.safetensors"] = bases_bytes(bases)
    provenance = {**bundle.manifest.provenance, "pad": "x" * PAD}
    manifest = replace(bundle.manifest, bases=bases.storage, provenance=provenance)
    return bundle_bytes(manifest, members)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--bundle", type=Path, help="bundle to damage (default: train the tiny preset and pack it)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "reliability")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per case before it counts as a hang")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--signed", action="store_true",
                        help="sign the base bundle and load every case with trusted_keys (module docstring)")
    args = parser.parse_args()
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        blob = base_bundle(args.bundle, work)
        trusted_key = None
        if args.signed:
            from sdk.format.bundle import bundle_bytes, bundle_members
            from sdk.format.signing import SigningKey

            key = SigningKey.generate()
            blob, trusted_key = bundle_bytes(*bundle_members(blob), key), key.public_key.hex()
        pristine_path = work / "pristine.taper"
        pristine_path.write_bytes(blob)
        args.description = description_for(pristine_path)
        workers = [Worker(args.description, trusted_key) for _ in range(args.workers)]
        pristine = workers[0].run(str(pristine_path), args.timeout)
        assert pristine["outcome"] == "loaded", pristine
        hostile = hostile_members(blob)
        rng = np.random.default_rng(args.seed)
        counts: dict[str, Counter] = defaultdict(Counter)
        examples: dict[str, list[str]] = defaultdict(list)
        pending: list[tuple[int, str, str, Path]] = []
        for i in range(args.cases):
            kind, label, data = draw_case(blob, rng, hostile)
            if args.signed and kind in SIGNED and rng.random() < 0.5:
                replayed = with_signature_of(data, blob)
                if replayed != data:
                    label, data = label + " (signature replayed)", replayed
                    counts["signed"]["replayed"] += 1
            path = work / f"case{i % (2 * args.workers)}.taper"
            path.write_bytes(data)
            pending.append((i, kind, label, path))
            if len(pending) == len(workers) or i == args.cases - 1:
                _run_batch(workers, pending, pristine, args.timeout, counts, examples)
                pending = []
            if (i + 1) % 500 == 0:  # the report so far, so a long run cut short still leaves its counts
                _write(_report(counts, examples, args, time.time() - start, i + 1), args.out)
                print(f"[fuzz] {i + 1}/{args.cases} cases, {time.time() - start:.0f} s", flush=True)
        for w in workers:
            w.process.kill()
    report = _report(counts, examples, args, time.time() - start, args.cases)
    _write(report, args.out)
    print(_markdown(report))
    return 0 if report["failures"] == 0 else 1


def _write(report: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=1))
    out.with_suffix(".md").write_text(_markdown(report))


def _run_batch(workers: list[Worker], pending, pristine: dict, timeout: float, counts, examples) -> None:
    results = [None] * len(pending)

    def one(slot: int) -> None:
        results[slot] = workers[slot].run(str(pending[slot][3]), timeout)

    threads = [threading.Thread(target=one, args=(s,)) for s in range(len(pending))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for slot, ((_, kind, label, _), result) in enumerate(zip(pending, results, strict=True)):
        outcome = result["outcome"]
        if outcome == "loaded":
            got, want = np.asarray(result["probabilities"]), np.asarray(pristine["probabilities"])
            same = got.shape == want.shape and np.allclose(got, want, atol=1e-6)  # another class set: different
            outcome = "same" if same else "different"
        counts[kind][outcome] += 1
        if outcome in ("escape", "hang", "crash", "different") and len(examples[f"{kind}:{outcome}"]) < 5:
            examples[f"{kind}:{outcome}"].append(f"{label}: {result.get('error', '')} {result.get('message', '')}")
        if outcome == "typed":
            counts[kind + ":errors"][result["error"]] += 1
        if not workers[slot].alive():
            workers[slot] = workers[slot].restarted()


def _report(counts, examples, args, seconds: float, done: int) -> dict:
    outcomes = ("typed", "escape", "hang", "crash", "same", "different")
    table = {kind: {o: counts[kind][o] for o in outcomes} for kind in UNSIGNED + SIGNED}
    silent = sum(table[k]["different"] for k in UNSIGNED)
    failures = sum(table[k][o] for k in table for o in ("escape", "hang", "crash")) + silent
    if args.signed:  # with trusted keys a forged bundle that loads is a failure too
        failures += sum(table[k]["same"] + table[k]["different"] for k in SIGNED)
    return {"cases": done, "planned": args.cases, "seed": args.seed, "timeout_s": args.timeout,
            "seconds": round(seconds, 1),
            "description": args.description, "by_kind": table,
            "totals": {o: sum(t[o] for t in table.values()) for o in outcomes},
            "silent_changes": silent, "accepted_forged_edits": sum(table[k]["different"] for k in SIGNED),
            "failures": failures, "typed_errors": {k: dict(counts[k + ":errors"]) for k in UNSIGNED + SIGNED},
            "examples": dict(examples), "command": "python -m scripts.fuzz_bundle " + " ".join(sys.argv[1:]),
            "trusted_keys": bool(args.signed),
            **({"signed": {"cases": sum(sum(table[k].values()) for k in SIGNED),
                           "loaded": sum(table[k]["same"] + table[k]["different"] for k in SIGNED),
                           "signature_replayed": counts["signed"]["replayed"]}}
               if args.signed else {})}


def _markdown(r: dict) -> str:
    partial = "" if r["cases"] == r["planned"] else f" (of {r['planned']} planned: in progress or cut short)"
    lines = [f"# Reliability: {r['cases']} damaged and hostile bundles{partial}", "",
             f"Command: `{r['command']}` ({r['seconds']:.0f} s; seed {r['seed']}; timeout {r['timeout_s']:.0f} s per "
             f"case). Each case: `sdk.load` (verify on), `sdk.personalize(bundle, {r['description']!r})`, "
             "`predict_proba` on two images, in a worker subprocess. Unsigned kinds damage bytes without fixing "
             "checksums; re-signed kinds recompute every checksum after the edit (a forger's bundle).", "",
             "| kind | typed error | escape | hang | crash | loaded, same | loaded, different |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for kind, row in r["by_kind"].items():
        signed = "re-signed" if kind in SIGNED else "unsigned"
        lines.append(f"| {kind} ({signed}) | " + " | ".join(str(row[o]) for o in
                                                             ("typed", "escape", "hang", "crash", "same", "different"))
                     + " |")
    t = r["totals"]
    totals = " | ".join(str(t[o]) for o in ("typed", "escape", "hang", "crash", "same", "different"))
    lines += [f"| **all** | {totals} |",
              "", f"Silent changes (unsigned damage that loaded and changed a prediction): **{r['silent_changes']}**. "
              f"Escapes + hangs + crashes + silent changes: **{r['failures']}** (target 0).",
              f"Re-signed edits that loaded with other predictions (a forged bundle within the format's rules; the "
              f"checksums are integrity, not authenticity): {r['accepted_forged_edits']}.", "",
              *([f"With `trusted_keys` (the base bundle signed, --signed): {r['signed']['loaded']} of "
                 f"{r['signed']['cases']} forged bundles loaded (target 0); in "
                 f"{r['signed']['signature_replayed']} of them the original signature was replayed on the edit.",
                 ""] if r.get("signed") else []),
              "Typed errors by kind: " + "; ".join(f"{k}: {v}" for k, v in r["typed_errors"].items() if v), ""]
    if r["examples"]:
        lines += ["Examples of the non-typed outcomes:", ""]
        lines += [f"- {k}: {e}" for k, v in r["examples"].items() for e in v]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
