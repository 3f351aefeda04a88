package org.taper.sdk.format;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The strict JSON parser of the bundle format (docs/bundle-format.md, "JSON"), the mirror of sdk/format/strict_json.py:
 * RFC 8259 exactly (numbers without a leading '+', leading zeros or a bare '.', no NaN or Infinity; no raw
 * control characters in strings; whitespace is space, tab, LF and CR), UTF-8 decoded strictly, nesting
 * bounded by the caller (the same bounds as the Python reader).
 */
public final class Json {
    /** Bounds on nesting (a scalar is 0, [1] is 1), as in the Python reader. */
    public static final int MANIFEST_DEPTH = 16, TOKENIZER_DEPTH = 8, HEADER_DEPTH = 8;
    private static final java.util.regex.Pattern NUMBER =
            java.util.regex.Pattern.compile("-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?");
    private final String s, what;
    private final int maxDepth;
    private int i;

    private Json(String s, String what, int maxDepth) { this.s = s; this.what = what; this.maxDepth = maxDepth; }

    /** Parses the manifest's JSON: Map, List, String, Long (integers), Double, Boolean or null. */
    public static Object parse(String text) { return parse(text, "manifest"); }

    /** Parses a JSON document nested at most MANIFEST_DEPTH deep; errors name {@code what} ("member classes.json"). */
    public static Object parse(String text, String what) { return parse(text, what, MANIFEST_DEPTH); }

    /** UTF-8 bytes, decoded strictly (BundleException for malformed UTF-8), then parsed. */
    public static Object parse(byte[] utf8, String what, int maxDepth) {
        String text;
        try {
            text = java.nio.charset.StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(java.nio.charset.CodingErrorAction.REPORT)
                    .onUnmappableCharacter(java.nio.charset.CodingErrorAction.REPORT)
                    .decode(java.nio.ByteBuffer.wrap(utf8)).toString();
        } catch (java.nio.charset.CharacterCodingException e) {
            throw new BundleException(what + ": not UTF-8");
        }
        return parse(text, what, maxDepth);
    }

    /** Parses a JSON document nested at most maxDepth deep. */
    public static Object parse(String text, String what, int maxDepth) {
        Json p = new Json(text, what, maxDepth);
        p.ws();
        Object v = p.value(0);
        p.ws();
        if (p.i != p.s.length()) throw new BundleException(what + ": trailing characters in JSON");
        return v;
    }

    private Object value(int depth) {
        if (depth > 64) throw new BundleException(what + ": JSON nested too deeply");
        if (i >= s.length()) throw new BundleException(what + ": unexpected end of JSON");
        char c = s.charAt(i);
        switch (c) {
            case '{': return object(depth);
            case '[': return array(depth);
            case '"': return string();
            case 't': return literal("true", Boolean.TRUE);
            case 'f': return literal("false", Boolean.FALSE);
            case 'n': return literal("null", null);
            default: return number();
        }
    }

    private Map<String, Object> object(int depth) {
        if (depth + 1 > maxDepth) throw new BundleException(what + ": nested deeper than " + maxDepth);
        Map<String, Object> m = new LinkedHashMap<>();
        i++;
        ws();
        if (peek() == '}') { i++; return m; }
        while (true) {
            ws();
            if (peek() != '"') throw new BundleException(what + ": expected a key in JSON");
            String k = string();
            ws();
            expect(':');
            ws();
            m.put(k, value(depth + 1));
            ws();
            if (peek() == ',') { i++; continue; }
            expect('}');
            return m;
        }
    }

    private List<Object> array(int depth) {
        if (depth + 1 > maxDepth) throw new BundleException(what + ": nested deeper than " + maxDepth);
        List<Object> a = new ArrayList<>();
        i++;
        ws();
        if (peek() == ']') { i++; return a; }
        while (true) {
            ws();
            a.add(value(depth + 1));
            ws();
            if (peek() == ',') { i++; continue; }
            expect(']');
            return a;
        }
    }

    private String string() {
        StringBuilder b = new StringBuilder();
        i++;
        while (true) {
            if (i >= s.length()) throw new BundleException(what + ": unterminated string");
            char c = s.charAt(i++);
            if (c == '"') return b.toString();
            if (c < 0x20) throw new BundleException(what + ": control character in a JSON string");
            if (c != '\\') { b.append(c); continue; }
            if (i >= s.length()) throw new BundleException(what + ": bad escape");
            char e = s.charAt(i++);
            switch (e) {
                case '"': case '\\': case '/': b.append(e); break;
                case 'b': b.append('\b'); break;
                case 'f': b.append('\f'); break;
                case 'n': b.append('\n'); break;
                case 'r': b.append('\r'); break;
                case 't': b.append('\t'); break;
                case 'u':
                    if (i + 4 > s.length()) throw new BundleException(what + ": bad unicode escape");
                    try { b.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); }
                    catch (NumberFormatException ex) { throw new BundleException(what + ": bad unicode escape"); }
                    i += 4;
                    break;
                default: throw new BundleException(what + ": bad escape");
            }
        }
    }

    private Object number() {
        int start = i;
        while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) i++;
        String t = s.substring(start, i);
        if (t.isEmpty()) throw new BundleException(what + ": unexpected character in JSON");
        if (!NUMBER.matcher(t).matches()) throw new BundleException(what + ": bad number " + t);
        try {
            if (t.indexOf('.') < 0 && t.indexOf('e') < 0 && t.indexOf('E') < 0) return Long.parseLong(t);
            return Double.parseDouble(t);
        } catch (NumberFormatException ex) {
            throw new BundleException(what + ": bad number " + t);
        }
    }

    private Object literal(String word, Object v) {
        if (!s.startsWith(word, i)) throw new BundleException(what + ": unexpected word in JSON");
        i += word.length();
        return v;
    }

    private char peek() { return i < s.length() ? s.charAt(i) : '\0'; }

    private void expect(char c) {
        if (peek() != c) throw new BundleException(what + ": expected '" + c + "' in JSON");
        i++;
    }

    private void ws() {
        while (i < s.length() && (s.charAt(i) == ' ' || s.charAt(i) == '\t' || s.charAt(i) == '\n' || s.charAt(i) == '\r')) i++;
    }
}
