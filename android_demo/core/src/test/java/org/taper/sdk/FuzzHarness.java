package org.taper.sdk;

import org.taper.sdk.engines.Engine;
import org.taper.sdk.format.Bundle;
import org.taper.sdk.format.BundleException;
import org.taper.sdk.fusion.Architecture;
import org.taper.sdk.text.DescriptionException;
import org.taper.sdk.text.TaskOptions;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The Java core fed the reliability suite's damaged bundles (scripts/java_fuzz.py, issue 49): one bundle
 * path per line on stdin, one JSON line per bundle on stdout, after {@code Bundle.open} and
 * {@code personalize(classNames)} (the class names are the arguments after the timeout):
 * <pre>
 * {"outcome": "loaded", "classes": [..], "alpha": [[..]], "head": [[..]]}
 * {"outcome": "typed", "error": "BundleException", "message": ".."}
 * {"outcome": "escape", "error": "java.lang.ClassCastException", "message": ".."}
 * {"outcome": "hang"}      (then the harness exits with status 3; the driver starts a new JVM)
 * </pre>
 * Usage: java -Xmx2g -cp build org.taper.sdk.FuzzHarness TIMEOUT_SECONDS CLASS_NAME...
 */
final class FuzzHarness {
    /** No text encoder (class lists need none) and a backbone that is never run: loading and fusion only. */
    static final Engine NO_ENGINE = new Engine() {
        @Override
        public TextEncoder openTextEncoder(byte[] graph) {
            throw new UnsupportedOperationException("the fuzz harness personalizes class lists only");
        }

        @Override
        public Backbone openBackbone(byte[] graph, ByteBuffer weights, List<Architecture.WeightSlot> slots) {
            return new Backbone() {
                @Override
                public float[][] features(float[] images, int count) { throw new UnsupportedOperationException(); }

                @Override
                public void close() {}
            };
        }
    };

    public static void main(String[] args) throws Exception {
        double timeout = Double.parseDouble(args[0]);
        List<String> classNames = Arrays.asList(Arrays.copyOfRange(args, 1, args.length));
        ExecutorService executor = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r);
            t.setDaemon(true);
            return t;
        });
        java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in,
                java.nio.charset.StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String path = line.strip();
            Future<String> result = executor.submit(() -> run(path, classNames));
            String out;
            try {
                out = result.get((long) (timeout * 1000), TimeUnit.MILLISECONDS);
            } catch (TimeoutException e) {
                System.out.println("{\"outcome\": \"hang\"}");
                System.out.flush();
                System.exit(3);
                return;
            }
            System.out.println(out);
            System.out.flush();
        }
        executor.shutdownNow();
    }

    static String run(String path, List<String> classNames) {
        try {
            Personalizer personalizer = new Personalizer(Bundle.open(path), NO_ENGINE);
            PersonalizedModel model = personalizer.personalize(classNames, TaskOptions.DEFAULT);
            return "{\"outcome\": \"loaded\", \"classes\": " + strings(model.classes()) + ", \"alpha\": "
                    + matrix(model.alpha()) + ", \"head\": " + matrix(model.headRows()) + "}";
        } catch (BundleException | DescriptionException e) {
            return outcome("typed", e.getClass().getSimpleName(), e.getMessage());
        } catch (Throwable e) {  // an untyped exception, an Error (StackOverflowError, OutOfMemoryError) included
            return outcome("escape", e.getClass().getName(), String.valueOf(e.getMessage()));
        }
    }

    static String outcome(String outcome, String error, String message) {
        return "{\"outcome\": \"" + outcome + "\", \"error\": " + quote(error) + ", \"message\": "
                + quote(message.length() > 200 ? message.substring(0, 200) : message) + "}";
    }

    static String matrix(float[][] rows) {
        List<String> out = new ArrayList<>();
        for (float[] row : rows) {
            List<String> values = new ArrayList<>();
            for (float v : row) values.add(Float.isFinite(v) ? String.format(Locale.ROOT, "%.9g", v) : "null");
            out.add("[" + String.join(", ", values) + "]");
        }
        return "[" + String.join(", ", out) + "]";
    }

    static String strings(List<String> values) {
        List<String> out = new ArrayList<>();
        for (String v : values) out.add(quote(v));
        return "[" + String.join(", ", out) + "]";
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20 || Character.isSurrogate(c)) b.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }
}
