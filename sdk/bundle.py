"""The `.taper` bundle: one file, memory-mapped, with a JSON manifest and checksummed members.

Layout (all integers little-endian; simple to parse from Java):
    0   8 bytes   magic b"TAPERBDL"
    8   u32       format version (1)
    12  u32       reserved (0)
    16  u64       manifest length M
    24  M bytes   manifest (UTF-8 JSON)
    ... members, each starting on a 64-byte boundary at the offset the manifest gives

Manifest: {"format": "taper-bundle", "version": 1, "members": {name: {"offset", "size", "sha256"}},
"architecture", "preprocessing", "num_bases", "blocks", "mixer", "backbone", "text_encoder",
"provenance"}. Members: bases.safetensors (block{b}: [Q, P_b] learned parameters then running
statistics, in `sdk.architecture.block_layout` order), mixer.safetensors, class_embeddings.safetensors,
classes.json, backbone.onnx, text_encoder.onnx, tokenizer.json, NOTICE.

Reading validates the magic, version, manifest schema, every offset and size against the file,
tensor dtypes and shapes against the architecture, and the SHA-256 of every member at `load` time
(one sequential pass over the mapped file; nothing is copied). Any failure raises `BundleError`.
Nothing in a bundle is ever executed or unpickled: tensors are raw arrays, graphs go to onnxruntime.

>>> bundle = Bundle.open("tiny-imagenet.taper")        # doctest: +SKIP
>>> bundle.classes[:2]                                  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .architecture import NUM_BLOCKS, block_layout, parameter_shapes
from .errors import BundleError, TensorFileError
from .folding import folded_names
from .tensorfile import read_tensors

MAGIC = b"TAPERBDL"
VERSION = 1
HEADER = struct.Struct("<8sIIQ")
ALIGN = 64
MAX_MANIFEST_BYTES = 16 * 1024 * 1024
MEMBERS = ("bases.safetensors", "mixer.safetensors", "class_embeddings.safetensors", "classes.json",
           "backbone.onnx", "text_encoder.onnx", "tokenizer.json", "NOTICE")
STEMS, WIDTHS = ("imagenet", "small"), (1.0, 0.5, 0.25)


@dataclass
class ClassInfo:
    id: str
    name: str
    path: list[str]


class Bundle:
    """A validated, memory-mapped bundle. Tensors are read-only views into the file."""

    def __init__(self, data: np.ndarray, manifest: dict, source: str):
        self.data, self.manifest, self.source = data, manifest, source
        arch = manifest["architecture"]
        self.shapes = parameter_shapes(arch["stem"], arch["width"], arch["num_classes"])
        self.layout = block_layout(self.shapes)
        _check_backbone_layout(manifest["backbone"], self.shapes)
        self.bases = self._tensors("bases.safetensors")
        self.mixer = self._tensors("mixer.safetensors")
        embeddings = self._tensors("class_embeddings.safetensors")
        self._check_tensors(embeddings)
        self.class_embeddings = embeddings["text"]
        self.classes, self.supercategories = self._classes()

    @classmethod
    def open(cls, path: str | Path, verify: bool = True) -> Bundle:
        path = Path(path)
        try:
            size = path.stat().st_size
        except OSError as e:
            raise BundleError(f"{path}: {e.strerror}") from None
        if size < HEADER.size:
            raise BundleError(f"{path}: {size} bytes is too short for a bundle")
        data = np.memmap(path, dtype=np.uint8, mode="r")
        try:
            return cls.from_buffer(data, str(path), verify)
        except BundleError as e:
            raise BundleError(f"{path}: {e}") from None

    @classmethod
    def from_buffer(cls, data: np.ndarray, source: str = "<memory>", verify: bool = True) -> Bundle:
        manifest = parse_manifest(data)
        if verify:
            verify_checksums(data, manifest)
        return cls(data, manifest, source)

    def member(self, name: str) -> np.ndarray:
        entry = self.manifest["members"][name]
        return self.data[entry["offset"]:entry["offset"] + entry["size"]]

    def member_bytes(self, name: str) -> bytes:
        return self.member(name).tobytes()

    def _tensors(self, name: str) -> dict[str, np.ndarray]:
        try:
            return read_tensors(self.member(name))[0]
        except TensorFileError as e:
            raise BundleError(f"member {name}: {e}") from None

    def _check_tensors(self, embeddings: dict[str, np.ndarray]) -> None:
        q = self.manifest["num_bases"]
        for b, names in enumerate(self.layout):
            width = sum(int(np.prod(self.shapes[n], dtype=np.int64)) for n in names)
            _expect(self.bases, f"block{b}", (q, width), "bases.safetensors")
        mixer = self.manifest["mixer"]
        dims = [mixer["embed_dim"]] + [mixer["hidden"]] * (mixer["layers"] - 1)
        for i, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:], strict=True)):
            _expect(self.mixer, f"body.{3 * i}.weight", (d_out, d_in), "mixer.safetensors")
            for part in ("weight", "bias", "running_mean", "running_var"):
                _expect(self.mixer, f"body.{3 * i + 1}.{part}", (d_out,), "mixer.safetensors")
        _expect(self.mixer, "head.weight", (mixer["blocks"] * q, dims[-1]), "mixer.safetensors")
        _expect(embeddings, "text", (self.manifest["architecture"]["num_classes"], mixer["embed_dim"]),
                "class_embeddings.safetensors")

    def _classes(self) -> tuple[list[ClassInfo], dict[str, list[int]]]:
        try:
            spec = json.loads(self.member_bytes("classes.json"))
            classes = [ClassInfo(str(c["id"]), str(c["name"]), [str(p) for p in c["path"]]) for c in spec["classes"]]
            groups = {str(k): [int(i) for i in v] for k, v in spec.get("supercategories", {}).items()}
        except (ValueError, KeyError, TypeError) as e:
            raise BundleError(f"member classes.json: malformed ({type(e).__name__}: {e})") from None
        n = self.manifest["architecture"]["num_classes"]
        if len(classes) != n or any(not 0 <= i < n for v in groups.values() for i in v):
            raise BundleError(f"member classes.json: expected {n} classes with valid super-category indices")
        return classes, groups


def _expect(tensors: dict, name: str, shape: tuple, member: str) -> None:
    t = tensors.get(name)
    if t is None:
        raise BundleError(f"member {member}: tensor {name!r} missing")
    if t.dtype != np.float32 or tuple(t.shape) != tuple(shape):
        raise BundleError(f"member {member}: tensor {name!r} is {t.dtype} {tuple(t.shape)}, expected float32 {shape}")


def parse_manifest(data: np.ndarray) -> dict:
    """Validate the header and manifest against the file size. Raises BundleError."""
    size = len(data)
    if size < HEADER.size:
        raise BundleError(f"{size} bytes is too short for a bundle")
    magic, version, _, length = HEADER.unpack(bytes(data[:HEADER.size]))
    if magic != MAGIC:
        raise BundleError("not a TAPER bundle (bad magic)")
    if version != VERSION:
        raise BundleError(f"bundle format version {version} is not supported (this SDK reads {VERSION})")
    if length > MAX_MANIFEST_BYTES or HEADER.size + length > size:
        raise BundleError(f"manifest length {length} does not fit in a {size}-byte file")
    try:
        manifest = json.loads(bytes(data[HEADER.size:HEADER.size + length]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise BundleError(f"manifest is not valid JSON ({e})") from None
    _check_schema(manifest)
    _check_members(manifest["members"], HEADER.size + length, size)
    return manifest


def _check_schema(m: object) -> None:
    def need(cond: bool, what: str) -> None:
        if not cond:
            raise BundleError(f"manifest: {what}")

    need(isinstance(m, dict), "not a JSON object")
    need(m.get("format") == "taper-bundle" and m.get("version") == VERSION, "format/version fields wrong")
    for key in ("members", "architecture", "preprocessing", "mixer", "backbone", "text_encoder"):
        need(isinstance(m.get(key), dict), f"{key!r} must be an object")
    arch, mixer, pre, backbone = m["architecture"], m["mixer"], m["preprocessing"], m["backbone"]
    need(arch.get("stem") in STEMS and arch.get("width") in WIDTHS, "architecture stem/width unknown")
    for obj, key, low, high in ((arch, "num_classes", 1, 100_000), (arch, "input_size", 8, 4096),
                                (m, "num_bases", 1, 1024), (mixer, "embed_dim", 1, 100_000),
                                (mixer, "hidden", 1, 100_000), (mixer, "layers", 2, 16),
                                (backbone, "external_size", 1, 2**40)):
        need(type(obj.get(key)) is int and low <= obj[key] <= high, f"{key!r} must be an integer in [{low}, {high}]")
    need(mixer.get("blocks") in (1, NUM_BLOCKS), "mixer blocks must be 1 or 4")
    need(isinstance(backbone.get("layout"), dict) and isinstance(backbone.get("external_file"), str),
         "backbone layout missing")
    need(_numbers(pre.get("mean"), 3) and _numbers(pre.get("std"), 3) and all(s > 0 for s in pre["std"]),
         "preprocessing mean/std must be 3 numbers each (std > 0)")
    need(set(m["members"]) == set(MEMBERS), f"members must be exactly {sorted(MEMBERS)}")


def _numbers(value: object, n: int) -> bool:
    return isinstance(value, list) and len(value) == n and all(type(v) in (int, float) for v in value)


def _check_backbone_layout(backbone: dict, shapes: dict[str, tuple[int, ...]]) -> None:
    """Every folded weight at an aligned offset inside the external file, with the expected shape."""
    expected = folded_names(shapes)
    layout = backbone["layout"]
    if set(layout) != set(expected):
        raise BundleError("manifest: backbone layout does not list the architecture's weights")
    spans = []
    for name, entry in layout.items():
        ok = isinstance(entry, dict) and type(entry.get("offset")) is int and entry.get("shape") == list(expected[name])
        if not ok or entry["offset"] % 4:
            raise BundleError(f"manifest: backbone layout entry {name!r} is malformed")
        end = entry["offset"] + 4 * int(np.prod(expected[name], dtype=np.int64))
        if not 0 <= entry["offset"] <= end <= backbone["external_size"]:
            raise BundleError(f"manifest: backbone weight {name!r} lies outside the external file")
        spans.append((entry["offset"], end))
    spans.sort()
    if any(b < e for (_, e), (b, _) in zip(spans, spans[1:], strict=False)):
        raise BundleError("manifest: backbone weights overlap")


def _check_members(members: dict, data_start: int, size: int) -> None:
    spans = []
    for name, entry in members.items():
        ok = (isinstance(entry, dict) and type(entry.get("offset")) is int and type(entry.get("size")) is int
              and isinstance(entry.get("sha256"), str) and len(entry["sha256"]) == 64)
        if not ok:
            raise BundleError(f"manifest: member {name!r} needs integer offset, size and a sha256")
        begin, end = entry["offset"], entry["offset"] + entry["size"]
        if not data_start <= begin <= end <= size or begin % ALIGN:
            raise BundleError(f"member {name!r}: bytes [{begin}, {end}) outside the file or misaligned")
        spans.append((begin, end, name))
    spans.sort()
    for (_, end, a), (begin, _, b) in zip(spans, spans[1:], strict=False):
        if begin < end:
            raise BundleError(f"members {a!r} and {b!r} overlap")


def verify_checksums(data: np.ndarray, manifest: dict) -> None:
    for name, entry in manifest["members"].items():
        digest = hashlib.sha256(data[entry["offset"]:entry["offset"] + entry["size"]]).hexdigest()
        if digest != entry["sha256"]:
            raise BundleError(f"member {name!r}: checksum mismatch (corrupt bundle)")
