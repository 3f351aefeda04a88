package org.taper.sdk.fusion;

import org.taper.sdk.format.Bundle;
import org.taper.sdk.format.BundleException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The bases of a version-3 or 4 bundle, layer by layer, as sdk/fusion/bases.py: per layer a shared W_0 ("base") plus
 * per-basis deltas stored as "full" (no W_0), "shared" (no deltas), "dense", "int8" (per-output-channel
 * scales), "lowrank" (U [Q, O, r], V [Q, r, n]) or "subspace" (U [Q, O, r], one V [r, n] shared by the
 * bases), floats in float32 or float16, and the per-output-channel
 * tensors ("channels" [Q or 1, c, O], float32). Every tensor's dtype and shape is checked against the
 * layer's storage, and every float must be finite (int8 scales also non-negative).
 */
public final class Bases {
    /** A tensor of the member: little-endian data of dtype F32, F16 or I8. */
    public static final class Tensor {
        public final String dtype;
        public final long[] shape;
        public final ByteBuffer data;

        public Tensor(String dtype, long[] shape, ByteBuffer data) { this.dtype = dtype; this.shape = shape; this.data = data; }

        float get(int i) {
            switch (dtype) {
                case "F32": return data.getFloat(4 * i);
                case "F16": return halfToFloat(data.getShort(2 * i));
                default: return data.get(i);
            }
        }

        long size() {
            long n = 1;
            for (long d : shape) n *= d;
            return n;
        }

        /** The index of the first value that is NaN or infinite (or, with {@code nonNegative}, below zero),
         *  -1 if none: one pass with the dtype decided once (a bundle's bases are millions of values). */
        long firstUnfit(boolean nonNegative) {
            long n = size();
            boolean f32 = dtype.equals("F32");
            for (int i = 0; i < n; i++) {
                float v = f32 ? data.getFloat(4 * i) : halfToFloat(data.getShort(2 * i));
                if (!Float.isFinite(v) || (nonNegative && v < 0)) return i;
            }
            return -1;
        }
    }

    /** One layer: the weight's name and shape, its block, its channel tensors and how it is stored. */
    public static final class Layer {
        public final String name, weight, kind;
        public final String[] channels;
        public final int block, rows, columns, rank, numBases;
        final Map<String, Tensor> parts;

        Layer(Architecture.Layer layer, String kind, int rank, int numBases, Map<String, Tensor> parts) {
            this.name = layer.name; this.weight = layer.weight; this.channels = layer.channels; this.block = layer.block;
            this.rows = layer.rows; this.columns = layer.columns; this.kind = kind; this.rank = rank;
            this.numBases = numBases; this.parts = parts;
        }

        /** W_0 + sum_q alpha[q] D_q, [rows * columns]. */
        public float[] mixedWeight(float[] alpha) {
            int size = rows * columns;
            float[] out = new float[size];
            if (!kind.equals("full")) {
                Tensor base = parts.get("base");
                for (int i = 0; i < size; i++) out[i] = base.get(i);
            }
            if (kind.equals("shared")) return out;
            for (int q = 0; q < numBases; q++) {
                float a = alpha[q];
                if (kind.equals("lowrank") || kind.equals("subspace")) {
                    Tensor u = parts.get("u"), v = parts.get("v");
                    int vFirst = kind.equals("lowrank") ? q * rank : 0;   // subspace: V is shared
                    for (int o = 0; o < rows; o++)
                        for (int r = 0; r < rank; r++) {
                            float c = a * u.get((q * rows + o) * rank + r);
                            int vRow = (vFirst + r) * columns;
                            for (int i = 0; i < columns; i++) out[o * columns + i] += c * v.get(vRow + i);
                        }
                } else {
                    Tensor d = parts.get(kind.equals("full") ? "weight" : "delta");
                    Tensor scale = parts.get("scale");
                    for (int o = 0; o < rows; o++) {
                        float c = scale == null ? a : a * scale.get(o);
                        for (int i = 0; i < columns; i++) out[o * columns + i] += c * d.get(q * size + o * columns + i);
                    }
                }
            }
            return out;
        }

        /** The channel tensors mixed with alpha: [channels.length * rows]. */
        public float[] mixedChannels(float[] alpha) {
            Tensor t = parts.get("channels");
            int n = channels.length * rows;
            float[] out = new float[n];
            if (kind.equals("shared")) {
                for (int i = 0; i < n; i++) out[i] = t.get(i);
                return out;
            }
            for (int q = 0; q < numBases; q++)
                for (int i = 0; i < n; i++) out[i] += alpha[q] * t.get(q * n + i);
            return out;
        }
    }

    public final List<Layer> layers = new ArrayList<>();

