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
quantized, -1.99 data-free. The ranges' width, RANGE_SIGMAS = 24, was chosen on a full-width GPU-trained
run's training photos (experiments.md, "Is it the range width?"): with 8, its 600 val tasks lost 2.74 points
(clipping), with 24 0.01, and the demo run's 0.44 instead of 0.87. What the runtime measures (600 tasks,
full-width timings): docs/results/int8_runtime.json. The Java core (android_demo/core/.../Int8.java) writes
the same bytes.

>>> activation_scale(0.0, 255.0), activation_scale(-1.0, 1.0)[1]
((1.0, 0), 128)
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence, Set

import numpy as np

from sdk.format.onnx_proto import (
    GRAPH_INITIALIZER,
    GRAPH_NODE,
    LENGTH_DELIMITED,
    MODEL_GRAPH,
    NODE_INPUT,
    NODE_OP_TYPE,
    NODE_OUTPUT,
    ProtoError,
    _attribute_int,
    _fields,
    _node,
    _only,
    encode_field,
    encode_varint,
    initializers,
    tensor_head,
    text,
)
from sdk.format.onnx_proto import tensor as onnx_tensor
from sdk.fusion.architecture import batch_norm_of
from sdk.fusion.native import native_kernel
from sdk.fusion.quantize import WEIGHT_QMAX, WEIGHT_QMIN, quantize_weight
from sdk.media.preprocessing import Preprocessing

RANGE_SIGMAS = 24.0     # chosen on training photos of a full-width run (int8_range_sweep*.json; 8 before)
POOLED_SPREAD = 4.0     # the global pool's output spread: the map's over this (variant 3 of the lab's protocol)
UINT8, INT8, INT32, FLOAT = 2, 3, 6, 1
QUANTIZED_OUTPUTS = ("Conv", "Add", "MaxPool", "GlobalAveragePool")
IMAGE = "image"


def activation_scale(low: float, high: float) -> tuple[float, int]:
    """(scale, zero point) of a uint8 tensor covering [low, high] (and 0), as onnxruntime computes them."""
    low, high = min(low, 0.0), max(high, 0.0)
    scale = (high - low) / 255.0 or 1.0
    return scale, int(min(255, max(0, round(-low / scale))))


# erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z / 2), z >= 0: fractional error below 1.2e-7 everywhere
# (Numerical Recipes' erfcc, a Chebyshev fit), in numpy, where math.erf per channel cost ~4 ms a model.
ERFC_COEFFICIENTS = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398,
                     1.48851587, -0.82215223, 0.17087277)


def normal_cdf(a: np.ndarray) -> np.ndarray:
    """P(X <= a), X ~ N(0, 1), elementwise (relative error below 1.2e-7 in either tail).

    >>> [round(float(v), 6) for v in normal_cdf(np.array([-1.0, 0.0, 2.0]))]
    [0.158655, 0.5, 0.97725]
    """
    z = np.abs(a) / math.sqrt(2)
    t = 1 / (1 + 0.5 * z)
    poly = np.full_like(t, ERFC_COEFFICIENTS[-1])
    for c in ERFC_COEFFICIENTS[-2::-1]:
        poly = poly * t + c
    tail = 0.5 * t * np.exp(-z * z + poly)   # P(X > |a|)
    return np.where(a >= 0, 1 - tail, tail)


