package org.taper.sdk;

import org.taper.sdk.engines.Engine;
import org.taper.sdk.engines.Int8;
import org.taper.sdk.format.Bundle;
import org.taper.sdk.format.BundleException;
import org.taper.sdk.format.GraphCheck;
import org.taper.sdk.format.Proto;
import org.taper.sdk.fusion.Architecture;
import org.taper.sdk.fusion.Fusion;
import org.taper.sdk.fusion.Mixer;
import org.taper.sdk.text.Compounds;
import org.taper.sdk.text.EnglishWords;
import org.taper.sdk.text.DescriptionException;
import org.taper.sdk.text.TaskOptions;
import org.taper.sdk.text.TaskResolver;
import org.taper.sdk.text.Tokenizer;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * sdk.personalize on the phone: a bundle and an engine; a description -> a personalized model, every
 * step as the Python runtime does it (sdk/runtime.py): tokens (Tokenizer), task (TaskResolver), alpha
 * (Mixer), fused and folded weights and the head rows (Fusion), the backbone session (Engine).
 * <pre>{@code
 * try (Personalizer p = Personalizer.load("tiny-imagenet.taper", new OnnxEngine())) {
 *     PersonalizedModel model = p.personalize("insects");
 *     model.classes();                       // [monarch, ladybug, ...]
 *     model.predict(rgb, width, height);     // top 3: [monarch (0.91), ...]
 *     model.timings();                       // {encode=4.1, resolve=0.2, mixer=0.1, fuse_fold=..., total=...}
 * }
 * }</pre>
 * Thread safety: personalize() may be called from several threads; each model is used by one at a time.
 */
public final class Personalizer implements AutoCloseable {
    private final Bundle bundle;
    private final Engine engine;
    private final Tokenizer tokenizer;
    private final TaskResolver resolver;
    private final Mixer mixer;
    private final Fusion fusion;
    private final byte[] backboneGraph;       // copied out of the bundle once, handed to every backbone session
    private final List<Architecture.WeightSlot> backboneSlots;
    private Engine.TextEncoder textEncoder;   // opened on the first free-text description
    private Int8.Plan int8Plan;               // made on the first int8 model
    /** sdk.runtime.PRECISIONS. */
    public static final List<String> PRECISIONS = List.of("float32", "int8");

    public Personalizer(Bundle bundle, Engine engine) {
        this.bundle = bundle;
        this.engine = engine;
        tokenizer = Tokenizer.fromJson(bundle.memberBytes("tokenizer.json"), bundle.maxTokens);  // checked at load
        resolver = new TaskResolver(bundle.classIds, bundle.classNames, bundle.classAliases, bundle.classDescriptions,
                bundle.classPaths, bundle.supercategories,
                bundle.classEmbeddings, bundle.embedDim, this::embedPhrase, bundle.concepts, bundle.conceptEmbeddings,
                tokenizer::isWord, Compounds.shipped(),
                EnglishWords::shipped);
        mixer = new Mixer(bundle);
        fusion = new Fusion(bundle);
        backboneGraph = GraphCheck.checkBackbone(bundle.memberBytes("backbone.onnx"), bundle);
        backboneSlots = Architecture.backboneSlots(bundle.shapes);
        // Checked here, so a hostile encoder fails at load, not at the first free-text description.
        GraphCheck.checkEncoder(bundle.memberBytes("text_encoder.onnx"));
    }

    /** Open and check the bundle at {@code path} and its graphs (BundleException if damaged or hostile), to run
     * on {@code engine}. */
    public static Personalizer load(String path, Engine engine) throws IOException {
        return new Personalizer(Bundle.open(path), engine);
    }

    /** Every class of the bundle, by name. */
    public List<String> classes() { return bundle.classNames; }

    public Bundle bundle() { return bundle; }

    /** A model for free text ("insects"), a group, a class name or a comma list, with default options. */
    public PersonalizedModel personalize(String description) { return personalize(description, TaskOptions.DEFAULT); }

    public PersonalizedModel personalize(String description, TaskOptions options) {
        long start = System.nanoTime();
        return build(resolver.resolve(description, options), start);
    }

    /** A model for exact class names (ids, names or synonyms). */
    public PersonalizedModel personalize(List<String> classNames, TaskOptions options) {
        long start = System.nanoTime();
        return build(resolver.resolve(classNames, options), start);
    }

    /**
     * As {@link #personalize(String, TaskOptions)} in {@code precision} "float32" or "int8" (sdk.personalize's
     * precision): int8 quantizes the folded weights on the device without photos ({@link Int8}) and needs an
     * engine that runs int8 backbones ({@link Engine#openQuantizedBackbone}).
     */
    public PersonalizedModel personalize(String description, TaskOptions options, String precision) {
        long start = System.nanoTime();
        checkPrecision(precision);
        TaskResolver.Task task = resolver.resolve(description, options);
        return build(task, start, precision.equals("int8"));
    }

