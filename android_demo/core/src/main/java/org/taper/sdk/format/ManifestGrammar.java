package org.taper.sdk.format;

import org.taper.sdk.fusion.Architecture;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Pattern;

/**
 * The manifest's grammar, field by field, as sdk/format/manifest.py's {@code Manifest.from_json} states it: every
 * object's fields typed and range-checked, and any field a version does not define refused ("within a
 * version, unknown fields are errors, never ignored": docs/bundle-format.md). {@link Bundle} runs it on
 * the parsed manifest before it reads a value, so that both readers refuse exactly the same manifests
 * (issue 63: eight disagreements on format-5 bundles were unknown fields the Java core ignored).
 * The Python side is the specification; each range below names the field it mirrors.
 */
final class ManifestGrammar {
    static final String FORMAT = "taper-bundle";
    static final long OLDEST = 3, NEWEST = 6;
    static final String[] MEMBERS = {"bases.safetensors", "mixer.safetensors", "class_embeddings.safetensors",
            "classes.json", "backbone.onnx", "text_encoder.onnx", "tokenizer.json", "NOTICE"};
    static final List<String> LAYER_KINDS = List.of("full", "shared", "dense", "int8", "lowrank", "subspace");
    static final List<String> FLOAT_DTYPES = List.of("float32", "float16");
    static final Pattern SHA256_HEX = Pattern.compile("[0-9a-f]{64}");
    static final int MAX_PROMPTS = 64, MAX_PROMPT_CHARS = 200;

    private ManifestGrammar() {}

    /** sdk.format.manifest.Fields: typed access to one JSON object; {@link #done} refuses the fields not read. */
    static final class Fields {
        private final Map<String, Object> obj;
        private final String where;
        private final Set<String> seen = new HashSet<>();

        @SuppressWarnings("unchecked")
        Fields(Object value, String where) {
            if (!(value instanceof Map)) throw new BundleException(where + " must be an object");
            this.obj = (Map<String, Object>) value;
            this.where = where;
        }

        Object get(String key) {
            if (!obj.containsKey(key)) throw new BundleException(where + "." + key + " is missing");
            seen.add(key);
            return obj.get(key);
        }

        private BundleException fail(String key, String what) {
            return new BundleException(where + "." + key + " must be " + what);
        }

        long integer(String key, long low, long high) {
            Object v = get(key);
            if (!(v instanceof Long) || (Long) v < low || (Long) v > high)
                throw fail(key, "an integer in [" + low + ", " + high + "]");
            return (Long) v;
        }

        /** Python's {@code choice} over floats: a JSON number with a fraction or exponent ("1.0", not "1"). */
        double floatChoice(String key, double... options) {
            Object v = get(key);
            if (v instanceof Double) for (double o : options) if ((Double) v == o) return o;
            throw fail(key, "one of " + java.util.Arrays.toString(options));
        }

        long intChoice(String key, long... options) {
            Object v = get(key);
            if (v instanceof Long) for (long o : options) if ((Long) v == o) return o;
            throw fail(key, "one of " + java.util.Arrays.toString(options));
        }

        String stringChoice(String key, List<String> options) {
            Object v = get(key);
            if (!(v instanceof String) || !options.contains(v)) throw fail(key, "one of " + options);
            return (String) v;
        }

        String string(String key, int maxChars, Pattern pattern) {
            Object v = get(key);
            if (!(v instanceof String) || ((String) v).codePointCount(0, ((String) v).length()) > maxChars
                    || (pattern != null && !pattern.matcher((String) v).matches()))
                throw fail(key, "a string of at most " + maxChars + " characters");
            return (String) v;
        }

        void numbers(String key, int n, double low, double high) {
            Object v = get(key);
            boolean ok = v instanceof List && ((List<?>) v).size() == n;
            if (ok) for (Object x : (List<?>) v) {
                double d = x instanceof Long ? (double) (Long) x : x instanceof Double ? (Double) x : Double.NaN;
                ok &= Double.isFinite(d) && d >= low && d <= high;
            }
            if (!ok) throw fail(key, "a list of " + n + " finite numbers in [" + low + ", " + high + "]");
        }

