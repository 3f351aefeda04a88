package org.taper.sdk.format;

import org.taper.sdk.fusion.Architecture;
import org.taper.sdk.fusion.Bases;
import org.taper.sdk.media.Preprocessing;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A .taper bundle (format version 3 to 6, docs/bundle-format.md), memory-mapped and validated like
 * sdk/format/bundle.py: magic, version, reserved header bytes, the manifest's SHA-256, the signature of a version-6
 * bundle (Signatures), member offsets and sizes,
 * SHA-256 of every member, tensor dtypes and shapes against the architecture and each layer's storage
 * (Bases). The backbone's weight layout is
 * computed from the architecture (Architecture.backboneLayout), as in sdk/fusion/folding.py.
 */
public final class Bundle {
    static final byte[] MAGIC = "TAPERBDL".getBytes(StandardCharsets.US_ASCII);
    /** Versions read: 3, 4 (3 plus the "subspace" kind), 5 (4 plus concepts) and 6 (5 signed). */
    static final int OLDEST = 3, VERSION = 6, CONCEPTS_SINCE = 5, HEADER = 64, ALIGN = 64;
    static final int MAX_CONCEPTS = 100_000, MAX_CONCEPT_NAMES = 64;
    /** sdk.format.bundle.MAX_CONCEPT_KINDS: the names of kinds below one concept that no class is. */
    static final int MAX_CONCEPT_KINDS = 20_000;
    static final java.util.Set<String> CONCEPT_KEYS = java.util.Set.of("id", "names", "members"),
            CONCEPT_ALL_KEYS = java.util.Set.of("id", "names", "members", "kinds");
    static final long MAX_MANIFEST = 1L << 20;
    static final String[] MEMBERS = {"bases.safetensors", "mixer.safetensors", "class_embeddings.safetensors",
            "classes.json", "backbone.onnx", "text_encoder.onnx", "tokenizer.json", "NOTICE"};

    public final Map<String, Object> manifest;
    public final String stem;
    public final double width;
    public final int numClasses, inputSize, numBases, embedDim, hidden, layers, mixerBlocks, externalSize;
    public final Map<String, int[]> shapes;
    public final List<List<String>> layout;
    public final Bases bases;
    public final Map<String, FloatBuffer> mixer;
    public final FloatBuffer classEmbeddings;
    public final List<String> classIds = new ArrayList<>(), classNames = new ArrayList<>();
    /** Each class's other names and its one-line description ("" if none): classes.json's optional
     * {@code aliases} and {@code description}; without {@code aliases}, a stored name is split as
     * sdk.format.bundle.display_name splits it (older exporters wrote WordNet's synonym list as the name). */
    public final List<List<String>> classAliases = new ArrayList<>();
    public final List<String> classDescriptions = new ArrayList<>();
    /** Each class's path in the hierarchy, root first, ending in its own name (classes.json). */
    public final List<List<String>> classPaths = new ArrayList<>();
    /** Named groups of classes ("insects": indices), as classes.json lists them. */
    public final Map<String, int[]> supercategories = new java.util.LinkedHashMap<>();
    /** The hierarchy's concepts (format 5; empty before) and their unit embeddings [concepts, embedDim]. */
    public final List<Concept> concepts = new ArrayList<>();
    public final FloatBuffer conceptEmbeddings;
    /** The text encoder's prompt templates (each with one "{}") and truncation length. */
    public final List<String> prompts = new ArrayList<>();
    public final int maxTokens;
    public final Preprocessing preprocessing;
    public final Map<String, Integer> backboneOffsets = new HashMap<>();
    /** Who signed the bundle (its signature verified), or null: unsigned (format versions 3 to 5). */
    public final Signatures.Signer signer;
    /** The keys it was opened with (lower-case hex), or null: the policy files read for it follow too. */
    public final java.util.Set<String> trustedKeys;
    private final ByteBuffer data;

    /** sdk.format.manifest's MAX_PROVENANCE_DEPTH, _VALUES and _TEXT. */
    static final int MAX_PROVENANCE_DEPTH = 4, MAX_PROVENANCE_VALUES = 4096, MAX_PROVENANCE_TEXT = 64 * 1024;

