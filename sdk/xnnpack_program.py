"""The ExecuTorch companion of a bundle: an XNNPACK program of the folded backbone whose weights live
in a separate ExecuTorch data file (.ptd), and where each weight sits in it. Reader and writer.

`python -m export executorch BUNDLE` writes `BUNDLE.xnnpack`; `sdk.load(BUNDLE, engine="executorch")`
reads it, and every personalize() writes the folded weights into a copy of the data file at the
recorded slots and loads the program with it (`sdk.executorch_engine`).

File layout (little-endian):

    bytes 0-7    b"TAPERXNN"
    bytes 8-11   uint32 format version (1)
    bytes 12-19  uint64 header length H
    then         H bytes of UTF-8 JSON: the header
    then         the program (.pte) and the data file (.ptd), where the header says

Header: `architecture` {stem, width, input_size} (must equal the bundle's), `max_batch` (the
program's largest batch), `program` and `weights` {offset, size, sha256} (absolute offsets), and
`slots` {parameter name: {offset: byte offset in the data file, axes: the permutation from the
bundle's layout (O, I, H, W) to the stored one}}. XNNPACK stores a conv weight channels-last (axes
[0, 2, 3, 1], measured on executorch 1.5.1) and names each weight by the SHA-256 of its bytes at
export, so two equal tensors would share one slot: the exporter fills every weight with distinct
values and checks that each parameter has its own slot.

Everything is checked on reading (BundleError): magic, version, sizes, checksums, the architecture,
and that the slots are exactly the backbone's parameters, inside the data file's tensor segments,
4-byte aligned, non-overlapping, with a known permutation. The program itself is ExecuTorch's to
verify (its internal-consistency check at load): export the companion yourself, from a bundle you
trust.

>>> header = {"architecture": {}, "max_batch": 8, "slots": {}}
>>> raw = companion_bytes(header, b"program", b"weights")
>>> raw[:8], len(raw) > 24
(b'TAPERXNN', True)
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import BundleError

MAGIC = b"TAPERXNN"
FORMAT_VERSION = 1
PREFIX = struct.Struct("<8sIQ")  # magic, version, header length
ALIGNMENT = 64
MAX_HEADER_BYTES = 16 << 20
MAX_FILE_BYTES = 4 << 30
MAX_BATCH_LIMIT = 64
SUFFIX = ".xnnpack"
CHANNELS_LAST = (0, 2, 3, 1)
# ExecuTorch's FlatTensor data file: "FH01" header at byte 8 (magic, length, flatbuffer offset and size,
# segment base offset, segment data size), executorch/extension/flat_tensor/serialize/serialize.py.
PTD_HEADER = struct.Struct("<4sIQQQQ")
PTD_HEADER_AT, PTD_MAGIC = 8, b"FH01"


@dataclass(frozen=True)
class Slot:
    offset: int                 # bytes into the data file
    axes: tuple[int, ...]       # stored = bundle layout transposed by axes


@dataclass(frozen=True)
class Companion:
    program: bytes              # the .pte
    weights: bytes              # the .ptd as exported (weights are written into a copy)
    slots: dict[str, Slot]
    max_batch: int


def default_path(bundle_path: str | Path) -> Path:
    bundle_path = Path(bundle_path)
    return bundle_path.with_name(bundle_path.name + SUFFIX)


def _aligned(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


def companion_bytes(header: dict, program: bytes, weights: bytes) -> bytes:
    """The companion file of `program` and `weights` (offsets, sizes and checksums added to `header`)."""
    header = dict(header)
    size = len(json.dumps(header)) + 512  # room for the entries added below, whose digits change the length
    start = _aligned(PREFIX.size + size)
    header["program"] = {"offset": start, "size": len(program), "sha256": hashlib.sha256(program).hexdigest()}
    second = _aligned(start + len(program))
    header["weights"] = {"offset": second, "size": len(weights), "sha256": hashlib.sha256(weights).hexdigest()}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    if PREFIX.size + len(text) > start:
        raise ValueError("companion header larger than planned")
    out = bytearray(second + len(weights))
    out[:PREFIX.size] = PREFIX.pack(MAGIC, FORMAT_VERSION, len(text))
    out[PREFIX.size:PREFIX.size + len(text)] = text
    out[start:start + len(program)] = program
    out[second:] = weights
    return bytes(out)


def read_companion(path: str | Path, architecture: dict, shapes: dict[str, tuple[int, ...]]) -> Companion:
    """The companion at `path`, checked against the bundle's `architecture` {stem, width, input_size} and
    its folded backbone's parameter `shapes`; BundleError for anything else."""
    path = Path(path)
    what = f"ExecuTorch companion {path.name}"
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            if size > MAX_FILE_BYTES:
                raise BundleError(f"{what}: {size} bytes, more than the {MAX_FILE_BYTES} allowed")
            f.seek(0)
            data = f.read(size + 1)
    except FileNotFoundError:
        raise BundleError(f"{what} not found at {path} (write it with `python -m export executorch BUNDLE`)") from None
    except OSError as e:
        raise BundleError(f"{what}: {e.strerror}") from None
    return parse_companion(data, architecture, shapes, what)


