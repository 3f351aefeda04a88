package org.taper.sdk;

import java.nio.FloatBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeSet;

/**
 * The steps of sdk.personalize after the text encoder, mirroring sdk/tasks.py, sdk/mixer.py,
 * sdk/bases.py and sdk/folding.py: class list -> task embedding -> alpha -> fused weights ->
 * batch-norm folded backbone weights (the buffer handed to onnxruntime) and classifier rows.
 */
public final class Personalizer {
    private final Bundle bundle;

    public Personalizer(Bundle bundle) { this.bundle = bundle; }

    private static String norm(String s) {
        return s.trim().toLowerCase(Locale.ROOT).replaceAll("[\\s_]+", " ");
    }

    /** Class indices for exact class names or ids (case-insensitive, any synonym), padded to minClasses. */
    public int[] taskForClassNames(List<String> names, int minClasses) {
        TreeSet<Integer> chosen = new TreeSet<>();
        List<String> unknown = new ArrayList<>();
        for (String n : names) {
            int found = -1;
            for (int c = 0; c < bundle.classIds.size() && found < 0; c++) {
                if (norm(bundle.classIds.get(c)).equals(norm(n)) || norm(bundle.classNames.get(c)).equals(norm(n))) found = c;
                for (String syn : bundle.classNames.get(c).split(","))
                    if (found < 0 && norm(syn).equals(norm(n))) found = c;
            }
            if (found < 0) unknown.add(n); else chosen.add(found);
        }
        if (!unknown.isEmpty()) throw new IllegalArgumentException("unknown class names: " + unknown);
        while (chosen.size() < minClasses) {  // nearest classes to the centre, as sdk/tasks.py _pad
            float[] centre = mean(chosen);
            int best = -1;
            double bestScore = Double.NEGATIVE_INFINITY;
            for (int c = 0; c < bundle.numClasses; c++) {
                if (chosen.contains(c)) continue;
                double s = 0;
                for (int d = 0; d < bundle.embedDim; d++) s += bundle.classEmbeddings.get(c * bundle.embedDim + d) * centre[d];
                if (s > bestScore) { bestScore = s; best = c; }
            }
            chosen.add(best);
        }
        return chosen.stream().mapToInt(Integer::intValue).toArray();
    }

    private float[] mean(Iterable<Integer> classes) {
        float[] m = new float[bundle.embedDim];
        int n = 0;
        for (int c : classes) {
            for (int d = 0; d < bundle.embedDim; d++) m[d] += bundle.classEmbeddings.get(c * bundle.embedDim + d);
            n++;
        }
        for (int d = 0; d < m.length; d++) m[d] /= n;
        return m;
    }

    /** Normalised mean of the task's class embeddings. */
    public float[] taskEmbedding(int[] classes) {
        List<Integer> list = new ArrayList<>();
        for (int c : classes) list.add(c);
        float[] m = mean(list);
        double norm = 0;
        for (float v : m) norm += v * v;
        norm = Math.max(Math.sqrt(norm), 1e-12);
        for (int d = 0; d < m.length; d++) m[d] /= (float) norm;
        return m;
    }

    private static float[] linear(float[] x, FloatBuffer w, FloatBuffer b, int out) {
        float[] y = new float[out];
        for (int o = 0; o < out; o++) {
            double s = b.get(o);
            for (int i = 0; i < x.length; i++) s += w.get(o * x.length + i) * x[i];
            y[o] = (float) s;
        }
        return y;
    }

    /** alpha [4][Q]: the mixer MLP (Linear, BN with running statistics, ReLU) and a softmax per block. */
    public float[][] alpha(float[] embedding) {
        Map<String, FloatBuffer> t = bundle.mixer;
        float[] x = embedding;
        for (int l = 0; l < bundle.layers - 1; l++) {
            x = linear(x, t.get("body." + 3 * l + ".weight"), t.get("body." + 3 * l + ".bias"), bundle.hidden);
            String bn = "body." + (3 * l + 1);
            for (int i = 0; i < x.length; i++) {
                float v = (x[i] - t.get(bn + ".running_mean").get(i)) / (float) Math.sqrt(t.get(bn + ".running_var").get(i) + Architecture.BN_EPS);
                x[i] = Math.max(v * t.get(bn + ".weight").get(i) + t.get(bn + ".bias").get(i), 0f);
            }
        }
        int q = bundle.numBases;
        float[] logits = linear(x, t.get("head.weight"), t.get("head.bias"), bundle.mixerBlocks * q);
        float[][] alpha = new float[4][q];
        for (int b = 0; b < 4; b++) {
            int row = bundle.mixerBlocks == 1 ? 0 : b;
            double max = Double.NEGATIVE_INFINITY, sum = 0;
            for (int j = 0; j < q; j++) max = Math.max(max, logits[row * q + j]);
            for (int j = 0; j < q; j++) sum += Math.exp(logits[row * q + j] - max);
            for (int j = 0; j < q; j++) alpha[b][j] = (float) (Math.exp(logits[row * q + j] - max) / sum);
        }
        return alpha;
    }

    /** Every mixed tensor by state-dict name: per layer W_0 + sum_q alpha_q D_q and the mixed channel tensors. */
    public Map<String, float[]> fuse(float[][] alpha) {
        Map<String, float[]> out = new HashMap<>();
        for (Bases.Layer layer : bundle.bases.layers) {
            float[] a = alpha[layer.block];
            out.put(layer.weight, layer.mixedWeight(a));
            float[] channels = layer.mixedChannels(a);
            for (int i = 0; i < layer.channels.length; i++)
                out.put(layer.channels[i], Arrays.copyOfRange(channels, i * layer.rows, (i + 1) * layer.rows));
        }
        return out;
    }

    /** The backbone's external weight buffer (floats), batch norm folded into every conv. */
    public float[] foldedBackbone(Map<String, float[]> fused) {
        float[] out = new float[bundle.externalSize / 4];
        for (String[] pair : Architecture.convBnPairs(bundle.shapes)) {
            String conv = pair[0], bn = pair[1];
            float[] w = fused.get(conv + ".weight"), g = fused.get(bn + ".weight"), be = fused.get(bn + ".bias");
            float[] m = fused.get(bn + ".running_mean"), v = fused.get(bn + ".running_var");
            int channels = g.length, per = w.length / channels;
            int wOut = bundle.backboneOffsets.get(conv + ".weight") / 4, bOut = bundle.backboneOffsets.get(conv + ".bias") / 4;
            for (int c = 0; c < channels; c++) {
                float scale = g[c] / (float) Math.sqrt(v[c] + Architecture.BN_EPS);
                for (int i = 0; i < per; i++) out[wOut + c * per + i] = w[c * per + i] * scale;
                out[bOut + c] = be[c] - m[c] * scale;
            }
        }
        return out;
    }

    /** Classifier rows [K][C] and biases [K] of the task's classes. */
    public float[][] head(Map<String, float[]> fused, int[] classes) {
        float[] w = fused.get("fc.weight"), b = fused.get("fc.bias");
        int dim = bundle.shapes.get("fc.weight")[1];
        float[][] rows = new float[classes.length][dim + 1];
        for (int k = 0; k < classes.length; k++) {
            System.arraycopy(w, classes[k] * dim, rows[k], 0, dim);
            rows[k][dim] = b[classes[k]];
        }
        return rows;
    }
}
