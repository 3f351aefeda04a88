package org.taper.sdk.fusion;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** ResNet-18 as data, mirroring sdk/fusion/architecture.py: names and shapes, mixer blocks, conv/BN pairs, layers. */
public final class Architecture {
    private Architecture() {}

    static final float BN_EPS = 1e-5f;  // sdk.fusion.architecture.BN_EPS
    static final String[] CHANNEL_PARTS = {"weight", "bias", "running_mean", "running_var"};

    /** A unit of mixing and compression (sdk.fusion.architecture.Layer): a weight and its per-output-channel tensors. */
    public static final class Layer {
        public final String name, weight;
        public final String[] channels;
        public final int block, rows, columns;

        Layer(String name, String weight, int[] shape, String[] channels) {
            this.name = name; this.weight = weight; this.channels = channels; this.block = mixerBlockOf(weight);
            this.rows = shape[0]; this.columns = numel(shape) / shape[0];
        }
    }

    /** Every layer in state-dict order: each conv with its batch norm, then the classifier with its bias. */
    public static List<Layer> mixedLayers(Map<String, int[]> shapes) {
        List<Layer> out = new ArrayList<>();
        for (String[] pair : convBnPairs(shapes)) {
            String[] channels = new String[CHANNEL_PARTS.length];
            for (int i = 0; i < channels.length; i++) channels[i] = pair[1] + "." + CHANNEL_PARTS[i];
            out.add(new Layer(pair[0], pair[0] + ".weight", shapes.get(pair[0] + ".weight"), channels));
        }
        out.add(new Layer("fc", "fc.weight", shapes.get("fc.weight"), new String[]{"fc.bias"}));
        return out;
    }

    private static final int[] STAGE_CHANNELS = {64, 128, 256, 512};

    private static void bn(Map<String, int[]> m, String p, int c) {
        m.put(p + ".weight", new int[]{c});
        m.put(p + ".bias", new int[]{c});
        m.put(p + ".running_mean", new int[]{c});
        m.put(p + ".running_var", new int[]{c});
        m.put(p + ".num_batches_tracked", new int[]{});
    }

    /** sdk.fusion.architecture.topology's constants: blocks per stage, each stage's first stride. */
    static final int[] BLOCKS_PER_STAGE = {2, 2, 2, 2}, STAGE_STRIDES = {1, 2, 2, 2};

    /** Every state-dict entry with its shape, in state-dict order (sdk.fusion.architecture.parameter_shapes, from
     * the same topology: a residual block has a 1x1 downsample where its stride or channels change). */
    public static Map<String, int[]> parameterShapes(String stem, double width, int numClasses) {
        int[] c = new int[4];
        for (int s = 0; s < 4; s++) c[s] = (int) (STAGE_CHANNELS[s] * width);
        int k = stem.equals("imagenet") ? 7 : 3;
        Map<String, int[]> m = new LinkedHashMap<>();
        m.put("stem.conv1.weight", new int[]{c[0], 3, k, k});
        bn(m, "stem.bn1", c[0]);
        int in = c[0];
        for (int s = 0; s < BLOCKS_PER_STAGE.length; s++) {
            for (int b = 0; b < BLOCKS_PER_STAGE[s]; b++) {
                String p = "layer" + (s + 1) + "." + b;
                int out = c[s], stride = b == 0 ? STAGE_STRIDES[s] : 1;
                m.put(p + ".conv1.weight", new int[]{out, in, 3, 3});
                bn(m, p + ".bn1", out);
                m.put(p + ".conv2.weight", new int[]{out, out, 3, 3});
                bn(m, p + ".bn2", out);
                if (stride != 1 || in != out) {
                    m.put(p + ".downsample.0.weight", new int[]{out, in, 1, 1});
                    bn(m, p + ".downsample.1", out);
                }
                in = out;
            }
        }
        m.put("fc.weight", new int[]{numClasses, c[3]});
        m.put("fc.bias", new int[]{numClasses});
        return m;
    }

