"""Members that passed a check in this process, by the SHA-256 of their exact bytes: a bundle loaded again, or
another bundle with the same text encoder, skips the structural checks of bytes that passed them before (the
shipped encoder's graph and tokenizer: walked in 238 ms, then 40 ms to hash the same bytes; 2026-11-29, here).
Only passes are kept, in memory, never on disk; a refusal is checked again every time. The key is the hash of
the bytes checked, not a digest the bundle declares, so a member edited in any way is checked afresh.

>>> remembered = PassedChecks()
>>> remembered.check_once("tokenizer", b'{"model": {}}', lambda raw: None)   # walked, then remembered
>>> remembered.check_once("tokenizer", b'{"model": {}}', print)              # not walked again
>>> remembered.passed("tokenizer", b'{"model": {}}'), remembered.passed("tokenizer", b"{}")
(True, False)
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable

MAX_REMEMBERED = 16   # members: a process holds a few bundles, each with one encoder graph and one tokenizer


class PassedChecks:
    """(check, SHA-256 of the bytes) of the last MAX_REMEMBERED passes; safe from many threads."""

    def __init__(self) -> None:
        self._keys: OrderedDict[tuple[str, bytes], None] = OrderedDict()
        self._lock = threading.Lock()

    def check_once(self, check: str, raw: bytes, walk: Callable[[bytes], object], digest: bytes | None = None
                   ) -> None:
        """`walk(raw)` (which raises on a refusal) unless these bytes passed `check` before in this process;
        remembered once it returns. `digest`: the SHA-256 of `raw` where the caller already computed it (the
        runtime keys its shared encoder by it too), else it is computed here."""
        key = (check, digest or hashlib.sha256(raw).digest())
        with self._lock:
            if key in self._keys:
                self._keys.move_to_end(key)
                return
        walk(raw)
        with self._lock:
            self._keys[key] = None
            while len(self._keys) > MAX_REMEMBERED:
                self._keys.popitem(last=False)

    def passed(self, check: str, raw: bytes) -> bool:
        """Whether these bytes passed `check` in this process (and are still remembered)."""
        with self._lock:
            return (check, hashlib.sha256(raw).digest()) in self._keys


PASSED = PassedChecks()   # the process's one record (sdk.format.graph_check, sdk.format.tokenizer_check)
