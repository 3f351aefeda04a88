"""Few-shot enrollment (sdk.fewshot, sdk.prototypes): selection, the prototype head, export, bad input."""

import json

import numpy as np
import onnxruntime as ort
import pytest

import sdk
from sdk.errors import DescriptionError, ExamplesError, ImageError
from sdk.fewshot import Candidate, Scored, best, candidates, mcnemar_z, most_accurate
from sdk.prototypes import CosineHead, leave_one_out_accuracy, leave_one_out_margin, prototype_rows


def images_of(tiny_data, split, wnid, n):
    s = getattr(tiny_data, split)
    return np.asarray(s.images[np.flatnonzero(s.labels == tiny_data.wnids.index(wnid))[:n]])


def test_leave_one_out_accuracy_leaves_the_point_itself_out():
    # Each point's nearest other point is of the other class: 0, although each is nearest to itself.
    features = np.array([[1, 0], [0.9, 0.1], [0.1, 0.9], [0, 1]], np.float32)
    assert leave_one_out_accuracy(features, np.array([0, 1, 1, 0])) == 0.0
    assert leave_one_out_accuracy(features, np.array([0, 0, 1, 1])) == 1.0
    # margin: nearest same minus nearest other similarity, averaged
    labels = np.array([0, 0, 1, 1])
    unit = features / np.linalg.norm(features, axis=1, keepdims=True)
    sims = unit @ unit.T
    expected = np.mean([sims[0, 1] - sims[0, 2], sims[1, 0] - sims[1, 2], sims[2, 3] - sims[2, 1],
                        sims[3, 2] - sims[3, 1]])
    assert leave_one_out_margin(features, labels) == pytest.approx(expected, abs=1e-6)


def test_prototype_rows_are_scaled_unit_means_of_unit_features():
    features = np.array([[3, 0], [0, 1], [0, 2], [0, 5]], np.float32)
    rows = prototype_rows(features, np.array([0, 0, 1, 1]), 2, temperature=7.0)
    np.testing.assert_allclose(rows, [[7 / np.sqrt(2), 7 / np.sqrt(2)], [0, 7]], atol=1e-5)
    logits = CosineHead(rows).logits(np.array([[10, 0]], np.float32))  # the norm of f does not count
    np.testing.assert_allclose(logits, [[7 / np.sqrt(2), 0]], atol=1e-5)


def scored_with(hits: list[int], margin: float = 0.0) -> Scored:
    return Scored(Candidate("x", np.zeros((4, 1))), float(np.mean(hits)), margin, np.array(hits, bool))


def test_most_accurate_breaks_ties_by_margin_then_order():
    assert most_accurate([scored_with([1, 0]), scored_with([1, 1], -0.2), scored_with([1, 1], 0.0)]) == 2
    assert most_accurate([scored_with([1, 1]), scored_with([1, 1])]) == 0


def test_best_keeps_the_first_candidate_without_evidence_against_it():
    first = scored_with([1] * 10 + [0] * 10)
    assert best([first, scored_with([1] * 13 + [0] * 7)]) == 0  # 3 more right: z = 1.73
    five_more = scored_with([1] * 15 + [0] * 5)  # z = 2.24
    assert best([first, five_more]) == 1
    # Of those that pass, the most accurate; one that does not pass never wins, however accurate.
    six_more = scored_with([1] * 16 + [0] * 4)
    assert best([first, five_more, six_more]) == 2
    swapped = scored_with([0] * 10 + [1] * 10)  # as accurate, different examples: z = 0
    assert best([first, swapped]) == 0
    assert best([first, five_more], switch_z=3.0) == 0
    assert mcnemar_z(np.array([1, 0], bool), np.array([1, 0], bool)) == 0.0


