"""A task of one class: a model that answers "X, or anything else".

A description that names one class ("a bee") gets a model of two answers, X and `REST_LABEL`. Its head holds
X's row first, then every other class of the bundle, their biases lowered by log(n) (n: how many others); its
second score is the log-sum-exp of those n logits, the log of their mean exp. The softmax over the two is the
full classifier's probability of X with X's prior made even against all the others together: a balanced
one-against-the-rest decision, from the same network and rows as any task. Before, such a task was padded with
the nearest class by text similarity, and its model called half of all other photos X:
docs/results/one_class.json (`python -m lab.one_class`) holds the balanced accuracies, 0.896 against 0.697.

>>> weight, bias = rest_head(np.eye(3, 2, dtype=np.float32), np.zeros(3, np.float32), 1)
>>> weight.tolist(), [round(float(b), 3) for b in bias]
([[0.0, 1.0], [1.0, 0.0], [0.0, 0.0]], [0.0, -0.693, -0.693])
>>> collapse(np.array([[2.0, 0.0, 0.0]])).round(3).tolist()          # X's logit, the others' log-mean-exp
[[2.0, 0.693]]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

REST_LABEL = "anything else"   # the second answer of a model of one class (the Java core's RestHead too)
REST_ID = ""                   # its class id
REST_INDEX = -1                # its class index: no class of the bundle


def rest_order(x: int, classes: int) -> np.ndarray:
    """The bundle classes of the rows of class `x`'s model: x, then the others in order."""
    return np.concatenate([[x], np.delete(np.arange(classes), x)])


def lowered(bias: np.ndarray) -> np.ndarray:
    """Biases (or logits) of `rest_order`'s rows with all but the first lowered by log(their count), as float32."""
    out = np.array(bias, np.float32)
    out[..., 1:] -= np.float32(np.log(out.shape[-1] - 1))
    return out


def rest_head(weight: np.ndarray, bias: np.ndarray, x: int) -> tuple[np.ndarray, np.ndarray]:
    """The head rows of a model of class `x` alone: `rest_order`'s rows, their biases `lowered`. Copies."""
    order = rest_order(x, len(bias))
    return weight[order], lowered(bias[order])


def collapse(logits: np.ndarray) -> np.ndarray:
    """[N, 1 + n] logits of `rest_head`'s rows -> [N, 2]: X's, and the log-sum-exp of the rest."""
    rest = logits[:, 1:]
    top = rest.max(axis=1, keepdims=True)
    lse = top + np.log(np.exp(rest - top).sum(axis=1, keepdims=True))
    return np.concatenate([logits[:, :1], lse], axis=1).astype(logits.dtype)


def one_against_rest(logits: np.ndarray, x: int) -> np.ndarray:
    """[N, classes] logits of every class -> [N, 2]: what a model of class `x` alone gives from them."""
    return collapse(lowered(logits[:, rest_order(x, logits.shape[1])]))


@dataclass
class RestNetwork:
    """A network with `rest_head`'s rows, its logits collapsed to X's and the rest's."""
    network: object   # Network | SplitNetwork (sdk.engines.network)

    def run(self, images: np.ndarray) -> np.ndarray:
        """[N, 2] logits of normalized [N, 3, H, W] float32 images."""
        return collapse(self.network.run(images))

    def with_head(self, weight: np.ndarray, bias: np.ndarray):
        """The backbone with another head and no collapse (`sdk.adapt`: every class)."""
        return self.network.with_head(weight, bias)
