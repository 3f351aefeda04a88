package org.taper.sdk.text;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * Rule 6, a described kind of thing picked by the words its description shares with a class's: the mirror of
 * sdk/text/resolver/described.py (the same cut into words, stems, matches and weights; export.golden's "described"
 * and "words" cases hold both to it). TaskResolver.narrowed gathers each candidate's words.
 */
public final class Described {
    private Described() {}

    /** sdk.text.resolver.described's SUFFIXES, MIN_STEM, MIN_PREFIX, MIN_WORDS, OPENING and TIE. */
    static final List<String> SUFFIXES = List.of("ing", "ed", "es", "s", "ly");
    static final int MIN_STEM = 3, MIN_PREFIX = 5, MIN_WORDS = 3;
    static final Set<String> OPENING = Set.of("a", "an");
    static final double TIE = 1e-9;
    /** sdk.text.resolver.STOP_WORDS: GLOSS_WORDS and the words that say nothing of what a class is. */
    static final Set<String> STOP_WORDS = stopWords();

    private static Set<String> stopWords() {
        Set<String> words = new HashSet<>(TaskResolver.GLOSS_WORDS);
        words.addAll(List.of("and", "or", "but", "not", "nor", "into", "onto", "over", "under", "about", "as", "like",
                "than", "where", "when", "what", "whom", "has", "have", "had", "is", "are", "was", "were", "be", "been",
                "being", "it", "its", "they", "them", "their", "you", "your", "one", "ones", "can", "cannot", "could",
                "may", "might", "will", "would", "does", "do", "did", "very", "any", "some", "all", "each", "other",
                "such", "often", "usually", "especially", "typically", "various", "use", "used", "uses", "thing",
                "things", "kind", "kinds", "type", "sort", "also", "etc", "this", "these", "those", "there", "here",
                "so", "too", "more", "most", "much"));
        return Set.copyOf(words);
    }

    /** Whether a normalised phrase describes one kind of thing: "a"/"an" first, then at least two words. */
    static boolean describesOne(String key) {
        String[] words = key.split(" ", -1);
        return words.length >= MIN_WORDS && OPENING.contains(words[0]);
    }

    /** The runs of ASCII letters, lower-cased, each hyphenated run also joined ("dog-like": dog, like, doglike). */
    static List<String> letterWords(String text) {
        List<String> out = new ArrayList<>();
        List<String> run = new ArrayList<>();
        StringBuilder word = new StringBuilder();
        String padded = text + " ";
        for (int i = 0; i < padded.length(); i++) {
            char ch = padded.charAt(i);
            if (ch >= 'A' && ch <= 'Z' || ch >= 'a' && ch <= 'z') {
                word.append(Character.toLowerCase(ch));
                continue;
            }
            if (word.length() > 0) {
                run.add(word.toString());
                out.add(word.toString());
                word.setLength(0);
            }
            if (ch != '-') {
                if (run.size() > 1) out.add(String.join("", run));
                run.clear();
            }
        }
        return out;
    }

    /** The word with one of SUFFIXES cut, if at least MIN_STEM letters remain. */
    static String stem(String word) {
        for (String suffix : SUFFIXES)
            if (word.endsWith(suffix) && word.length() - suffix.length() >= MIN_STEM)
                return word.substring(0, word.length() - suffix.length());
        return word;
    }

    /** The stems of the words that carry meaning (no stop word, none under MIN_STEM letters), each once, in order. */
    public static List<String> contentStems(String text) {
        List<String> out = new ArrayList<>();
        for (String word : letterWords(text))
            if (word.length() >= MIN_STEM && !STOP_WORDS.contains(word) && !out.contains(stem(word))) out.add(stem(word));
        return out;
    }

    /** Two stems are one word: equal, or one begins the other and is MIN_PREFIX letters at least. */
    static boolean matches(String a, String b) {
        if (a.equals(b)) return true;
        String shorter = a.length() <= b.length() ? a : b, longer = a.length() <= b.length() ? b : a;
        return shorter.length() >= MIN_PREFIX && longer.startsWith(shorter);
    }

    private static boolean matchesAny(String word, Set<String> stems) {
        for (String s : stems) if (matches(word, s)) return true;
        return false;
    }

    /** The positions kept (in candidate order) and the words that decided, or null (Python's described()). */
    static Result described(String key, List<Set<String>> classStems) {
        double[] evidence = new double[classStems.size()];
        List<String> deciding = new ArrayList<>();
        for (String word : contentStems(key)) {
            List<Integer> hits = new ArrayList<>();
            for (int i = 0; i < classStems.size(); i++) if (matchesAny(word, classStems.get(i))) hits.add(i);
            if (hits.isEmpty() || hits.size() == classStems.size()) continue;
            deciding.add(word);
            for (int i : hits) evidence[i] += 1.0 / hits.size();
        }
        double best = 0;
        for (double e : evidence) best = Math.max(best, e);
        if (best <= 0) return null;
        List<Integer> kept = new ArrayList<>();
        for (int i = 0; i < evidence.length; i++) if (evidence[i] >= best - TIE) kept.add(i);
        if (kept.size() == evidence.length) return null;
        List<String> words = new ArrayList<>();
        for (String w : deciding)
            for (int i : kept) if (matchesAny(w, classStems.get(i))) { words.add(w); break; }
        return new Result(kept, words);
    }

    /** Positions into the candidates, and the phrase's words that decided. */
    record Result(List<Integer> positions, List<String> words) {}
}
