"""The ExecuTorch companion of a bundle: an XNNPACK program of the folded backbone that holds its own
weights, and where each weight sits in the program's bytes. Reader and writer.

`python -m export executorch BUNDLE` writes `BUNDLE.xnnpack`; `sdk.load(BUNDLE, engine="executorch")`
reads it, and every personalize() fuses the folded weights straight into a copy of the program at the
recorded slots, in their stored layout, and loads that copy (`sdk.engines.executorch`). The phone does the same in Java
(android_demo `XnnpackProgram`).

Why the weights are inside the program (format 2) and not in a separate ExecuTorch data file (.ptd,
format 1): the Android ExecuTorch Java API loads a module from one .pte path
(`Module.load(path, loadMode, numThreads)`, extension/android Module.java); it has no data-file
argument, so a .ptd could not reach the phone's runtime. One program file works on both sides.

File layout (little-endian):

    bytes 0-7    b"TAPERXNN"
    bytes 8-11   uint32 format version (2 unsigned, 3 signed)
    bytes 12-19  uint64 header length H
    then         H bytes of UTF-8 JSON: the header
    then         the program (.pte), where the header says
    version 3:   the last 128 bytes, a signature trailer (`sdk.format.signing`): Ed25519 over COMPANION_DOMAIN and
                 bytes 0 .. 20+H (the prefix and the header, which holds the program's SHA-256)

Header: `architecture` {stem, width, input_size} (must equal the bundle's), `max_batch` (the
program's largest batch), `program` {offset, size, sha256} (absolute offset), and `slots` {parameter
name: {offset: byte offset in the program, axes: the permutation from the bundle's layout (O, I, H,
W) to the stored one}}. XNNPACK stores a conv weight channels-last (axes [0, 2, 3, 1], measured on
executorch 1.5.1) and names each weight by the SHA-256 of its bytes at export, so two equal tensors
would share one slot: the exporter fills every weight with distinct values and checks that each
parameter has its own slot.

Everything is checked on reading (BundleError): magic, version, sizes, the checksum, the
architecture, and that the slots are exactly the backbone's parameters, inside the program's segment
data (after its flatbuffer, as its extended header "eh00" says), 4-byte aligned, non-overlapping, with
a known permutation, and holding what the exporter left there: each parameter's element indices (1, 2,
... over the parameters in order) in the slot's layout. The last check covers the header (the checksum
of the program is in the header, which nothing else vouches for): a changed offset or axis is refused.
The rest of the program (its operators) is ExecuTorch's to verify (its internal-consistency check at
load, structure only): a program edited together with its checksum still loads unless the companion is
signed. A signed companion's signature is always checked, and with `sdk.load(..., trusted_keys=...)` an
unsigned companion, or one signed by a key not in the set, is refused before its header is parsed: then
nothing reaches ExecuTorch that a trusted key did not sign.

>>> header = {"architecture": {}, "max_batch": 8, "slots": {}}
>>> raw = companion_bytes(header, b"program")
>>> raw[:8], len(raw) > 24
(b'TAPERXNN', True)
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sdk.errors import BundleError
from sdk.format import strict_json
from sdk.format.signing import (
    COMPANION_DOMAIN,
    TRAILER,
    Signer,
    SigningKey,
    check_trusted,
    sign_message,
    verify_trailer,
)

if TYPE_CHECKING:
    from sdk.format.bundle import Bundle

MAGIC = b"TAPERXNN"
FORMAT_VERSION = 2          # unsigned
SIGNED_VERSION = 3          # version 2 and a signature trailer
PREFIX = struct.Struct("<8sIQ")  # magic, version, header length
ALIGNMENT = 64
MAX_HEADER_BYTES = 16 << 20
HEADER_DEPTH = 8          # the header nests 3 deep (slots -> name -> axes); the Java reader has the same bound
MAX_FILE_BYTES = 4 << 30
MAX_BATCH_LIMIT = 64
SUFFIX = ".xnnpack"
CHANNELS_LAST = (0, 2, 3, 1)
# An ExecuTorch program's extended header at byte 8: magic, its length, the flatbuffer's size, where the
# segments start and their size (executorch/exir/_serialize/_program.py, _ExtendedHeader; 32 bytes
# when the segment size is present).
PTE_HEADER = struct.Struct("<4sIQQQ")
PTE_HEADER_AT, PTE_MAGIC = 8, b"eh00"


@dataclass(frozen=True)
class Slot:
    offset: int                 # bytes into the program
    axes: tuple[int, ...]       # stored = bundle layout transposed by axes


@dataclass(frozen=True)
class Companion:
    program: bytes              # the .pte as exported (weights are written into a copy)
    slots: dict[str, Slot]
    max_batch: int
    signer: Signer | None = None  # who signed it (version 3), or None


def companion_target(bundle: Bundle) -> tuple[dict, dict[str, tuple[int, ...]]]:
    """What a companion of `bundle` must match: its architecture {stem, width, input_size} (the header's
    `architecture`) and its folded backbone's parameter shapes (the `slots`)."""
    arch = bundle.manifest.architecture
    return ({"stem": arch.stem, "width": arch.width, "input_size": arch.input_size},
            {name: tuple(entry["shape"]) for name, entry in bundle.backbone_layout.items()})


