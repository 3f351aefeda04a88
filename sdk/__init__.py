"""On-device runtime (numpy, onnxruntime, tokenizers, pillow; never torch).

>>> import sdk
>>> bundle = sdk.load("tiny-imagenet.taper")          # doctest: +SKIP
>>> model = sdk.personalize(bundle, "insects")        # doctest: +SKIP
>>> model.classes, model.predict("photo.jpg")         # doctest: +SKIP

The public names load on first use (PEP 562), so that the shared contracts (`sdk.architecture`,
`sdk.mixer`, `sdk.preprocessing`, `sdk.manifest`, ...) can be imported by the trainer without loading
onnxruntime or tokenizers (tests/test_runtime_imports.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._offline import disable_onnxruntime_telemetry

disable_onnxruntime_telemetry()  # before anything imports onnxruntime: see sdk/_offline.py

from ._version import __version__  # noqa: E402
from .errors import (  # noqa: E402
    BundleError,
    DescriptionError,
    EncoderError,
    ExamplesError,
    ImageError,
    SdkError,
    TensorFileError,
)

_LAZY = {  # public name -> the module that defines it (each loads onnxruntime or tokenizers)
    "PersonalizedModel": "model", "Preprocessing": "preprocessing", "TaperBundle": "runtime", "load": "runtime",
    "personalize": "runtime", "TaskOptions": "tasks", "PROMPTS": "text_encoder", "TextEncoder": "text_encoder",
}

if TYPE_CHECKING:
    from .model import PersonalizedModel
    from .preprocessing import Preprocessing
    from .runtime import TaperBundle, load, personalize
    from .tasks import TaskOptions
    from .text_encoder import PROMPTS, TextEncoder


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value   # later lookups are plain attribute reads
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = ["__version__", "PROMPTS", "BundleError", "DescriptionError", "EncoderError", "ExamplesError", "ImageError",
           "PersonalizedModel", "Preprocessing", "SdkError", "TaperBundle", "TaskOptions", "TensorFileError",
           "TextEncoder", "load", "personalize"]
