"""Helpers to damage bundles on purpose (tests, export/golden.py and scripts/fuzz_bundle.py): re-sign an
edited manifest so that its checksum passes and the edit itself is what the reader must catch."""

from __future__ import annotations

import hashlib
import json
import struct

from sdk.format.bundle import HEADER

PAD = 4096  # slack in the manifest (a provenance field) so edits keep the members where they are


def manifest_of(blob: bytes) -> tuple[dict, int]:
    (length,) = struct.unpack("<Q", blob[16:24])
    return json.loads(blob[HEADER.size:HEADER.size + length]), length


def with_manifest(blob: bytes, manifest: dict, length: int | None = None) -> bytes:
    """`blob` with `manifest` in place of its own (same length: the pad shrinks), header re-signed."""
    length = manifest_of(blob)[1] if length is None else length
    m = json.loads(json.dumps(manifest))
    if isinstance(m.get("provenance"), dict):
        m["provenance"]["pad"] = ""
    raw = json.dumps(m, separators=(",", ":")).encode()
    if len(raw) > length:
        raise ValueError("edit larger than the manifest's slack")
    raw += b" " * (length - len(raw))  # trailing whitespace: still the same JSON
    return resign(blob[:16] + struct.pack("<Q", length) + blob[24:HEADER.size] + raw + blob[HEADER.size + length:])


def resign(blob: bytes) -> bytes:
    """The header's manifest checksum recomputed (after an edit of the manifest bytes)."""
    (length,) = struct.unpack("<Q", blob[16:24])
    digest = hashlib.sha256(blob[HEADER.size:HEADER.size + length]).digest()
    return blob[:24] + digest + blob[56:]


def with_member(blob: bytes, name: str, mutate) -> bytes:
    """`blob` with member `name`'s bytes changed by `mutate(bytearray)` (same size), everything re-signed."""
    manifest, _ = manifest_of(blob)
    entry = manifest["members"][name]
    member = bytearray(blob[entry["offset"]:entry["offset"] + entry["size"]])
    mutate(member)
    assert len(member) == entry["size"], "mutate must keep the member's size"
    return with_member_bytes(blob, name, bytes(member))


def with_member_bytes(blob: bytes, name: str, new: bytes) -> bytes:
    """`blob` rebuilt with member `name` replaced by `new` (any size), everything re-signed."""
    from sdk.format.bundle import replace_member

    return replace_member(blob, name, new)


def with_signature_of(blob: bytes, signed: bytes) -> bytes:
    """`blob`, an edited and re-checksummed copy of the signed bundle `signed` (so unsigned, version 5),
    stamped version 6 again with `signed`'s signature trailer appended: a forger replaying a signature."""
    from sdk.format.signing import SIGNED_SINCE, TRAILER

    version, length = struct.unpack("<I", blob[8:12])[0], struct.unpack("<Q", blob[16:24])[0]
    raw = blob[HEADER.size:HEADER.size + length]
    if version >= SIGNED_SINCE or b'"version":5,' not in raw:
        return blob
    raw = raw.replace(b'"version":5,', b'"version":6,', 1)
    stamped = blob[:8] + struct.pack("<I", SIGNED_SINCE) + blob[12:HEADER.size] + raw + blob[HEADER.size + length:]
    return resign(stamped) + signed[-TRAILER.size:]


def signed_copy(blob: bytes, key) -> bytes:
    """`blob` (format 5, damaged or not) stamped version 6 and signed by `key`: what a key holder's own faulty
    build would carry, where the signature holds and only the reader's checks stand between it and a model.
    A blob whose header or manifest cannot be read as version 5 is returned as it is."""
    from sdk.format.signing import SIGNED_SINCE, sign_header

    if len(blob) < HEADER.size or struct.unpack("<I", blob[8:12])[0] != SIGNED_SINCE - 1:
        return blob
    length = struct.unpack("<Q", blob[16:24])[0]
    raw = blob[HEADER.size:HEADER.size + length]
    if len(raw) != length or b'"version":5,' not in raw:
        return blob
    raw = raw.replace(b'"version":5,', b'"version":6,', 1)
    stamped = resign(blob[:8] + struct.pack("<I", SIGNED_SINCE) + blob[12:HEADER.size] + raw
                     + blob[HEADER.size + length:])
    return stamped + sign_header(stamped[:HEADER.size], key)


def without_concepts(members: dict[str, bytes]) -> dict[str, bytes]:
    """Members of a format-5 bundle made those of a format 3/4 one: no concepts in classes.json, no concept
    embeddings."""
    from sdk.format.bundle import safetensors_bytes
    from sdk.format.tensorfile import read_tensors

    spec = json.loads(members["classes.json"])
    spec.pop("concepts", None)
    text = read_tensors(members["class_embeddings.safetensors"])[0]["text"]
    return {**members, "classes.json": json.dumps(spec).encode(),
            "class_embeddings.safetensors": safetensors_bytes({"text": text})}