    /** A model for exact class names in {@code precision} "float32" or "int8". */
    public PersonalizedModel personalize(List<String> classNames, TaskOptions options, String precision) {
        long start = System.nanoTime();
        checkPrecision(precision);
        TaskResolver.Task task = resolver.resolve(classNames, options);
        return build(task, start, precision.equals("int8"));
    }

    private static void checkPrecision(String precision) {
        if (!PRECISIONS.contains(precision))
            throw new DescriptionException("precision must be one of " + PRECISIONS + ", not " + precision);
    }

    /** The unit embedding of a description: the first prompt around it, through the text encoder. */
    float[] embedPhrase(String phrase) {
        int[] ids = tokenizer.encode(bundle.prompts.get(0).replace("{}", phrase));
        long[] inputIds = new long[ids.length], mask = new long[ids.length];
        for (int i = 0; i < ids.length; i++) { inputIds[i] = ids[i]; mask[i] = 1; }
        float[] e;
        synchronized (this) {
            if (textEncoder == null) textEncoder = engine.openTextEncoder(bundle.memberBytes("text_encoder.onnx"));
            e = textEncoder.embed(inputIds, mask);
        }
        if (e.length != bundle.embedDim) throw new IllegalStateException("the text encoder gave " + e.length
                + " values, the mixer takes " + bundle.embedDim);
        double norm = 0;
        for (float v : e) {
            if (!Float.isFinite(v)) throw new IllegalStateException("the text encoder gave non-finite values");
            norm += (double) v * v;
        }
        float scale = (float) Math.max(Math.sqrt(norm), 1e-12);
        float[] out = new float[e.length];
        for (int i = 0; i < e.length; i++) out[i] = e[i] / scale;
        return out;
    }

    private PersonalizedModel build(TaskResolver.Task task, long start) { return build(task, start, false); }

    /** The model of a task: alpha, the folded weights and head rows, and the backbone session (int8: the
     * folded weights quantized first, as sdk.runtime's _int8_model). */
    private PersonalizedModel build(TaskResolver.Task task, long start, boolean int8) {
        Map<String, Double> timings = new LinkedHashMap<>();
        long t = System.nanoTime();
        timings.put("encode", round(task.encodeMs));
        timings.put("resolve", round((t - start) / 1e6 - task.encodeMs));
        float[][] alpha = mixer.alpha(task.embedding);
        t = lap(timings, "mixer", t);
        ByteBuffer weights = fusion.newBackboneBuffer();
        fusion.foldInto(alpha, weights);
        boolean one = task.classes.length == 1 && bundle.classNames.size() > 1;   // it or anything else (RestHead)
        float[][] head = one ? RestHead.lowerRest(fusion.headRows(alpha, RestHead.order(task.classes[0],
                bundle.classNames.size()))) : fusion.headRows(alpha, task.classes);
        t = lap(timings, "fuse_fold", t);
        Engine.Backbone backbone;
        if (int8) {
            float[] folded = new float[weights.capacity() / 4];
            weights.duplicate().order(java.nio.ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(folded);
            byte[] graph = int8Plan().quantize(folded, fusion.mixedChannels(alpha));
            t = lap(timings, "quantize", t);
            backbone = engine.openQuantizedBackbone(graph);
        } else {
            backbone = engine.openBackbone(backboneGraph, weights, backboneSlots);
        }
        lap(timings, "session", t);
        timings.put("total", round((System.nanoTime() - start) / 1e6));
        List<String> names = new ArrayList<>(), ids = new ArrayList<>(), how = new ArrayList<>(task.how);
        for (int c : task.classes) { names.add(bundle.classNames.get(c)); ids.add(bundle.classIds.get(c)); }
        int[] classes = task.classes;
        if (one) {
            how.add("one class: '" + names.get(0) + "', or " + RestHead.LABEL + " (the bundle's "
                    + (bundle.classNames.size() - 1) + " other classes)");
            names.add(RestHead.LABEL);
            ids.add(RestHead.ID);
            classes = new int[]{task.classes[0], RestHead.INDEX};
        }
        return new PersonalizedModel(backbone, bundle.preprocessing, names, ids, classes, head, alpha, timings, how);
    }

    private synchronized Int8.Plan int8Plan() {
        if (int8Plan == null) {
            try {
                int8Plan = new Int8.Plan(backboneGraph, bundle);
            } catch (Proto.ProtoException e) {   // the graph passed GraphCheck: not expected
                throw new BundleException("backbone.onnx: no int8 form (" + e.getMessage() + ")");
            }
        }
        return int8Plan;
    }

    private static long lap(Map<String, Double> timings, String name, long since) {
        long now = System.nanoTime();
        timings.put(name, round((now - since) / 1e6));
        return now;
    }

    private static double round(double ms) { return Math.round(ms * 1000) / 1000.0; }

    /** The steps, for checks and exports: task, alpha, fused tensors, folded buffer and head rows. */
    TaskResolver resolver() { return resolver; }
    Tokenizer tokenizer() { return tokenizer; }
    Mixer mixer() { return mixer; }
    Fusion fusion() { return fusion; }
    Engine engine() { return engine; }

    @Override
    public synchronized void close() {
        if (textEncoder != null) textEncoder.close();
        textEncoder = null;
    }
}
