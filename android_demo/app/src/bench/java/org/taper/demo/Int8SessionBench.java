package org.taper.demo;

import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Arrays;

import org.taper.sdk.engines.Engine;

/**
 * What the app's OnnxEngine pays for an int8 model on the JVM: {@code openQuantizedBackbone} (a fresh,
 * fully optimized onnxruntime session of the QDQ graph, as the app makes one per personalization) and one
 * batch-1 inference, medians of {@code repeats}. Run by scripts/bench_jvm_int8.py, which times the Python
 * runtime's routes on the same graph in the same run.
 * <pre>java -cp CLASSES org.taper.demo.Int8SessionBench GRAPH.onnx SIZE REPEATS</pre>
 */
public final class Int8SessionBench {
    private Int8SessionBench() { }

    public static void main(String[] args) throws Exception {
        byte[] graph = Files.readAllBytes(Paths.get(args[0]));
        int size = Integer.parseInt(args[1]), repeats = Integer.parseInt(args[2]);
        OnnxEngine engine = new OnnxEngine(2);
        float[] image = new float[3 * size * size];
        double[] open = new double[repeats], infer = new double[repeats];
        engine.openQuantizedBackbone(graph).close();   // once, untimed (class loading, the native library)
        for (int i = 0; i < repeats; i++) {
            long t0 = System.nanoTime();
            try (Engine.Backbone backbone = engine.openQuantizedBackbone(graph)) {
                long t1 = System.nanoTime();
                backbone.features(image, 1);
                long t2 = System.nanoTime();
                backbone.features(image, 1);
                long t3 = System.nanoTime();
                open[i] = (t1 - t0) / 1e6;
                infer[i] = (t3 - t2) / 1e6;
                if (t2 < t1) throw new IllegalStateException("clock");
            }
        }
        System.out.printf(java.util.Locale.ROOT, "{\"open_quantized_backbone_ms\": %.2f, \"inference_ms\": %.3f, \"repeats\": %d}%n",
                median(open), median(infer), repeats);
    }

    private static double median(double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        int n = sorted.length;
        return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    }
}
