"""Typed errors of the runtime. Every failure caused by bad input is one of these."""


class SdkError(Exception):
    """Base class of all errors the SDK raises on purpose."""


class TensorFileError(SdkError, ValueError):
    """A tensor file (safetensors layout) is corrupt, truncated or hostile."""


class EncoderError(SdkError):
    """The text encoder files are missing, unreadable or do not produce embeddings."""


class DescriptionError(SdkError, ValueError):
    """A task description is empty, too long or not text."""


class ImageError(SdkError, ValueError):
    """An image cannot be decoded, or has a shape the model cannot take."""


class BundleError(SdkError, ValueError):
    """A bundle is corrupt, truncated, of an unsupported version, or inconsistent. The message says what."""


class ExamplesError(DescriptionError):
    """Few-shot examples are unusable: fewer than two classes, a class with fewer than two images,
    duplicate or invalid class names, too many images."""
