"""int8 personalized models, quantized on the device without photos (issue 61).

A personalized network's folded weights become per-output-channel int8 (symmetric, 7-bit: onnxruntime's
u8s8 kernels saturate their 16-bit sums on x86 CPUs without VNNI, and 7-bit weights avoid it), and every
activation gets a uint8 range from the batch norms alone (the data-free ranges of Nagel et al., 2019): a
conv's output channel c is taken as N(beta_c, gamma_c^2), its batch norm's shift and scale after mixing; a
ReLU's output has the rectified Gaussian's moments, an Add's the sum of its inputs', the max-pool keeps its
input's and the global pool narrows the spread (POOLED_SPREAD); the range is mu +- RANGE_SIGMAS sigma over
the channels (from 0 after a ReLU), the image's is exact (the normalisation of [0, 1] pixels). The classifier
stays float (the runtime feeds its rows as inputs). The graph is onnxruntime's QDQ form, which it fuses into
integer kernels (QLinearConv, QLinearAdd, QLinearGlobalAveragePool); a ReLU after a Conv or an Add is folded
into the uint8 range that starts at 0.

Why these choices, measured on the demo network (docs/results/experiments.md, "int8 without calibration
photos"; docs/results/int8_data_free.json): int8 minus fp32 top-1 -0.30, classifier selection -0.33 on
200 tasks; 128 real calibration photos -0.05; 8-bit weights (saturation) -2.75 even with photos; the classifier
quantized, -1.99 data-free.

>>> activation_scale(0.0, 255.0), activation_scale(-1.0, 1.0)[1]
((1.0, 0), 128)
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping

import numpy as np

from .architecture import batch_norm_of
from .onnx_proto import (
    GRAPH_INITIALIZER,
    GRAPH_NODE,
    MODEL_GRAPH,
    NODE_INPUT,
    NODE_OP_TYPE,
    NODE_OUTPUT,
    ProtoError,
    _attribute_int,
    _fields,
    _node,
    _only,
    _with_graph,
    encode_field,
    text,
)
from .onnx_proto import tensor as onnx_tensor
from .preprocessing import Preprocessing

RANGE_SIGMAS = 8.0      # chosen on 2,000 training photos of the demo run (int8_data_free.json: tuning_top1_by_k)
POOLED_SPREAD = 4.0     # the global pool's output spread: the map's over this (variant 3 of the lab's protocol)
WEIGHT_QMIN, WEIGHT_QMAX = -64, 63   # 7-bit weights
UINT8, INT8, INT32, FLOAT = 2, 3, 6, 1
QUANTIZED_OUTPUTS = ("Conv", "Add", "MaxPool", "GlobalAveragePool")
IMAGE = "image"


def activation_scale(low: float, high: float) -> tuple[float, int]:
    """(scale, zero point) of a uint8 tensor covering [low, high] (and 0), as onnxruntime computes them."""
    low, high = min(low, 0.0), max(high, 0.0)
    scale = (high - low) / 255.0 or 1.0
    return scale, int(min(255, max(0, round(-low / scale))))


def quantize_weight(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int8 weight, float32 scale per output channel): symmetric, 7-bit."""
    flat = weight.reshape(len(weight), -1)
    scale = (np.maximum(flat.max(axis=1), -flat.min(axis=1)) * 2 / (WEIGHT_QMAX - WEIGHT_QMIN)).astype(np.float32)
    scale[scale == 0] = 1.0
    work = np.multiply(flat, (1 / scale)[:, None])   # times 1/scale (a mirror must do the same to match bit for bit)
    np.rint(work, out=work)
    np.clip(work, WEIGHT_QMIN, WEIGHT_QMAX, out=work)
    return work.astype(np.int8).reshape(weight.shape), scale


