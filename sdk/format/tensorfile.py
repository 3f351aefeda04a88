"""Tensors as plain dicts of numpy arrays, stored in the safetensors layout.

Layout: 8-byte little-endian header length N, N bytes of JSON header, then the raw data.
The header maps each name to {"dtype", "shape", "data_offsets": [begin, end]} relative to
the data section, plus an optional "__metadata__" dict of strings. No pickle, nothing executed.

>>> import numpy as np, tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "w.safetensors")
>>> save_tensors(path, {"w": np.ones((2, 3), np.float32)}, metadata={"run": "demo"})
>>> load_tensors(path)["w"].shape
(2, 3)
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from sdk.errors import TensorFileError
from sdk.format import strict_json
from sdk.media.files import atomic_file

DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}
MAX_HEADER_BYTES = 64 * 1024 * 1024  # a header this large is hostile, not a model
HEADER_DEPTH = 8  # a header nests 3 deep ({name: {"shape": [...]}}); the Java reader has the same bound
ALIGN = 64  # data section starts on a 64-byte boundary so memory maps are aligned


def encode_header(tensors: Mapping[str, np.ndarray], metadata: Mapping[str, str] | None = None) -> bytes:
    """The header bytes (length prefix included) for `tensors` laid out in the given order."""
    header: dict[str, object] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    offset = 0
    for name, array in tensors.items():
        dtype = np.dtype(array.dtype).newbyteorder("<") if array.dtype.itemsize > 1 else array.dtype
        if dtype not in DTYPE_NAMES:
            raise TensorFileError(f"tensor {name!r}: unsupported dtype {array.dtype}")
        header[name] = {
            "dtype": DTYPE_NAMES[dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + array.nbytes],
        }
        offset += array.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-(8 + len(raw)) % ALIGN)  # pad with spaces: still valid JSON
    return struct.pack("<Q", len(raw)) + raw


def save_tensors(path: str | os.PathLike, tensors: Mapping[str, np.ndarray],
                 metadata: Mapping[str, str] | None = None) -> None:
    """Write `tensors` atomically: a temp file in the same folder, then a rename."""
    arrays = {name: np.ascontiguousarray(a) for name, a in tensors.items()}
    with atomic_file(path) as f:
        f.write(encode_header(arrays, metadata))
        for array in arrays.values():
            f.write(array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes())


def parse_header(buffer: bytes | memoryview | np.ndarray, total_size: int) -> tuple[dict, dict, int]:
    """Validate and decode a header. Returns (entries, metadata, data_start).

    `buffer` must hold at least the header; `total_size` is the size of the whole tensor file,
    against which every offset is checked.
    """
    if total_size < 8:
        raise TensorFileError(f"tensor file too short ({total_size} bytes)")
    (n,) = struct.unpack("<Q", bytes(buffer[:8]))
    if n > MAX_HEADER_BYTES or 8 + n > total_size:
        raise TensorFileError(f"header length {n} does not fit in a file of {total_size} bytes")
    try:
        header = strict_json.loads(bytes(buffer[8:8 + n]), "header", max_depth=HEADER_DEPTH)
    except ValueError as e:
        raise TensorFileError(str(e)) from None
    if not isinstance(header, dict):
        raise TensorFileError("header is not a JSON object")
    metadata = header.pop("__metadata__", {}) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise TensorFileError("__metadata__ must map strings to strings")
    data_start, data_size = 8 + n, total_size - 8 - n
    entries, spans = {}, []
    for name, info in header.items():
        entries[name] = _validate_entry(name, info, data_size)
        spans.append(tuple(info["data_offsets"]))
    spans.sort()
    for (_, e0), (b1, _) in zip(spans, spans[1:], strict=False):
        if b1 < e0:
            raise TensorFileError("tensor data ranges overlap")
    return entries, metadata, data_start


def _validate_entry(name: str, info: object, data_size: int) -> tuple[np.dtype, tuple[int, ...], int, int]:
    if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
        raise TensorFileError(f"tensor {name!r}: entry must have exactly dtype, shape, data_offsets")
    dtype = DTYPES.get(info["dtype"]) if isinstance(info["dtype"], str) else None
    if dtype is None:
        raise TensorFileError(f"tensor {name!r}: unknown dtype {info['dtype']!r}")
    shape, offsets = info["shape"], info["data_offsets"]
    if not (isinstance(shape, list) and all(type(d) is int and 0 <= d < 2**40 for d in shape)):
        raise TensorFileError(f"tensor {name!r}: bad shape {shape!r}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)):
        raise TensorFileError(f"tensor {name!r}: bad data_offsets {offsets!r}")
    begin, end = offsets
    if not 0 <= begin <= end <= data_size:
        raise TensorFileError(f"tensor {name!r}: data [{begin}, {end}) outside the data section ({data_size} B)")
    if math.prod(shape) * dtype.itemsize != end - begin:  # Python ints: a product cannot wrap around
        raise TensorFileError(f"tensor {name!r}: {end - begin} bytes do not match shape {shape} {dtype}")
    return dtype, tuple(shape), begin, end


def read_tensors(buffer: bytes | memoryview | np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Tensors and metadata from an in-memory or memory-mapped buffer (zero-copy, read-only views)."""
    data = np.frombuffer(buffer, dtype=np.uint8) if not isinstance(buffer, np.ndarray) else buffer
    entries, metadata, start = parse_header(data, data.size)
    tensors = {}
    for name, (dtype, shape, begin, end) in entries.items():
        tensors[name] = data[start + begin:start + end].view(dtype).reshape(shape)
    return tensors, metadata


def load_tensors(path: str | os.PathLike, mmap: bool = True) -> dict[str, np.ndarray]:
    """Tensors of a file, memory-mapped by default (pages are read only when used)."""
    path = Path(path)
    if not path.is_file():
        raise TensorFileError(f"{path}: no such tensor file")
    if path.stat().st_size == 0:
        raise TensorFileError(f"{path}: empty file")
    data = np.memmap(path, dtype=np.uint8, mode="r") if mmap else np.fromfile(path, dtype=np.uint8)
    try:
        return read_tensors(data)[0]
    except TensorFileError as e:
        raise TensorFileError(f"{path}: {e}") from None
