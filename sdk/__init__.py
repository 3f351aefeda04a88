"""On-device runtime (numpy, onnxruntime, tokenizers, pillow; never torch).

So far: the text encoder, image decoding and preprocessing, and the tensor file format.

>>> import sdk
>>> encoder = sdk.TextEncoder.from_dir(folder)       # doctest: +SKIP
>>> encoder.encode(["moths"]).shape                  # doctest: +SKIP
(1, 384)
"""

from .errors import DescriptionError, EncoderError, ImageError, SdkError, TensorFileError
from .preprocessing import Preprocessing
from .text_encoder import PROMPTS, TextEncoder

__all__ = ["PROMPTS", "DescriptionError", "EncoderError", "ImageError", "Preprocessing", "SdkError",
           "TensorFileError", "TextEncoder"]
