"""Where derived files (exported encoder, decoded image caches) live: outside the repository."""

import os
from pathlib import Path


def cache_root() -> Path:
    """`$TAPER_CACHE` if set, else `~/.cache/taper-sdk`."""
    return Path(os.environ.get("TAPER_CACHE") or Path.home() / ".cache" / "taper-sdk")
