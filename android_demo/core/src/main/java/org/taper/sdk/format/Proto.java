package org.taper.sdk.format;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * Just enough of the protobuf wire format to check ONNX graphs, as sdk/format/onnx_proto.py reads it: fields in
 * order, varints as longs, every other wire type (fixed 32/64-bit, length-delimited) as raw bytes; a
 * message is parsed whole, so damage anywhere in it surfaces at once as a {@link ProtoException}.
 * Values point into the caller's array (no copies of weight data).
 */
public final class Proto {
    private Proto() {}

    public static final int VARINT = 0, FIXED64 = 1, LENGTH_DELIMITED = 2, FIXED32 = 5;

    /** The bytes are not the protobuf this reader expects. */
    public static final class ProtoException extends Exception {
        private static final long serialVersionUID = 1L;

        public ProtoException(String message) { super(message); }
    }

    /** One field: its number, and either a varint or a range of bytes of the message. */
    public static final class Field {
        public final int number;
        public final boolean isVarint;
        public final long varint;
        public final byte[] source;
        public final int offset, length;

        Field(int number, long varint) {
            this.number = number; this.isVarint = true; this.varint = varint; this.source = null; this.offset = 0; this.length = 0;
        }

        Field(int number, byte[] source, int offset, int length) {
            this.number = number; this.isVarint = false; this.varint = 0; this.source = source; this.offset = offset; this.length = length;
        }

        /** The fields of this field's bytes, as a message. */
        public List<Field> message() throws ProtoException {
            if (isVarint) throw new ProtoException("a message field holds an integer");
            return parse(source, offset, length);
        }

        /** A string field's value (strict UTF-8, as Python's bytes.decode). */
        public String text() throws ProtoException {
            if (isVarint) throw new ProtoException("a string field holds an integer");
            try {
                return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                        .onUnmappableCharacter(CodingErrorAction.REPORT)
                        .decode(ByteBuffer.wrap(source, offset, length)).toString();
            } catch (CharacterCodingException e) {
                throw new ProtoException("a name that is not UTF-8");
            }
        }

        /** A repeated int64 field's values, packed (bytes) or not (one varint); two's complement. */
        public List<Long> packedInts() throws ProtoException {
            List<Long> out = new ArrayList<>();
            if (isVarint) {
                out.add(varint);
                return out;
            }
            int[] pos = {offset};
            while (pos[0] < offset + length) out.add(readVarint(source, pos, offset + length));
            return out;
        }

        /** The field encoded again as onnx_proto.encode_field does: a varint, or anything else length-delimited. */
        public void encodeTo(ByteArrayOutputStream out) {
            if (isVarint) {
                writeVarint(out, ((long) number << 3) | VARINT);
                writeVarint(out, varint);
            } else {
                writeVarint(out, ((long) number << 3) | LENGTH_DELIMITED);
                writeVarint(out, length);
                out.write(source, offset, length);
            }
        }
    }

    /** Every field of message bytes [offset, offset + length). */
    public static List<Field> parse(byte[] data, int offset, int length) throws ProtoException {
        List<Field> out = new ArrayList<>();
        int end = offset + length;
        int[] pos = {offset};
        while (pos[0] < end) {
            long key = readVarint(data, pos, end);
            long number = key >>> 3;
            int wire = (int) (key & 7);
            if (number > Integer.MAX_VALUE) throw new ProtoException("field number out of range");
            if (wire == VARINT) {
                out.add(new Field((int) number, readVarint(data, pos, end)));
                continue;
            }
            long size;
            if (wire == LENGTH_DELIMITED) size = readVarint(data, pos, end);
            else if (wire == FIXED64) size = 8;
            else if (wire == FIXED32) size = 4;
            else throw new ProtoException("unsupported wire type " + wire);
            if (size < 0 || size > end - pos[0]) throw new ProtoException("truncated field");
            out.add(new Field((int) number, data, pos[0], (int) size));
            pos[0] += (int) size;
        }
        return out;
    }

    public static List<Field> parse(byte[] data) throws ProtoException { return parse(data, 0, data.length); }

    /** A varint of at most 64 bits (onnx_proto accepts up to 70; no honest ONNX file has one that long). */
    private static long readVarint(byte[] data, int[] pos, int end) throws ProtoException {
        long value = 0;
        for (int shift = 0; ; shift += 7) {
            if (pos[0] >= end || shift > 63) throw new ProtoException("truncated or overlong varint");
            int b = data[pos[0]++] & 0xff;
            if (shift == 63 && b > 1) throw new ProtoException("a varint beyond 64 bits");
            value |= (long) (b & 0x7f) << shift;
            if (b < 0x80) return value;
        }
    }

    public static void writeVarint(ByteArrayOutputStream out, long value) {
        while (true) {
            int b = (int) (value & 0x7f);
            value >>>= 7;
            out.write(b | (value != 0 ? 0x80 : 0));
            if (value == 0) return;
        }
    }
}
