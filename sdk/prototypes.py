"""Prototype heads and the nearest-neighbour proxy, over penultimate features.

A prototype head classifies by cosine similarity to each class's prototype, the mean of its examples'
L2-normalised features: logits = temperature * normalize(f) @ normalize(prototype).T. It needs no
training, so classes the bundle never saw work as well as its own.

The proxy (Expert Models, Puigcerver et al. 2021, section 3.3) scores a feature extractor on labelled
examples by leave-one-out 1-nearest-neighbour accuracy: each example is classified by its most similar
other example (cosine here; on L2-normalised features the same neighbour as Euclidean distance).

>>> feats = np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9]], np.float32)
>>> labels = np.array([0, 0, 1, 1])
>>> leave_one_out_accuracy(feats, labels)
1.0
>>> weight = prototype_rows(feats, labels, 2, temperature=10.0)
>>> CosineHead(weight).logits(feats).argmax(1).tolist()
[0, 0, 1, 1]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdk.engines.onnxruntime import Network

# Scales cosine similarities (in [-1, 1]) into logits. Only the probabilities depend on it, never the
# predicted class. 10 is the usual scale of cosine classifiers (e.g. Chen et al. 2019, "A closer look at
# few-shot classification"); not tuned on this project's data.
DEFAULT_TEMPERATURE = 10.0


def l2_normalize(features: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(features, axis=1, keepdims=True)
    return features / np.maximum(norms, 1e-12)  # an all-zero feature (dead ReLUs) stays zero


def leave_one_out_accuracy(features: np.ndarray, labels: np.ndarray) -> float:
    """Share of examples whose most cosine-similar other example has their label."""
    return float(np.mean(leave_one_out_hits(features, labels)))


def leave_one_out_hits(features: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """[N] bool: whether each example's most cosine-similar other example has its label."""
    return labels[_nearest_other(features)] == labels


def leave_one_out_margin(features: np.ndarray, labels: np.ndarray) -> float:
    """Mean over examples of (similarity to the nearest other example of its class) - (to the nearest of
    another class): a finer score that breaks ties of `leave_one_out_accuracy` (which moves in steps of
    1/N). Each class needs at least two examples."""
    sims = _similarities(features)
    same = labels[:, None] == labels[None, :]
    nearest_same = np.where(same, sims, -np.inf).max(1)
    nearest_other = np.where(same, -np.inf, sims).max(1)
    return float(np.mean(nearest_same - nearest_other))


def prototype_rows(features: np.ndarray, labels: np.ndarray, num_classes: int, temperature: float) -> np.ndarray:
    """[K, C] rows of a cosine head: temperature x the unit mean of each class's unit features."""
    unit = l2_normalize(features.astype(np.float64))
    sums = np.zeros((num_classes, features.shape[1]))
    np.add.at(sums, labels, unit)
    return (temperature * l2_normalize(sums)).astype(np.float32)


def leave_one_out_prototype_similarities(features: np.ndarray, labels: np.ndarray, num_classes: int) -> np.ndarray:
    """[N, K] cosine of each example to each class prototype, its own class's prototype made without it
    (one pass: u_i . (S_y - u_i) / |S_y - u_i| with S_y the sum of class y's unit features). An example
    alone in its class gets -1 for its own class (no prototype is left)."""
    unit = l2_normalize(features.astype(np.float64))
    sums = np.zeros((num_classes, unit.shape[1]))
    np.add.at(sums, labels, unit)
    sims = unit @ l2_normalize(sums).T
    own = sums[labels]
    dot = np.einsum("nc,nc->n", unit, own) - np.einsum("nc,nc->n", unit, unit)
    rest = own - unit
    norm = np.linalg.norm(rest, axis=1)
    sims[np.arange(len(labels)), labels] = np.where(norm > 1e-9, dot / np.maximum(norm, 1e-12), -1.0)
    return sims


def leave_one_out_prototype_hits(features: np.ndarray, labels: np.ndarray, num_classes: int) -> np.ndarray:
    """[N] bool: whether the prototype head made without each example classifies it right (an estimate
    of the prototype head's accuracy on new images, from one shot fewer than it will have)."""
    return leave_one_out_prototype_similarities(features, labels, num_classes).argmax(1) == labels


@dataclass
class CosineHead:
    """logits = weight @ normalize(features); `weight` from `prototype_rows` (its norm is the temperature)."""
    weight: np.ndarray  # [K, C]

    def logits(self, features: np.ndarray) -> np.ndarray:
        return l2_normalize(features) @ self.weight.T


def open_feature_network(engine, target) -> Network:
    """A network giving penultimate features: the weights in `target` with the identity as head (a [C, C]
    Gemm, so the backbone's route and session are reused as they are)."""
    channels = engine.bases.shapes["fc.weight"][1]
    return engine.open(target, np.eye(channels, dtype=np.float32), np.zeros(channels, np.float32))


@dataclass
class CosineNetwork:
    """A feature network (`open_feature_network`) with a prototype head: what a few-shot model runs."""
    features: Network
    head: CosineHead

    def run(self, images: np.ndarray) -> np.ndarray:
        """[N, K] logits of normalized [N, 3, H, W] float32 images."""
        return self.head.logits(self.features.run(images))


def _similarities(features: np.ndarray) -> np.ndarray:
    unit = l2_normalize(features.astype(np.float64))
    sims = unit @ unit.T
    np.fill_diagonal(sims, -np.inf)  # the point itself is left out
    return sims


def _nearest_other(features: np.ndarray) -> np.ndarray:
    return _similarities(features).argmax(1)