        Fields object(String key) {
            return new Fields(get(key), where + "." + key);
        }

        void done() {
            Set<String> unknown = new TreeSet<>(obj.keySet());
            unknown.removeAll(seen);
            if (!unknown.isEmpty()) throw new BundleException(where + " has unknown fields " + unknown);
        }
    }

    /** sdk.format.manifest.Manifest.from_json's checks, in its order; the format version the manifest states. */
    @SuppressWarnings("unchecked")
    static long check(Object manifest) {
        Fields f = new Fields(manifest, "manifest");
        f.stringChoice("format", List.of(FORMAT));
        long version = f.integer("version", OLDEST, NEWEST);
        Fields arch = f.object("architecture");
        String stem = arch.stringChoice("stem", List.of("imagenet", "small"));
        double width = arch.floatChoice("width", 1.0, 0.5, 0.25, 0.125);
        int numClasses = (int) arch.integer("num_classes", 2, 100_000);
        long inputSize = arch.integer("input_size", 8, 1024);
        arch.done();
        Fields members = f.object("members");
        for (String name : MEMBERS) {
            Fields entry = members.object(name);
            entry.integer("offset", 0, 1L << 62);
            entry.integer("size", 0, 1L << 62);
            entry.string("sha256", 64, SHA256_HEX);
            entry.done();
        }
        members.done();
        Fields pre = f.object("preprocessing");
        pre.integer("input_size", inputSize, inputSize);
        pre.numbers("mean", 3, -10.0, 10.0);
        pre.numbers("std", 3, 1e-3, 10.0);
        pre.stringChoice("resize", List.of("shorter_side_then_center_crop"));
        pre.done();
        f.integer("num_bases", 1, 256);
        Fields mixer = f.object("mixer");
        mixer.integer("embed_dim", 1, 4096);
        mixer.integer("hidden", 1, 4096);
        mixer.integer("layers", 2, 16);
        mixer.intChoice("blocks", 1, 4);
        mixer.done();
        Fields text = f.object("text_encoder");
        Object prompts = text.get("prompts");
        boolean ok = prompts instanceof List && !((List<?>) prompts).isEmpty() && ((List<?>) prompts).size() <= MAX_PROMPTS;
        if (ok) for (Object p : (List<Object>) prompts) {
            ok &= p instanceof String && ((String) p).codePointCount(0, ((String) p).length()) <= MAX_PROMPT_CHARS
                    && ((String) p).split("\\{}", -1).length == 2
                    && ((String) p).chars().filter(ch -> ch == '{' || ch == '}').count() == 2;
        }
        if (!ok) throw new BundleException("manifest.text_encoder.prompts must be 1-" + MAX_PROMPTS + " strings of at most "
                + MAX_PROMPT_CHARS + " characters, each with exactly one '{}' and no other braces");
        text.integer("max_tokens", 8, 512);
        text.done();
        Fields bases = f.object("bases");
        boolean subspace = false;
        Map<String, int[]> shapes = Architecture.parameterShapes(stem, width, numClasses);
        for (Architecture.Layer layer : Architecture.mixedLayers(shapes)) {
            Fields spec = bases.object(layer.name);
            String kind = spec.stringChoice("kind", LAYER_KINDS);
            spec.stringChoice("dtype", FLOAT_DTYPES);
            if (kind.equals("lowrank") || kind.equals("subspace")) spec.integer("rank", 1, Math.min(layer.rows, layer.columns));
            else spec.integer("rank", 0, 0);
            spec.done();
            subspace |= kind.equals("subspace");
        }
        bases.done();
        f.get("provenance");   // its bounds: Bundle.checkProvenance (sdk.format.manifest._provenance)
        f.done();
        if (subspace && version < 4)
            throw new BundleException("manifest: kind 'subspace' needs format version 4, the bundle says " + version);
        return version;
    }
}
