"""An int8 personalized model as an ExecuTorch program (XNNPACK's quantized kernels), issue 61 part 3.

The model's own int8 graph (`sdk.engines.int8.Int8Plan.quantize`: onnxruntime's QDQ form) is replayed in torch
with the quantized_decomposed ops that PT2E quantization leaves behind (`quantize_per_tensor`,
`dequantize_per_tensor`, `dequantize_per_channel`), so that XNNPACK's partitioner sees the same
dequantize -> conv -> quantize patterns it takes from a PT2E-converted graph and lowers each to its QS8
kernels: the program carries this model's int8 weights and data-free activation scales, not a
re-calibration. onnxruntime's activations are uint8 (zero point z); XNNPACK's are int8: the same scale
with zero point z - 128, the same values. The classifier stays float, as in the model.

>>> program = lower_int8(model)          # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.ao.quantization.fx import _decomposed  # noqa: F401  (registers the quantized_decomposed ops)

from sdk.engines.int8 import WEIGHT_QMAX, WEIGHT_QMIN, graph_nodes
from sdk.format.onnx_proto import initializers

from .backbone import FoldedBackbone

UINT8_TO_INT8 = 128
QMIN, QMAX = -128, 127


class QuantizedBackbone(nn.Module):
    """image [N, 3, S, S] -> features [N, C], computed as the int8 graph says (see the module doc)."""

    def __init__(self, backbone: FoldedBackbone, graph: bytes):
        super().__init__()
        self.backbone = backbone   # each conv's stride and padding, and the stem's max-pool
        tensors = {t.name: t for t in initializers(graph)}
        self.nodes = [(n.op, list(n.inputs), n.outputs[0]) for n in graph_nodes(graph)]
        self.activation: dict[str, tuple[float, int]] = {}   # tensor -> (scale, int8 zero point)
        for name, t in tensors.items():
            if name.endswith("_zero") and t.data_type == 2:   # a uint8 activation zero point
                tensor = name.removesuffix("_zero")
                scale = float(np.frombuffer(tensors[f"{tensor}_scale"].raw, "<f4")[0])
                self.activation[tensor] = (scale, int(np.frombuffer(t.raw, np.uint8)[0]) - UINT8_TO_INT8)
        for name, t in tensors.items():
            if name.endswith(".weight_q"):
                key = _buffer_key(name.removesuffix("_q"))
                q = np.frombuffer(t.raw, np.int8).reshape(t.dims)
                self.register_buffer(f"{key}_q", torch.from_numpy(q.copy()))
                self.register_buffer(f"{key}_scale", torch.from_numpy(
                    np.frombuffer(tensors[name.replace("_q", "_scale")].raw, "<f4").copy()))
                self.register_buffer(f"{key}_zero", torch.zeros(t.dims[0], dtype=torch.int64))
            elif name.endswith(".bias_q"):   # float, as PT2E leaves a conv's bias: XNNPACK requantizes it
                bias = np.frombuffer(t.raw, "<i4").astype(np.float64) * np.frombuffer(
                    tensors[name.replace("_q", "_scale")].raw, "<f4")
                self.register_buffer(f"{_buffer_key(name.removesuffix('_q'))}_float",
                                     torch.from_numpy(bias.astype(np.float32)))

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        ops = torch.ops.quantized_decomposed
        values: dict[str, torch.Tensor] = {"image": image}
        for op, inputs, out in self.nodes:
            if op == "QuantizeLinear":
                scale, zero = self.activation[inputs[0]]
                values[out] = ops.quantize_per_tensor(values[inputs[0]], scale, zero, QMIN, QMAX, torch.int8)
            elif op == "DequantizeLinear" and inputs[0].endswith(".weight_q"):
                key = _buffer_key(inputs[0].removesuffix("_q"))
                values[out] = ops.dequantize_per_channel(getattr(self, f"{key}_q"), getattr(self, f"{key}_scale"),
                                                         getattr(self, f"{key}_zero"), 0, WEIGHT_QMIN,
                                                         WEIGHT_QMAX, torch.int8)
            elif op == "DequantizeLinear" and inputs[0].endswith(".bias_q"):
                values[out] = getattr(self, f"{_buffer_key(inputs[0].removesuffix('_q'))}_float")
            elif op == "DequantizeLinear":
                scale, zero = self.activation[inputs[0].removesuffix("_q")]
                values[out] = ops.dequantize_per_tensor(values[inputs[0]], scale, zero, QMIN, QMAX, torch.int8)
            elif op == "Conv":
                conv = self.backbone.get_submodule(inputs[1].removesuffix(".weight_dq"))
                values[out] = nn.functional.conv2d(values[inputs[0]], values[inputs[1]], values[inputs[2]],
                                                   conv.stride, conv.padding)
            elif op == "Add":
                values[out] = values[inputs[0]] + values[inputs[1]]
            elif op == "MaxPool":
                pool = self.backbone.stem.pool
                values[out] = nn.functional.max_pool2d(values[inputs[0]], pool.kernel, pool.stride, pool.padding)
            elif op == "GlobalAveragePool":
                values[out] = nn.functional.adaptive_avg_pool2d(values[inputs[0]], 1)
            elif op == "Flatten":
                return torch.flatten(values[inputs[0]], 1)
            else:
                raise ValueError(f"an int8 graph op this export does not know: {op}")
        raise ValueError("the int8 graph has no features output (Flatten)")


def _buffer_key(name: str) -> str:
    return name.replace(".", "__")
