"""Writing files the way a user expects: all or nothing, with the user's permissions, never over a folder.

- A file is written to a temporary name in the destination's folder and renamed over the destination
  only when complete; on any error, and on SIGTERM or SIGHUP while writing (when the process had no
  handler of its own for them), the temporary file is removed. SIGKILL cannot be caught: a killed
  writer leaves a `.<name>.<random>.tmp` file beside the destination, never a half-written destination.
- Files are created with mode 0o666 and folders 0o777, less the process umask (as `open` would), not
  the 0o600 of `tempfile.mkstemp`.
- A destination that is a folder (or a file where a folder is to be written) is refused with
  `SdkError`: nothing the user owns is deleted.

>>> import tempfile, os
>>> folder = tempfile.mkdtemp()
>>> with atomic_file(os.path.join(folder, "out.bin")) as f:
...     _ = f.write(b"data")
>>> open(os.path.join(folder, "out.bin"), "rb").read()
b'data'
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from sdk.errors import SdkError

CAUGHT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class WriteInterrupted(SystemExit):
    """Raised inside a write when SIGTERM/SIGHUP arrives, so the temporary file is removed; it then
    ends the process with the usual 128 + signal number exit code."""


@contextmanager
def _cleanup_on_signals() -> Iterator[None]:
    """While writing, turn SIGTERM/SIGHUP into an exception (main thread only, and only where the
    signal still has its default action: a process's own handler is left alone)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for sig in CAUGHT_SIGNALS:
        if signal.getsignal(sig) is signal.SIG_DFL:
            previous[sig] = signal.signal(sig, _raise_interrupted)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def user_path(value: object, what: str) -> Path:
    """`value` (a str or a path-like object) as a Path; SdkError naming `what` for anything else (bytes,
    None, a number), which pathlib would refuse with an untyped TypeError.

    >>> user_path("model.onnx", "the export path")
    PosixPath('model.onnx')
    """
    if isinstance(value, Path):
        return value
    try:
        path = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    except TypeError:   # a PathLike whose __fspath__ returns something else
        path = None
    if not isinstance(path, str):
        raise SdkError(f"{what} must be a path (str or pathlib.Path), got {type(value).__name__}")
    return Path(path)


def _raise_interrupted(signum: int, _frame: object) -> None:
    raise WriteInterrupted(128 + signum)


def _temporary_name(final: Path) -> Path:
    return final.parent / f".{final.name}.{secrets.token_hex(4)}.tmp"


def refuse_to_replace_folder(final: str | os.PathLike) -> None:
    """SdkError if `final` is an existing folder (the SDK never deletes one), or a name the system
    cannot take (too long, a NUL character)."""
    final = Path(final)
    try:
        folder = final.is_dir() and not final.is_symlink()
    except (OSError, ValueError) as e:   # ENAMETOOLONG, "embedded null byte"
        raise SdkError(f"cannot write {str(final)[:200]!r}: {getattr(e, 'strerror', None) or e}") from None
    if folder:
        raise SdkError(f"{final} is a folder: not replacing it (remove it or choose another name)")


def _make_parents(folder: Path) -> list[Path]:
    """Create `folder` and its missing parents; the ones created, outermost first (to remove on failure:
    a failed write leaves nothing behind, folders included)."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for made in reversed(missing):
        made.mkdir()
    return list(reversed(missing))


def _remove_made(folders: list[Path]) -> None:
    for folder in reversed(folders):
        try:
            folder.rmdir()   # only if still empty
        except OSError:
            return


@contextmanager
def atomic_file(final: str | os.PathLike) -> Iterator[BinaryIO]:
    """A binary file object to fill; on success it replaces `final` (a file), on failure it is removed.

    Raises:
        SdkError: `final` is an existing folder, or its folder cannot be written.
    """
    final = Path(final)
    refuse_to_replace_folder(final)
    made: list[Path] = []
    try:
        made = _make_parents(final.parent)
        tmp = _temporary_name(final)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the kernel applies the umask
    except (OSError, ValueError) as e:   # ValueError: a NUL in the name
        _remove_made(made)
        raise SdkError(f"cannot write {str(final)[:200]!r}: {getattr(e, 'strerror', None) or e}") from None
    try:
        with _cleanup_on_signals(), os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
        refuse_to_replace_folder(final)  # it may have appeared while we wrote
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        _remove_made(made)
        raise


@contextmanager
def staging_directory(beside: str | os.PathLike) -> Iterator[Path]:
    """A temporary folder beside `beside` (same file system, so its contents can be renamed into place),
    removed afterwards in every case, signals included."""
    beside = Path(beside)
    made: list[Path] = []
    try:
        made = _make_parents(beside.parent)
        tmp = _temporary_name(beside)
        tmp.mkdir(0o777)
    except (OSError, ValueError) as e:   # ValueError: a NUL in the name
        _remove_made(made)
        raise SdkError(f"cannot write beside {str(beside)[:200]!r}: {getattr(e, 'strerror', None) or e}") from None
    try:
        with _cleanup_on_signals():
            yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        _remove_made(made)   # the folders made for a write that failed
        raise
    shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def atomic_directory(final: str | os.PathLike, replace_existing: bool = False) -> Iterator[Path]:
    """A temporary folder beside `final` to fill; on success it becomes `final`, on failure it is removed.

    An existing `final` is replaced only with `replace_existing=True` (the SDK's own caches); a
    user's folder or file is never replaced (SdkError).
    """
    final = Path(final)
    if final.exists() and not replace_existing:
        raise SdkError(f"{final} exists: not replacing it (remove it or choose another name)")
    with staging_directory(final) as tmp:  # removed in every case; after the rename there is nothing left
        yield tmp
        if final.exists():
            if not replace_existing:
                raise SdkError(f"{final} appeared while writing: not replacing it")
            shutil.rmtree(final) if final.is_dir() else final.unlink()
        os.replace(tmp, final)
