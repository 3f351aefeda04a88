"""Few-shot enrollment: a model for the user's own classes from a few photos of each.

    model = sdk.personalize(bundle, examples={"my moth": [img1, img2, ...], "other moth": [...]})

Which network: every candidate mixture is scored on the examples and the best is kept (expert selection
by a performance proxy, Expert Models section 3.3). The candidates are each basis alone, the uniform
mix of the bases, the mixer's prediction from the class names (a name the bundle knows uses its class
embedding, any other name is embedded by the text encoder) and, if a description is given, the
mixer's prediction from the description. The proxy is the leave-one-out 1-nearest-neighbour accuracy
of the candidate's penultimate features on the examples (`sdk.prototypes`); ties go to the higher mean
nearest-neighbour margin, then to the earlier candidate in that order.

Which head: class prototypes (mean of L2-normalised features) with a cosine classifier, so classes the
bundle never saw work. A description only adds its candidate: the task's classes are the examples'.

>>> model = sdk.personalize(bundle, examples={"cat": cats, "dog": dogs})     # doctest: +SKIP
>>> model.resolution                                                          # doctest: +SKIP
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

from .errors import DescriptionError, ExamplesError
from .images import to_uint8_batch
from .mixer import predict_alpha
from .model import PREDICT_BATCH, PersonalizedModel
from .prototypes import (
    DEFAULT_TEMPERATURE,
    CosineHead,
    CosineNetwork,
    FeatureNetwork,
    leave_one_out_accuracy,
    leave_one_out_margin,
    prototype_rows,
)
from .tasks import MAX_DESCRIPTION_CHARS, TaskOptions, check_text, normalize_name

if TYPE_CHECKING:
    from .runtime import TaperBundle

MAX_EXAMPLE_CLASSES = 1000
# Bounds memory: the decoded examples are uint8 [N, S, S, 3] (5,000 images at 224 px: 750 MB).
MAX_EXAMPLES = 5000


@dataclass
class Examples:
    """The user's examples, decoded: class names and uint8 images [N, S, S, 3] with their labels [N]."""
    names: list[str]
    images: np.ndarray
    labels: np.ndarray


@dataclass
class Candidate:
    """A mixture to score: its name in the resolution ("basis 3", "uniform", ...) and alpha [4, Q]."""
    name: str
    alpha: np.ndarray


@dataclass
class Scored:
    candidate: Candidate
    accuracy: float   # leave-one-out 1-NN accuracy on the examples
    margin: float     # mean nearest-same minus nearest-other similarity (breaks ties)


def read_examples(examples: Mapping, input_size: int) -> Examples:
    """Check and decode {class name: images}; ExamplesError (or ImageError for an image) if unusable."""
    if not isinstance(examples, Mapping):
        raise ExamplesError(f"examples must be a mapping of class name to images, not {type(examples).__name__}")
    if not 2 <= len(examples) <= MAX_EXAMPLE_CLASSES:
        raise ExamplesError(f"examples need 2 to {MAX_EXAMPLE_CLASSES} classes, got {len(examples)}")
    seen: dict[str, str] = {}
    for name, images in examples.items():
        if not isinstance(name, str):
            raise ExamplesError(f"class names must be strings, got {type(name).__name__}")
        if len(name) > MAX_DESCRIPTION_CHARS:
            raise ExamplesError(f"a class name is longer than {MAX_DESCRIPTION_CHARS} characters")
        try:
            key = normalize_name(check_text(name, f"class name {name!r}"))
        except DescriptionError as e:
            raise ExamplesError(str(e)) from None
        if not key:
            raise ExamplesError("a class name is empty")
        if key in seen:
            raise ExamplesError(f"class names {seen[key]!r} and {name!r} are the same name")
        seen[key] = name
        count = _count(images)
        if count < 2:
            raise ExamplesError(f"class {name!r} has {count} image(s): leave-one-out selection needs at least 2")
    total = sum(_count(images) for images in examples.values())
    if total > MAX_EXAMPLES:
        raise ExamplesError(f"at most {MAX_EXAMPLES} example images in all, got {total}")
    batches = [to_uint8_batch(images, input_size)[0] for images in examples.values()]
    labels = np.concatenate([np.full(len(b), k, np.int64) for k, b in enumerate(batches)])
    return Examples([n.strip() for n in examples], np.concatenate(batches), labels)


def _count(images) -> int:
    """How many images `images` holds (1 for a single image), without decoding any."""
    if isinstance(images, (str, os.PathLike, Image.Image)):
        return 1
    if isinstance(images, np.ndarray):
        return len(images) if images.ndim == 4 else 1
    if isinstance(images, (list, tuple)):
        return len(images)
    raise ExamplesError(f"the images of a class must be a list of images or an array, not {type(images).__name__}")


def candidates(bundle: TaperBundle, names: list[str], description: str | None,
               options: TaskOptions | None = None) -> list[Candidate]:
    """What `enroll` scores, in tie-breaking order: the mixer from the description (if any), the mixer
    from the class names, the uniform mix, then each basis alone."""
    out = []
    if description is not None:
        task = bundle.resolver.resolve(description, options)
        out.append(Candidate("mixer: description", _alpha(bundle, task.embedding)))
    out.append(Candidate("mixer: class names", _alpha(bundle, names_embedding(bundle, names))))
    return out + fixed_candidates(bundle.num_bases)


