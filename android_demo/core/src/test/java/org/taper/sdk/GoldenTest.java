package org.taper.sdk;

import org.taper.sdk.media.Preprocessing;
import org.taper.sdk.fusion.Fusion;
import org.taper.sdk.format.Concept;
import org.taper.sdk.format.Proto;
import org.taper.sdk.engines.Int8;
import org.taper.sdk.text.TaskResolver;
import org.taper.sdk.text.TaskOptions;
import org.taper.sdk.text.Compounds;
import org.taper.sdk.text.EnglishWords;
import org.taper.sdk.text.DescriptionException;
import org.taper.sdk.engines.XnnpackProgram;
import org.taper.sdk.format.Bundle;
import org.taper.sdk.format.BundleException;
import org.taper.sdk.format.GraphCheck;
import org.taper.sdk.format.Json;
import org.taper.sdk.format.Signatures;
import org.taper.sdk.text.Tokenizer;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.FloatBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Checks the Java core against golden vectors written by export/golden.py (no JUnit: the test machines
 * reach no Maven repository). Usage: GoldenTest <golden.json> <out dir> [<golden.json> <out dir> ...].
 * Writes, per case, the folded weights and head rows the Java core computed (javaN.folded.f32,
 * javaN.head.f32) for the Python side to run in onnxruntime. Prints, per golden file, "golden FILE: N passed,
 * M failed" after its failures, then the totals. Several files in one JVM share its compiled code: the
 * four storage modes of tests/test_android_core.py took 4 JVMs before, each compiling the same methods.
 */
public final class GoldenTest {
    private static int passed, failed;

    private static void check(boolean ok, String what) {
        if (ok) passed++; else { failed++; System.out.println("FAIL: " + what); }
    }

    private static double maxDiff(float[] a, List<Object> b) {
        double m = a.length == b.size() ? 0 : Double.POSITIVE_INFINITY;
        for (int i = 0; i < Math.min(a.length, b.size()); i++) m = Math.max(m, Math.abs(a[i] - ((Number) b.get(i)).doubleValue()));
        return m;
    }

    @SuppressWarnings("unchecked")
    static float[] floats(Object list) {
        List<Object> l = (List<Object>) list;
        float[] out = new float[l.size()];
        for (int i = 0; i < out.length; i++) out[i] = ((Number) l.get(i)).floatValue();
        return out;
    }

    static float[] readFloats(Path file) throws IOException {
        ByteBuffer raw = ByteBuffer.wrap(Files.readAllBytes(file)).order(ByteOrder.LITTLE_ENDIAN);
        float[] out = new float[raw.remaining() / 4];
        raw.asFloatBuffer().get(out);
        return out;
    }