    /** sdk.format.manifest._provenance: an object, bounded in depth, values and text, with {@code sdk_version} (a
     * string of at most 40 characters) and {@code licenses} (an object). */
    @SuppressWarnings("unchecked")
    static void checkProvenance(Object value) {
        if (!(value instanceof Map)) throw new BundleException("manifest.provenance must be an object");
        long[] size = jsonSize(value);
        if (size[2] > MAX_PROVENANCE_DEPTH || size[0] > MAX_PROVENANCE_VALUES || size[1] > MAX_PROVENANCE_TEXT)
            throw new BundleException("manifest.provenance is deeper than " + MAX_PROVENANCE_DEPTH + ", or holds more than "
                    + MAX_PROVENANCE_VALUES + " values or " + MAX_PROVENANCE_TEXT + " characters of text");
        Map<String, Object> p = (Map<String, Object>) value;
        Object version = p.get("sdk_version");
        if (!(version instanceof String) || ((String) version).codePointCount(0, ((String) version).length()) > 40)
            throw new BundleException("manifest.provenance.sdk_version must be a string of at most 40 characters");
        if (!(p.get("licenses") instanceof Map)) throw new BundleException("manifest.provenance.licenses must be an object");
    }

    /** sdk.format.manifest.json_size and strict_json.depth of parsed JSON: {values, code points of keys and strings,
     * depth}, iteratively. */
    @SuppressWarnings("unchecked")
    static long[] jsonSize(Object value) {
        long values = 0, text = 0, depth = 0;
        java.util.ArrayDeque<Object[]> stack = new java.util.ArrayDeque<>();
        stack.push(new Object[]{value, 0L});
        while (!stack.isEmpty()) {
            Object[] top = stack.pop();
            Object item = top[0];
            long level = (Long) top[1];
            values++;
            if (item instanceof Map) {
                depth = Math.max(depth, level + 1);
                for (Map.Entry<String, Object> e : ((Map<String, Object>) item).entrySet()) {
                    text += e.getKey().codePointCount(0, e.getKey().length());
                    stack.push(new Object[]{e.getValue(), level + 1});
                }
            } else if (item instanceof List) {
                depth = Math.max(depth, level + 1);
                for (Object child : (List<Object>) item) stack.push(new Object[]{child, level + 1});
            } else if (item instanceof String) {
                text += ((String) item).codePointCount(0, ((String) item).length());
            }
        }
        return new long[]{values, text, depth};
    }

    public static Bundle open(String path) throws IOException {
        return open(path, null);
    }

