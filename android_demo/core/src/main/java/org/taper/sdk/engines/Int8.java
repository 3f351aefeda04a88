package org.taper.sdk.engines;

import org.taper.sdk.format.Bundle;
import org.taper.sdk.format.Proto;
import org.taper.sdk.fusion.Architecture;
import org.taper.sdk.media.Preprocessing;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * int8 personalized models without photos, as sdk/engines/int8.py makes them, byte for byte: per-output-channel 7-bit
 * weights from the folded float32 weights, a uint8 range for the image and every Conv, Add and pool output
 * from the mixed batch norms alone (a conv's channel c as N(beta_c, gamma_c^2), a ReLU's output the rectified
 * Gaussian's moments, an Add's the sum, the global pool's spread over POOLED_SPREAD; mu +- RANGE_SIGMAS sigma),
 * written into onnxruntime's QDQ form of the float graph. Given the same folded weights and mixed batch norms,
 * {@link Plan#quantize} writes the bytes Python writes (GoldenTest checks it on every case): each step is the
 * same IEEE operation in the same order (Java never fuses a multiply-add), the erfc is the same Chebyshev fit,
 * and every double is rounded to float32 before it is stored, which absorbs the last-bit differences the two
 * platforms' exp may have.
 * <pre>{@code
 * Int8.Plan plan = new Int8.Plan(bundle.memberBytes("backbone.onnx"), bundle);
 * byte[] graph = plan.quantize(fusion.foldedBackbone(fused), fusion.mixedChannels(alpha));   // image -> features
 * }</pre>
 */
public final class Int8 {
    private Int8() {}

    /** sdk.engines.int8: 7-bit weights (onnxruntime's u8s8 kernels saturate 16-bit sums on x86 without VNNI). */
    public static final int WEIGHT_QMIN = -64, WEIGHT_QMAX = 63;
    static final double RANGE_SIGMAS = 24.0, POOLED_SPREAD = 4.0;
    /** sdk.engines.int8.ERFC_COEFFICIENTS. */
    static final double[] ERFC = {-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
        -1.13520398, 1.48851587, -0.82215223, 0.17087277};
    static final String IMAGE = "image";
    private static final Set<String> QUANTIZED_OUTPUTS = Set.of("Conv", "Add", "MaxPool", "GlobalAveragePool");
    private static final int UINT8 = 2, INT8 = 3, INT32 = 6, FLOAT = 1;
    // onnx_proto's field numbers
    private static final int MODEL_GRAPH = 7, GRAPH_NODE = 1, GRAPH_INITIALIZER = 5, NODE_INPUT = 1,
        NODE_OUTPUT = 2, NODE_NAME = 3, NODE_OP_TYPE = 4, NODE_ATTRIBUTE = 5, ATTRIBUTE_NAME = 1, ATTRIBUTE_I = 3,
        ATTRIBUTE_TYPE = 20, ATTRIBUTE_INT = 2, TENSOR_DIMS = 1, TENSOR_DATA_TYPE = 2, TENSOR_NAME = 8,
        TENSOR_RAW_DATA = 9;

    /** sdk.engines.int8.quantize_weight: rows x (w.length / rows) weights into {@code q}; returns the scales. */
    public static float[] quantizeWeight(float[] w, int offset, int count, int rows, byte[] q, int qOffset) {
        int cols = count / rows;
        float[] scale = new float[rows];
        for (int r = 0; r < rows; r++) {
            float high = 0f;
            for (int i = 0; i < cols; i++) high = Math.max(high, Math.abs(w[offset + r * cols + i]));
            float s = high * 2f / (float) (WEIGHT_QMAX - WEIGHT_QMIN);
            if (s == 0f) s = 1f;
            scale[r] = s;
            float inverse = 1f / s;
            for (int i = 0; i < cols; i++) {
                float product = w[offset + r * cols + i] * inverse;
                double v = Math.rint(product);   // exact in double: rounds half to even, as np.rint
                v = Math.min(Math.max(v, WEIGHT_QMIN), WEIGHT_QMAX);
                q[qOffset + r * cols + i] = (byte) (int) v;
            }
        }
        return scale;
    }

    /** sdk.engines.int8.activation_scale: {scale, zero point} of a uint8 tensor covering [low, high] and 0. */
    static double[] activationScale(double low, double high) {
        low = Math.min(low, 0.0);
        high = Math.max(high, 0.0);
        double scale = (high - low) / 255.0;
        if (scale == 0.0) scale = 1.0;
        return new double[]{scale, Math.min(255, Math.max(0, Math.rint(-low / scale)))};
    }

    /** sdk.engines.int8.normal_cdf. */
    static double normalCdf(double a) {
        double z = Math.abs(a) / Math.sqrt(2);
        double t = 1 / (1 + 0.5 * z);
        double poly = ERFC[ERFC.length - 1];
        for (int i = ERFC.length - 2; i >= 0; i--) poly = poly * t + ERFC[i];
        double tail = 0.5 * t * StrictMath.exp(-z * z + poly);
        return a >= 0 ? 1 - tail : tail;
    }

    /** sdk.engines.int8._rectified: {mean, std} of max(0, x), x ~ N(mu, sigma^2), per channel. */
    static double[][] rectified(double[] mu, double[] sigma) {
        double[] mean = new double[mu.length], std = new double[mu.length];
        for (int c = 0; c < mu.length; c++) {
            double s = Math.max(sigma[c], 1e-8);
            double a = mu[c] / s;
            double cdf = normalCdf(a);
            double pdf = StrictMath.exp(-0.5 * a * a) / Math.sqrt(2 * Math.PI);
            mean[c] = mu[c] * cdf + s * pdf;
            double second = (mu[c] * mu[c] + s * s) * cdf + mu[c] * s * pdf;
            std[c] = Math.sqrt(Math.max(second - mean[c] * mean[c], 0));
        }
        return new double[][]{mean, std};
    }

    /** One node of the float graph: its op, inputs, outputs and its other fields as they were. */
    private static final class Node {
        String op = "";
        final List<String> inputs = new ArrayList<>(), outputs = new ArrayList<>();
        final ByteArrayOutputStream rest = new ByteArrayOutputStream();

        Node(Proto.Field raw) throws Proto.ProtoException {
            for (Proto.Field f : raw.message()) {
                if (f.number == NODE_OP_TYPE) op = f.text();
                else if (f.number == NODE_INPUT) inputs.add(f.text());
                else if (f.number == NODE_OUTPUT) outputs.add(f.text());
                if (f.number != NODE_INPUT && f.number != NODE_OUTPUT) f.encodeTo(rest);
            }
        }

        /** The node with these inputs and outputs, its other fields as they were. */
        byte[] encode(List<String> newInputs, List<String> newOutputs) {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            for (String n : newInputs) bytesField(out, NODE_INPUT, utf8(n));
            for (String n : newOutputs) bytesField(out, NODE_OUTPUT, utf8(n));
            out.writeBytes(rest.toByteArray());
            return out.toByteArray();
        }
    }

    /** Where one alpha-dependent tensor's data lies in the model bytes. */
    private static final class Slot {
        final int itemSize, count;
        int offset = -1;

        Slot(int itemSize, int count) { this.itemSize = itemSize; this.count = count; }
    }

    /** sdk.engines.int8.Int8Plan: the QDQ graph of one float graph with every alpha-dependent value a slot. */
    public static final class Plan {
        private final List<Node> nodes = new ArrayList<>();
        private final Map<String, String> folded = new LinkedHashMap<>();   // ReLU output -> the tensor it reads
        private final Map<String, String> renamed = new HashMap<>();
        private final List<String> quantized = new ArrayList<>();
        private final Map<String, String> batchNormOf = new HashMap<>();   // conv prefix -> its batch norm's
        private final Map<String, Integer> offsets = new HashMap<>();      // folded weight -> byte offset
        private final double[] imageRange;
        private final Map<String, Slot> slots = new HashMap<>();
        private final List<String[]> convs = new ArrayList<>();   // {weight, bias, source tensor}
        private final Map<String, Integer> rowsOf = new HashMap<>();
        private final byte[] template;

        /**
         * @param model the bundle's float backbone graph (image -> features; every conv's folded weight and bias
         *              an initializer), as {@link GraphCheck#checkBackbone} passed it
         * @param bundle its bundle: the preprocessing (the image's range), the conv/batch-norm pairs and where
         *               each folded weight lies in the backbone's weight buffer ({@link Architecture})
         */
        public Plan(byte[] model, Bundle bundle) throws Proto.ProtoException {
            for (String[] pair : Architecture.convBnPairs(bundle.shapes)) batchNormOf.put(pair[0], pair[1]);
            Architecture.backboneLayout(bundle.shapes, offsets);
            Preprocessing preprocessing = bundle.preprocessing;
            List<Proto.Field> graph = only(Proto.parse(model), MODEL_GRAPH).message();
            for (Proto.Field f : graph) if (f.number == GRAPH_NODE) nodes.add(new Node(f));
            Map<String, Integer> readers = new HashMap<>();
            Map<String, Node> producer = new HashMap<>();
            for (Node n : nodes) {
                for (String i : n.inputs) readers.merge(i, 1, Integer::sum);
                producer.put(n.outputs.get(0), n);
            }
            for (Node n : nodes) {
                if (!n.op.equals("Relu")) continue;
                Node p = producer.get(n.inputs.get(0));
                if (p != null && (p.op.equals("Conv") || p.op.equals("Add"))
                        && Integer.valueOf(1).equals(readers.get(n.inputs.get(0))))
                    folded.put(n.outputs.get(0), n.inputs.get(0));
            }
            for (Map.Entry<String, String> e : folded.entrySet()) renamed.put(e.getValue(), e.getKey());
            quantized.add(IMAGE);
            for (Node n : nodes) if (QUANTIZED_OUTPUTS.contains(n.op)) quantized.add(n.outputs.get(0));
            float[] mean = preprocessing.mean(), std = preprocessing.std();
            double low = Double.POSITIVE_INFINITY, high = Double.NEGATIVE_INFINITY;
            for (int c = 0; c < 3; c++) {
                low = Math.min(low, (0f - mean[c]) / std[c]);
                high = Math.max(high, (1f - mean[c]) / std[c]);
            }
            imageRange = new double[]{low, high};
            template = build(model, graph);
        }

        /** sdk.engines.int8.Int8Plan.ranges: {low, high} of every quantized tensor. */
        Map<String, double[]> ranges(Map<String, float[]> mixed) {
            Map<String, double[][]> moments = new HashMap<>();
            Map<String, double[]> ranges = new HashMap<>();
            ranges.put(IMAGE, imageRange);
            Set<String> nonnegative = new HashSet<>();
            for (Node n : nodes) {
                String out = n.outputs.get(0);
                switch (n.op) {
                    case "Conv": {
                        String w = n.inputs.get(1);
                        String bn = batchNormOf.get(w.substring(0, w.length() - ".weight".length()));
                        float[] beta = mixed.get(bn + ".bias"), gamma = mixed.get(bn + ".weight");
                        double[] mu = new double[beta.length], sigma = new double[beta.length];
                        for (int c = 0; c < mu.length; c++) {
                            mu[c] = beta[c];
                            sigma[c] = Math.abs((double) gamma[c]);
                        }
                        moments.put(out, new double[][]{mu, sigma});
                        break;
                    }
                    case "Add": {
                        double[][] x = moments.get(n.inputs.get(0)), y = moments.get(n.inputs.get(1));
                        double[] mu = new double[x[0].length], sigma = new double[x[0].length];
                        for (int c = 0; c < mu.length; c++) {
                            mu[c] = x[0][c] + y[0][c];
                            sigma[c] = Math.sqrt(x[1][c] * x[1][c] + y[1][c] * y[1][c]);
                        }
                        moments.put(out, new double[][]{mu, sigma});
                        break;
                    }
                    case "Relu":
                        moments.put(out, rectified(moments.get(n.inputs.get(0))[0], moments.get(n.inputs.get(0))[1]));
                        nonnegative.add(out);
                        break;
                    case "MaxPool": case "GlobalAveragePool": case "Flatten": {
                        double[][] x = moments.get(n.inputs.get(0));
                        double[] sigma = x[1];
                        if (n.op.equals("GlobalAveragePool")) {
                            sigma = new double[x[1].length];
                            for (int c = 0; c < sigma.length; c++) sigma[c] = x[1][c] / POOLED_SPREAD;
                        }
                        moments.put(out, new double[][]{x[0], sigma});
                        if (nonnegative.contains(n.inputs.get(0))) nonnegative.add(out);
                        break;
                    }
                    default:
                        continue;
                }
                double[][] m = moments.get(out);
                double low = Double.POSITIVE_INFINITY, high = Double.NEGATIVE_INFINITY;
                for (int c = 0; c < m[0].length; c++) {
                    low = Math.min(low, m[0][c] - RANGE_SIGMAS * m[1][c]);
                    high = Math.max(high, m[0][c] + RANGE_SIGMAS * m[1][c]);
                }
                ranges.put(out, new double[]{nonnegative.contains(out) ? 0.0 : low, high});
            }
            Map<String, double[]> out = new LinkedHashMap<>();
            for (String name : quantized) out.put(name, ranges.get(renamed.getOrDefault(name, name)));
            return out;
        }

        /**
         * The int8 graph of these folded weights (the backbone's external weight buffer, in the layout of
         * {@link Architecture#backboneLayout}) and mixed batch norms (by state-dict name:
         * {@link Fusion#mixedChannels}).
         */
        public byte[] quantize(float[] foldedBuffer, Map<String, float[]> mixed) {
            ByteBuffer out = ByteBuffer.wrap(template.clone()).order(ByteOrder.LITTLE_ENDIAN);
            Map<String, Float> xScales = new HashMap<>();
            for (Map.Entry<String, double[]> e : ranges(mixed).entrySet()) {
                double[] sz = activationScale(e.getValue()[0], e.getValue()[1]);
                String name = renamed.getOrDefault(e.getKey(), e.getKey());
                xScales.put(name, (float) sz[0]);
                out.putFloat(slots.get(name + "_scale").offset, (float) sz[0]);
                out.put(slots.get(name + "_zero").offset, (byte) (int) sz[1]);
            }
            byte[] array = out.array();
            for (String[] conv : convs) {
                String weight = conv[0], bias = conv[1];
                int rows = rowsOf.get(weight);
                Slot q = slots.get(weight + "_q");
                float[] wScale = quantizeWeight(foldedBuffer, offsets.get(weight) / 4, q.count, rows, array, q.offset);
                float xScale = xScales.get(conv[2]);
                int bOffset = offsets.get(bias) / 4;
                for (int c = 0; c < rows; c++) {
                    out.putFloat(slots.get(weight + "_scale").offset + 4 * c, wScale[c]);
                    float bScale = wScale[c] * xScale;
                    out.putFloat(slots.get(bias + "_scale").offset + 4 * c, bScale);
                    double v = Math.rint((double) foldedBuffer[bOffset + c] / (double) bScale);
                    v = Math.min(Math.max(v, -2147483648.0), 2147483647.0);
                    out.putInt(slots.get(bias + "_q").offset + 4 * c, (int) v);
                }
            }
            return array;
        }

        private byte[] build(byte[] model, List<Proto.Field> graph) throws Proto.ProtoException {
            Set<String> quantizedNames = new HashSet<>();
            for (String n : quantized) quantizedNames.add(renamed.getOrDefault(n, n));
            Map<String, List<Long>> dimsOf = new HashMap<>();
            for (Proto.Field f : graph) {
                if (f.number != GRAPH_INITIALIZER) continue;
                String name = "";
                List<Long> dims = new ArrayList<>();
                for (Proto.Field t : f.message()) {
                    if (t.number == TENSOR_NAME) name = t.text();
                    else if (t.number == TENSOR_DIMS) dims.addAll(t.packedInts());
                }
                dimsOf.put(name, dims);
            }
            List<Object> parts = new ArrayList<>(), initializers = new ArrayList<>();
            for (String name : quantized) {
                String tensor = renamed.getOrDefault(name, name);
                slot(initializers, tensor + "_scale", List.of(), FLOAT, 4);
                slot(initializers, tensor + "_zero", List.of(), UINT8, 1);
            }
            qdq(parts, IMAGE);
            for (Node original : nodes) {
                if (original.op.equals("Relu") && folded.containsKey(original.outputs.get(0))) continue;
                List<String> outputs = new ArrayList<>(), inputs = new ArrayList<>();
                for (String o : original.outputs) outputs.add(renamed.getOrDefault(o, o));
                for (String i : original.inputs) inputs.add(quantizedNames.contains(i) ? i + "_dq" : i);
                if (original.op.equals("Conv")) {
                    String weight = inputs.get(1), bias = inputs.get(2);
                    List<Long> shape = dimsOf.get(weight);
                    if (shape == null || shape.isEmpty()) throw new Proto.ProtoException("no initializer " + weight);
                    int channels = (int) (long) shape.get(0);
                    String source = inputs.get(0).endsWith("_dq")
                            ? inputs.get(0).substring(0, inputs.get(0).length() - 3) : inputs.get(0);
                    convs.add(new String[]{weight, bias, source});
                    rowsOf.put(weight, channels);
                    slot(initializers, weight + "_q", shape, INT8, 1);
                    slot(initializers, weight + "_scale", List.of((long) channels), FLOAT, 4);
                    ByteArrayOutputStream zero = new ByteArrayOutputStream();
                    tensorHead(zero, weight + "_zero", List.of((long) channels), INT8, channels);
                    zero.writeBytes(new byte[channels]);
                    ByteArrayOutputStream field = new ByteArrayOutputStream();
                    bytesField(field, GRAPH_INITIALIZER, zero.toByteArray());
                    initializers.add(field.toByteArray());
                    slot(initializers, bias + "_q", List.of((long) channels), INT32, 4);
                    slot(initializers, bias + "_scale", List.of((long) channels), FLOAT, 4);
                    byte[] axis = attributeInt("axis", 0);
                    parts.add(nodeField(List.of(weight + "_q", weight + "_scale", weight + "_zero"), weight + "_dq",
                            "DequantizeLinear", axis));
                    parts.add(nodeField(List.of(bias + "_q", bias + "_scale"), bias + "_dq", "DequantizeLinear", axis));
                    inputs.set(1, weight + "_dq");
                    inputs.set(2, bias + "_dq");
                }
                ByteArrayOutputStream field = new ByteArrayOutputStream();
                bytesField(field, GRAPH_NODE, original.encode(inputs, outputs));
                parts.add(field.toByteArray());
                if (quantizedNames.contains(outputs.get(0))) qdq(parts, outputs.get(0));
            }
            for (Proto.Field f : graph) {
                if (f.number == GRAPH_NODE || f.number == GRAPH_INITIALIZER) continue;
                ByteArrayOutputStream raw = new ByteArrayOutputStream();
                f.encodeTo(raw);
                parts.add(raw.toByteArray());
            }
            parts.addAll(initializers);
            long graphSize = 0;
            for (Object p : parts) graphSize += p instanceof Slot ? (long) ((Slot) p).count * ((Slot) p).itemSize : ((byte[]) p).length;
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            for (Proto.Field f : Proto.parse(model)) {
                if (f.number != MODEL_GRAPH) {
                    f.encodeTo(out);
                    continue;
                }
                Proto.writeVarint(out, ((long) MODEL_GRAPH << 3) | Proto.LENGTH_DELIMITED);
                Proto.writeVarint(out, graphSize);
                for (Object p : parts) {
                    if (p instanceof Slot) {
                        Slot s = (Slot) p;
                        s.offset = out.size();
                        out.writeBytes(new byte[s.count * s.itemSize]);
                    } else {
                        out.writeBytes((byte[]) p);
                    }
                }
            }
            return out.toByteArray();
        }

        private void slot(List<Object> into, String name, List<Long> dims, int dataType, int itemSize) {
            long count = 1;
            for (long d : dims) count *= d;
            Slot s = new Slot(itemSize, (int) count);
            slots.put(name, s);
            ByteArrayOutputStream head = new ByteArrayOutputStream();
            tensorHead(head, name, dims, dataType, count * itemSize);
            ByteArrayOutputStream field = new ByteArrayOutputStream();
            Proto.writeVarint(field, ((long) GRAPH_INITIALIZER << 3) | Proto.LENGTH_DELIMITED);
            Proto.writeVarint(field, head.size() + count * itemSize);
            field.writeBytes(head.toByteArray());
            into.add(field.toByteArray());
            into.add(s);
        }

        private static void qdq(List<Object> parts, String tensor) {
            parts.add(nodeField(List.of(tensor, tensor + "_scale", tensor + "_zero"), tensor + "_q", "QuantizeLinear", new byte[0]));
            parts.add(nodeField(List.of(tensor + "_q", tensor + "_scale", tensor + "_zero"), tensor + "_dq",
                    "DequantizeLinear", new byte[0]));
        }
    }

    /** onnx_proto._node as a graph field. */
    private static byte[] nodeField(List<String> inputs, String output, String op, byte[] attributes) {
        ByteArrayOutputStream node = new ByteArrayOutputStream();
        for (String n : inputs) bytesField(node, NODE_INPUT, utf8(n));
        bytesField(node, NODE_OUTPUT, utf8(output));
        bytesField(node, NODE_NAME, utf8(output));
        bytesField(node, NODE_OP_TYPE, utf8(op));
        node.writeBytes(attributes);
        ByteArrayOutputStream field = new ByteArrayOutputStream();
        bytesField(field, GRAPH_NODE, node.toByteArray());
        return field.toByteArray();
    }

    /** onnx_proto._attribute_int. */
    private static byte[] attributeInt(String name, long value) {
        ByteArrayOutputStream attribute = new ByteArrayOutputStream();
        bytesField(attribute, ATTRIBUTE_NAME, utf8(name));
        varintField(attribute, ATTRIBUTE_TYPE, ATTRIBUTE_INT);
        varintField(attribute, ATTRIBUTE_I, value);
        ByteArrayOutputStream field = new ByteArrayOutputStream();
        bytesField(field, NODE_ATTRIBUTE, attribute.toByteArray());
        return field.toByteArray();
    }

    /** onnx_proto.tensor_head. */
    private static void tensorHead(ByteArrayOutputStream out, String name, List<Long> dims, int dataType, long nbytes) {
        for (long d : dims) varintField(out, TENSOR_DIMS, d);
        varintField(out, TENSOR_DATA_TYPE, dataType);
        bytesField(out, TENSOR_NAME, utf8(name));
        Proto.writeVarint(out, ((long) TENSOR_RAW_DATA << 3) | Proto.LENGTH_DELIMITED);
        Proto.writeVarint(out, nbytes);
    }

    private static void bytesField(ByteArrayOutputStream out, int number, byte[] value) {
        Proto.writeVarint(out, ((long) number << 3) | Proto.LENGTH_DELIMITED);
        Proto.writeVarint(out, value.length);
        out.writeBytes(value);
    }

    private static void varintField(ByteArrayOutputStream out, int number, long value) {
        Proto.writeVarint(out, ((long) number << 3) | Proto.VARINT);
        Proto.writeVarint(out, value);
    }

    private static byte[] utf8(String s) { return s.getBytes(StandardCharsets.UTF_8); }

    private static Proto.Field only(List<Proto.Field> fields, int number) throws Proto.ProtoException {
        Proto.Field found = null;
        for (Proto.Field f : fields) {
            if (f.number != number) continue;
            if (found != null) throw new Proto.ProtoException("expected one field " + number);
            found = f;
        }
        if (found == null || found.isVarint) throw new Proto.ProtoException("expected one field " + number);
        return found;
    }
}
