package org.taper.sdk.media;

import org.taper.sdk.format.Bundle;
import org.taper.sdk.format.BundleException;
import java.util.List;
import java.util.Map;

/**
 * An RGB image -> the backbone's input, as sdk/media/images.py (fit_to_square) and sdk/media/preprocessing.py do it:
 * the shorter side resized to input_size and the centre cropped, done as one bilinear resize of the
 * source's centre box with Pillow's algorithm (antialiased: the filter widens with the scale; 8-bit fixed
 * point coefficients; horizontal pass, then vertical), so the pixels are Pillow's exactly; then /255,
 * (x - mean) / std per channel, in float32, NCHW.
 * Decoding, EXIF rotation and camera formats are the app's part (Android: BitmapFactory; {@link #fromArgb}
 * takes Bitmap.getPixels' output).
 * <pre>{@code
 * float[] input = bundle.preprocessing.apply(rgb, width, height);   // [3 * S * S]
 * }</pre>
 */
public final class Preprocessing {
    /** A larger image is refused (sdk.media.images.MAX_IMAGE_PIXELS: decompression bombs). */
    public static final long MAX_PIXELS = 64_000_000L;
    private static final int PRECISION_BITS = 32 - 8 - 2;  // Pillow's Resample.c

    public final int inputSize;
    private final float[] mean, std;

    Preprocessing(int inputSize, float[] mean, float[] std) {
        this.inputSize = inputSize;
        this.mean = mean;
        this.std = std;
    }

    /** The per-channel mean (a copy). */
    public float[] mean() { return mean.clone(); }

    /** The per-channel standard deviation (a copy). */
    public float[] std() { return std.clone(); }

    /** The manifest's "preprocessing" object (sdk.format.manifest checks the same). */
    @SuppressWarnings("unchecked")
    public static Preprocessing fromManifest(Map<String, Object> spec, int inputSize) {
        if (!(spec.get("mean") instanceof List) || !(spec.get("std") instanceof List)
                || !"shorter_side_then_center_crop".equals(spec.get("resize")))
            throw new BundleException("manifest: preprocessing must give mean, std and the resize rule");
        if (!spec.keySet().equals(java.util.Set.of("input_size", "mean", "std", "resize")))
            throw new BundleException("manifest: preprocessing must have exactly input_size, mean, std and resize");
        float[] mean = triple((List<Object>) spec.get("mean"), -10, 10), std = triple((List<Object>) spec.get("std"), 1e-3, 10);
        if (Bundle.integer(spec, "input_size", inputSize, inputSize) != inputSize)
            throw new BundleException("manifest: preprocessing input_size differs from the architecture's");
        return new Preprocessing(inputSize, mean, std);
    }

    private static float[] triple(List<Object> values, double low, double high) {
        if (values.size() != 3) throw new BundleException("manifest: preprocessing mean/std must have 3 values");
        float[] out = new float[3];
        for (int i = 0; i < 3; i++) {
            if (!(values.get(i) instanceof Number)) throw new BundleException("manifest: preprocessing values must be numbers");
            double value = ((Number) values.get(i)).doubleValue();
            if (!(value >= low && value <= high))
                throw new BundleException("manifest: preprocessing values must be in [" + low + ", " + high + "]");
            out[i] = (float) value;
        }
        return out;
    }

    /** Interleaved RGB bytes of ARGB pixels (Android's Bitmap.getPixels). */
    public static byte[] fromArgb(int[] pixels) {
        byte[] rgb = new byte[pixels.length * 3];
        for (int i = 0; i < pixels.length; i++) {
            rgb[3 * i] = (byte) (pixels[i] >> 16);
            rgb[3 * i + 1] = (byte) (pixels[i] >> 8);
            rgb[3 * i + 2] = (byte) pixels[i];
        }
        return rgb;
    }

    /** The network input [3, S, S] (float32, normalised) of interleaved RGB bytes [height][width][3]. */
    public float[] apply(byte[] rgb, int width, int height) {
        return normalize(fitToSquare(rgb, width, height, inputSize));
    }

    /** uint8 RGB [S][S][3] -> float32 [3][S][S]: x / 255, then (x - mean) / std, each step in float32. */
    float[] normalize(byte[] square) {
        int plane = inputSize * inputSize;
        float[] out = new float[3 * plane];
        float scale = (float) (1.0 / 255);
        for (int p = 0; p < plane; p++)
            for (int c = 0; c < 3; c++) out[c * plane + p] = ((square[3 * p + c] & 0xFF) * scale - mean[c]) / std[c];
        return out;
    }