    @SuppressWarnings("unchecked")
    public Bases(Map<String, Tensor> tensors, Map<String, Object> storage, Map<String, int[]> shapes, int numBases, int version) {
        int used = 0;
        List<Architecture.Layer> arch = Architecture.mixedLayers(shapes);
        if (storage.size() != arch.size()) throw new BundleException("manifest: 'bases' must list every layer exactly once");
        for (Architecture.Layer layer : arch) {
            if (!(storage.get(layer.name) instanceof Map)) throw new BundleException("manifest: bases." + layer.name + " missing");
            Map<String, Object> spec = (Map<String, Object>) storage.get(layer.name);
            if (spec.size() != 3) throw new BundleException("manifest: bases." + layer.name + " must be {kind, dtype, rank}");
            String kind = Bundle.str(spec, "kind"), dtype = Bundle.str(spec, "dtype");
            if (!List.of("full", "shared", "dense", "int8", "lowrank", "subspace").contains(kind))
                throw new BundleException("manifest: bases." + layer.name + ".kind unknown");
            if (kind.equals("subspace") && version < 4)
                throw new BundleException("manifest: kind 'subspace' needs format version 4, the bundle says " + version);
            String f = dtype.equals("float32") ? "F32" : dtype.equals("float16") ? "F16" : null;
            if (f == null) throw new BundleException("manifest: bases." + layer.name + ".dtype unknown");
            boolean ranked = kind.equals("lowrank") || kind.equals("subspace");
            int rank = ranked ? Bundle.integer(spec, "rank", 1, Math.min(layer.rows, layer.columns))
                    : Bundle.integer(spec, "rank", 0, 0);
            long q = numBases, o = layer.rows, n = layer.columns;
            Map<String, Tensor> parts = new java.util.HashMap<>();
            parts.put("channels", expect(tensors, layer.name, "channels", "F32", kind.equals("shared") ? 1 : q, layer.channels.length, o));
            if (kind.equals("full")) parts.put("weight", expect(tensors, layer.name, "weight", f, q, o, n));
            else parts.put("base", expect(tensors, layer.name, "base", f, o, n));
            if (kind.equals("dense")) parts.put("delta", expect(tensors, layer.name, "delta", f, q, o, n));
            if (kind.equals("int8")) {
                parts.put("delta", expect(tensors, layer.name, "delta", "I8", q, o, n));
                parts.put("scale", expect(tensors, layer.name, "scale", "F32", o));
            }
            if (kind.equals("lowrank")) {
                parts.put("u", expect(tensors, layer.name, "u", f, q, o, rank));
                parts.put("v", expect(tensors, layer.name, "v", f, q, rank, n));
            }
            if (kind.equals("subspace")) {
                parts.put("u", expect(tensors, layer.name, "u", f, q, o, rank));
                parts.put("v", expect(tensors, layer.name, "v", f, rank, n));
            }
            for (Map.Entry<String, Tensor> e : parts.entrySet()) {
                Tensor t = e.getValue();
                if (t.dtype.equals("I8")) continue;
                long bad = t.firstUnfit(e.getKey().equals("scale"));
                if (bad >= 0 && !Float.isFinite(t.get((int) bad)))
                    throw new BundleException("bases: " + layer.name + "." + e.getKey() + " holds NaN or infinite values");
                if (bad >= 0) throw new BundleException("bases: " + layer.name + ".scale holds negative scales");
            }
            Tensor channels = parts.get("channels");
            int count = layer.channels.length;
            for (int c = 0; c < count; c++) {
                if (!layer.channels[c].endsWith("running_var")) continue;
                for (long qq = 0; qq < channels.size() / (count * o); qq++)
                    for (long j = 0; j < o; j++)
                        if (channels.get((int) ((qq * count + c) * o + j)) < 0)
                            throw new BundleException("bases: " + layer.channels[c] + " holds negative running variances");
            }
            used += parts.size();
            layers.add(new Layer(layer, kind, rank, numBases, parts));
        }
        if (used != tensors.size()) throw new BundleException("bases: tensors that belong to no layer");
    }

    private static Tensor expect(Map<String, Tensor> tensors, String layer, String part, String dtype, long... shape) {
        Tensor t = tensors.get(layer + "." + part);
        if (t == null) throw new BundleException("bases: tensor " + layer + "." + part + " is missing");
        if (!t.dtype.equals(dtype) || !java.util.Arrays.equals(t.shape, shape))
            throw new BundleException("bases: tensor " + layer + "." + part + " has the wrong dtype or shape");
        return t;
    }

    /** IEEE 754 half precision to float (Float.float16ToFloat needs Java 20). */
    static float halfToFloat(short bits) {
        int h = bits & 0xffff, sign = (h >>> 15) << 31, exp = (h >>> 10) & 0x1f, mant = h & 0x3ff;
        if (exp == 0x1f) return Float.intBitsToFloat(sign | 0x7f800000 | (mant << 13));
        if (exp == 0) {
            float v = mant * (1f / (1 << 24));   // subnormal: mant * 2^-24
            return sign != 0 ? -v : v;
        }
        return Float.intBitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
    }
}
