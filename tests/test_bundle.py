import json
import struct

import numpy as np
import pytest

from export.bundle import run_contents, write_bundle
from sdk.bundle import HEADER, MEMBERS, Bundle, parse_manifest
from sdk.errors import BundleError


def test_bundle_round_trip(tiny_bundle, tiny_run):
    bundle = Bundle.open(tiny_bundle)
    m = bundle.manifest
    assert set(m["members"]) == set(MEMBERS) and m["num_bases"] == 3
    assert [c.name for c in bundle.classes][:2] == ["red disc", "green disc"]
    assert set(bundle.supercategories) == {"round_shapes", "angular_shapes", "textures"}
    assert all(isinstance(bundle.bases[f"block{b}"], np.ndarray) for b in range(4))
    assert not bundle.bases["block0"].flags.writeable  # a view into the mapped file, not a copy
    from trainer.checkpoints import load_state

    state = load_state(tiny_run / "stage3" / "model.safetensors")
    assert np.array_equal(bundle.bases["block2"][:, : state["bank.params2"].shape[1]], state["bank.params2"].numpy())
    assert b"Apache" in bundle.member_bytes("NOTICE")


def test_writing_is_atomic(tiny_run, tmp_path):
    fields, members = run_contents(tiny_run)
    members["classes.json"] = object()  # not bytes: the write fails half-way
    with pytest.raises(TypeError):
        write_bundle(tmp_path / "x.taper", fields, members)
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def small_bundle(tiny_run, tmp_path_factory) -> bytes:
    """The tiny bundle with a stand-in text encoder (not read at load time), so fuzzing is fast."""
    fields, members = run_contents(tiny_run)
    members["text_encoder.onnx"], members["tokenizer.json"] = b"stand-in", b"{}"
    return write_bundle(tmp_path_factory.mktemp("fuzz") / "small.taper", fields, members).read_bytes()


def load_bytes(blob: bytes) -> None:
    Bundle.from_buffer(np.frombuffer(blob, np.uint8))


def manifest_of(blob: bytes) -> tuple[dict, int]:
    (length,) = struct.unpack("<Q", blob[16:24])
    return json.loads(blob[24:24 + length]), length


def with_manifest(blob: bytes, manifest: dict, old_length: int) -> bytes:
    raw = json.dumps(manifest).encode()
    return blob[:16] + struct.pack("<Q", len(raw)) + raw + blob[24 + old_length:]


MANIFEST_EDITS = [
    lambda m: m.update(version=2),
    lambda m: m.pop("members"),
    lambda m: m["members"].pop("bases.safetensors"),
    lambda m: m["members"]["bases.safetensors"].update(offset=m["members"]["bases.safetensors"]["offset"] + 64),
    lambda m: m["members"]["bases.safetensors"].update(size=10**12),
    lambda m: m["members"]["mixer.safetensors"].update(offset=-64),
    lambda m: m["members"]["mixer.safetensors"].update(offset=m["members"]["bases.safetensors"]["offset"]),
    lambda m: m["members"]["NOTICE"].update(sha256="0" * 64),
    lambda m: m["members"]["NOTICE"].update(sha256=None),
    lambda m: m["architecture"].update(num_classes=25),
    lambda m: m["architecture"].update(width=0.3),
    lambda m: m["architecture"].update(num_classes="24"),
    lambda m: m.update(num_bases=4),
    lambda m: m.update(num_bases=10**9),
    lambda m: m["mixer"].update(hidden=255),
    lambda m: m["mixer"].update(layers=1),
    lambda m: m["preprocessing"].update(std=[0, 1, 1]),
    lambda m: m["backbone"].update(layout=None),
    lambda m: m["backbone"]["layout"]["stem.conv1.weight"].update(offset=10**12),
    lambda m: m["backbone"]["layout"]["stem.conv1.bias"].update(shape=[3]),
    lambda m: m["preprocessing"].update(mean={}),
    lambda m: m.update(architecture=[]),
]


def test_every_kind_of_damage_raises_bundle_error(small_bundle):
    load_bytes(small_bundle)  # the undamaged bundle loads
    rng = np.random.default_rng(0)
    manifest, length = manifest_of(small_bundle)
    cases = 0
    for edit in MANIFEST_EDITS:
        m = json.loads(json.dumps(manifest))
        edit(m)
        with pytest.raises(BundleError):
            load_bytes(with_manifest(small_bundle, m, length))
        cases += 1
    for _ in range(1500):  # random byte flips, half of them in the header and manifest
        blob = bytearray(small_bundle)
        limit = 24 + length if rng.random() < 0.5 else len(blob)
        for pos in rng.integers(0, limit, rng.integers(1, 4)):
            blob[pos] ^= int(rng.integers(1, 256))
        try:
            load_bytes(bytes(blob))  # a flip in padding between members is harmless
        except BundleError:
            pass
        cases += 1
    for cut in rng.integers(0, len(small_bundle), 500):
        with pytest.raises(BundleError):
            load_bytes(small_bundle[:cut])
        cases += 1
    for _ in range(500):  # random JSON edits: a value replaced by another type
        m = json.loads(json.dumps(manifest))
        section = m[rng.choice(["architecture", "mixer", "preprocessing", "backbone"])]
        key = rng.choice(sorted(section))
        section[key] = [None, -1, "x", 1.5, {}, [], 10**20][int(rng.integers(7))]
        try:
            load_bytes(with_manifest(small_bundle, m, length))
        except BundleError:
            pass
        cases += 1
    assert cases > 2500


def test_header_checks(small_bundle):
    for blob, match in ((b"", "too short"), (b"NOTABNDL" + small_bundle[8:], "magic"),
                        (small_bundle[:8] + struct.pack("<I", 7) + small_bundle[12:], "version 7"),
                        (small_bundle[:16] + struct.pack("<Q", 2**40) + small_bundle[24:], "manifest length")):
        with pytest.raises(BundleError, match=match):
            parse_manifest(np.frombuffer(blob, np.uint8)) if blob else load_bytes(blob)
    assert HEADER.size == 24


def test_open_names_the_file(tmp_path):
    with pytest.raises(BundleError, match="missing.taper"):
        Bundle.open(tmp_path / "missing.taper")
    (tmp_path / "junk.taper").write_bytes(b"junk" * 100)
    with pytest.raises(BundleError, match="junk.taper.*magic"):
        Bundle.open(tmp_path / "junk.taper")
