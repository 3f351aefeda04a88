"""Few-shot enrollment: a model for the user's own classes from a few photos of each.

    model = sdk.personalize(bundle, examples={"my moth": [img1, img2, ...], "other moth": [...]})

Which network: every candidate mixture is scored on the examples and the best is kept (expert selection
by a performance proxy, Expert Models section 3.3). The candidates are each basis alone, the uniform
mix of the bases, the mixer's prediction from the class names (a name the bundle knows uses its class
embedding, any other name is embedded by the text encoder) and, if a description is given, the
mixer's prediction from the description. The proxy is the leave-one-out 1-nearest-neighbour accuracy
of the candidate's penultimate features on the examples (`sdk.prototypes`).

The first candidate (the mixer's prediction) is kept unless another gets significantly more examples
right: McNemar's z > 2 on the examples one gets right and the other wrong. Among those that pass, the
highest accuracy wins (ties: the higher mean nearest-neighbour margin, then the earlier candidate).
Why: with 5 examples per class the proxy is mostly noise (docs/results/fewshot.md: within a task its
rank correlation with the candidates' query accuracy is 0.18), and taking its plain maximum picked
a candidate no better than one at random (39.08 vs 38.96 on unseen classes, against 40.09 for the
mixer's prediction); the guarded rule gives 39.95 (40.31 on seen classes, against 39.26).

Which head: class prototypes (mean of L2-normalised features) with a cosine classifier, so classes the
bundle never saw work. When every class name is one the bundle was trained on, its trained classifier
rows are the other choice, decided on the first candidate: they are kept if they classify the examples
at least as well as the prototypes do with each example left out of its own prototype (both estimate
accuracy on new images; the trained rows never saw the examples). Then the candidates are scored by
what their own trained rows get right on the examples, with the same guard, instead of by the 1-NN
proxy. On 5-shot tasks of trained classes that is 55 against 40 (docs/results/fewshot.md); photos that
do not look like the bundle's idea of those classes keep the prototypes. A description only adds its
candidate: the task's classes are the examples'.

>>> model = sdk.personalize(bundle, examples={"cat": cats, "dog": dogs})     # doctest: +SKIP
>>> model.resolution                                                          # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np
from PIL import Image

from sdk.batches import run_in_batches
from sdk.engines.onnxruntime import Network
from sdk.errors import DescriptionError, ExamplesError
from sdk.fusion.architecture import NUM_BLOCKS
from sdk.fusion.mixer import uniform_alpha
from sdk.media.images import to_uint8_batch
from sdk.model import PersonalizedModel
from sdk.prototypes import (
    DEFAULT_TEMPERATURE,
    CosineHead,
    CosineNetwork,
    leave_one_out_hits,
    leave_one_out_margin,
    leave_one_out_prototype_hits,
    open_feature_network,
    prototype_rows,
)
from sdk.stopwatch import Stopwatch
from sdk.text.resolver import MAX_DESCRIPTION_CHARS, TaskOptions, check_text, normalize_name, unit_mean


class TaperBundle(Protocol):
    """What enrollment reads of a loaded bundle (`sdk.runtime.TaperBundle`, which calls `enroll`): named
    here so that this module does not import the runtime that imports it."""
    bundle: Any
    engine: Any
    resolver: Any
    embedder: Any
    preprocessing: Any
    num_bases: int

    def alpha_for(self, embedding: np.ndarray) -> np.ndarray: ...
    def mixed_head(self, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...
    def compile_engine(self) -> bool: ...
    def _model(self, classes: np.ndarray, alpha: np.ndarray, how: list[str], watch: Stopwatch
               ) -> PersonalizedModel: ...

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


# A candidate replaces the first (the mixer's prediction) only when McNemar's z, over the examples that
# one of the two gets right and the other wrong, exceeds this (about a 2.3% one-sided false switch rate).
SWITCH_Z = 2.0


@dataclass
class Scored:
    candidate: Candidate
    accuracy: float   # leave-one-out 1-NN accuracy on the examples
    margin: float     # mean nearest-same minus nearest-other similarity (breaks ties)
    hits: np.ndarray  # [N] bool: which examples its leave-one-out neighbour gets right


def read_examples(examples: Mapping, input_size: int) -> Examples:
    """Check and decode {class name: images}; ExamplesError (or ImageError for an image) if unusable."""
    if not isinstance(examples, Mapping):
        raise ExamplesError(f"examples must be a mapping of class name to images, not {type(examples).__name__}")
    if not 2 <= len(examples) <= MAX_EXAMPLE_CLASSES:
        raise ExamplesError(f"examples need 2 to {MAX_EXAMPLE_CLASSES} classes, got {len(examples)}")
    seen: dict[str, str] = {}
    total = 0
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
        total += count
    if total > MAX_EXAMPLES:  # checked before anything is decoded
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
        out.append(Candidate("mixer: description", bundle.alpha_for(task.embedding)))
    out.append(Candidate("mixer: class names", bundle.alpha_for(names_embedding(bundle, names))))
    return out + fixed_candidates(bundle.num_bases)


def fixed_candidates(num_bases: int) -> list[Candidate]:
    """The candidates that do not depend on the task: the uniform mix, then each basis alone."""
    out = [Candidate("uniform", uniform_alpha(num_bases))]
    for b in range(num_bases):
        alpha = np.zeros((NUM_BLOCKS, num_bases), np.float32)
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
    return unit_mean(rows)


def candidate_features(bundle: TaperBundle, alpha: np.ndarray, images: np.ndarray,
                       watch: Stopwatch | None = None) -> tuple[Network, np.ndarray]:
    """The feature network of one mixture and its features [N, C] of uint8 images [N, S, S, 3];
    `watch` gets the "fuse_fold" and "features" laps."""
    watch = watch or Stopwatch()
    engine = bundle.engine
    with engine.weight_buffer() as target:
        engine.fuse_and_fold(alpha, target)
        network = open_feature_network(engine, target)
    watch.lap("fuse_fold")
    features = run_in_batches(network, images, bundle.preprocessing)
    watch.lap("features")
    return network, features


def score(candidate: Candidate, features: np.ndarray, labels: np.ndarray) -> Scored:
    """The proxy's score of a candidate from its features of the examples."""
    hits = leave_one_out_hits(features, labels)
    return Scored(candidate, float(np.mean(hits)), leave_one_out_margin(features, labels), hits)


