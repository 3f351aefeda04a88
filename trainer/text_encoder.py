"""The text encoder the trainer embeds class names with: exactly the file the bundle ships (a mixer trained
on one encoder's outputs and fed another's drifts).

The exporter builds that file (export/text_encoder.py: MiniLM to ONNX, 8-bit weights) and registers its
builder under the entry-point group below (pyproject.toml), so the trainer asks for it by name and never
imports `export`: data flows trainer -> run directory -> export, and the import graph follows it.
"""

from __future__ import annotations

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
    """An `sdk.text.encoder.TextEncoder` over that file (loads onnxruntime and tokenizers)."""
    from sdk.text.encoder import TextEncoder

    return TextEncoder.from_dir(text_encoder_dir())
