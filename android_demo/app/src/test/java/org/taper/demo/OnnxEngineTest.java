package org.taper.demo;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.junit.Assume;
import org.junit.Test;
import org.taper.sdk.engines.Engine;
import org.taper.sdk.format.Json;
import org.taper.sdk.PersonalizedModel;
import org.taper.sdk.Personalizer;
import org.taper.sdk.text.TaskOptions;

/**
 * The app's {@link OnnxEngine} itself on the JVM, with onnxruntime's desktop JAR (the same {@code ai.onnxruntime}
 * API as onnxruntime-android), against the golden vectors of the Python runtime ({@code export/golden.py}):
 * the Java core opens the bundle and personalizes, OnnxEngine runs the text encoder and the backbone.
 * <ul>
 * <li>float32: every case's logits on every golden image equal Python's within the tolerance the Python
 * runtime accepts its compiled route with (sdk/engines/onnxruntime.py: rtol 1e-4, atol 1e-4 x (max |logit| + 1));</li>
 * <li>int8, Python's graph: {@code openQuantizedBackbone} of the graph Python wrote gives Python's features
 * within one step of the output's quantization grid (the same integer kernels, another onnxruntime release);</li>
 * <li>int8, the app's path: {@code personalize(..., "int8")} quantizes the Java fusion, whose weights may land
 * one int8 step from Python's, so its logits are held to ten output steps through the head's row
 * (tests/test_android_core.py holds the features to the same ten steps).</li>
 * </ul>
 * Run by tests/test_android_app.py: {@code mvn test -Dtaper.golden=GOLDEN.json}; the summary goes to
 * {@code -Dtaper.report=FILE} (default target/onnx_engine_report.json): the cases and checks, and each kind's
 * largest difference, absolute and over its bound (scripts/android_build.py puts it in docs/results/android.json).
 */
public class OnnxEngineTest {
    private static final double RTOL = 1e-4, INT8_STEPS = 10;

