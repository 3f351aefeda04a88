package org.taper.sdk;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Checks the Java core against golden vectors written by `python -m export golden` (no JUnit: the
 * test machines reach no Maven repository). Usage: GoldenTest <golden.json>. Prints "N passed, M failed".
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
    public static void main(String[] args) throws Exception {
        Path golden = Paths.get(args[0]);
        Map<String, Object> spec = (Map<String, Object>) Json.parse(Files.readString(golden));
        String bundlePath = (String) spec.get("bundle");
        Bundle bundle = Bundle.open(bundlePath);
        Personalizer p = new Personalizer(bundle);
        for (Object o : (List<Object>) spec.get("cases")) {
            Map<String, Object> c = (Map<String, Object>) o;
            String name = (String) c.get("name");
            List<String> classes = new ArrayList<>();
            for (Object x : (List<Object>) c.get("classes")) classes.add((String) x);
            int[] task = p.taskForClassNames(classes, 2);
            List<Object> want = (List<Object>) c.get("task");
            boolean same = task.length == want.size();
            for (int i = 0; same && i < task.length; i++) same = task[i] == ((Number) want.get(i)).intValue();
            check(same, name + " task classes");
            float[] emb = p.taskEmbedding(task);
            check(maxDiff(emb, (List<Object>) c.get("embedding")) < 1e-5, name + " task embedding");
            float[][] alpha = p.alpha(emb);
            List<Object> wantAlpha = (List<Object>) c.get("alpha");
            double da = 0;
            for (int b = 0; b < 4; b++) da = Math.max(da, maxDiff(alpha[b], (List<Object>) wantAlpha.get(b)));
            check(da < 1e-5, name + " alpha (max diff " + da + ")");
            Map<String, float[]> fused = p.fuse(alpha);
            float[] folded = p.foldedBackbone(fused);
            ByteBuffer raw = ByteBuffer.wrap(Files.readAllBytes(golden.getParent().resolve((String) c.get("folded"))))
                    .order(ByteOrder.LITTLE_ENDIAN);
            double df = raw.remaining() == folded.length * 4 ? 0 : Double.POSITIVE_INFINITY;
            for (int i = 0; i < folded.length && df < Double.POSITIVE_INFINITY; i++) {
                float w = raw.getFloat(i * 4);
                df = Math.max(df, Math.abs(folded[i] - w) / Math.max(1.0, Math.abs(w)));
            }
            check(df < 1e-4, name + " folded backbone weights (max rel diff " + df + ")");
            float[][] head = p.head(fused, task);
            List<Object> wantHead = (List<Object>) c.get("head");
            double dh = head.length == wantHead.size() ? 0 : Double.POSITIVE_INFINITY;
            for (int k = 0; k < Math.min(head.length, wantHead.size()); k++) dh = Math.max(dh, maxDiff(head[k], (List<Object>) wantHead.get(k)));
            check(dh < 1e-4, name + " classifier rows (max diff " + dh + ")");
        }
        // Damage is refused with the typed exception, as in Python.
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
        try { p.taskForClassNames(List.of("no such class"), 2); check(false, "unknown class accepted"); }
        catch (IllegalArgumentException e) { check(true, "unknown class"); }
        System.out.println(passed + " passed, " + failed + " failed");
        System.exit(failed == 0 ? 0 : 1);
    }
}
