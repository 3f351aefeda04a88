"""Issue 63: an unsigned (or untrusted) ExecuTorch companion is run in a probe process before this one's
ExecuTorch reads it (sdk/engines/companion_check.py): a crash, a hang or a failure there, or a program that predicts
differently from its bundle, is a BundleError, and this process lives on."""

import json
import subprocess

import numpy as np
import pytest

import sdk
from sdk.engines import companion_check
from sdk.engines.xnnpack_program import PREFIX, companion_bytes
from sdk.errors import BundleError

pytest.importorskip("executorch")


def _edited(companion, tmp_path, edit) -> object:
    """The companion with its program changed by `edit` and its SHA-256 redone (no key needed)."""
    raw = companion.read_bytes()
    _, _, size = PREFIX.unpack_from(raw)
    header = json.loads(raw[PREFIX.size:PREFIX.size + size])
    program = bytearray(raw[header["program"]["offset"]:][:header["program"]["size"]])
    edit(program)
    path = tmp_path / "edited.xnnpack"
    path.write_bytes(companion_bytes({k: v for k, v in header.items() if k != "program"}, bytes(program)))
    return path


@pytest.fixture(autouse=True)
def fresh_verdicts(monkeypatch):
    monkeypatch.setattr(companion_check, "_verdicts", set())


def test_a_sound_companion_is_probed_once_and_then_trusted(tiny_bundle, tiny_companion, monkeypatch):
    calls = []
    real = companion_check.probe_in_child
    monkeypatch.setattr(companion_check, "probe_in_child", lambda *a, **k: calls.append(1) or real(*a, **k))
    first = sdk.load(tiny_bundle, engine="executorch", program=tiny_companion)
    second = sdk.load(tiny_bundle, engine="executorch", program=tiny_companion)
    assert len(calls) == 1 and first.engine.route == second.engine.route == "executorch"


def test_a_program_that_fails_in_the_probe_is_refused_at_load(tiny_bundle, tiny_companion, tmp_path):
    bad = _edited(tiny_companion, tmp_path, lambda p: p.__setitem__(slice(4, 8), b"XX99"))
    with pytest.raises(BundleError, match="failed in a probe process"):
        sdk.load(tiny_bundle, engine="executorch", program=bad)


@pytest.mark.parametrize("returncode, message", [(-11, "crashed ExecuTorch in a probe process \\(signal 11\\)"),
                                                 (-6, "signal 6")])
def test_a_probe_that_dies_by_a_signal_is_a_bundle_error(returncode, message, monkeypatch):
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, returncode, b"", b""))
    with pytest.raises(BundleError, match=message):
        companion_check.probe_in_child(b"program", np.zeros((1, 3, 8, 8), np.float32))


def test_a_probe_that_hangs_is_a_bundle_error(monkeypatch):
    def hang(*args, **kwargs):
        raise subprocess.TimeoutExpired(args[0], kwargs["timeout"])
    monkeypatch.setattr(subprocess, "run", hang)
    with pytest.raises(BundleError, match="hung ExecuTorch"):
        companion_check.probe_in_child(b"program", np.zeros((1, 3, 8, 8), np.float32), timeout=1)


def test_a_program_that_predicts_otherwise_is_refused(tiny_bundle, tiny_companion, monkeypatch):
    real = companion_check.probe_in_child
    monkeypatch.setattr(companion_check, "probe_in_child", lambda *a, **k: real(*a, **k) * 1.01)
    with pytest.raises(BundleError, match="predicts differently from its bundle"):
        sdk.load(tiny_bundle, engine="executorch", program=tiny_companion)


def test_a_companion_signed_by_a_trusted_key_is_not_probed(tiny_bundle, tiny_companion, tmp_path, monkeypatch):
    from export.sign import sign_bundle, sign_companion_file
    from sdk.format.signing import SigningKey

    key = SigningKey.from_seed(bytes(range(32)))
    bundle = tmp_path / "tiny.taper"
    sign_bundle(tiny_bundle, key, bundle)
    program = tmp_path / "tiny.taper.xnnpack"
    program.write_bytes(tiny_companion.read_bytes())
    sign_companion_file(program, key)
    monkeypatch.setattr(companion_check, "probe_in_child", lambda *a, **k: pytest.fail("probed a trusted program"))
    assert sdk.load(bundle, engine="executorch", trusted_keys=[key.public_key.hex()]).engine.route == "executorch"
    with pytest.raises(pytest.fail.Exception, match="probed a trusted program"):   # without trusted_keys: probed
        sdk.load(bundle, engine="executorch")


def test_a_verdict_is_kept_in_the_device_cache_and_cleared_with_it(tiny_bundle, tiny_companion, tmp_path,
                                                                    monkeypatch):
    from sdk.engines import device_cache

    monkeypatch.setenv("TAPER_DEVICE_CACHE", str(tmp_path / "cache"))
    sdk.load(tiny_bundle, engine="executorch", program=tiny_companion)   # probed, and the verdict kept
    assert len(list((tmp_path / "cache").glob("companion-check-*"))) == 1
    companion_check._verdicts.clear()                                   # as a new process
    monkeypatch.setattr(companion_check, "probe_in_child", lambda *a, **k: pytest.fail("probed again"))
    sdk.load(tiny_bundle, engine="executorch", program=tiny_companion)
    device_cache.clear()
    companion_check._verdicts.clear()
    with pytest.raises(pytest.fail.Exception, match="probed again"):
        sdk.load(tiny_bundle, engine="executorch", program=tiny_companion)
