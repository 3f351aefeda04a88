"""A bundle's tokenizer.json is untrusted: only the WordPiece tokenizer kinds the text encoder uses pass.

`tokenizers` builds whatever a tokenizer.json describes; nested `Replace` normalizers with hostile
patterns made the first description allocate 6 GB and abort the process. This check accepts exactly
the BERT WordPiece pipeline of the shipped encoder (all-MiniLM-L6-v2): a `BertNormalizer`, a
`BertPreTokenizer`, a `WordPiece` model with a bounded vocabulary, a `TemplateProcessing` or
`BertProcessing` post-processor, a `WordPiece` decoder, and bounded added tokens. Truncation and
padding are checked for type only: the SDK sets its own (`sdk.text.encoder.configure_tokenizer`).

>>> check_tokenizer_json(b'{"model": {"type": "BPE"}}')
Traceback (most recent call last):
...
sdk.errors.BundleError: member tokenizer.json: model must be a WordPiece model
"""

from __future__ import annotations

from sdk.errors import BundleError
from sdk.format.manifest import load_json
from sdk.format.passed_checks import PASSED

MAX_TOKENIZER_BYTES = 4 * 1024 * 1024
MAX_VOCAB, MAX_TOKEN_CHARS, MAX_ADDED_TOKENS, MAX_TEMPLATE_ITEMS = 200_000, 100, 1000, 16
WHAT = "member tokenizer.json"
ADDED_TOKEN_FIELDS = {"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"}
TOP_LEVEL = {"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer", "model",
             "post_processor", "decoder"}


def _need(condition: bool, message: str) -> None:
    if not condition:
        raise BundleError(f"{WHAT}: {message}")


def _flags(obj: dict, keys: dict[str, tuple]) -> bool:
    return set(obj) == {"type", *keys} and all(type(obj[k]) in types for k, types in keys.items())


def _token(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_TOKEN_CHARS


def check_tokenizer_json(raw: bytes, digest: bytes | None = None) -> str:
    """The tokenizer JSON text if it describes the encoder's WordPiece tokenizer; BundleError otherwise. The same
    bytes passed before in this process pass again without the walk (sdk/format/passed_checks.py; `digest`:
    their SHA-256, if the caller has it)."""
    PASSED.check_once("tokenizer.json", raw, _check_tokenizer, digest)
    return raw.decode("utf-8")


def _check_tokenizer(raw: bytes) -> None:
    _need(len(raw) <= MAX_TOKENIZER_BYTES, f"larger than {MAX_TOKENIZER_BYTES} bytes")
    spec = load_json(raw, WHAT, max_depth=8)
    _need(isinstance(spec, dict) and set(spec) <= TOP_LEVEL and "model" in spec,
          f"must be an object with 'model' and only the fields {sorted(TOP_LEVEL)}")
    model = spec["model"]
    _need(isinstance(model, dict) and model.get("type") == "WordPiece", "model must be a WordPiece model")
    _need(_flags(model, {"unk_token": (str,), "continuing_subword_prefix": (str,),
                         "max_input_chars_per_word": (int,), "vocab": (dict,)}),
          "WordPiece model fields are not the expected ones")
    vocab = model["vocab"]
    _need(0 < len(vocab) <= MAX_VOCAB, f"vocabulary must have 1-{MAX_VOCAB} tokens")
    _need(all(_token(t) and type(i) is int for t, i in vocab.items()), "vocabulary entries must be short tokens")
    _need(sorted(vocab.values()) == list(range(len(vocab))), "vocabulary ids must be 0..N-1, each once")
    _need(model["unk_token"] in vocab and model["continuing_subword_prefix"] == "##"
          and 1 <= model["max_input_chars_per_word"] <= 1000, "unknown token, prefix or word length out of range")
    normalizer = spec.get("normalizer")
    _need(normalizer is None or (isinstance(normalizer, dict) and normalizer.get("type") == "BertNormalizer" and _flags(
        normalizer, {"clean_text": (bool,), "handle_chinese_chars": (bool,), "strip_accents": (bool, type(None)),
                     "lowercase": (bool,)})), "normalizer must be a BertNormalizer")
    _need(spec.get("pre_tokenizer") == {"type": "BertPreTokenizer"}, "pre-tokenizer must be a BertPreTokenizer")
    decoder = spec.get("decoder")
    _need(decoder is None or (isinstance(decoder, dict) and decoder.get("type") == "WordPiece"
                              and _flags(decoder, {"prefix": (str,), "cleanup": (bool,)})),
          "decoder must be a WordPiece decoder")
    _check_post_processor(spec.get("post_processor"), vocab)
    added = spec.get("added_tokens", [])
    # Matched in the raw text as written (what the shipped encoder's tokens do, and all the Java mirror,
    # android_demo/core Tokenizer.java, implements): not normalized, not stripped, not whole-word only.
    _need(isinstance(added, list) and len(added) <= MAX_ADDED_TOKENS and all(
        isinstance(t, dict) and set(t) == ADDED_TOKEN_FIELDS and _token(t["content"]) and type(t["id"]) is int
        and 0 <= t["id"] < len(vocab) and type(t["special"]) is bool
        and all(t[k] is False for k in ("single_word", "lstrip", "rstrip", "normalized")) for t in added),
        f"added_tokens must be at most {MAX_ADDED_TOKENS} short tokens of the vocabulary, matched as written")
    for key in ("truncation", "padding"):
        _need(spec.get(key) is None or isinstance(spec[key], dict), f"{key} must be an object or null")


def _check_post_processor(post: object, vocab: dict[str, int]) -> None:
    if post is None:
        return
    _need(isinstance(post, dict) and post.get("type") in ("TemplateProcessing", "BertProcessing"),
          "post-processor must be TemplateProcessing or BertProcessing")
    if post["type"] == "BertProcessing":
        _need(set(post) == {"type", "sep", "cls"} and all(
            isinstance(post[k], list) and len(post[k]) == 2 and post[k][0] in vocab and post[k][1] == vocab[post[k][0]]
            for k in ("sep", "cls")), "BertProcessing must name [SEP] and [CLS] tokens of the vocabulary")
        return
    _need(set(post) == {"type", "single", "pair", "special_tokens"}, "TemplateProcessing fields are not the expected")
    for key in ("single", "pair"):
        _need(isinstance(post[key], list) and len(post[key]) <= MAX_TEMPLATE_ITEMS,
              f"template {key!r} must be a short list")
    specials = post["special_tokens"]
    _need(isinstance(specials, dict), "special tokens must be an object")
    items = post["single"]
    _need(all(isinstance(i, dict) and len(i) == 1 and (
        (isinstance(i.get("Sequence"), dict) and i["Sequence"].get("id") == "A")
        or (isinstance(i.get("SpecialToken"), dict) and i["SpecialToken"].get("id") in specials)) for i in items)
        and sum("Sequence" in i for i in items) == 1,
        "the single template must be special tokens of the template around sequence A, once")
    _need(len(specials) <= MAX_TEMPLATE_ITEMS and all(
        isinstance(s, dict) and set(s) == {"id", "ids", "tokens"} and isinstance(s["ids"], list)
        and isinstance(s["tokens"], list) and len(s["ids"]) == len(s["tokens"]) <= 4
        and all(t in vocab and vocab[t] == i for t, i in zip(s["tokens"], s["ids"], strict=True))
        for s in specials.values()), "special tokens must be tokens of the vocabulary with their ids")