def _rectified(mu: np.ndarray, sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of max(0, x), x ~ N(mu, sigma^2), per channel."""
    s = np.maximum(sigma, 1e-8)
    a = mu / s
    cdf = 0.5 * (1 + np.array([math.erf(v / math.sqrt(2)) for v in a.ravel()]).reshape(a.shape))
    pdf = np.exp(-0.5 * a * a) / math.sqrt(2 * math.pi)
    mean = mu * cdf + s * pdf
    second = (mu * mu + s * s) * cdf + mu * s * pdf
    return mean, np.sqrt(np.maximum(second - mean * mean, 0))


class _Node:
    def __init__(self, raw: bytes):
        self.op, self.inputs, self.outputs, self.rest = "", [], [], bytearray()
        for field, value, piece in _fields(raw):
            if field == NODE_OP_TYPE:
                self.op = text(value)
            elif field == NODE_INPUT:
                self.inputs.append(text(value))
            elif field == NODE_OUTPUT:
                self.outputs.append(text(value))
            if field not in (NODE_INPUT, NODE_OUTPUT):
                self.rest += piece

    def encode(self) -> bytes:
        return (b"".join(encode_field(NODE_INPUT, n.encode("utf-8")) for n in self.inputs)
                + b"".join(encode_field(NODE_OUTPUT, n.encode("utf-8")) for n in self.outputs) + bytes(self.rest))


def _nodes(model: bytes) -> list[_Node]:
    return [_Node(v) for f, v, _ in _fields(_only(model, MODEL_GRAPH)) if f == GRAPH_NODE]


def activation_ranges(model: bytes, mixed: Mapping[str, np.ndarray], preprocessing: Preprocessing,
                      sigmas: float = RANGE_SIGMAS) -> tuple[dict[str, tuple[float, float]], dict[str, str]]:
    """({tensor: (low, high)} for the image and every Conv, Add and pool output, with a ReLU that alone reads
    a Conv's or Add's output folded into it; {ReLU output: the tensor it replaces}). `mixed` holds the mixed
    batch norms by state-dict name (`CompactBases.mixed_channels`)."""
    nodes = _nodes(model)
    readers: dict[str, int] = {}
    for node in nodes:
        for name in node.inputs:
            readers[name] = readers.get(name, 0) + 1
    producer = {node.outputs[0]: node for node in nodes}
    folded = {node.outputs[0]: node.inputs[0] for node in nodes if node.op == "Relu"
              and producer.get(node.inputs[0]) is not None and producer[node.inputs[0]].op in ("Conv", "Add")
              and readers.get(node.inputs[0]) == 1}
    mean, std = np.array(preprocessing.mean), np.array(preprocessing.std)
    moments: dict[str, tuple[np.ndarray, np.ndarray]] = {}   # the first conv's output has its own (its batch norm)
    ranges = {IMAGE: (float((-mean / std).min()), float(((1 - mean) / std).max()))}
    nonnegative: set[str] = set()
    for node in nodes:
        out = node.outputs[0]
        if node.op == "Conv":
            bn = batch_norm_of(node.inputs[1].removesuffix(".weight"))
            moments[out] = (mixed[f"{bn}.bias"].astype(np.float64), np.abs(mixed[f"{bn}.weight"]).astype(np.float64))
        elif node.op == "Add":
            (m1, s1), (m2, s2) = moments[node.inputs[0]], moments[node.inputs[1]]
            moments[out] = (m1 + m2, np.sqrt(s1 * s1 + s2 * s2))
        elif node.op == "Relu":
            moments[out] = _rectified(*moments[node.inputs[0]])
            nonnegative.add(out)
        elif node.op in ("MaxPool", "GlobalAveragePool", "Flatten"):
            mu, sigma = moments[node.inputs[0]]
            moments[out] = (mu, sigma / POOLED_SPREAD) if node.op == "GlobalAveragePool" else (mu, sigma)
            if node.inputs[0] in nonnegative:
                nonnegative.add(out)
        else:
            continue
        mu, sigma = moments[out]
        ranges[out] = (0.0 if out in nonnegative else float((mu - sigmas * sigma).min()),
                       float((mu + sigmas * sigma).max()))
    relu_of = {source: relu for relu, source in folded.items()}
    quantized = [IMAGE] + [n.outputs[0] for n in nodes if n.op in QUANTIZED_OUTPUTS]
    return {name: ranges[relu_of.get(name, name)] for name in quantized}, folded


def quantize_model(model: bytes, folded_weights: Mapping[str, np.ndarray], mixed: Mapping[str, np.ndarray],
                   preprocessing: Preprocessing) -> bytes:
    """The fp32 model (image -> logits, the classifier fed as inputs, every conv's folded weight and bias an
    initializer named as in `folded_weights`, whose arrays replace them) as a QDQ int8 model."""
    ranges, relus = activation_ranges(model, mixed, preprocessing)
    renamed = {source: relu for relu, source in relus.items()}   # a folded ReLU's output takes its input's place
    graph, extra, quantized = bytearray(), bytearray(), {}
    for name, (low, high) in ranges.items():
        scale, zero = activation_scale(low, high)
        tensor = renamed.get(name, name)
        quantized[tensor] = scale
        extra += encode_field(GRAPH_INITIALIZER, onnx_tensor(f"{tensor}_scale", [], FLOAT, struct.pack("<f", scale)))
        extra += encode_field(GRAPH_INITIALIZER, onnx_tensor(f"{tensor}_zero", [], UINT8, bytes([zero])))
    nodes_out = bytearray()

    def qdq(tensor: str) -> None:
        nonlocal nodes_out
        nodes_out += encode_field(GRAPH_NODE, _node("QuantizeLinear", [tensor, f"{tensor}_scale", f"{tensor}_zero"],
                                                    f"{tensor}_q"))
        nodes_out += encode_field(GRAPH_NODE, _node("DequantizeLinear", [f"{tensor}_q", f"{tensor}_scale",
                                                                         f"{tensor}_zero"], f"{tensor}_dq"))

    qdq(IMAGE)
    for node in _nodes(model):
        if node.op == "Relu" and node.outputs[0] in relus:
            continue   # folded into the uint8 range of the tensor before it
        node.outputs = [renamed.get(o, o) for o in node.outputs]
        node.inputs = [f"{i}_dq" if i in quantized else i for i in node.inputs]
        if node.op == "Conv":
            weight, bias = node.inputs[1], node.inputs[2]
            q, w_scale = quantize_weight(np.asarray(folded_weights[weight], np.float32))
            x_scale = quantized[node.inputs[0].removesuffix("_dq")]
            b_scale = (w_scale * np.float32(x_scale)).astype(np.float32)
            b_q = np.rint(np.asarray(folded_weights[bias], np.float64) / b_scale).clip(-2**31, 2**31 - 1)
            channels = len(q)
            extra += encode_field(GRAPH_INITIALIZER, onnx_tensor(f"{weight}_q", q.shape, INT8, q.tobytes()))
            extra += encode_field(GRAPH_INITIALIZER, onnx_tensor(f"{weight}_scale", [channels], FLOAT,
                                                             w_scale.astype("<f4").tobytes()))
            extra += encode_field(GRAPH_INITIALIZER, onnx_tensor(f"{weight}_zero", [channels], INT8, bytes(channels)))
            extra += encode_field(GRAPH_INITIALIZER, onnx_tensor(f"{bias}_q", [channels], INT32,
                                                             b_q.astype("<i4").tobytes()))
            extra += encode_field(GRAPH_INITIALIZER, onnx_tensor(f"{bias}_scale", [channels], FLOAT,
                                                             b_scale.astype("<f4").tobytes()))
            axis = _attribute_int("axis", 0)
            nodes_out += encode_field(GRAPH_NODE, _node("DequantizeLinear", [f"{weight}_q", f"{weight}_scale",
                                                                             f"{weight}_zero"], f"{weight}_dq", axis))
            nodes_out += encode_field(GRAPH_NODE, _node("DequantizeLinear", [f"{bias}_q", f"{bias}_scale"],
                                                        f"{bias}_dq", axis))
            node.inputs[1:3] = [f"{weight}_dq", f"{bias}_dq"]
        nodes_out += encode_field(GRAPH_NODE, node.encode())
        if node.outputs[0] in quantized:
            qdq(node.outputs[0])
    for field, _, raw in _fields(_only(model, MODEL_GRAPH)):
        if field == GRAPH_NODE:
            continue
        if field == GRAPH_INITIALIZER:
            continue   # the folded float weights (external data): replaced by their int8 forms
        graph += raw
    if not quantized:
        raise ProtoError("no tensor to quantize")
    return _with_graph(model, bytes(nodes_out + graph + extra))
