"""The text encoder the trainer embeds class names with: exactly the file the bundle ships (a mixer trained
on one encoder's outputs and fed another's drifts).

The exporter builds that file (export/text_encoder.py: MiniLM to ONNX, 8-bit weights) and registers its
builder under the entry-point group below (pyproject.toml), so the trainer asks for it by name and never
imports `export`: data flows trainer -> run directory -> export, and the import graph follows it.
"""

from __future__ import annotations

import functools
from pathlib import Path

ENTRY_POINTS = "taper_sdk.text_encoder"


def text_encoder_dir() -> Path:
    """The folder of the exported text encoder (built once, about a minute, then cached)."""
    from importlib.metadata import entry_points

    found = [ep for ep in entry_points(group=ENTRY_POINTS) if ep.name == "cached"]
    if not found:
        raise RuntimeError(f"no text encoder is registered under {ENTRY_POINTS!r}: install taper-sdk with the "
                           "export extra (pip install -e '.[train,export]')")
    return found[0].load()()


def class_name_encoder():
    """An `sdk.text.encoder.TextEncoder` over that file (loads onnxruntime and tokenizers), one per process
    and file: a process that trains several runs (a notebook, a test worker) loads it once and embeds a batch
    of texts it has embedded before from memory (`remembering_encoder`).

    >>> class_name_encoder() is class_name_encoder()                                   # doctest: +SKIP
    True
    """
    from sdk.text.encoder import MODEL_FILE

    folder = text_encoder_dir()
    stat = (folder / MODEL_FILE).stat()
    return remembering_encoder(str(folder), stat.st_size, stat.st_mtime_ns)


REMEMBERED_BATCHES = 256   # at most 256 batches x 256 texts x 384 floats: 100 MB


@functools.lru_cache(maxsize=2)
def remembering_encoder(folder: str, size: int, mtime_ns: int):
    """The encoder of `folder` (its model file's size and time in the key: a rebuilt file is another
    encoder), whose `encode` keeps the embeddings of the last REMEMBERED_BATCHES batches it was given: the
    same batch gives the same array as the encoder would (one process, one session, the same input)."""
    from sdk.text.encoder import TextEncoder

    class RememberingEncoder(TextEncoder):
        def encode(self, texts):
            if isinstance(texts, str):   # refused by TextEncoder.encode, as a str is no batch
                return super().encode(texts)
            return self._encoded(tuple(texts)).copy()   # the caller's copy: what is remembered stays

        @functools.lru_cache(maxsize=REMEMBERED_BATCHES)   # noqa: B019 (the encoder lives as long as the process)
        def _encoded(self, texts: tuple[str, ...]):
            return super().encode(texts)

    return RememberingEncoder.from_dir(folder)
