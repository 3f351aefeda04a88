"""Graphs and tokenizers in a bundle are untrusted: every hostile member the reliability suite builds is a
BundleError at sdk.load, and the encoder the exporter writes has a structure the SDK knows."""


import numpy as np
import pytest

import sdk
from export.bundle_edits import with_member_bytes
from export.golden import HOSTILE_CONCEPTS
from scripts import fuzz_bundle
from sdk.errors import BundleError, EncoderError
from sdk.format.graph_check import KNOWN_ENCODER_STRUCTURES, encoder_structure

LOADS_BY_DESIGN = {"encoder_nan_weights"}  # weights may differ; a NaN embedding is caught when encoding


@pytest.fixture(scope="module")
def base(tiny_bundle, tmp_path_factory) -> bytes:
    return fuzz_bundle.base_bundle(tiny_bundle, tmp_path_factory.mktemp("base"))


def test_the_exported_encoder_has_a_known_structure():
    from export.text_encoder import cached_text_encoder

    assert encoder_structure((cached_text_encoder() / "encoder.onnx").read_bytes()) in KNOWN_ENCODER_STRUCTURES


def test_every_hostile_graph_tokenizer_and_class_file_is_a_bundle_error(base, tmp_path):
    hostile = fuzz_bundle.hostile_members(base)
    # 9 backbone, 4 encoder, 12 tokenizer, 12 classes.json (6 of them a class's aliases or description),
    # 1 embedding table, the concepts
    assert len(hostile) == 38 + len(HOSTILE_CONCEPTS)
    for name, member, data in hostile:
        path = tmp_path / f"{name}.taper"
        path.write_bytes(with_member_bytes(base, member, data))
        if name in LOADS_BY_DESIGN:
            bundle = sdk.load(path)
            try:
                probabilities = sdk.personalize(bundle, "blue").predict_proba(np.zeros((32, 32, 3), np.uint8))
                assert np.isfinite(probabilities).all()
            except EncoderError:
                pass
            continue
        # A concept edit may be caught by the embeddings' member (one row per concept), which is read second.
        where = f"{member}|class_embeddings" if name.startswith("concepts_") else member
        with pytest.raises(BundleError, match=where):
            sdk.load(path)


def test_a_member_that_passed_is_not_walked_again_and_other_bytes_are(monkeypatch):
    """sdk/format/passed_checks.py: the same encoder graph and tokenizer bytes pass a second load without the
    walk; one byte changed, or a refusal, is checked every time."""
    from export.text_encoder import cached_text_encoder
    from sdk.format import graph_check, passed_checks, tokenizer_check

    fresh = passed_checks.PassedChecks()
    monkeypatch.setattr(graph_check, "PASSED", fresh)
    monkeypatch.setattr(tokenizer_check, "PASSED", fresh)
    walks = []
    structure = graph_check.encoder_structure
    monkeypatch.setattr(graph_check, "encoder_structure", lambda g: walks.append(1) or structure(g))
    graph = (cached_text_encoder() / "encoder.onnx").read_bytes()
    assert graph_check.check_encoder_graph(graph) is graph and graph_check.check_encoder_graph(graph) is graph
    assert len(walks) == 1
    edited = bytearray(graph)
    edited[len(graph) // 2] ^= 1            # a weight's byte: the structure is the same, the bytes are not
    graph_check.check_encoder_graph(bytes(edited))
    assert len(walks) == 2
    for _ in range(2):                       # a refusal is never remembered
        with pytest.raises(BundleError):
            graph_check.check_encoder_graph(b"not a graph")
    assert len(walks) == 4
    tokenizer = (cached_text_encoder() / "tokenizer.json").read_bytes()
    text = tokenizer_check.check_tokenizer_json(tokenizer)
    assert fresh.passed("tokenizer.json", tokenizer) and tokenizer_check.check_tokenizer_json(tokenizer) == text
    assert not fresh.passed("tokenizer.json", tokenizer + b" ") and not fresh.passed("text_encoder.onnx", tokenizer)
