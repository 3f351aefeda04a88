"""ExecuTorch as the engine (sdk.executorch_engine) and its companion file (sdk.xnnpack_program)."""

import json
import struct

import numpy as np
import pytest

import sdk
from sdk.errors import BundleError, SdkError
from sdk.xnnpack_program import PREFIX, companion_bytes, parse_companion, read_companion

pytest.importorskip("executorch")


@pytest.fixture(scope="module")
def companion(tiny_bundle, tmp_path_factory):
    from export.executorch_program import export_companion

    return export_companion(tiny_bundle, tmp_path_factory.mktemp("xnnpack") / "tiny.taper.xnnpack")


@pytest.fixture(scope="module")
def engines(tiny_bundle, companion):
    return sdk.load(tiny_bundle), sdk.load(tiny_bundle, engine="executorch", program=companion)


def test_executorch_gives_the_onnxruntime_engines_logits(engines):
    reference, executorch = engines
    assert executorch.engine.route == "executorch"
    images = np.random.default_rng(0).integers(0, 255, (19, 32, 32, 3), dtype=np.uint8)  # > max_batch: in pieces
    cases = [lambda b: b.personalize("round shapes"), lambda b: b.personalize(b.classes[:4]), lambda b: b.generic()]
    for make in cases:
        a, b = make(reference), make(executorch)
        assert a.classes == b.classes
        np.testing.assert_allclose(b.logits(images), a.logits(images), atol=1e-4 * (np.abs(a.logits(images)).max() + 1))
        assert {"fuse_fold", "session"} <= set(b.timings)


def test_every_parameter_has_a_slot_and_3x3_convs_are_channels_last(tiny_bundle, companion):
    loaded = sdk.load(tiny_bundle)
    arch = loaded.bundle.manifest.architecture
    shapes = {n: tuple(e["shape"]) for n, e in loaded.bundle.backbone_layout.items()}
    parsed = read_companion(companion, {"stem": arch.stem, "width": arch.width, "input_size": arch.input_size},
                            shapes)
    assert set(parsed.slots) == set(shapes)
    convs = [n for n, s in shapes.items() if len(s) == 4 and s[2] > 1]
    assert {parsed.slots[n].axes for n in convs} == {(0, 2, 3, 1)}  # XNNPACK stores 3x3 convs channels-last


def hostile_variants(raw: bytes):
    """(what, companion bytes) for damaged or hostile companions built from a good one."""
    _, _, size = PREFIX.unpack_from(raw)
    header = json.loads(raw[PREFIX.size:PREFIX.size + size])
    program = raw[header["program"]["offset"]:][:header["program"]["size"]]
    base = {k: v for k, v in header.items() if k != "program"}

    def edited(change, program=program):
        copy = json.loads(json.dumps(base))
        change(copy)
        return companion_bytes(copy, program)

    names = sorted(base["slots"])
    first, second = names[0], names[1]
    yield "truncated", raw[:10]
    yield "magic", b"X" + raw[1:]
    yield "version 1", raw[:8] + struct.pack("<I", 1) + raw[12:]
    yield "not JSON", raw[:PREFIX.size] + b"{" * size + raw[PREFIX.size + size:]
    yield "header too long", raw[:12] + struct.pack("<Q", 1 << 40) + raw[20:]
    yield "damaged program", raw[:-5] + bytes(5)
    yield "other architecture", edited(lambda h: h["architecture"].update(width=0.5))
    yield "max_batch 0", edited(lambda h: h.update(max_batch=0))
    yield "slot missing", edited(lambda h: h["slots"].pop(first))
    yield "unknown slot", edited(lambda h: h["slots"].update(extra=h["slots"][first]))
    yield "shared slot", edited(lambda h: h["slots"][second].update(offset=h["slots"][first]["offset"]))
    yield "misaligned", edited(lambda h: h["slots"][first].update(offset=h["slots"][first]["offset"] + 2))
    yield "in the program's header", edited(lambda h: h["slots"][first].update(offset=0))
    yield "past the end", edited(lambda h: h["slots"][first].update(offset=len(program)))
    yield "negative", edited(lambda h: h["slots"][first].update(offset=-4))
    yield "bad axes", edited(lambda h: h["slots"][first].update(axes=[3, 2, 1, 0]))
    yield "float offset", edited(lambda h: h["slots"][first].update(offset=float(h["slots"][first]["offset"])))
    yield "no segment header", edited(lambda h: None, program=program[:8] + b"xx00" + program[12:])
    yield "segments past the end", edited(lambda h: None, program=program[:32] + struct.pack("<Q", len(program))
                                          + program[40:])
    yield "section outside", raw[:PREFIX.size] + raw[PREFIX.size:].replace(
        f'"size":{header["program"]["size"]}'.encode(), f'"size":{header["program"]["size"] + 10 ** 9}'.encode())


def test_hostile_companions_fail_with_bundle_error(tiny_bundle, companion):
    loaded = sdk.load(tiny_bundle)
    arch = loaded.bundle.manifest.architecture
    architecture = {"stem": arch.stem, "width": arch.width, "input_size": arch.input_size}
    shapes = {n: tuple(e["shape"]) for n, e in loaded.bundle.backbone_layout.items()}
    raw = companion.read_bytes()
    assert parse_companion(raw, architecture, shapes).slots
    seen = []
    for what, data in hostile_variants(raw):
        with pytest.raises(BundleError) as error:
            parse_companion(data, architecture, shapes)
        seen.append(what)
        if what == "version 1":
            assert "version 1" in str(error.value) and "export it again" in str(error.value)
    assert len(seen) == 20


def test_a_program_executorch_cannot_load_is_a_bundle_error(tiny_bundle, companion, tmp_path):
    raw = companion.read_bytes()
    _, _, size = PREFIX.unpack_from(raw)
    header = json.loads(raw[PREFIX.size:PREFIX.size + size])
    program = bytearray(raw[header["program"]["offset"]:][:header["program"]["size"]])
    program[4:8] = b"XX99"  # the extended header (and so the slots) still check out; ExecuTorch refuses it
    base = {k: v for k, v in header.items() if k != "program"}
    bad = tmp_path / "bad.xnnpack"
    bad.write_bytes(companion_bytes(base, bytes(program)))
    bundle = sdk.load(tiny_bundle, engine="executorch", program=bad)
    with pytest.raises(BundleError, match="could not be loaded"):
        bundle.personalize("round shapes")


def test_engine_choice_errors_are_typed(tiny_bundle, tmp_path):
    with pytest.raises(SdkError, match="engine must be one of"):
        sdk.load(tiny_bundle, engine="tflite")
    with pytest.raises(SdkError, match="needs engine='executorch'"):
        sdk.load(tiny_bundle, program=tmp_path / "x.xnnpack")
    with pytest.raises(BundleError, match="python -m export executorch"):
        sdk.load(tiny_bundle, engine="executorch", program=tmp_path / "missing.xnnpack")
