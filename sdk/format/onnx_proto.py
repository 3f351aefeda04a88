"""Just enough of the protobuf wire format for the edits the runtime makes to ONNX graphs.

The runtime has no `onnx` package (it would add protobuf and ~15 MB to a device install), and its
edits are small: onnxruntime's optimized backbone graph (`sdk.engines.compiled`) keeps its conv weights as
initializers in external data; moving them to graph inputs lets one session serve every
personalized model, each feeding its own weights (`initializers_to_inputs`). And the classifier rows
of a task become a Gemm at the end of the backbone graph, fed as inputs, so that one onnxruntime call
gives logits (`append_linear_head`). A standalone `.onnx` export (`sdk.exports`) carries its
weights in the file (`inline_external_data`, `inputs_to_initializers`) and the class names in its
metadata (`with_metadata`). Only the ONNX fields named below are read; every other field is copied
through byte for byte.

>>> graph = encode_field(1, b"conv")                       # a GraphProto with one node, no initializer
>>> model = encode_field(7, graph)                         # ModelProto.graph
>>> [f for f, _ in parse_fields(model)]
[7]
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

# Field numbers from onnx.proto (the runtime's edits here and the bundle checks in sdk.format.graph_check).
MODEL_GRAPH, MODEL_OPSET, MODEL_METADATA_PROPS, MODEL_TRAINING_INFO, MODEL_FUNCTIONS = 7, 8, 14, 20, 25
OPSET_DOMAIN, OPSET_VERSION = 1, 2
GRAPH_NODE, GRAPH_INITIALIZER, GRAPH_INPUT, GRAPH_OUTPUT, GRAPH_SPARSE_INITIALIZER = 1, 5, 11, 12, 15
NODE_INPUT, NODE_OUTPUT, NODE_NAME, NODE_OP_TYPE, NODE_ATTRIBUTE, NODE_DOMAIN = 1, 2, 3, 4, 5, 7
ATTRIBUTE_NAME, ATTRIBUTE_I, ATTRIBUTE_TYPE, ATTRIBUTE_INT = 1, 3, 20, 2
ATTRIBUTE_G, ATTRIBUTE_INTS, ATTRIBUTE_GRAPHS, ATTRIBUTE_REF = 6, 8, 11, 21
ATTRIBUTE_TYPE_INTS = 7  # AttributeProto.AttributeType (ATTRIBUTE_INT above is the type INT = 2)
TENSOR_DIMS, TENSOR_DATA_TYPE, TENSOR_NAME, TENSOR_EXTERNAL_DATA, TENSOR_DATA_LOCATION = 1, 2, 8, 13, 14
TENSOR_FLOAT_DATA, TENSOR_INT32_DATA, TENSOR_RAW_DATA = 4, 5, 9
INLINE_DATA = (TENSOR_RAW_DATA, TENSOR_FLOAT_DATA, TENSOR_INT32_DATA)  # fields holding a tensor's data in the graph
ENTRY_KEY, ENTRY_VALUE = 1, 2
DATA_LOCATION_EXTERNAL = 1   # TensorProto.DataLocation.EXTERNAL
VALUE_INFO_NAME, VALUE_INFO_TYPE = 1, 2
TYPE_TENSOR, TENSOR_TYPE_ELEM_TYPE, TENSOR_TYPE_SHAPE, SHAPE_DIM, DIM_VALUE, DIM_PARAM = 1, 1, 2, 1, 1, 2
FLOAT, INT8, INT64 = 1, 3, 7

VARINT, FIXED64, LENGTH_DELIMITED, FIXED32 = 0, 1, 2, 5


class ProtoError(ValueError):
    """The bytes are not the protobuf this module expects."""


@dataclass(frozen=True)
class Initializer:
    name: str
    dims: tuple[int, ...]
    data_type: int
    external: dict[str, str]      # location, offset, length: empty if the data is inline
    inline: bool = False          # the tensor carries its data in the graph
    raw: bytes = dataclasses.field(default=b"", repr=False)   # its raw_data, if that is where it carries it


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ProtoError("truncated or overlong varint")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if byte < 0x80:
            return value, pos


def encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _fields(data: bytes) -> Iterator[tuple[int, bytes | int, bytes]]:
    """(field number, value, the field's encoded bytes) of each field in order: ints for varints, raw
    bytes for the rest."""
    pos = 0
    while pos < len(data):
        start = pos
        key, pos = _varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == VARINT:
            value, pos = _varint(data, pos)
        elif wire in (FIXED64, FIXED32, LENGTH_DELIMITED):
            if wire == LENGTH_DELIMITED:
                size, pos = _varint(data, pos)
            else:
                size = 8 if wire == FIXED64 else 4
            if pos + size > len(data):
                raise ProtoError("truncated field")
            value, pos = data[pos:pos + size], pos + size
        else:
            raise ProtoError(f"unsupported wire type {wire}")
        yield field, value, data[start:pos]


def parse_fields(data: bytes) -> Iterator[tuple[int, bytes | int]]:
    """(field number, value) of each field in order: ints for varints, raw bytes for the rest."""
    return ((field, value) for field, value, _ in _fields(data))


def encode_field(field: int, value: bytes | int) -> bytes:
    if isinstance(value, int):
        return encode_varint(field << 3 | VARINT) + encode_varint(value)
    return encode_varint(field << 3 | LENGTH_DELIMITED) + encode_varint(len(value)) + value


def _only(model: bytes, field: int) -> bytes:
    values = [v for f, v in parse_fields(model) if f == field]
    if len(values) != 1 or not isinstance(values[0], bytes):
        raise ProtoError(f"expected one field {field}, found {len(values)}")
    return values[0]


def packed_ints(value: bytes | int) -> list[int]:
    """A repeated int64 field's values, packed (bytes) or not (one varint); negatives as two's complement."""
    if isinstance(value, int):
        values = [value]
    else:
        values, pos = [], 0
        while pos < len(value):
            v, pos = _varint(value, pos)
            values.append(v)
    return [v - (1 << 64) if v >= 1 << 63 else v for v in values]


def text(value: bytes | int) -> str:
    """A string field's value; ProtoError if it is not a UTF-8 string."""
    if not isinstance(value, bytes):
        raise ProtoError("a string field holds an integer")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtoError("a name that is not UTF-8") from None


def parse_initializer(tensor: bytes) -> Initializer:
    """A TensorProto's name, dims, data type, external-data entries and whether it has inline data."""
    name, dims, data_type, external, inline, raw = "", [], 0, {}, False, b""
    for field, value in parse_fields(tensor):
        if field == TENSOR_NAME:
            name = text(value)
        elif field == TENSOR_DIMS:
            dims += packed_ints(value)
        elif field == TENSOR_DATA_TYPE and isinstance(value, int):
            data_type = value
        elif field == TENSOR_EXTERNAL_DATA and isinstance(value, bytes):
            entry = {f: v for f, v in parse_fields(value) if isinstance(v, bytes)}
            external[text(entry.get(ENTRY_KEY, b""))] = text(entry.get(ENTRY_VALUE, b""))
        elif field in INLINE_DATA:
            inline = True
            raw = value if field == TENSOR_RAW_DATA and isinstance(value, bytes) else raw
    return Initializer(name, tuple(dims), data_type, external, inline, raw)


def initializers(model: bytes) -> list[Initializer]:
    """The graph's initializers (names, shapes, where their data lives)."""
    return [parse_initializer(v) for f, v in parse_fields(_only(model, MODEL_GRAPH))
            if f == GRAPH_INITIALIZER and isinstance(v, bytes)]


def _float_value(name: str, dims: Sequence[int | str]) -> bytes:
    """A ValueInfoProto of a float tensor; a str dim is symbolic ("batch")."""
    shape = b"".join(encode_field(SHAPE_DIM, encode_field(DIM_PARAM, d.encode("utf-8")) if isinstance(d, str)
                                  else encode_field(DIM_VALUE, d)) for d in dims)
    tensor_type = encode_field(TENSOR_TYPE_ELEM_TYPE, FLOAT) + encode_field(TENSOR_TYPE_SHAPE, shape)
    return encode_field(VALUE_INFO_NAME, name.encode("utf-8")) + encode_field(
        VALUE_INFO_TYPE, encode_field(TYPE_TENSOR, tensor_type))


def _with_graph(model: bytes, graph: bytes) -> bytes:
    return b"".join(encode_field(MODEL_GRAPH, graph) if field == MODEL_GRAPH else raw
                    for field, _, raw in _fields(model))


def initializers_to_inputs(model: bytes, names: Sequence[str]) -> bytes:
    """The model with the named float initializers removed and declared as graph inputs instead."""
    wanted, found, graph = set(names), {}, bytearray()
    for field, value, raw in _fields(_only(model, MODEL_GRAPH)):
        if field == GRAPH_INITIALIZER and isinstance(value, bytes):
            init = parse_initializer(value)
            if init.name in wanted:
                found[init.name] = init
                continue
        graph += raw
    if set(found) != wanted or any(i.data_type != FLOAT for i in found.values()):
        raise ProtoError(f"not float initializers of this graph: {sorted(wanted - set(found))}")
    for name in names:
        graph += encode_field(GRAPH_INPUT, _float_value(name, found[name].dims))
    return _with_graph(model, bytes(graph))


def _value_name(value_info: bytes) -> str:
    """A ValueInfoProto's name ("" if it has none)."""
    return text(next((v for f, v in parse_fields(value_info) if f == VALUE_INFO_NAME and isinstance(v, bytes)), b""))


def _node(op_type: str, inputs: Sequence[str], output: str, attributes: bytes = b"") -> bytes:
    node = b"".join(encode_field(NODE_INPUT, n.encode("utf-8")) for n in inputs)
    node += encode_field(NODE_OUTPUT, output.encode("utf-8")) + encode_field(NODE_NAME, output.encode("utf-8"))
    return node + encode_field(NODE_OP_TYPE, op_type.encode("utf-8")) + attributes


def _attribute_int(name: str, value: int) -> bytes:
    return encode_field(NODE_ATTRIBUTE, encode_field(ATTRIBUTE_NAME, name.encode("utf-8"))
                        + encode_field(ATTRIBUTE_TYPE, ATTRIBUTE_INT) + encode_field(ATTRIBUTE_I, value))


def _attribute_ints(name: str, values: Sequence[int]) -> bytes:
    ints = b"".join(encode_field(ATTRIBUTE_INTS, v) for v in values)
    return encode_field(NODE_ATTRIBUTE, encode_field(ATTRIBUTE_NAME, name.encode("utf-8"))
                        + encode_field(ATTRIBUTE_TYPE, ATTRIBUTE_TYPE_INTS) + ints)


def tensor(name: str, dims: Sequence[int], data_type: int, data: bytes) -> bytes:
    """A TensorProto of `data_type` (FLOAT, INT8, ...) and `dims` holding `data` (little-endian, row-major) inline."""
    return tensor_head(name, dims, data_type, len(data)) + data


def tensor_head(name: str, dims: Sequence[int], data_type: int, nbytes: int) -> bytes:
    """A TensorProto's bytes before its `nbytes` of inline data (the data is its last field)."""
    return (b"".join(encode_field(TENSOR_DIMS, d) for d in dims) + encode_field(TENSOR_DATA_TYPE, data_type)
            + encode_field(TENSOR_NAME, name.encode("utf-8")) + encode_varint(TENSOR_RAW_DATA << 3 | LENGTH_DELIMITED)
            + encode_varint(nbytes))


def float_tensor(name: str, dims: Sequence[int], data: bytes) -> bytes:
    """A TensorProto of float32 `dims` holding `data` (little-endian float32, row-major) inline."""
    if len(data) != 4 * _count(dims):
        raise ProtoError(f"{name}: {len(data)} bytes for float32 {list(dims)}")
    return tensor(name, dims, FLOAT, data)


def _count(dims: Sequence[int]) -> int:
    count = 1
    for d in dims:
        count *= d
    return count


# The cosine head's feature normalisation, f / max(|f|, eps): the runtime's `sdk.prototypes.l2_normalize`.
L2_EPSILON = struct.pack("<f", 1e-12)


def append_linear_head(model: bytes, features: str, channels: int, weight: str, bias: str, logits: str,
                       unit_features: bool = False) -> bytes:
    """The model with its one output `features` [N, channels] replaced by `logits` = features @ weight.T
    + bias, where `weight` [K, channels] and `bias` [K] are new graph inputs (any K). `unit_features`:
    the features are L2-normalised first (a cosine head; opset 13-17 operators)."""
    graph, outputs = bytearray(), []
    for field, value, raw in _fields(_only(model, MODEL_GRAPH)):
        if field == GRAPH_OUTPUT and isinstance(value, bytes):
            outputs.append(_value_name(value))
            continue
        graph += raw
    if outputs != [features]:
        raise ProtoError(f"expected the one graph output {features!r}, found {outputs}")
    head_input = features
    if unit_features:
        head_input = f"{features}_unit"
        graph += encode_field(GRAPH_INITIALIZER, float_tensor(f"{features}_epsilon", [], L2_EPSILON))
        for node in (_node("ReduceSumSquare", [features], f"{features}_squared_norm",
                           _attribute_ints("axes", [1]) + _attribute_int("keepdims", 1)),
                     _node("Sqrt", [f"{features}_squared_norm"], f"{features}_norm"),
                     _node("Max", [f"{features}_norm", f"{features}_epsilon"], f"{features}_norm_clamped"),
                     _node("Div", [features, f"{features}_norm_clamped"], head_input)):
            graph += encode_field(GRAPH_NODE, node)
    graph += encode_field(GRAPH_NODE, _node("Gemm", [head_input, weight, bias], logits, _attribute_int("transB", 1)))
    graph += encode_field(GRAPH_INPUT, _float_value(weight, ["classes", channels]))
    graph += encode_field(GRAPH_INPUT, _float_value(bias, ["classes"]))
    graph += encode_field(GRAPH_OUTPUT, _float_value(logits, ["batch", "classes"]))
    return _with_graph(model, bytes(graph))


def append_rest_score(model: bytes, logits: str) -> bytes:
    """The model with its one output `logits` [N, 1 + n] replaced by `logits` [N, 2]: the first logit and the
    log-sum-exp of the others (a model of one class, `sdk.engines.rest.collapse`; opset 13-17 operators)."""
    every, graph, outputs = f"{logits}_every", bytearray(), []
    for field, value, raw in _fields(_only(model, MODEL_GRAPH)):
        if field == GRAPH_OUTPUT and isinstance(value, bytes):
            outputs.append(_value_name(value))
            continue
        if field == GRAPH_NODE and isinstance(value, bytes) and logits in node_edges(value)[1]:
            raw = encode_field(GRAPH_NODE, b"".join(
                encode_field(f, every.encode("utf-8")) if f in (NODE_OUTPUT, NODE_NAME) and text(v) == logits
                else encode_field(f, v) for f, v in parse_fields(value)))
        graph += raw
    if outputs != [logits]:
        raise ProtoError(f"expected the one graph output {logits!r}, found {outputs}")
    for name, value in (("zero", 0), ("one", 1), ("last", 2**63 - 1)):
        graph += encode_field(GRAPH_INITIALIZER, tensor(f"{logits}_{name}", [1], INT64, struct.pack("<q", value)))
    for node in (_node("Slice", [every, f"{logits}_zero", f"{logits}_one", f"{logits}_one"], f"{logits}_first"),
                 _node("Slice", [every, f"{logits}_one", f"{logits}_last", f"{logits}_one"], f"{logits}_others"),
                 _node("ReduceLogSumExp", [f"{logits}_others"], f"{logits}_rest",
                       _attribute_ints("axes", [1]) + _attribute_int("keepdims", 1)),
                 _node("Concat", [f"{logits}_first", f"{logits}_rest"], logits, _attribute_int("axis", 1))):
        graph += encode_field(GRAPH_NODE, node)
    graph += encode_field(GRAPH_OUTPUT, _float_value(logits, ["batch", 2]))
    return _with_graph(model, bytes(graph))


def inputs_to_initializers(model: bytes, tensors: dict[str, tuple[Sequence[int], bytes]]) -> bytes:
    """The model with the named graph inputs removed and given as inline float32 initializers instead:
    name -> (dims, little-endian float32 bytes). The inverse of `initializers_to_inputs`."""
    graph, found = bytearray(), set()
    for field, value, raw in _fields(_only(model, MODEL_GRAPH)):
        if field == GRAPH_INPUT and isinstance(value, bytes):
            name = _value_name(value)
            if name in tensors:
                found.add(name)
                continue
        graph += raw
    if found != set(tensors):
        raise ProtoError(f"not inputs of this graph: {sorted(set(tensors) - found)}")
    for name, (dims, data) in tensors.items():
        graph += encode_field(GRAPH_INITIALIZER, float_tensor(name, dims, data))
    return _with_graph(model, bytes(graph))


def inline_external_data(model: bytes, location: str, data: bytes | memoryview) -> bytes:
    """The model with every initializer stored in the external file `location` carrying its bytes inline
    instead (raw_data), read from `data`, that file's content: one self-contained file."""
    graph, view = bytearray(), memoryview(data).cast("B")
    for field, value, raw in _fields(_only(model, MODEL_GRAPH)):
        if field == GRAPH_INITIALIZER and isinstance(value, bytes):
            init = parse_initializer(value)
            if init.external.get("location") == location:
                offset, length = int(init.external.get("offset", "0")), int(init.external.get("length", "-1"))
                if init.data_type != FLOAT or length != 4 * _count(init.dims) or not 0 <= offset <= len(view) - length:
                    raise ProtoError(f"initializer {init.name!r}: {length} bytes at {offset} of {len(view)} "
                                     f"for float32 {list(init.dims)}")
                kept = b"".join(r for f, _, r in _fields(value)
                                if f not in (TENSOR_EXTERNAL_DATA, TENSOR_DATA_LOCATION))
                data_field = encode_field(TENSOR_RAW_DATA, view[offset:offset + length])
                raw = encode_field(GRAPH_INITIALIZER, kept + data_field)
        graph += raw
    return _with_graph(model, bytes(graph))


def initializers_to_external(model: bytes, places: Mapping[str, tuple[int, int]], location: str) -> bytes:
    """The model with each named initializer's data moved to the external file `location`, at
    places[name] = (offset, length), its inline data dropped; the others as they are. Names that are not
    initializers of this graph are skipped (`sdk.engines.int8_session`: onnxruntime's optimized graph keeps only
    some of the tensors whose places are known)."""
    graph = bytearray()
    for field, value, raw in _fields(_only(model, MODEL_GRAPH)):
        if field == GRAPH_INITIALIZER and isinstance(value, bytes):
            name = parse_initializer(value).name
            if name in places:
                offset, length = places[name]
                kept = b"".join(r for f, _, r in _fields(value)
                                if f not in (TENSOR_EXTERNAL_DATA, TENSOR_DATA_LOCATION, *INLINE_DATA))
                entries = b"".join(encode_field(TENSOR_EXTERNAL_DATA, encode_field(ENTRY_KEY, k.encode("utf-8"))
                                                + encode_field(ENTRY_VALUE, v.encode("utf-8")))
                                   for k, v in (("location", location), ("offset", str(offset)),
                                                ("length", str(length))))
                raw = encode_field(GRAPH_INITIALIZER, kept + entries + encode_field(TENSOR_DATA_LOCATION,
                                                                                    DATA_LOCATION_EXTERNAL))
        graph += raw
    return _with_graph(model, bytes(graph))


def _tensor_value(name: str, elem_type: int) -> bytes:
    """A ValueInfoProto of a tensor of this element type, its shape left open."""
    return encode_field(VALUE_INFO_NAME, name.encode("utf-8")) + encode_field(
        VALUE_INFO_TYPE, encode_field(TYPE_TENSOR, encode_field(TENSOR_TYPE_ELEM_TYPE, elem_type)))


def node_edges(node: bytes) -> tuple[list[str], list[str]]:
    """A NodeProto's (inputs, outputs), an absent optional input ("") left out."""
    inputs, outputs = [], []
    for field, value in parse_fields(node):
        if field == NODE_INPUT and text(value):
            inputs.append(text(value))
        elif field == NODE_OUTPUT:
            outputs.append(text(value))
    return inputs, outputs


def crossing_tensors(model: bytes, cut: int) -> list[str]:
    """The tensors the graph's first `cut` nodes make and its later nodes read, in the order they are made."""
    return crossing(graph_edges(model), cut)


def graph_edges(model: bytes) -> list[tuple[list[str], list[str]]]:
    """Each node's (inputs, outputs), in the graph's order."""
    return [node_edges(v) for f, v in parse_fields(_only(model, MODEL_GRAPH)) if f == GRAPH_NODE]


def crossing(edges: Sequence[tuple[list[str], list[str]]], cut: int) -> list[str]:
    """`crossing_tensors` of a graph's `graph_edges`."""
    read_later = {name for inputs, _ in edges[cut:] for name in inputs}
    return [name for _, outputs in edges[:cut] for name in outputs if name in read_later]


def split_graph(model: bytes, cut: int, crossing_type: int) -> tuple[bytes, bytes, list[str]]:
    """The model as two models run in turn: (first, second, crossing). The first holds the graph's first
    `cut` nodes, its outputs the `crossing_tensors` (all of `crossing_type`, their shapes left open); the
    second holds the rest and takes them as inputs beside the graph inputs it reads. Each keeps the
    initializers and graph inputs its nodes read; every other graph field goes to both. ProtoError if a
    graph output is made before the cut or nothing crosses it.

    >>> node = lambda i, o: encode_field(GRAPH_NODE, encode_field(NODE_INPUT, i) + encode_field(NODE_OUTPUT, o))
    >>> model = encode_field(MODEL_GRAPH, node(b"x", b"y") + node(b"y", b"z"))
    >>> split_graph(model, 1, FLOAT)[2]
    ['y']
    """
    fields = list(_fields(_only(model, MODEL_GRAPH)))
    nodes = [(raw, node_edges(value)) for field, value, raw in fields if field == GRAPH_NODE]
    if not 0 < cut < len(nodes):
        raise ProtoError(f"no cut {cut} in a graph of {len(nodes)} nodes")
    crossing_names = crossing([edges for _, edges in nodes], cut)
    made_first = {name for _, (_, outputs) in nodes[:cut] for name in outputs}
    outputs = [(raw, text(_only(value, VALUE_INFO_NAME))) for field, value, raw in fields if field == GRAPH_OUTPUT]
    if not crossing_names or any(name in made_first for _, name in outputs):
        raise ProtoError(f"the graph cannot be cut after node {cut}")
    halves = []
    for part, extra_inputs, graph_outputs in ((nodes[:cut], [], [encode_field(GRAPH_OUTPUT, _tensor_value(
            name, crossing_type)) for name in crossing_names]), (nodes[cut:], crossing_names,
                                                                 [raw for raw, _ in outputs])):
        read = {name for _, (inputs, _) in part for name in inputs}
        graph = bytearray(b"".join(raw for raw, _ in part))
        for field, value, raw in fields:
            if field == GRAPH_INITIALIZER and isinstance(value, bytes):
                graph += raw if parse_initializer(value).name in read else b""
            elif field == GRAPH_INPUT and isinstance(value, bytes):
                graph += raw if text(_only(value, VALUE_INFO_NAME)) in read else b""
            elif field not in (GRAPH_NODE, GRAPH_OUTPUT):
                graph += raw
        graph += b"".join(encode_field(GRAPH_INPUT, _tensor_value(name, crossing_type)) for name in extra_inputs)
        graph += b"".join(graph_outputs)
        halves.append(_with_graph(model, bytes(graph)))
    return halves[0], halves[1], crossing_names


def with_metadata(model: bytes, entries: dict[str, str]) -> bytes:
    """The model with these `metadata_props` added (ModelProto field 14, key/value strings)."""
    return model + b"".join(encode_field(MODEL_METADATA_PROPS, encode_field(ENTRY_KEY, k.encode("utf-8"))
                                         + encode_field(ENTRY_VALUE, v.encode("utf-8"))) for k, v in entries.items())
