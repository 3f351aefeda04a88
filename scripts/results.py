"""A benchmark's result file, written one way: the JSON at `path` (its folder made, the file replaced whole or
not at all: sdk.media.files.atomic_file), and the same JSON printed for the log of the run.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "out" / "r.json"
>>> write_result({"a": 1}, path, echo=False); json.loads(path.read_text())
{'a': 1}
"""

from __future__ import annotations

import json
from pathlib import Path

from sdk.media.files import atomic_file


def write_result(result: dict, path: Path | None, echo: bool = True) -> None:
    """`result` as JSON at `path` (None: nowhere, a run that was only to be read), printed too with `echo`."""
    text = json.dumps(result, indent=1) + "\n"
    if path is not None:
        with atomic_file(path) as f:
            f.write(text.encode())
    if echo or path is None:
        print(text, end="")
