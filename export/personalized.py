"""The exports that need torch: ExecuTorch (.pte, XNNPACK; an int8 model as XNNPACK's int8 kernels,
export/int8_program.py) and Core ML (.mlpackage), written through `sdk.exports.export_model` (which writes
.onnx from the runtime alone, and owns the metadata).

>>> model.export("insects.pte")            # doctest: +SKIP
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from torch import nn

from sdk.exports import MAX_PTE_BATCH, metadata, metadata_json
from sdk.media.preprocessing import PIXEL_SCALE, Preprocessing

from .backbone import FoldedBackbone


class PersonalizedNetwork(nn.Module):
    """Folded backbone + the task's classifier rows: image [N, 3, S, S] -> logits [N, K] (`rest`: a model of one
    class, its rows `sdk.engines.rest.rest_head`'s, [N, 2])."""

    def __init__(self, bundle, alpha: np.ndarray, head_weight: np.ndarray, head_bias: np.ndarray,
                 softmax: bool = False, cosine: bool = False, rest: bool = False):
        super().__init__()
        arch = bundle.bundle.manifest.architecture
        self.backbone = FoldedBackbone(arch.stem, arch.width)
        _, views = bundle.folded_weights(bundle.fused_weights(alpha))
        self.backbone.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in views.items()})
        self.head = nn.Linear(head_weight.shape[1], head_weight.shape[0])
        self.head.weight.data = torch.from_numpy(np.array(head_weight))
        self.head.bias.data = torch.from_numpy(np.array(head_bias))
        self.softmax, self.cosine, self.rest = softmax, cosine, rest
        self.eval()

    @classmethod
    def of(cls, model, softmax: bool = False) -> PersonalizedNetwork:
        """The network of a PersonalizedModel (its bundle, mixer and classifier rows); an int8 model's convs
        compute with its int8 weights (dequantized, `sdk.engines.int8.int8_weights`), its biases as folded."""
        network = cls(model.source, model.alpha, model.head_weight, model.head_bias, softmax, model.head == "cosine",
                      model.rest)
        if model.precision == "int8":
            from sdk.engines.int8 import int8_weights

            weights = {k: torch.from_numpy(v) for k, v in int8_weights(model.int8_graph).items()}
            network.backbone.load_state_dict(weights, strict=False)
        return network

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        features = self.backbone(image)
        if self.cosine:  # a prototype head (few-shot): cosine similarity, as sdk.prototypes.CosineHead
            features = nn.functional.normalize(features, dim=1, eps=1e-12)
        logits = self.head(features)
        if self.rest:   # a model of one class: its logit and the log-sum-exp of the rest's (sdk.engines.rest.collapse)
            logits = torch.cat([logits[:, :1], torch.logsumexp(logits[:, 1:], dim=1, keepdim=True)], dim=1)
        return torch.softmax(logits, dim=1) if self.softmax else logits


def _example(model) -> torch.Tensor:
    size = model.preprocessing.input_size
    return torch.zeros(1, 3, size, size)


def executorch_network(model) -> nn.Module:
    """What the ExecuTorch export lowers: an int8 model's backbone replays its int8 graph with XNNPACK's
    quantized patterns (export/int8_program.py), a float32 model's is the folded float network."""
    network = PersonalizedNetwork.of(model)
    if model.precision == "int8":
        from .int8_program import QuantizedBackbone

        network.backbone = QuantizedBackbone(network.backbone, model.int8_graph)
    return network.eval()


def write_executorch(model, out: Path) -> list[Path]:
    from .executorch_program import lower_to_xnnpack

    program = lower_to_xnnpack(executorch_network(model), model.preprocessing.input_size)
    out.write_bytes(program)
    sidecar = out.with_name(out.name + ".json")
    sidecar.write_text(json.dumps({**metadata_json(model), "max_batch": MAX_PTE_BATCH}, indent=1))
    return [out, sidecar]


class PixelNormalization(nn.Module):
    """(x - mean) / std per channel, x = pixel / 255 (Core ML's ImageType scales by 1/255 before this)."""

    def __init__(self, preprocessing: Preprocessing):
        super().__init__()
        self.register_buffer("mean", torch.tensor(preprocessing.mean, dtype=torch.float32).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor(preprocessing.std, dtype=torch.float32).view(1, 3, 1, 1))

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return (image - self.mean) / self.std


def coreml_network(model) -> nn.Module:
    """What the Core ML export converts: pixels / 255 [1, 3, S, S] -> class probabilities."""
    return nn.Sequential(PixelNormalization(model.preprocessing), PersonalizedNetwork.of(model, softmax=True)).eval()


def write_coreml(model, out: Path) -> list[Path]:
    import coremltools as ct

    # An image input (Vision feeds camera frames and CGImages to it) with the normalisation built in: the
    # ImageType scales pixels by 1/255 (its `bias` is per channel but its `scale` is one number, so the
    # per-channel std is divided inside the network).
    traced = torch.jit.trace(coreml_network(model), _example(model))
    size = model.preprocessing.input_size
    image = ct.ImageType(name="image", shape=(1, 3, size, size), scale=PIXEL_SCALE, bias=[0.0, 0.0, 0.0],
                         color_layout=ct.colorlayout.RGB)
    mlmodel = ct.convert(traced, inputs=[image], classifier_config=ct.ClassifierConfig(list(model.classes)),
                         convert_to="mlprogram", compute_precision=ct.precision.FLOAT16,
                         minimum_deployment_target=ct.target.iOS16)
    precision, described = "float16", "FP16 weights and compute"
    if model.precision == "int8":
        # Core ML's own int8 weights (constexpr_affine_dequantize, symmetric, per output channel: 8 bits, its
        # scale the channel's largest weight over 127) of the model's int8 weights: each lands within half an
        # 8-bit step of the model's 7-bit value. Activations stay float16 (Core ML quantizes weights only here).
        # Convs only: the classifier stays float, as in the model, and so do the normalisation's constants.
        optimize = ct.optimize.coreml
        per_channel = optimize.OpLinearQuantizerConfig(mode="linear_symmetric", dtype="int8",
                                                       granularity="per_channel", weight_threshold=0)
        config = optimize.OptimizationConfig(op_type_configs={"conv": per_channel})
        mlmodel = optimize.linear_quantize_weights(mlmodel, config=config)
        precision, described = "int8 weights, float16 compute", "int8 weights per channel, FP16 compute"
    mlmodel.user_defined_metadata.update({**metadata(model, image_input=True), "precision": precision})
    mlmodel.short_description = (f"TAPER personalized ResNet-18 for {len(model.classes)} classes "
                                 f"({described})")
    mlmodel.input_description["image"] = f"RGB image, {size}x{size} (center-cropped from the shorter side)"
    mlmodel.save(str(out))
    return [out]


