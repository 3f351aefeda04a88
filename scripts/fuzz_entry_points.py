"""The entry points under hostile input: images of every dtype and shape, `examples=`, `adapt` and
`stream=`, the ExecuTorch companion, export paths, a bundle file changed after loading, and the CLI. Each
case runs in a worker subprocess with a timeout. Writes docs/results/entry_points.{md,json}.

    python -m scripts.fuzz_entry_points --cases 2000                    # trains the tiny preset bundle first
    python -m scripts.fuzz_entry_points --cases 100 --bundle tiny.taper --out /tmp/entry

Outcomes of a case:
- typed: an SdkError (BundleError, ImageError, ExamplesError, ...), or the caller's own exception passed
  through unchanged (a `stream=` generator that raises): the intended failure;
- ok: accepted, and the result checked: probabilities finite and summing to one; an image given in another
  dtype that holds the same pixels (uint16 x 257, float / 255) gives the uint8 image's probabilities exactly;
  an export is a complete file;
- escape: any other exception; hang: no answer within --timeout; crash: the worker died (a signal: SIGBUS,
  SIGSEGV, an abort);
- silent_wrong: accepted with a wrong result (other probabilities than the same pixels as uint8, a
  non-finite or unnormalised probability, an input the SDK documents as refused, a forged companion
  loaded with trusted_keys);
- partial: a failed call left a file or folder behind (checked in each case's own folder).
Half of the companion cases are signed (companion version 3, with the bundle) and read with `trusted_keys`,
reported as `companion_signed`; among those, a forger's companions (`companion_forged`: the program edited
and its SHA-256 redone, unsigned or signed by another key) must all be refused.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import unicodedata
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from scripts.fuzz_bundle import Worker

ROOT = Path(__file__).resolve().parents[1]
# companion_unsigned and image_objects are issue 63's: an outside harness found crashes, a silent wrong
# model and untyped errors there that the families before them did not reach.
FAMILIES = {"image": 0.22, "image_objects": 0.06, "examples": 0.11, "adapt": 0.11, "companion": 0.08,
            "companion_unsigned": 0.2, "export": 0.09, "changed": 0.07, "cli": 0.06}
OUTCOMES = ("typed", "ok", "escape", "hang", "crash", "silent_wrong", "partial")
FAILURES = ("escape", "hang", "crash", "silent_wrong", "partial")
WORKER = r"""
import os, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))  # a runaway allocation fails instead of the machine
os.environ["TAPER_DEVICE_CACHE"] = "0"   # each case's loads compile afresh: no state between cases
from scripts.fuzz_entry_points import serve
serve(sys.argv[1], sys.argv[2], sys.argv[3])
"""


class Caller(Exception):
    """What a hostile caller's own code raises (a `stream=` generator)."""


# ---------------------------------------------------------------- cases: drawn in the parent (plain JSON)

DTYPES = ("uint8", "uint16", "float32", "float64", "float16", "int8", "int16", "int32", "int64", "bool",
          "complex64", "object", "str")
SHAPES = ("hwc", "hw", "nhwc", "hw4", "hw1", "hw2", "empty", "zero_h", "n0", "wide", "tall", "scalar", "5d",
          "transposed", "reversed", "huge")
VALUES = ("same", "nan", "inf", "negative", "above_one", "max")


def draw(family: str, rng: np.random.Generator) -> dict:
    seed = int(rng.integers(1 << 31))
    if family == "image":
        return {"family": family, "dtype": str(rng.choice(DTYPES)), "shape": str(rng.choice(SHAPES)),
                "values": str(rng.choice(VALUES, p=[0.6, 0.1, 0.1, 0.1, 0.05, 0.05])), "seed": seed}
    if family == "examples":
        return {"family": family, "variant": str(rng.choice(EXAMPLES_VARIANTS)), "seed": seed}
    if family == "adapt":
        return {"family": family, "variant": str(rng.choice(ADAPT_VARIANTS)),
                "engine": "executorch" if rng.random() < 0.2 else "onnxruntime", "seed": seed}
    if family == "companion":   # half of them signed and read with trusted_keys (issue 49: signed companions)
        trusted = bool(rng.random() < 0.5)
        forged = trusted and rng.random() < 0.5   # half of the signed ones a forger's
        variants = FORGED_COMPANION_VARIANTS if forged else COMPANION_VARIANTS
        return {"family": family, "variant": str(rng.choice(variants)), "trusted": trusted, "seed": seed}
    if family == "companion_unsigned":
        return {"family": family, "variant": str(rng.choice(UNSIGNED_COMPANION_VARIANTS)), "seed": seed}
    if family == "image_objects":
        return {"family": family, "variant": str(rng.choice(IMAGE_OBJECT_VARIANTS)),
                "call": str(rng.choice(["predict", "examples", "adapt"])), "seed": seed}
    if family == "export":
        return {"family": family, "variant": str(rng.choice(EXPORT_VARIANTS)),
                "suffix": str(rng.choice([".onnx", ".onnx", ".pte", ".mlpackage", ".txt", ""])), "seed": seed}
    if family == "changed":
        return {"family": family, "change": str(rng.choice(["truncate", "rewrite", "grow", "replace"])),
                "call": str(rng.choice(CHANGED_CALLS)), "seed": seed}
    return {"family": family, "variant": str(rng.choice(CLI_VARIANTS)), "seed": seed}


EXAMPLES_VARIANTS = ("two_classes", "one_class", "empty", "not_a_mapping", "name_not_str", "empty_name", "long_name",
                     "nfc_nfd_twins", "case_twins", "many_classes", "one_image", "no_images", "repeated_image",
                     "nan_images", "mixed_sizes", "huge_image", "object_array", "none_images", "bundle_names",
                     "generator_images", "int32_images", "path_to_fifo", "path_missing", "many_images")