    @SuppressWarnings("unchecked")
    @Test
    public void onnxEngineGivesThePythonRuntimesLogits() throws IOException {
        String golden = System.getProperty("taper.golden", "");
        Assume.assumeTrue("no golden vectors given (-Dtaper.golden=...)", !golden.isEmpty());
        Path file = Paths.get(golden), dir = file.getParent();
        Map<String, Object> spec = (Map<String, Object>) Json.parse(Files.readAllBytes(file), "golden.json", 16);
        List<Object> images = (List<Object>) spec.get("images");
        List<byte[]> rgbs = new ArrayList<>();
        List<float[]> tensors = new ArrayList<>();
        for (Object o : images) {
            Map<String, Object> im = (Map<String, Object>) o;
            rgbs.add(Files.readAllBytes(dir.resolve((String) im.get("rgb"))));
            tensors.add(floats(dir.resolve((String) im.get("tensor"))));
        }
        OnnxEngine engine = new OnnxEngine(2);
        int checked = 0;
        double worstFloat = 0, worstInt8Graph = 0, worstInt8 = 0;   // relative to each check's own bound
        double maxFloat = 0, maxInt8Graph = 0, maxInt8 = 0;         // absolute
        try (Personalizer p = Personalizer.load((String) spec.get("bundle"), engine)) {
            for (Object o : (List<Object>) spec.get("cases")) {
                Map<String, Object> c = (Map<String, Object>) o;
                String name = (String) c.get("name");
                List<Object> want = (List<Object>) c.get("logits");
                try (PersonalizedModel model = personalize(p, c.get("description"), "float32")) {
                    for (int i = 0; i < rgbs.size(); i++) {
                        double[] expected = doubles((List<Object>) want.get(i));
                        float[] got = logits(model, rgbs.get(i), (Map<String, Object>) images.get(i));
                        double atol = RTOL * (maxAbs(expected) + 1);
                        for (int k = 0; k < expected.length; k++) {
                            double bound = atol + RTOL * Math.abs(expected[k]);
                            double diff = Math.abs(got[k] - expected[k]);
                            worstFloat = Math.max(worstFloat, diff / bound);
                            maxFloat = Math.max(maxFloat, diff);
                            assertTrue(String.format(Locale.ROOT, "%s image %d class %d: %.6g vs %.6g", name, i, k,
                                    got[k], expected[k]), diff <= bound);
                        }
                        checked++;
                    }
                }
                Map<String, Object> int8 = (Map<String, Object>) c.get("int8");
                double step = ((Number) int8.get("step")).doubleValue();
                List<Object> features = (List<Object>) int8.get("features");
                byte[] pythonGraph = Files.readAllBytes(dir.resolve((String) int8.get("graph")));
                try (Engine.Backbone backbone = engine.openQuantizedBackbone(pythonGraph)) {
                    for (int i = 0; i < tensors.size(); i++) {
                        double[] expected = doubles((List<Object>) features.get(i));
                        float[] got = backbone.features(tensors.get(i), 1)[0];
                        assertEquals(name + " int8 features", expected.length, got.length);
                        for (int j = 0; j < got.length; j++) {
                            double diff = Math.abs(got[j] - expected[j]);
                            worstInt8Graph = Math.max(worstInt8Graph, diff / step);
                            maxInt8Graph = Math.max(maxInt8Graph, diff);
                            assertTrue(name + " Python's int8 graph, image " + i + " feature " + j + ": " + diff / step
                                    + " steps", diff <= step * (1 + 1e-5));
                        }
                        checked++;
                    }
                }
                List<Object> head = (List<Object>) c.get("head");
                try (PersonalizedModel model = personalize(p, c.get("description"), "int8")) {
                    for (int i = 0; i < rgbs.size(); i++) {
                        double[] f = doubles((List<Object>) features.get(i));
                        float[] got = logits(model, rgbs.get(i), (Map<String, Object>) images.get(i));
                        double[] rowLogits = new double[head.size()], rowBounds = new double[head.size()];
                        for (int k = 0; k < head.size(); k++) {
                            double[] row = doubles((List<Object>) head.get(k));
                            double z = row[f.length], rowNorm = 0;
                            for (int j = 0; j < f.length; j++) {
                                z += row[j] * f[j];
                                rowNorm += Math.abs(row[j]);
                            }
                            rowLogits[k] = z;
                            rowBounds[k] = INT8_STEPS * step * rowNorm + RTOL * (Math.abs(z) + 1);
                        }
                        if (model.rest()) {   // X and the log-sum-exp of the rest: off by no more than its worst row
                            double top = Double.NEGATIVE_INFINITY, sum = 0, worst = 0;
                            for (int k = 1; k < head.size(); k++) top = Math.max(top, rowLogits[k]);
                            for (int k = 1; k < head.size(); k++) {
                                sum += Math.exp(rowLogits[k] - top);
                                worst = Math.max(worst, rowBounds[k]);
                            }
                            rowLogits = new double[]{rowLogits[0], top + Math.log(sum)};
                            rowBounds = new double[]{rowBounds[0], worst};
                        }
                        assertEquals(name + " int8 logits", rowLogits.length, got.length);
                        for (int k = 0; k < got.length; k++) {
                            double expected = rowLogits[k], bound = rowBounds[k];
                            double diff = Math.abs(got[k] - expected);
                            worstInt8 = Math.max(worstInt8, diff / bound);
                            maxInt8 = Math.max(maxInt8, diff);
                            assertTrue(String.format(Locale.ROOT, "%s int8 image %d class %d: %.6g vs %.6g (bound %.3g)",
                                    name, i, k, got[k], expected, bound), diff <= bound);
                        }
                        checked++;
                    }
                }
            }
        }
        int cases = ((List<Object>) spec.get("cases")).size();
        assertEquals(3 * cases * rgbs.size(), checked);
        String report = String.format(Locale.ROOT, "{\"cases\": %d, \"images\": %d, \"checks\": %d, "
                + "\"worst_over_bound\": {\"float32\": %.4g, \"int8_python_graph\": %.4g, \"int8\": %.4g}, "
                + "\"max_abs_diff\": {\"float32\": %.4g, \"int8_python_graph\": %.4g, \"int8\": %.4g}}%n",
                cases, rgbs.size(), checked, worstFloat, worstInt8Graph, worstInt8, maxFloat, maxInt8Graph, maxInt8);
        Path out = Paths.get(System.getProperty("taper.report", "target/onnx_engine_report.json"));
        Files.createDirectories(out.toAbsolutePath().getParent());
        Files.writeString(out, report);
    }

    @SuppressWarnings("unchecked")
    private static PersonalizedModel personalize(Personalizer p, Object description, String precision) {
        return description instanceof String ? p.personalize((String) description, TaskOptions.DEFAULT, precision)
                : p.personalize((List<String>) description, TaskOptions.DEFAULT, precision);
    }

    private static float[] logits(PersonalizedModel model, byte[] rgb, Map<String, Object> image) {
        return model.logits(rgb, ((Number) image.get("width")).intValue(), ((Number) image.get("height")).intValue());
    }

    private static float[] floats(Path file) throws IOException {
        ByteBuffer raw = ByteBuffer.wrap(Files.readAllBytes(file)).order(ByteOrder.LITTLE_ENDIAN);
        float[] out = new float[raw.remaining() / 4];
        raw.asFloatBuffer().get(out);
        return out;
    }

    private static double[] doubles(List<Object> values) {
        double[] out = new double[values.size()];
        for (int i = 0; i < out.length; i++) out[i] = ((Number) values.get(i)).doubleValue();
        return out;
    }

    private static double maxAbs(double[] v) {
        double m = 0;
        for (double x : v) m = Math.max(m, Math.abs(x));
        return m;
    }
}
