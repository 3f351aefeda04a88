package org.taper.sdk;

/**
 * A task of one class: a model that answers "X, or anything else" (sdk/engines/rest.py, the same rows and scores).
 * Its head holds X's row first, then every other class of the bundle, their biases lowered by log(n) (n: how
 * many others); its second score is the log-sum-exp of those n logits. The softmax over the two is the full
 * classifier's probability of X with X's prior made even against all the others together.
 * <pre>{@code
 * int[] rows = RestHead.order(3, 10);              // {3, 0, 1, 2, 4, ..., 9}
 * float[] two = RestHead.collapse(logitsOfEveryRow);
 * }</pre>
 */
public final class RestHead {
    /** The second answer of a model of one class (sdk.engines.rest.REST_LABEL), its id and its class index. */
    public static final String LABEL = "anything else", ID = "";
    public static final int INDEX = -1;

    private RestHead() {}

    /** The bundle classes of the rows of class {@code x}'s model, among {@code classes}: x, then the others in order. */
    public static int[] order(int x, int classes) {
        int[] rows = new int[classes];
        rows[0] = x;
        for (int c = 0, k = 1; c < classes; c++) if (c != x) rows[k++] = c;
        return rows;
    }

    /** Lowers the bias (the last value) of every row after the first by log(their count), in place. */
    public static float[][] lowerRest(float[][] rows) {
        float shift = (float) Math.log(rows.length - 1);
        for (int k = 1; k < rows.length; k++) rows[k][rows[k].length - 1] -= shift;
        return rows;
    }

    /** Logits of the rows of {@link #order} -> two: X's, and the log-sum-exp of the rest (float32 steps, as numpy). */
    public static float[] collapse(float[] z) {
        float top = Float.NEGATIVE_INFINITY;
        for (int k = 1; k < z.length; k++) top = Math.max(top, z[k]);
        float sum = 0;
        for (int k = 1; k < z.length; k++) sum += (float) Math.exp(z[k] - top);
        return new float[]{z[0], top + (float) Math.log(sum)};
    }
}