def test_candidates_are_description_names_uniform_then_each_basis(tiny_sdk):
    pool = candidates(tiny_sdk, ["red disc", "a moth"], "round shapes")
    q = tiny_sdk.num_bases
    assert [c.name for c in pool] == ["mixer: description", "mixer: class names", "uniform",
                                      *(f"basis {b}" for b in range(q))]
    for c in pool:
        assert c.alpha.shape == (4, q) and np.allclose(c.alpha.sum(1), 1)
    assert np.array_equal(pool[3].alpha[:, 0], np.ones(4)) and pool[3].alpha[:, 1:].sum() == 0


def test_enrollment_selects_the_best_candidate_and_classifies_unseen_names(tiny_sdk, tiny_data):
    wnids = tiny_data.wnids[:3]
    examples = {f"my thing {i}": images_of(tiny_data, "train", w, 5) for i, w in enumerate(wnids)}
    model = sdk.personalize(tiny_sdk, examples=examples)
    assert model.classes == list(examples) and model.head == "cosine"
    assert model.class_indices.tolist() == [-1, -1, -1]  # names the bundle does not know
    scores = {line.split(": leave-one-out")[0]: float(line.split("accuracy ")[1].split(",")[0])
              for line in model.resolution[1:-1]}
    assert len(scores) == tiny_sdk.num_bases + 2
    chosen = model.resolution[-1].split("'")[1]
    # The mixer's prediction, or a candidate that got more examples right (see test_best_keeps_...).
    assert chosen == "mixer: class names" or scores[chosen] > scores["mixer: class names"]
    val = np.concatenate([images_of(tiny_data, "val", w, 4) for w in wnids])
    truth = np.repeat(np.arange(3), 4)
    accuracy = np.mean(model.logits(val).argmax(1) == truth)
    assert accuracy > 0.5, accuracy  # chance: 1/3
    p = model.predict_proba(val)
    np.testing.assert_allclose(p.sum(1), 1, atol=1e-5)
    for key in ("images", "candidates", "fuse_fold", "features", "score", "total"):
        assert model.timings[key] >= 0


def test_names_the_bundle_knows_keep_their_class_index(tiny_sdk, tiny_data):
    name = tiny_sdk.classes[0]
    model = sdk.personalize(tiny_sdk, examples={name: images_of(tiny_data, "train", tiny_data.wnids[0], 3),
                                              "something else": images_of(tiny_data, "train", tiny_data.wnids[5], 3)})
    assert model.class_indices.tolist() == [0, -1]


def test_a_description_adds_its_candidate(tiny_sdk, tiny_data):
    examples = {w: images_of(tiny_data, "train", w, 3) for w in tiny_data.wnids[:2]}
    model = sdk.personalize(tiny_sdk, "round shapes", examples=examples)
    assert any(line.startswith("mixer: description:") for line in model.resolution)
    assert model.classes == tiny_data.wnids[:2]


def test_the_exported_network_computes_the_cosine_head(tiny_sdk, tiny_data, tmp_path):
    pytest.importorskip("torch")
    import torch

    from export.personalized import PersonalizedNetwork

    # names the bundle does not know: the prototype head (known names may keep the trained rows)
    examples = {f"mine {i}": images_of(tiny_data, "train", w, 3) for i, w in enumerate(tiny_data.wnids[:4])}
    model = sdk.personalize(tiny_sdk, examples=examples, temperature=5.0)
    assert model.head == "cosine"
    val = np.concatenate([images_of(tiny_data, "val", w, 2) for w in tiny_data.wnids[:4]])
    with torch.no_grad():
        torch_logits = PersonalizedNetwork.of(model)(torch.from_numpy(model.preprocessing.normalize(val))).numpy()
    np.testing.assert_allclose(torch_logits, model.logits(val), atol=1e-4)
    assert np.abs(model.logits(val)).max() <= 5.0 + 1e-4  # cosine x temperature
    path = model.export(tmp_path / "mine.pte")
    assert json.loads(path.with_name("mine.pte.json").read_text())["head"] == "cosine"
    session = ort.InferenceSession(str(model.export(tmp_path / "mine.onnx")), providers=["CPUExecutionProvider"])
    (onnx_logits,) = session.run(None, {"image": model.preprocessing.normalize(val)})
    np.testing.assert_allclose(onnx_logits, model.logits(val), atol=1e-4)


