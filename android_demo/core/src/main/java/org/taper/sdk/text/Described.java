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
    /** Rule 6b: sdk.text.resolver.described's INNER_NEGATIONS, NEGATION_FROM, NEGATION_LEADS, NEGATION_ENDS, RELATIVES. */
    static final Set<String> INNER_NEGATIONS = Set.of("not", "no", "without", "never", "cannot", "isn't", "aren't",
            "doesn't", "don't", "can't", "hasn't", "haven't", "won't", "didn't", "wasn't", "weren't");
    static final int NEGATION_FROM = 2;
    static final Set<String> NEGATION_LEADS = Set.of("is", "are", "was", "were", "be", "does", "do", "did", "has", "have",
            "had", "can", "could", "will", "would", "with");
    static final Set<String> NEGATION_ENDS = Set.of("and", "but", "that", "which", "who", "with");
    static final Set<String> RELATIVES = Set.of("that", "which", "who");
    /** sdk.text.resolver.described's LACKING, CLAUSE_MARKS, NON_WORD and ASCII_SPACE (a class's own description). */
    static final Set<String> LACKING = Set.of("not", "no", "without", "never", "cannot", "lacking", "lacks", "lack");
    static final java.util.regex.Pattern CLAUSE_MARKS = java.util.regex.Pattern.compile("[,;:.()]");
    static final java.util.regex.Pattern NON_WORD = java.util.regex.Pattern.compile("(?<![A-Za-z])[Nn][Oo][Nn]-[A-Za-z]+");
    static final java.util.regex.Pattern ASCII_SPACE = java.util.regex.Pattern.compile("[ \\t\\n\\r\\f\\x0b]+");

    /** A class's description without what it says the class is not or lacks (Python's affirmed()). */
    public static String affirmed(String description) {
        List<String> kept = new ArrayList<>();
        for (String clause : CLAUSE_MARKS.split(NON_WORD.matcher(description).replaceAll(" "), -1)) {
            boolean negated = false;
            for (String word : ASCII_SPACE.split(clause, -1)) {
                boolean ascii = word.chars().allMatch(ch -> ch < 128);
                String lower = ascii ? word.toLowerCase(java.util.Locale.ROOT) : "";
                if (LACKING.contains(lower)) negated = true;
                else if (NEGATION_ENDS.contains(lower)) negated = false;
                if (!word.isEmpty() && !negated) kept.add(word);
            }
        }
        return String.join(" ", kept);
    }
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

    /**
     * Rule 6b: {the rest, the negated part} of a normalised phrase that describes one kind of thing and says what it
     * is not or lacks, or null (Python's negation()).
     */
    public static String[] negation(String key) {
        if (!describesOne(key)) return null;
        String[] words = key.split(" ", -1);
        int at = -1;
        for (int i = NEGATION_FROM; i < words.length && at < 0; i++) if (INNER_NEGATIONS.contains(words[i])) at = i;
        if (at < 0) return null;
        int start = at;
        while (start > NEGATION_FROM && NEGATION_LEADS.contains(words[start - 1])) start--;
        int end = words.length;
        for (int j = at + 1; j < words.length && end == words.length; j++) if (NEGATION_ENDS.contains(words[j])) end = j;
        int from = end < words.length && (words[end].equals("and") || words[end].equals("but")) ? end + 1 : end;
        List<String> rest = new ArrayList<>(List.of(words).subList(0, start));
        List<String> after = List.of(words).subList(from, words.length);
        if (after.isEmpty()) while (!rest.isEmpty() && RELATIVES.contains(rest.get(rest.size() - 1))) rest.remove(rest.size() - 1);
        String negated = String.join(" ", List.of(words).subList(at + 1, end));
        if (rest.size() < 2 || contentStems(negated).isEmpty()) return null;
        rest.addAll(after);
        return new String[] {String.join(" ", rest), negated};
    }

    /**
     * The positions kept (in candidate order) and the words that decided, or null (Python's described()); a word of
     * {@code negated} (rule 6b) counts for the candidates that lack it.
     */
    static Result described(String key, String negated, List<Set<String>> classStems) {
        double[] evidence = new double[classStems.size()];
        List<String> deciding = new ArrayList<>();
        List<String> against = contentStems(negated);
        List<String> words = new ArrayList<>(contentStems(key));
        words.addAll(against);
        int positive = words.size() - against.size();
        for (int w = 0; w < words.size(); w++) {
            String word = words.get(w);
            boolean lacking = w >= positive;
            List<Integer> hits = new ArrayList<>();
            for (int i = 0; i < classStems.size(); i++) if (matchesAny(word, classStems.get(i)) != lacking) hits.add(i);
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
        List<String> said = new ArrayList<>();
        for (String w : deciding)
            for (int i : kept) if (matchesAny(w, classStems.get(i)) != against.contains(w)) { said.add(w); break; }
        return new Result(kept, said);
    }

    /** Positions into the candidates, and the phrase's words that decided. */
    record Result(List<Integer> positions, List<String> words) {}
}
