package org.taper.sdk;

import org.taper.sdk.format.Bundle;
import org.taper.sdk.fusion.Fusion;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;

/**
 * Fusion on the JVM against a plain copy of the same bytes. Usage: FusionBenchmark BUNDLE REPEATS THREADS.
 * Per round, in this order: a plain copy of the folded backbone's bytes (a float[] into a direct buffer,
 * as the core did after the reference loops, the buffer allocated before), the fast path on one thread, the fast path on THREADS
 * threads, and (every fourth round: it is slow) the reference loops. After 5 untimed rounds (JIT), prints
 * one JSON object of medians in milliseconds. Run by scripts/bench_jvm_fusion.py.
 */
public final class FusionBenchmark {
    public static void main(String[] args) throws Exception {
        Bundle bundle = Bundle.open(args[0]);
        int repeats = Integer.parseInt(args[1]), threads = Integer.parseInt(args[2]);
        Random random = new Random(0);
        float[][] alpha = new float[4][bundle.numBases];
        for (float[] block : alpha) {   // a softmax of random logits: a mix like the mixer's
            double sum = 0;
            for (int q = 0; q < block.length; q++) sum += block[q] = (float) Math.exp(random.nextGaussian());
            for (int q = 0; q < block.length; q++) block[q] /= (float) sum;
        }
        Fusion one = new Fusion(bundle, 1), many = new Fusion(bundle, threads);
        ByteBuffer out = one.newBackboneBuffer(), plain = one.newBackboneBuffer();
        float[] source = new float[bundle.externalSize / 4];
        Arrays.fill(source, 1f);
        List<Double> copy = new ArrayList<>(), fast1 = new ArrayList<>(), fastN = new ArrayList<>(), reference = new ArrayList<>();
        for (int round = -5; round < repeats; round++) {
            long t0 = System.nanoTime();
            plain.asFloatBuffer().put(source);
            long t1 = System.nanoTime();
            one.foldInto(alpha, out);
            long t2 = System.nanoTime();
            many.foldInto(alpha, out);
            long t3 = System.nanoTime();
            if (round < 0 || round % 4 == 0) {
                Map<String, float[]> fused = one.fuse(alpha);
                one.foldedBackbone(fused);
            }
            long t4 = System.nanoTime();
            if (round < 0) continue;
            copy.add((t1 - t0) / 1e6);
            fast1.add((t2 - t1) / 1e6);
            fastN.add((t3 - t2) / 1e6);
            if (round % 4 == 0) reference.add((t4 - t3) / 1e6);
        }
        System.out.printf(Locale.ROOT, "{\"output_bytes\": %d, \"threads\": %d, \"cores\": %d, \"repeats\": %d, "
                        + "\"copy_ms\": %.3f, \"fast_1thread_ms\": %.3f, \"fast_threads_ms\": %.3f, \"reference_ms\": %.3f, "
                        + "\"reference_rounds\": %d, \"java\": \"%s\"}%n",
                bundle.externalSize, threads, Runtime.getRuntime().availableProcessors(), repeats, median(copy),
                median(fast1), median(fastN), median(reference), reference.size(), System.getProperty("java.vm.version"));
    }

    private static double median(List<Double> values) {
        List<Double> s = new ArrayList<>(values);
        s.sort(null);
        int n = s.size();
        return n % 2 == 1 ? s.get(n / 2) : (s.get(n / 2 - 1) + s.get(n / 2)) / 2;
    }
}