ADAPT_VARIANTS = ("good", "empty_list", "empty_array", "nan", "mixed_sizes", "int32", "too_many", "not_images",
                  "stream_good", "stream_empty", "stream_raises", "stream_endless", "stream_bad_batch",
                  "stream_not_iterable", "few_shot_model")
COMPANION_VARIANTS = ("pristine", "header_digit", "header_flip", "program_flip", "truncate", "extend", "empty",
                      "fifo", "folder", "missing", "swap_other", "symlink", "length_field", "weights_flip",
                      "max_batch_up")
# What a forger without the key can make: the program's operators edited and its SHA-256 redone in the header
# (left unsigned, or signed by the forger's own key). The format alone lets the first through to ExecuTorch.
FORGED_COMPANION_VARIANTS = ("forged_program", "forged_program_own_key", "forged_digit_own_key")
# What anyone can make without a key (issue 63): one bit of the unsigned companion's program flipped and its
# SHA-256 and size redone in the header, in the program's flatbuffer, the XNNPACK segment's first 256 bytes
# (its header and graph's start), or anywhere in the segment outside the weight slots.
UNSIGNED_COMPANION_VARIANTS = ("flatbuffer_flip", "segment_head_flip", "segment_flip")
# Objects a caller may pass as an image by mistake (issue 63): numpy subclasses, PIL images in odd states.
IMAGE_OBJECT_VARIANTS = ("matrix", "masked", "memmap", "recarray", "big_endian", "pil_closed", "pil_truncated",
                         "pil_lazy", "pil_palette", "pil_16bit", "pil_cmyk", "pil_animated", "pil_la", "pil_1bit",
                         "pil_float")
EXPORT_VARIANTS = ("fresh", "existing_file", "existing_folder", "missing_folder", "read_only_folder", "fifo",
                   "symlink_to_file", "dangling_symlink", "long_name", "nul", "not_a_path", "through_file",
                   "dot_name")
CHANGED_CALLS = ("personalize", "generic", "adapt", "stream", "export", "examples", "predict", "fewshot_predict")
CLI_VARIANTS = ("good", "good_json", "missing_bundle", "bundle_is_folder", "bad_description", "images_missing",
                "images_not_images", "non_utf8_image_name", "export_bad", "max_classes_zero",
                "max_classes_text", "trusted_key_bad", "unknown_flag", "no_args")


# ---------------------------------------------------------------- the worker: one case at a time

class State:
    """What a worker keeps between cases: the bundle, a reference model and image, the companion."""

    def __init__(self, bundle_path: str, companion_path: str, scratch: str):
        import sdk

        self.sdk, self.bundle_path, self.companion_path = sdk, Path(bundle_path), companion_path
        self.scratch = Path(scratch)
        self.bundle = sdk.load(self.bundle_path)
        self.classes = self.bundle.classes
        self.model = sdk.personalize(self.bundle, self.classes[:3])
        self.size = self.bundle.preprocessing.input_size
        self.image = np.random.default_rng(0).integers(0, 256, (self.size + 5, self.size + 9, 3), dtype=np.uint8)
        self._executorch = None
        self._signed = None
        self._outside = None

    def signed(self) -> tuple[Path, bytes, bytes, object]:
        """(the bundle signed by the golden key, its companion so signed, the golden public key, a forger's
        key), made once in the scratch folder."""
        if self._signed is None:
            from export.golden import GOLDEN_SEEDS
            from export.sign import sign_bundle
            from sdk.engines.xnnpack_program import sign_companion
            from sdk.format.signing import SigningKey

            key, forger = (SigningKey.from_seed(seed) for seed in GOLDEN_SEEDS)
            bundle = self.scratch / "signed.taper"
            sign_bundle(self.bundle_path, key, bundle)
            self._signed = (bundle, sign_companion(Path(self.companion_path).read_bytes(), key), key.public_key,
                            forger)
        return self._signed

    def outside_slots(self, header: dict, start: int, size: int) -> np.ndarray:
        """Byte positions of the program's segment data that no weight slot covers (computed once)."""
        if self._outside is None:
            import math

            from sdk.engines.xnnpack_program import companion_target

            shapes = companion_target(self.bundle.bundle)[1]
            covered = np.zeros(start + size, bool)
            for name, slot in header["slots"].items():
                covered[slot["offset"]:slot["offset"] + 4 * math.prod(shapes[name])] = True
            self._outside = np.flatnonzero(~covered[start:]) + start
        return self._outside

    def executorch(self):
        if self._executorch is None:
            self._executorch = self.sdk.load(self.bundle_path, engine="executorch", program=self.companion_path)
        return self._executorch


def serve(bundle_path: str, companion_path: str, scratch: str) -> None:
    """The worker's loop: a JSON case per line in, a JSON outcome per line out."""
    state = State(bundle_path, companion_path, scratch)
    for line in sys.stdin:
        case = json.loads(line)
        print(json.dumps(run_case(state, case)), flush=True)


def run_case(state: State, case: dict) -> dict:
    """The outcome of one case, with the files it left checked."""
    folder = state.scratch / f"case-{case['id']}"
    folder.mkdir(parents=True)
    try:
        outcome = {"image": image_case, "image_objects": image_object_case, "examples": examples_case,
                   "adapt": adapt_case, "companion": companion_case, "companion_unsigned": unsigned_companion_case,
                   "export": export_case, "changed": changed_case, "cli": cli_case}[case["family"]](state, case, folder)
    except state.sdk.SdkError as e:
        outcome = {"outcome": "typed", "error": f"{type(e).__name__}: {str(e)[:160]}"}
    except Caller:
        outcome = {"outcome": "typed", "error": "the caller's own exception, passed through"}
    except Exception as e:  # noqa: BLE001 - what the harness is looking for
        outcome = {"outcome": "escape", "error": f"{type(e).__name__}: {str(e)[:160]}",
                   "where": traceback.format_exc().strip().splitlines()[-3][:200]}
    if outcome["outcome"] != "ok":
        left = leftovers(folder, case)
        if left:
            outcome = {**outcome, "outcome": "partial", "left": left[:3], "was": outcome["outcome"]}
    _clear(folder)
    return outcome


