import numpy as np
import pytest
import torch

from export.minilm import load_reference_encoder, reference_model_dir
from export.text_encoder import cached_text_encoder
from sdk import DescriptionError, EncoderError, TextEncoder

PHRASES = ["moths", "kitchen appliances", "a drinking glass with a base and stem", "bicycle, pedestrian, tree",
           "Egyptian cat", "a photo of a school bus.", "insects", "dogs", "", "ünïcödé ☃ text",
           "a very long description " * 40]


@pytest.fixture(scope="module")
def encoder_dir():
    return cached_text_encoder()


@pytest.fixture(scope="module")
def encoder(encoder_dir):
    return TextEncoder.from_dir(encoder_dir)


@pytest.fixture(scope="module")
def reference():
    return load_reference_encoder()


def reference_embed(reference, encoder, texts):
    batch = encoder.tokenizer.encode_batch(texts)
    ids = torch.tensor([e.ids for e in batch])
    mask = torch.tensor([e.attention_mask for e in batch])
    with torch.no_grad():
        return reference(ids, mask).numpy()


def test_onnx_int8_encoder_matches_reference(encoder, reference):
    got = encoder.encode(PHRASES)
    want = reference_embed(reference, encoder, PHRASES)
    cosine = (got * want).sum(1)
    assert cosine.min() >= 0.995, cosine
    assert np.allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)


def test_plain_torch_reference_matches_transformers_bert(encoder, reference):
    # Our plain-torch MiniLM against the canonical implementation with the same weights.
    transformers = pytest.importorskip("transformers")
    bert = transformers.BertModel.from_pretrained(str(reference_model_dir()), local_files_only=True).eval()
    texts = PHRASES[:6]
    batch = encoder.tokenizer.encode_batch(texts)
    ids = torch.tensor([e.ids for e in batch])
    mask = torch.tensor([e.attention_mask for e in batch])
    with torch.no_grad():
        hidden = bert(input_ids=ids, attention_mask=mask).last_hidden_state
    pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
    pooled = torch.nn.functional.normalize(pooled, dim=-1).numpy()
    assert np.abs(pooled - reference_embed(reference, encoder, texts)).max() < 1e-5


def test_queries_are_padded_to_the_longest_text_not_128(encoder):
    batch = encoder.tokenizer.encode_batch(["moths", "kitchen appliances"])
    assert len(batch[0].ids) == len(batch[1].ids) < 10
    long = encoder.tokenizer.encode_batch(["word " * 500])
    assert len(long[0].ids) == 128  # truncated


def test_batching_does_not_change_embeddings(encoder):
    one = np.concatenate([encoder.encode([p]) for p in PHRASES[:5]])
    assert np.abs(one - encoder.encode(PHRASES[:5])).max() < 1e-4


def test_class_embeddings_are_prompt_ensembles_and_semantic(encoder):
    names = ["Egyptian cat", "tabby cat", "school bus", "trolleybus"]
    emb = encoder.embed_class_names(names)
    assert emb.shape == (4, encoder.dim)
    assert np.allclose(np.linalg.norm(emb, axis=1), 1, atol=1e-5)
    sim = emb @ emb.T
    assert sim[0, 1] > sim[0, 2] and sim[2, 3] > sim[2, 0]
    single = encoder.embed_class_names(["Egyptian cat"], prompts=["a photo of a {}."])
    assert np.allclose(single, encoder.encode(["a photo of a Egyptian cat."]), atol=1e-5)


def test_encoder_file_is_small(encoder_dir):
    size = (encoder_dir / "encoder.onnx").stat().st_size
    assert 20e6 < size < 30e6  # int8 weights: a quarter of the 90 MB float model
    assert "Apache" in (encoder_dir / "NOTICE").read_text()


def test_bad_inputs_raise_typed_errors(encoder, encoder_dir, tmp_path):
    with pytest.raises(DescriptionError):
        encoder.encode("moths")  # a string, not a list of strings
    with pytest.raises(DescriptionError):
        encoder.encode([b"bytes"])
    with pytest.raises(DescriptionError):
        encoder.encode(["x" * 20_000])
    assert encoder.encode([]).shape == (0, encoder.dim)
    with pytest.raises(EncoderError):
        TextEncoder.from_dir(tmp_path)
    with pytest.raises(EncoderError):
        TextEncoder(b"not an onnx graph", (encoder_dir / "tokenizer.json").read_text())
    with pytest.raises(EncoderError):
        TextEncoder(encoder_dir / "encoder.onnx", "{not json")


def test_shared_encoder_makes_once_while_held_and_again_after_the_last_holder_is_gone(monkeypatch):
    from sdk.text import encoder as encoder_module

    monkeypatch.setattr(encoder_module, "_live", __import__("weakref").WeakValueDictionary())
    made = []

    class Made:   # stands for a TextEncoder: only its identity and lifetime matter here
        pass

    def make():
        made.append(Made())
        return made[-1]

    a = encoder_module.shared_encoder(("graph", "tokenizer"), make)
    assert encoder_module.shared_encoder(("graph", "tokenizer"), make) is a and len(made) == 1
    other = encoder_module.shared_encoder(("graph", "other tokenizer"), make)
    assert other is not a and len(made) == 2
    del a, other
    made.clear()   # the last holders: the entries go with them, no garbage collector needed
    assert len(encoder_module._live) == 0
    encoder_module.shared_encoder(("graph", "tokenizer"), make)
    assert len(made) == 1


def test_two_loads_of_a_bundle_share_its_encoder_but_not_with_other_bytes(tiny_bundle, tmp_path, monkeypatch):
    """Keyed by the bytes each bundle holds, not the checksums its manifest claims (unchecked with verify=False)."""
    import weakref

    import sdk
    from sdk.format.bundle import bundle_members
    from sdk.text import encoder as encoder_module

    monkeypatch.setattr(encoder_module, "_live", weakref.WeakValueDictionary())
    made = []
    real = TextEncoder.from_checked_members
    monkeypatch.setattr(TextEncoder, "from_checked_members",
                        classmethod(lambda cls, *a, **k: made.append(1) or real(*a, **k)))
    first, second = sdk.load(tiny_bundle), sdk.load(tiny_bundle)
    assert first.encoder is second.encoder and len(made) == 1
    assert np.array_equal(second.encoder.encode(["blue stripes"]), first.encoder.encode(["blue stripes"]))
    # The same bundle with one space of tokenizer.json made a tab in place, its manifest unchanged: a
    # different tokenizer under the same claimed checksum, read only with verify=False.
    raw = bytearray(tiny_bundle.read_bytes())
    tokenizer = bundle_members(bytes(raw))[1]["tokenizer.json"]
    at = bytes(raw).index(tokenizer) + tokenizer.index(b'{"version": "1.0", ') + len(b'{"version":')
    assert raw[at:at + 1] == b" "
    raw[at:at + 1] = b"\t"
    edited = tmp_path / "edited.taper"
    edited.write_bytes(bytes(raw))
    with pytest.raises(sdk.BundleError):
        sdk.load(edited)   # checked, the edit is refused
    unchecked = sdk.load(edited, verify=False)
    assert unchecked.encoder is not first.encoder and len(made) == 2
    del first, second, unchecked
    assert len(encoder_module._live) == 0   # freed with their last holders
