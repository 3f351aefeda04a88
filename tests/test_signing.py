"""Signed bundles (format version 6, sdk/format/signing.py, export/sign.py): keys, the CLI, `trusted_keys`, and
a flipped bit anywhere in the signed range. The Java reader's agreement is in tests/test_android_core.py."""

import pickle
import stat

import numpy as np
import pytest

import sdk
from export.__main__ import main as export_main
from export.bundle_edits import without_concepts
from export.sign import sign_bundle
from sdk.errors import BundleError, SdkError
from sdk.format.bundle import Bundle, bundle_members, write_bundle
from sdk.format.signing import SIGNED_SINCE, TRAILER, SigningKey, generate_key


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    folder = tmp_path_factory.mktemp("keys")
    return generate_key(folder / "release.key"), generate_key(folder / "next.key"), folder


@pytest.fixture(scope="module")
def signed(tiny_bundle, keys, tmp_path_factory):
    out = tmp_path_factory.mktemp("signed") / "signed.taper"
    sign_bundle(tiny_bundle, keys[0], out)
    return out


def test_keygen_writes_a_private_key_only_its_owner_reads_and_never_overwrites(tmp_path, capsys):
    assert export_main(["keygen", "--out", str(tmp_path / "k" / "release.key")]) == 0
    private, public = tmp_path / "k" / "release.key", tmp_path / "k" / "release.key.pub"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert len(public.read_text().strip()) == 64
    key = SigningKey.load(private)
    assert key.public_key.hex() == public.read_text().strip()
    before = private.read_bytes()
    assert export_main(["keygen", "--out", str(private)]) == 2
    assert "never overwritten" in capsys.readouterr().err
    assert private.read_bytes() == before


def test_a_private_key_never_shows_in_a_repr_a_message_or_a_pickle(keys, tmp_path):
    key = keys[0]
    secret_lines = [line for line in key.pem().decode().splitlines() if not line.startswith("-----")]
    for text in (repr(key), str(key)):
        assert key.key_id in text and all(line not in text for line in secret_lines)
    with pytest.raises(TypeError):
        pickle.dumps(key)
    not_a_key = tmp_path / "not.key"
    not_a_key.write_text("-----BEGIN PRIVATE KEY-----\nc2VjcmV0IHN0dWZm\n-----END PRIVATE KEY-----\n")
    with pytest.raises(SdkError) as info:
        SigningKey.load(not_a_key)
    assert "c2VjcmV0" not in str(info.value)


def test_signing_keeps_every_member_and_readers_see_the_signer(tiny_bundle, signed, keys):
    original, signed_manifest = bundle_members(tiny_bundle.read_bytes()), bundle_members(signed.read_bytes())
    assert original[1] == signed_manifest[1]                     # the members' bytes are untouched
    assert original[0].version == 5 and signed_manifest[0].version == SIGNED_SINCE
    bundle = sdk.load(signed)
    assert bundle.signer.key_id == keys[0].key_id and bundle.signer.public_key == keys[0].public_key.hex()
    assert f"signed by key {keys[0].key_id}" in repr(bundle.bundle)
    assert sdk.load(tiny_bundle).signer is None
    a = sdk.load(tiny_bundle).personalize("blue, round shapes")
    b = bundle.personalize("blue, round shapes")
    x = np.random.default_rng(0).integers(0, 255, (2, 32, 32, 3), dtype=np.uint8)
    assert np.array_equal(a.logits(x), b.logits(x))


@pytest.mark.parametrize("form", ["hex", "bytes", "path", "pub string"])
def test_trusted_keys_in_every_form(signed, keys, form):
    key, folder = keys[0], keys[2]
    value = {"hex": key.public_key.hex().upper(), "bytes": key.public_key, "path": folder / "release.key.pub",
             "pub string": str(folder / "release.key.pub")}[form]
    assert sdk.load(signed, trusted_keys=[value]).signer.key_id == key.key_id


@pytest.mark.parametrize("value, message", [
    ("ab" * 32, "a list of keys"), ([], "empty"), (["ab" * 31], "64 hex digits"), ([b"short"], "64 hex digits"),
    ([123], "64 hex digits"), (["missing.pub"], "cannot read"),
])
def test_malformed_trusted_keys_are_refused(signed, value, message):
    with pytest.raises(SdkError, match=message):
        sdk.load(signed, trusted_keys=value)


