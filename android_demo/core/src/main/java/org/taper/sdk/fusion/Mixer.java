package org.taper.sdk.fusion;

import org.taper.sdk.format.Bundle;
import java.nio.FloatBuffer;
import java.util.Map;

/** The mixer (sdk/fusion/mixer.py): task embedding -> alpha [4][Q], an MLP (Linear, batch norm with running
 * statistics, ReLU) and a softmax over the bases per block. */
public final class Mixer {
    private final Bundle bundle;

    public Mixer(Bundle bundle) { this.bundle = bundle; }

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

}
