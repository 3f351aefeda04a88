"""ExecuTorch as the engine (sdk.engines.executorch) and its companion file (sdk.engines.xnnpack_program)."""

import json
import os

import numpy as np
import pytest

import sdk
from export.golden import hostile_companions
from sdk.engines.xnnpack_program import PREFIX, companion_bytes, companion_target, parse_companion, read_companion
from sdk.errors import BundleError, SdkError

pytest.importorskip("executorch")


@pytest.fixture(scope="module")
def companion(tiny_companion):
    return tiny_companion


@pytest.fixture(scope="module")
def engines(tiny_bundle, companion):
    return sdk.load(tiny_bundle), sdk.load(tiny_bundle, engine="executorch", program=companion)


def test_executorch_gives_the_onnxruntime_engines_logits(engines):
    reference, executorch = engines
    assert executorch.engine.route == "executorch"
    images = np.random.default_rng(0).integers(0, 255, (19, 32, 32, 3), dtype=np.uint8)  # > max_batch: in pieces
    cases = [lambda b: b.personalize("round shapes"), lambda b: b.personalize(b.classes[:4]), lambda b: b.generic(),
             lambda b: b.personalize(b.classes[:1])]   # one class: it or anything else (sdk.engines.rest)
    for make in cases:
        a, b = make(reference), make(executorch)
        assert a.classes == b.classes
        np.testing.assert_allclose(b.logits(images), a.logits(images), atol=1e-4 * (np.abs(a.logits(images)).max() + 1))
        assert {"fuse_fold", "session"} <= set(b.timings)


def test_adapt_runs_on_the_executorch_engine_as_on_onnxruntime(engines):
    reference, executorch = engines
    images = np.random.default_rng(1).integers(0, 255, (8, 32, 32, 3), dtype=np.uint8)
    a, b = reference.generic().adapt(images, min_images=1), executorch.generic().adapt(images, min_images=1)
    np.testing.assert_array_equal(a.pseudo_label_counts, b.pseudo_label_counts)
    assert a.classes == b.classes


def test_every_parameter_has_a_slot_and_3x3_convs_are_channels_last(tiny_bundle, companion):
    architecture, shapes = companion_target(sdk.load(tiny_bundle).bundle)
    parsed = read_companion(companion, architecture, shapes)
    assert set(parsed.slots) == set(shapes)
    convs = [n for n, s in shapes.items() if len(s) == 4 and s[2] > 1]
    assert {parsed.slots[n].axes for n in convs} == {(0, 2, 3, 1)}  # XNNPACK stores 3x3 convs channels-last


def test_hostile_companions_fail_with_bundle_error(tiny_bundle, companion):
    architecture, shapes = companion_target(sdk.load(tiny_bundle).bundle)
    raw = companion.read_bytes()
    assert parse_companion(raw, architecture, shapes).slots
    seen = []
    for what, data in hostile_companions(raw, shapes):
        with pytest.raises(BundleError) as error:
            parse_companion(data, architecture, shapes)
        seen.append(what)
        if what == "version 1":
            assert "version 1" in str(error.value) and "export it again" in str(error.value)
        if what in ("slots swapped", "conv read unpermuted", "weights edited, checksum redone"):
            assert "does not hold that parameter as exported" in str(error.value)   # only the indices show it
    assert len(seen) == 24


def test_a_program_executorch_cannot_load_is_a_bundle_error(tiny_bundle, companion, tmp_path):
    raw = companion.read_bytes()
    _, _, size = PREFIX.unpack_from(raw)
    header = json.loads(raw[PREFIX.size:PREFIX.size + size])
    program = bytearray(raw[header["program"]["offset"]:][:header["program"]["size"]])
    program[4:8] = b"XX99"  # the extended header (and so the slots) still check out; ExecuTorch refuses it
    base = {k: v for k, v in header.items() if k != "program"}
    bad = tmp_path / "bad.xnnpack"
    bad.write_bytes(companion_bytes(base, bytes(program)))
    with pytest.raises(BundleError, match="failed in a probe process"):   # refused at load (engines.companion_check)
        sdk.load(tiny_bundle, engine="executorch", program=bad)


def test_a_max_batch_above_the_programs_is_a_bundle_error_at_predict(tiny_bundle, companion, tmp_path):
    raw = companion.read_bytes()
    tampered = tmp_path / "mb.xnnpack"
    tampered.write_bytes(raw.replace(b'"max_batch":8', b'"max_batch":9', 1))   # in range, above the program's 8
    model = sdk.load(tiny_bundle, engine="executorch", program=tampered).generic()
    with pytest.raises(BundleError, match="failed to run"):   # was ExecuTorch's own RuntimeError
        model.predict_proba(np.zeros((12, 32, 32, 3), np.uint8))


def test_engine_choice_errors_are_typed(tiny_bundle, tmp_path):
    with pytest.raises(SdkError, match="engine must be one of"):
        sdk.load(tiny_bundle, engine="tflite")
    with pytest.raises(SdkError, match="needs engine='executorch'"):
        sdk.load(tiny_bundle, program=tmp_path / "x.xnnpack")
    with pytest.raises(BundleError, match="python -m export executorch"):
        sdk.load(tiny_bundle, engine="executorch", program=tmp_path / "missing.xnnpack")
    os.mkfifo(tmp_path / "fifo.xnnpack")   # opened without blocking, then refused (a plain open hung here)
    with pytest.raises(BundleError, match="not a regular file"):
        sdk.load(tiny_bundle, engine="executorch", program=tmp_path / "fifo.xnnpack")


