"""The graphs in a bundle are untrusted: only what the SDK's own exporter writes is passed to onnxruntime.

onnxruntime runs whatever a graph says: a `Loop` of 10^12 iterations never returns, an `Expand` or
`Range` fed a hostile constant allocates until the process dies. So before a session is created:

- The backbone (`check_backbone_graph`) may use only the ops of a BN-folded ResNet-18 (Conv, Relu,
  Add, MaxPool, GlobalAveragePool, Flatten) in the default domain, no subgraphs, no functions, no
  sparse or inline initializers; every initializer is one of the architecture's folded weights, with
  its shape, at its offset in the external-data layout that the SDK computes
  (`sdk.fusion.folding.backbone_layout`); every Conv's attributes agree with its weight; the one input is
  image [batch, 3, S, S] and the one output `features`.
- The text encoder (`check_encoder_graph`) needs shape arithmetic (Shape, Range, Expand, ...), where an
  allow-list cannot bound memory. It must have the *structure* of an encoder the SDK exports: a
  SHA-256 over the whole graph except the values of its float and int8 weight tensors (whose shapes are
  included: weights change numbers, not cost) must be in `KNOWN_ENCODER_STRUCTURES`. A test checks
  that `export/text_encoder.py` produces a known structure, so changing the exporter means adding its
  structure here, on purpose.

>>> check_encoder_graph(b"not a graph")            # doctest: +SKIP
Traceback (most recent call last):
sdk.errors.BundleError: text_encoder.onnx: ...
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from contextlib import contextmanager

from sdk.errors import BundleError
from sdk.format import onnx_proto as pb
from sdk.format.onnx_proto import ProtoError, encode_field, packed_ints, parse_fields, parse_initializer, text
from sdk.format.passed_checks import PASSED
from sdk.fusion.architecture import STEM_POOL
from sdk.fusion.folding import BACKBONE_FILE

DEFAULT_DOMAINS = ("", "ai.onnx")
OPSET_RANGE = (13, 21)
MAX_BACKBONE_NODES = 200

BACKBONE_OPS = {"Conv", "Relu", "Add", "MaxPool", "GlobalAveragePool", "Flatten"}
# Structures of the text encoders that export/text_encoder.py writes (see the module docstring).
KNOWN_ENCODER_STRUCTURES = {
    "c74469d3bcb1110bc9f8f30be9df5eacdf9ddc01a47f7f070bd5376b6357322a":
        "all-MiniLM-L6-v2, 8-bit weight-only (export/text_encoder.py EXPORT_VERSION 2)",
}


def _fields(data: bytes) -> Iterator[tuple[int, bytes | int]]:
    return iter(list(parse_fields(data)))  # parsed whole: a ProtoError surfaces here, inside the caller's try


def _model_parts(model: bytes, what: str) -> tuple[bytes, list[tuple[str, int]]]:
    """(graph bytes, opsets), rejecting functions, training info and foreign domains."""
    graphs, opsets = [], []
    for field, value in _fields(model):
        if field in (pb.MODEL_TRAINING_INFO, pb.MODEL_FUNCTIONS):
            raise BundleError(f"{what}: model functions and training info are not allowed")
        if field == pb.MODEL_GRAPH:
            graphs.append(value)
        elif field == pb.MODEL_OPSET and isinstance(value, bytes):
            entry = dict(_fields(value))
            opsets.append((text(entry.get(pb.OPSET_DOMAIN, b"")), entry.get(pb.OPSET_VERSION, 0)))
    if len(graphs) != 1 or not isinstance(graphs[0], bytes):
        raise BundleError(f"{what}: expected one graph")
    for domain, version in opsets:
        if domain not in DEFAULT_DOMAINS or not isinstance(version, int) \
                or not OPSET_RANGE[0] <= version <= OPSET_RANGE[1]:
            raise BundleError(f"{what}: operator set {domain!r} version {version} is not allowed")
    if not opsets:
        raise BundleError(f"{what}: no operator set")
    return graphs[0], opsets


def _node(value: bytes, what: str) -> tuple[str, list[str], list[str], dict[str, list[int]]]:
    """(op type, inputs, outputs, integer attributes) of a NodeProto in the default domain, no subgraphs."""
    op, inputs, outputs, attrs = "", [], [], {}
    for field, v in _fields(value):
        if field == pb.NODE_OP_TYPE:
            op = text(v)
        elif field == pb.NODE_INPUT:
            inputs.append(text(v))
        elif field == pb.NODE_OUTPUT:
            outputs.append(text(v))
        elif field == pb.NODE_DOMAIN and text(v) not in DEFAULT_DOMAINS:
            raise BundleError(f"{what}: custom operator domain {text(v)!r}")
        elif field == pb.NODE_ATTRIBUTE and isinstance(v, bytes):
            name, ints = "", []
            for f, a in _fields(v):
                if f in (pb.ATTRIBUTE_G, pb.ATTRIBUTE_GRAPHS, pb.ATTRIBUTE_REF):
                    raise BundleError(f"{what}: {op or 'a node'} has a subgraph or reference attribute")
                if f == pb.ATTRIBUTE_NAME:
                    name = text(a)
                elif f in (pb.ATTRIBUTE_I, pb.ATTRIBUTE_INTS):
                    ints += packed_ints(a)
            attrs[name] = ints
    return op, inputs, outputs, attrs


def _tensor_dims(value: bytes, what: str) -> list[int | str]:
    """Dims of a float tensor ValueInfoProto (symbolic dims as their names)."""
    dims, elem = [], None
    for field, v in _fields(value):
        if field == pb.VALUE_INFO_TYPE and isinstance(v, bytes):
            for f, t in _fields(v):
                if f == pb.TYPE_TENSOR and isinstance(t, bytes):
                    for ff, tt in _fields(t):
                        if ff == pb.TENSOR_TYPE_ELEM_TYPE:
                            elem = tt
                        elif ff == pb.TENSOR_TYPE_SHAPE and isinstance(tt, bytes):
                            for _, dim in _fields(tt):
                                parts = dict(_fields(dim)) if isinstance(dim, bytes) else {}
                                dims.append(text(parts[pb.DIM_PARAM]) if pb.DIM_PARAM in parts
                                            else parts.get(pb.DIM_VALUE, -1))
    if elem != pb.FLOAT:
        raise BundleError(f"{what}: a graph input or output is not float32")
    return dims


def _name_of(value: bytes) -> str:
    return text(dict(_fields(value)).get(pb.VALUE_INFO_NAME, b""))


def _check_conv(attrs: dict[str, list[int]], weight: list[int], what: str) -> None:
    kernel = weight[2:]
    ok = (attrs.get("kernel_shape", kernel) == kernel and attrs.get("group", [1]) == [1]
          and attrs.get("dilations", [1, 1]) == [1, 1]
          and all(1 <= s <= 2 for s in attrs.get("strides", [1, 1])) and len(attrs.get("strides", [1, 1])) == 2
          and all(0 <= p <= 3 for p in attrs.get("pads", [0] * 4)) and len(attrs.get("pads", [0] * 4)) == 4
          and set(attrs) <= {"kernel_shape", "group", "dilations", "strides", "pads"})
    if not ok:
        raise BundleError(f"{what}: a Conv's attributes do not fit a ResNet-18 ({attrs})")


@contextmanager
def _malformed_is_bundle_error(what: str) -> Iterator[None]:
    """A protobuf that does not parse is reported as BundleError naming the member."""
    try:
        yield
    except ProtoError as e:
        raise BundleError(f"{what}: not a valid ONNX graph ({e})") from None


def check_backbone_graph(graph: bytes, layout: dict[str, dict], input_size: int) -> bytes:
    """`graph` if it is a BN-folded ResNet-18 feature graph with exactly this external-data `layout`
    (`sdk.fusion.folding.backbone_layout`) and input size; BundleError otherwise."""
    what = "member backbone.onnx"
    with _malformed_is_bundle_error(what):
        _check_backbone(graph, layout, input_size, what)
    return graph


def _check_backbone(graph: bytes, layout: dict[str, dict], input_size: int, what: str) -> None:
    body, _ = _model_parts(graph, what)
    inits, nodes, inputs, outputs = {}, [], [], []
    for field, value in _fields(body):
        if field == pb.GRAPH_SPARSE_INITIALIZER:
            raise BundleError(f"{what}: sparse initializers are not allowed")
        if not isinstance(value, bytes):
            continue
        if field == pb.GRAPH_INITIALIZER:
            init = parse_initializer(value)
            name, dims = init.name, list(init.dims)
            if name in inits or name not in layout:
                raise BundleError(f"{what}: initializer {name!r} is not one of the architecture's weights (or twice)")
            entry = layout[name]
            expected = {"location": BACKBONE_FILE, "offset": str(entry["offset"]),
                        "length": str(4 * math.prod(entry["shape"]))}
            if init.inline or init.data_type != pb.FLOAT or dims != entry["shape"] or init.external != expected:
                raise BundleError(f"{what}: initializer {name!r} must be float32 {entry['shape']} external data "
                                  f"at {expected}")
            inits[name] = dims
        elif field == pb.GRAPH_NODE:
            nodes.append(_node(value, what))
        elif field == pb.GRAPH_INPUT:
            inputs.append((_name_of(value), value))
        elif field == pb.GRAPH_OUTPUT:
            outputs.append(_name_of(value))
    if set(inits) != set(layout):
        raise BundleError(f"{what}: initializers missing: {sorted(set(layout) - set(inits))[:3]}")
    if [n for n, _ in inputs] != ["image"] or outputs != ["features"]:
        raise BundleError(f"{what}: must take one input 'image' and give one output 'features'")
    dims = _tensor_dims(inputs[0][1], what)
    if len(dims) != 4 or not isinstance(dims[0], str) or dims[1:] != [3, input_size, input_size]:
        raise BundleError(f"{what}: input 'image' must be [batch, 3, {input_size}, {input_size}], got {dims}")
    if len(nodes) > MAX_BACKBONE_NODES:
        raise BundleError(f"{what}: {len(nodes)} nodes is more than a ResNet-18 has")
    known = {"image", *inits}
    for op, node_inputs, node_outputs, attrs in nodes:
        if op not in BACKBONE_OPS:
            raise BundleError(f"{what}: operator {op!r} is not allowed in a backbone (allowed: {sorted(BACKBONE_OPS)})")
        if any(i not in known for i in node_inputs) or any(o in known for o in node_outputs):
            raise BundleError(f"{what}: nodes are not in order, or reuse a name")
        if op == "Conv":
            if len(node_inputs) != 3 or node_inputs[1] not in inits:
                raise BundleError(f"{what}: a Conv must read one of the architecture's weights and a bias")
            _check_conv(attrs, inits[node_inputs[1]], what)
        elif op == "MaxPool" and (attrs.get("kernel_shape") != [STEM_POOL.kernel] * 2
                                  or attrs.get("strides") != [STEM_POOL.stride] * 2):
            k, s = STEM_POOL.kernel, STEM_POOL.stride
            raise BundleError(f"{what}: MaxPool must be {k}x{k}, stride {s}")
        elif op == "Flatten" and attrs.get("axis", [1]) != [1]:
            raise BundleError(f"{what}: Flatten must keep the batch axis")
        known.update(node_outputs)
    if "features" not in known:
        raise BundleError(f"{what}: no node computes 'features'")


def encoder_structure(graph: bytes) -> str:
    """SHA-256 of the graph without the values of its float and int8 weights (their shapes included)."""
    what = "member text_encoder.onnx"
    with _malformed_is_bundle_error(what):
        return _structure(graph, what)


def _structure(graph: bytes, what: str) -> str:
    body, opsets = _model_parts(graph, what)
    digest = hashlib.sha256(repr(sorted(opsets)).encode())
    for field, value in _fields(body):
        if field == pb.GRAPH_SPARSE_INITIALIZER:
            raise BundleError(f"{what}: sparse initializers are not allowed")
        if field == pb.GRAPH_NODE and isinstance(value, bytes):
            _node(value, what)  # rejects foreign domains and subgraphs with a clear message
        if field == pb.GRAPH_INITIALIZER and isinstance(value, bytes):
            init = parse_initializer(value)
            if init.external:
                raise BundleError(f"{what}: external data is not allowed")
            if init.data_type in (pb.FLOAT, pb.INT8):
                value = b"".join(encode_field(f, v) for f, v in _fields(value) if f not in pb.INLINE_DATA)
        digest.update(encode_field(field, value))
    return digest.hexdigest()


def check_encoder_graph(graph: bytes, digest: bytes | None = None) -> bytes:
    """`graph` if it has the structure of a text encoder the SDK exports; BundleError otherwise. The same bytes
    passed before in this process pass again without the walk (sdk/format/passed_checks.py; `digest`: their
    SHA-256, if the caller has it)."""
    PASSED.check_once("text_encoder.onnx", graph, _check_encoder_structure, digest)
    return graph


def _check_encoder_structure(graph: bytes) -> None:
    structure = encoder_structure(graph)
    if structure not in KNOWN_ENCODER_STRUCTURES:
        raise BundleError(f"member text_encoder.onnx: not a text encoder this SDK exports (structure "
                          f"{structure[:16]}...); only the graph's weights may differ")