def leftovers(folder: Path, case: dict) -> list[str]:
    """Files or folders in the case's folder that the case did not make itself before the call."""
    made = set(case.get("made", ()))
    found = []
    for p in sorted(folder.rglob("*")):
        rel = str(p.relative_to(folder))
        if rel not in made and not any(rel.startswith(m + os.sep) for m in made if m.endswith("/")):
            found.append(rel)
    return found


def _clear(folder: Path) -> None:
    for p in folder.rglob("*"):
        try:
            p.chmod(0o755) if p.is_dir() and not p.is_symlink() else None
        except OSError:
            pass
    folder.chmod(0o755)
    shutil.rmtree(folder, ignore_errors=True)


def checked_probabilities(p: np.ndarray, rows: int | None = None, reference: np.ndarray | None = None) -> dict:
    p = np.asarray(p)
    if p.ndim != 2 or (rows is not None and len(p) != rows) or not np.isfinite(p).all() \
            or not np.allclose(p.sum(1), 1, atol=1e-4):
        return {"outcome": "silent_wrong", "error": f"probabilities {p.shape} not finite or not normalised"}
    if reference is not None and not np.array_equal(p, reference):
        return {"outcome": "silent_wrong", "error": f"differ from the same pixels as uint8 by "
                                                    f"{float(np.abs(p - reference).max()):.3g}"}
    return {"outcome": "ok"}


# -- images

def hostile_array(state: State, case: dict) -> tuple[object, np.ndarray | None, int]:
    """(the input, the uint8 image holding the same pixels or None, images in it)."""
    rng = np.random.default_rng(case["seed"])
    base = state.image
    shape, dtype, values = case["shape"], case["dtype"], case["values"]
    count = 1
    if shape == "hw":
        base = base[..., 0]
    elif shape == "nhwc":
        count = 3
        base = np.stack([base, base[::-1], base[:, ::-1]])
    elif shape in ("hw4", "hw1", "hw2"):
        base = np.repeat(base[..., :1], int(shape[-1]), axis=2)
    elif shape == "empty":
        base = np.zeros((0, 0, 3), np.uint8)
    elif shape == "zero_h":
        base = np.zeros((0, 10, 3), np.uint8)
    elif shape == "n0":
        base = np.zeros((0, state.size, state.size, 3), np.uint8)
    elif shape == "wide":
        base = np.resize(base, (1, 20_000, 3))
    elif shape == "tall":
        base = np.resize(base, (30_000, 2, 3))
    elif shape == "scalar":
        base = np.array(7, np.uint8)
    elif shape == "5d":
        base = base[None, None]
    elif shape == "transposed":
        base = base.transpose(1, 0, 2)
    elif shape == "reversed":
        base = base[::-1, ::-2]
    elif shape == "huge":
        base = np.broadcast_to(base[:1, :1], (9000, 8000, 3))   # 72 megapixels, no memory of its own
    same = None if shape in ("empty", "zero_h", "n0", "scalar", "5d") else np.ascontiguousarray(base)
    converted = _as_dtype(base, dtype, rng)
    if values != "same" and converted.dtype.kind in "fc" and converted.size:
        converted = np.array(converted)
        flat = converted.reshape(-1)
        flat[rng.integers(0, flat.size, 5)] = {"nan": np.nan, "inf": np.inf, "negative": -0.5, "above_one": 1.5,
                                               "max": np.finfo(np.float16).max}[values]
        same = None
    elif values != "same" and converted.dtype.kind in "iu" and converted.size:
        converted = np.array(converted)
        converted.reshape(-1)[rng.integers(0, converted.size, 5)] = np.iinfo(converted.dtype).max
        same = None if converted.dtype != np.uint8 else np.ascontiguousarray(converted)
    if dtype not in ("uint8", "uint16", "float32", "float64", "float16"):
        same = None
    return converted, same, count


def _as_dtype(base: np.ndarray, dtype: str, rng: np.random.Generator) -> np.ndarray:
    if dtype == "uint16":
        return base.astype(np.uint16) * 257
    if dtype in ("float32", "float64", "float16"):
        return (base / 255.0).astype(dtype)
    if dtype == "object":
        return base.astype(object)
    if dtype == "str":
        return base.astype(str)
    return base.astype(dtype)


def image_case(state: State, case: dict, folder: Path) -> dict:
    array, same, count = hostile_array(state, case)
    p = state.model.predict_proba(array)
    documented = case["dtype"] in ("uint8", "uint16", "float32", "float64", "float16")
    if not documented:
        return {"outcome": "silent_wrong", "error": f"a {case['dtype']} array was accepted (documented as refused)"}
    reference = state.model.predict_proba(same) if same is not None else None
    return checked_probabilities(p, count if case["shape"] != "hw" else 1, reference)


