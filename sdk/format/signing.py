"""Signed bundles (format version 6): an Ed25519 signature over the bundle's header, which holds the
SHA-256 of the manifest, which holds the SHA-256 of every member. The one owner of the signature's bytes;
docs/bundle-format.md ("Signature") is its specification and android_demo's `Signatures.java` its mirror.

Trailer, the last 128 bytes of a version-6 file (integers little-endian):
    0    8 bytes   magic b"TAPERSIG"
    8    u32       scheme: 1 (Ed25519, RFC 8032, pure)
    12   4 bytes   reserved (zero)
    16   32 bytes  the signer's public key (raw)
    48   64 bytes  the signature of DOMAIN + header[0:64]
    112  16 bytes  reserved (zero)

The ExecuTorch companion (`sdk/engines/xnnpack_program.py`, its version 3) ends in the same trailer; there the
signed message is COMPANION_DOMAIN + the companion's prefix and JSON header (which holds the SHA-256 of
its program). Two domains: a bundle's signature can never pass for a companion's, nor the reverse.

Keys: `generate_key(path)` writes the private key (PKCS#8 PEM, mode 0600, never over an existing file) and
`<path>.pub`, the public key as 64 hex digits. A key's `key_id` is the first 16 hex digits of the SHA-256 of
the public key. A private key is never printed: its repr shows the key id only.

The primitive is `cryptography`'s Ed25519 (OpenSSL underneath), imported only when a signature is made or
checked, so an unsigned bundle loads without it.

>>> key = SigningKey.generate()
>>> signer = verify_trailer(b"h" * 64, sign_header(b"h" * 64, key))
>>> signer.key_id == key.key_id
True
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from sdk.errors import BundleError, SdkError

SIGNED_SINCE = 6
TRAILER = struct.Struct("<8sI4s32s64s16s")
TRAILER_MAGIC = b"TAPERSIG"
SCHEME_ED25519 = 1
DOMAIN = b"taper-bundle signature v1\n"          # signed before the header: a signature means this and only this
COMPANION_DOMAIN = b"taper-companion signature v1\n"
HEADER_BYTES = 64
PUBLIC_HEX = re.compile(r"[0-9a-f]{64}")


def key_id(public_key: bytes) -> str:
    return hashlib.sha256(public_key).hexdigest()[:16]


@dataclass(frozen=True)
class Signer:
    """Who signed a bundle: the public key (64 hex digits) and its short id."""
    public_key: str
    key_id: str

    def __str__(self) -> str:
        return f"key {self.key_id}"


class SigningKey:
    """An Ed25519 private key. Its bytes never appear in a repr, a str or an error message."""

    def __init__(self, private):                       # a cryptography Ed25519PrivateKey
        self._private = private
        self.public_key = _public_bytes(private.public_key())
        self.key_id = key_id(self.public_key)

    @classmethod
    def generate(cls) -> SigningKey:
        return cls(_ed25519().Ed25519PrivateKey.generate())

    @classmethod
    def from_seed(cls, seed: bytes) -> SigningKey:
        """The key of a 32-byte seed (RFC 8032's private key): for golden tests, never for real keys."""
        return cls(_ed25519().Ed25519PrivateKey.from_private_bytes(bytes(seed)))

    @classmethod
    def load(cls, path: str | os.PathLike) -> SigningKey:
        """Read a private key written by `generate_key` (PKCS#8 PEM, unencrypted). Raises SdkError."""
        from cryptography.hazmat.primitives import serialization

        path = Path(path)
        try:
            blob = path.read_bytes()
        except OSError as e:
            raise SdkError(f"{path}: cannot read the signing key ({e.strerror})") from None
        try:
            private = serialization.load_pem_private_key(blob, password=None)
        except (ValueError, TypeError):   # the message could quote the file: say only what it is not
            raise SdkError(f"{path}: not an unencrypted PKCS#8 PEM private key") from None
        if not isinstance(private, _ed25519().Ed25519PrivateKey):
            raise SdkError(f"{path}: not an Ed25519 key")
        return cls(private)

    def sign(self, message: bytes) -> bytes:
        return self._private.sign(message)

    def pem(self) -> bytes:
        from cryptography.hazmat.primitives import serialization

        return self._private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption())

    def __repr__(self) -> str:
        return f"SigningKey(key_id={self.key_id!r})"

    __str__ = __repr__

    def __reduce__(self):
        raise TypeError("a SigningKey is not pickled (it would copy the private key)")