    /** Shorter side to {@code size} and the centre cropped, as one bilinear resize of the centre box. */
    static byte[] fitToSquare(byte[] rgb, int width, int height, int size) {
        if (width < 1 || height < 1) throw new IllegalArgumentException("the image is empty (" + width + "x" + height + ")");
        if ((long) width * height > MAX_PIXELS)
            throw new IllegalArgumentException(width + "x" + height + " image is too large (at most " + MAX_PIXELS + " pixels)");
        if (rgb.length != 3L * width * height)
            throw new IllegalArgumentException("an RGB image of " + width + "x" + height + " has " + 3L * width * height
                    + " bytes, got " + rgb.length);
        if (width == size && height == size) return rgb.clone();
        double scale = (double) size / Math.min(width, height);
        long w = Math.max(size, (long) Math.rint(width * scale)), h = Math.max(size, (long) Math.rint(height * scale));
        long left = (w - size) / 2, top = (h - size) / 2;
        // Pillow takes the box as C floats.
        float x0 = (float) ((double) (left * width) / w), y0 = (float) ((double) (top * height) / h);
        float x1 = (float) ((double) ((left + size) * width) / w), y1 = (float) ((double) ((top + size) * height) / h);
        return resample(rgb, width, height, size, size, new float[]{x0, y0, x1, y1});
    }

    /** Pillow's ImagingResampleInner with the bilinear filter for 3-band 8-bit images. */
    static byte[] resample(byte[] in, int inWidth, int inHeight, int outWidth, int outHeight, float[] box) {
        boolean horizontal = outWidth != inWidth || box[0] != 0 || box[2] != outWidth;
        boolean vertical = outHeight != inHeight || box[1] != 0 || box[3] != outHeight;
        Coefficients v = new Coefficients(inHeight, box[1], box[3], outHeight);
        int first = v.bounds[0], last = v.bounds[2 * outHeight - 2] + v.bounds[2 * outHeight - 1];
        byte[] image = in;
        int width = inWidth;
        if (horizontal) {
            Coefficients hc = new Coefficients(inWidth, box[0], box[2], outWidth);
            for (int i = 0; i < outHeight; i++) v.bounds[2 * i] -= first;
            byte[] temp = new byte[3 * outWidth * (last - first)];
            for (int y = 0; y < last - first; y++)
                for (int x = 0; x < outWidth; x++) {
                    int min = hc.bounds[2 * x], count = hc.bounds[2 * x + 1], k = x * hc.size;
                    for (int c = 0; c < 3; c++) {
                        int s = 1 << (PRECISION_BITS - 1);
                        for (int i = 0; i < count; i++) s += (in[3 * ((y + first) * inWidth + min + i) + c] & 0xFF) * hc.fixed[k + i];
                        temp[3 * (y * outWidth + x) + c] = clip8(s);
                    }
                }
            image = temp;
            width = outWidth;
        }
        if (!vertical) return image == in ? in.clone() : image;
        byte[] out = new byte[3 * width * outHeight];
        for (int y = 0; y < outHeight; y++) {
            int min = v.bounds[2 * y], count = v.bounds[2 * y + 1], k = y * v.size;
            for (int x = 0; x < width; x++)
                for (int c = 0; c < 3; c++) {
                    int s = 1 << (PRECISION_BITS - 1);
                    for (int i = 0; i < count; i++) s += (image[3 * ((min + i) * width + x) + c] & 0xFF) * v.fixed[k + i];
                    out[3 * (y * width + x) + c] = clip8(s);
                }
        }
        return out;
    }

    private static byte clip8(int s) {
        int v = s >> PRECISION_BITS;
        return (byte) (v < 0 ? 0 : Math.min(v, 255));
    }

    /** Pillow's precompute_coeffs (bilinear, support 1) and normalize_coeffs_8bpc. */
    private static final class Coefficients {
        final int size;
        final int[] bounds, fixed;

        Coefficients(int inSize, float in0, float in1, int outSize) {
            double scale = (double) (in1 - in0) / outSize, filterScale = Math.max(scale, 1.0), support = filterScale;
            size = (int) Math.ceil(support) * 2 + 1;
            bounds = new int[2 * outSize];
            fixed = new int[outSize * size];
            double[] k = new double[size];
            for (int xx = 0; xx < outSize; xx++) {
                double center = in0 + (xx + 0.5) * scale, ww = 0, ss = 1.0 / filterScale;
                int min = Math.max((int) (center - support + 0.5), 0);
                int max = Math.min((int) (center + support + 0.5), inSize) - min;
                for (int x = 0; x < max; x++) {
                    double t = Math.abs((x + min - center + 0.5) * ss);
                    k[x] = t < 1.0 ? 1.0 - t : 0.0;
                    ww += k[x];
                }
                for (int x = 0; x < size; x++) {
                    double value = x < max ? (ww != 0.0 ? k[x] / ww : k[x]) : 0.0;
                    fixed[xx * size + x] = (int) (value < 0 ? -0.5 + value * (1 << PRECISION_BITS) : 0.5 + value * (1 << PRECISION_BITS));
                }
                bounds[2 * xx] = min;
                bounds[2 * xx + 1] = max;
            }
        }
    }
}