def image_object(state: State, variant: str, folder: Path) -> tuple[object, np.ndarray | None]:
    """(an odd numpy or PIL object, the uint8 pixels it holds or None when it must be refused)."""
    import io

    from PIL import Image

    rgb = state.image

    def encoded(image: Image.Image, fmt: str = "PNG", **options) -> bytes:
        out = io.BytesIO()
        image.save(out, format=fmt, **options)
        return out.getvalue()

    if variant == "matrix":
        return np.matrix(rgb[..., 0]), rgb[..., 0]
    if variant == "masked":
        return np.ma.masked_array(rgb, mask=rgb > 128), None
    if variant == "memmap":
        mapped = np.memmap(folder / "m.bin", np.uint8, "w+", shape=rgb.shape)
        mapped[:] = rgb
        return mapped, rgb
    if variant == "recarray":
        return rgb.view(np.recarray), rgb
    if variant == "big_endian":
        return (rgb.astype(np.uint16) * 257).astype(">u2"), rgb
    if variant == "pil_closed":
        image = Image.fromarray(rgb)
        image.close()
        return image, None
    if variant == "pil_truncated":
        data = encoded(Image.fromarray(rgb), "JPEG")
        return Image.open(io.BytesIO(data[:len(data) // 2])), None
    if variant == "pil_lazy":
        return Image.open(io.BytesIO(encoded(Image.fromarray(rgb)))), rgb
    if variant == "pil_animated":
        frames = [Image.fromarray(rgb), Image.fromarray(255 - rgb)]
        return Image.open(io.BytesIO(encoded(frames[0], "GIF", save_all=True, append_images=frames[1:]))), None
    if variant == "pil_float":
        return Image.fromarray(rgb[..., 0].astype(np.float32)), None
    mode = {"pil_palette": "P", "pil_cmyk": "CMYK", "pil_la": "LA", "pil_1bit": "1"}.get(variant)
    if mode:
        return Image.fromarray(rgb).convert(mode), None
    return Image.fromarray(rgb[..., 0].astype(np.uint16) * 257), rgb[..., 0]   # pil_16bit


def image_object_case(state: State, case: dict, folder: Path) -> dict:
    """An odd object through predict, examples= or adapt: a result (the same as its plain pixels where it
    has them) or a typed error; pil_float and masked arrays are documented as refused."""
    made, same = image_object(state, case["variant"], folder)
    case["made"] = ["m.bin"] if case["variant"] == "memmap" else []
    if case["call"] == "examples":
        state.sdk.personalize(state.bundle, examples={"a moth": [made, state.image], "b moth": [state.image] * 2})
        return {"outcome": "ok"} if case["variant"] not in ("masked", "pil_float") else \
            {"outcome": "silent_wrong", "error": "an input documented as refused was accepted"}
    if case["call"] == "adapt":
        state.model.adapt([made, state.image], min_images=1)
        return {"outcome": "ok"} if case["variant"] not in ("masked", "pil_float") else \
            {"outcome": "silent_wrong", "error": "an input documented as refused was accepted"}
    p = state.model.predict_proba(made)
    if case["variant"] in ("masked", "pil_float"):
        return {"outcome": "silent_wrong", "error": "an input documented as refused was accepted"}
    return checked_probabilities(p, 1, state.model.predict_proba(same) if same is not None else None)


# -- examples

def examples_case(state: State, case: dict, folder: Path) -> dict:
    rng = np.random.default_rng(case["seed"])
    v = case["variant"]

    def images(n: int = 2) -> list[np.ndarray]:
        return [rng.integers(0, 256, (state.size, state.size, 3), dtype=np.uint8) for _ in range(n)]

    examples: object = {"alpha moth": images(), "beta moth": images()}
    if v == "one_class":
        examples = {"alpha moth": images()}
    elif v == "empty":
        examples = {}
    elif v == "not_a_mapping":
        examples = [images(), images()]
    elif v == "name_not_str":
        examples = {1: images(), None: images()}
    elif v == "empty_name":
        examples = {"": images(), "x": images()}
    elif v == "long_name":
        examples = {"m" * 20_000: images(), "x": images()}
    elif v == "nfc_nfd_twins":
        examples = {unicodedata.normalize("NFC", "café"): images(), unicodedata.normalize("NFD", "café"): images()}
    elif v == "case_twins":
        examples = {"Moth": images(), "moth ": images()}
    elif v == "many_classes":
        examples = {f"class {i}": images() for i in range(int(rng.integers(500, 3000)))}
    elif v == "one_image":
        examples = {"a": images(1), "b": images()}
    elif v == "no_images":
        examples = {"a": [], "b": images()}
    elif v == "repeated_image":
        one = images(1)[0]
        examples = {"a": [one] * 50, "b": [one] * 50}
    elif v == "nan_images":
        examples = {"a": [np.full((8, 8, 3), np.nan, np.float32)] * 2, "b": images()}
    elif v == "mixed_sizes":
        examples = {"a": [np.zeros((5, 900, 3), np.uint8), np.zeros((70, 3, 3), np.uint8)], "b": images()}
    elif v == "huge_image":
        examples = {"a": [np.broadcast_to(np.uint8(3), (9000, 8000, 3))] * 2, "b": images()}
    elif v == "object_array":
        examples = {"a": np.array([object(), object()]), "b": images()}
    elif v == "none_images":
        examples = {"a": None, "b": images()}
    elif v == "bundle_names":
        examples = {state.classes[0]: images(), state.classes[1]: images()}
    elif v == "generator_images":
        examples = {"a": (i for i in images()), "b": images()}
    elif v == "int32_images":
        examples = {"a": [i.astype(np.int32) for i in images()], "b": images()}
    elif v == "path_to_fifo":
        fifo = folder / "fifo.png"
        os.mkfifo(fifo)
        case["made"] = ["fifo.png"]
        examples = {"a": [str(fifo), str(fifo)], "b": images()}
    elif v == "path_missing":
        examples = {"a": [str(folder / "missing.png")] * 2, "b": images()}
    elif v == "many_images":
        examples = {"a": images(400), "b": images(400)}
    model = state.sdk.personalize(state.bundle, examples=examples)
    if not isinstance(examples, dict) or len(model.classes) != len(examples):
        return {"outcome": "silent_wrong", "error": f"{len(model.classes)} classes from {type(examples).__name__}"}
    return checked_probabilities(model.predict_proba(images(3)), 3)


# -- adapt and stream

def adapt_case(state: State, case: dict, folder: Path) -> dict:
    rng = np.random.default_rng(case["seed"])
    bundle = state.executorch() if case["engine"] == "executorch" else state.bundle
    v = case["variant"]

    def batch(n: int = 8) -> np.ndarray:
        return rng.integers(0, 256, (n, state.size, state.size, 3), dtype=np.uint8)

    def raising():
        yield batch()
        raise Caller("the camera went away")

    def endless():
        while True:
            yield batch(1)

    if v.startswith("stream"):
        stream = {"stream_good": [batch() for _ in range(3)], "stream_empty": [], "stream_raises": raising(),
                  "stream_endless": endless(), "stream_bad_batch": [batch(), "not an image batch"],
                  "stream_not_iterable": 42}[v]
        model = state.sdk.personalize(bundle, stream=stream, min_images=8)
    else:
        images = {"good": batch(), "empty_list": [], "empty_array": batch(0), "int32": batch().astype(np.int32),
                  "nan": np.full((4, state.size, state.size, 3), np.nan, np.float32),
                  "mixed_sizes": [np.zeros((5, 50, 3), np.uint8), np.zeros((40, 7, 3), np.uint8)],
                  "too_many": np.broadcast_to(batch(1), (10_001, state.size, state.size, 3)),
                  "not_images": {"a": 1}, "few_shot_model": batch()}[v]
        start = bundle.generic()
        if v == "few_shot_model":
            start = state.sdk.personalize(bundle, examples={"a": list(batch(2)), "b": list(batch(2))})
        model = start.adapt(images, min_images=8)
    return checked_probabilities(model.predict_proba(batch(2)), 2)


# -- the ExecuTorch companion

def companion_case(state: State, case: dict, folder: Path) -> dict:
    rng = np.random.default_rng(case["seed"])
    raw = Path(state.companion_path).read_bytes()
    bundle_path, trusted = state.bundle_path, None
    if case.get("trusted"):
        bundle_path, raw, public_key, forger = state.signed()
        trusted = [public_key]
    v = case["variant"]
    path = folder / "c.xnnpack"
    case["made"] = ["c.xnnpack"]
    header_end = 20 + int.from_bytes(raw[12:20], "little")
    if v == "pristine":
        data = raw
    elif v.startswith("forged_"):
        data = forged_companion(raw, rng, forger if v.endswith("own_key") else None, v == "forged_digit_own_key")
    elif v == "header_digit":
        digits = [i for i in range(20, header_end) if 48 <= raw[i] <= 57]
        i = int(rng.choice(digits))
        data = raw[:i] + bytes([48 + (raw[i] - 48 + int(rng.integers(1, 10))) % 10]) + raw[i + 1:]
    elif v == "header_flip":
        i = int(rng.integers(0, header_end))
        data = raw[:i] + bytes([raw[i] ^ (1 << int(rng.integers(8)))]) + raw[i + 1:]
    elif v in ("program_flip", "weights_flip"):
        lo = header_end if v == "program_flip" else len(raw) * 3 // 4
        i = int(rng.integers(lo, len(raw)))
        data = raw[:i] + bytes([raw[i] ^ (1 << int(rng.integers(8)))]) + raw[i + 1:]
    elif v == "truncate":
        data = raw[:int(rng.integers(0, len(raw)))]
    elif v == "extend":
        data = raw + bytes(int(rng.integers(1, 4096)))
    elif v == "empty":
        data = b""
    elif v == "length_field":
        data = raw[:12] + int(rng.integers(0, 1 << 40)).to_bytes(8, "little") + raw[20:]
    elif v == "max_batch_up":   # a batch above what the program was planned for (an untyped error in ExecuTorch)
        data = raw.replace(b'"max_batch":8', b'"max_batch":9', 1)
    else:
        data = None
    if data is not None:
        path.write_bytes(data)
    elif v == "fifo":
        os.mkfifo(path)
    elif v == "folder":
        path.mkdir()
        case["made"] = ["c.xnnpack", "c.xnnpack/"]
    elif v == "symlink":
        path.symlink_to(path)   # a loop
    elif v == "swap_other":
        other = swapped_companion(state, raw, rng)
        path.write_bytes(other)
    # "missing": no file
    bundle = state.sdk.load(bundle_path, engine="executorch", program=path, trusted_keys=trusted)
    if v.startswith("forged_"):   # under trusted_keys a forger's companion must never load
        return {"outcome": "silent_wrong", "why": "a forged companion loaded with trusted_keys"}
    model = state.sdk.personalize(bundle, state.classes[:3])
    x = np.random.default_rng(1).integers(0, 256, (12, state.size, state.size, 3), dtype=np.uint8)
    p = model.predict_proba(x)   # 12 images: more than one batch of the program
    out = checked_probabilities(p, 12, state.model.predict_proba(x))
    if out["outcome"] == "silent_wrong" and np.abs(p - state.model.predict_proba(x)).max() < 1e-4:
        return {"outcome": "ok"}   # the engines agree to 1e-5 (engines.md), not bit for bit
    return out


def unsigned_companion_case(state: State, case: dict, folder: Path) -> dict:
    """One bit of the unsigned companion's program flipped, its SHA-256 redone, loaded without trusted_keys:
    refused (typed), or loaded and predicting what the onnxruntime engine predicts; never a crash."""
    from sdk.engines.xnnpack_program import PREFIX, PTE_HEADER, PTE_HEADER_AT, companion_bytes

    rng = np.random.default_rng(case["seed"])
    raw = Path(state.companion_path).read_bytes()
    length = int.from_bytes(raw[12:20], "little")
    header = json.loads(raw[PREFIX.size:PREFIX.size + length])
    start, size = header["program"]["offset"], header["program"]["size"]
    program = bytearray(raw[start:start + size])
    _, _, flatbuffer, segments, segment_size = PTE_HEADER.unpack_from(program, PTE_HEADER_AT)
    if case["variant"] == "flatbuffer_flip":
        i = int(rng.integers(8, flatbuffer))
    elif case["variant"] == "segment_head_flip":
        i = segments + int(rng.integers(0, 256))
    else:
        i = int(rng.choice(state.outside_slots(header, segments, segment_size)))
    program[i] ^= 1 << int(rng.integers(8))
    path = folder / "c.xnnpack"
    path.write_bytes(companion_bytes({k: v for k, v in header.items() if k != "program"}, bytes(program)))
    case["made"] = ["c.xnnpack"]
    bundle = state.sdk.load(state.bundle_path, engine="executorch", program=path)
    model = state.sdk.personalize(bundle, state.classes[:3])
    x = np.random.default_rng(1).integers(0, 256, (12, state.size, state.size, 3), dtype=np.uint8)
    p, reference = model.predict_proba(x), state.model.predict_proba(x)
    out = checked_probabilities(p, 12, reference)
    if out["outcome"] == "silent_wrong" and np.abs(p - reference).max() < 1e-4:
        return {"outcome": "ok"}   # the engines agree to 1e-5 (engines.md), not bit for bit
    return out


def forged_companion(raw: bytes, rng: np.random.Generator, key, header_digit: bool) -> bytes:
    """A forger's companion from the signed `raw`: a bit of the program's flatbuffer flipped (or, with
    `header_digit`, a digit of a slot offset changed) with the program's SHA-256 redone, unsigned or signed by
    the forger's own `key`."""
    from sdk.engines.xnnpack_program import PREFIX, companion_bytes

    length = int.from_bytes(raw[12:20], "little")
    header = json.loads(raw[PREFIX.size:PREFIX.size + length])
    start, size = header["program"]["offset"], header["program"]["size"]
    program = bytearray(raw[start:start + size])
    base = {k: v for k, v in header.items() if k != "program"}
    if header_digit:
        name = sorted(base["slots"])[int(rng.integers(len(base["slots"])))]
        base["slots"][name]["offset"] += 4 * int(rng.integers(1, 64))
    else:
        flatbuffer = int.from_bytes(program[16:24], "little")   # the extended header's flatbuffer size
        i = int(rng.integers(8, max(9, flatbuffer)))
        program[i] ^= 1 << int(rng.integers(8))
    return companion_bytes(base, bytes(program), key)


def swapped_companion(state: State, raw: bytes, rng: np.random.Generator) -> bytes:
    """The companion's header with two slots' offsets exchanged (as if written for another program)."""
    length = int.from_bytes(raw[12:20], "little")
    header = json.loads(raw[20:20 + length])
    names = sorted(header["slots"])
    a, b = rng.choice(len(names), 2, replace=False)
    slots = header["slots"]
    slots[names[a]]["offset"], slots[names[b]]["offset"] = slots[names[b]]["offset"], slots[names[a]]["offset"]
    text = json.dumps(header, separators=(",", ":")).encode()   # as compact as the exporter wrote it
    if len(text) > length:
        return raw
    return raw[:20] + text.ljust(length) + raw[20 + length:]


# -- export paths

def export_case(state: State, case: dict, folder: Path) -> dict:
    v, suffix = case["variant"], case["suffix"]
    name = "model" + suffix
    target: object = folder / name
    made = []
    if v == "existing_file":
        (folder / name).write_bytes(b"the user's own file")
        made = [name]
    elif v == "existing_folder":
        (folder / name).mkdir()
        (folder / name / "keep.txt").write_text("mine")
        made = [name, name + "/", f"{name}/keep.txt"]
    elif v == "missing_folder":
        target = folder / "no" / "such" / name
    elif v == "read_only_folder":
        (folder / "ro").mkdir()
        (folder / "ro").chmod(0o555)
        target = folder / "ro" / name
        made = ["ro"]
    elif v == "fifo":
        os.mkfifo(folder / name)
        made = [name]
    elif v == "symlink_to_file":
        (folder / "real.bin").write_bytes(b"mine")
        (folder / name).symlink_to(folder / "real.bin")
        made = ["real.bin", name]
    elif v == "dangling_symlink":
        (folder / name).symlink_to(folder / "nowhere")
        made = [name]
    elif v == "long_name":
        target = folder / ("m" * 300 + suffix)
    elif v == "nul":
        target = str(folder / "a\0b") + suffix
    elif v == "not_a_path":
        target = 42
    elif v == "through_file":
        (folder / "file").write_bytes(b"x")
        target = folder / "file" / name
        made = ["file"]
    elif v == "dot_name":
        target = folder / suffix if suffix else folder / "."
    case["made"] = made
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file() and not p.is_symlink()}
    written = state.model.export(target)
    after_ok = all(p.exists() and p.read_bytes() == b for p, b in before.items() if p != Path(written))
    if not after_ok:
        return {"outcome": "silent_wrong", "error": "a file the user had was changed"}
    written = Path(written)
    size = sum(f.stat().st_size for f in written.rglob("*")) if written.is_dir() else written.stat().st_size
    return {"outcome": "ok"} if size > 0 else {"outcome": "silent_wrong", "error": "an empty export"}


# -- the bundle file changed after loading

def changed_case(state: State, case: dict, folder: Path) -> dict:
    sdk, rng = state.sdk, np.random.default_rng(case["seed"])
    path = folder / "b.taper"
    shutil.copyfile(state.bundle_path, path)
    case["made"] = ["b.taper", "b.taper.old"]
    bundle = sdk.load(path)
    model = sdk.personalize(bundle, state.classes[:3])
    few = sdk.personalize(bundle, examples={"a": [state.image, state.image[::-1]], "b": [state.image[:, ::-1]] * 2})
    size = path.stat().st_size
    if case["change"] == "truncate":
        os.truncate(path, int(rng.integers(0, size)))
    elif case["change"] == "grow":
        with open(path, "ab") as f:
            f.write(b"\0" * 4096)
    elif case["change"] == "rewrite":
        with open(path, "r+b") as f:   # same size, new bytes in the weights, new modification time
            f.seek(int(rng.integers(size // 2, size)))
            f.write(b"\xff" * 64)
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    else:   # replaced by a rename: the mapping keeps the old file, which is harmless
        shutil.copyfile(path, folder / "b.taper.old")
        os.replace(folder / "b.taper.old", path)
        shutil.copyfile(path, folder / "b.taper.old")
    x = np.random.default_rng(2).integers(0, 256, (2, state.size, state.size, 3), dtype=np.uint8)
    call = case["call"]
    if call == "personalize":
        out = sdk.personalize(bundle, state.classes[:3]).predict_proba(x)
    elif call == "generic":
        out = bundle.generic().predict_proba(x)
    elif call == "adapt":
        out = model.adapt(x, min_images=1).predict_proba(x)
    elif call == "stream":
        out = sdk.personalize(bundle, stream=[x, x], min_images=1).predict_proba(x)
    elif call == "examples":
        out = sdk.personalize(bundle, examples={"a": [state.image] * 2, "b": [state.image[::-1]] * 2}).predict_proba(x)
    elif call == "predict":
        out = model.predict_proba(x)   # the model's weights are its own by now: reads nothing mapped
    elif call == "fewshot_predict":
        out = few.predict_proba(x)
    else:
        written = model.export(folder / "m.onnx")
        case["made"].append("m.onnx")
        return {"outcome": "ok"} if Path(written).stat().st_size > 0 else {"outcome": "silent_wrong"}
    return checked_probabilities(out, 2)


# -- the CLI

def cli_case(state: State, case: dict, folder: Path) -> dict:
    v = case["variant"]
    images = folder / "imgs"
    images.mkdir()
    from PIL import Image

    Image.fromarray(state.image).save(images / "a.png")
    made = ["imgs", "imgs/a.png"]
    args = ["personalize", str(state.bundle_path), ", ".join(state.classes[:3]), "--images", str(images)]
    if v == "good_json":
        args.append("--json")
    elif v == "missing_bundle":
        args[1] = str(folder / "missing.taper")
    elif v == "bundle_is_folder":
        args[1] = str(images)
    elif v == "bad_description":
        args[2] = "zzqx unknowable thing 123"
    elif v == "images_missing":
        args[4] = str(folder / "none")
    elif v == "images_not_images":
        (images / "b.png").write_bytes(b"not a png")
        made.append("imgs/b.png")
    elif v == "non_utf8_image_name":
        raw = os.fsencode(images) + b"/\xff\xfe.png"
        with open(raw, "wb") as f:
            f.write((images / "a.png").read_bytes())
        made.append("imgs/" + os.fsdecode(b"\xff\xfe.png"))
        args.append("--json")
    elif v == "export_bad":
        args += ["--export", str(folder / "no" / "dir" / "m.onnx")]
    elif v == "max_classes_zero":
        args += ["--max-classes", "0"]
    elif v == "max_classes_text":
        args += ["--max-classes", "many"]
    elif v == "trusted_key_bad":
        args += ["--trusted-key", "not-a-key"]
    elif v == "unknown_flag":
        args += ["--frobnicate"]
    elif v == "no_args":
        args = []
    case["made"] = made
    env = {**os.environ, "TAPER_DEVICE_CACHE": "0"}
    result = subprocess.run([sys.executable, "-m", "sdk", *args], capture_output=True, timeout=120, env=env, cwd=ROOT)
    stderr = result.stderr.decode("utf-8", "replace")
    if result.returncode < 0:
        return {"outcome": "crash", "error": f"signal {-result.returncode}"}
    if "Traceback" in stderr:
        return {"outcome": "escape", "error": stderr.strip().splitlines()[-1][:200]}
    if result.returncode != 0:
        return {"outcome": "typed", "error": stderr.strip().splitlines()[-1][:160] if stderr.strip() else "exit"}
    if "--json" in args:
        try:
            json.loads(result.stdout.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            return {"outcome": "silent_wrong", "error": f"--json output is not JSON in UTF-8: {e}"}
    return {"outcome": "ok"}


# ---------------------------------------------------------------- the parent

def worker(bundle: Path, companion: Path, scratch: Path) -> Worker:
    """A worker subprocess running `serve` (fuzz_bundle's Worker: one JSON line in, one out, a timeout)."""
    return Worker(command=[sys.executable, "-c", WORKER, str(bundle), str(companion), str(scratch)])


def cases(count: int, seed: int, families: list[str] | None = None, each_family: int = 0) -> list[dict]:
    """`count` cases drawn with `seed`: `each_family` of each family first (a short slice, the test suite's,
    then reaches every one), the rest in the families' fixed proportions."""
    rng = np.random.default_rng(seed)
    names = families or list(FAMILIES)
    weights = np.array([FAMILIES[n] for n in names])
    first = [n for n in names for _ in range(each_family)]

    def family(i: int) -> str:   # drawn case by case, as before `each_family`: a seed's cases stay the same
        return first[i] if i < len(first) else str(rng.choice(names, p=weights / weights.sum()))

    return [{**draw(family(i), rng), "id": i} for i in range(count)]


def fixtures(bundle: Path | None, companion: Path | None, work: Path) -> tuple[Path, Path]:
    """The bundle (the tiny preset's, trained here, unless given) and its ExecuTorch companion (lowered
    here, unless given)."""
    if bundle is None:
        from export.bundle import bundle_run
        from trainer.run import run

        bundle = bundle_run(run(work / "tiny-run", "tiny", progress=False), work / "tiny.taper")
    if companion is not None:
        return bundle, companion
    from export.executorch_program import export_companion

    return bundle, export_companion(bundle, work / "companion.xnnpack")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--bundle", type=Path, default=None, help="default: train the tiny preset's bundle")
    parser.add_argument("--companion", type=Path, default=None, help="the bundle's .xnnpack (default: lowered here)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--families", nargs="+", choices=list(FAMILIES), default=None,
                        help="draw only these families (default: all, in the fixed proportions)")
    parser.add_argument("--each-family", type=int, default=0,
                        help="draw this many cases of each family first, then the rest in proportion")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path, default=Path("docs/results/entry_points"))
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        bundle, companion = fixtures(args.bundle, args.companion, work)
        counts: dict[str, Counter] = defaultdict(Counter)
        examples: dict[str, list] = defaultdict(list)
        lock = threading.Lock()
        todo = cases(args.cases, args.seed, args.families, args.each_family)
        done = [0]

        def drive(mine: list[dict], scratch: Path) -> None:
            """One worker's share of the cases (a worker per core; each restarted after a hang or crash)."""
            runner = worker(bundle, companion, scratch)
            for case in mine:
                result = runner.run(json.dumps(case), args.timeout)
                if not runner.alive():
                    shutil.rmtree(scratch / f"case-{case['id']}", ignore_errors=True)
                    runner = worker(bundle, companion, scratch)
                with lock:
                    record(case, result, counts, examples)
                    done[0] += 1
                    if done[0] % 100 == 0:
                        print(f"[entry points] {done[0]}/{args.cases}: {dict(sum(counts.values(), Counter()))}",
                              flush=True)
            runner.close()

        threads = [threading.Thread(target=drive, args=(todo[i::args.workers], work / f"scratch{i}"))
                   for i in range(args.workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    report = summary(counts, examples, args, time.time() - start)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(markdown(report))
    print(f"wrote {args.out.with_suffix('.md')} and .json: {report['entry_points']}")
    return 0


def record(case: dict, result: dict, counts: dict[str, Counter], examples: dict[str, list]) -> None:
    family = case["family"]
    detail = f"{case['dtype']}/{case['shape']}" if family == "image" else case.get("variant", case.get("call", ""))
    if family == "image_objects":
        detail = f"{case['variant']}/{case['call']}"
    if family == "companion" and case.get("trusted"):   # reported apart: signed, and forged (issue 49)
        family = "companion_forged" if detail.startswith("forged_") else "companion_signed"
    counts[family][result["outcome"]] += 1
    key = f"{family}:{detail}"
    if result["outcome"] in FAILURES and len(examples[key]) < 3:
        examples[key].append({"case": case, **result})


def summary(counts: dict[str, Counter], examples: dict, args, seconds: float) -> dict:
    total = sum(counts.values(), Counter())
    forged = sum(counts["companion_forged"].values())
    unsigned = counts.get("companion_unsigned", Counter())   # .get: a run without the family does not list it
    return {"command": "python -m scripts.fuzz_entry_points " + " ".join(args.argv), "seconds": round(seconds),
            "entry_points": {"cases": sum(total.values()), "escapes": total["escape"], "hangs": total["hang"],
                             "crashes": total["crash"], "silent_wrong": total["silent_wrong"],
                             "partial_files": total["partial"], "typed": total["typed"], "ok": total["ok"]},
            "families": {f: dict(c) for f, c in sorted(counts.items())}, "failures": examples,
            # forged companions (program edited, SHA-256 redone; unsigned or signed by another key) read with
            # trusted_keys: every one must be refused
            "companion_forged": {"cases": forged, "loaded": forged - counts["companion_forged"]["typed"]},
            # re-checksummed flips of an unsigned companion, loaded without trusted_keys (issue 63)
            "companion_unsigned": {"cases": sum(unsigned.values()), "crashes": unsigned["crash"],
                                   "hangs": unsigned["hang"], "silent_wrong": unsigned["silent_wrong"],
                                   "refused": unsigned["typed"], "loaded_and_right": unsigned["ok"]}}


def markdown(r: dict) -> str:
    e = r["entry_points"]
    lines = ["# The entry points under hostile input", "", f"Command: `{r['command']}` ({r['seconds']} s).", "",
             f"{e['cases']} cases: {e['escapes']} escapes, {e['hangs']} hangs, {e['crashes']} crashes, "
             f"{e['silent_wrong']} silent wrong results, {e['partial_files']} partial files or folders "
             f"({e['typed']} refused with a typed error, {e['ok']} accepted and checked).", "",
             "| family | " + " | ".join(OUTCOMES) + " |", "|---|" + "---|" * len(OUTCOMES)]
    for family, c in r["families"].items():
        lines.append(f"| {family} | " + " | ".join(str(c.get(o, 0)) for o in OUTCOMES) + " |")
    lines += ["", "Outcomes and families: scripts/fuzz_entry_points.py (its docstring). Failures, up to three per "
              "variant, are in the JSON (`failures`).", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