def parse_companion(data: bytes, architecture: dict, shapes: dict[str, tuple[int, ...]],
                    what: str = "ExecuTorch companion") -> Companion:
    if len(data) < PREFIX.size:
        raise BundleError(f"{what}: truncated ({len(data)} bytes)")
    magic, version, header_size = PREFIX.unpack_from(data)
    if magic != MAGIC:
        raise BundleError(f"{what}: not an ExecuTorch companion (magic {magic!r})")
    if version != FORMAT_VERSION:
        raise BundleError(f"{what}: format version {version}, this SDK reads version {FORMAT_VERSION}: export it again")
    if header_size > min(MAX_HEADER_BYTES, len(data) - PREFIX.size):
        raise BundleError(f"{what}: header of {header_size} bytes does not fit")
    try:
        header = json.loads(data[PREFIX.size:PREFIX.size + header_size].decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise BundleError(f"{what}: the header is not JSON") from None
    if not isinstance(header, dict):
        raise BundleError(f"{what}: the header is not a JSON object")
    if header.get("architecture") != architecture:
        raise BundleError(f"{what}: made for {header.get('architecture')!r}, the bundle is {architecture!r}")
    max_batch = header.get("max_batch")
    if type(max_batch) is not int or not 1 <= max_batch <= MAX_BATCH_LIMIT:
        raise BundleError(f"{what}: max_batch must be an integer in [1, {MAX_BATCH_LIMIT}], got {max_batch!r}")
    first = PREFIX.size + header_size
    program = _section(data, header.get("program"), first, "program", what)
    weights = _section(data, header.get("weights"), first, "weights", what)
    if _overlap(header["program"], header["weights"]):
        raise BundleError(f"{what}: program and weights overlap")
    slots = _slots(header.get("slots"), shapes, _tensor_segments(weights, what), what)
    return Companion(program, weights, slots, max_batch)


def _section(data: bytes, entry: object, first: int, name: str, what: str) -> bytes:
    fields = entry if isinstance(entry, dict) else {}
    offset, size, digest = fields.get("offset"), fields.get("size"), fields.get("sha256")
    if type(offset) is not int or type(size) is not int or not isinstance(digest, str):
        raise BundleError(f"{what}: {name} needs integer offset and size and a sha256")
    if not first <= offset <= len(data) - size or size <= 0:
        raise BundleError(f"{what}: {name} ({size} bytes at {offset}) is outside the file ({len(data)} bytes)")
    section = data[offset:offset + size]
    if hashlib.sha256(section).hexdigest() != digest:
        raise BundleError(f"{what}: {name} does not match its sha256 (damaged)")
    return section


def _overlap(a: dict, b: dict) -> bool:
    return a["offset"] < b["offset"] + b["size"] and b["offset"] < a["offset"] + a["size"]


def _tensor_segments(weights: bytes, what: str) -> tuple[int, int]:
    """[start, stop) of the data file's tensor data (after its header and flatbuffer)."""
    if len(weights) < PTD_HEADER_AT + PTD_HEADER.size:
        raise BundleError(f"{what}: the weights are not an ExecuTorch data file (too short)")
    magic, _, flat_offset, flat_size, base, segments = PTD_HEADER.unpack_from(weights, PTD_HEADER_AT)
    if magic != PTD_MAGIC or base < flat_offset + flat_size or base + segments > len(weights):
        raise BundleError(f"{what}: the weights are not an ExecuTorch data file of this version")
    return base, base + segments


def _slots(raw: object, shapes: dict[str, tuple[int, ...]], segments: tuple[int, int], what: str
           ) -> dict[str, Slot]:
    if not isinstance(raw, dict) or set(raw) != set(shapes):
        missing = sorted(set(shapes) - set(raw)) if isinstance(raw, dict) else []
        raise BundleError(f"{what}: slots must name exactly the backbone's parameters (missing {missing[:3]})")
    slots, spans = {}, []
    for name, entry in raw.items():
        shape = tuple(shapes[name])
        fields = entry if isinstance(entry, dict) else {}
        offset, axes = fields.get("offset"), fields.get("axes")
        layouts = [list(range(len(shape)))] + ([list(CHANNELS_LAST)] if len(shape) == 4 else [])
        if axes not in layouts:
            raise BundleError(f"{what}: slot {name!r}: axes {axes!r} is not a layout the SDK writes")
        nbytes = 4 * math.prod(shape)
        if type(offset) is not int or offset % 4 or not segments[0] <= offset <= segments[1] - nbytes:
            raise BundleError(f"{what}: slot {name!r} ({nbytes} bytes at {offset!r}) is outside the tensor data")
        slots[name] = Slot(offset, tuple(axes))
        spans.append((offset, offset + nbytes, name))
    spans.sort()
    for (_, stop, a), (start, _, b) in zip(spans, spans[1:], strict=False):
        if start < stop:
            raise BundleError(f"{what}: slots {a!r} and {b!r} overlap (two parameters would share weights)")
    return slots


def write_slots(weights: bytearray | memoryview, slots: dict[str, Slot], views: dict[str, np.ndarray]) -> None:
    """Write the folded weights `views` (bundle layout) into a data file's bytes at their slots."""
    floats = np.frombuffer(weights, np.float32, len(weights) // 4)
    for name, slot in slots.items():
        source = views[name]
        start = slot.offset // 4
        target = floats[start:start + source.size].reshape([source.shape[a] for a in slot.axes])
        np.copyto(target, source.transpose(slot.axes))