def score_rows(bundle: TaperBundle, candidate: Candidate, features: np.ndarray, labels: np.ndarray,
               known: np.ndarray) -> Scored:
    """A candidate scored by its own trained rows of the bundle's classes `known` [K] on the examples'
    features (they never saw the examples); margin: mean of the own-class logit minus the best other."""
    weight, bias = bundle.mixed_head(candidate.alpha)
    logits = features @ weight[known].T + bias[known]
    hits = logits.argmax(1) == labels
    own = logits[np.arange(len(labels)), labels]
    other = np.where(np.arange(len(known))[None, :] == labels[:, None], -np.inf, logits).max(1)
    return Scored(candidate, float(np.mean(hits)), float(np.mean(own - other)), hits)


def most_accurate(scored: list[Scored]) -> int:
    """Index of the highest accuracy; ties: the higher margin, then the earlier candidate."""
    return max(range(len(scored)), key=lambda i: (scored[i].accuracy, scored[i].margin, -i))


def mcnemar_z(hits: np.ndarray, reference: np.ndarray) -> float:
    """(b - c) / sqrt(b + c): b examples only `hits` gets right, c only `reference` does; 0 if none differ."""
    b, c = int(np.sum(hits & ~reference)), int(np.sum(reference & ~hits))
    return (b - c) / np.sqrt(b + c) if b + c else 0.0


def best(scored: list[Scored], switch_z: float = SWITCH_Z) -> int:
    """The selected candidate: the first, unless others beat it by McNemar's z > `switch_z` (see the
    module docstring); then the most accurate of those. Adding a candidate never brings back one that
    lost, so a caller may keep only the current winner's network.

    >>> c = Candidate("x", None)
    >>> first = Scored(c, 0.5, 0.0, np.array([1, 1, 0, 0, 0, 0, 0, 0, 0, 0], bool))
    >>> slightly = Scored(c, 0.6, 0.0, np.array([1, 1, 1, 0, 0, 0, 0, 0, 0, 0], bool))
    >>> clearly = Scored(c, 1.0, 0.0, np.ones(10, bool))
    >>> best([first, slightly]), best([first, slightly, clearly])
    (0, 2)
    """
    passed = [0] + [i for i in range(1, len(scored))
                    if mcnemar_z(scored[i].hits, scored[0].hits) > switch_z]
    if len(passed) == 1:
        return 0
    return passed[1:][most_accurate([scored[i] for i in passed[1:]])]


