package org.taper.sdk;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

/**
 * alpha -> the network's weights, as sdk/bases.py and sdk/folding.py: every layer W_0 + sum_q alpha_q D_q,
 * batch norm folded into each conv (the backbone's external weight buffer, in the plain graph's layout:
 * what the engine runs), and the task's classifier rows.
 */
public final class Fusion {
    private final Bundle bundle;

    public Fusion(Bundle bundle) { this.bundle = bundle; }

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
