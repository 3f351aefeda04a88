import json
import struct

import numpy as np
import pytest

from sdk.format.tensorfile import TensorFileError, load_tensors, read_tensors, save_tensors


def sample():
    rng = np.random.default_rng(0)
    return {"w": rng.standard_normal((3, 4)).astype(np.float32), "ids": np.arange(5, dtype=np.int64),
            "q": np.array([-127, 0, 127], dtype=np.int8), "empty": np.zeros((0, 3), np.float16)}


def test_round_trip_keeps_values_dtypes_and_metadata(tmp_path):
    path = tmp_path / "t.safetensors"
    save_tensors(path, sample(), metadata={"run": "x"})
    loaded = load_tensors(path)
    for name, array in sample().items():
        assert loaded[name].dtype == array.dtype and np.array_equal(loaded[name], array)
    _, meta = read_tensors(path.read_bytes())
    assert meta == {"run": "x"}


def test_data_section_is_aligned_for_memory_mapping(tmp_path):
    path = tmp_path / "t.safetensors"
    save_tensors(path, sample())
    (n,) = struct.unpack("<Q", path.read_bytes()[:8])
    assert (8 + n) % 64 == 0


def test_files_written_by_safetensors_library_are_read(tmp_path):
    # The format is the public safetensors layout: the reference implementation's files load.
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    safetensors_numpy.save_file(sample(), str(tmp_path / "ref.safetensors"))
    loaded = load_tensors(tmp_path / "ref.safetensors")
    assert np.array_equal(loaded["w"], sample()["w"])


def corrupt(blob: bytes, header: dict) -> bytes:
    raw = json.dumps(header).encode()
    (n,) = struct.unpack("<Q", blob[:8])
    return struct.pack("<Q", len(raw)) + raw + blob[8 + n:]


@pytest.mark.parametrize("edit", [
    lambda h: h["w"].update(dtype="F99"),
    lambda h: h["w"].update(shape=[4, 4]),
    lambda h: h["w"].update(data_offsets=[0, 10**9]),
    lambda h: h["w"].update(data_offsets=[8, 56]),  # overlaps the bytes of "ids"
    lambda h: h["w"].update(shape=[-1, 12]),
    lambda h: h["w"].update(extra=1),
    lambda h: h.update(__metadata__={"a": 1}),
])
def test_hostile_headers_raise_typed_errors(tmp_path, edit):
    path = tmp_path / "t.safetensors"
    save_tensors(path, sample())
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    edit(header)
    with pytest.raises(TensorFileError):
        read_tensors(corrupt(blob, header))


def test_truncation_and_garbage_raise_typed_errors(tmp_path):
    path = tmp_path / "t.safetensors"
    save_tensors(path, sample())
    blob = path.read_bytes()
    for bad in (blob[:4], blob[:20], blob[:-1], b"\xff" * 8 + blob[8:], b"\x10\x00\x00\x00\x00\x00\x00\x00{{{{"):
        with pytest.raises(TensorFileError):
            read_tensors(bad)


def test_failed_write_leaves_no_file(tmp_path):
    # complex64 is refused after the temp file was created: the temp file must be removed.
    with pytest.raises(TensorFileError):
        save_tensors(tmp_path / "t.safetensors", {"x": np.zeros(2, np.complex64)})
    assert list(tmp_path.iterdir()) == []


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(TensorFileError, match="no such"):
        load_tensors(tmp_path / "nope.safetensors")
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(TensorFileError, match="empty"):
        load_tensors(tmp_path / "empty")