def test_trusted_keys_refuse_unsigned_unknown_and_accept_a_rotation(tiny_bundle, signed, keys):
    current, upcoming, _ = keys
    with pytest.raises(BundleError, match="unsigned bundle"):
        sdk.load(tiny_bundle, trusted_keys=[current.public_key])
    with pytest.raises(BundleError, match=f"unknown key \\({current.key_id}\\)"):
        sdk.load(signed, trusted_keys=[upcoming.public_key])
    # Rotation: an app that trusts both keys loads bundles signed with either.
    assert sdk.load(signed, trusted_keys=[upcoming.public_key, current.public_key]).signer.key_id == current.key_id


def test_a_flipped_bit_anywhere_in_the_signed_range_is_refused(signed, keys, tmp_path):
    """Positions spread over the header, the manifest, every member and the trailer; `verify=False` too:
    trusted_keys always checks the members' SHA-256."""
    blob = signed.read_bytes()
    manifest, _ = bundle_members(blob)
    positions = [8, 20, 40] + [64 + manifest_offset for manifest_offset in (0, 100)]
    for entry in manifest.members.values():
        if entry.size:
            positions += [entry.offset, entry.offset + entry.size // 2, entry.offset + entry.size - 1]
    positions += [len(blob) - TRAILER.size + i for i in (0, 9, 20, 60, 127)]
    for i, position in enumerate(positions):
        damaged = bytearray(blob)
        damaged[position] ^= 0x10
        path = tmp_path / f"d{i}.taper"
        path.write_bytes(bytes(damaged))
        with pytest.raises(BundleError):
            sdk.load(path, verify=False, trusted_keys=[keys[0].public_key])


def test_only_a_version_5_bundle_is_signed(tiny_run, keys, tmp_path):
    from export.bundle import run_contents

    manifest, members = run_contents(tiny_run, "taper", "fp32", True, True)
    old = write_bundle(tmp_path / "v3.taper", manifest, without_concepts(members))
    with pytest.raises(BundleError, match="only a version-5 bundle"):
        sign_bundle(old, keys[0], tmp_path / "out.taper")
    assert not (tmp_path / "out.taper").exists()


def test_export_sign_cli_in_place_and_at_export(tiny_bundle, tiny_run, keys, tmp_path, capsys):
    copy = tmp_path / "copy.taper"
    copy.write_bytes(tiny_bundle.read_bytes())
    key_path = keys[2] / "release.key"
    assert export_main(["sign", str(copy), "--key", str(key_path)]) == 0
    assert keys[0].key_id in capsys.readouterr().out
    assert Bundle.open(copy).signer.key_id == keys[0].key_id
    out = tmp_path / "exported.taper"
    assert export_main(["bundle", str(tiny_run), "--out", str(out), "--sign", str(key_path)]) == 0
    assert sdk.load(out, trusted_keys=[key_path.with_suffix(".key.pub")]).signer.key_id == keys[0].key_id
    missing = tmp_path / "never.taper"
    assert export_main(["bundle", str(tiny_run), "--out", str(missing), "--sign", str(tmp_path / "nokey")]) == 2
    assert not missing.exists() and not any(p.name.startswith(".never") for p in tmp_path.iterdir())


def test_the_cli_requires_a_trusted_key_when_given_one(signed, keys, capsys):
    import json

    from sdk.__main__ import main

    public = str(keys[2] / "release.key.pub")
    assert main(["personalize", str(signed), "blue, round shapes", "--trusted-key", public, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["signer"] == keys[0].key_id
    assert main(["personalize", str(signed), "blue, round shapes", "--trusted-key", keys[1].public_key.hex()]) == 2
    assert "unknown key" in capsys.readouterr().err


def test_an_unsigned_bundle_loads_without_the_signature_library(tiny_bundle, signed):
    import subprocess
    import sys

    code = ("import sys, sdk; sdk.load(sys.argv[1]); assert 'cryptography' not in sys.modules; "
            "sdk.load(sys.argv[2]); assert 'cryptography' in sys.modules")
    subprocess.run([sys.executable, "-c", code, str(tiny_bundle), str(signed)], check=True)
