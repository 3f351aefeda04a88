package org.taper.sdk.engines;

import org.taper.sdk.format.Bundle;
import org.taper.sdk.format.BundleException;
import org.taper.sdk.format.Json;
import org.taper.sdk.format.Signatures;
import org.taper.sdk.fusion.Architecture;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The ExecuTorch companion of a bundle ({@code <bundle>.xnnpack}, format 2; the reader of
 * sdk/engines/xnnpack_program.py and the same checks): an XNNPACK program of the folded backbone that holds its
 * own weights, and each weight's slot in the program's bytes. {@link #withWeights} writes one
 * personalization's folded weights into a copy of the program, which ExecuTorch then loads
 * ({@code Module.load(path)} on Android: a single .pte path, which is why the weights live inside it).
 *
 * <pre>{@code
 * XnnpackProgram program = XnnpackProgram.open("tiny-imagenet.taper.xnnpack", bundle);
 * byte[] pte = program.withWeights(foldedBackbone);   // Fusion.foldInto's buffer
 * }</pre>
 */
public final class XnnpackProgram {
    static final byte[] MAGIC = "TAPERXNN".getBytes(StandardCharsets.US_ASCII);
    /** Format 2 is unsigned; 3 is 2 with a signature trailer (Signatures, COMPANION_DOMAIN). */
    public static final int VERSION = 2, SIGNED_VERSION = 3, PREFIX = 20, MAX_BATCH_LIMIT = 64;
    static final long MAX_HEADER_BYTES = 16L << 20;
    /** The program's extended header "eh00" at byte 8 (magic, length, flatbuffer size, segment base, size). */
    static final int PTE_HEADER_AT = 8, PTE_HEADER_SIZE = 32;
    static final byte[] PTE_MAGIC = "eh00".getBytes(StandardCharsets.US_ASCII);
    static final List<Integer> CHANNELS_LAST = List.of(0, 2, 3, 1);

    /** Where one folded weight sits in the program, and whether it is stored channels-last. */
    record Slot(int offset, boolean channelsLast) {}

    public final int maxBatch;
    /** Who signed the companion (format 3, its signature verified), or null. */
    public final Signatures.Signer signer;
    private final ByteBuffer program;
    private final List<Architecture.WeightSlot> backbone;
    private final Map<String, Slot> slots = new HashMap<>();

    /**
     * The companion at {@code path}, memory-mapped and checked against {@code bundle}; a bundle opened with
     * trusted keys takes only a companion signed by one of them.
     */
    public static XnnpackProgram open(String path, Bundle bundle) throws IOException {
        try (RandomAccessFile f = new RandomAccessFile(path, "r"); FileChannel ch = f.getChannel()) {
            if (ch.size() > Integer.MAX_VALUE) throw new BundleException("ExecuTorch companion: larger than 2 GiB");
            return new XnnpackProgram(ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size()), bundle);
        }
    }

    public XnnpackProgram(ByteBuffer buffer, Bundle bundle) {
        this(buffer, bundle, bundle.trustedKeys);
    }

    /** With {@code trustedKeys} (lower-case hex, {@link Signatures#trustedSet}) instead of the bundle's. */
    @SuppressWarnings("unchecked")
    public XnnpackProgram(ByteBuffer buffer, Bundle bundle, Set<String> trustedKeys) {
        ByteBuffer data = buffer.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        int size = data.capacity();
        if (size < PREFIX) throw fail("truncated (" + size + " bytes)");
        byte[] magic = new byte[8];
        Bundle.bytesAt(data, 0, magic);
        if (!java.util.Arrays.equals(magic, MAGIC)) throw fail("not an ExecuTorch companion (bad magic)");
        int version = data.getInt(8);
        long headerSize = data.getLong(12);
        if (version == SIGNED_VERSION) {   // verified over the prefix and header before anything reads them
            if (size < PREFIX + Signatures.TRAILER || headerSize < 0
                    || headerSize > Math.min(MAX_HEADER_BYTES, size - Signatures.TRAILER - PREFIX))
                throw fail("header of " + Long.toUnsignedString(headerSize) + " bytes does not fit");
            byte[] signed = new byte[PREFIX + (int) headerSize];
            Bundle.bytesAt(data, 0, signed);
            signer = Signatures.verify(data, signed, Signatures.COMPANION_DOMAIN, "ExecuTorch companion");
            size -= Signatures.TRAILER;
            data = Bundle.slice(data, 0, size).order(ByteOrder.LITTLE_ENDIAN);
        } else if (version == VERSION) {
            signer = null;
        } else {
            throw fail("format version " + Integer.toUnsignedString(version) + ", this reader reads versions " + VERSION
                    + " and " + SIGNED_VERSION + ": export it again");
        }
        if (trustedKeys != null) Signatures.checkTrusted(signer, trustedKeys, "ExecuTorch companion");
        if (headerSize < 0 || headerSize > Math.min(MAX_HEADER_BYTES, size - PREFIX))
            throw fail("header of " + Long.toUnsignedString(headerSize) + " bytes does not fit");
        byte[] text = new byte[(int) headerSize];
        Bundle.bytesAt(data, PREFIX, text);
        Object parsed;
        try {
            parsed = Json.parse(text, "ExecuTorch companion header", Json.HEADER_DEPTH);
        } catch (BundleException e) {
            throw fail("the header is not JSON");
        }
        if (!(parsed instanceof Map)) throw fail("the header is not a JSON object");
        Map<String, Object> header = (Map<String, Object>) parsed;
        checkArchitecture(header.get("architecture"), bundle);
        Object batch = header.get("max_batch");
        if (!(batch instanceof Long) || (Long) batch < 1 || (Long) batch > MAX_BATCH_LIMIT)
            throw fail("max_batch must be an integer in [1, " + MAX_BATCH_LIMIT + "], got " + batch);
        maxBatch = (int) (long) (Long) batch;
        program = section(data, header.get("program"), PREFIX + (int) headerSize);
        backbone = Architecture.backboneSlots(bundle.shapes);
        readSlots(header.get("slots"), segmentData());
    }

    private static BundleException fail(String message) {
        return new BundleException("ExecuTorch companion: " + message);
    }

    /** Python compares the header's dict with {stem, width, input_size}: same keys, equal values. */
    @SuppressWarnings("unchecked")
    private static void checkArchitecture(Object raw, Bundle bundle) {
        boolean same = raw instanceof Map && ((Map<String, Object>) raw).keySet().equals(Set.of("stem", "width", "input_size"));
        if (same) {
            Map<String, Object> a = (Map<String, Object>) raw;
            same = bundle.stem.equals(a.get("stem")) && numberEquals(a.get("width"), bundle.width)
                    && numberEquals(a.get("input_size"), bundle.inputSize);
        }
        if (!same) throw fail("made for " + raw + ", the bundle is " + bundle.stem + " width " + bundle.width
                + " at " + bundle.inputSize + " px");
    }

    private static boolean numberEquals(Object v, double want) {
        return (v instanceof Long || v instanceof Double) && ((Number) v).doubleValue() == want;
    }

    @SuppressWarnings("unchecked")
    private static ByteBuffer section(ByteBuffer data, Object entry, int first) {
        Map<String, Object> f = entry instanceof Map ? (Map<String, Object>) entry : Map.of();
        Object offset = f.get("offset"), size = f.get("size"), digest = f.get("sha256");
        if (!(offset instanceof Long) || !(size instanceof Long) || !(digest instanceof String))
            throw fail("program needs integer offset and size and a sha256");
        long o = (Long) offset, n = (Long) size;
        if (n <= 0 || o < first || o > data.capacity() - n)
            throw fail("program (" + n + " bytes at " + o + ") is outside the file (" + data.capacity() + " bytes)");
        if (o + n != data.capacity())   // nothing unread follows it: a trailer must be a signature's, checked
            throw fail((data.capacity() - o - n) + " bytes follow the program (damaged, or a signed companion's version changed)");
        ByteBuffer s = Bundle.slice(data, (int) o, (int) n).order(ByteOrder.LITTLE_ENDIAN);
        if (!Bundle.hex(Bundle.sha256(s)).equals(digest)) throw fail("program does not match its sha256 (damaged)");
        return s;
    }

    /** [start, stop) of the program's segment data (after its flatbuffer), where its weights are. */
    private long[] segmentData() {
        int n = program.capacity();
        if (n < PTE_HEADER_AT + PTE_HEADER_SIZE) throw fail("the program is not an ExecuTorch program (too short)");
        byte[] magic = new byte[4];
        Bundle.bytesAt(program, PTE_HEADER_AT, magic);
        long length = Integer.toUnsignedLong(program.getInt(PTE_HEADER_AT + 4));
        long flatbuffer = program.getLong(PTE_HEADER_AT + 8), base = program.getLong(PTE_HEADER_AT + 16),
                segments = program.getLong(PTE_HEADER_AT + 24);
        // uint64 fields: a negative long is above 2^63, which no file here reaches
        if (!java.util.Arrays.equals(magic, PTE_MAGIC) || length < PTE_HEADER_SIZE || flatbuffer < 0 || base < 0
                || segments < 0 || flatbuffer > base || base > n - segments)
            throw fail("the program is not an ExecuTorch program with segments of this version");
        return new long[]{base, base + segments};
    }

    @SuppressWarnings("unchecked")
    private void readSlots(Object raw, long[] segments) {
        Set<String> names = new HashSet<>();
        for (Architecture.WeightSlot w : backbone) names.add(w.name());
        if (!(raw instanceof Map) || !((Map<String, Object>) raw).keySet().equals(names))
            throw fail("slots must name exactly the backbone's parameters");
        Map<String, Object> entries = (Map<String, Object>) raw;
        List<Span> spans = new ArrayList<>();
        for (Architecture.WeightSlot w : backbone) {
            Object e = entries.get(w.name());
            Map<String, Object> f = e instanceof Map ? (Map<String, Object>) e : Map.of();
            Object offset = f.get("offset"), axes = f.get("axes");
            List<Integer> identity = new ArrayList<>();
            for (int i = 0; i < w.shape().length; i++) identity.add(i);
            List<Integer> given = integers(axes);
            boolean channelsLast = w.shape().length == 4 && CHANNELS_LAST.equals(given);
            if (!channelsLast && !identity.equals(given))
                throw fail("slot '" + w.name() + "': axes " + axes + " is not a layout the SDK writes");
            long bytes = 4L * numel(w.shape());
            if (!(offset instanceof Long) || (Long) offset % 4 != 0 || (Long) offset < segments[0]
                    || (Long) offset > segments[1] - bytes)
                throw fail("slot '" + w.name() + "' (" + bytes + " bytes at " + offset + ") is outside the program's segment data");
            long o = (Long) offset;
            slots.put(w.name(), new Slot((int) o, channelsLast));
            spans.add(new Span(o, o + bytes, w.name()));
        }
        spans.sort((a, b) -> Long.compare(a.start(), b.start()));
        for (int i = 1; i < spans.size(); i++)
            if (spans.get(i).start() < spans.get(i - 1).stop())
                throw fail("slots '" + spans.get(i - 1).name() + "' and '" + spans.get(i).name()
                        + "' overlap (two parameters would share weights)");
        checkIndices();
    }

    /**
     * Each slot holds what the exporter left there: its parameter's element indices (1, 2, ... over the
     * parameters in backbone order) in the slot's layout, as sdk/engines/xnnpack_program.py checks: the program's
     * checksum sits in the header it would vouch for, so this is what shows a changed offset or axis.
     */
    private void checkIndices() {
        long first = 1;
        for (Architecture.WeightSlot w : backbone) {
            Slot slot = slots.get(w.name());
            long[] s = w.shape();
            long n = numel(s);
            boolean held = true;
            if (!slot.channelsLast()) {
                for (int e = 0; e < n && held; e++) held = program.getFloat(slot.offset() + 4 * e) == (float) (first + e);
            } else {   // stored [O, H, W, I] of the bundle's [O, I, H, W]
                int o = (int) s[0], in = (int) s[1], h = (int) s[2], wd = (int) s[3], at = slot.offset();
                for (int a = 0; a < o && held; a++)
                    for (int y = 0; y < h && held; y++)
                        for (int x = 0; x < wd && held; x++)
                            for (int c = 0; c < in && held; c++, at += 4)
                                held = program.getFloat(at) == (float) (first + ((((long) a * in + c) * h + y) * wd + x));
            }
            if (!held)
                throw fail("slot '" + w.name() + "' does not hold that parameter as exported: the header does not "
                        + "describe this program (damaged, or edited)");
            first += n;
        }
    }

    private record Span(long start, long stop, String name) {}

    /** A JSON list of integers (Long) as Integers; anything else (floats, strings, not a list) as null. */
    private static List<Integer> integers(Object raw) {
        if (!(raw instanceof List)) return null;
        List<Integer> out = new ArrayList<>();
        for (Object v : (List<?>) raw) {
            if (!(v instanceof Long) || (Long) v < 0 || (Long) v > 3) return null;
            out.add((int) (long) (Long) v);
        }
        return out;
    }

    private static long numel(long[] shape) {
        long n = 1;
        for (long d : shape) n *= d;
        return n;
    }

    /**
     * A copy of the program with the folded weights written at their slots (4-d weights channels-last
     * where the slot says so): the .pte for ExecuTorch to load.
     *
     * @param folded the folded backbone, float32 little-endian in the bundle's layout
     *               ({@link Architecture#backboneSlots}, {@link Fusion#foldInto})
     */
    public byte[] withWeights(ByteBuffer folded) {
        byte[] copy = new byte[program.capacity()];
        Bundle.bytesAt(program, 0, copy);
        ByteBuffer target = ByteBuffer.wrap(copy);
        for (Architecture.WeightSlot w : backbone) {
            Slot slot = slots.get(w.name());
            int n = (int) numel(w.shape());
            if (!slot.channelsLast()) {  // the same bytes in the same order
                Bundle.slice(target, slot.offset(), 4 * n).put(Bundle.slice(folded, w.offset(), 4 * n));
                continue;
            }
            // stored[o][h][w][i] = weight[o][i][h][w], one output channel at a time
            int outs = (int) w.shape()[0], ins = (int) w.shape()[1], hw = (int) (w.shape()[2] * w.shape()[3]);
            float[] block = new float[ins * hw], moved = new float[ins * hw];
            for (int o = 0; o < outs; o++) {
                Bundle.slice(folded, w.offset() + 4 * o * block.length, 4 * block.length)
                        .order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(block);
                for (int i = 0; i < ins; i++)
                    for (int p = 0; p < hw; p++) moved[p * ins + i] = block[i * hw + p];
                Bundle.slice(target, slot.offset() + 4 * o * moved.length, 4 * moved.length)
                        .order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().put(moved);
            }
        }
        return copy;
    }
}
