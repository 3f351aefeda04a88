"""On-device runtime (numpy, onnxruntime, tokenizers, pillow; never torch).

>>> import sdk
>>> bundle = sdk.load("tiny-imagenet.taper")          # doctest: +SKIP
>>> model = sdk.personalize(bundle, "insects")        # doctest: +SKIP
>>> model.classes, model.predict("photo.jpg")         # doctest: +SKIP
"""

from ._version import __version__
from .errors import BundleError, DescriptionError, EncoderError, ImageError, SdkError, TensorFileError
from .model import PersonalizedModel
from .preprocessing import Preprocessing
from .runtime import TaperBundle, load, personalize
from .tasks import TaskOptions
from .text_encoder import PROMPTS, TextEncoder

__all__ = ["__version__", "PROMPTS", "BundleError", "DescriptionError", "EncoderError", "ImageError",
           "PersonalizedModel", "Preprocessing", "SdkError", "TaperBundle", "TaskOptions", "TensorFileError",
           "TextEncoder", "load", "personalize"]