@pytest.fixture(scope="module")
def signed_pair(tiny_bundle, companion, tmp_path_factory):
    """The tiny bundle and its companion, both signed by one key (companion version 3), side by side."""
    from export.sign import sign_bundle, sign_companion_file
    from sdk.format.signing import SigningKey

    folder = tmp_path_factory.mktemp("signed_pair")
    key, other = SigningKey.from_seed(bytes(range(32))), SigningKey.from_seed(bytes(range(32, 64)))
    bundle = folder / "tiny.taper"
    sign_bundle(tiny_bundle, key, bundle)
    program = folder / "tiny.taper.xnnpack"
    program.write_bytes(companion.read_bytes())
    assert sign_companion_file(program, key).key_id == key.key_id   # checked against tiny.taper beside it
    return bundle, program, key, other


def test_a_signed_companion_loads_for_its_key_and_is_refused_otherwise(signed_pair, companion):
    bundle, program, key, other = signed_pair
    raw = program.read_bytes()
    unsigned = companion.read_bytes()
    assert raw[8] == 3 and raw[:8] + raw[9:len(unsigned)] == unsigned[:8] + unsigned[9:]  # version + trailer only
    assert len(raw) == len(unsigned) + 128
    architecture, shapes = companion_target(sdk.load(bundle).bundle)
    with pytest.raises(BundleError, match="bytes follow the program"):   # nothing unread after the program
        parse_companion(unsigned + bytes(16), architecture, shapes)
    loaded = sdk.load(bundle, engine="executorch", program=program, trusted_keys=[key.public_key])
    reference = sdk.load(bundle, engine="executorch", program=companion)   # the same program, unsigned
    images = np.random.default_rng(1).integers(0, 255, (4, 32, 32, 3), dtype=np.uint8)
    np.testing.assert_array_equal(loaded.personalize("round shapes").predict_proba(images),
                                  reference.personalize("round shapes").predict_proba(images))
    with pytest.raises(BundleError, match="unsigned ExecuTorch companion"):
        sdk.load(bundle, engine="executorch", program=companion, trusted_keys=[key.public_key])
    from sdk.engines.xnnpack_program import sign_companion

    signed_by_other = program.with_name("other.xnnpack")
    signed_by_other.write_bytes(sign_companion(raw, other))
    with pytest.raises(BundleError, match="unknown key"):   # the key the app trusts signed the bundle, not this
        sdk.load(bundle, engine="executorch", program=signed_by_other, trusted_keys=[key.public_key])


def test_a_flipped_bit_in_a_signed_companion_is_refused_with_or_without_trusted_keys(signed_pair, tmp_path):
    bundle, program, key, _ = signed_pair
    raw = program.read_bytes()
    _, _, size = PREFIX.unpack_from(raw)
    header = json.loads(raw[PREFIX.size:PREFIX.size + size])
    start, length = header["program"]["offset"], header["program"]["size"]
    positions = [9, 14, PREFIX.size + 3, PREFIX.size + size - 2, start + 8, start + length // 2,
                 start + length - 1, *(len(raw) - 128 + i for i in (0, 8, 13, 20, 60, 127))]
    architecture, shapes = companion_target(sdk.load(bundle).bundle)
    for position in positions:
        damaged = bytearray(raw)
        damaged[position] ^= 0x04
        for trusted in (None, frozenset([key.public_key])):
            with pytest.raises(BundleError):
                parse_companion(bytes(damaged), architecture, shapes, trusted_keys=trusted)


def test_a_re_signed_program_edit_is_refused_with_trusted_keys(signed_pair, companion):
    """What the format alone cannot catch (issue 49): the program's operators edited and its SHA-256 redone
    in the header. Unsigned it still reaches ExecuTorch; with trusted_keys it is refused before parsing."""
    bundle, _, key, _ = signed_pair
    raw = companion.read_bytes()
    _, _, size = PREFIX.unpack_from(raw)
    header = json.loads(raw[PREFIX.size:PREFIX.size + size])
    program = bytearray(raw[header["program"]["offset"]:][:header["program"]["size"]])
    program[200] ^= 0x01                  # in the flatbuffer, before the weights: the slots still check out
    forged = companion_bytes({k: v for k, v in header.items() if k != "program"}, bytes(program))
    architecture, shapes = companion_target(sdk.load(bundle).bundle)
    assert parse_companion(forged, architecture, shapes).signer is None      # the format alone lets it through
    with pytest.raises(BundleError, match="unsigned ExecuTorch companion"):
        parse_companion(forged, architecture, shapes, trusted_keys=frozenset([key.public_key]))


def test_export_sign_cli_signs_a_companion_checked_against_its_bundle(signed_pair, companion, tiny_bundle,
                                                                       tmp_path, capsys):
    from export.__main__ import main as export_main
    from sdk.format.signing import generate_key

    key = generate_key(tmp_path / "k.key")
    copy = tmp_path / "tiny.taper.xnnpack"
    copy.write_bytes(companion.read_bytes())
    assert export_main(["sign", str(copy), "--key", str(tmp_path / "k.key")]) == 2   # no bundle beside it
    assert "tiny.taper" in capsys.readouterr().err and copy.read_bytes()[8] == 2
    assert export_main(["sign", str(copy), "--key", str(tmp_path / "k.key"), "--for-bundle", str(tiny_bundle)]) == 0
    assert key.key_id in capsys.readouterr().out
    loaded = sdk.load(tiny_bundle, engine="executorch", program=copy)
    assert loaded.engine.route == "executorch"
    wrong = tmp_path / "wrong.xnnpack"   # a companion is refused for a bundle of another architecture
    wrong.write_bytes(companion.read_bytes().replace(b'"width":0.25', b'"width":0.5', 1))
    assert export_main(["sign", str(wrong), "--key", str(tmp_path / "k.key"), "--for-bundle", str(tiny_bundle),
                        "--out", str(tmp_path / "never.xnnpack")]) == 2
    assert not (tmp_path / "never.xnnpack").exists()