def test_bad_examples_raise_typed_errors(tiny_sdk, tiny_data, monkeypatch):
    a, b = images_of(tiny_data, "train", tiny_data.wnids[0], 3), images_of(tiny_data, "train", tiny_data.wnids[1], 3)
    cases = [
        ({"a": a}, ExamplesError, "2 to"),
        ([("a", a), ("b", b)], ExamplesError, "mapping"),
        ({"a": a, "b": b[:1]}, ExamplesError, "at least 2"),
        ({"a": a, "b": b[0]}, ExamplesError, "at least 2"),          # one image given as an array
        ({"a": a, "b": "one.jpg"}, ExamplesError, "at least 2"),     # one path
        ({"Moth": a, " moth ": b}, ExamplesError, "same name"),
        ({"caf\u00e9": a, "cafe\u0301": b}, ExamplesError, "same name"),   # NFC and NFD spellings of one name
        ({"a": a, 3: b}, ExamplesError, "strings"),
        ({"a": a, "": b}, ExamplesError, "empty"),
        ({"a": a, "b\u200b": b}, ExamplesError, "invisible"),
        ({"a": a, "b": 7}, ExamplesError, "list of images"),
        ({"a": a, "b": [1, 2]}, ImageError, "cannot read"),
        ({"a": a, "b": b[..., :2]}, ImageError, "3 channels"),
    ]
    for examples, error, words in cases:
        with pytest.raises(error, match=words):
            sdk.personalize(tiny_sdk, examples=examples)
    assert issubclass(ExamplesError, DescriptionError)
    with pytest.raises(ExamplesError, match="temperature"):
        sdk.personalize(tiny_sdk, examples={"a": a, "b": b}, temperature=float("nan"))
    with pytest.raises(DescriptionError, match="description, examples"):
        sdk.personalize(tiny_sdk)
    monkeypatch.setattr("sdk.fewshot.MAX_EXAMPLES", 5)
    with pytest.raises(ExamplesError, match="at most 5"):
        sdk.personalize(tiny_sdk, examples={"a": a, "b": b})


def known_class_examples(tiny_sdk, tiny_data, classes, swap=False, n=6):
    """{bundle class name: training images of that class} (with swap: of the next class in `classes`)."""
    sources = classes[1:] + classes[:1] if swap else classes
    return {tiny_sdk.classes[c]: images_of(tiny_data, "train", tiny_data.wnids[s], n)
            for c, s in zip(classes, sources, strict=True)}


def test_known_classes_keep_the_trained_rows_when_they_fit_the_examples_as_well(tiny_sdk, tiny_data, tmp_path):
    from sdk.stopwatch import Stopwatch

    classes = [0, 1, 2, 3]
    model = sdk.personalize(tiny_sdk, examples=known_class_examples(tiny_sdk, tiny_data, classes))
    head_line = [line for line in model.resolution if line.startswith("head:")]
    assert len(head_line) == 1 and head_line[0].startswith("head: the bundle's trained rows"), model.resolution
    assert model.head == "linear" and model.class_indices.tolist() == classes
    assert model.classes == [tiny_sdk.classes[c] for c in classes]
    # the candidates were scored by their own trained rows, not by the 1-NN proxy
    scored = [line for line in model.resolution if ": trained rows' accuracy" in line]
    assert len(scored) == 2 + tiny_sdk.num_bases and not any("1-NN" in line for line in model.resolution)
    # the named path's network with the selected mixture: the same logits
    named = tiny_sdk._model(np.array(classes), model.alpha, [], Stopwatch())
    images = np.concatenate([images_of(tiny_data, "val", tiny_data.wnids[c], 4) for c in classes])
    np.testing.assert_allclose(model.logits(images), named.logits(images), atol=1e-4)
    session = ort.InferenceSession(str(model.export(tmp_path / "known.onnx")), providers=["CPUExecutionProvider"])
    (onnx_logits,) = session.run(None, {"image": model.preprocessing.normalize(images)})
    np.testing.assert_allclose(onnx_logits, model.logits(images), atol=1e-4)


