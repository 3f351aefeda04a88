"""The text encoder of the runtime: an ONNX sentence encoder run with onnxruntime and `tokenizers`.

The same files are used by the trainer (class-name embeddings the mixer is trained on) and shipped in
the bundle, so the mixer never sees another encoder's outputs.

>>> encoder = TextEncoder.from_dir(folder)                       # doctest: +SKIP
>>> encoder.encode(["moths", "kitchen appliances"]).shape        # doctest: +SKIP
(2, 384)
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from sdk.errors import BundleError, DescriptionError, EncoderError
from sdk.text import encoder_cache

MODEL_FILE, TOKENIZER_FILE = "encoder.onnx", "tokenizer.json"
MAX_TOKENS = 128
MAX_TEXT_CHARS = 10_000  # longer input is refused before tokenizing (it would be truncated anyway)
# Prompt ensemble for class names (CLIP-style templates): averaging over them makes a class
# embedding less sensitive to the wording of any one sentence.
PROMPTS: tuple[str, ...] = (
    "a photo of a {}.",
    "a photo of the {}.",
    "a close-up photo of a {}.",
    "a cropped photo of a {}.",
    "a photo of a small {}.",
    "a photo of a large {}.",
    "a bright photo of a {}.",
    "a good photo of a {}.",
)


def _check_encodable(text: str) -> None:
    """DescriptionError for text that is not valid Unicode (an unpaired surrogate cannot be UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise DescriptionError("the text holds an unpaired surrogate (not valid Unicode)") from None


_live: weakref.WeakValueDictionary[Hashable, TextEncoder] = weakref.WeakValueDictionary()
_live_lock = threading.Lock()


def shared_encoder(key: Hashable, make: Callable[[], TextEncoder]) -> TextEncoder:
    """The encoder made under `key` while something still holds it, else `make()`'s, shared from then on.

    A process that loads the same bundle twice (an app reopening it, a server per request, the tests)
    creates the encoder's session once (~0.2 s here) and holds its 23 MB graph once. `key` names everything the
    encoder is made from (the graph's and tokenizer's checksums, the truncation, the dimension, the cache
    entry). Weak: the last holder dropped, the encoder is freed as before (tests/test_lifetime.py).

    >>> a = shared_encoder(("graph sha", "tokenizer sha"), make)                       # doctest: +SKIP
    >>> a is shared_encoder(("graph sha", "tokenizer sha"), make)                      # doctest: +SKIP
    True
    """
    with _live_lock:   # held while making: two threads never make the same encoder twice
        encoder = _live.get(key)
        if encoder is None:
            encoder = make()
            _live[key] = encoder
        return encoder


def primary_name(name: str) -> str:
    """The first synonym of a WordNet-style name: "goldfish, Carassius auratus" -> "goldfish"."""
    return name.split(",")[0].strip()


def configure_tokenizer(tokenizer: Tokenizer, max_tokens: int = MAX_TOKENS) -> Tokenizer:
    """Pad to the longest text of a batch, not to a fixed length (a short query then costs ~2 ms, not ~28)."""
    tokenizer.no_padding()
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    tokenizer.enable_truncation(max_length=max_tokens)
    return tokenizer


def session_options(threads: int | None = None) -> ort.SessionOptions:
    """How the SDK runs an encoder graph (the warm-start cache stores what these options make of it)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Fold the int8 weights' DequantizeLinear nodes into float constants at load: a query then
    # costs ~1.4 ms instead of ~5 ms (the embedding table stays int8, see export/text_encoder.py).
    options.add_session_config_entry("session.disable_quant_qdq", "1")
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # see sdk.engines.onnxruntime
    if threads:
        options.intra_op_num_threads = threads
    return options


class TextEncoder:
    """Texts -> L2-normalised embeddings (mean pooling is inside the graph)."""

    def __init__(self, model: bytes | str | Path, tokenizer_json: str, max_tokens: int = MAX_TOKENS,
                 threads: int | None = None, cache_key: str | None = None):
        try:
            self.tokenizer = configure_tokenizer(Tokenizer.from_str(tokenizer_json), max_tokens)
        except Exception as e:  # tokenizers raises plain Exception on bad JSON
            raise EncoderError(f"tokenizer.json is not a valid tokenizer: {e}") from None
        source = str(model) if isinstance(model, Path) else model
        try:
            if cache_key is not None and isinstance(source, bytes):
                self.session = encoder_cache.cached_session(cache_key, source, lambda: session_options(threads))
            else:
                self.session = ort.InferenceSession(source, session_options(threads), providers=encoder_cache.PROVIDERS)
        except Exception as e:  # onnxruntime raises its own untyped errors on bad graphs
            raise EncoderError(f"text encoder graph could not be loaded: {e}") from None
        outputs = self.session.get_outputs()
        if [i.name for i in self.session.get_inputs()] != ["input_ids", "attention_mask"] or len(outputs) != 1:
            raise EncoderError("text encoder graph must take (input_ids, attention_mask) and give one output")
        dims = outputs[0].shape
        if len(dims) != 2 or not isinstance(dims[-1], int) or dims[-1] < 1:
            raise EncoderError(f"text encoder output must be [batch, dim], the graph says {dims}")
        self.dim = dims[-1]

    @classmethod
    def from_checked_members(cls, graph: bytes, tokenizer_json: str, max_tokens: int, dim: int,
                             cache_key: str | None = None) -> TextEncoder:
        """The encoder of a bundle, from a graph and tokenizer already checked (`sdk.format.graph_check`,
        `sdk.format.tokenizer_check`); its embeddings must have the bundle's `dim`. With `cache_key`, its session
        comes from the warm-start cache, or is stored there (sdk/text/encoder_cache.py)."""
        encoder = cls(graph, tokenizer_json, max_tokens, cache_key=cache_key)
        if encoder.dim != dim:
            raise BundleError(f"member text_encoder.onnx: gives {encoder.dim}-d embeddings, the mixer takes {dim}")
        return encoder

    @classmethod
    def from_dir(cls, folder: str | Path, **kw) -> TextEncoder:
        """Load `encoder.onnx` and `tokenizer.json` from a folder."""
        folder = Path(folder)
        try:
            tokenizer_json = (folder / TOKENIZER_FILE).read_text()
        except OSError as e:
            raise EncoderError(f"{folder / TOKENIZER_FILE}: {e.strerror}") from None
        if not (folder / MODEL_FILE).is_file():
            raise EncoderError(f"{folder / MODEL_FILE}: no such file")
        return cls(folder / MODEL_FILE, tokenizer_json, **kw)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """[len(texts), dim] float32, each row of unit length."""
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise DescriptionError("encode() takes a sequence of strings")
        if len(texts) == 0:
            return np.zeros((0, self.dim), np.float32)
        if any(len(t) > MAX_TEXT_CHARS for t in texts):
            raise DescriptionError(f"a text is longer than {MAX_TEXT_CHARS} characters")
        for t in texts:
            _check_encodable(t)
        try:
            batch = self.tokenizer.encode_batch(list(texts))
            ids = np.array([e.ids for e in batch], dtype=np.int64)
            mask = np.array([e.attention_mask for e in batch], dtype=np.int64)
            (embeddings,) = self.session.run(None, {"input_ids": ids, "attention_mask": mask})
        except Exception as e:  # tokenizers and onnxruntime raise untyped errors
            raise EncoderError(f"the text encoder failed: {type(e).__name__}: {e}") from None
        if embeddings.shape != (len(texts), self.dim) or not np.isfinite(embeddings).all():
            raise EncoderError(f"the text encoder gave {embeddings.shape} embeddings with non-finite values, "
                               f"expected finite {(len(texts), self.dim)}")
        return embeddings.astype(np.float32, copy=False)

    def embed_class_names(self, names: Sequence[str], prompts: Sequence[str] = PROMPTS,
                          batch_size: int = 256) -> np.ndarray:
        """One unit vector per class: the normalised mean of its prompt embeddings."""
        texts = [p.format(name) for name in names for p in prompts]
        parts = [self.encode(texts[i:i + batch_size]) for i in range(0, len(texts), batch_size)]
        flat = np.concatenate(parts) if parts else np.zeros((0, self.dim), np.float32)
        means = flat.reshape(len(names), len(prompts), self.dim).mean(1)
        return means / np.linalg.norm(means, axis=1, keepdims=True).clip(min=1e-12)
