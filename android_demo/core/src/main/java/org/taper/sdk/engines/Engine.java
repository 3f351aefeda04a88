package org.taper.sdk.engines;

import org.taper.sdk.fusion.Architecture;
import java.nio.ByteBuffer;

/**
 * What runs the bundle's two ONNX graphs (in Python: sdk/engines/onnxruntime.py); the core does every other step of
 * personalize() itself. On Android: {@code OnnxEngine} in the app module (onnxruntime-android). The core's own
 * tests use an engine that replays outputs recorded from the Python runtime; the app's test runs OnnxEngine
 * against the desktop onnxruntime JAR.
 */
public interface Engine {
    /** The backbone graph's image input and the file name its weight initializers point to (sdk.fusion.folding). */
    String IMAGE_INPUT = "image", FEATURES_OUTPUT = "features", WEIGHTS_FILE = "backbone.weights";

    /** The text encoder graph: token ids -> one sentence embedding (mean pooling is in the graph). */
    interface TextEncoder extends AutoCloseable {
        /** The graph's output row for inputs "input_ids" and "attention_mask" (int64 [1, n]). */
        float[] embed(long[] inputIds, long[] attentionMask);

        @Override
        void close();
    }

    /** The backbone with one personalization's weights: images -> penultimate features. */
    interface Backbone extends AutoCloseable {
        /** Features [count][C] of {@code count} normalised NCHW float32 images laid end to end. */
        float[][] features(float[] images, int count);

        @Override
        void close();
    }

    TextEncoder openTextEncoder(byte[] graph);

    /**
     * @param graph the backbone graph (output "features"), its initializers stored in the external file
     *              {@link #WEIGHTS_FILE}; checked by {@link GraphCheck#checkBackbone} before it gets here
     * @param weights that file: the folded weights, float32 little-endian, in the layout the graph names
     * @param slots where each initializer lies in {@code weights} (name, byte offset, shape)
     *              ({@link Architecture#backboneSlots}); the engine may not read {@code weights} after this
     *              call returns (onnxruntime copies external initializers into the session it creates)
     */
    Backbone openBackbone(byte[] graph, ByteBuffer weights, java.util.List<Architecture.WeightSlot> slots);

    /**
     * An int8 backbone ({@link Int8}: the QDQ graph, its weights inside; output "features"), fully optimized
     * so that onnxruntime runs it in integer kernels. An engine that runs float32 backbones only keeps this
     * default, and personalize(..., "int8") then says so instead of running float32 under the int8 name.
     */
    default Backbone openQuantizedBackbone(byte[] graph) {
        throw new UnsupportedOperationException(getClass().getSimpleName() + " runs float32 backbones only");
    }
}