def _rectified(mu: np.ndarray, sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of max(0, x), x ~ N(mu, sigma^2), per channel."""
    s = np.maximum(sigma, 1e-8)
    a = mu / s
    cdf = normal_cdf(a)
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


def graph_nodes(model: bytes) -> list[_Node]:
    """The nodes of an ONNX model's graph, in order (an int8 graph's readers: Int8Plan, export/int8_program.py)."""
    return [_Node(v) for f, v, _ in _fields(_only(model, MODEL_GRAPH)) if f == GRAPH_NODE]


class _Slot:
    """Where one alpha-dependent tensor's data lies in the plan's model bytes."""

    def __init__(self, dtype: str, count: int):
        self.dtype, self.count, self.offset = np.dtype(dtype), count, -1

    @property
    def nbytes(self) -> int:
        return self.count * self.dtype.itemsize

    def view(self, buffer: bytearray) -> np.ndarray:
        return np.frombuffer(buffer, self.dtype, self.count, self.offset)


class Int8Plan:
    """The QDQ int8 form of one fp32 graph (image -> logits, the classifier fed as inputs, every conv's
    folded weight and bias an initializer), made once per graph: the model bytes with every value that
    depends on alpha (int8 weights, their scales, int32 biases, activation scales and zero points) left as
    a slot of fixed size, so that `quantize` writes each where it lies instead of encoding an 11 MB protobuf
    anew (docs/results/int8_runtime.json, `int8_steps_ms.quantize`: what the step costs now).

    >>> plan = Int8Plan(engine.graph, preprocessing)                          # doctest: +SKIP
    >>> graph = plan.quantize(folded_weights, bundle.bases.mixed_channels(alpha))   # doctest: +SKIP
    """

    def __init__(self, model: bytes, preprocessing: Preprocessing):
        self.nodes = graph_nodes(model)
        readers: dict[str, int] = {}
        for node in self.nodes:
            for name in node.inputs:
                readers[name] = readers.get(name, 0) + 1
        producer = {node.outputs[0]: node for node in self.nodes}
        self.folded = {node.outputs[0]: node.inputs[0] for node in self.nodes if node.op == "Relu"
                       and producer.get(node.inputs[0]) is not None
                       and producer[node.inputs[0]].op in ("Conv", "Add") and readers.get(node.inputs[0]) == 1}
        self.quantized = [IMAGE] + [n.outputs[0] for n in self.nodes if n.op in QUANTIZED_OUTPUTS]
        self.renamed = {source: relu for relu, source in self.folded.items()}   # a folded ReLU's output takes
        #                                                                          its input's place
        # The image's range is exact: pixels 0 and 1 normalised in float32, as `Preprocessing.normalize` does.
        mean, std = np.asarray(preprocessing.mean, np.float32), np.asarray(preprocessing.std, np.float32)
        self.image_range = (float(((0 - mean) / std).min()), float(((1 - mean) / std).max()))
        # What `ranges` computes at once: each conv's output (its batch norm's channels, one slice of an array
        # of all of them: (output, batch norm, first channel, end)), and the ReLUs that take a conv's output.
        dims, first = {i.name: i.dims for i in initializers(model)}, 0
        self._conv_slices: list[tuple[str, str, int, int]] = []
        for n in (n for n in self.nodes if n.op == "Conv"):
            end = first + int(dims[n.inputs[1]][0])
            self._conv_slices.append((n.outputs[0], batch_norm_of(n.inputs[1].removesuffix(".weight")), first, end))
            first = end
        slice_of = {out: (a, b) for out, _, a, b in self._conv_slices}
        self._conv_relus = [(n.outputs[0], *slice_of[n.inputs[0]]) for n in self.nodes
                            if n.op == "Relu" and n.inputs[0] in slice_of]
        self._relu_channels = np.concatenate([np.arange(a, b) for _, a, b in self._conv_relus] or [[]]).astype(np.intp)
        self.slots: dict[str, _Slot] = {}
        self.convs: list[tuple[str, str, tuple[int, ...], str]] = []   # (weight, bias, shape, input tensor)
        self.buffer = self._build(model)   # the model bytes, rewritten by each quantize
        self._index_slots()

    def ranges(self, mixed: Mapping[str, np.ndarray], sigmas: float = RANGE_SIGMAS
               ) -> dict[str, tuple[float, float]]:
        """{tensor: (low, high)}: see the module docstring. The convs' outputs and the ReLUs that take them are
        computed all at once (one array of every such channel: these moments depend on the batch norms alone,
        and each value is computed as it would be alone); the rest node by node, in order."""
        mu = np.concatenate([mixed[f"{bn}.bias"] for _, bn, _, _ in self._conv_slices]).astype(np.float64)
        sigma = np.abs(np.concatenate([mixed[f"{bn}.weight"] for _, bn, _, _ in self._conv_slices]).astype(np.float64))
        moments = {out: (mu[a:b], sigma[a:b]) for out, _, a, b in self._conv_slices}
        relu_mu, relu_sigma = _rectified(mu[self._relu_channels], sigma[self._relu_channels])
        first = 0
        for out, a, b in self._conv_relus:
            moments[out] = (relu_mu[first:first + b - a], relu_sigma[first:first + b - a])
            first += b - a
        ranges = {IMAGE: self.image_range}
        nonnegative = {out for out, _, _ in self._conv_relus}
        for node in self.nodes:
            out = node.outputs[0]
            if node.op == "Add":
                (m1, s1), (m2, s2) = moments[node.inputs[0]], moments[node.inputs[1]]
                moments[out] = (m1 + m2, np.sqrt(s1 * s1 + s2 * s2))
            elif node.op == "Relu" and out not in moments:
                moments[out] = _rectified(*moments[node.inputs[0]])
                nonnegative.add(out)
            elif node.op in ("MaxPool", "GlobalAveragePool", "Flatten"):
                m, sd = moments[node.inputs[0]]
                moments[out] = (m, sd / POOLED_SPREAD) if node.op == "GlobalAveragePool" else (m, sd)
                if node.inputs[0] in nonnegative:
                    nonnegative.add(out)
            elif node.op not in ("Conv", "Relu"):
                continue
            m, sd = moments[out]
            low = 0.0 if out in nonnegative else float((m - sigmas * sd).min())
            ranges[out] = (low, float((m + sigmas * sd).max()))
        relu_of = {source: relu for relu, source in self.folded.items()}
        return {name: ranges[relu_of.get(name, name)] for name in self.quantized}

    def _index_slots(self) -> None:
        """The byte indices in the buffer of each kind of slot that `quantize` writes, in order: activation
        scales and zero points (of `quantized`), then the convs' weight scales, bias scales and int32 biases;
        and for each conv, its input's place among the activations and its channel count."""
        def at(names: list[str]) -> np.ndarray:
            return np.concatenate([np.arange(self.slots[n].offset, self.slots[n].offset + self.slots[n].nbytes)
                                   for n in names]).astype(np.intp)

        tensors = [self.renamed.get(n, n) for n in self.quantized]
        self._at = {"x_scale": at([f"{t}_scale" for t in tensors]), "x_zero": at([f"{t}_zero" for t in tensors]),
                    "w_scale": at([f"{w}_scale" for w, _, _, _ in self.convs]),
                    "b_scale": at([f"{b}_scale" for _, b, _, _ in self.convs]),
                    "b_q": at([f"{b}_q" for _, b, _, _ in self.convs])}
        self._conv_inputs = np.array([tensors.index(source) for _, _, _, source in self.convs], np.intp)
        self._conv_channels = np.array([shape[0] for _, _, shape, _ in self.convs], np.intp)

    def weight_outputs(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """{folded weight name: (its int8 weight, its scales)}: views of where they lie in the plan's buffer,
        for a fusion that quantizes as it fuses (`NativeKernel.quantizing`)."""
        return {weight: (self.slots[f"{weight}_q"].view(self.buffer).reshape(shape),
                         self.slots[f"{weight}_scale"].view(self.buffer)) for weight, _, shape, _ in self.convs}

    def quantize(self, folded_weights: Mapping[str, np.ndarray], mixed: Mapping[str, np.ndarray],
                 buffer: bytearray | None = None, quantized: Set[str] = frozenset()) -> bytes:
        """The int8 model of these folded weights (by initializer name) and mixed batch norms. It writes them
        into the plan's one buffer (one caller at a time: the runtime holds its int8 lock), or into `buffer`,
        a copy of it. The weights named in `quantized` are in the plan's buffer already (`weight_outputs`:
        the fusion wrote them, from these folded weights)."""
        buffer = self.buffer if buffer is None else buffer   # every slot is written below: no copy needed
        if quantized and buffer is not self.buffer:
            raise ValueError("weights quantized in the plan's buffer, the graph asked of another")
        # Every slot of a kind at once, through the byte indices `_index_slots` made (a loop over the ~60
        # tensors cost ~0.4 ms a model); each value is computed as the loop computed it.
        at = self._at
        memory = np.frombuffer(buffer, np.uint8)
        ranges = self.ranges(mixed)
        scales, zeros = zip(*(activation_scale(*ranges[name]) for name in self.quantized), strict=True)
        x_scales = np.array(scales, "<f4")
        memory[at["x_scale"]] = x_scales.view(np.uint8)
        memory[at["x_zero"]] = zeros
        self.quantize_weights(folded_weights, [w for w, _, _, _ in self.convs if w not in quantized], buffer)
        b_scale = memory[at["w_scale"]].view("<f4") * np.repeat(x_scales[self._conv_inputs], self._conv_channels)
        biases = np.concatenate([np.asarray(folded_weights[bias], np.float64) for _, bias, _, _ in self.convs])
        memory[at["b_scale"]] = b_scale.view(np.uint8)
        memory[at["b_q"]] = np.rint(biases / b_scale).clip(-2**31, 2**31 - 1).astype("<i4").view(np.uint8)
        return bytes(buffer)

    def quantize_weights(self, folded_weights: Mapping[str, np.ndarray], names: Sequence[str],
                         buffer: bytearray | None = None) -> None:
        """The named conv weights as per-channel int8 weights and scales, written in their slots of the plan's
        buffer (or `buffer`): the library's quantizer where there is one, else numpy (the same bits)."""
        buffer = self.buffer if buffer is None else buffer
        shapes = {weight: shape for weight, _, shape, _ in self.convs}
        layers = [(np.ascontiguousarray(folded_weights[weight], np.float32),
                   self.slots[f"{weight}_q"].view(buffer).reshape(shapes[weight]),
                   self.slots[f"{weight}_scale"].view(buffer)) for weight in names]
        kernel = native_kernel()
        if kernel is None or not kernel.quantize_layers(layers, WEIGHT_QMIN, WEIGHT_QMAX):
            for source_weight, q, w_scale in layers:
                quantize_weight(source_weight, out=(q, w_scale))

    def places(self) -> dict[str, tuple[int, int]]:
        """Where each alpha-dependent tensor lies in every graph `quantize` returns: name -> (offset, bytes)."""
        return {name: (slot.offset, slot.nbytes) for name, slot in self.slots.items()}

    def probe(self, seed: int = 0) -> bytes:
        """The graph this plan writes for random folded weights and batch norms, no model's: what onnxruntime
        makes of the plan's graphs whatever their values (`sdk.engines.int8_session`). The plan's buffer is left as it
        was (a copy is written), so it needs no lock."""
        rng = np.random.default_rng(seed)
        folded, mixed = {}, {}
        for weight, bias, shape, _ in self.convs:   # uniform float32: normal draws of 11 M weights took ~190 ms
            folded[weight] = rng.random(shape, dtype=np.float32)
            folded[weight] -= 0.5   # in place: new arrays of 11 M floats cost their pages again (~35 ms)
            folded[weight] *= 0.1
            folded[bias] = (rng.random(shape[0], dtype=np.float32) - 0.5) * 0.2
            bn = batch_norm_of(weight.removesuffix(".weight"))
            mixed[f"{bn}.weight"] = rng.uniform(0.2, 2.0, shape[0]).astype(np.float32)
            mixed[f"{bn}.bias"] = rng.standard_normal(shape[0]).astype(np.float32)
        return self.quantize(folded, mixed, buffer=bytearray(self.buffer))

    def _build(self, model: bytes) -> bytearray:
        """The model bytes with zeros in every slot, each slot's offset set."""
        renamed = self.renamed
        quantized = {renamed.get(n, n) for n in self.quantized}
        parts: list[bytes | _Slot] = []   # the graph's nodes, then its other fields, then the initializers
        parts_of_initializers: list[bytes | _Slot] = []
        dims_of = {i.name: i.dims for i in initializers(model)}

        def slot(name: str, dims: Sequence[int], data_type: int, dtype: str) -> None:
            count = int(np.prod(dims, dtype=np.int64))
            self.slots[name] = _Slot(dtype, count)
            nbytes = count * self.slots[name].dtype.itemsize
            head = tensor_head(name, dims, data_type, nbytes)
            parts_of_initializers.append(encode_varint(GRAPH_INITIALIZER << 3 | LENGTH_DELIMITED)
                                         + encode_varint(len(head) + nbytes) + head)
            parts_of_initializers.append(self.slots[name])

        def qdq(tensor: str) -> None:
            parts.append(encode_field(GRAPH_NODE, _node("QuantizeLinear", [tensor, f"{tensor}_scale",
                                                                           f"{tensor}_zero"], f"{tensor}_q")))
            parts.append(encode_field(GRAPH_NODE, _node("DequantizeLinear", [f"{tensor}_q", f"{tensor}_scale",
                                                                             f"{tensor}_zero"], f"{tensor}_dq")))

        for name in self.quantized:
            tensor = renamed.get(name, name)
            slot(f"{tensor}_scale", [], FLOAT, "<f4")
            slot(f"{tensor}_zero", [], UINT8, "u1")
        qdq(IMAGE)
        for original in self.nodes:
            if original.op == "Relu" and original.outputs[0] in self.folded:
                continue   # folded into the uint8 range of the tensor before it
            node = _Node(original.encode())
            node.outputs = [renamed.get(o, o) for o in node.outputs]
            node.inputs = [f"{i}_dq" if i in quantized else i for i in node.inputs]
            if node.op == "Conv":
                weight, bias = node.inputs[1], node.inputs[2]
                shape = tuple(dims_of[weight])
                channels = shape[0]
                self.convs.append((weight, bias, shape, node.inputs[0].removesuffix("_dq")))
                slot(f"{weight}_q", shape, INT8, "i1")
                slot(f"{weight}_scale", [channels], FLOAT, "<f4")
                parts_of_initializers.append(encode_field(GRAPH_INITIALIZER, onnx_tensor(
                    f"{weight}_zero", [channels], INT8, bytes(channels))))
                slot(f"{bias}_q", [channels], INT32, "<i4")
                slot(f"{bias}_scale", [channels], FLOAT, "<f4")
                axis = _attribute_int("axis", 0)
                parts.append(encode_field(GRAPH_NODE, _node("DequantizeLinear", [f"{weight}_q", f"{weight}_scale",
                                                                                 f"{weight}_zero"], f"{weight}_dq",
                                                            axis)))
                parts.append(encode_field(GRAPH_NODE, _node("DequantizeLinear", [f"{bias}_q", f"{bias}_scale"],
                                                            f"{bias}_dq", axis)))
                node.inputs[1:3] = [f"{weight}_dq", f"{bias}_dq"]
            parts.append(encode_field(GRAPH_NODE, node.encode()))
            if node.outputs[0] in quantized:
                qdq(node.outputs[0])
        for field, _, raw in _fields(_only(model, MODEL_GRAPH)):
            if field not in (GRAPH_NODE, GRAPH_INITIALIZER):   # the folded float weights: replaced by int8 ones
                parts.append(raw)
        if not self.quantized:
            raise ProtoError("no tensor to quantize")
        parts += parts_of_initializers
        graph_size = sum(p.count * p.dtype.itemsize if isinstance(p, _Slot) else len(p) for p in parts)
        out, layout = bytearray(), hashlib.sha256()
        for field, _, raw in _fields(model):
            if field != MODEL_GRAPH:
                out += raw
                layout.update(raw)
                continue
            out += encode_varint(MODEL_GRAPH << 3 | LENGTH_DELIMITED) + encode_varint(graph_size)
            for part in parts:
                if isinstance(part, _Slot):
                    part.offset = len(out)
                    out += bytes(part.count * part.dtype.itemsize)
                    layout.update(f"<slot {part.dtype.str} x {part.count} at {part.offset}>".encode())
                else:
                    out += part
                    layout.update(part)
        self.layout_sha256 = layout.hexdigest()   # the graph but its values: what a stored route must be of
        return out


def int8_weights(graph: bytes) -> dict[str, np.ndarray]:
    """The float weights an int8 graph (`Int8Plan.quantize`) computes with, by folded name: each conv's int8
    weight times its channel's scale, in float32 (what an export to a format that quantizes by itself, Core ML,
    starts from, so that it carries this model's weights, not a requantized float32 model's)."""
    tensors = {t.name: t for t in initializers(graph)}
    out = {}
    for name, tensor in tensors.items():
        if name.endswith(".weight_q"):
            weight = name.removesuffix("_q")
            q = np.frombuffer(tensor.raw, np.int8).reshape(tensor.dims).astype(np.float32)
            scale = np.frombuffer(tensors[f"{weight}_scale"].raw, "<f4")
            out[weight] = q * scale.reshape(-1, *([1] * (q.ndim - 1)))
    if not out:
        raise ProtoError("no int8 weights in this graph")
    return out


def quantize_model(model: bytes, folded_weights: Mapping[str, np.ndarray], mixed: Mapping[str, np.ndarray],
                   preprocessing: Preprocessing) -> bytes:
    """The fp32 model (image -> logits, the classifier fed as inputs, every conv's folded weight and bias an
    initializer named as in `folded_weights`, whose arrays replace them) as a QDQ int8 model (one use of
    `Int8Plan`; the runtime keeps its plan)."""
    return Int8Plan(model, preprocessing).quantize(folded_weights, mixed)