def test_known_names_on_other_photos_keep_the_prototypes(tiny_sdk, tiny_data):
    """Each class named after another bundle class: its trained rows get the examples wrong."""
    classes = [0, 1, 2, 3]
    model = sdk.personalize(tiny_sdk, examples=known_class_examples(tiny_sdk, tiny_data, classes, swap=True))
    assert model.head == "cosine" and model.class_indices.tolist() == classes
    assert any(line.startswith("head: prototypes") for line in model.resolution), model.resolution
    assert sum("leave-one-out 1-NN accuracy" in line for line in model.resolution) == 2 + tiny_sdk.num_bases


def test_score_rows_counts_what_each_candidate_s_own_rows_get_right(tiny_sdk, tiny_data):
    from sdk.fewshot import candidate_features, fixed_candidates, score_rows

    classes = np.array([1, 3])
    images = np.concatenate([images_of(tiny_data, "train", tiny_data.wnids[c], 4) for c in classes])
    labels = np.repeat(np.arange(2), 4)
    for candidate in fixed_candidates(tiny_sdk.num_bases)[:3]:
        _, features = candidate_features(tiny_sdk, candidate.alpha, images)
        scored = score_rows(tiny_sdk, candidate, features, labels, classes)
        weight, bias = tiny_sdk.bundle.bases.mixed_head(candidate.alpha)
        logits = features @ weight[classes].T + bias[classes]
        np.testing.assert_array_equal(scored.hits, logits.argmax(1) == labels)
        own, other = logits[np.arange(8), labels], logits[np.arange(8), 1 - labels]
        assert scored.margin == pytest.approx(np.mean(own - other), rel=1e-5)


def test_choose_head_compares_trained_rows_with_leave_one_out_prototypes(tiny_sdk, tiny_data):
    from sdk.fewshot import candidate_features, choose_head
    from sdk.prototypes import leave_one_out_prototype_hits

    classes = np.array([0, 1, 2])
    images = np.concatenate([images_of(tiny_data, "train", tiny_data.wnids[c], 5) for c in classes])
    labels = np.repeat(np.arange(3), 5)
    alpha = candidates(tiny_sdk, [tiny_sdk.classes[c] for c in classes], None)[0].alpha
    _, features = candidate_features(tiny_sdk, alpha, images)
    choice = choose_head(tiny_sdk, alpha, features, labels, classes)
    weight, bias = tiny_sdk.bundle.bases.mixed_head(alpha)
    expected = np.mean((features @ weight[classes].T + bias[classes]).argmax(1) == labels)
    assert choice.trained_accuracy == pytest.approx(expected)
    assert choice.prototype_accuracy == pytest.approx(np.mean(leave_one_out_prototype_hits(features, labels, 3)))
    assert choice.trained == (choice.trained_accuracy >= choice.prototype_accuracy)
    assert choose_head(tiny_sdk, alpha, features, labels, np.array([0, -1, 2])) is None  # a new class
    assert choose_head(tiny_sdk, alpha, features, labels, np.array([0, 2, 2])) is None  # two names, one class


def test_two_names_of_one_bundle_class_keep_the_prototypes(tiny_sdk, tiny_data):
    examples = {tiny_sdk.classes[0]: images_of(tiny_data, "train", tiny_data.wnids[0], 4),
                tiny_data.wnids[0]: images_of(tiny_data, "train", tiny_data.wnids[0], 8)[4:]}
    model = sdk.personalize(tiny_sdk, examples=examples)
    assert model.head == "cosine" and model.class_indices.tolist() == [0, 0]