    static void writeFloats(Path file, float[] values) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(values.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        b.asFloatBuffer().put(values);
        Files.write(file, b.array());
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0 || args.length % 2 != 0) {
            System.err.println("usage: GoldenTest <golden.json> <out dir> [<golden.json> <out dir> ...]");
            System.exit(2);
        }
        int totalPassed = 0, totalFailed = 0;
        for (int i = 0; i < args.length; i += 2) {
            passed = failed = 0;
            try {
                checkGolden(Paths.get(args[i]), Paths.get(args[i + 1]));
            } catch (Exception | AssertionError e) {  // one file's escape fails that file, not the ones after it
                check(false, "an exception escaped: " + e);
                e.printStackTrace(System.out);
            }
            System.out.println("golden " + args[i] + ": " + passed + " passed, " + failed + " failed");
            totalPassed += passed;
            totalFailed += failed;
        }
        System.out.println(totalPassed + " passed, " + totalFailed + " failed");
        System.exit(totalFailed == 0 ? 0 : 1);
    }

    @SuppressWarnings("unchecked")
    private static void checkGolden(Path golden, Path out) throws Exception {
        Path dir = golden.getParent();
        Map<String, Object> spec = (Map<String, Object>) Json.parse(Files.readString(golden), "golden.json");
        String bundlePath = (String) spec.get("bundle");
        Bundle bundle = Bundle.open(bundlePath);
        Map<String, float[]> embeddings = new HashMap<>();
        for (Object o : (List<Object>) spec.get("encoder")) {
            Map<String, Object> r = (Map<String, Object>) o;
            List<Object> ids = (List<Object>) r.get("ids");
            long[] key = new long[ids.size()];
            for (int i = 0; i < key.length; i++) key[i] = ((Number) ids.get(i)).longValue();
            embeddings.put(RecordedEngine.key(key), floats(r.get("embedding")));
        }
        List<float[]> folded = new ArrayList<>(), images = new ArrayList<>();
        List<float[][]> features = new ArrayList<>();
        for (Object o : (List<Object>) spec.get("cases")) {
            Map<String, Object> c = (Map<String, Object>) o;
            folded.add(readFloats(dir.resolve((String) c.get("folded"))));
            List<Object> rows = (List<Object>) c.get("features");
            float[][] f = new float[rows.size()][];
            for (int i = 0; i < f.length; i++) f[i] = floats(rows.get(i));
            features.add(f);
        }
        for (Object o : (List<Object>) spec.get("images")) images.add(readFloats(dir.resolve((String) ((Map<String, Object>) o).get("tensor"))));
        RecordedEngine engine = new RecordedEngine(embeddings, folded, features, images);
        Personalizer p = new Personalizer(bundle, engine);

        checkTokens(p.tokenizer(), (List<Object>) spec.get("tokens"));
        checkDescriptions(p.resolver(), (List<Object>) spec.get("descriptions"));
        checkComposed((Map<String, Object>) spec.get("composed"));
        for (Object o : (List<Object>) spec.getOrDefault("reprs", List.of())) {  // how a resolution quotes names
            Map<String, Object> r = (Map<String, Object>) o;
            String got = TaskResolver.repr((String) r.get("text"));
            check(got.equals(r.get("repr")), "repr " + escape(got) + ", Python " + escape((String) r.get("repr")));
        }
        checkImages(bundle.preprocessing, (List<Object>) spec.get("images"), dir);
        Map<String, Object> companion = (Map<String, Object>) spec.get("companion");
        XnnpackProgram program = companion == null ? null : checkCompanion(bundle, companion, dir);
        int index = 0;
        for (Object o : (List<Object>) spec.get("cases"))
            checkCase(p, (Map<String, Object>) o, dir, out, index++, (List<Object>) spec.get("images"), program);
        checkDamage(bundlePath, p);
        checkHostileTokenizers(bundle);
        if (!spec.containsKey("hostile_bundles")) return;   // written with refusals=False: the vectors only
        for (Object o : (List<Object>) spec.get("hostile_bundles")) {  // classes.json concepts edits (format 5), forgeries
            try { new Bundle(ByteBuffer.wrap(Files.readAllBytes(dir.resolve((String) o)))); check(false, o + " accepted"); }
            catch (BundleException e) { check(true, "hostile concepts"); }
            catch (RuntimeException e) { check(false, o + " raised " + e); }
        }
        // The cases that do not depend on the storage mode, left to the golden set of another mode (reader_cases).
        if (!Boolean.TRUE.equals(spec.get("reader_cases"))) return;
        for (Object o : (List<Object>) spec.get("limit_bundles")) {  // provenance and concept kinds at and past each bound
            Map<String, Object> c = (Map<String, Object>) o;
            String verdict;
            Bundle opened = null;
            try { opened = new Bundle(ByteBuffer.wrap(Files.readAllBytes(dir.resolve((String) c.get("file"))))); verdict = "accepted"; }
            catch (BundleException e) { verdict = "BundleError"; }
            catch (RuntimeException e) { verdict = "untyped " + e; }
            check(verdict.equals(c.get("python")), c.get("file") + ": Java " + verdict + ", Python " + c.get("python"));
            if (opened != null && c.containsKey("kinds")) {   // each concept's kinds, as the Python reader read them
                List<Object> kinds = new ArrayList<>();
                for (Concept concept : opened.concepts) kinds.add(concept.kinds());
                check(kinds.equals(c.get("kinds")), c.get("file") + ": Java kinds differ from Python's");
            }
        }
        // The manifest's grammar and the members' types, formats 5 and 6, loaded as sdk.load loads them (the
        // tokenizer is checked at load): the same verdict as the Python reader's (issue 63).
        for (Object o : (List<Object>) spec.getOrDefault("grammar_bundles", List.of())) {
            Map<String, Object> c = (Map<String, Object>) o;
            String verdict;
            Bundle opened = null;
            try {
                opened = new Bundle(ByteBuffer.wrap(Files.readAllBytes(dir.resolve((String) c.get("file")))));
                new Personalizer(opened, FuzzHarness.NO_ENGINE);
                verdict = "accepted";
            }
            catch (BundleException e) { verdict = "BundleError"; }
            catch (RuntimeException e) { verdict = "untyped " + e; }
            check(verdict.equals(c.get("python")), c.get("file") + ": Java " + verdict + ", Python " + c.get("python"));
            if (verdict.equals("accepted") && c.containsKey("names")) {  // display name, then aliases (issue 60)
                List<Object> names = new ArrayList<>();
                for (int k = 0; k < opened.classNames.size(); k++) {
                    List<Object> row = new ArrayList<>(List.of(opened.classNames.get(k)));
                    row.addAll(opened.classAliases.get(k));
                    names.add(row);
                }
                check(names.equals(c.get("names")), c.get("file") + ": Java names " + names + ", Python " + c.get("names"));
            }
        }
        checkGraphs(bundle, (Map<String, Object>) spec.get("graphs"), dir);
        checkSignatures((Map<String, Object>) spec.get("signatures"), dir, out);
        checkJson((List<Object>) spec.get("json"));
    }

    /** Each signed, damaged or unsigned copy gets the Python reader's verdict with the same trusted keys; then
     * the Java side signs the unsigned bundle with the golden seed: the bytes must be Python's signed bundle. */
    @SuppressWarnings("unchecked")
    private static void checkSignatures(Map<String, Object> signatures, Path dir, Path out) throws Exception {
        checkSignatureVerdicts((List<Object>) signatures.get("cases"), dir, "signature case",
                (data, trusted) -> new Bundle(ByteBuffer.wrap(data), trusted).signer);
        Map<String, Object> job = (Map<String, Object>) signatures.get("sign");
        byte[] signed = signBundle(Files.readAllBytes(dir.resolve((String) job.get("unsigned"))),
                hexBytes((String) job.get("seed")), hexBytes((String) job.get("public_key")));
        Files.write(out.resolve("java_signed.taper"), signed);
        check(java.util.Arrays.equals(signed, Files.readAllBytes(dir.resolve((String) job.get("expected")))),
                "a bundle signed in Java has the bytes of the same bundle signed in Python");
        Bundle b = new Bundle(ByteBuffer.wrap(signed), List.of((String) job.get("public_key")));
        check(b.signer != null && b.signer.publicKey.equals(job.get("public_key")), "Java verifies its own signature");
    }

    /** The one JSON grammar: each document gets the Python parser's verdict at the same depth bound. */
    @SuppressWarnings("unchecked")
    private static void checkJson(List<Object> cases) {
        for (Object o : cases) {
            Map<String, Object> c = (Map<String, Object>) o;
            byte[] raw = hexBytes((String) c.get("hex"));
            String verdict;
            try {
                Json.parse(raw, "doc", ((Number) c.get("max_depth")).intValue());
                verdict = "ok";
            } catch (BundleException e) {
                verdict = "error";
            } catch (RuntimeException e) {
                verdict = "untyped " + e;
            }
            check(verdict.equals(c.get("python")), "JSON " + escape(new String(raw, StandardCharsets.UTF_8))
                    + " at depth " + c.get("max_depth") + ": Java " + verdict + ", Python " + c.get("python"));
        }
    }

    /** Sign an SDK-written version-5 bundle as `python -m export sign` does: the manifest's version becomes 6
     * (same length, so no member moves), the header takes the new version and digest, and the trailer signs it. */
    static byte[] signBundle(byte[] unsigned, byte[] seed, byte[] publicKey) throws Exception {
        ByteBuffer in = ByteBuffer.wrap(unsigned).order(ByteOrder.LITTLE_ENDIAN);
        int length = (int) in.getLong(16);
        String manifest = new String(unsigned, 64, length, StandardCharsets.UTF_8);
        String from = "{\"format\":\"taper-bundle\",\"version\":5,", to = "{\"format\":\"taper-bundle\",\"version\":6,";
        if (in.getInt(8) != 5 || !manifest.startsWith(from)) throw new IllegalArgumentException("not an SDK-written version-5 bundle");
        byte[] raw = (to + manifest.substring(from.length())).getBytes(StandardCharsets.UTF_8);
        byte[] out = java.util.Arrays.copyOf(unsigned, unsigned.length + Signatures.TRAILER);
        System.arraycopy(raw, 0, out, 64, raw.length);
        ByteBuffer o = ByteBuffer.wrap(out).order(ByteOrder.LITTLE_ENDIAN);
        o.putInt(8, 6);
        System.arraycopy(Bundle.sha256(ByteBuffer.wrap(raw)), 0, out, 24, 32);
        byte[] signature = ed25519(seed, Signatures.DOMAIN, out, 64);
        return withTrailer(out, unsigned.length, publicKey, signature);
    }

    /** `out` with the signature trailer (sdk/format/signing.py's layout) written at `t`, its last 128 bytes. */
    private static byte[] withTrailer(byte[] out, int t, byte[] publicKey, byte[] signature) {
        System.arraycopy(Signatures.MAGIC, 0, out, t, 8);
        ByteBuffer.wrap(out).order(ByteOrder.LITTLE_ENDIAN).putInt(t + 8, Signatures.SCHEME_ED25519);
        System.arraycopy(publicKey, 0, out, t + 16, 32);
        System.arraycopy(signature, 0, out, t + 48, 64);
        return out;
    }

    private static byte[] hexBytes(String hex) {
        byte[] out = new byte[hex.length() / 2];
        for (int i = 0; i < out.length; i++) out[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        return out;
    }

    @SuppressWarnings("unchecked")
    private static void checkTokens(Tokenizer tokenizer, List<Object> cases) {
        int wrong = 0;
        for (Object o : cases) {
            Map<String, Object> c = (Map<String, Object>) o;
            String text = (String) c.get("text");
            List<Object> want = (List<Object>) c.get("ids");
            int[] got = tokenizer.encode(text);
            boolean same = got.length == want.size();
            for (int i = 0; same && i < got.length; i++) same = got[i] == ((Number) want.get(i)).intValue();
            if (!same && wrong++ < 5) System.out.println("tokens of " + escape(text) + ": " + java.util.Arrays.toString(got) + " != " + want);
        }
        check(wrong == 0, wrong + " of " + cases.size() + " texts tokenized differently");
    }

    private static String escape(String s) {
        StringBuilder b = new StringBuilder("\"");
        s.codePoints().forEach(cp -> { if (cp < 128 && cp >= 32) b.appendCodePoint(cp); else b.append(String.format("\\u%04x", cp)); });
        return b.append('"').toString();
    }

    /** Thrown by the composed table's text encoder: the description was not resolved by name. */
    private static final class NeedsEncoder extends RuntimeException {
        private static final long serialVersionUID = 1L;
        NeedsEncoder() { super("needs the text encoder"); }
    }

    /** Rule 3b on export.golden's hand-made table: the same classes and explanation, or both need the encoder. */
    @SuppressWarnings("unchecked")
    private static void checkComposed(Map<String, Object> composed) {
        List<String> names = new ArrayList<>(), ids = new ArrayList<>();
        List<List<String>> paths = new ArrayList<>();
        for (Object o : (List<Object>) composed.get("classes")) {
            ids.add("n" + names.size());
            names.add((String) o);
            paths.add(List.of("entity", (String) o));
        }
        List<Concept> concepts = new ArrayList<>();
        for (Object o : (List<Object>) composed.get("concepts")) {
            List<Object> pair = (List<Object>) o;
            int[] members = ((List<Object>) pair.get(1)).stream().mapToInt(m -> ((Number) m).intValue()).toArray();
            concepts.add(new Concept((String) pair.get(2), (List<String>) pair.get(0), members,   // "wordnet/..": derived
                    (List<String>) pair.get(3)));
        }
        int dim = names.size() + concepts.size();
        FloatBuffer eye = FloatBuffer.allocate(dim * dim);
        for (int i = 0; i < dim; i++) eye.put(i * dim + i, 1f);
        FloatBuffer classRows = eye.duplicate().position(0).limit(names.size() * dim).slice();
        FloatBuffer conceptRows = eye.duplicate().position(names.size() * dim).slice();
        List<List<String>> aliases = new ArrayList<>();
        for (Object o : (List<Object>) composed.get("aliases")) aliases.add((List<String>) o);
        check(aliases.size() == names.size(), "composed: one list of aliases per class");
        List<String> glosses = (List<String>) composed.get("glosses");
        check(glosses.size() == names.size(), "composed: one description per class");
        TaskResolver resolver = new TaskResolver(ids, names, aliases, glosses, paths, Map.of(), classRows, dim,
                text -> { throw new NeedsEncoder(); }, concepts, conceptRows, word -> false, Compounds.shipped(), EnglishWords::shipped);
        checkDescribed(resolver, composed);
        for (Object o : (List<Object>) composed.get("descriptions")) {
            Map<String, Object> c = (Map<String, Object>) o;
            String d = (String) c.get("description");
            TaskResolver.Task task = null;
            String error = null;
            try { task = resolver.resolve(d, new TaskOptions(20, 1, 0.08, 0.13)); }
            catch (NeedsEncoder e) { /* as Python when c has "encoder" */ }
            catch (DescriptionException e) { error = e.getMessage(); }
            if (c.containsKey("encoder")) { check(task == null && error == null, "composed " + escape(d) + ": Java resolved it by name"); continue; }
            if (c.containsKey("error")) {
                check(error != null, "composed " + escape(d) + ": Python raised DescriptionError (" + c.get("error")
                        + "), Java gave " + (task == null ? "nothing" : java.util.Arrays.toString(task.classes)));
                continue;
            }
            List<Object> want = (List<Object>) c.get("classes");
            boolean same = task != null && task.classes.length == want.size() && task.how.equals(c.get("how"));
            for (int i = 0; same && i < want.size(); i++) same = task.classes[i] == ((Number) want.get(i)).intValue();
            check(same, "composed " + escape(d) + ": Java " + (task == null ? "needed the encoder"
                    : java.util.Arrays.toString(task.classes) + " " + task.how) + ", Python " + want + " " + c.get("how"));
        }
    }

    /** Rule 6 on the same table: the candidates kept and how it is said, or neither; and texts cut into the same stems. */
    @SuppressWarnings("unchecked")
    private static void checkDescribed(TaskResolver resolver, Map<String, Object> composed) {
        List<Object> cases = (List<Object>) composed.get("described");
        check(!cases.isEmpty(), "composed: no rule 6 cases");
        for (Object o : cases) {
            Map<String, Object> c = (Map<String, Object>) o;
            String key = (String) c.get("key");
            List<Integer> candidates = new ArrayList<>();
            for (Object i : (List<Object>) c.get("candidates")) candidates.add(((Number) i).intValue());
            String negated = (String) c.getOrDefault("negated", "");   // rule 6b
            TaskResolver.Narrowed got = resolver.narrowed(key, candidates, negated);
            if (!c.containsKey("kept")) {
                check(got == null, "described " + escape(key) + ": Python kept all, Java " + got);
                continue;
            }
            List<Integer> want = new ArrayList<>();
            for (Object i : (List<Object>) c.get("kept")) want.add(((Number) i).intValue());
            check(got != null && got.kept().equals(want) && got.said().equals(c.get("said")), "described " + escape(key)
                    + ": Java " + got + ", Python " + want + " " + c.get("said"));
        }
        List<Object> negations = (List<Object>) composed.get("negations");
        check(negations != null && !negations.isEmpty(), "composed: no rule 6b cuts");
        for (Object o : negations) {   // rule 6b: the same cut into the rest and the negated part, or none
            Map<String, Object> c = (Map<String, Object>) o;
            String[] got = org.taper.sdk.text.Described.negation((String) c.get("text"));
            Object want = c.get("split");
            check(want == null ? got == null : got != null && List.of(got).equals(want), "negation "
                    + escape((String) c.get("text")) + ": Java " + (got == null ? null : List.of(got)) + ", Python " + want);
        }
        for (Object o : (List<Object>) composed.get("affirmed")) {   // a class's description without what it lacks
            Map<String, Object> c = (Map<String, Object>) o;
            String got = org.taper.sdk.text.Described.affirmed((String) c.get("text"));
            check(got.equals(c.get("kept")), "affirmed " + escape((String) c.get("text")) + ": Java " + escape(got)
                    + ", Python " + escape((String) c.get("kept")));
        }
        for (Object o : (List<Object>) composed.get("words")) {
            Map<String, Object> c = (Map<String, Object>) o;
            List<String> got = org.taper.sdk.text.Described.contentStems((String) c.get("text"));
            check(got.equals(c.get("stems")), "words " + escape((String) c.get("text")) + ": Java " + got + ", Python "
                    + c.get("stems"));
        }
    }

    @SuppressWarnings("unchecked")
    private static void checkDescriptions(TaskResolver resolver, List<Object> cases) {
        for (Object o : cases) {
            Map<String, Object> c = (Map<String, Object>) o;
            Map<String, Object> opts = (Map<String, Object>) c.get("options");
            Object d = c.get("description");
            String what = "description " + escape(String.valueOf(d).length() > 60 ? String.valueOf(d).substring(0, 60) : String.valueOf(d)) + " " + opts;
            int[] got = null;
            String error = null;
            try {
                TaskOptions options = TaskOptions.DEFAULT;
                if (opts.containsKey("max_classes")) options = options.withMaxClasses(((Number) opts.get("max_classes")).intValue());
                if (opts.containsKey("min_classes")) options = options.withMinClasses(((Number) opts.get("min_classes")).intValue());
                if (opts.containsKey("margin")) options = options.withMargin(((Number) opts.get("margin")).doubleValue());
                if (opts.containsKey("min_contrast")) options = options.withMinContrast(((Number) opts.get("min_contrast")).doubleValue());
                if (opts.containsKey("missing")) options = options.withMissing((String) opts.get("missing"));
                got = (d instanceof String ? resolver.resolve((String) d, options) : resolver.resolve((List<String>) d, options)).classes;
            } catch (DescriptionException e) {
                error = e.getMessage();
            }
            if (c.containsKey("error")) {
                check(error != null, what + ": Python raised DescriptionError (" + c.get("error") + "), Java gave "
                        + java.util.Arrays.toString(got));
                continue;
            }
            List<Object> want = (List<Object>) c.get("classes");
            boolean same = got != null && got.length == want.size();
            for (int i = 0; same && i < got.length; i++) same = got[i] == ((Number) want.get(i)).intValue();
            check(same, what + ": Java " + (got == null ? error : java.util.Arrays.toString(got)) + ", Python " + want);
        }
    }

    @SuppressWarnings("unchecked")
    private static void checkImages(Preprocessing preprocessing, List<Object> cases, Path dir) throws IOException {
        for (Object o : cases) {
            Map<String, Object> c = (Map<String, Object>) o;
            int w = ((Number) c.get("width")).intValue(), h = ((Number) c.get("height")).intValue();
            float[] got = preprocessing.apply(Files.readAllBytes(dir.resolve((String) c.get("rgb"))), w, h);
            float[] want = readFloats(dir.resolve((String) c.get("tensor")));
            double d = got.length == want.length ? 0 : Double.POSITIVE_INFINITY;
            for (int i = 0; i < Math.min(got.length, want.length); i++) d = Math.max(d, Math.abs(got[i] - want[i]));
            check(d <= 1e-5, "preprocessing of a " + w + "x" + h + " image (max diff " + d + ")");
        }
    }

    @SuppressWarnings("unchecked")
    private static void checkCase(Personalizer p, Map<String, Object> c, Path dir, Path out, int index,
                                  List<Object> images, XnnpackProgram program) throws IOException {
        String name = (String) c.get("name");
        Object d = c.get("description");
        PersonalizedModel model = d instanceof String ? p.personalize((String) d)
                : p.personalize((List<String>) d, TaskOptions.DEFAULT);
        List<Object> want = (List<Object>) c.get("task");
        int[] task = model.classIndices();
        boolean same = task.length == want.size();
        for (int i = 0; same && i < task.length; i++) same = task[i] == ((Number) want.get(i)).intValue();
        check(same, name + " task classes");
        check(model.resolution().equals(c.get("resolution")), name + " resolution " + model.resolution()
                + ", Python " + c.get("resolution"));
        TaskResolver.Task t = d instanceof String ? p.resolver().resolve((String) d, TaskOptions.DEFAULT)
                : p.resolver().resolve((List<String>) d, TaskOptions.DEFAULT);
        check(maxDiff(t.embedding, (List<Object>) c.get("embedding")) < 1e-5, name + " task embedding");
        float[][] alpha = model.alpha();
        List<Object> wantAlpha = (List<Object>) c.get("alpha");
        double da = 0;
        for (int b = 0; b < 4; b++) da = Math.max(da, maxDiff(alpha[b], (List<Object>) wantAlpha.get(b)));
        check(da < 1e-5, name + " alpha (max diff " + da + ")");
        float[] wantFolded = readFloats(dir.resolve((String) c.get("folded")));
        List<Object> wantHead = (List<Object>) c.get("head");
        // The reference loops, and the fast path on 1 and 3 threads: each against Python.
        Map<String, float[]> fused = p.fusion().fuse(alpha);
        float[] folded = p.fusion().foldedBackbone(fused);
        checkFolded(folded, wantFolded, name + " folded backbone weights, reference");
        int[] headClasses = model.headClasses();   // one class: RestHead's rows, the rest's biases lowered
        checkHead(rowsOf(model, p.fusion().head(fused, headClasses)), wantHead, name + " classifier rows, reference");
        float[] written = folded;   // the fast path's buffer, for the onnxruntime and ExecuTorch cross-checks
        ByteBuffer writtenBuffer = null;
        for (int threads : new int[]{1, 3}) {
            Fusion fast = new Fusion(p.bundle(), threads);
            ByteBuffer buffer = fast.newBackboneBuffer();
            fast.foldInto(alpha, buffer);
            float[] got = new float[folded.length];
            buffer.asFloatBuffer().get(got);
            checkFolded(got, wantFolded, name + " folded backbone weights, fast path on " + threads + " threads");
            checkHead(rowsOf(model, fast.headRows(alpha, headClasses)), wantHead,
                    name + " classifier rows, fast path on " + threads + " threads");
            written = got;
            writtenBuffer = buffer;
        }
        float[][] head = model.headRows();
        checkHead(head, wantHead, name + " classifier rows of the model");
        // Inference through the (replaying) engine: Java's preprocessing, head and softmax on the recorded features.
        List<Object> wantLogits = (List<Object>) c.get("logits");
        double dl = 0;
        boolean top = true;
        for (int i = 0; i < images.size(); i++) {
            Map<String, Object> im = (Map<String, Object>) images.get(i);
            byte[] rgb = Files.readAllBytes(dir.resolve((String) im.get("rgb")));
            int w = ((Number) im.get("width")).intValue(), h = ((Number) im.get("height")).intValue();
            float[] z = model.logits(rgb, w, h);
            float[] wz = floats(wantLogits.get(i));
            dl = Math.max(dl, maxDiff(z, (List<Object>) wantLogits.get(i)));
            int best = 0;
            for (int k = 1; k < wz.length; k++) if (wz[k] > wz[best]) best = k;
            top &= model.predict(rgb, w, h).get(0).label.equals(model.classes().get(best));
        }
        check(dl < 1e-5, name + " logits of " + images.size() + " images (max diff " + dl + ")");
        check(top, name + " top-1 predictions");
        Map<String, Double> timings = model.timings();
        check(timings.keySet().equals(java.util.Set.of("encode", "resolve", "mixer", "fuse_fold", "session", "total")),
                name + " timings " + timings);
        writeFloats(out.resolve("java" + index + ".folded.f32"), written);
        checkInt8(p, c, dir, out, index, alpha, written);
        if (program != null) Files.write(out.resolve("java" + index + ".program.pte"), program.withWeights(writtenBuffer));
        float[] rows = new float[head.length * (head.length == 0 ? 0 : head[0].length)];
        for (int k = 0; k < head.length; k++) System.arraycopy(head[k], 0, rows, k * head[k].length, head[k].length);
        writeFloats(out.resolve("java" + index + ".head.f32"), rows);
        model.close();
    }

    private static float[][] rowsOf(PersonalizedModel model, float[][] rows) {
        return model.rest() ? RestHead.lowerRest(rows) : rows;
    }

    /** The int8 backbone: the bytes Python wrote from Python's folded weights and mixed batch norms, and
     * javaN.int8.onnx from Java's own (the Python test runs it in onnxruntime beside Python's). */
    @SuppressWarnings("unchecked")
    private static void checkInt8(Personalizer p, Map<String, Object> c, Path dir, Path out, int index,
                                  float[][] alpha, float[] written) throws IOException {
        Map<String, Object> spec = (Map<String, Object>) c.get("int8");
        String name = (String) c.get("name");
        Bundle bundle = p.bundle();
        Int8.Plan plan;
        try {
            plan = new Int8.Plan(bundle.memberBytes("backbone.onnx"), bundle);
        } catch (Proto.ProtoException e) {
            check(false, name + " int8 plan: " + e.getMessage());
            return;
        }
        float[] channelData = readFloats(dir.resolve((String) spec.get("channels")));
        Map<String, float[]> pythonChannels = new HashMap<>();
        int at = 0;
        for (Object o : (List<Object>) spec.get("channel_names")) {
            List<Object> entry = (List<Object>) o;
            int n = ((Number) entry.get(1)).intValue();
            pythonChannels.put((String) entry.get(0), java.util.Arrays.copyOfRange(channelData, at, at + n));
            at += n;
        }
        float[] pythonFolded = readFloats(dir.resolve((String) c.get("folded")));
        byte[] want = Files.readAllBytes(dir.resolve((String) spec.get("graph")));
        byte[] same = plan.quantize(pythonFolded, pythonChannels);
        check(java.util.Arrays.equals(same, want), name + " int8 graph from Python's inputs: the same bytes ("
                + same.length + " vs " + want.length + ")");
        // The app's path: personalize(..., "int8") quantizes Java's own fusion and hands the graph to the engine.
        Object d = c.get("description");
        PersonalizedModel model = d instanceof String ? p.personalize((String) d, TaskOptions.DEFAULT, "int8")
                : p.personalize((List<String>) d, TaskOptions.DEFAULT, "int8");
        byte[] graph = ((RecordedEngine) p.engine()).lastQuantized;
        check(java.util.Arrays.equals(graph, plan.quantize(written, p.fusion().mixedChannels(alpha))),
                name + " personalize(int8) hands the engine the graph of its fusion");
        check(model.timings().keySet().equals(java.util.Set.of("encode", "resolve", "mixer", "fuse_fold", "quantize",
                "session", "total")), name + " int8 timings " + model.timings());
        Files.write(out.resolve("java" + index + ".int8.onnx"), graph);
        model.close();
        try {
            p.personalize("rings", TaskOptions.DEFAULT, "int4");
            check(false, "precision int4 accepted");
        } catch (DescriptionException e) {
            check(e.getMessage().contains("precision must be one of"), "precision int4 refused: " + e.getMessage());
        }
    }

    private static void checkFolded(float[] got, float[] want, String what) {
        double d = want.length == got.length ? 0 : Double.POSITIVE_INFINITY;
        for (int i = 0; i < got.length && d < Double.POSITIVE_INFINITY; i++)
            d = Math.max(d, Math.abs(got[i] - want[i]) / Math.max(1.0, Math.abs(want[i])));
        check(d < 1e-4, what + " (max rel diff " + d + ")");
    }

    @SuppressWarnings("unchecked")
    private static void checkHead(float[][] head, List<Object> want, String what) {
        double d = head.length == want.size() ? 0 : Double.POSITIVE_INFINITY;
        for (int k = 0; k < Math.min(head.length, want.size()); k++) d = Math.max(d, maxDiff(head[k], (List<Object>) want.get(k)));
        check(d < 1e-4, what + " (max diff " + d + ")");
    }

    private static void checkDamage(String bundlePath, Personalizer p) throws IOException {
        byte[] bytes = Files.readAllBytes(Paths.get(bundlePath));
        // Magic, version, manifest length, manifest checksum, reserved header bytes, a manifest byte, a member, the end.
        for (int pos : new int[]{0, 9, 20, 30, 60, 100, bytes.length / 2, bytes.length - 1}) {
            byte[] bad = bytes.clone();
            bad[pos] ^= 0x5a;
            try { new Bundle(ByteBuffer.wrap(bad)); check(pos == bytes.length - 1, "flip at " + pos + " accepted"); }
            catch (BundleException e) { check(true, "flip"); }
            catch (RuntimeException e) { check(false, "flip at " + pos + " raised " + e); }
        }
        try { new Bundle(ByteBuffer.wrap(java.util.Arrays.copyOf(bytes, bytes.length / 3))); check(false, "truncation accepted"); }
        catch (BundleException e) { check(true, "truncation"); }
        try { p.personalize(List.of("no such class"), TaskOptions.DEFAULT); check(false, "unknown class accepted"); }
        catch (DescriptionException e) { check(true, "unknown class"); }
        try { new TaskOptions(3, 4, 0.1, 0.1); check(false, "min_classes > max_classes accepted"); }
        catch (DescriptionException e) { check(true, "options"); }
        try { new TaskOptions(3, 2, Double.NaN, 0.1); check(false, "NaN margin accepted"); }
        catch (DescriptionException e) { check(true, "options"); }
        try { p.bundle().preprocessing.apply(new byte[10], 2, 2); check(false, "short RGB buffer accepted"); }
        catch (IllegalArgumentException e) { check(true, "short image"); }
    }

    /**
     * The bundle's graphs pass (the Personalizer above checked them), the encoder's structure hash and the known
     * set equal Python's, and each hostile graph or tokenizer gets the Python check's verdict.
     */
    @SuppressWarnings("unchecked")
    private static void checkGraphs(Bundle bundle, Map<String, Object> graphs, Path dir) throws IOException {
        String structure = GraphCheck.encoderStructure(bundle.memberBytes("text_encoder.onnx"));
        check(structure.equals(graphs.get("encoder_structure")), "encoder structure " + structure + " != Python's "
                + graphs.get("encoder_structure"));
        check(new java.util.HashSet<>((List<Object>) graphs.get("known_encoder_structures")).equals(GraphCheck.KNOWN_ENCODER_STRUCTURES),
                "GraphCheck.KNOWN_ENCODER_STRUCTURES != sdk.format.graph_check's");
        for (Object o : (List<Object>) graphs.get("hostile")) {
            Map<String, Object> h = (Map<String, Object>) o;
            byte[] data = Files.readAllBytes(dir.resolve((String) h.get("file")));
            String member = (String) h.get("member"), verdict;
            try {
                if (member.equals("backbone.onnx")) GraphCheck.checkBackbone(data, bundle);
                else if (member.equals("text_encoder.onnx")) GraphCheck.checkEncoder(data);
                else Tokenizer.fromJson(data, bundle.maxTokens);
                verdict = "accepted";
            } catch (BundleException e) {
                verdict = "BundleError";
            } catch (RuntimeException | StackOverflowError e) {
                verdict = e.toString();
            }
            check(verdict.equals(h.get("python")), "hostile " + h.get("name") + ": Java " + verdict + ", Python " + h.get("python"));
        }
    }

    /** The ExecuTorch companion reads; each hostile variant gets the Python reader's verdict. */
    @SuppressWarnings("unchecked")
    private static XnnpackProgram checkCompanion(Bundle bundle, Map<String, Object> companion, Path dir) throws Exception {
        XnnpackProgram program = XnnpackProgram.open((String) companion.get("file"), bundle);
        check(program.maxBatch == 8, "companion max_batch " + program.maxBatch);
        for (Object o : (List<Object>) companion.get("hostile")) {
            Map<String, Object> h = (Map<String, Object>) o;
            String verdict;
            try {
                new XnnpackProgram(ByteBuffer.wrap(Files.readAllBytes(dir.resolve((String) h.get("file")))), bundle);
                verdict = "accepted";
            } catch (BundleException e) {
                verdict = "BundleError";
            } catch (RuntimeException e) {
                verdict = e.toString();
            }
            check(verdict.equals(h.get("python")), "hostile companion " + h.get("name") + ": Java " + verdict
                    + ", Python " + h.get("python"));
        }
        checkCompanionSignatures(bundle, (Map<String, Object>) companion.get("signatures"), dir);
        return program;
    }

    /** Signed, damaged-signed, forged and unsigned companions: each gets the Python reader's verdict with the
     * same trusted keys; then the Java side signs the unsigned companion: the bytes must be Python's. */
    @SuppressWarnings("unchecked")
    private static void checkCompanionSignatures(Bundle bundle, Map<String, Object> signatures, Path dir) throws Exception {
        checkSignatureVerdicts((List<Object>) signatures.get("cases"), dir, "companion signature case",
                (data, trusted) -> new XnnpackProgram(ByteBuffer.wrap(data), bundle,
                        trusted == null ? null : Signatures.trustedSet(trusted)).signer);
        Map<String, Object> job = (Map<String, Object>) signatures.get("sign");
        byte[] signed = signCompanion(Files.readAllBytes(dir.resolve((String) job.get("unsigned"))),
                hexBytes((String) job.get("seed")), hexBytes((String) job.get("public_key")));
        check(java.util.Arrays.equals(signed, Files.readAllBytes(dir.resolve((String) job.get("expected")))),
                "a companion signed in Java has the bytes of the same companion signed in Python");
    }

    /** Each case's file read by `read` (giving its signer, or null) with the case's trusted keys: the verdict
     * ("ok:<key id>", "ok:unsigned" or "BundleError") must be Python's. */
    @SuppressWarnings("unchecked")
    private static void checkSignatureVerdicts(List<Object> cases, Path dir, String what,
            java.util.function.BiFunction<byte[], List<String>, Signatures.Signer> read) throws IOException {
        for (Object o : cases) {
            Map<String, Object> c = (Map<String, Object>) o;
            List<String> trusted = (List<String>) c.get("trusted");
            String verdict;
            try {
                Signatures.Signer signer = read.apply(Files.readAllBytes(dir.resolve((String) c.get("file"))), trusted);
                verdict = "ok:" + (signer == null ? "unsigned" : signer.keyId);
            } catch (BundleException e) {
                verdict = "BundleError";
            } catch (RuntimeException e) {
                verdict = "untyped " + e;
            }
            check(verdict.equals(c.get("python")), what + " " + c.get("name") + " trusting " + trusted
                    + ": Java " + verdict + ", Python " + c.get("python"));
        }
    }

    /** Sign an SDK-written version-2 companion as `python -m export sign` does: version 3, and a trailer that
     * signs COMPANION_DOMAIN + the prefix and header (which hold the program's SHA-256). */
    static byte[] signCompanion(byte[] unsigned, byte[] seed, byte[] publicKey) throws Exception {
        ByteBuffer in = ByteBuffer.wrap(unsigned).order(ByteOrder.LITTLE_ENDIAN);
        if (in.getInt(8) != XnnpackProgram.VERSION) throw new IllegalArgumentException("not a version-2 companion");
        int signedBytes = XnnpackProgram.PREFIX + (int) in.getLong(12);
        byte[] out = java.util.Arrays.copyOf(unsigned, unsigned.length + Signatures.TRAILER);
        ByteBuffer o = ByteBuffer.wrap(out).order(ByteOrder.LITTLE_ENDIAN);
        o.putInt(8, XnnpackProgram.SIGNED_VERSION);
        byte[] signature = ed25519(seed, Signatures.COMPANION_DOMAIN, out, signedBytes);
        return withTrailer(out, unsigned.length, publicKey, signature);
    }

    /** The Ed25519 signature, by the key of RFC 8032 `seed`, of `domain` + the first `length` bytes of `message`. */
    static byte[] ed25519(byte[] seed, byte[] domain, byte[] message, int length) throws Exception {
        byte[] der = hexBytes("302e020100300506032b657004220420");
        der = java.util.Arrays.copyOf(der, der.length + 32);
        System.arraycopy(seed, 0, der, der.length - 32, 32);
        java.security.Signature signer = java.security.Signature.getInstance("Ed25519");
        signer.initSign(java.security.KeyFactory.getInstance("Ed25519").generatePrivate(new java.security.spec.PKCS8EncodedKeySpec(der)));
        signer.update(domain);
        signer.update(message, 0, length);
        return signer.sign();
    }

    /** tokenizer.json is untrusted: other pipelines, broken vocabularies and odd added tokens are refused. */
    private static void checkHostileTokenizers(Bundle bundle) {
        String good = new String(bundle.memberBytes("tokenizer.json"), StandardCharsets.UTF_8);
        String[][] edits = {
                {"\"type\":\"WordPiece\",\"unk_token\"", "\"type\":\"BPE\",\"unk_token\""},
                {"\"type\":\"BertPreTokenizer\"", "\"type\":\"Whitespace\""},
                {"\"[UNK]\":100", "\"[UNK]\":1"},
                {"\"normalized\":false", "\"normalized\":true"},
                {"\"max_input_chars_per_word\":100", "\"max_input_chars_per_word\":100000"},
                {"\"type\":\"TemplateProcessing\"", "\"type\":\"RobertaProcessing\""},
                {"\"lowercase\":true", "\"lowercase\":\"yes\""},
        };
        String compact = good.replace(": ", ":").replace(", ", ",");
        for (String[] e : edits) {
            check(compact.contains(e[0]), "tokenizer.json holds " + e[0]);
            try {
                Tokenizer.fromJson(compact.replace(e[0], e[1]).getBytes(StandardCharsets.UTF_8), 128);
                check(false, "tokenizer.json with " + e[1] + " accepted");
            } catch (BundleException ex) {
                check(true, "hostile tokenizer");
            }
        }
        try { Tokenizer.fromJson("{\"model\": [".getBytes(StandardCharsets.UTF_8), 128); check(false, "truncated JSON accepted"); }
        catch (BundleException ex) { check(true, "truncated tokenizer"); }
    }
}
