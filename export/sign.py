"""Sign a bundle (format version 6, `sdk.format.signing`) or its ExecuTorch companion (companion version 3,
`sdk.engines.xnnpack_program`): `python -m export keygen` and `python -m export sign`.

The bundle is validated completely (every member's SHA-256, every weight finite) before it is signed: a
signature says "this is the bundle we built", so nothing damaged is signed. Signing rewrites only the
header, the manifest's `version` and the trailer; the members' bytes are the same.

>>> from sdk.format.signing import generate_key                              # doctest: +SKIP
>>> key = generate_key("keys/release.key")                            # doctest: +SKIP
>>> sign_bundle("tiny-imagenet.taper", key)                           # doctest: +SKIP
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np

from sdk.engines.xnnpack_program import MAGIC, SUFFIX, companion_target, parse_companion, sign_companion
from sdk.errors import BundleError
from sdk.format.bundle import HEADER, Bundle, bundle_members, write_bundle
from sdk.format.signing import TRAILER, Signer, SigningKey, verify_trailer
from sdk.media.files import atomic_file


def sign_bundle(path: str | Path, key: SigningKey, out: str | Path | None = None) -> Signer:
    """Sign the bundle at `path` with `key`, writing `out` (default: `path` itself, replaced atomically).
    A signed bundle is signed again (the old signature is replaced). Raises BundleError if the bundle does
    not validate, or is older than version 5 (export it again first)."""
    path = Path(path)
    blob = Path(path).read_bytes()                  # read once: validated, then its members re-placed
    Bundle.from_buffer(np.frombuffer(blob, np.uint8), str(path), verify=True)
    written = write_bundle(out if out is not None else path, *bundle_members(blob), key)
    with open(written, "rb") as f:                  # what a reader now sees: the header and the trailer
        header = f.read(HEADER.size)
        f.seek(-TRAILER.size, 2)
        return verify_trailer(header, f.read())


def is_companion(path: str | Path) -> bool:
    """Whether the file at `path` is an ExecuTorch companion (by its magic, not its name)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))   # a FIFO must not block here
    except OSError:
        return False                       # sign_bundle says what is wrong with the path
    with os.fdopen(fd, "rb") as f:
        return stat.S_ISREG(os.fstat(fd).st_mode) and f.read(len(MAGIC)) == MAGIC


def sign_companion_file(path: str | Path, key: SigningKey, bundle: str | Path | None = None,
                        out: str | Path | None = None) -> Signer:
    """Sign the ExecuTorch companion at `path` with `key`, writing `out` (default: `path`, replaced atomically).
    It is first read completely against `bundle` (default: `path` without `.xnnpack`), which must validate:
    nothing damaged, and nothing made for another bundle, is signed. Raises BundleError."""
    path = Path(path)
    if bundle is None:
        if not path.name.endswith(SUFFIX):
            raise BundleError(f"{path}: name the companion's bundle (--for-bundle): the path does not end in {SUFFIX}")
        bundle = path.with_name(path.name[:-len(SUFFIX)])
    target = companion_target(Bundle.open(bundle, verify=True))
    signed = sign_companion(path.read_bytes(), key)
    # The signed bytes read as a reader will, against the bundle: what fails here is never written.
    companion = parse_companion(signed, *target, what=f"ExecuTorch companion {path.name}",
                                trusted_keys=frozenset([key.public_key]))
    with atomic_file(out if out is not None else path) as f:
        f.write(signed)
    return companion.signer
