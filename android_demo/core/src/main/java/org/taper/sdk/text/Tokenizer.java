package org.taper.sdk.text;

import org.taper.sdk.format.BundleException;
import org.taper.sdk.format.Json;
import java.nio.charset.StandardCharsets;
import java.text.Normalizer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * The text encoder's WordPiece tokenizer, read from a bundle's tokenizer.json, giving the ids the
 * {@code tokenizers} library gives the Python runtime (sdk/text/encoder.py):
 * <ol>
 * <li>added tokens ("[CLS]", "[MASK]", ...) are matched in the raw text first (leftmost, longest);</li>
 * <li>the text between them goes through the BertNormalizer (control characters dropped, whitespace to
 * spaces, CJK ideographs padded with spaces, accents stripped after NFD, lower case), the
 * BertPreTokenizer (split on whitespace, each punctuation character its own word) and WordPiece (greedy
 * longest match with "##" continuations; a word that cannot be built, or is longer than
 * max_input_chars_per_word, is the unknown token);</li>
 * <li>the ids are cut to the bundle's max_tokens less the template's special tokens, which are then
 * added around them ("[CLS] ... [SEP]").</li>
 * </ol>
 * The file is untrusted and checked as sdk/format/tokenizer_check.py checks it: only this pipeline, a bounded
 * vocabulary with ids 0..N-1, bounded added tokens (matched as written: not normalized, not stripped).
 * <pre>{@code
 * Tokenizer t = Tokenizer.fromJson(bundle.memberBytes("tokenizer.json"), 128);
 * int[] ids = t.encode("a photo of a moth.");   // [101, 1037, 6302, 1997, 1037, 18629, 1012, 102]
 * }</pre>
 */
public final class Tokenizer {
    static final int MAX_BYTES = 4 * 1024 * 1024, MAX_VOCAB = 200_000, MAX_TOKEN_CHARS = 100, MAX_ADDED = 1000;
    private static final String WHAT = "member tokenizer.json";
    private static final Set<String> TOP_LEVEL = Set.of("version", "truncation", "padding", "added_tokens",
            "normalizer", "pre_tokenizer", "model", "post_processor", "decoder");

    private final Map<String, Integer> vocab;
    private final int unknown, maxWordChars, maxTokens;
    private final String prefix;
    private final boolean cleanText, chineseChars, stripAccents, lowercase;
    private final int[] before, after;         // the template's special ids around the sequence
    private final String[] added;              // added tokens, longest first (leftmost-longest matching)
    private final int[] addedIds;

    private Tokenizer(Map<String, Integer> vocab, int unknown, String prefix, int maxWordChars, boolean[] normalizer,
                      int[] before, int[] after, String[] added, int[] addedIds, int maxTokens) {
        this.vocab = vocab;
        this.unknown = unknown;
        this.prefix = prefix;
        this.maxWordChars = maxWordChars;
        cleanText = normalizer[0];
        chineseChars = normalizer[1];
        stripAccents = normalizer[2];
        lowercase = normalizer[3];
        this.before = before;
        this.after = after;
        this.added = added;
        this.addedIds = addedIds;
        this.maxTokens = maxTokens;
    }

