package org.taper.demo;

import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OnnxTensorLike;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtSession;

import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.LongBuffer;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.taper.sdk.fusion.Architecture;
import org.taper.sdk.format.BundleException;
import org.taper.sdk.engines.Engine;

/**
 * The core's {@link Engine} on onnxruntime-android: one text-encoder session, and one backbone session per
 * personalization whose folded weights are handed over as external initializers (onnxruntime copies them
 * into the session, so the core's buffer is free again when openBackbone returns). The graphs reach this
 * class only after {@code org.taper.sdk.format.GraphCheck} accepted them.
 * <p>Not compiled or run on the repository's test machines (no Android SDK, no Maven): see ../README.md.
 */
public final class OnnxEngine implements Engine {
    private final OrtEnvironment env = OrtEnvironment.getEnvironment();
    private final int threads;

    /** @param threads intra-op threads per session (the phone's big cores, say 4) */
    public OnnxEngine(int threads) { this.threads = threads; }

    private OrtSession.SessionOptions options() throws OrtException {
        OrtSession.SessionOptions options = new OrtSession.SessionOptions();
        options.setIntraOpNumThreads(threads);
        // Idle workers must not spin: they would take the cores the next personalization fuses on.
        options.addConfigEntry("session.intra_op.allow_spinning", "0");
        return options;
    }

    @Override
    public TextEncoder openTextEncoder(byte[] graph) {
        final OrtSession session;
        try (OrtSession.SessionOptions options = options()) {
            session = env.createSession(graph, options);
        } catch (OrtException e) {
            throw new BundleException("text_encoder.onnx: onnxruntime could not load it (" + e.getMessage() + ")");
        }
        return new TextEncoder() {
            @Override
            public float[] embed(long[] inputIds, long[] attentionMask) {
                long[] shape = {1, inputIds.length};
                try (OnnxTensor ids = OnnxTensor.createTensor(env, LongBuffer.wrap(inputIds), shape);
                     OnnxTensor mask = OnnxTensor.createTensor(env, LongBuffer.wrap(attentionMask), shape);
                     OrtSession.Result out = session.run(Map.of("input_ids", ids, "attention_mask", mask))) {
                    return ((float[][]) out.get(0).getValue())[0];
                } catch (OrtException e) {
                    throw new IllegalStateException("the text encoder failed: " + e.getMessage(), e);
                }
            }

            @Override
            public void close() { closeSession(session); }
        };
    }

    @Override
    public Backbone openBackbone(byte[] graph, ByteBuffer weights, List<Architecture.WeightSlot> slots) {
        Map<String, OnnxTensorLike> initializers = new HashMap<>();
        final OrtSession session;
        try (OrtSession.SessionOptions options = options()) {
            for (Architecture.WeightSlot slot : slots) {
                long count = 1;
                for (long d : slot.shape()) count *= d;
                initializers.put(slot.name(), OnnxTensor.createTensor(env, floats(weights, slot.offset(), (int) count), slot.shape()));
            }
            options.addExternalInitializers(initializers);
            session = env.createSession(graph, options);
        } catch (OrtException e) {
            throw new BundleException("backbone.onnx: onnxruntime could not load it (" + e.getMessage() + ")");
        } finally {
            for (OnnxTensorLike t : initializers.values()) t.close();   // copied into the session
        }
        return backbone(session, "the backbone");
    }

    @Override
    public Backbone openQuantizedBackbone(byte[] graph) {
        final OrtSession session;
        try (OrtSession.SessionOptions options = options()) {   // full optimization: QDQ -> integer kernels
            session = env.createSession(graph, options);
        } catch (OrtException e) {
            throw new BundleException("the int8 backbone: onnxruntime could not load it (" + e.getMessage() + ")");
        }
        return backbone(session, "the int8 backbone");
    }

    /** A backbone session as the core sees it: images -> features; {@code what} names it in errors. */
    private Backbone backbone(OrtSession session, String what) {
        return new Backbone() {
            @Override
            public float[][] features(float[] images, int count) {
                long size = Math.round(Math.sqrt(images.length / (3.0 * count)));
                try (OnnxTensor input = OnnxTensor.createTensor(env, FloatBuffer.wrap(images), new long[]{count, 3, size, size});
                     OrtSession.Result out = session.run(Map.of(IMAGE_INPUT, input))) {
                    return (float[][]) out.get(FEATURES_OUTPUT).get().getValue();
                } catch (OrtException e) {
                    throw new IllegalStateException(what + " failed: " + e.getMessage(), e);
                }
            }

            @Override
            public void close() { closeSession(session); }
        };
    }

    private static void closeSession(OrtSession session) {
        try {
            session.close();
        } catch (OrtException e) {
            throw new IllegalStateException("onnxruntime could not close a session: " + e.getMessage(), e);
        }
    }

    /** {@code count} floats of {@code weights} from byte {@code offset}, as a direct view (no copy). */
    private static FloatBuffer floats(ByteBuffer weights, int offset, int count) {
        ByteBuffer view = weights.duplicate();
        ((Buffer) view).clear();   // through Buffer: the covariant overrides are missing on old Android runtimes
        ((Buffer) view).position(offset);
        ((Buffer) view).limit(offset + 4 * count);
        return view.slice().order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
    }
}
