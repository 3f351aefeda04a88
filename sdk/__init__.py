"""On-device runtime (numpy, onnxruntime, tokenizers, pillow; never torch).

>>> import sdk
>>> bundle = sdk.load("tiny-imagenet.taper")          # doctest: +SKIP
>>> model = sdk.personalize(bundle, "insects")        # doctest: +SKIP
>>> model.classes, model.predict("photo.jpg")         # doctest: +SKIP
"""

from ._offline import disable_onnxruntime_telemetry

disable_onnxruntime_telemetry()  # before anything imports onnxruntime: see sdk/_offline.py

from ._version import __version__  # noqa: E402
from .errors import BundleError, DescriptionError, EncoderError, ExamplesError, ImageError, SdkError, TensorFileError  # noqa: E402
from .model import PersonalizedModel  # noqa: E402
from .preprocessing import Preprocessing  # noqa: E402
from .runtime import TaperBundle, load, personalize  # noqa: E402
from .tasks import TaskOptions  # noqa: E402
from .text_encoder import PROMPTS, TextEncoder  # noqa: E402

__all__ = ["__version__", "PROMPTS", "BundleError", "DescriptionError", "EncoderError", "ExamplesError", "ImageError",
           "PersonalizedModel", "Preprocessing", "SdkError", "TaperBundle", "TaskOptions", "TensorFileError",
           "TextEncoder", "load", "personalize"]