    /** The tokenizer a bundle's tokenizer.json describes, truncating at {@code maxTokens} ids. */
    @SuppressWarnings("unchecked")
    public static Tokenizer fromJson(byte[] raw, int maxTokens) {
        need(raw.length <= MAX_BYTES, "larger than " + MAX_BYTES + " bytes");
        Object parsed = Json.parse(raw, WHAT, Json.TOKENIZER_DEPTH);
        need(parsed instanceof Map, "must be a JSON object");
        Map<String, Object> spec = (Map<String, Object>) parsed;
        need(TOP_LEVEL.containsAll(spec.keySet()) && spec.containsKey("model"),
                "must be an object with 'model' and only the fields " + TOP_LEVEL);
        for (String key : new String[]{"truncation", "padding"})   // the SDK sets its own: checked for type only
            need(spec.get(key) == null || spec.get(key) instanceof Map, key + " must be an object or null");
        Map<String, Object> model = object(spec.get("model"), "model");
        need("WordPiece".equals(model.get("type")) && model.keySet().equals(Set.of("type", "unk_token",
                "continuing_subword_prefix", "max_input_chars_per_word", "vocab")), "model must be a WordPiece model");
        Map<String, Integer> vocab = vocabulary(object(model.get("vocab"), "vocab"));
        Object unk = model.get("unk_token"), maxWord = model.get("max_input_chars_per_word");
        need(vocab.containsKey(unk) && "##".equals(model.get("continuing_subword_prefix"))
                && maxWord instanceof Long && (Long) maxWord >= 1 && (Long) maxWord <= 1000,
                "unknown token, prefix or word length out of range");
        need(Map.of("type", "BertPreTokenizer").equals(spec.get("pre_tokenizer")), "pre-tokenizer must be a BertPreTokenizer");
        boolean[] normalizer = normalizer(spec.get("normalizer"));
        Object decoder = spec.get("decoder");
        need(decoder == null || (decoder instanceof Map && "WordPiece".equals(((Map<String, Object>) decoder).get("type"))),
                "decoder must be a WordPiece decoder");
        List<int[]> template = template(spec.get("post_processor"), vocab);
        need(template.get(0).length + template.get(1).length < maxTokens, "the template leaves no room for text");
        Object addedList = spec.getOrDefault("added_tokens", List.of());
        need(addedList instanceof List && ((List<Object>) addedList).size() <= MAX_ADDED,
                "added_tokens must be at most " + MAX_ADDED + " tokens");
        List<Map<String, Object>> rows = new ArrayList<>();
        for (Object o : (List<Object>) addedList) {
            Map<String, Object> t = object(o, "added token");
            Object id = t.get("id");
            need(isToken(t.get("content")) && id instanceof Long && (Long) id >= 0 && (Long) id < vocab.size()
                    && Boolean.FALSE.equals(t.get("single_word")) && Boolean.FALSE.equals(t.get("lstrip"))
                    && Boolean.FALSE.equals(t.get("rstrip")) && Boolean.FALSE.equals(t.get("normalized"))
                    && t.get("special") instanceof Boolean && t.size() == 7,
                    "added tokens must be short tokens of the vocabulary, matched as written");
            rows.add(t);
        }
        rows.sort((a, b) -> Integer.compare(((String) b.get("content")).length(), ((String) a.get("content")).length()));
        String[] added = new String[rows.size()];
        int[] addedIds = new int[rows.size()];
        for (int k = 0; k < added.length; k++) {
            added[k] = (String) rows.get(k).get("content");
            addedIds[k] = (int) (long) (Long) rows.get(k).get("id");
        }
        return new Tokenizer(vocab, vocab.get(unk), "##", (int) (long) (Long) maxWord, normalizer,
                template.get(0), template.get(1), added, addedIds, maxTokens);
    }

    /** Token ids of one text, with the template's special tokens, at most max_tokens of them. */
    /** Whether {@code word} is a whole token of the vocabulary (sdk.runtime.PhraseEmbedder.is_word). */
    public boolean isWord(String word) { return vocab.containsKey(word); }

    public int[] encode(String text) {
        List<Integer> ids = new ArrayList<>();
        int start = 0;
        for (int i = 0; i < text.length(); ) {
            int match = addedTokenAt(text, i);
            if (match < 0) { i++; continue; }
            wordPieces(text.substring(start, i), ids);
            ids.add(addedIds[match]);
            i += added[match].length();
            start = i;
        }
        wordPieces(text.substring(start), ids);
        int keep = Math.min(ids.size(), maxTokens - before.length - after.length);
        int[] out = new int[before.length + keep + after.length];
        System.arraycopy(before, 0, out, 0, before.length);
        for (int k = 0; k < keep; k++) out[before.length + k] = ids.get(k);
        System.arraycopy(after, 0, out, before.length + keep, after.length);
        return out;
    }

    private int addedTokenAt(String text, int i) {
        for (int k = 0; k < added.length; k++) if (text.startsWith(added[k], i)) return k;  // longest first
        return -1;
    }

    private void wordPieces(String piece, List<Integer> ids) {
        if (piece.isEmpty()) return;
        for (String word : preTokenize(normalize(piece))) {
            int[] cps = word.codePoints().toArray();
            if (cps.length > maxWordChars) { ids.add(unknown); continue; }
            List<Integer> pieces = new ArrayList<>();
            boolean bad = false;
            for (int begin = 0; begin < cps.length && !bad; ) {
                int end = cps.length;
                Integer id = null;
                for (; end > begin; end--) {
                    String sub = new String(cps, begin, end - begin);
                    id = vocab.get(begin > 0 ? prefix + sub : sub);
                    if (id != null) break;
                }
                if (id == null) bad = true;
                else { pieces.add(id); begin = end; }
            }
            if (bad) ids.add(unknown); else ids.addAll(pieces);
        }
    }