@dataclass
class HeadChoice:
    """Trained rows or prototypes for classes the bundle knows, by their accuracy on the examples."""
    trained: bool
    trained_accuracy: float     # the bundle's classifier rows of the classes, on every example
    prototype_accuracy: float   # the prototype head, each example left out of its own class's prototype

    def describe(self) -> str:
        chosen = "the bundle's trained rows" if self.trained else "prototypes of the examples"
        return (f"head: {chosen} (examples right: trained rows {self.trained_accuracy:.3f}, "
                f"prototypes leaving each out {self.prototype_accuracy:.3f})")


def choose_head(bundle: TaperBundle, alpha: np.ndarray, features: np.ndarray, labels: np.ndarray,
                known: np.ndarray) -> HeadChoice | None:
    """For classes that are all the bundle's (`known` [K], no -1): whether its trained classifier rows,
    mixed with `alpha`, classify the examples' `features` at least as well as the prototypes; None when
    a class is new, or when two names are one class of the bundle ("boa constrictor" and its id): its
    rows could not tell them apart."""
    if np.any(known < 0) or len(np.unique(known)) < len(known):
        return None
    trained = score_rows(bundle, Candidate("", alpha), features, labels, known).accuracy
    prototypes = float(np.mean(leave_one_out_prototype_hits(features, labels, len(known))))
    # A tie goes to the trained rows: 500 images per class made them, against the few examples here.
    return HeadChoice(trained >= prototypes, trained, prototypes)


def enroll(bundle: TaperBundle, examples: Mapping, description: str | None = None,
           options: TaskOptions | None = None, temperature: float = DEFAULT_TEMPERATURE) -> PersonalizedModel:
    """A PersonalizedModel over the examples' classes (see the module docstring); `sdk.personalize`
    with `examples=` calls this."""
    if not isinstance(temperature, (int, float)) or not 0 < temperature <= 1000:
        raise ExamplesError(f"temperature must be a number in (0, 1000], got {temperature!r}")
    bundle.bundle.check_unchanged()
    watch = Stopwatch()
    data = read_examples(examples, bundle.preprocessing.input_size)
    watch.lap("images")
    pool = candidates(bundle, data.names, description, options)
    watch.lap("candidates")
    if bundle.compile_engine():
        watch.lap("compile")  # once per bundle, unless warm_up() did it
    known = np.array([bundle.resolver.by_name.get(normalize_name(n), -1) for n in data.names], np.int64)
    scored, kept, kept_features, choice, rows = [], None, None, None, False
    for i, candidate in enumerate(pool):
        network, features = candidate_features(bundle, candidate.alpha, data.images, watch)
        if i == 0:  # the head is decided on the first candidate; the proxy then follows the head
            choice = choose_head(bundle, candidate.alpha, features, data.labels, known)
            rows = choice is not None and choice.trained
        scored.append(score_rows(bundle, candidate, features, data.labels, known) if rows
                      else score(candidate, features, data.labels))
        if best(scored) == len(scored) - 1:  # keep only the best network so far (one weight buffer)
            kept, kept_features = network, features
        watch.lap("score")
    winner = scored[best(scored)]
    proxy = "trained rows' accuracy" if rows else "leave-one-out 1-NN accuracy"
    resolution = [f"{len(data.names)} classes from {len(data.labels)} example images",
                  *([f"{choice.describe()}, on {pool[0].name!r}"] if choice is not None else []),
                  *(f"{s.candidate.name}: {proxy} {s.accuracy:.3f}, margin {s.margin:.3f}" for s in scored),
                  f"selected {winner.candidate.name!r}"]
    if rows:
        kept = None  # its weight buffer goes back to the pool before the winner is fused with its head
        model = bundle._model(known, winner.candidate.alpha, resolution, watch)
        return replace(model, classes=data.names)  # the user's names for the bundle's classes
    weight = prototype_rows(kept_features, data.labels, len(data.names), float(temperature))
    bias = np.zeros(len(data.names), np.float32)
    watch.lap("head")
    return PersonalizedModel(CosineNetwork(kept, CosineHead(weight)), weight, bias, known,
                             data.names, data.names, bundle.preprocessing, winner.candidate.alpha, watch.total(),
                             resolution, bundle, head="cosine")
