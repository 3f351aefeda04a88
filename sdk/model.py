"""A personalized model: the fused backbone, the selected classifier rows, preprocessing.

>>> model.classes                         # doctest: +SKIP
>>> model.predict("photo.jpg")            # -> ("monarch", 0.91)   # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sdk.batches import run_in_batches
from sdk.engines.network import Network, SplitNetwork
from sdk.engines.rest import RestNetwork
from sdk.media.images import to_uint8_batch
from sdk.media.preprocessing import Preprocessing
from sdk.prototypes import CosineNetwork


@dataclass(repr=False)
class PersonalizedModel:
    network: Network | SplitNetwork | CosineNetwork | RestNetwork  # backbone and head: images -> logits
    head_weight: np.ndarray      # [K, C] classifier rows of the task's classes (one class: sdk.engines.rest's)
    head_bias: np.ndarray        # [K]
    class_indices: np.ndarray    # [K] indices into the bundle's classes (-1: a class the bundle does not have)
    classes: list[str]           # [K] class names (one class: it and sdk.engines.rest.REST_LABEL)
    class_ids: list[str]         # [K] class ids (WordNet ids for Tiny ImageNet)
    preprocessing: Preprocessing
    alpha: np.ndarray            # [4, Q] mixer
    timings: dict[str, float] = field(default_factory=dict)  # milliseconds per step of personalize()
    resolution: list[str] = field(default_factory=list)      # how the description was read
    source: object = field(default=None, repr=False)         # the TaperBundle it came from (for export)
    head: str = "linear"  # logits = head_weight @ f + head_bias; "cosine": f is L2-normalised first (few-shot)
    pseudo_label_counts: np.ndarray | None = field(default=None, repr=False)  # over the bundle's classes (adapt)
    precision: str = "float32"   # "int8": quantized on the device (sdk.engines.int8)
    int8_graph: bytes | None = field(default=None, repr=False)   # the QDQ graph an int8 model runs (for export)

    def __repr__(self) -> str:
        shown = ", ".join(self.classes[:5]) + (f", ... ({len(self.classes)} in all)" if len(self.classes) > 5 else "")
        total = self.timings.get("total")
        return f"PersonalizedModel(classes=[{shown}]" + (f", personalized in {total:.1f} ms)" if total else ")")

    @property
    def rest(self) -> bool:
        """True for a model of one class, which answers it or "anything else" (`sdk.engines.rest`)."""
        return isinstance(self.network, RestNetwork)

    def export(self, path) -> Path:
        """Write this model as .onnx (by the runtime alone), .pte (ExecuTorch, XNNPACK) or .mlpackage
        (Core ML); the last two need the `export` extra (torch, executorch, coremltools). See `sdk.exports`.

        >>> model.export("insects.onnx")            # doctest: +SKIP
        """
        from sdk.exports import export_model

        return export_model(self, path)

    def adapt(self, images, min_count: int = 2, max_classes: int = 20, min_classes: int = 2,
              pad_to: int = 0, min_images: int | None = None) -> PersonalizedModel:
        """This model re-personalized for the classes `images` (unlabelled, e.g. a camera's recent frames)
        and the batches adapted to before show most often (TAPER 5.2; the rule is in `sdk.adapt`). It
        stays generic until `min_images` (default `sdk.adapt.MIN_IMAGES`, 96) images have been seen.

        >>> model = bundle.generic().adapt(batch1).adapt(batch2)    # doctest: +SKIP
        """
        from sdk.adapt import MIN_IMAGES, AdaptRule, adapt

        rule = AdaptRule(min_count, max_classes, min_classes, pad_to, MIN_IMAGES if min_images is None else min_images)
        return adapt(self, images, rule)

    def logits(self, images) -> np.ndarray:
        """[N, K] logits over the task's classes."""
        return self._logits(to_uint8_batch(images, self.preprocessing.input_size)[0])

    def predict_proba(self, images) -> np.ndarray:
        """[N, K] class probabilities (softmax over the task's classes)."""
        return _softmax(self.logits(images))

    def predict(self, images):
        """(label, probability) for one image, or a list of them for several."""
        batch, single = to_uint8_batch(images, self.preprocessing.input_size)
        p = _softmax(self._logits(batch))
        results = [(self.classes[k], float(p[i, k])) for i, k in enumerate(p.argmax(1))]
        return results[0] if single else results

    def _logits(self, batch: np.ndarray) -> np.ndarray:
        return run_in_batches(self.network, batch, self.preprocessing)


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)