    /** The BertNormalizer with the file's flags. */
    String normalize(String text) {
        StringBuilder b = new StringBuilder(text.length() + 8);
        text.codePoints().forEach(cp -> {
            if (cleanText) {
                if (cp == 0 || cp == 0xFFFD || isControl(cp)) return;
                if (isWhitespace(cp)) cp = ' ';
            }
            if (chineseChars && isChinese(cp)) b.append(' ').appendCodePoint(cp).append(' ');
            else b.appendCodePoint(cp);
        });
        String s = b.toString();
        if (stripAccents) {
            StringBuilder kept = new StringBuilder(s.length());
            Normalizer.normalize(s, Normalizer.Form.NFD).codePoints()
                    .filter(cp -> Character.getType(cp) != Character.NON_SPACING_MARK).forEach(kept::appendCodePoint);
            s = kept.toString();
        }
        if (lowercase) {  // character by character, as Rust's char::to_lowercase (no final-sigma context)
            StringBuilder lower = new StringBuilder(s.length());
            s.codePoints().forEach(cp -> lower.append(new String(Character.toChars(cp)).toLowerCase(Locale.ROOT)));
            s = lower.toString();
        }
        return s;
    }

    /** The BertPreTokenizer: words split on whitespace, each punctuation character a word of its own. */
    static List<String> preTokenize(String text) {
        List<String> words = new ArrayList<>();
        StringBuilder word = new StringBuilder();
        text.codePoints().forEach(cp -> {
            if (isWhitespace(cp) || isPunctuation(cp)) {
                if (word.length() > 0) { words.add(word.toString()); word.setLength(0); }
                if (!isWhitespace(cp)) words.add(new String(Character.toChars(cp)));
            } else {
                word.appendCodePoint(cp);
            }
        });
        if (word.length() > 0) words.add(word.toString());
        return words;
    }

    /** Unicode White_Space (Rust's char::is_whitespace). */
    static boolean isWhitespace(int cp) {
        return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680
                || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F
                || cp == 0x3000;
    }

    /** Other (C*) but tab, newline and carriage return, which count as whitespace. */
    static boolean isControl(int cp) {
        if (cp == '\t' || cp == '\n' || cp == '\r') return false;
        int type = Character.getType(cp);
        return type == Character.CONTROL || type == Character.FORMAT || type == Character.PRIVATE_USE
                || type == Character.SURROGATE || type == Character.UNASSIGNED;
    }

