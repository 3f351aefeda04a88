package org.taper.sdk.fusion;

import org.taper.sdk.format.Bundle;
import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.ShortBuffer;

/**
 * One layer's rows of W_0 + sum_q alpha_q D_q, one row at a time, for one thread (the fast path of
 * {@link Bases.Layer#mixedWeight}, which stays as the reference that tests compare it with).
 * <p>Every step is a loop over plain float arrays that HotSpot's C2 turns into SIMD: a stored row is copied
 * out of the memory-mapped bundle in bulk (float16 widened by a 65,536-entry table, int8 cast) into an
 * array of its own, then added four terms at a time, {@code row[i] += c0 * t0[i] + ... + c3 * t3[i]}.
 * Each term has its own array starting at 0 because C2 (JDK 17) does not vectorize a loop that reads and
 * writes float arrays at different offsets ({@code row[i] += c * v[from + i]}: the arrays might be one
 * array): measured here, 0.9 GFMA/s with offsets, 5.1 with one term per array, 10.4 with four terms per
 * pass (Zen 1, AVX2). Low-rank right factors (V) are widened once per layer, not once per row; subspace
 * layers mix their left factors first (left_r = sum_q alpha_q U[q, o, r]), so a row costs rank
 * multiply-adds per column whatever Q is. Not thread-safe: each thread makes its own.
 */
final class RowMixer {
    /** Every float16 bit pattern widened (Float.float16ToFloat needs Java 20; 256 KiB, built once). */
    private static final float[] HALF = new float[1 << 16];

    static {
        for (int h = 0; h < HALF.length; h++) HALF[h] = Bases.halfToFloat((short) h);
    }

    private final Bases.Layer layer;
    private final float[] alpha;
    private final int columns;
    private final View base, delta;
    private final float[] leftFactors;    // U [Q][rows][rank], widened once per layer
    private final float[] scale;          // int8: per-row scales, read once
    private final float[][] rightFactors; // lowrank [Q * rank][columns], subspace [rank][columns], widened
    private final float[] left;           // per row: the coefficient of each right-factor row
    private final float[][] stored;       // up to four stored rows, widened
    private final float[] coefficients = new float[4];
    private final short[] halves;
    private final byte[] bytes;

    RowMixer(Bases.Layer layer, float[] alpha) {
        this.layer = layer;
        this.alpha = alpha;
        columns = layer.columns;
        stored = new float[4][columns];
        halves = new short[columns];
        bytes = new byte[columns];
        base = view(layer.parts.get(layer.kind.equals("full") ? "weight" : "base"));
        delta = view(layer.parts.get("delta"));
        Bases.Tensor u = layer.parts.get("u");
        leftFactors = u == null ? null : view(u).read(0, new float[(int) u.size()], (int) u.size());
        Bases.Tensor s = layer.parts.get("scale");
        scale = s == null ? null : view(s).read(0, new float[layer.rows], layer.rows);
        if (u != null) {
            int rightRows = layer.kind.equals("lowrank") ? layer.numBases * layer.rank : layer.rank;
            View v = view(layer.parts.get("v"));
            rightFactors = new float[rightRows][columns];
            for (int k = 0; k < rightRows; k++) v.read((long) k * columns, rightFactors[k], columns);
            left = new float[rightRows];
        } else {
            rightFactors = null;
            left = null;
        }
    }

    /** row[0, columns) = row {@code o} of W_0 + sum_q alpha_q D_q. */
    void mix(int o, float[] row) {
        int n = columns;
        long at = (long) o * n;
        switch (layer.kind) {
            case "full":   // no W_0: row = sum_q alpha_q W_q
                java.util.Arrays.fill(row, 0, n, 0f);
                addBases(base, at, 1f, row);
                return;
            case "shared":
                base.read(at, row, n);
                return;
            case "dense":
                base.read(at, row, n);
                addBases(delta, at, 1f, row);
                return;
            case "int8":
                base.read(at, row, n);
                addBases(delta, at, scale[o], row);
                return;
            default:       // lowrank, subspace
                base.read(at, row, n);
                mixLowRank(o, row);
        }
    }

    private void mixLowRank(int o, float[] row) {
        int q = layer.numBases, r = layer.rank, rows = layer.rows;
        boolean subspace = layer.kind.equals("subspace");
        if (subspace) java.util.Arrays.fill(left, 0f);
        for (int b = 0; b < q; b++) {
            float a = alpha[b];
            int first = (b * rows + o) * r;
            for (int k = 0; k < r; k++) {
                float c = a * leftFactors[first + k];
                if (subspace) left[k] += c; else left[b * r + k] = c;
            }
        }
        addTerms(left, rightFactors, left.length, row);
    }

    /** row += scale * sum_q alpha_q t[q][row at], the stored rows read four at a time. */
    private void addBases(View t, long at, float scale, float[] row) {
        long stride = (long) layer.rows * columns;
        for (int b = 0; b < layer.numBases; b += 4) {
            int count = Math.min(4, layer.numBases - b);
            for (int j = 0; j < count; j++) {
                t.read((b + j) * stride + at, stored[j], columns);
                coefficients[j] = alpha[b + j] * scale;
            }
            addTerms(coefficients, stored, count, row);
        }
    }

    /** row[i] += sum_{j < count} c[j] * terms[j][i], four terms per pass (see the class comment). */
    private void addTerms(float[] c, float[][] terms, int count, float[] row) {
        int n = columns, j = 0;
        for (; j + 4 <= count; j += 4) {
            float c0 = c[j], c1 = c[j + 1], c2 = c[j + 2], c3 = c[j + 3];
            float[] t0 = terms[j], t1 = terms[j + 1], t2 = terms[j + 2], t3 = terms[j + 3];
            for (int i = 0; i < n; i++) row[i] += c0 * t0[i] + c1 * t1[i] + c2 * t2[i] + c3 * t3[i];
        }
        for (; j < count; j++) {
            float cj = c[j];
            float[] tj = terms[j];
            for (int i = 0; i < n; i++) row[i] += cj * tj[i];
        }
    }

    private View view(Bases.Tensor t) { return t == null ? null : new View(t); }

    /** This thread's typed view of a stored tensor (buffer positions are per view, so views are not shared). */
    private final class View {
        private final FloatBuffer f32;
        private final ShortBuffer f16;
        private final ByteBuffer i8;

        View(Bases.Tensor t) {
            ByteBuffer data = t.data.duplicate().order(ByteOrder.LITTLE_ENDIAN);
            f32 = t.dtype.equals("F32") ? data.asFloatBuffer() : null;
            f16 = t.dtype.equals("F16") ? data.asShortBuffer() : null;
            i8 = t.dtype.equals("I8") ? data : null;
        }

        /** dst[0, n) = the tensor's elements [from, from + n) as floats. */
        float[] read(long from, float[] dst, int n) {
            if (f32 != null) {
                ((Buffer) f32).position((int) from);   // through Buffer: see Bundle.slice
                f32.get(dst, 0, n);
            } else if (f16 != null) {
                ((Buffer) f16).position((int) from);   // through Buffer: see Bundle.slice
                short[] h = n <= halves.length ? halves : new short[n];
                f16.get(h, 0, n);
                for (int i = 0; i < n; i++) dst[i] = HALF[h[i] & 0xffff];
            } else {
                ((Buffer) i8).position((int) from);   // through Buffer: see Bundle.slice
                byte[] b = n <= bytes.length ? bytes : new byte[n];
                i8.get(b, 0, n);
                for (int i = 0; i < n; i++) dst[i] = b[i];
            }
            return dst;
        }
    }
}