    /** With trustedKeys (64 hex digits each, the .pub files' content): only a bundle signed by one of them loads. */
    public static Bundle open(String path, java.util.Collection<String> trustedKeys) throws IOException {
        try (RandomAccessFile f = new RandomAccessFile(path, "r"); FileChannel ch = f.getChannel()) {
            MappedByteBuffer map = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size());
            return new Bundle(map, trustedKeys);
        }
    }

    public Bundle(ByteBuffer buffer) {
        this(buffer, null);
    }

    @SuppressWarnings("unchecked")
    public Bundle(ByteBuffer buffer, java.util.Collection<String> trustedKeys) {
        java.util.Set<String> trusted = trustedKeys == null ? null : Signatures.trustedSet(trustedKeys);
        this.trustedKeys = trusted;
        data = buffer.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        long size = data.capacity();
        if (size < HEADER) throw new BundleException(size + " bytes is too short for a bundle");
        byte[] magic = new byte[8];
        bytesAt(data, 0, magic);
        if (!java.util.Arrays.equals(magic, MAGIC)) throw new BundleException("not a TAPER bundle (bad magic)");
        int version = data.getInt(8);
        if (version == 1 || version == 2)
            throw new BundleException("bundle format version " + version + " (taper-sdk 0." + version + ") is no longer read; "
                    + "this reader reads versions " + OLDEST + " to " + VERSION + ": export the run again");
        if (version < OLDEST || version > VERSION)
            throw new BundleException("bundle format version " + version + " is not supported (this reader reads "
                    + OLDEST + " to " + VERSION + ")");
        if (data.getInt(12) != 0 || data.getLong(56) != 0) throw new BundleException("header: reserved bytes are not zero");
        long length = data.getLong(16);
        if (length < 0 || length > MAX_MANIFEST || HEADER + length > size)
            throw new BundleException("manifest length " + length + " does not fit in the file");
        byte[] raw = new byte[(int) length], digest = new byte[32];
        bytesAt(data, HEADER, raw);
        bytesAt(data, 24, digest);
        if (!java.util.Arrays.equals(sha256(ByteBuffer.wrap(raw)), digest))
            throw new BundleException("manifest checksum mismatch (corrupt bundle)");
        Object parsed = Json.parse(raw, "manifest", Json.MANIFEST_DEPTH);
        if (!(parsed instanceof Map)) throw new BundleException("manifest: not a JSON object");
        manifest = (Map<String, Object>) parsed;
        ManifestGrammar.check(manifest);   // sdk/format/manifest.py's grammar: types, ranges, no unknown field
        if (!"taper-bundle".equals(manifest.get("format")) || integer(manifest, "version", OLDEST, VERSION) != version)
            throw new BundleException("manifest: format/version fields wrong");
        Map<String, Object> arch = obj(manifest, "architecture"), mix = obj(manifest, "mixer");
        stem = str(arch, "stem");
        if (!stem.equals("imagenet") && !stem.equals("small")) throw new BundleException("manifest: unknown stem");
        width = num(arch, "width");
        if (width != 1.0 && width != 0.5 && width != 0.25 && width != 0.125) throw new BundleException("manifest: unknown width");
        numClasses = integer(arch, "num_classes", 1, 100_000);
        inputSize = integer(arch, "input_size", 8, 4096);
        numBases = integer(manifest, "num_bases", 1, 1024);
        embedDim = integer(mix, "embed_dim", 1, 100_000);
        hidden = integer(mix, "hidden", 1, 100_000);
        layers = integer(mix, "layers", 2, 16);
        mixerBlocks = integer(mix, "blocks", 1, 4);
        if (mixerBlocks != 1 && mixerBlocks != 4) throw new BundleException("manifest: mixer blocks must be 1 or 4");
        Map<String, Object> text = obj(manifest, "text_encoder");
        maxTokens = integer(text, "max_tokens", 8, 512);
        if (!(text.get("prompts") instanceof List) || ((List<Object>) text.get("prompts")).isEmpty()
                || ((List<Object>) text.get("prompts")).size() > 64)
            throw new BundleException("manifest: 'prompts' must list 1-64 templates");
        for (Object p : (List<Object>) text.get("prompts")) {
            if (!(p instanceof String) || ((String) p).codePointCount(0, ((String) p).length()) > 200 || ((String) p).split("\\{}", -1).length != 2
                    || ((String) p).chars().filter(ch -> ch == '{' || ch == '}').count() != 2)
                throw new BundleException("manifest: a prompt must have at most 200 characters, one '{}' and no other braces");
            prompts.add((String) p);
        }
        preprocessing = Preprocessing.fromManifest(obj(manifest, "preprocessing"), integer(arch, "input_size", 8, 4096));
        checkProvenance(manifest.get("provenance"));
        if (version >= Signatures.SIGNED_SINCE && size < HEADER + length + Signatures.TRAILER)
            throw new BundleException("a " + size + "-byte file is too short for its manifest and signature trailer");
        signer = version >= Signatures.SIGNED_SINCE ? Signatures.verify(data) : null;
        if (trusted != null) Signatures.checkTrusted(signer, trusted);
        checkMembers(obj(manifest, "members"), HEADER + length, version >= Signatures.SIGNED_SINCE ? size - Signatures.TRAILER : size);
        shapes = Architecture.parameterShapes(stem, width, numClasses);
        layout = Architecture.blockLayout(shapes);
        externalSize = Architecture.backboneLayout(shapes, backboneOffsets);
        bases = new Bases(tensors("bases.safetensors"), obj(manifest, "bases"), shapes, numBases, version);
        Map<String, Bases.Tensor> mixerTensors = tensors("mixer.safetensors");
        checkMixerShapes(mixerTensors);
        mixer = floats(mixerTensors);
        readClasses(version);
        Map<String, Bases.Tensor> embeddingTensors = tensors("class_embeddings.safetensors");
        Map<String, FloatBuffer> embedded = floats(embeddingTensors);
        java.util.Set<String> names = version >= CONCEPTS_SINCE ? java.util.Set.of("text", "concepts") : java.util.Set.of("text");
        if (!embedded.keySet().equals(names))
            throw new BundleException("member class_embeddings.safetensors: tensors must be exactly " + new java.util.TreeSet<>(names));
        // Shapes, not only sizes, as sdk/format/bundle.py checks them: a table stored transposed ([384, 200]) holds as
        // many floats as the right one and would be read as other classes' vectors.
        expectShape(embeddingTensors.get("text"), new long[]{numClasses, embedDim}, "class_embeddings.safetensors:text");
        if (version >= CONCEPTS_SINCE)
            expectShape(embeddingTensors.get("concepts"), new long[]{concepts.size(), embedDim}, "class_embeddings.safetensors:concepts");
        classEmbeddings = embedded.get("text");
        expect(classEmbeddings, (long) numClasses * embedDim, "class embeddings");
        conceptEmbeddings = embedded.containsKey("concepts") ? embedded.get("concepts") : FloatBuffer.allocate(0);
        expect(conceptEmbeddings, (long) concepts.size() * embedDim, "concept embeddings");
        // As sdk.Bundle.verify_finite: finite weights, non-negative running variances (no checksum catches them
        // in a re-signed bundle, and one negative variance makes every output NaN).
        for (Map.Entry<String, FloatBuffer> e : mixer.entrySet()) {
            finite(e.getValue(), "mixer.safetensors:" + e.getKey());
            if (e.getKey().endsWith("running_var"))
                for (int i = 0; i < e.getValue().limit(); i++)
                    if (e.getValue().get(i) < 0) throw new BundleException("mixer.safetensors:" + e.getKey() + " holds negative running variances");
        }
        finite(classEmbeddings, "class_embeddings.safetensors:text");
        finite(conceptEmbeddings, "class_embeddings.safetensors:concepts");
        unitRows(classEmbeddings, embedDim, "class_embeddings.safetensors:text");
        unitRows(conceptEmbeddings, embedDim, "class_embeddings.safetensors:concepts");
    }

    /** sdk.format.bundle.EMBEDDING_NORM_TOLERANCE: text embeddings are unit vectors as written. */
    static final double EMBEDDING_NORM_TOLERANCE = 1e-3;

    private static void unitRows(FloatBuffer values, int dim, String name) {
        for (int row = 0; row + dim <= values.limit(); row += dim) {
            double sum = 0;
            for (int d = 0; d < dim; d++) sum += (double) values.get(row + d) * values.get(row + d);
            if (Math.abs(Math.sqrt(sum) - 1) > EMBEDDING_NORM_TOLERANCE)
                throw new BundleException(name + " rows must be unit vectors");
        }
    }

    private static void finite(FloatBuffer values, String name) {
        for (int i = 0; i < values.limit(); i++)
            if (!Float.isFinite(values.get(i))) throw new BundleException(name + " holds NaN or infinite values");
    }

    /** classes.json, checked as sdk/format/bundle.py checks it. */
    @SuppressWarnings("unchecked")
    private void readClasses(int version) {
        String what = "member classes.json: ";
        if (memberBuffer("classes.json").remaining() > (64 << 20)) throw new BundleException(what + "larger than 64 MiB");
        Object parsed = Json.parse(memberBytes("classes.json"), "member classes.json", Json.MANIFEST_DEPTH);
        java.util.Set<String> keys = version >= CONCEPTS_SINCE ? java.util.Set.of("classes", "supercategories", "concepts")
                : java.util.Set.of("classes", "supercategories");
        if (!(parsed instanceof Map) || !((Map<String, Object>) parsed).keySet().equals(keys))
            throw new BundleException(what + "must be an object with exactly " + new java.util.TreeSet<>(keys)
                    + " (format version " + version + ")");
        Object classes = ((Map<String, Object>) parsed).get("classes"), groups = ((Map<String, Object>) parsed).get("supercategories");
        if (!(classes instanceof List) || ((List<Object>) classes).size() != numClasses)
            throw new BundleException(what + "'classes' must list " + numClasses + " classes");
        for (Object c : (List<Object>) classes) {
            Map<String, Object> m = c instanceof Map ? (Map<String, Object>) c : Map.of();
            Object path = m.get("path");
            Object aliases = m.get("aliases");
            boolean ok = m.keySet().containsAll(CLASS_KEYS) && CLASS_ALL_KEYS.containsAll(m.keySet())
                    && shortText(m.get("id"))
                    && shortText(m.get("name")) && path instanceof List && !((List<Object>) path).isEmpty()
                    && ((List<Object>) path).size() <= 64 && ((List<Object>) path).stream().allMatch(Bundle::shortText)
                    && (!m.containsKey("aliases") || (aliases instanceof List && ((List<Object>) aliases).size() <= MAX_ALIASES
                        && ((List<Object>) aliases).stream().allMatch(Bundle::shortText)))
                    && (!m.containsKey("description") || shortText(m.get("description")));
            if (!ok) throw new BundleException(what + "class " + classIds.size() + " must be {id, name, path} and "
                    + "optionally aliases and a description, with short names");
            classIds.add((String) m.get("id"));
            if (m.containsKey("aliases")) {
                classNames.add((String) m.get("name"));
                List<String> others = new ArrayList<>();
                for (Object a : (List<Object>) aliases) others.add((String) a);
                classAliases.add(others);
            } else {
                List<String> parts = displayName((String) m.get("name"));
                classNames.add(parts.get(0));
                classAliases.add(new ArrayList<>(parts.subList(1, parts.size())));
            }
            classDescriptions.add(m.containsKey("description") ? (String) m.get("description") : "");
            List<String> steps = new ArrayList<>();
            for (Object step : (List<Object>) path) steps.add((String) step);
            classPaths.add(steps);
        }
        if (new java.util.HashSet<>(classIds).size() != numClasses) throw new BundleException(what + "class ids are not unique");
        if (!(groups instanceof Map)) throw new BundleException(what + "'supercategories' must be an object");
        for (Map.Entry<String, Object> e : ((Map<String, Object>) groups).entrySet()) {
            Object members = e.getValue();
            if (!shortText(e.getKey()) || !(members instanceof List) || ((List<Object>) members).isEmpty()
                    || ((List<Object>) members).size() > numClasses)
                throw new BundleException(what + "'supercategories' must map names to non-empty lists of class indices");
            int[] indices = new int[((List<Object>) members).size()];
            for (int k = 0; k < indices.length; k++) {
                Object i = ((List<Object>) members).get(k);
                if (!(i instanceof Long) || (Long) i < 0 || (Long) i >= numClasses)
                    throw new BundleException(what + "'supercategories' must map names to non-empty lists of class indices");
                indices[k] = (int) (long) (Long) i;
            }
            supercategories.put(e.getKey(), indices);
        }
        if (version >= CONCEPTS_SINCE) readConcepts(((Map<String, Object>) parsed).get("concepts"), what);
    }

    /** classes.json's concepts, checked as sdk/format/bundle.py's _concepts checks them. */
    @SuppressWarnings("unchecked")
    private void readConcepts(Object rows, String what) {
        if (!(rows instanceof List) || ((List<Object>) rows).isEmpty() || ((List<Object>) rows).size() > MAX_CONCEPTS)
            throw new BundleException(what + "'concepts' must list 1 to " + MAX_CONCEPTS + " concepts");
        java.util.Set<String> ids = new java.util.HashSet<>();
        for (Object row : (List<Object>) rows) {
            Map<String, Object> m = row instanceof Map ? (Map<String, Object>) row : Map.of();
            Object names = m.get("names"), members = m.get("members"), kinds = m.get("kinds");
            boolean ok = m.keySet().containsAll(CONCEPT_KEYS) && CONCEPT_ALL_KEYS.containsAll(m.keySet()) && shortText(m.get("id"))
                    && names instanceof List && !((List<Object>) names).isEmpty() && ((List<Object>) names).size() <= MAX_CONCEPT_NAMES
                    && ((List<Object>) names).stream().allMatch(Bundle::shortText)
                    && (!m.containsKey("kinds") || kinds instanceof List && !((List<Object>) kinds).isEmpty()
                        && ((List<Object>) kinds).size() <= MAX_CONCEPT_KINDS && ((List<Object>) kinds).stream().allMatch(Bundle::shortText))
                    && members instanceof List && ((List<Object>) members).size() >= 2 && ((List<Object>) members).size() <= numClasses;
            int[] indices = ok ? new int[((List<Object>) members).size()] : new int[0];
            for (int k = 0; ok && k < indices.length; k++) {
                Object i = ((List<Object>) members).get(k);
                ok = i instanceof Long && (Long) i >= 0 && (Long) i < numClasses && (k == 0 || (Long) i > indices[k - 1]);
                if (ok) indices[k] = (int) (long) (Long) i;
            }
            if (!ok) throw new BundleException(what + "concept " + concepts.size() + " must be {id, names, members} and "
                    + "optionally kinds: an id, 1-" + MAX_CONCEPT_NAMES + " short names, 2-" + numClasses
                    + " increasing class indices and 1-" + MAX_CONCEPT_KINDS + " kind names");
            List<String> list = new ArrayList<>(), below = new ArrayList<>();
            for (Object n : (List<Object>) names) list.add((String) n);
            if (m.containsKey("kinds")) for (Object n : (List<Object>) kinds) below.add((String) n);
            if (!ids.add((String) m.get("id"))) throw new BundleException(what + "concept ids are not unique");
            concepts.add(new Concept((String) m.get("id"), List.copyOf(list), indices, List.copyOf(below)));
        }
    }

    static final java.util.Set<String> CLASS_KEYS = java.util.Set.of("id", "name", "path"),
            CLASS_ALL_KEYS = java.util.Set.of("id", "name", "path", "aliases", "description");
    static final int MAX_ALIASES = 64;

    /** sdk.format.bundle.display_name: [display name, aliases...] of a name stored without aliases, split at commas,
     * ASCII spaces trimmed, empty parts dropped; [stored] if every part is empty. */
    static List<String> displayName(String stored) {
        List<String> parts = new ArrayList<>();
        for (String part : stored.split(",", -1)) {
            int a = 0, b = part.length();
            while (a < b && part.charAt(a) == ' ') a++;
            while (b > a && part.charAt(b - 1) == ' ') b--;
            if (a < b) parts.add(part.substring(a, b));
        }
        if (parts.isEmpty()) parts.add(stored);
        return parts;
    }

    private static boolean shortText(Object o) {
        return o instanceof String && !((String) o).isEmpty() && ((String) o).codePointCount(0, ((String) o).length()) <= 1000;
    }

    /** A copy of a member's bytes (checked against its SHA-256 when the bundle was opened). */
    public byte[] memberBytes(String name) {
        ByteBuffer b = memberBuffer(name);
        byte[] raw = new byte[b.remaining()];
        b.get(raw);
        return raw;
    }

    @SuppressWarnings("unchecked")
    private void checkMembers(Map<String, Object> members, long start, long size) {
        if (members.size() != MEMBERS.length) throw new BundleException("manifest: wrong member list");
        List<long[]> spans = new ArrayList<>();
        for (String name : MEMBERS) {
            if (!(members.get(name) instanceof Map)) throw new BundleException("manifest: member " + name + " missing");
            Map<String, Object> e = (Map<String, Object>) members.get(name);
            long off = integer(e, "offset", start, size), len = integer(e, "size", 0, size);
            if (off + len > size || off % ALIGN != 0) throw new BundleException("member " + name + " outside the file");
            spans.add(new long[]{off, off + len});
            byte[] digest = sha256(slice(off, len));
            if (!hex(digest).equals(str(e, "sha256"))) throw new BundleException("member " + name + ": checksum mismatch");
        }
        spans.sort((a, b) -> Long.compare(a[0], b[0]));
        for (int k = 1; k < spans.size(); k++)
            if (spans.get(k)[0] < spans.get(k - 1)[1]) throw new BundleException("members overlap");
    }

    @SuppressWarnings("unchecked")
    private Map<String, Object> member(String name) {
        return (Map<String, Object>) obj(manifest, "members").get(name);
    }

    ByteBuffer memberBuffer(String name) {
        Map<String, Object> e = member(name);
        return slice(((Number) e.get("offset")).longValue(), ((Number) e.get("size")).longValue());
    }

    private ByteBuffer slice(long off, long len) {
        return slice(data, (int) off, (int) len).order(ByteOrder.LITTLE_ENDIAN);
    }

    /** The member's tensors as float32 views; BundleException for any other dtype. */
    /** sdk.fusion.mixer.tensor_shapes: exactly the mixer's tensors, each of its shape, for the manifest's embed_dim,
     * hidden, layers, blocks and num_bases (sdk.format.bundle checks the same). */
    private void checkMixerShapes(Map<String, Bases.Tensor> tensors) {
        Map<String, long[]> expected = new HashMap<>();
        long in = embedDim;
        for (int l = 0; l < layers - 1; l++) {
            expected.put("body." + 3 * l + ".weight", new long[]{hidden, in});
            expected.put("body." + 3 * l + ".bias", new long[]{hidden});
            for (String part : new String[]{"weight", "bias", "running_mean", "running_var"})
                expected.put("body." + (3 * l + 1) + "." + part, new long[]{hidden});
            in = hidden;
        }
        expected.put("head.weight", new long[]{(long) mixerBlocks * numBases, in});
        expected.put("head.bias", new long[]{(long) mixerBlocks * numBases});
        if (!tensors.keySet().equals(expected.keySet()))
            throw new BundleException("member mixer.safetensors: tensors must be exactly " + new java.util.TreeSet<>(expected.keySet()));
        for (Map.Entry<String, long[]> e : expected.entrySet())
            if (!java.util.Arrays.equals(tensors.get(e.getKey()).shape, e.getValue()))
                throw new BundleException("member mixer.safetensors: " + e.getKey() + " has shape "
                        + java.util.Arrays.toString(tensors.get(e.getKey()).shape) + ", expected " + java.util.Arrays.toString(e.getValue()));
    }

    private static Map<String, FloatBuffer> floats(Map<String, Bases.Tensor> tensors) {
        Map<String, FloatBuffer> out = new HashMap<>();
        for (Map.Entry<String, Bases.Tensor> e : tensors.entrySet()) {
            if (!e.getValue().dtype.equals("F32")) throw new BundleException("tensor " + e.getKey() + ": not float32");
            out.put(e.getKey(), e.getValue().data.asFloatBuffer());
        }
        return out;
    }

    /** Tensors (F32, F16 or I8) of a safetensors member, as little-endian views (no copies). */
    @SuppressWarnings("unchecked")
    private Map<String, Bases.Tensor> tensors(String name) {
        ByteBuffer b = memberBuffer(name);
        if (b.remaining() < 8) throw new BundleException("member " + name + ": too short");
        long n = b.getLong(0);
        if (n < 0 || 8 + n > b.remaining()) throw new BundleException("member " + name + ": bad header length");
        byte[] raw = new byte[(int) n];
        bytesAt(b, 8, raw);
        Object parsed = Json.parse(raw, "member " + name + ": safetensors header", Json.HEADER_DEPTH);
        if (!(parsed instanceof Map)) throw new BundleException("member " + name + ": header is not a JSON object");
        Map<String, Object> header = (Map<String, Object>) parsed;
        Object metadata = header.get("__metadata__");
        if (metadata != null && !(metadata instanceof Map && ((Map<String, Object>) metadata).values().stream().allMatch(v -> v instanceof String)))
            throw new BundleException("member " + name + ": __metadata__ must map strings to strings");
        Map<String, Bases.Tensor> out = new HashMap<>();
        int dataStart = (int) (8 + n);
        long dataSize = b.remaining() - dataStart;
        List<long[]> spans = new ArrayList<>();
        for (Map.Entry<String, Object> e : header.entrySet()) {
            if (e.getKey().equals("__metadata__")) continue;
            String what = "member " + name + ": tensor " + e.getKey();
            // As sdk/format/tensorfile.py: exactly {dtype, shape, data_offsets}, JSON integers, no overflow, no overlap.
            if (!(e.getValue() instanceof Map) || !((Map<String, Object>) e.getValue()).keySet().equals(java.util.Set.of("dtype", "shape", "data_offsets")))
                throw new BundleException(what + ": entry must have exactly dtype, shape, data_offsets");
            Map<String, Object> info = (Map<String, Object>) e.getValue();
            Object dtype = info.get("dtype");
            int item = "F32".equals(dtype) ? 4 : "F16".equals(dtype) ? 2 : "I8".equals(dtype) ? 1 : 0;
            if (item == 0) throw new BundleException(what + " of unknown dtype");
            if (!(info.get("data_offsets") instanceof List) || !(info.get("shape") instanceof List))
                throw new BundleException(what + ": bad shape or data_offsets");
            List<Object> off = (List<Object>) info.get("data_offsets"), dims = (List<Object>) info.get("shape");
            if (off.size() != 2 || !(off.get(0) instanceof Long) || !(off.get(1) instanceof Long))
                throw new BundleException(what + ": bad data_offsets");
            long begin = (Long) off.get(0), end = (Long) off.get(1);
            if (begin < 0 || end < begin || end > dataSize) throw new BundleException(what + " outside the member");
            long[] shape = new long[dims.size()];
            long count = 1;
            try {
                for (int i = 0; i < shape.length; i++) {
                    if (!(dims.get(i) instanceof Long)) throw new BundleException(what + ": bad shape");
                    shape[i] = (Long) dims.get(i);
                    if (shape[i] < 0 || shape[i] >= (1L << 40)) throw new BundleException(what + ": bad shape");
                    count = Math.multiplyExact(count, shape[i]);
                }
                count = Math.multiplyExact(count, (long) item);
            } catch (ArithmeticException overflow) {
                throw new BundleException(what + ": size does not match its shape");
            }
            if (count != end - begin) throw new BundleException(what + ": size does not match its shape");
            spans.add(new long[] {begin, end});
            out.put(e.getKey(), new Bases.Tensor((String) dtype, shape,
                    slice(b, dataStart + (int) begin, (int) (end - begin)).order(ByteOrder.LITTLE_ENDIAN)));
        }
        spans.sort((x, y) -> x[0] != y[0] ? Long.compare(x[0], y[0]) : Long.compare(x[1], y[1]));
        for (int i = 1; i < spans.size(); i++)
            if (spans.get(i)[0] < spans.get(i - 1)[1]) throw new BundleException("member " + name + ": tensor data ranges overlap");
        return out;
    }

    /**
     * Bytes [offset, offset + length) of {@code b} as a buffer of their own. ByteBuffer.slice(int, int) is
     * Java 13 and Android API 34; the calls go through Buffer because its covariant overrides (Java 9) are
     * missing on older Android runtimes (NoSuchMethodError there).
     */
    /** {@code out.length} bytes of {@code b} from {@code offset} (ByteBuffer.get(int, byte[]) is Android API 35). */
    public static void bytesAt(ByteBuffer b, int offset, byte[] out) {
        slice(b, offset, out.length).get(out);
    }

    public static ByteBuffer slice(ByteBuffer b, int offset, int length) {
        ByteBuffer d = b.duplicate();
        ((java.nio.Buffer) d).clear();
        ((java.nio.Buffer) d).position(offset);
        ((java.nio.Buffer) d).limit(offset + length);
        return d.slice();
    }

    static void expectShape(Bases.Tensor t, long[] shape, String what) {
        if (!java.util.Arrays.equals(t.shape, shape))
            throw new BundleException(what + " has shape " + java.util.Arrays.toString(t.shape) + ", expected "
                    + java.util.Arrays.toString(shape));
    }

    static void expect(FloatBuffer t, long count, String what) {
        if (t == null || t.capacity() != count) throw new BundleException(what + ": missing or wrong size");
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> obj(Map<String, Object> m, String key) {
        Object v = m.get(key);
        if (!(v instanceof Map)) throw new BundleException("manifest: '" + key + "' must be an object");
        return (Map<String, Object>) v;
    }

    public static String str(Map<String, Object> m, String key) {
        Object v = m.get(key);
        if (!(v instanceof String)) throw new BundleException("manifest: '" + key + "' must be a string");
        return (String) v;
    }

    static double num(Map<String, Object> m, String key) {
        Object v = m.get(key);
        if (!(v instanceof Number)) throw new BundleException("manifest: '" + key + "' must be a number");
        return ((Number) v).doubleValue();
    }

    public static int integer(Map<String, Object> m, String key, long low, long high) {
        Object v = m.get(key);
        if (!(v instanceof Long) || (Long) v < low || (Long) v > high)
            throw new BundleException("manifest: '" + key + "' must be an integer in [" + low + ", " + high + "]");
        return (int) (long) (Long) v;
    }

    public static byte[] sha256(ByteBuffer b) {
        try {
            MessageDigest md = MessageDigest.getInstance("SHA-256");
            md.update(b.duplicate());
            return md.digest();
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    public static String hex(byte[] bytes) {
        StringBuilder s = new StringBuilder();
        for (byte x : bytes) s.append(String.format("%02x", x));
        return s.toString();
    }
}