    /** ASCII punctuation (symbols such as $ + < = > ^ ` | ~ included) or a Unicode P* character. */
    static boolean isPunctuation(int cp) {
        if (cp < 128) return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126);
        switch (Character.getType(cp)) {
            case Character.CONNECTOR_PUNCTUATION: case Character.DASH_PUNCTUATION: case Character.START_PUNCTUATION:
            case Character.END_PUNCTUATION: case Character.INITIAL_QUOTE_PUNCTUATION:
            case Character.FINAL_QUOTE_PUNCTUATION: case Character.OTHER_PUNCTUATION:
                return true;
            default:
                return false;
        }
    }

    /** The CJK ideograph blocks BERT pads with spaces (not Hangul, Hiragana or Katakana). */
    static boolean isChinese(int cp) {
        return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF)
                || (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF)
                || (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
    }

    private static Map<String, Integer> vocabulary(Map<String, Object> raw) {
        need(raw.size() > 0 && raw.size() <= MAX_VOCAB, "vocabulary must have 1-" + MAX_VOCAB + " tokens");
        Map<String, Integer> vocab = new HashMap<>(raw.size() * 2);
        boolean[] seen = new boolean[raw.size()];
        for (Map.Entry<String, Object> e : raw.entrySet()) {
            Object id = e.getValue();
            need(isToken(e.getKey()) && id instanceof Long && (Long) id >= 0 && (Long) id < raw.size()
                    && !seen[(int) (long) (Long) id], "vocabulary ids must be 0..N-1, each once, of short tokens");
            seen[(int) (long) (Long) id] = true;
            vocab.put(e.getKey(), (int) (long) (Long) id);
        }
        return vocab;
    }

    /** clean_text, handle_chinese_chars, strip_accents (null: as lowercase), lowercase; all off without one. */
    @SuppressWarnings("unchecked")
    private static boolean[] normalizer(Object o) {
        if (o == null) return new boolean[4];
        Map<String, Object> n = object(o, "normalizer");
        need("BertNormalizer".equals(n.get("type")) && n.keySet().equals(Set.of("type", "clean_text",
                "handle_chinese_chars", "strip_accents", "lowercase")) && n.get("clean_text") instanceof Boolean
                && n.get("handle_chinese_chars") instanceof Boolean && n.get("lowercase") instanceof Boolean
                && (n.get("strip_accents") == null || n.get("strip_accents") instanceof Boolean),
                "normalizer must be a BertNormalizer");
        boolean lower = (Boolean) n.get("lowercase");
        Object strip = n.get("strip_accents");
        return new boolean[]{(Boolean) n.get("clean_text"), (Boolean) n.get("handle_chinese_chars"),
                strip == null ? lower : (Boolean) strip, lower};
    }

    /** [ids before the text, ids after it] of the post-processor's single-sequence template. */
    @SuppressWarnings("unchecked")
    private static List<int[]> template(Object o, Map<String, Integer> vocab) {
        if (o == null) return List.of(new int[0], new int[0]);
        Map<String, Object> post = object(o, "post_processor");
        if ("BertProcessing".equals(post.get("type"))) {
            need(post.keySet().equals(Set.of("type", "sep", "cls")), "BertProcessing must name [SEP] and [CLS]");
            return List.of(new int[]{special(post.get("cls"), vocab)}, new int[]{special(post.get("sep"), vocab)});
        }
        need("TemplateProcessing".equals(post.get("type"))
                && post.keySet().equals(Set.of("type", "single", "pair", "special_tokens")),
                "post-processor must be TemplateProcessing or BertProcessing");
        Map<String, Object> specials = object(post.get("special_tokens"), "special_tokens");
        need(post.get("single") instanceof List && ((List<Object>) post.get("single")).size() <= 16,
                "template 'single' must be a short list");
        List<Integer> before = new ArrayList<>(), after = new ArrayList<>();
        int sequences = 0;
        for (Object item : (List<Object>) post.get("single")) {
            Map<String, Object> piece = object(item, "template item");
            need(piece.size() == 1, "template items must be a SpecialToken or a Sequence");
            if (piece.containsKey("Sequence")) {
                need("A".equals(object(piece.get("Sequence"), "Sequence").get("id")), "the single template reads sequence A");
                sequences++;
                continue;
            }
            Object name = object(piece.get("SpecialToken"), "SpecialToken").get("id");
            need(name instanceof String && specials.get(name) instanceof Map, "template names an unknown special token");
            Map<String, Object> s = (Map<String, Object>) specials.get(name);
            need(s.get("ids") instanceof List && s.get("tokens") instanceof List
                    && ((List<Object>) s.get("ids")).size() == ((List<Object>) s.get("tokens")).size()
                    && ((List<Object>) s.get("ids")).size() <= 4, "special tokens must list their ids and tokens");
            for (int k = 0; k < ((List<Object>) s.get("ids")).size(); k++) {
                Object token = ((List<Object>) s.get("tokens")).get(k), id = ((List<Object>) s.get("ids")).get(k);
                need(vocab.containsKey(token) && id instanceof Long && vocab.get(token) == (long) (Long) id,
                        "special tokens must be tokens of the vocabulary with their ids");
                (sequences == 0 ? before : after).add(vocab.get(token));
            }
        }
        need(sequences == 1, "the single template must hold sequence A once");
        return List.of(before.stream().mapToInt(Integer::intValue).toArray(),
                after.stream().mapToInt(Integer::intValue).toArray());
    }

    @SuppressWarnings("unchecked")
    private static int special(Object pair, Map<String, Integer> vocab) {
        need(pair instanceof List && ((List<Object>) pair).size() == 2, "BertProcessing must name [SEP] and [CLS]");
        Object token = ((List<Object>) pair).get(0), id = ((List<Object>) pair).get(1);
        need(vocab.containsKey(token) && id instanceof Long && vocab.get(token) == (long) (Long) id,
                "BertProcessing must name tokens of the vocabulary with their ids");
        return vocab.get(token);
    }

    private static boolean isToken(Object o) {
        if (!(o instanceof String)) return false;
        int chars = ((String) o).codePointCount(0, ((String) o).length());  // as Python's len()
        return chars > 0 && chars <= MAX_TOKEN_CHARS;
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> object(Object o, String what) {
        need(o instanceof Map, what + " must be an object");
        return (Map<String, Object>) o;
    }

    private static void need(boolean ok, String message) {
        if (!ok) throw new BundleException(WHAT + ": " + message);
    }

    @Override
    public String toString() {
        return "Tokenizer(WordPiece, " + vocab.size() + " tokens, max " + maxTokens + ", added " + Arrays.toString(added) + ")";
    }
}
