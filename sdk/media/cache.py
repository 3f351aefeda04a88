"""Where derived files (exported encoder, decoded image caches) live: outside the repository."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sdk.media import files


def cache_root() -> Path:
    """`$TAPER_CACHE` if set, else `~/.cache/taper-sdk`."""
    return Path(os.environ.get("TAPER_CACHE") or Path.home() / ".cache" / "taper-sdk")


@contextmanager
def atomic_directory(final: Path) -> Iterator[Path]:
    """A cache folder filled all or nothing (`sdk.media.files.atomic_directory`); it replaces an older copy of
    itself, as caches are the SDK's own."""
    with files.atomic_directory(final, replace_existing=True) as tmp:
        yield tmp