    public static int mixerBlockOf(String name) {
        if (name.startsWith("stem.") || name.startsWith("layer1.")) return 0;
        if (name.startsWith("layer2.")) return 1;
        if (name.startsWith("layer3.")) return 2;
        if (name.startsWith("layer4.") || name.startsWith("fc.")) return 3;
        throw new IllegalArgumentException(name + " belongs to no mixer block");
    }

    static boolean isRunningStat(String name) {
        return name.endsWith("running_mean") || name.endsWith("running_var");
    }

    /** Per block: learned parameters first, then running statistics (the order of a bases row). */
    public static List<List<String>> blockLayout(Map<String, int[]> shapes) {
        List<List<String>> params = new ArrayList<>(), stats = new ArrayList<>();
        for (int b = 0; b < 4; b++) { params.add(new ArrayList<>()); stats.add(new ArrayList<>()); }
        for (String n : shapes.keySet()) {
            if (n.endsWith("num_batches_tracked")) continue;
            (isRunningStat(n) ? stats : params).get(mixerBlockOf(n)).add(n);
        }
        for (int b = 0; b < 4; b++) params.get(b).addAll(stats.get(b));
        return params;
    }

    /** (conv prefix, batch-norm prefix) pairs. */
    public static List<String[]> convBnPairs(Map<String, int[]> shapes) {
        List<String[]> out = new ArrayList<>();
        for (String n : shapes.keySet()) {
            if (!n.endsWith(".weight")) continue;
            String p = n.substring(0, n.length() - ".weight".length());
            if ((p.endsWith("conv1") || p.endsWith("conv2")) && (p.startsWith("layer") || p.startsWith("stem."))) {
                out.add(new String[]{p, p.substring(0, p.length() - 5) + "bn" + p.charAt(p.length() - 1)});
            } else if (p.endsWith("downsample.0")) {
                out.add(new String[]{p, p.substring(0, p.length() - 1) + "1"});
            }
        }
        return out;
    }

    /**
     * Byte offset of every folded backbone weight (conv weight, then its bias, per conv/BN pair) in the
     * backbone graph's external-data file, each 64-byte aligned, as sdk/fusion/folding.py backbone_layout;
     * returns the file's size.
     */
    public static int backboneLayout(Map<String, int[]> shapes, Map<String, Integer> offsets) {
        int offset = 0;
        for (String[] pair : convBnPairs(shapes)) {
            int[] weight = shapes.get(pair[0] + ".weight");
            offsets.put(pair[0] + ".weight", offset);
            offset = align64(offset + 4 * numel(weight));
            offsets.put(pair[0] + ".bias", offset);
            offset = align64(offset + 4 * weight[0]);
        }
        return offset;
    }

    /** One folded backbone weight in the external file: the graph's initializer name, byte offset, shape. */
    public record WeightSlot(String name, int offset, long[] shape) {}

    /** Every folded weight of {@link #backboneLayout}, in file order (what an engine that feeds
     * initializers by name needs, e.g. onnxruntime's addExternalInitializers). */
    public static List<WeightSlot> backboneSlots(Map<String, int[]> shapes) {
        Map<String, Integer> offsets = new LinkedHashMap<>();
        backboneLayout(shapes, offsets);
        List<WeightSlot> out = new ArrayList<>();
        for (Map.Entry<String, Integer> e : offsets.entrySet()) {
            String name = e.getKey();
            int[] weight = shapes.get(name.substring(0, name.lastIndexOf('.')) + ".weight");
            long[] shape = new long[name.endsWith(".bias") ? 1 : weight.length];
            for (int i = 0; i < shape.length; i++) shape[i] = weight[i];
            out.add(new WeightSlot(name, e.getValue(), shape));
        }
        return out;
    }

    private static int align64(int n) {
        return n + (-n & 63);
    }

    static int numel(int[] shape) {
        int n = 1;
        for (int d : shape) n *= d;
        return n;
    }
}
