package org.taper.sdk.fusion;

import org.taper.sdk.format.Bundle;
import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * alpha -> the network's weights, as sdk/fusion/bases.py and sdk/fusion/folding.py: every layer W_0 + sum_q alpha_q D_q,
 * batch norm folded into each conv (the backbone's external weight buffer, in the plain graph's layout:
 * what the engine runs), and the task's classifier rows.
 * <p>Two ways, one answer: {@link #foldInto} and {@link #headRows} are the fast path personalize() takes
 * (row by row with {@link RowMixer}, folded as each row is made, straight into a direct buffer, the rows
 * split over the device's cores); {@link #fuse}, {@link #foldedBackbone} and {@link #head} are the plain
 * reference loops the tests compare it with.
 * <pre>{@code
 * Fusion fusion = new Fusion(bundle, Runtime.getRuntime().availableProcessors());
 * ByteBuffer weights = fusion.newBackboneBuffer();
 * fusion.foldInto(alpha, weights);                  // what Engine.openBackbone takes
 * float[][] head = fusion.headRows(alpha, new int[]{3, 17});
 * }</pre>
 */
public final class Fusion {
    /** Multiply-adds per unit of work: small enough to balance threads, large enough to amortise a hand-off. */
    private static final long CHUNK_WORK = 1 << 18;
    /** Shared by every Fusion: daemon threads, so an app that forgets close() still exits. */
    private static final ExecutorService POOL = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "taper-fusion");
        t.setDaemon(true);
        return t;
    });

    private final Bundle bundle;
    private final int threads;
    private final List<Bases.Layer> convs = new ArrayList<>();
    private final Bases.Layer classifier;
    private final List<int[]> chunks = new ArrayList<>();   // {conv index, first row, end row}

    /** @param threads how many threads fuse (1: the calling thread only) */
    public Fusion(Bundle bundle, int threads) {
        if (threads < 1) throw new IllegalArgumentException("threads must be at least 1, not " + threads);
        this.bundle = bundle;
        this.threads = threads;
        Bases.Layer fc = null;
        for (Bases.Layer layer : bundle.bases.layers) {
            if (layer.name.equals("fc")) { fc = layer; continue; }
            int index = convs.size();
            convs.add(layer);
            long perRow = (long) layer.columns * termsPerRow(layer);
            int step = (int) Math.max(1, Math.min(layer.rows, CHUNK_WORK / Math.max(1, perRow)));
            for (int o = 0; o < layer.rows; o += step) chunks.add(new int[]{index, o, Math.min(layer.rows, o + step)});
        }
        classifier = fc;
    }

    public Fusion(Bundle bundle) { this(bundle, Runtime.getRuntime().availableProcessors()); }

    private static int termsPerRow(Bases.Layer layer) {
        switch (layer.kind) {
            case "shared": return 1;
            case "lowrank": return 1 + layer.numBases * layer.rank;
            case "subspace": return 1 + layer.rank;
            default: return 1 + layer.numBases;
        }
    }

    /** A direct little-endian buffer of the backbone's external weight file's size (reusable across calls). */
    public ByteBuffer newBackboneBuffer() {
        return ByteBuffer.allocateDirect(bundle.externalSize).order(ByteOrder.LITTLE_ENDIAN);
    }

    /**
     * Writes the folded backbone for {@code alpha} into {@code out} (at least the external file's size; its
     * position is ignored): per conv, each row of W_0 + sum_q alpha_q D_q times its batch norm's scale, and
     * the folded bias. The padding between tensors is left as it was.
     */
    public void foldInto(float[][] alpha, ByteBuffer out) {
        if (out.capacity() < bundle.externalSize) throw new IllegalArgumentException("the buffer holds "
                + out.capacity() + " bytes, the backbone needs " + bundle.externalSize);
        float[][] scales = new float[convs.size()][];
        FloatBuffer floats = out.duplicate().order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
        for (int i = 0; i < convs.size(); i++) scales[i] = foldBiases(convs.get(i), alpha, floats);
        AtomicInteger next = new AtomicInteger();
        Runnable worker = () -> foldChunks(alpha, scales, out, next);
        List<Future<?>> helpers = new ArrayList<>();
        for (int t = 1; t < Math.min(threads, chunks.size()); t++) helpers.add(POOL.submit(worker));
        worker.run();
        for (Future<?> f : helpers) {
            try {
                f.get();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted while fusing", e);
            } catch (ExecutionException e) {
                throw new IllegalStateException("fusion failed", e.getCause());
            }
        }
    }

    /** Folds one conv's bias into {@code out} and returns its per-row batch-norm scales. */
    private float[] foldBiases(Bases.Layer conv, float[][] alpha, FloatBuffer out) {
        float[] ch = conv.mixedChannels(alpha[conv.block]);   // gamma, beta, mean, var: [4][rows]
        int rows = conv.rows, at = bundle.backboneOffsets.get(conv.name + ".bias") / 4;
        float[] scale = new float[rows];
        for (int c = 0; c < rows; c++) {
            scale[c] = batchNormScale(ch[c], ch[3 * rows + c]);
            out.put(at + c, ch[rows + c] - ch[2 * rows + c] * scale[c]);
        }
        return scale;
    }

    /** gamma / sqrt(var + eps): what folding multiplies a conv's output row by (sdk/fusion/folding.py). */
    private static float batchNormScale(float gamma, float variance) {
        return gamma / (float) Math.sqrt(variance + Architecture.BN_EPS);
    }

    /** One thread: takes chunks in order until none is left; keeps its mixer while the layer stays the same. */
    private void foldChunks(float[][] alpha, float[][] scales, ByteBuffer out, AtomicInteger next) {
        FloatBuffer floats = out.duplicate().order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
        RowMixer mixer = null;
        int mixerLayer = -1;
        float[] row = null;
        for (int c = next.getAndIncrement(); c < chunks.size(); c = next.getAndIncrement()) {
            int[] chunk = chunks.get(c);
            Bases.Layer conv = convs.get(chunk[0]);
            if (chunk[0] != mixerLayer) {
                mixer = new RowMixer(conv, alpha[conv.block]);
                mixerLayer = chunk[0];
                row = new float[conv.columns];
            }
            float[] scale = scales[chunk[0]];
            int n = conv.columns, at = bundle.backboneOffsets.get(conv.weight) / 4;
            for (int o = chunk[1]; o < chunk[2]; o++) {
                mixer.mix(o, row);
                float s = scale[o];
                for (int i = 0; i < n; i++) row[i] *= s;
                ((Buffer) floats).position(at + o * n);   // through Buffer: see Bundle.slice
                floats.put(row, 0, n);
            }
        }
    }

    /** The classifier rows [K][C + 1] (bias last) of the task's classes, only those rows mixed. */
    public float[][] headRows(float[][] alpha, int[] classes) {
        float[] a = alpha[classifier.block], bias = classifier.mixedChannels(a);
        RowMixer mixer = new RowMixer(classifier, a);
        int dim = classifier.columns;
        float[][] rows = new float[classes.length][dim + 1];
        for (int k = 0; k < classes.length; k++) {
            mixer.mix(classes[k], rows[k]);
            rows[k][dim] = bias[classes[k]];
        }
        return rows;
    }

    /** The mixed per-channel tensors (batch norms, the classifier's bias) by state-dict name: the cheap part of
     * {@link #fuse} (what {@link Int8} reads its activation ranges from; sdk.fusion.bases.CompactBases.mixed_channels). */
    public Map<String, float[]> mixedChannels(float[][] alpha) {
        Map<String, float[]> out = new HashMap<>();
        for (Bases.Layer layer : bundle.bases.layers) {
            float[] channels = layer.mixedChannels(alpha[layer.block]);
            for (int i = 0; i < layer.channels.length; i++)
                out.put(layer.channels[i], Arrays.copyOfRange(channels, i * layer.rows, (i + 1) * layer.rows));
        }
        return out;
    }

    /** Reference: every mixed tensor by state-dict name: per layer W_0 + sum_q alpha_q D_q and the mixed channel tensors. */
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

    /** Reference: the backbone's external weight buffer (floats), batch norm folded into every conv. */
    public float[] foldedBackbone(Map<String, float[]> fused) {
        float[] out = new float[bundle.externalSize / 4];
        for (String[] pair : Architecture.convBnPairs(bundle.shapes)) {
            String conv = pair[0], bn = pair[1];
            float[] w = fused.get(conv + ".weight"), g = fused.get(bn + ".weight"), be = fused.get(bn + ".bias");
            float[] m = fused.get(bn + ".running_mean"), v = fused.get(bn + ".running_var");
            int channels = g.length, per = w.length / channels;
            int wOut = bundle.backboneOffsets.get(conv + ".weight") / 4, bOut = bundle.backboneOffsets.get(conv + ".bias") / 4;
            for (int c = 0; c < channels; c++) {
                float scale = batchNormScale(g[c], v[c]);
                for (int i = 0; i < per; i++) out[wOut + c * per + i] = w[c * per + i] * scale;
                out[bOut + c] = be[c] - m[c] * scale;
            }
        }
        return out;
    }

    /** Reference: classifier rows [K][C + 1] (bias last) of the task's classes. */
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