def fixed_candidates(num_bases: int) -> list[Candidate]:
    """The candidates that do not depend on the task: the uniform mix, then each basis alone."""
    q = num_bases
    out = [Candidate("uniform", np.full((4, q), 1 / q, np.float32))]
    for b in range(q):
        alpha = np.zeros((4, q), np.float32)
        alpha[:, b] = 1
        out.append(Candidate(f"basis {b}", alpha))
    return out


def names_embedding(bundle: TaperBundle, names: list[str]) -> np.ndarray:
    """The task embedding of a list of class names: the unit mean of their embeddings (a name the bundle
    knows uses its class embedding, as training did; any other is embedded by the text encoder)."""
    resolver = bundle.resolver
    rows = []
    for name in names:
        index = resolver.by_name.get(normalize_name(name))
        rows.append(resolver.embeddings[index] if index is not None else bundle.embedder(name))
    mean = np.mean(rows, axis=0)
    return (mean / max(float(np.linalg.norm(mean)), 1e-12)).astype(np.float32)


def _alpha(bundle: TaperBundle, embedding: np.ndarray) -> np.ndarray:
    spec = bundle.mixer_spec
    return predict_alpha(bundle.bundle.mixer, spec.layers, spec.blocks, bundle.num_bases, embedding)


def candidate_features(bundle: TaperBundle, alpha: np.ndarray, normalized: np.ndarray,
                       timings: dict[str, float] | None = None) -> tuple[FeatureNetwork, np.ndarray]:
    """The feature network of one mixture and its features [N, C] of normalized images [N, 3, S, S]."""
    timings = {} if timings is None else timings
    start = time.perf_counter()
    engine = bundle.engine
    with engine.weight_buffer() as target:
        engine.fuse_and_fold(alpha, target)
        network = FeatureNetwork(engine, target)
    mid = time.perf_counter()
    features = np.concatenate([network.run(normalized[i:i + PREDICT_BATCH])
                               for i in range(0, len(normalized), PREDICT_BATCH)])
    timings["fuse_fold"] = timings.get("fuse_fold", 0.0) + (mid - start) * 1000
    timings["features"] = timings.get("features", 0.0) + (time.perf_counter() - mid) * 1000
    return network, features


def best(scored: list[Scored]) -> int:
    """Index of the highest accuracy; ties: the higher margin, then the earlier candidate."""
    return max(range(len(scored)), key=lambda i: (scored[i].accuracy, scored[i].margin, -i))


def enroll(bundle: TaperBundle, examples: Mapping, description: str | None = None,
           options: TaskOptions | None = None, temperature: float = DEFAULT_TEMPERATURE) -> PersonalizedModel:
    """A PersonalizedModel over the examples' classes (see the module docstring); `sdk.personalize`
    with `examples=` calls this."""
    if not isinstance(temperature, (int, float)) or not 0 < temperature <= 1000:
        raise ExamplesError(f"temperature must be a number in (0, 1000], got {temperature!r}")
    bundle.bundle.check_unchanged()
    timings: dict[str, float] = {}
    start = time.perf_counter()
    data = read_examples(examples, bundle.preprocessing.input_size)
    normalized = bundle.preprocessing.normalize(data.images)
    timings["images"] = (time.perf_counter() - start) * 1000
    t = time.perf_counter()
    pool = candidates(bundle, data.names, description, options)
    timings["candidates"] = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    if bundle._compile_engine():
        timings["compile"] = (time.perf_counter() - t) * 1000  # once per bundle, unless warm_up() did it
    scored, kept, kept_features = [], None, None
    for candidate in pool:
        network, features = candidate_features(bundle, candidate.alpha, normalized, timings)
        t = time.perf_counter()
        scored.append(Scored(candidate, leave_one_out_accuracy(features, data.labels),
                             leave_one_out_margin(features, data.labels)))
        if best(scored) == len(scored) - 1:  # keep only the best network so far (one weight buffer)
            kept, kept_features = network, features
        timings["score"] = timings.get("score", 0.0) + (time.perf_counter() - t) * 1000
    winner = scored[best(scored)]
    weight = prototype_rows(kept_features, data.labels, len(data.names), float(temperature))
    bias = np.zeros(len(data.names), np.float32)
    timings = {k: round(v, 3) for k, v in timings.items()}
    timings["total"] = round((time.perf_counter() - start) * 1000, 3)
    resolution = [f"{len(data.names)} classes from {len(data.labels)} example images",
                  *(f"{s.candidate.name}: leave-one-out 1-NN accuracy {s.accuracy:.3f}, margin {s.margin:.3f}"
                    for s in scored),
                  f"selected {winner.candidate.name!r}"]
    known = [bundle.resolver.by_name.get(normalize_name(n), -1) for n in data.names]
    return PersonalizedModel(CosineNetwork(kept, CosineHead(weight)), weight, bias, np.array(known, np.int64),
                             data.names, data.names, bundle.preprocessing, winner.candidate.alpha, timings,
                             resolution, bundle, head="cosine")
