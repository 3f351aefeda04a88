package org.taper.sdk;

import org.taper.sdk.engines.Engine;
import org.taper.sdk.media.Preprocessing;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * A personalized network (sdk/model.py): the task's classes, the backbone with the fused weights, the
 * classifier rows. Close it to free the engine's session.
 * <pre>{@code
 * PersonalizedModel model = personalizer.personalize("insects");
 * List<PersonalizedModel.Prediction> top3 = model.predict(rgb, width, height);
 * }</pre>
 */
public final class PersonalizedModel implements AutoCloseable {
    /** A label and its probability (softmax over the task's classes). */
    public static final class Prediction {
        public final String label;
        /** The bundle's index of the class, or {@link RestHead#INDEX} for a model of one class's "anything else". */
        public final int classIndex;
        public final double probability;

        Prediction(String label, int classIndex, double probability) {
            this.label = label;
            this.classIndex = classIndex;
            this.probability = probability;
        }

        @Override
        public String toString() { return String.format("%s (%.3f)", label, probability); }
    }

    private final Engine.Backbone backbone;
    private final Preprocessing preprocessing;
    private final List<String> classes, classIds, resolution;
    private final int[] classIndices;
    private final float[][] head;        // [K][C + 1]: weights, then the bias (one class: RestHead's rows)
    private final float[][] alpha;
    private final Map<String, Double> timings;

    PersonalizedModel(Engine.Backbone backbone, Preprocessing preprocessing, List<String> classes, List<String> classIds,
                      int[] classIndices, float[][] head, float[][] alpha, Map<String, Double> timings, List<String> resolution) {
        this.backbone = backbone;
        this.preprocessing = preprocessing;
        this.classes = Collections.unmodifiableList(classes);
        this.classIds = Collections.unmodifiableList(classIds);
        this.classIndices = classIndices;
        this.head = head;
        this.alpha = alpha;
        this.timings = Collections.unmodifiableMap(timings);
        this.resolution = Collections.unmodifiableList(resolution);
    }

    /** The task's class names, in the order of the logits. */
    public List<String> classes() { return classes; }
    public List<String> classIds() { return classIds; }
    /** The task's indices into the bundle's classes (sorted; one class: it and {@link RestHead#INDEX}). */
    public int[] classIndices() { return classIndices.clone(); }
    /** True for a model of one class, which answers it or {@link RestHead#LABEL}. */
    public boolean rest() { return classIndices.length == 2 && classIndices[1] == RestHead.INDEX; }
    /** The bundle class of each row of {@link #headRows} (one class: {@link RestHead#order}). */
    public int[] headClasses() {
        return rest() ? RestHead.order(classIndices[0], head.length) : classIndices.clone();
    }
    /** Milliseconds per step of personalize(): encode, resolve, mixer, fuse_fold, session, total. */
    public Map<String, Double> timings() { return timings; }
    /** How the description was read, part by part. */
    public List<String> resolution() { return resolution; }
    public float[][] alpha() { return alpha; }
    /** The classifier rows [K][C + 1] (weights, then the bias). */
    public float[][] headRows() { return head; }

    /** Logits [K] (one class: 2) of an RGB image (interleaved bytes, height rows of width pixels). */
    public float[] logits(byte[] rgb, int width, int height) {
        return logitsOf(backbone.features(preprocessing.apply(rgb, width, height), 1)[0]);
    }

    /** The {@code k} most probable classes of an RGB image, most probable first. */
    public List<Prediction> predict(byte[] rgb, int width, int height, int k) {
        float[] z = logits(rgb, width, height);
        double max = Double.NEGATIVE_INFINITY, sum = 0;
        for (float v : z) max = Math.max(max, v);
        double[] p = new double[z.length];
        for (int i = 0; i < z.length; i++) sum += p[i] = Math.exp(z[i] - max);
        List<Prediction> all = new ArrayList<>();
        for (int i = 0; i < z.length; i++) all.add(new Prediction(classes.get(i), classIndices[i], p[i] / sum));
        all.sort((a, b) -> Double.compare(b.probability, a.probability));
        return all.subList(0, Math.min(k, all.size()));
    }

    /** The three most probable classes. */
    public List<Prediction> predict(byte[] rgb, int width, int height) { return predict(rgb, width, height, 3); }

    float[] logitsOf(float[] features) {
        float[] z = new float[head.length];
        int dim = features.length;
        if (head.length > 0 && head[0].length != dim + 1)
            throw new IllegalStateException("the engine gave " + dim + " features, the head takes " + (head[0].length - 1));
        for (int k = 0; k < head.length; k++) {
            double s = head[k][dim];
            for (int i = 0; i < dim; i++) s += (double) head[k][i] * features[i];
            z[k] = (float) s;
        }
        return rest() ? RestHead.collapse(z) : z;
    }

    @Override
    public void close() { backbone.close(); }

    @Override
    public String toString() {
        return "PersonalizedModel(" + classes.size() + " classes, personalized in " + timings.get("total") + " ms)";
    }
}
