"""On-device runtime (numpy, onnxruntime, tokenizers, pillow; never torch).

>>> import sdk
>>> bundle = sdk.load("tiny-imagenet.taper")          # doctest: +SKIP
>>> model = sdk.personalize(bundle, "insects")        # doctest: +SKIP
>>> model.classes, model.predict("photo.jpg")         # doctest: +SKIP

The runtime's rooms, each a package that imports only the ones listed before it (tests/test_layout.py):

- `sdk.media`: decoding and resampling images, preprocessing, atomic files, result pages;
- `sdk.fusion`: the ResNet-18 as data, the bases, the mixer, batch-norm folding, the fusion plan and its C
  kernel, the int8 weight quantizer;
- `sdk.format`: the .taper file: its one reader and writer, manifest, tensors, JSON grammar, signatures, and
  the checks of every untrusted member;
- `sdk.engines`: running a fused network: the onnxruntime routes, the compiled route, int8 sessions,
  ExecuTorch, companions, the device caches;
- `sdk.text`: the text encoder and its cache, and the resolver (description -> classes);
- and on top, the public API: `runtime` (load, personalize), `model`, `adapt`, `fewshot`, `exports`, the CLI.

The public names load on first use (PEP 562), so that the shared contracts (`sdk.fusion.architecture`,
`sdk.fusion.mixer`, `sdk.media.preprocessing`, `sdk.format.manifest`, ...) can be imported by the trainer
without loading onnxruntime or tokenizers (tests/test_runtime_imports.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from sdk.engines._offline import disable_onnxruntime_telemetry

disable_onnxruntime_telemetry()  # before anything imports onnxruntime: see sdk/engines/_offline.py

from sdk._version import __version__  # noqa: E402
from sdk.errors import (  # noqa: E402
    BundleError,
    DescriptionError,
    EncoderError,
    ExamplesError,
    ImageError,
    SdkError,
    TensorFileError,
)

_LAZY = {  # public name -> the module that defines it (each loads onnxruntime or tokenizers)
    "PersonalizedModel": "model", "Preprocessing": "media.preprocessing", "TaperBundle": "runtime", "load": "runtime",
    "personalize": "runtime", "TaskOptions": "text.resolver", "PROMPTS": "text.encoder", "TextEncoder": "text.encoder",
}

if TYPE_CHECKING:
    from sdk.media.preprocessing import Preprocessing
    from sdk.model import PersonalizedModel
    from sdk.runtime import TaperBundle, load, personalize
    from sdk.text.encoder import PROMPTS, TextEncoder
    from sdk.text.resolver import TaskOptions


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
