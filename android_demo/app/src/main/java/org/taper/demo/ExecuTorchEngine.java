package org.taper.demo;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.List;

import org.pytorch.executorch.EValue;
import org.pytorch.executorch.Module;
import org.pytorch.executorch.Tensor;
import org.taper.sdk.fusion.Architecture;
import org.taper.sdk.format.BundleException;
import org.taper.sdk.engines.Engine;
import org.taper.sdk.engines.XnnpackProgram;

/**
 * The backbone on ExecuTorch (XNNPACK), the text encoder on onnxruntime ({@link OnnxEngine}; the companion
 * holds only the backbone). Each personalization writes its folded weights into a copy of the companion's
 * program ({@link XnnpackProgram#withWeights}, checked against Python's ExecuTorch by the JVM golden test),
 * saves it as one file in app storage and loads it with {@code Module.load(path)}: the Android Java API takes
 * a single .pte path and no separate data file, which is why the companion keeps its weights inside the program.
 * The ONNX backbone graph is still checked by the core ({@code GraphCheck}) but not run here.
 * <p>Not compiled or run on the repository's test machines (no Android SDK, no Maven): see ../README.md.
 */
public final class ExecuTorchEngine implements Engine {
    private final XnnpackProgram program;
    private final OnnxEngine textEngine;
    private final File directory;
    private final int threads;

    /**
     * @param program   the bundle's companion ({@code XnnpackProgram.open(path, bundle)})
     * @param directory where the personalized program is written (app storage; one file, replaced each time)
     * @param threads   XNNPACK threads (the phone's big cores, say 4)
     */
    public ExecuTorchEngine(XnnpackProgram program, File directory, int threads) {
        this.program = program;
        this.directory = directory;
        this.threads = threads;
        this.textEngine = new OnnxEngine(threads);
    }

    @Override
    public TextEncoder openTextEncoder(byte[] graph) { return textEngine.openTextEncoder(graph); }

    @Override
    public Backbone openBackbone(byte[] graph, ByteBuffer weights, List<Architecture.WeightSlot> slots) {
        File target = new File(directory, "personalized.pte"), partial = new File(directory, "personalized.pte.partial");
        try (FileOutputStream out = new FileOutputStream(partial)) {
            out.write(program.withWeights(weights));
        } catch (IOException e) {
            partial.delete();
            throw new IllegalStateException("could not write the personalized program: " + e.getMessage(), e);
        }
        // rename replaces the directory entry only: a previous Module that still has the old file open keeps
        // reading the old bytes (POSIX semantics, which Android's file systems have).
        if (!partial.renameTo(target)) {
            partial.delete();
            throw new IllegalStateException("could not move the personalized program into place");
        }
        final Module module;
        try {
            module = Module.load(target.getPath(), Module.LOAD_MODE_FILE, threads);
        } catch (RuntimeException e) {
            throw new BundleException("the ExecuTorch companion's program could not be loaded (" + e.getMessage() + ")");
        }
        final int maxBatch = program.maxBatch;
        return new Backbone() {
            @Override
            public float[][] features(float[] images, int count) {
                int perImage = images.length / count;
                long size = Math.round(Math.sqrt(perImage / 3.0));
                float[][] out = new float[count][];
                for (int start = 0; start < count; start += maxBatch) {  // the program takes batches of 1..maxBatch
                    int n = Math.min(maxBatch, count - start);
                    float[] batch = new float[n * perImage];
                    System.arraycopy(images, start * perImage, batch, 0, batch.length);
                    EValue[] result = module.forward(EValue.from(Tensor.fromBlob(batch, new long[]{n, 3, size, size})));
                    float[] flat = result[0].toTensor().getDataAsFloatArray();
                    int width = flat.length / n;
                    for (int i = 0; i < n; i++) {
                        out[start + i] = new float[width];
                        System.arraycopy(flat, i * width, out[start + i], 0, width);
                    }
                }
                return out;
            }

            @Override
            public void close() { module.destroy(); }
        };
    }
}
