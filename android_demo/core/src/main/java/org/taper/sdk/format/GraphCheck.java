package org.taper.sdk.format;

import org.taper.sdk.engines.Engine;
import org.taper.sdk.fusion.Architecture;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * The graphs in a bundle are untrusted: only what the SDK's own exporter writes is handed to an engine
 * (sdk/format/graph_check.py, the same rules). onnxruntime runs whatever a graph says: a Loop of 10^12 iterations
 * never returns, an Expand fed a hostile constant allocates until the app dies.
 * <ul>
 * <li>The backbone may use only the ops of a BN-folded ResNet-18 in the default domain, no subgraphs, no
 * functions, no sparse or inline initializers; every initializer is one of the architecture's folded
 * weights, with its shape, at its offset in the external-data layout ({@link Architecture#backboneLayout});
 * every Conv's attributes agree with its weight; one input image [batch, 3, S, S], one output features.</li>
 * <li>The text encoder must have the structure of an encoder the SDK exports: a SHA-256 over the graph
 * except the values of its float and int8 weights must be one of {@link #KNOWN_ENCODER_STRUCTURES} (the
 * golden test checks that this set equals Python's).</li>
 * </ul>
 * <pre>{@code
 * GraphCheck.checkBackbone(bundle.memberBytes("backbone.onnx"), bundle);   // BundleException if hostile
 * GraphCheck.checkEncoder(bundle.memberBytes("text_encoder.onnx"));
 * }</pre>
 */
public final class GraphCheck {
    private GraphCheck() {}

    /** sdk.format.graph_check.KNOWN_ENCODER_STRUCTURES. */
    public static final Set<String> KNOWN_ENCODER_STRUCTURES = Set.of(
            "c74469d3bcb1110bc9f8f30be9df5eacdf9ddc01a47f7f070bd5376b6357322a");

    static final Set<String> DEFAULT_DOMAINS = Set.of("", "ai.onnx");
    static final int OPSET_MIN = 13, OPSET_MAX = 21, MAX_BACKBONE_NODES = 200;
    static final Set<String> BACKBONE_OPS = Set.of("Conv", "Relu", "Add", "MaxPool", "GlobalAveragePool", "Flatten");
    static final Set<String> CONV_ATTRIBUTES = Set.of("kernel_shape", "group", "dilations", "strides", "pads");

    // Field numbers from onnx.proto (sdk/format/onnx_proto.py).
    static final int MODEL_GRAPH = 7, MODEL_OPSET = 8, MODEL_TRAINING_INFO = 20, MODEL_FUNCTIONS = 25;
    static final int OPSET_DOMAIN = 1, OPSET_VERSION = 2;
    static final int GRAPH_NODE = 1, GRAPH_INITIALIZER = 5, GRAPH_INPUT = 11, GRAPH_OUTPUT = 12, GRAPH_SPARSE_INITIALIZER = 15;
    static final int NODE_INPUT = 1, NODE_OUTPUT = 2, NODE_OP_TYPE = 4, NODE_ATTRIBUTE = 5, NODE_DOMAIN = 7;
    static final int ATTRIBUTE_NAME = 1, ATTRIBUTE_I = 3, ATTRIBUTE_G = 6, ATTRIBUTE_INTS = 8, ATTRIBUTE_GRAPHS = 11, ATTRIBUTE_REF = 21;
    static final int TENSOR_DIMS = 1, TENSOR_DATA_TYPE = 2, TENSOR_FLOAT_DATA = 4, TENSOR_INT32_DATA = 5, TENSOR_NAME = 8,
            TENSOR_RAW_DATA = 9, TENSOR_EXTERNAL_DATA = 13;
    static final int ENTRY_KEY = 1, ENTRY_VALUE = 2, VALUE_INFO_NAME = 1, VALUE_INFO_TYPE = 2;
    static final int TYPE_TENSOR = 1, TENSOR_TYPE_ELEM_TYPE = 1, TENSOR_TYPE_SHAPE = 2, DIM_VALUE = 1, DIM_PARAM = 2;
    static final int FLOAT = 1, INT8 = 3;

    private static boolean inlineData(int field) {
        return field == TENSOR_RAW_DATA || field == TENSOR_FLOAT_DATA || field == TENSOR_INT32_DATA;
    }

    /** A model's one graph and its operator sets (domain, version), sorted as Python sorts tuples. */
    private static final class ModelParts {
        Proto.Field graph;
        final TreeMap<String, List<Long>> opsets = new TreeMap<>();
    }

    private static ModelParts modelParts(byte[] model, String what) throws Proto.ProtoException {
        ModelParts parts = new ModelParts();
        List<Proto.Field> graphs = new ArrayList<>();
        int count = 0;
        for (Proto.Field f : Proto.parse(model)) {
            if (f.number == MODEL_TRAINING_INFO || f.number == MODEL_FUNCTIONS)
                throw new BundleException(what + ": model functions and training info are not allowed");
            if (f.number == MODEL_GRAPH) graphs.add(f);
            else if (f.number == MODEL_OPSET && !f.isVarint) {
                Map<Integer, Proto.Field> entry = lastOfEach(f.message());
                Proto.Field domain = entry.get(OPSET_DOMAIN), version = entry.get(OPSET_VERSION);
                String d = domain == null ? "" : domain.text();
                if (!DEFAULT_DOMAINS.contains(d) || version == null || !version.isVarint
                        || version.varint < OPSET_MIN || version.varint > OPSET_MAX)
                    throw new BundleException(what + ": operator set '" + d + "' version "
                            + (version == null ? 0 : version.isVarint ? version.varint : "?") + " is not allowed");
                parts.opsets.computeIfAbsent(d, k -> new ArrayList<>()).add(version.varint);
                count++;
            }
        }
        if (graphs.size() != 1 || graphs.get(0).isVarint) throw new BundleException(what + ": expected one graph");
        if (count == 0) throw new BundleException(what + ": no operator set");
        parts.graph = graphs.get(0);
        return parts;
    }

    /** dict(parse_fields(...)): the last field of each number. */
    private static Map<Integer, Proto.Field> lastOfEach(List<Proto.Field> fields) {
        Map<Integer, Proto.Field> out = new HashMap<>();
        for (Proto.Field f : fields) out.put(f.number, f);
        return out;
    }

    /** A node in the default domain with no subgraphs: op type, inputs, outputs, integer attributes. */
    private static final class Node {
        String op = "";
        final List<String> inputs = new ArrayList<>(), outputs = new ArrayList<>();
        final Map<String, List<Long>> attributes = new LinkedHashMap<>();
    }

    private static Node node(Proto.Field value, String what) throws Proto.ProtoException {
        Node n = new Node();
        for (Proto.Field f : value.message()) {
            if (f.number == NODE_OP_TYPE) n.op = f.text();
            else if (f.number == NODE_INPUT) n.inputs.add(f.text());
            else if (f.number == NODE_OUTPUT) n.outputs.add(f.text());
            else if (f.number == NODE_DOMAIN && !DEFAULT_DOMAINS.contains(f.text()))
                throw new BundleException(what + ": custom operator domain '" + f.text() + "'");
            else if (f.number == NODE_ATTRIBUTE && !f.isVarint) {
                String name = "";
                List<Long> ints = new ArrayList<>();
                for (Proto.Field a : f.message()) {
                    if (a.number == ATTRIBUTE_G || a.number == ATTRIBUTE_GRAPHS || a.number == ATTRIBUTE_REF)
                        throw new BundleException(what + ": " + (n.op.isEmpty() ? "a node" : n.op) + " has a subgraph or reference attribute");
                    if (a.number == ATTRIBUTE_NAME) name = a.text();
                    else if (a.number == ATTRIBUTE_I || a.number == ATTRIBUTE_INTS) ints.addAll(a.packedInts());
                }
                n.attributes.put(name, ints);
            }
        }
        return n;
    }

    /** A TensorProto's name, dims, data type, external-data entries and whether it has inline data. */
    private static final class Initializer {
        String name = "";
        final List<Long> dims = new ArrayList<>();
        long dataType;
        final Map<String, String> external = new HashMap<>();
        boolean inline;
    }

    private static Initializer initializer(Proto.Field tensor) throws Proto.ProtoException {
        Initializer init = new Initializer();
        for (Proto.Field f : tensor.message()) {
            if (f.number == TENSOR_NAME) init.name = f.text();
            else if (f.number == TENSOR_DIMS) init.dims.addAll(f.packedInts());
            else if (f.number == TENSOR_DATA_TYPE && f.isVarint) init.dataType = f.varint;
            else if (f.number == TENSOR_EXTERNAL_DATA && !f.isVarint) {
                Map<Integer, Proto.Field> entry = new HashMap<>();
                for (Proto.Field e : f.message()) if (!e.isVarint) entry.put(e.number, e);
                Proto.Field key = entry.get(ENTRY_KEY), value = entry.get(ENTRY_VALUE);
                init.external.put(key == null ? "" : key.text(), value == null ? "" : value.text());
            } else if (inlineData(f.number)) init.inline = true;
        }
        return init;
    }

    /** The dims of a float tensor's ValueInfoProto: Long, String (symbolic), or null where neither. */
    private static List<Object> tensorDims(Proto.Field value, String what) throws Proto.ProtoException {
        List<Object> dims = new ArrayList<>();
        Proto.Field elem = null;
        for (Proto.Field f : value.message()) {
            if (f.number != VALUE_INFO_TYPE || f.isVarint) continue;
            for (Proto.Field t : f.message()) {
                if (t.number != TYPE_TENSOR || t.isVarint) continue;
                for (Proto.Field tt : t.message()) {
                    if (tt.number == TENSOR_TYPE_ELEM_TYPE) elem = tt;
                    else if (tt.number == TENSOR_TYPE_SHAPE && !tt.isVarint) {
                        for (Proto.Field dim : tt.message()) {
                            Map<Integer, Proto.Field> parts = dim.isVarint ? Map.of() : lastOfEach(dim.message());
                            Proto.Field param = parts.get(DIM_PARAM), v = parts.get(DIM_VALUE);
                            if (param != null) dims.add(param.text());
                            else if (v == null) dims.add(-1L);
                            else dims.add(v.isVarint ? (Object) v.varint : null);
                        }
                    }
                }
            }
        }
        if (elem == null || !elem.isVarint || elem.varint != FLOAT)
            throw new BundleException(what + ": a graph input or output is not float32");
        return dims;
    }

    private static String nameOf(Proto.Field value) throws Proto.ProtoException {
        Proto.Field name = lastOfEach(value.message()).get(VALUE_INFO_NAME);
        return name == null ? "" : name.text();
    }

    private static List<Long> longs(long... values) {
        List<Long> out = new ArrayList<>();
        for (long v : values) out.add(v);
        return out;
    }

    private static void checkConv(Map<String, List<Long>> attrs, List<Long> weight, String what) {
        List<Long> kernel = weight.subList(Math.min(2, weight.size()), weight.size());   // Python's weight[2:]
        List<Long> strides = attrs.getOrDefault("strides", longs(1, 1)), pads = attrs.getOrDefault("pads", longs(0, 0, 0, 0));
        boolean ok = attrs.getOrDefault("kernel_shape", kernel).equals(kernel)
                && attrs.getOrDefault("group", longs(1)).equals(longs(1))
                && attrs.getOrDefault("dilations", longs(1, 1)).equals(longs(1, 1))
                && strides.stream().allMatch(s -> s >= 1 && s <= 2) && strides.size() == 2
                && pads.stream().allMatch(p -> p >= 0 && p <= 3) && pads.size() == 4
                && CONV_ATTRIBUTES.containsAll(attrs.keySet());
        if (!ok) throw new BundleException(what + ": a Conv's attributes do not fit a ResNet-18 (" + attrs + ")");
    }

    /**
     * {@code graph} if it is a BN-folded ResNet-18 feature graph with exactly the bundle's external-data
     * layout and input size; BundleException otherwise.
     */
    public static byte[] checkBackbone(byte[] graph, Bundle bundle) {
        String what = "member backbone.onnx";
        Map<String, Architecture.WeightSlot> slots = new HashMap<>();
        for (Architecture.WeightSlot slot : Architecture.backboneSlots(bundle.shapes)) slots.put(slot.name(), slot);
        try {
            checkBackbone(graph, slots, bundle.inputSize, what);
        } catch (Proto.ProtoException e) {
            throw new BundleException(what + ": not a valid ONNX graph (" + e.getMessage() + ")");
        }
        return graph;
    }

    private static void checkBackbone(byte[] graph, Map<String, Architecture.WeightSlot> slots, int inputSize, String what)
            throws Proto.ProtoException {
        Proto.Field body = modelParts(graph, what).graph;
        Map<String, List<Long>> inits = new HashMap<>();
        List<Node> nodes = new ArrayList<>();
        List<String> inputNames = new ArrayList<>(), outputs = new ArrayList<>();
        List<Proto.Field> inputs = new ArrayList<>();
        for (Proto.Field f : body.message()) {
            if (f.number == GRAPH_SPARSE_INITIALIZER) throw new BundleException(what + ": sparse initializers are not allowed");
            if (f.isVarint) continue;
            if (f.number == GRAPH_INITIALIZER) {
                Initializer init = initializer(f);
                Architecture.WeightSlot slot = slots.get(init.name);
                if (inits.containsKey(init.name) || slot == null)
                    throw new BundleException(what + ": initializer '" + init.name + "' is not one of the architecture's weights (or twice)");
                List<Long> expectedDims = longs(slot.shape());
                long count = 1;
                for (long d : slot.shape()) count *= d;
                Map<String, String> expected = Map.of("location", Engine.WEIGHTS_FILE,
                        "offset", String.valueOf(slot.offset()), "length", String.valueOf(4 * count));
                if (init.inline || init.dataType != FLOAT || !init.dims.equals(expectedDims) || !init.external.equals(expected))
                    throw new BundleException(what + ": initializer '" + init.name + "' must be float32 " + expectedDims
                            + " external data at " + new TreeMap<>(expected));
                inits.put(init.name, init.dims);
            } else if (f.number == GRAPH_NODE) nodes.add(node(f, what));
            else if (f.number == GRAPH_INPUT) { inputNames.add(nameOf(f)); inputs.add(f); }
            else if (f.number == GRAPH_OUTPUT) outputs.add(nameOf(f));
        }
        if (!inits.keySet().equals(slots.keySet())) throw new BundleException(what + ": initializers missing");
        if (!inputNames.equals(List.of(Engine.IMAGE_INPUT)) || !outputs.equals(List.of(Engine.FEATURES_OUTPUT)))
            throw new BundleException(what + ": must take one input 'image' and give one output 'features'");
        List<Object> dims = tensorDims(inputs.get(0), what);
        if (dims.size() != 4 || !(dims.get(0) instanceof String)
                || !dims.subList(1, 4).equals(List.of(3L, (long) inputSize, (long) inputSize)))
            throw new BundleException(what + ": input 'image' must be [batch, 3, " + inputSize + ", " + inputSize + "], got " + dims);
        if (nodes.size() > MAX_BACKBONE_NODES) throw new BundleException(what + ": " + nodes.size() + " nodes is more than a ResNet-18 has");
        Set<String> known = new HashSet<>(inits.keySet());
        known.add(Engine.IMAGE_INPUT);
        for (Node n : nodes) {
            if (!BACKBONE_OPS.contains(n.op))
                throw new BundleException(what + ": operator '" + n.op + "' is not allowed in a backbone (allowed: " + new java.util.TreeSet<>(BACKBONE_OPS) + ")");
            if (!known.containsAll(n.inputs) || n.outputs.stream().anyMatch(known::contains))
                throw new BundleException(what + ": nodes are not in order, or reuse a name");
            if (n.op.equals("Conv")) {
                if (n.inputs.size() != 3 || !inits.containsKey(n.inputs.get(1)))
                    throw new BundleException(what + ": a Conv must read one of the architecture's weights and a bias");
                checkConv(n.attributes, inits.get(n.inputs.get(1)), what);
            } else if (n.op.equals("MaxPool") && (!longs(3, 3).equals(n.attributes.get("kernel_shape"))
                    || !longs(2, 2).equals(n.attributes.get("strides")))) {
                throw new BundleException(what + ": MaxPool must be 3x3, stride 2");
            } else if (n.op.equals("Flatten") && !n.attributes.getOrDefault("axis", longs(1)).equals(longs(1))) {
                throw new BundleException(what + ": Flatten must keep the batch axis");
            }
            known.addAll(n.outputs);
        }
        if (!known.contains(Engine.FEATURES_OUTPUT)) throw new BundleException(what + ": no node computes 'features'");
    }

    /** SHA-256 (hex) of the graph without the values of its float and int8 weights (their shapes included). */
    public static String encoderStructure(byte[] graph) {
        String what = "member text_encoder.onnx";
        try {
            return structure(graph, what);
        } catch (Proto.ProtoException e) {
            throw new BundleException(what + ": not a valid ONNX graph (" + e.getMessage() + ")");
        }
    }

    private static String structure(byte[] graph, String what) throws Proto.ProtoException {
        ModelParts parts = modelParts(graph, what);
        MessageDigest digest;
        try {
            digest = MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
        digest.update(pythonRepr(parts.opsets).getBytes(StandardCharsets.UTF_8));
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (Proto.Field f : parts.graph.message()) {
            if (f.number == GRAPH_SPARSE_INITIALIZER) throw new BundleException(what + ": sparse initializers are not allowed");
            if (f.number == GRAPH_NODE && !f.isVarint) node(f, what);   // foreign domains and subgraphs, with a clear message
            out.reset();
            if (f.number == GRAPH_INITIALIZER && !f.isVarint) {
                Initializer init = initializer(f);
                if (!init.external.isEmpty()) throw new BundleException(what + ": external data is not allowed");
                if (init.dataType == FLOAT || init.dataType == INT8) {   // the weights' values are left out
                    ByteArrayOutputStream kept = new ByteArrayOutputStream();
                    for (Proto.Field t : f.message()) if (!inlineData(t.number)) t.encodeTo(kept);
                    byte[] k = kept.toByteArray();
                    new Proto.Field(f.number, k, 0, k.length).encodeTo(out);
                    digest.update(out.toByteArray());
                    continue;
                }
            }
            f.encodeTo(out);
            digest.update(out.toByteArray());
        }
        StringBuilder hex = new StringBuilder();
        for (byte b : digest.digest()) hex.append(String.format("%02x", b));
        return hex.toString();
    }

    /** Python's repr(sorted(opsets)) of (domain, version) tuples, e.g. [('', 17), ('ai.onnx', 17)]. */
    private static String pythonRepr(TreeMap<String, List<Long>> opsets) {
        List<String> items = new ArrayList<>();
        for (Map.Entry<String, List<Long>> e : opsets.entrySet()) {
            Long[] versions = e.getValue().toArray(new Long[0]);
            Arrays.sort(versions);
            for (Long v : versions) items.add("('" + e.getKey() + "', " + v + ")");   // domains are '' or 'ai.onnx'
        }
        return "[" + String.join(", ", items) + "]";
    }

    /** {@code graph} if it has the structure of a text encoder the SDK exports; BundleException otherwise. */
    public static byte[] checkEncoder(byte[] graph) {
        String structure = encoderStructure(graph);
        if (!KNOWN_ENCODER_STRUCTURES.contains(structure))
            throw new BundleException("member text_encoder.onnx: not a text encoder this SDK exports (structure "
                    + structure.substring(0, 16) + "...); only the graph's weights may differ");
        return graph;
    }
}
