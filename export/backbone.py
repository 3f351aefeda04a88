"""The onnxruntime backbone graph that fused weights are injected into.

A ResNet-18 feature extractor with batch norm already folded (convs with biases, no BN nodes), image
[N, 3, S, S] -> features [N, C]. Every weight is external data in one virtual file, at the offsets
`sdk.fusion.folding.backbone_layout` computes from the architecture; the graph carries no weight bytes. At
run time the SDK writes a task's folded weights into a buffer with this layout and hands it to
onnxruntime with `add_external_initializers_from_files_in_memory` (the route that stays correct at
full optimization). The classifier rows are applied outside the graph (their number is per task).
"""

from __future__ import annotations

import io

import onnx
import torch
from torch import nn

from sdk.fusion.architecture import Conv, MaxPool, ResidualBlock, parameter_shapes, topology
from sdk.fusion.folding import BACKBONE_FILE, backbone_layout
from trainer.models.basic_block import residual


def folded_conv(spec: Conv) -> nn.Conv2d:
    """A conv with its batch norm folded in: the same conv, with a bias."""
    return nn.Conv2d(spec.in_channels, spec.out_channels, spec.kernel, spec.stride, spec.padding)


class FoldedBlock(nn.Module):
    def __init__(self, spec: ResidualBlock):
        super().__init__()
        self.conv1, self.conv2 = folded_conv(spec.conv1), folded_conv(spec.conv2)
        self.downsample = None if spec.downsample is None else nn.Sequential(folded_conv(spec.downsample))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return residual(x, self.conv1, self.conv2, self.downsample)


class FoldedStem(nn.Module):
    def __init__(self, spec: Conv, pool: MaxPool | None):
        super().__init__()
        self.pool = pool
        self.conv1 = folded_conv(spec)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv1(x))
        return x if self.pool is None else nn.functional.max_pool2d(x, self.pool.kernel, self.pool.stride,
                                                                     self.pool.padding)


class FoldedBackbone(nn.Module):
    """ResNet-18 features with BN folded; parameter names equal `folded_names(parameter_shapes(...))`."""

    def __init__(self, stem: str, width: float):
        super().__init__()
        net = topology(stem, width)
        self.stem = FoldedStem(net.stem, net.stem_pool)
        self.layer1, self.layer2, self.layer3, self.layer4 = (nn.Sequential(*map(FoldedBlock, stage))
                                                              for stage in net.stages)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer4(self.layer3(self.layer2(self.layer1(self.stem(x)))))
        return torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)


def export_backbone(stem: str, width: float, input_size: int) -> tuple[bytes, dict[str, dict], int]:
    """(graph bytes with external-data references only, layout, external file size)."""
    model = FoldedBackbone(stem, width).eval()
    buffer = io.BytesIO()
    x = torch.zeros(1, 3, input_size, input_size)
    torch.onnx.export(model, (x,), buffer, dynamo=False, opset_version=17, do_constant_folding=False,
                      input_names=["image"], output_names=["features"],
                      dynamic_axes={"image": {0: "batch"}, "features": {0: "batch"}})
    graph = onnx.load_from_string(buffer.getvalue())
    layout, total = backbone_layout(parameter_shapes(stem, width, 1))
    names = {init.name for init in graph.graph.initializer}
    if names != set(layout):
        raise RuntimeError(f"exported initializers differ from the folded layout: {sorted(names ^ set(layout))[:5]}")
    for init in graph.graph.initializer:
        entry = layout[init.name]
        init.ClearField("raw_data")
        del init.float_data[:]
        init.data_location = onnx.TensorProto.EXTERNAL
        del init.external_data[:]
        for key, value in (("location", BACKBONE_FILE), ("offset", entry["offset"]),
                           ("length", 4 * int(torch.Size(entry["shape"]).numel()))):
            init.external_data.add(key=key, value=str(value))
    return graph.SerializeToString(), layout, total
