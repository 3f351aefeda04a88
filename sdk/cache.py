"""Where derived files (exported encoder, decoded image caches) live: outside the repository."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def cache_root() -> Path:
    """`$TAPER_CACHE` if set, else `~/.cache/taper-sdk`."""
    return Path(os.environ.get("TAPER_CACHE") or Path.home() / ".cache" / "taper-sdk")


@contextmanager
def atomic_directory(final: Path) -> Iterator[Path]:
    """A temp folder beside `final` to fill; on success it replaces `final`, on any failure it is
    removed, so a reader never sees a half-written folder."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        yield tmp
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
