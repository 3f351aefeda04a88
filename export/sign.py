"""Sign a bundle (format version 6, `sdk.signing`): `python -m export keygen` and `python -m export sign`.

The bundle is validated completely (every member's SHA-256, every weight finite) before it is signed: a
signature says "this is the bundle we built", so nothing damaged is signed. Signing rewrites only the
header, the manifest's `version` and the trailer; the members' bytes are the same.

>>> from sdk.signing import generate_key                              # doctest: +SKIP
>>> key = generate_key("keys/release.key")                            # doctest: +SKIP
>>> sign_bundle("tiny-imagenet.taper", key)                           # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sdk.bundle import HEADER, Bundle, bundle_members, write_bundle
from sdk.signing import TRAILER, Signer, SigningKey, verify_trailer


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
