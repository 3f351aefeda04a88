"""Export a personalized model for a phone or another engine: ONNX, ExecuTorch (.pte, XNNPACK) or
Core ML (.mlpackage). Each file carries the class names and the preprocessing:
- ONNX: `metadata_props` "classes", "class_ids", "preprocessing" (JSON strings);
- ExecuTorch: a sidecar `<file>.json` with the same fields (a .pte has no free-form metadata);
- Core ML: a classifier (class labels built in) with the same fields in `user_defined_metadata`.
Core ML prediction needs macOS; here the conversion runs and its spec is checked.

>>> model.export("insects.onnx")            # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import torch
from torch import nn

from sdk.errors import SdkError
from sdk.files import refuse_to_replace_folder, staging_directory

from .backbone import FoldedBackbone

FORMATS = (".onnx", ".pte", ".mlpackage")


class PersonalizedNetwork(nn.Module):
    """Folded backbone + the task's classifier rows: image [N, 3, S, S] -> logits [N, K]."""

    def __init__(self, bundle, alpha: np.ndarray, head_weight: np.ndarray, head_bias: np.ndarray,
                 softmax: bool = False, cosine: bool = False):
        super().__init__()
        arch = bundle.bundle.manifest.architecture
        self.backbone = FoldedBackbone(arch.stem, arch.width)
        _, views = bundle.folded_weights(bundle.fused_weights(alpha))
        self.backbone.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in views.items()})
        self.head = nn.Linear(head_weight.shape[1], head_weight.shape[0])
        self.head.weight.data = torch.from_numpy(np.array(head_weight))
        self.head.bias.data = torch.from_numpy(np.array(head_bias))
        self.softmax, self.cosine = softmax, cosine
        self.eval()

    @classmethod
    def of(cls, model, softmax: bool = False) -> PersonalizedNetwork:
        """The network of a PersonalizedModel (its bundle, mixer and classifier rows)."""
        return cls(model.source, model.alpha, model.head_weight, model.head_bias, softmax, model.head == "cosine")

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        features = self.backbone(image)
        if self.cosine:  # a prototype head (few-shot): cosine similarity, as sdk.prototypes.CosineHead
            features = nn.functional.normalize(features, dim=1, eps=1e-12)
        logits = self.head(features)
        return torch.softmax(logits, dim=1) if self.softmax else logits


PLAIN_FIELDS = ("head", "producer")  # metadata values that are plain strings; the others are JSON


def metadata(model) -> dict[str, str]:
    return {"classes": json.dumps(model.classes), "class_ids": json.dumps(model.class_ids),
            "preprocessing": json.dumps(model.preprocessing.to_dict()), "head": model.head, "producer": "taper-sdk"}


def export_model(model, path: str | os.PathLike) -> Path:
    """Write `model` to `path`; the format follows the suffix (.onnx, .pte, .mlpackage). Atomic."""
    path = Path(path)
    if path.suffix not in FORMATS:
        raise SdkError(f"cannot export to {path.name!r}: use one of {FORMATS}")
    if model.source is None:
        raise SdkError("this model was not made by sdk.personalize (no bundle to export from)")
    # Never delete what the user owns: an existing folder is refused, for .mlpackage (a folder format)
    # any existing path. Files are written in a staging folder beside the target (removed on errors and
    # SIGTERM/SIGHUP) and renamed into place only when complete.
    finals = [path, path.with_name(path.name + ".json")] if path.suffix == ".pte" else [path]
    for final in finals:
        refuse_to_replace_folder(final)
    if path.suffix == ".mlpackage" and path.exists():
        raise SdkError(f"{path} exists: not replacing it (remove it or choose another name)")
    with staging_directory(path) as tmp:
        written = {".onnx": _onnx, ".pte": _executorch, ".mlpackage": _coreml}[path.suffix](model, tmp / path.name)
        for item in written:
            final = path.parent / item.name
            refuse_to_replace_folder(final)
            os.replace(item, final)
    return path


def _example(model) -> torch.Tensor:
    size = model.preprocessing.input_size
    return torch.zeros(1, 3, size, size)


def _onnx(model, out: Path) -> list[Path]:
    import onnx

    network = PersonalizedNetwork.of(model)
    torch.onnx.export(network, (_example(model),), str(out), dynamo=False, opset_version=17,
                      input_names=["image"], output_names=["logits"],
                      dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}})
    graph = onnx.load(str(out))
    for key, value in metadata(model).items():
        graph.metadata_props.add(key=key, value=value)
    onnx.save(graph, str(out))
    return [out]


def _executorch(model, out: Path) -> list[Path]:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    program = torch.export.export(PersonalizedNetwork.of(model), (_example(model),))
    lowered = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()]).to_executorch()
    out.write_bytes(lowered.buffer)
    sidecar = out.with_name(out.name + ".json")
    sidecar.write_text(json.dumps({k: v if k in PLAIN_FIELDS else json.loads(v) for k, v in metadata(model).items()},
                                  indent=1))
    return [out, sidecar]


def _coreml(model, out: Path) -> list[Path]:
    import coremltools as ct

    network = PersonalizedNetwork.of(model, softmax=True)
    traced = torch.jit.trace(network, _example(model))
    size = model.preprocessing.input_size
    mlmodel = ct.convert(traced, inputs=[ct.TensorType(name="image", shape=(1, 3, size, size))],
                         classifier_config=ct.ClassifierConfig(list(model.classes)), convert_to="mlprogram",
                         minimum_deployment_target=ct.target.iOS16)
    mlmodel.user_defined_metadata.update(metadata(model))
    mlmodel.short_description = f"TAPER personalized ResNet-18 for {len(model.classes)} classes"
    mlmodel.save(str(out))
    return [out]