def generate_key(path: str | os.PathLike) -> SigningKey:
    """Write a new private key to `path` (mode 0600) and its public key to `<path>.pub` (64 hex digits and a
    newline). Refuses to replace an existing file: a key that is lost cannot be recovered."""
    path, public_path = Path(path), Path(f"{path}.pub")
    for p in (path, public_path):
        if os.path.lexists(p):
            raise SdkError(f"{p} exists: a key is never overwritten (choose another path or remove it yourself)")
    key = SigningKey.generate()
    _write_new(path, key.pem(), 0o600)
    try:
        _write_new(public_path, key.public_key.hex().encode() + b"\n", 0o644)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return key


def _write_new(path: Path, data: bytes, mode: int) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except OSError as e:
        raise SdkError(f"cannot write {path}: {e.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def public_key_bytes(value: str | bytes | os.PathLike) -> bytes:
    """A trusted key as 32 raw bytes, from 64 hex digits, 32 bytes, or the path of a `.pub` file."""
    if isinstance(value, bytes) and len(value) == 32:
        return value
    if isinstance(value, os.PathLike) or (isinstance(value, str) and value.endswith(".pub")):
        try:
            value = Path(value).read_text(encoding="ascii")[:200]
        except (OSError, UnicodeDecodeError) as e:
            raise SdkError(f"{value}: cannot read the public key ({type(e).__name__})") from None
    if isinstance(value, str) and PUBLIC_HEX.fullmatch(value.strip().lower()):
        return bytes.fromhex(value.strip())
    raise SdkError("a trusted key is 64 hex digits (the .pub file's content), 32 raw bytes, or a .pub file's path")


def trusted_set(keys: Iterable[str | bytes | os.PathLike]) -> frozenset[bytes]:
    if isinstance(keys, (str, bytes, os.PathLike)):
        raise SdkError("trusted_keys is a list of keys (e.g. [key]), not one key")
    try:
        keys = list(keys)
    except TypeError:
        raise SdkError(f"trusted_keys is a list of keys, got {type(keys).__name__}") from None
    out = frozenset(public_key_bytes(k) for k in keys)
    if not out:
        raise SdkError("trusted_keys is empty: no bundle could load (pass None to accept unsigned bundles)")
    return out


def sign_header(header: bytes, key: SigningKey) -> bytes:
    """The trailer that signs `header` (the bundle's first 64 bytes)."""
    if len(header) != HEADER_BYTES:
        raise ValueError(f"a bundle header is {HEADER_BYTES} bytes")
    return sign_message(header, key)


def sign_message(message: bytes, key: SigningKey, domain: bytes = DOMAIN) -> bytes:
    """The trailer holding `key`'s signature of `domain` + `message`."""
    return TRAILER.pack(TRAILER_MAGIC, SCHEME_ED25519, bytes(4), key.public_key, key.sign(domain + message),
                        bytes(16))


def verify_trailer(message: bytes, trailer: bytes, domain: bytes = DOMAIN, what: str = "bundle") -> Signer:
    """The signer of a signed `what` whose signed bytes are `message` (a bundle's first 64 bytes) and last 128
    bytes are `trailer`. Raises BundleError when the trailer is malformed or the signature does not verify."""
    if len(trailer) != TRAILER.size:
        raise BundleError("signature: the file is too short for its trailer")
    magic, scheme, reserved, public, signature, reserved_tail = TRAILER.unpack(trailer)
    if magic != TRAILER_MAGIC:
        raise BundleError(f"signature: no signature trailer at the end of a signed {what}")
    if scheme != SCHEME_ED25519:
        raise BundleError(f"signature: scheme {scheme} is not supported (1: Ed25519)")
    if reserved != bytes(4) or reserved_tail != bytes(16):
        raise BundleError("signature: reserved bytes are not zero")
    ed25519 = _ed25519()
    from cryptography.exceptions import InvalidSignature

    try:
        ed25519.Ed25519PublicKey.from_public_bytes(public).verify(signature, domain + bytes(message))
    except (InvalidSignature, ValueError):
        raise BundleError(f"signature: bad signature (key {key_id(public)}): the {what} was changed after "
                          "it was signed, or the signature is forged") from None
    return Signer(public.hex(), key_id(public))


def check_trusted(signer: Signer | None, trusted: frozenset[bytes], what: str = "bundle") -> None:
    """BundleError unless `signer` is one of the `trusted` public keys."""
    if signer is None:
        raise BundleError(f"unsigned {what}: trusted_keys accepts only one signed by one of them "
                          "(python -m export sign FILE --key KEY)")
    if bytes.fromhex(signer.public_key) not in trusted:
        raise BundleError(f"signed by an unknown key ({signer.key_id}): not among trusted_keys "
                          f"({', '.join(sorted(key_id(k) for k in trusted))})")


def _public_bytes(public) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _ed25519():
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:  # pragma: no cover - a dependency of the runtime since format version 6
        raise SdkError("signed bundles need the 'cryptography' package (pip install cryptography)") from None
    return ed25519