def default_path(bundle_path: str | Path) -> Path:
    bundle_path = Path(bundle_path)
    return bundle_path.with_name(bundle_path.name + SUFFIX)


def _aligned(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


def companion_bytes(header: dict, program: bytes, key: SigningKey | None = None) -> bytes:
    """The companion file of `program` (its offset, size and checksum added to `header`), signed by `key`
    (format version 3) or unsigned (version 2)."""
    header = dict(header)
    size = len(json.dumps(header)) + 512  # room for the entries added below, whose digits change the length
    start = _aligned(PREFIX.size + size)
    header["program"] = {"offset": start, "size": len(program), "sha256": hashlib.sha256(program).hexdigest()}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    if PREFIX.size + len(text) > start:
        raise ValueError("companion header larger than planned")
    out = bytearray(start + len(program))
    out[:PREFIX.size] = PREFIX.pack(MAGIC, FORMAT_VERSION if key is None else SIGNED_VERSION, len(text))
    out[PREFIX.size:PREFIX.size + len(text)] = text
    out[start:] = program
    if key is not None:
        out += sign_message(bytes(out[:PREFIX.size + len(text)]), key, COMPANION_DOMAIN)
    return bytes(out)


def sign_companion(data: bytes, key: SigningKey) -> bytes:
    """The same companion signed by `key` (version 3; a signed one is signed again). Checks what it can
    without the bundle (prefix, header, the program's SHA-256): the caller validates it against its bundle."""
    body, _ = _unsigned_part(data, "ExecuTorch companion")
    header, _ = _header(body, "ExecuTorch companion")
    program = _section(body, header.get("program"), PREFIX.size, "program", "ExecuTorch companion")
    return companion_bytes({k: v for k, v in header.items() if k != "program"}, program, key)


def read_companion(path: str | Path, architecture: dict, shapes: dict[str, tuple[int, ...]],
                   trusted_keys: frozenset[bytes] | None = None) -> Companion:
    """The companion at `path`, checked against the bundle's `architecture` {stem, width, input_size} and
    its folded backbone's parameter `shapes`; with `trusted_keys` (raw public keys), it must be signed by one
    of them. BundleError for anything else."""
    path = Path(path)
    what = f"ExecuTorch companion {path.name}"
    try:
        # Opened without blocking and checked through its descriptor: a FIFO would block a plain open
        # forever, and the path could be swapped for one between a check and the open.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise BundleError(f"{what} not found at {path} (write it with `python -m export executorch BUNDLE`)") from None
    except (OSError, ValueError) as e:
        raise BundleError(f"{what}: {getattr(e, 'strerror', None) or e}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):   # checked before a file object: a folder is refused, not an OSError
        os.close(fd)
        raise BundleError(f"{what}: not a regular file")
    with os.fdopen(fd, "rb") as f:
        if info.st_size > MAX_FILE_BYTES:
            raise BundleError(f"{what}: {info.st_size} bytes, more than the {MAX_FILE_BYTES} allowed")
        try:
            data = f.read(info.st_size + 1)
        except OSError as e:
            raise BundleError(f"{what}: {e.strerror}") from None
    return parse_companion(data, architecture, shapes, what, trusted_keys)


def parse_companion(data: bytes, architecture: dict, shapes: dict[str, tuple[int, ...]],
                    what: str = "ExecuTorch companion", trusted_keys: frozenset[bytes] | None = None) -> Companion:
    body, signer = _unsigned_part(data, what)
    if trusted_keys is not None:   # before the header is parsed: nothing of an untrusted companion is read
        check_trusted(signer, trusted_keys, "ExecuTorch companion")
    header, first = _header(body, what)
    if header.get("architecture") != architecture:
        raise BundleError(f"{what}: made for {header.get('architecture')!r}, the bundle is {architecture!r}")
    max_batch = header.get("max_batch")
    if type(max_batch) is not int or not 1 <= max_batch <= MAX_BATCH_LIMIT:
        raise BundleError(f"{what}: max_batch must be an integer in [1, {MAX_BATCH_LIMIT}], got {max_batch!r}")
    program = _section(body, header.get("program"), first, "program", what)
    slots = _slots(header.get("slots"), shapes, _segment_data(program, what), what)
    _check_indices(program, slots, shapes, what)
    return Companion(program, slots, max_batch, signer)


def _unsigned_part(data: bytes, what: str) -> tuple[bytes | memoryview, Signer | None]:
    """(the companion without its signature trailer, who signed it): version 2 is unsigned; a version-3
    signature is verified over the prefix and the header before anything else reads them."""
    if len(data) < PREFIX.size:
        raise BundleError(f"{what}: truncated ({len(data)} bytes)")
    magic, version, header_size = PREFIX.unpack_from(data)
    if magic != MAGIC:
        raise BundleError(f"{what}: not an ExecuTorch companion (magic {magic!r})")
    if version == FORMAT_VERSION:
        return data, None
    if version != SIGNED_VERSION:
        raise BundleError(f"{what}: format version {version}, this SDK reads versions {FORMAT_VERSION} and "
                          f"{SIGNED_VERSION}: export it again")
    body = memoryview(data)[:max(0, len(data) - TRAILER.size)]
    if len(data) < PREFIX.size + TRAILER.size or header_size > min(MAX_HEADER_BYTES, len(body) - PREFIX.size):
        raise BundleError(f"{what}: header of {header_size} bytes does not fit")
    signer = verify_trailer(bytes(body[:PREFIX.size + header_size]), bytes(data[len(body):]), COMPANION_DOMAIN,
                            "ExecuTorch companion")
    return body, signer


def _header(data: bytes | memoryview, what: str) -> tuple[dict, int]:
    """(the JSON header, the first byte after it) of a companion without its trailer."""
    _, _, header_size = PREFIX.unpack_from(data)
    if header_size > min(MAX_HEADER_BYTES, len(data) - PREFIX.size):
        raise BundleError(f"{what}: header of {header_size} bytes does not fit")
    try:
        header = strict_json.loads(data[PREFIX.size:PREFIX.size + header_size], what, max_depth=HEADER_DEPTH)
    except ValueError:
        raise BundleError(f"{what}: the header is not JSON") from None
    if not isinstance(header, dict):
        raise BundleError(f"{what}: the header is not a JSON object")
    return header, PREFIX.size + header_size


def _check_indices(program: bytes, slots: dict[str, Slot], shapes: dict[str, tuple[int, ...]], what: str) -> None:
    """Each slot holds what the exporter left there: its parameter's element indices (1, 2, ... counted over
    the parameters in the bundle's backbone order, `export/executorch_program.py`) in the slot's layout. The
    program's checksum sits in the header it would vouch for, so this is what shows a header whose offsets
    or axes were changed (a digit: weights written elsewhere, silently) or a program not written for it."""
    first = 1
    for name, shape in shapes.items():
        slot, size = slots[name], math.prod(shape)
        stored = np.frombuffer(program, np.float32, size, slot.offset)
        expected = np.arange(first, first + size, dtype=np.float32).reshape(shape).transpose(slot.axes).reshape(-1)
        if not np.array_equal(stored, expected):
            raise BundleError(f"{what}: slot {name!r} does not hold that parameter as exported: the header does "
                              "not describe this program (damaged, or edited)")
        first += size


def _section(data: bytes, entry: object, first: int, name: str, what: str) -> bytes:
    fields = entry if isinstance(entry, dict) else {}
    offset, size, digest = fields.get("offset"), fields.get("size"), fields.get("sha256")
    if type(offset) is not int or type(size) is not int or not isinstance(digest, str):
        raise BundleError(f"{what}: {name} needs integer offset and size and a sha256")
    if not first <= offset <= len(data) - size or size <= 0:
        raise BundleError(f"{what}: {name} ({size} bytes at {offset}) is outside the file ({len(data)} bytes)")
    if offset + size != len(data):   # nothing unread follows it: a trailer must be a signature's, checked
        raise BundleError(f"{what}: {len(data) - offset - size} bytes follow the {name} (damaged, or a signed "
                          "companion's version changed)")
    section = bytes(data[offset:offset + size])
    if hashlib.sha256(section).hexdigest() != digest:
        raise BundleError(f"{what}: {name} does not match its sha256 (damaged)")
    return section


def _segment_data(program: bytes, what: str) -> tuple[int, int]:
    """[start, stop) of the program's segment data (after its flatbuffer), where its weights are."""
    if len(program) < PTE_HEADER_AT + PTE_HEADER.size:
        raise BundleError(f"{what}: the program is not an ExecuTorch program (too short)")
    magic, length, flatbuffer_size, base, size = PTE_HEADER.unpack_from(program, PTE_HEADER_AT)
    if magic != PTE_MAGIC or length < PTE_HEADER.size or not flatbuffer_size <= base <= len(program) - size:
        raise BundleError(f"{what}: the program is not an ExecuTorch program with segments of this version")
    return base, base + size


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
        if not isinstance(axes, list) or any(type(a) is not int for a in axes) or axes not in layouts:
            raise BundleError(f"{what}: slot {name!r}: axes {axes!r} is not a layout the SDK writes")
        nbytes = 4 * math.prod(shape)
        if type(offset) is not int or offset % 4 or not segments[0] <= offset <= segments[1] - nbytes:
            raise BundleError(f"{what}: slot {name!r} ({nbytes} bytes at {offset!r}) is outside the program's "
                              "segment data")
        slots[name] = Slot(offset, tuple(axes))
        spans.append((offset, offset + nbytes, name))
    spans.sort()
    for (_, stop, a), (start, _, b) in zip(spans, spans[1:], strict=False):
        if start < stop:
            raise BundleError(f"{what}: slots {a!r} and {b!r} overlap (two parameters would share weights)")
    return slots

