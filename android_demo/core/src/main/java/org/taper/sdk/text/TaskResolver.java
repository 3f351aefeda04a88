package org.taper.sdk.text;

import org.taper.sdk.format.Concept;
import java.nio.FloatBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Function;
import java.util.stream.Collectors;

/**
 * Description -> task, with the rules and thresholds of sdk/text/resolver/ (read its docstring for the why):
 * a list of class names must name classes exactly; a comma list, and an item joined by "and", "or" or
 * "&" that is not itself a name, is resolved item by item; a group name (super-category, any name of a
 * concept, hierarchy node; plurals made singular) takes the group; a class name takes it and its
 * nearest neighbours; a phrase built from two groups ("small mammals", "non-insect invertebrates",
 * "Y except X") takes their intersection or difference (rule 3b); other text is embedded: unless the
 * best class stands out from the mean by less than {@code minContrast} ("nothing matches"), the nearest
 * concept of at most {@code maxClasses} classes is taken (with those within {@link #CONCEPT_MARGIN}) if
 * it is at least as near as the best class, else the classes within {@code margin} of the best; the
 * task is padded to {@code minClasses} (by default 1: a task of one class, whose model answers it or anything
 * else, {@link org.taper.sdk.RestHead}); its embedding is the normalised mean of its classes'
 * embeddings. Invalid text or options raise {@link DescriptionException}.
 */
public final class TaskResolver {
    static final int MAX_DESCRIPTION_CHARS = 1000, MAX_CLASS_LIST = 10_000, MAX_GROUP_CLASSES = 100;
    /** sdk.text.resolver.CONCEPT_MARGIN, SUPERSET_RATIO and CONJUNCTIONS. */
    static final double CONCEPT_MARGIN = 0.03;
    static final int SUPERSET_RATIO = 2;
    static final Set<String> CONJUNCTIONS = Set.of("and", "or", "&", "/");
    /** sdk.text.resolver.words: GLUED_CONJUNCTIONS, END_MARKS and QUOTES (rule 2). */
    static final List<String> GLUED_CONJUNCTIONS = List.of("&", "/");
    static final String END_MARKS = "!?.\u2026";
    static final Map<Integer, Integer> QUOTES = Map.of((int) '"', (int) '"', (int) '\'', (int) '\'', 0x201C, 0x201D,
                                                       0x2018, 0x2019);
    /** sdk.text.resolver.GLOSS_WORDS: an item holding one is a gloss, not cut at its conjunctions. */
    static final Set<String> GLOSS_WORDS = Set.of("a", "an", "the", "with", "without", "of", "for", "in", "on", "at",
            "to", "from", "by", "that", "which", "who", "whose", "having");
    /** sdk.text.resolver.words.APPOSITIVE_OPENERS and PARTICIPLE_ENDINGS (rule 2: a comma part that describes):
     * GLOSS_WORDS but the articles and "without", which opens an exclusion. */
    static final Set<String> APPOSITIVE_OPENERS = GLOSS_WORDS.stream()
            .filter(w -> !Set.of("a", "an", "the", "without").contains(w)).collect(Collectors.toUnmodifiableSet());
    static final Map<String, Integer> PARTICIPLE_ENDINGS = Map.of("ed", 4, "ing", 5);
    /** sdk.text.resolver.MISSING: rule 4a's words in a resolution. */
    static final String MISSING = "not a name this bundle knows";
    /** Rule 3's relation for a group name only WordNet-derived concepts give (Python's options.DERIVED). */
    static final String DERIVED = "from WordNet: a kind of thing each of its classes is";
    /** How to have a missing item anyway: few-shot enrollment (Python's sdk.personalize examples=). */
    static final String ADD_IT = "to add it, give a few photos of it as examples";
    /** sdk.text.resolver.CLOSEST_NAMES, SPELLING_MIN_CHARS and SPELLING_LONG_CHARS (rules 4a and 3c). */
    /** sdk.text.resolver.DESCRIBING_NOUNS: a phrase ending in one describes rather than names a missing item. */
    static final Set<String> DESCRIBING_NOUNS = Set.of("animals", "things", "creatures", "stuff", "items", "objects");
    /** sdk.text.resolver.DESCRIBING_WORDS beyond GLOSS_WORDS: a phrase holding one describes ("my pets"). */
    static final Set<String> DESCRIBING_WORDS = Set.of("my", "our", "your", "their", "his", "her", "its", "some", "all",
            "any", "every", "different", "kind", "kinds", "type", "types", "sort", "sorts");
    static final int CLOSEST_NAMES = 3, SPELLING_MIN_CHARS = 4, SPELLING_LONG_CHARS = 8;
    /** sdk.text.resolver.EXCLUSION_PREFIX, EXCLUSION_WORDS and KIND_NOUNS (the composition rule 3b). */
    static final String EXCLUSION_PREFIX = "non-";
    static final List<String> OPENING_EXCLUSIONS = List.of("except for", "except", "excluding", "but not", "but no",
            "other than", "apart from", "aside from", "without");
    static final List<String> EXCLUSION_WORDS = concat(OPENING_EXCLUSIONS, List.of("besides", "minus", "not including",
            "that are not",
            "that aren't", "which are not", "which aren't", "that is not", "that isn't", "which is not", "which isn't"));
    /** sdk.text.resolver.QUANTIFIERS and QUANTIFIED_EXCLUSION: read past before an exclusion; "but" after one. */
    static final List<String> QUANTIFIERS = List.of("all", "every", "any");
    static final String QUANTIFIED_EXCLUSION = "but";
    static final List<String> KIND_NOUNS = List.of("animals", "things", "creatures");
    /** sdk.text.resolver.NEGATIONS and EVERYTHING, and composition.NEGATED_STARTS (rule 2b: what an item leaves out). */
    static final List<String> NEGATIONS = concat(List.of("not", "no"), OPENING_EXCLUSIONS);
    static final List<String> EVERYTHING = List.of("everything", "anything", "all", "things", "something", "a thing");
    /** sdk.text.resolver.ARTICLES: rules 1, 3b and 4b read a name past one. */
    static final List<String> ARTICLES = List.of("a", "an", "the");
    static final List<String> NEGATED_STARTS = negatedStarts();

    private static List<String> concat(List<String> a, List<String> b) {
        List<String> out = new ArrayList<>(a);
        out.addAll(b);
        return List.copyOf(out);
    }

    private static List<String> negatedStarts() {
        List<String> starts = new ArrayList<>(NEGATIONS);
        for (String e : EVERYTHING) {
            for (String m : EXCLUSION_WORDS) starts.add(e + " " + m);
            starts.add(e + " but");
        }
        return List.copyOf(starts);
    }
    private static final Map<String, String> IRREGULAR_PLURALS = Map.ofEntries(
            Map.entry("geese", "goose"), Map.entry("mice", "mouse"), Map.entry("lice", "louse"),
            Map.entry("teeth", "tooth"), Map.entry("feet", "foot"), Map.entry("oxen", "ox"),
            Map.entry("children", "child"), Map.entry("men", "man"), Map.entry("women", "woman"),
            Map.entry("people", "person"), Map.entry("dice", "die"), Map.entry("cacti", "cactus"),
            Map.entry("fungi", "fungus"), Map.entry("octopi", "octopus"), Map.entry("larvae", "larva"),
            Map.entry("antennae", "antenna"), Map.entry("wolves", "wolf"), Map.entry("knives", "knife"),
            Map.entry("leaves", "leaf"), Map.entry("loaves", "loaf"), Map.entry("halves", "half"),
            Map.entry("shelves", "shelf"), Map.entry("calves", "calf"), Map.entry("thieves", "thief"),
            Map.entry("wives", "wife"), Map.entry("lives", "life"), Map.entry("scarves", "scarf"),
            Map.entry("hooves", "hoof"));

    /** A resolved task: sorted class indices, the unit task embedding, how each part was read. */
    public static final class Task {
        public final int[] classes;
        public final float[] embedding;
        public final List<String> how;
        public final double encodeMs;

        Task(int[] classes, float[] embedding, List<String> how, double encodeMs) {
            this.classes = classes;
            this.embedding = embedding;
            this.how = how;
            this.encodeMs = encodeMs;
        }
    }

    private final List<String> names;
    private final FloatBuffer embeddings;
    private final int dim;
    private final Function<String, float[]> embedPhrase;
    private final List<Concept> concepts;
    private final FloatBuffer conceptEmbeddings;
    private final Map<String, Integer> byName = new HashMap<>();
    private final Map<String, List<Integer>> groups = new LinkedHashMap<>();
    /** Every class and group name, in code-point order (rule 3c), and every word of them (rule 4a). */
    private final List<String> allNames = new ArrayList<>();
    /** Rule 3c (sdk.text.resolver.names.Names.closed): a name without its spaces -> the name (the first sorted). */
    private final Map<String, String> closed = new HashMap<>();
    private final Set<String> words = new java.util.HashSet<>();
    /** Rule 3c: a word of the text encoder's vocabulary is real, never corrected (Tokenizer.isWord) ... */
    private final java.util.function.Predicate<String> isWord;
    /** ... and so is one of WordNet's (EnglishWords.shipped(), read on first use). */
    private final java.util.function.Supplier<Set<String>> englishWords;
    /** The group names made from a plural one ("puppy" for "puppies"): no modifier in rule 3b. */
    private final Set<String> singulars = new java.util.HashSet<>();
    private final Set<String> derived = new java.util.HashSet<>();   // group names only derived concepts give
    /** Rule 4a: two-word nouns that are no kind of their last word ("hot dog"; Compounds.shipped()). */
    private final Set<String> exocentric;
    /** Rule 3d: the last word of class names with a space -> those classes. */
    private final Map<String, List<Integer>> heads = new HashMap<>();
    /** Rule 4b: a kind below a concept that no class is -> the index of the first concept listing it. */
    private final Map<String, Integer> kinds = new HashMap<>();
    /** Rule 6: each class's word stems (names, aliases, description), each concept's, and the concepts holding a class. */
    private final List<Set<String>> ownStems = new ArrayList<>();
    private final List<Set<String>> conceptStems = new ArrayList<>();
    private final List<Set<Integer>> conceptMembers = new ArrayList<>();
    private final List<List<Integer>> holders = new ArrayList<>();

    /**
     * @param aliases each class's other names (Bundle.classAliases)
     * @param descriptions each class's one-line description, "" if none (Bundle.classDescriptions; rule 6)
     * @param isWord whether a word is a whole token of the text encoder's vocabulary (Tokenizer.isWord)
     * @param embedPhrase a description's unit embedding (the text encoder with the first prompt)
     * @param concepts the bundle's concepts (empty before format 5), with their embeddings [concepts, dim]
     * @param exocentric compounds that are no kind of their last word (Compounds.shipped())
     * @param englishWords real words beyond the encoder's vocabulary, never corrected (EnglishWords::shipped)
     */
    public TaskResolver(List<String> ids, List<String> names, List<List<String>> aliases, List<String> descriptions,
                        List<List<String>> paths, Map<String, int[]> supercategories, FloatBuffer embeddings, int dim,
                        Function<String, float[]> embedPhrase, List<Concept> concepts, FloatBuffer conceptEmbeddings,
                        java.util.function.Predicate<String> isWord, Set<String> exocentric,
                        java.util.function.Supplier<Set<String>> englishWords) {
        this.isWord = isWord;
        this.englishWords = englishWords;
        this.exocentric = exocentric;
        this.names = names;
        this.embeddings = embeddings;
        this.dim = dim;
        this.embedPhrase = embedPhrase;
        this.concepts = concepts;
        this.conceptEmbeddings = conceptEmbeddings;
        for (int i = 0; i < names.size(); i++) {
            List<String> keys = new ArrayList<>(List.of(ids.get(i), names.get(i)));
            keys.addAll(aliases.get(i));
            for (String key : keys) byName.putIfAbsent(norm(key), i);
        }
        // The author's concepts before WordNet-derived ones, primary names first; concepts sharing a name merge; a
        // derived concept takes no name the author's give in either number ("dog" for the author's 'dogs').
        Set<String> authoredSingulars = new java.util.HashSet<>();
        for (boolean fromWordNet : new boolean[]{false, true}) {
            if (fromWordNet) for (String name : groups.keySet()) authoredSingulars.addAll(singularForms(name));
            for (boolean synonyms : new boolean[]{false, true}) {
                Map<String, TreeSet<Integer>> named = new LinkedHashMap<>();
                for (Concept concept : concepts) {
                    if (concept.derived() != fromWordNet) continue;
                    List<String> these = synonyms ? concept.names().subList(1, concept.names().size()) : concept.names().subList(0, 1);
                    for (String name : these) {
                        TreeSet<Integer> members = named.computeIfAbsent(norm(name), k -> new TreeSet<>());
                        for (int c : concept.members()) members.add(c);
                    }
                }
                for (Map.Entry<String, TreeSet<Integer>> e : named.entrySet()) {
                    if (groups.containsKey(e.getKey()) || authoredSingulars.contains(e.getKey())) continue;
                    groups.put(e.getKey(), new ArrayList<>(e.getValue()));
                    if (fromWordNet) derived.add(e.getKey());
                }
            }
        }
        Map<String, List<Integer>> nodes = new LinkedHashMap<>();
        for (int i = 0; i < paths.size(); i++) {
            List<String> path = paths.get(i);
            for (String node : path.subList(0, path.size() - 1)) nodes.computeIfAbsent(norm(node), k -> new ArrayList<>()).add(i);
        }
        for (Map.Entry<String, List<Integer>> e : nodes.entrySet()) {
            groups.putIfAbsent(e.getKey(), e.getValue());
            derived.remove(e.getKey());   // the hierarchy's own word too: not only WordNet's
        }
        for (Map.Entry<String, int[]> e : supercategories.entrySet()) {
            List<Integer> members = new ArrayList<>();
            for (int c : e.getValue()) members.add(c);
            groups.put(norm(e.getKey()), members);
            derived.remove(norm(e.getKey()));
        }
        for (String name : new ArrayList<>(groups.keySet())) {  // "puppies" (a group's alias) also answers "puppy"
            for (String form : singularForms(name)) {  // every reading: "automobiles" -> "automobil", "automobile"
                if (!groups.containsKey(form) && !byName.containsKey(form)) {
                    groups.put(form, groups.get(name));
                    singulars.add(form);
                    if (derived.contains(name)) derived.add(form);
                }
            }
        }
        for (Map.Entry<String, Integer> e : byName.entrySet()) {  // rule 3d: "train" -> the classes named "... train"
            int space = e.getKey().lastIndexOf(' ');
            if (space < 0) continue;
            List<Integer> members = heads.computeIfAbsent(e.getKey().substring(space + 1), k -> new ArrayList<>());
            if (!members.contains(e.getValue())) members.add(e.getValue());
        }
        java.util.TreeSet<String> sorted = new java.util.TreeSet<>(TaskResolver::compareCodePoints);
        sorted.addAll(byName.keySet());
        sorted.addAll(groups.keySet());
        allNames.addAll(sorted);
        for (String name : allNames) {
            words.addAll(Arrays.asList(name.split(" ", -1)));
            closed.putIfAbsent(name.replace(" ", ""), name);
        }
        for (int i = 0; i < concepts.size(); i++) for (String name : concepts.get(i).kinds()) kinds.putIfAbsent(norm(name), i);
        for (int i = 0; i < names.size(); i++) {
            List<String> texts = new ArrayList<>(List.of(names.get(i)));
            texts.addAll(aliases.get(i));
            texts.add(Described.affirmed(descriptions.get(i)));   // not what it says the class lacks
            ownStems.add(new HashSet<>(Described.contentStems(String.join(" ", texts))));
            holders.add(new ArrayList<>());
        }
        for (int k = 0; k < concepts.size(); k++) {
            conceptStems.add(new HashSet<>(Described.contentStems(String.join(" ", concepts.get(k).names()))));
            Set<Integer> members = new HashSet<>();
            for (int member : concepts.get(k).members()) {
                holders.get(member).add(k);
                members.add(member);
            }
            conceptMembers.add(members);
        }
    }

    /** Rule 6b: the classes a negated part takes if it is a name here (a group or a class), or names joined by "and"
     *  or "or" (rule 2's cut), else null (Python's _negated_names). */
    private Set<Integer> negatedNames(String text) {
        String key = norm(text);
        Set<Integer> found = classesNamed(key);
        List<String> parts = found == null ? conjuncts(key) : List.of(key);
        if (parts.size() > 1) {
            Set<Integer> union = new HashSet<>();
            for (String part : parts) {
                Set<Integer> each = negatedNames(part);
                if (each == null) return null;
                union.addAll(each);
            }
            return union;
        }
        if (found != null || allReal(key)) return found;
        String fixed = spelled(withoutArticle(key));   // a typo, as rule 3c reads one: "not a chihuaha"
        return fixed == null ? null : classesNamed(fixed);
    }

    /** Rule 3c (Python's TaskResolver._all_real): whether every word of the key is real, so that none is corrected. */
    private boolean allReal(String key) {
        for (String w : key.split(" ", -1)) if (!real(w)) return false;
        return true;
    }

    /** Rule 3c's edit (Python's TaskResolver._spelled): the name near the key, else near one of its singulars; null. */
    private String spelled(String key) {
        String fixed = spelling(key);
        for (String form : singularForms(key)) if (fixed == null) fixed = spelling(form);
        return fixed;
    }

    /** The classes a group or class name takes (past an article too), or null if the key names none (Python's
     *  Names.classes_named). */
    private Set<Integer> classesNamed(String key) {
        Map.Entry<String, List<Integer>> found = group(key);
        if (found != null) return new HashSet<>(found.getValue());
        for (String f : forms(key)) if (byName.containsKey(f)) return Set.of(byName.get(f));
        return null;
    }

    /** Rule 6's answer: the candidates kept, and how the resolution says so. */
    public record Narrowed(List<Integer> kept, String said) {}

    /**
     * Rule 6 (Described): of the candidates rules 4 or 5 took, those whose words say what the normalised phrase
     * {@code key} says and lack what {@code negated} says (rule 6b; "" for none), and how that is said; null if no
     * word tells some from the rest (Python's TaskResolver.narrowed; public for the golden test).
     */
    public Narrowed narrowed(String key, List<Integer> candidates, String negated) {
        if (candidates.size() < 2) return null;
        Set<Integer> every = new HashSet<>(candidates);
        List<Set<String>> stems = new ArrayList<>();
        for (int c : candidates) {
            Set<String> these = new HashSet<>(ownStems.get(c));
            for (int k : holders.get(c)) if (!conceptMembers.get(k).containsAll(every)) these.addAll(conceptStems.get(k));
            stems.add(these);
        }
        Described.Result found = Described.described(key, negated, stems);
        if (found == null) return null;
        List<Integer> kept = new ArrayList<>();
        List<String> shown = new ArrayList<>(), shared = new ArrayList<>(), lacking = new ArrayList<>();
        for (int position : found.positions()) {
            kept.add(candidates.get(position));
            shown.add(repr(names.get(candidates.get(position))));
        }
        List<String> lacked = Described.contentStems(negated);
        for (String w : found.words()) (lacked.contains(w) ? lacking : shared).add(repr(w));
        List<String> parts = new ArrayList<>();
        if (!shared.isEmpty()) parts.add("share " + String.join(", ", shared) + " with it");
        if (!lacking.isEmpty()) parts.add("lack " + String.join(", ", lacking));
        return new Narrowed(kept, "described: kept " + String.join(", ", shown) + " of those " + candidates.size()
                + ", whose words " + String.join(" and ", parts));
    }

    /**
     * Rule 6b (Python's TaskResolver._unlike): the rest of a phrase that says what it is not, read as a phrase of its
     * own, then narrowed to the classes lacking the negated words; null where the rest takes nothing.
     */
    private List<Integer> unlike(String phrase, String rest, String negated, TaskOptions options, boolean single,
                                 List<String> how, double[] encodeMs, Set<Integer> excluded) {
        List<String> inner = new ArrayList<>();
        List<Integer> found;
        double[] spent = new double[1];
        try {
            found = resolvePhrase(rest, options, single, inner, spent, excluded);
        } catch (DescriptionException e) {
            return null;
        }
        if (found.isEmpty()) return null;
        encodeMs[0] += spent[0];
        String said = repr(phrase) + ": read as " + repr(rest) + ", not " + repr(negated) + ": "
                + inner.get(0).substring(repr(rest).length() + 2);
        Set<Integer> named = negatedNames(negated);   // what a name takes is left out, never padded back
        if (named != null) {
            if (excluded != null) excluded.addAll(named);
            List<Integer> kept = new ArrayList<>();
            for (int i : found) if (!named.contains(i)) kept.add(i);
            how.add(said + "; left out what " + repr(negated) + " names" + (kept.isEmpty() ? ": nothing is left" : ""));
            return kept;
        }
        Narrowed narrowed = narrowed("", found, negated);
        how.add(narrowed == null ? said : said + "; " + narrowed.said());
        return narrowed == null ? found : narrowed.kept();
    }

    /** Rule 6 on what rule 4 or 5 took for a phrase alone (the resolution's last line says which rule): narrowed. */
    private List<Integer> described(String key, List<Integer> candidates, boolean single, List<String> how) {
        if (!(single && Described.describesOne(key))) return candidates;
        String[] unlike = Described.negation(key);   // rule 6b: negated words count against the classes having them
        Narrowed found = unlike == null ? narrowed(key, candidates, "") : narrowed(unlike[0], candidates, unlike[1]);
        if (found == null) return candidates;
        how.set(how.size() - 1, how.get(how.size() - 1) + "; " + found.said());
        return found.kept();
    }

    /** Python's ordering of str: by code points (String.compareTo orders UTF-16 units). */
    static int compareCodePoints(String a, String b) {
        int[] x = a.codePoints().toArray(), y = b.codePoints().toArray();
        for (int i = 0; i < Math.min(x.length, y.length); i++) if (x[i] != y[i]) return Integer.compare(x[i], y[i]);
        return Integer.compare(x.length, y.length);
    }

    /** sdk.text.resolver.edit_distance: optimal string alignment distance over code points, or limit + 1 past limit. */
    static int editDistance(String first, String second, int limit) {
        int[] a = first.codePoints().toArray(), b = second.codePoints().toArray();
        int[] prev2 = new int[0], prev = new int[b.length + 1];
        for (int j = 0; j <= b.length; j++) prev[j] = j;
        for (int i = 1; i <= a.length; i++) {
            int[] row = new int[b.length + 1];
            row[0] = i;
            int least = i;
            for (int j = 1; j <= b.length; j++) {
                int cost = a[i - 1] == b[j - 1] ? 0 : 1;
                row[j] = Math.min(Math.min(prev[j] + 1, row[j - 1] + 1), prev[j - 1] + cost);
                if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) row[j] = Math.min(row[j], prev2[j - 2] + 1);
                least = Math.min(least, row[j]);
            }
            if (least > limit) return limit + 1;
            prev2 = prev;
            prev = row;
        }
        return Math.min(prev[b.length], limit + 1);
    }

    /** Rule 3c (sdk.text.resolver.spelling.joined): the name key writes with its letters spaced otherwise
     *  ("jelly fish" -> "jellyfish"), null if none or key is short. */
    private String joined(String key) {
        String letters = key.replace(" ", "");
        if (letters.codePointCount(0, letters.length()) < SPELLING_MIN_CHARS) return null;
        String name = closed.get(letters);
        return name == null || name.equals(key) ? null : name;
    }

    /** Rule 3c (sdk.text.resolver.TaskResolver._spelling): the name one edit from key (two from 8 characters). */
    private String spelling(String key) {
        int n = key.codePointCount(0, key.length());
        if (n < SPELLING_MIN_CHARS) return null;
        int limit = n < SPELLING_LONG_CHARS || key.contains(" ") ? 1 : 2, bestDistance = limit + 1;
        String best = null;
        for (String name : allNames) {
            int m = name.codePointCount(0, name.length());
            if (Math.abs(m - n) <= limit && m >= SPELLING_MIN_CHARS) {
                int d = editDistance(key, name, limit);
                if (d < bestDistance) { best = name; bestDistance = d; }
            }
        }
        return best;
    }

    /** Rule 4a (sdk.text.resolver.TaskResolver._unknown): whether the normalised phrase names nothing here. */
    private boolean unknown(String key) {
        String bare = withoutArticle(key);   // one word or a compound past an article: "a drone", "a hot dog"
        if (!bare.equals(key) && (bare.indexOf(' ') < 0 || exocentric(bare) != null)) return unknown(bare);
        String[] parts = key.split(" ", -1);
        if (parts.length == 1) {  // a word the names use ("blue" among "blue disc") is not missing
            if (byName.containsKey(key) || groups.containsKey(key) || words.contains(key)) return false;
            for (String f : singularForms(key)) if (words.contains(f)) return false;
            return true;
        }
        for (String w : parts) if (GLOSS_WORDS.contains(w) || DESCRIBING_WORDS.contains(w)) return false;
        if (DESCRIBING_NOUNS.contains(parts[parts.length - 1])) return false;
        if (exocentric(key) != null) return true;
        for (String w : parts) {
            List<String> forms = new ArrayList<>(List.of(w));
            forms.addAll(singularForms(w));
            for (String f : forms) if (words.contains(f)) return false;
        }
        return true;
    }

    /** Rule 4a (sdk.text.resolver.TaskResolver._exocentric): the form of the key (itself or a singular: "hot dogs") that is a
     * compound no kind of its last word, or null. */
    private String exocentric(String key) {
        String bare = withoutArticle(key);   // "a hot dog" too
        if (exocentric.contains(bare)) return bare;
        for (String f : singularForms(bare)) if (exocentric.contains(f)) return f;
        return null;
    }

    /** Rule 4a with missing "tell": what the resolution says of an item the bundle lacks ({@code compound}: the
     * exocentric compound it is, or null). */
    private String told(double[] scores, String compound) {
        Integer[] order = new Integer[scores.length];
        for (int c = 0; c < order.length; c++) order[c] = c;
        Arrays.sort(order, (x, y) -> Double.compare(scores[y], scores[x]));  // stable: ties keep class order
        List<String> closest = new ArrayList<>();
        for (int k = 0; k < Math.min(CLOSEST_NAMES, order.length); k++) closest.add(repr(names.get(order[k])));
        String why = compound == null ? "" : " (read whole, not as a kind of " + repr(compound.substring(compound.lastIndexOf(' ') + 1)) + ")";
        return MISSING + why + ": nothing taken for it (closest classes: " + String.join(", ", closest) + "); " + ADD_IT;
    }

    /** Rule 4b (sdk.text.resolver.names.Names.kind): (the kind's name, its concept's index) for a normalised phrase
     * that names a kind the bundle lacks, itself or a singular, past an article; null otherwise, and for a phrase
     * ending in a describing noun ("farm animals"), read by meaning as in rule 4a. */
    private Map.Entry<String, Integer> kind(String key) {
        String bare = withoutArticle(key);
        if (DESCRIBING_NOUNS.contains(bare.substring(bare.lastIndexOf(' ') + 1))) return null;
        List<String> forms = new ArrayList<>(List.of(bare));
        forms.addAll(singularForms(bare));
        for (String f : forms) if (kinds.containsKey(f)) return Map.entry(f, kinds.get(f));
        return null;
    }

    /** Rule 4b: what the resolution says of a kind the bundle lacks: missing, the group it belongs to, and what that
     * group's name takes (sdk.text.resolver.missing.told_kind). */
    private String toldKind(String kind, int concept) {
        String group = concepts.get(concept).names().get(0);
        Map.Entry<String, List<Integer>> found = group(norm(group));
        List<Integer> members = new ArrayList<>();
        if (found != null) members.addAll(found.getValue().subList(0, Math.min(MAX_GROUP_CLASSES, found.getValue().size())));
        else for (int c : concepts.get(concept).members()) members.add(c);
        List<String> shown = new ArrayList<>();
        for (int c : members.subList(0, Math.min(CLOSEST_NAMES, members.size()))) shown.add(repr(names.get(c)));
        return MISSING + ": " + repr(kind) + " is a kind of " + repr(group) + " (from WordNet), and no class here is one: "
                + "nothing taken for it; " + repr(group) + " takes its " + members.size() + " classes ("
                + String.join(", ", shown) + (members.size() > CLOSEST_NAMES ? ", ..." : "") + "); " + ADD_IT;
    }

    /** Python's repr() of a string: how the Python resolver quotes a phrase or a name in a resolution (in double
     *  quotes when it holds a single quote and no double one; backslashes, the quote and unprintable characters
     *  escaped), so that the two resolutions read alike ("jack-o'-lantern"). */
    public static String repr(String text) {
        char quote = text.indexOf('\'') >= 0 && text.indexOf('"') < 0 ? '"' : '\'';
        StringBuilder out = new StringBuilder().append(quote);
        text.codePoints().forEach(cp -> {
            if (cp == quote || cp == '\\') out.append('\\').appendCodePoint(cp);
            else if (cp == '\t') out.append("\\t");
            else if (cp == '\n') out.append("\\n");
            else if (cp == '\r') out.append("\\r");
            else if (cp < 0x20 || cp == 0x7f || (cp > 0x7f && !printable(cp)))
                out.append(String.format(Locale.ROOT, cp <= 0xff ? "\\x%02x" : cp <= 0xffff ? "\\u%04x" : "\\U%08x", cp));
            else out.appendCodePoint(cp);
        });
        return out.append(quote).toString();
    }

    /** Python's str.isprintable for one character: not Other (Cc, Cf, Cs, Co, Cn) nor a separator (Zl, Zp, Zs). */
    private static boolean printable(int cp) {
        switch (Character.getType(cp)) {
            case Character.CONTROL: case Character.FORMAT: case Character.SURROGATE: case Character.PRIVATE_USE:
            case Character.UNASSIGNED: case Character.LINE_SEPARATOR: case Character.PARAGRAPH_SEPARATOR:
            case Character.SPACE_SEPARATOR:
                return false;
            default:
                return true;
        }
    }

    /** Python's str.isspace: Unicode White_Space and the separators U+001C-U+001F. */
    static boolean isSpace(int cp) {
        return Tokenizer.isWhitespace(cp) || (cp >= 0x1C && cp <= 0x1F);
    }

    /** Python's str.strip(). */
    static String strip(String s) {
        int[] cps = s.codePoints().toArray();
        int a = 0, b = cps.length;
        while (a < b && isSpace(cps[a])) a++;
        while (b > a && isSpace(cps[b - 1])) b--;
        return new String(cps, a, b - a);
    }

    /** sdk.text.resolver.normalize_name: stripped, lower case, runs of whitespace and underscores to one space, NFC. */
    static String norm(String text) {
        StringBuilder out = new StringBuilder();
        boolean run = false;
        for (int cp : strip(text).toLowerCase(Locale.ROOT).codePoints().toArray()) {
            if (isSpace(cp) || cp == '_') { if (!run) out.append(' '); run = true; }
            else { out.appendCodePoint(cp); run = false; }
        }
        return java.text.Normalizer.normalize(out, java.text.Normalizer.Form.NFC);
    }

    /** {@code text} if it is visible Unicode text (sdk.text.resolver.check_text); DescriptionException otherwise. */
    static String checkText(String text, String what) {
        int position = 0;
        for (int cp : text.codePoints().toArray()) {
            int type = Character.getType(cp);
            String kind = type == Character.SURROGATE ? "an unpaired surrogate"
                    : type == Character.FORMAT ? "an invisible formatting character"
                    : type == Character.PRIVATE_USE ? "a private-use character"
                    : type == Character.UNASSIGNED ? "an unassigned code point"
                    : type == Character.CONTROL && cp != '\t' && cp != '\n' && cp != '\r' ? "a control character" : null;
            if (kind != null)
                throw new DescriptionException(what + " holds " + kind + String.format(" (U+%04X) at position %d", cp, position));
            position++;
        }
        return text;
    }

    /** sdk.text.resolver.singular_forms: the last word made singular, most likely first; empty if not plural. */
    static List<String> singularForms(String phrase) {
        int space = phrase.lastIndexOf(' ');
        String prefix = space >= 0 ? phrase.substring(0, space + 1) : "", word = phrase.substring(space + 1);
        List<String> forms = new ArrayList<>();
        if (IRREGULAR_PLURALS.containsKey(word)) return List.of(prefix + IRREGULAR_PLURALS.get(word));
        int n = word.codePointCount(0, word.length());
        if (word.endsWith("ies") && n > 4) forms.add(cut(word, 3) + "y");
        if (word.endsWith("ves") && n > 4) { forms.add(cut(word, 3) + "f"); forms.add(cut(word, 3) + "fe"); }
        if (word.endsWith("es") && n > 3) forms.add(cut(word, 2));
        if (word.endsWith("s") && !word.endsWith("ss") && n > 2) forms.add(cut(word, 1));
        List<String> out = new ArrayList<>();
        for (String f : forms) out.add(prefix + f);
        return out;
    }

    private static String cut(String word, int asciiChars) { return word.substring(0, word.length() - asciiChars); }

    /**
     * Rule 2: the description cut at its commas, but a part that describes the item before it rejoins it: the item
     * opens with "a" or "an", and the part, no name of its own, with a preposition or relative word
     * (APPOSITIVE_OPENERS) or a participle (Python's Names.items).
     */
    private List<String> items(String text) {
        List<String> items = new ArrayList<>();
        String[] cut = openedExclusions(text).split("[,;]", -1);
        if (cut.length == 1) {
            items.add(unmarkedItem(text));
            return items;
        }
        for (String p : cut) {
            String part = unmarkedItem(strip(p));
            if (part.isEmpty()) continue;
            if (!items.isEmpty() && describes(items.get(items.size() - 1), part))
                items.set(items.size() - 1, items.get(items.size() - 1) + ", " + part);
            else
                items.add(part);
        }
        return items;
    }

    private static final java.util.regex.Pattern PARENTHESIS = java.util.regex.Pattern.compile("\\(([^()]*)\\)");

    /** sdk.text.resolver.words.opened_exclusions: a parenthesis that opens with a negation cut off as a comma part
     *  ("insects (no bees)"); any other stays. */
    static String openedExclusions(String text) {
        java.util.regex.Matcher found = PARENTHESIS.matcher(text);
        StringBuilder out = new StringBuilder();
        while (found.find()) {
            String inner = norm(found.group(1));
            boolean negation = false;
            for (String n : NEGATIONS) negation |= inner.startsWith(n + " ");
            found.appendReplacement(out, java.util.regex.Matcher.quoteReplacement(
                    negation ? ", " + found.group(1) : found.group(0)));
        }
        found.appendTail(out);
        return out.toString();
    }

    private String unmarkedItem(String item) {
        return named(norm(item)) ? item : unmarked(item);
    }

    /** sdk.text.resolver.words.unmarked: the item without its closing marks and surrounding quotes; itself if nothing
     *  is left. */
    static String unmarked(String item) {
        String text = strip(rstripMarks(item));
        int[] cps = text.codePoints().toArray();
        if (cps.length >= 2 && QUOTES.containsKey(cps[0]) && QUOTES.get(cps[0]) == cps[cps.length - 1])
            text = strip(rstripMarks(new String(cps, 1, cps.length - 2)));
        return text.isEmpty() ? item : text;
    }

    private static String rstripMarks(String s) {
        int end = s.length();
        while (end > 0 && END_MARKS.indexOf(s.charAt(end - 1)) >= 0) end--;
        return s.substring(0, end);
    }

    private boolean describes(String item, String part) {
        String key = norm(part);
        String first = key.split(" ", -1)[0];
        boolean opener = APPOSITIVE_OPENERS.contains(first);
        for (Map.Entry<String, Integer> e : PARTICIPLE_ENDINGS.entrySet())
            opener |= first.endsWith(e.getKey()) && first.length() >= e.getValue();
        String firstOfItem = norm(item).split(" ", -1)[0];
        return opener && (firstOfItem.equals("a") || firstOfItem.equals("an")) && !named(key);
    }

    /** The task a free-text description or a comma list names. */
    public Task resolve(String description, TaskOptions options) {
        if (description.codePointCount(0, description.length()) > MAX_DESCRIPTION_CHARS)
            throw new DescriptionException("the description is longer than " + MAX_DESCRIPTION_CHARS + " characters");
        String text = strip(checkText(description, "the description"));
        if (text.isEmpty()) throw new DescriptionException("the description is empty");
        List<String> items = items(text), parts = new ArrayList<>();
        List<Boolean> leaveOut = new ArrayList<>();
        for (String item : items) signedParts(item, parts, leaveOut);
        if (parts.isEmpty()) throw new DescriptionException("the description has no words");
        Set<Integer> chosen = new LinkedHashSet<>(), leftOut = new LinkedHashSet<>(), excluded = new LinkedHashSet<>();
        List<String> how = new ArrayList<>(), taken = new ArrayList<>();
        double[] encodeMs = {0};
        for (int i = 0; i < parts.size(); i++) {
            String part = parts.get(i);
            if (!leaveOut.get(i)) {
                taken.add(part);
                chosen.addAll(resolvePhrase(part, options, parts.size() == 1, how, encodeMs, excluded));
                continue;
            }
            List<String> said = new ArrayList<>();
            leftOut.addAll(resolvePhrase(part, options, false, said, encodeMs, excluded));
            String prefix = repr(part) + ": ";
            how.add(prefix + "left out, " + said.get(0).substring(prefix.length()));
        }
        if (taken.isEmpty()) {
            chosen = everyOther(leftOut, parts, how);
        } else if (chosen.isEmpty()) {  // every item was a missing item that nothing matches (rule 4a)
            throw new DescriptionException("nothing in this bundle matches any of "
                    + taken.subList(0, Math.min(10, taken.size())) + ": " + String.join("; ", how));
        } else if (leftOut.containsAll(chosen)) {
            throw new DescriptionException("nothing is left of " + taken.subList(0, Math.min(10, taken.size()))
                    + " once the classes left out are: " + String.join("; ", how));
        }
        chosen.removeAll(leftOut);
        leftOut.addAll(excluded);   // what a composition excluded is no padding either
        return task(chosen, leftOut, options, how, encodeMs[0]);
    }

    /** Rule 2b (sdk.text.resolver.composition.negated): what a normalised item or part leaves out, or null. */
    private String negated(String key) {
        if (named(key)) return null;
        if (!key.contains(" ") && key.startsWith(EXCLUSION_PREFIX) && key.length() > EXCLUSION_PREFIX.length())
            return key.substring(EXCLUSION_PREFIX.length());
        for (String start : NEGATED_STARTS)
            if (key.startsWith(start + " ") && key.length() > start.length() + 1) return key.substring(start.length() + 1);
        return null;
    }

    /** Rules 2, 2b and 2c: the item's parts, each with whether it is left out (Python's TaskResolver._signed_parts). */
    private void signedParts(String item, List<String> parts, List<Boolean> leaveOut) {
        String rest = negated(norm(item));
        if (rest != null) {
            for (String part : conjuncts(rest)) { parts.add(part); leaveOut.add(true); }
            return;
        }
        List<String> cut = conjuncts(item);
        if (cut.size() == 1) { parts.add(item); leaveOut.add(false); return; }   // the item itself, just checked
        Set<Integer> kept = null;   // rule 2c: the classes the last part's exclusion keeps, while its run lasts
        for (String part : cut) {
            String key = norm(part);
            String partRest = negated(key);
            Set<Integer> named = kept == null || partRest != null ? null : classesNamed(key);
            if (named != null && !named.isEmpty() && kept.containsAll(named)) {   // "... except cars and buses"
                parts.add(part);
                leaveOut.add(true);
                continue;
            }
            parts.add(partRest == null ? part : partRest);
            leaveOut.add(partRest != null);
            String[] cutOff = partRest == null ? exclusionCut(key) : null;
            kept = cutOff == null ? null : classesNamed(cutOff[0]);
        }
    }

    /** Rule 2b for a description that only leaves out: every other class (Python's TaskResolver._every_other). */
    private Set<Integer> everyOther(Set<Integer> leftOut, List<String> parts, List<String> how) {
        List<String> shown = parts.subList(0, Math.min(10, parts.size()));
        if (leftOut.isEmpty())
            throw new DescriptionException("nothing in this bundle is left out by " + shown + ", and nothing else is named: "
                    + String.join("; ", how));
        Set<Integer> kept = new LinkedHashSet<>();
        for (int c = 0; c < names.size(); c++) if (!leftOut.contains(c)) kept.add(c);
        if (kept.isEmpty())
            throw new DescriptionException("no class is left once " + shown + " are left out: " + String.join("; ", how));
        if (kept.size() > MAX_GROUP_CLASSES)
            throw new DescriptionException("every class but " + shown + " is " + kept.size() + " classes, more than a "
                    + "description takes (" + MAX_GROUP_CLASSES + "): name what to take too, as in '<group> except "
                    + parts.get(0) + "'");
        how.add("every other class: " + kept.size() + " of " + names.size());
        return kept;
    }

    /** The task a list of exact class names (ids, names or synonyms; case-insensitive) names. */
    public Task resolve(List<String> classNames, TaskOptions options) {
        if (classNames.isEmpty()) throw new DescriptionException("the list of class names is empty");
        if (classNames.size() > MAX_CLASS_LIST)
            throw new DescriptionException("at most " + MAX_CLASS_LIST + " class names of at most " + MAX_DESCRIPTION_CHARS + " characters each");
        List<String> unknown = new ArrayList<>();
        Set<Integer> chosen = new LinkedHashSet<>();
        for (String name : classNames) {
            if (name.codePointCount(0, name.length()) > MAX_DESCRIPTION_CHARS)
                throw new DescriptionException("at most " + MAX_CLASS_LIST + " class names of at most " + MAX_DESCRIPTION_CHARS + " characters each");
            checkText(name, "a class name");
        }
        for (String name : classNames) {
            Integer c = byName.get(norm(name));
            if (c == null) unknown.add(name); else chosen.add(c);
        }
        if (!unknown.isEmpty()) throw new DescriptionException("unknown class names: " + unknown.subList(0, Math.min(10, unknown.size())));
        return task(chosen, Set.of(), options, List.of("explicit class list"), 0);
    }

    private Task task(Set<Integer> chosen, Set<Integer> leftOut, TaskOptions options, List<String> asked, double encodeMs) {
        int[] classes = pad(new TreeSet<>(chosen), leftOut, options);
        List<String> how = new ArrayList<>(asked), added = new ArrayList<>();
        for (int c : classes) if (!chosen.contains(c)) added.add(repr(names.get(c)));
        if (!added.isEmpty())  // sdk.text.resolver: a class the user did not ask for is never silent
            how.add("added " + String.join(", ", added) + ", the nearest by text similarity: a task holds at least "
                    + options.minClasses + " classes");
        float[] mean = mean(classes);
        double norm = 0;
        for (float v : mean) norm += (double) v * v;
        float scale = (float) Math.max(Math.sqrt(norm), 1e-12);
        for (int d = 0; d < dim; d++) mean[d] /= scale;
        return new Task(classes, mean, how, encodeMs);
    }

    /** Whether the normalised phrase (or its singular) is a group or a class name. */
    private boolean named(String key) {
        List<String> forms = new ArrayList<>(List.of(key));
        forms.addAll(singularForms(key));
        for (String f : forms) if (groups.containsKey(f) || byName.containsKey(f)) return true;
        return false;
    }

    /** The item's parts between the words "and", "or" and "&"; the item itself if it is a name, a gloss (unless each
     *  part is a name past its article: "a cat or a dog") or has none. */
    private List<String> conjuncts(String item) {
        String key = norm(item);
        if (named(key)) return List.of(item);
        for (String mark : GLUED_CONJUNCTIONS) key = key.replace(mark, " " + mark + " ");   // "lemons/oranges"
        key = norm(key);
        boolean gloss = false;
        for (String word : key.split(" ", -1)) if (GLOSS_WORDS.contains(word)) gloss = true;
        List<String> parts = new ArrayList<>(), words = new ArrayList<>();
        List<String> all = new ArrayList<>(Arrays.asList(key.split(" ", -1)));
        all.add("and");
        for (String word : all) {
            if (CONJUNCTIONS.contains(word)) {
                if (!words.isEmpty()) parts.add(String.join(" ", words));
                words.clear();
            } else {
                words.add(word);
            }
        }
        if (gloss) for (String part : parts) if (!named(withoutArticle(part))) return List.of(item);
        return parts.size() > 1 ? parts : List.of(item);
    }

    /** The rules in order for one phrase; the classes a composition excludes are added to {@code excluded}. */
    private List<Integer> resolvePhrase(String phrase, TaskOptions options, boolean single, List<String> how, double[] encodeMs,
                                        Set<Integer> excluded) {
        String key = norm(phrase);
        Map.Entry<String, List<Integer>> named = group(key);
        if (named != null) {
            List<Integer> members = named.getValue();
            how.add(repr(phrase) + ": group " + repr(named.getKey()) + (derived.contains(named.getKey()) ? " (" + DERIVED + ")" : ""));
            return members.subList(0, Math.min(MAX_GROUP_CLASSES, members.size()));
        }
        for (String candidate : forms(key)) if (byName.containsKey(candidate)) { key = candidate; break; }  // "geese" -> "goose"
        if (byName.containsKey(key)) {  // rule 1, no embedding: in a list the class itself, alone its look-alikes too
            int self = byName.get(key);
            if (!single) {
                how.add(repr(phrase) + ": class name");
                return List.of(self);
            }
            List<Integer> chosen = top(scores(mean(new int[] {self})), options, self);   // its own row, as Python's
            List<String> others = new ArrayList<>();                                     // _look_alikes scores
            for (int c : chosen) if (c != self) others.add(repr(names.get(c)));
            how.add(repr(phrase) + ": " + (others.isEmpty() ? "class name" : "class name, with the classes within "
                    + options.margin + " of its similarity (" + String.join(", ", others.subList(0, Math.min(5, others.size())))
                    + (others.size() > 5 ? ", ..." : "") + "): a model tells its classes apart, so it holds the class's "
                    + "look-alikes; give a list to choose them"));
            return chosen;
        }
        List<Integer> composed = composed(key, phrase, how, excluded);
        if (composed != null) return composed;
        String[] cut = exclusionCut(key);   // rule 3b, Y no group; a described kind's own negation is rule 6b's
        if (cut != null && single && Described.negation(key) != null) cut = null;
        List<Integer> except = cut == null ? null : unlike(phrase, cut[0], cut[1], options, single, how, encodeMs, excluded);
        if (except != null) return except;
        if (!key.contains(" ")) {
            List<String> headForms = new ArrayList<>(List.of(key));
            headForms.addAll(singularForms(key));
            for (String f : headForms) {
                if (heads.containsKey(f)) {
                    List<Integer> members = new ArrayList<>(heads.get(f));
                    java.util.Collections.sort(members);
                    how.add(repr(phrase) + ": " + MISSING + " as one class: took the classes named '... " + f + "' (kinds of " + repr(f) + ")");
                    return members.subList(0, Math.min(MAX_GROUP_CLASSES, members.size()));
                }
            }
        }
        Map.Entry<String, Integer> kind = options.missing.equals("tell") ? kind(key) : null;   // rule 4b: a kind it lacks
        if (kind != null) {
            how.add(repr(phrase) + ": " + toldKind(kind.getKey(), kind.getValue()));
            return List.of();
        }
        String fixed = joined(key);   // a name spaced otherwise, real words or not; then one edit away
        for (String form : singularForms(key)) if (fixed == null) fixed = joined(form);
        if (fixed == null && !allReal(key)) fixed = spelled(key);
        if (fixed != null) {
            List<String> inner = new ArrayList<>();
            List<Integer> found = resolvePhrase(fixed, options, single, inner, encodeMs, excluded);
            String why = inner.get(0).substring(repr(fixed).length() + 2);
            how.add(repr(phrase) + ": read as " + repr(fixed) + " (spelling): " + why);
            return found;
        }
        String[] negation = single ? Described.negation(key) : null;   // rule 6b: what it is not
        List<Integer> unlike = negation == null ? null : unlike(phrase, negation[0], negation[1], options, true, how, encodeMs, excluded);
        if (unlike != null) return unlike;
        long start = System.nanoTime();
        float[] embedding = embedPhrase.apply(phrase);
        encodeMs[0] += (System.nanoTime() - start) / 1e6;
        double[] scores = scores(embedding);
        int best = 0;
        double sum = 0;
        for (int c = 0; c < scores.length; c++) {
            if (scores[c] > scores[best]) best = c;
            sum += scores[c];
        }
        double standout = scores[best] - sum / scores.length;
        if (options.missing.equals("tell") && unknown(key)) {
            how.add(repr(phrase) + ": " + told(scores, exocentric(key)));
            return List.of();
        }
        if (!key.contains(" ")) return missing(phrase, scores, best, standout, options, single, how);
        if (standout < options.minContrast)
            throw new DescriptionException(String.format(Locale.ROOT, "nothing in this bundle matches %s (closest: %s, which "
                    + "stands out by only %.2f < min_contrast %s)", repr(phrase), repr(names.get(best)), standout, options.minContrast));
        List<Integer> byConcept = conceptMatch(embedding, scores[best], options, phrase, how);
        if (byConcept != null) return described(key, byConcept, single, how);
        if (!single) {
            how.add(String.format(Locale.ROOT, "%s: closest class (similarity %.2f)", repr(phrase), scores[best]));
            return List.of(best);
        }
        how.add(String.format(Locale.ROOT, "%s: classes within %s of the best similarity (%s: %.2f, contrast %.2f)",
                repr(phrase), options.margin, repr(names.get(best)), scores[best], standout));
        return described(key, top(scores, options, -1), single, how);
    }

    /** Rule 3c (sdk.text.resolver.TaskResolver._real): whether a word is real, never corrected: the encoder's
     *  vocabulary has it, or WordNet's list has it or a singular of it ("steamboats"). */
    private boolean real(String word) {
        if (isWord.test(word)) return true;
        Set<String> english = englishWords.get();
        if (english.contains(word)) return true;
        for (String f : singularForms(word)) if (english.contains(f)) return true;
        return false;
    }

    /** Rule 4a: a one-word item that names nothing in the bundle, and what is taken instead of it. */
    private List<Integer> missing(String phrase, double[] scores, int best, double standout, TaskOptions options,
                                  boolean single, List<String> how) {
        String closest = String.format(Locale.ROOT, "%s (similarity %.2f", repr(names.get(best)), scores[best]);
        if (standout < options.minContrast) {
            if (single)
                throw new DescriptionException(String.format(Locale.ROOT, "nothing in this bundle matches %s, %s "
                        + "(closest: %s, standing out by only %.2f < min_contrast %s))", repr(phrase), MISSING, closest,
                        standout, options.minContrast));
            how.add(repr(phrase) + ": " + MISSING + ", and nothing in it is close (closest: " + closest + ")): left out");
            return List.of();
        }
        if (!single) {
            how.add(repr(phrase) + ": " + MISSING + ": took the closest class " + closest + ") instead");
            return List.of(best);
        }
        how.add(String.format(Locale.ROOT, "%s: %s: took the classes within %s of the best similarity instead "
                + "(closest: %s, contrast %.2f))", repr(phrase), MISSING, options.margin, closest, standout));
        return top(scores, options, -1);
    }

    /** Rule 3: the name found and the whole group, for the normalised phrase or its singular; null if none. */
    private Map.Entry<String, List<Integer>> group(String key) {
        for (String f : forms(key)) if (groups.containsKey(f)) return Map.entry(f, groups.get(f));
        return null;
    }

    /** The forms rules 1 and 3 look a phrase up by (sdk.text.resolver.names.Names._forms): itself and its singulars,
     *  then the same past an article, as rule 4b reads a kind ("a grizzly", "the insects"). */
    private static List<String> forms(String key) {
        List<String> forms = new ArrayList<>(List.of(key));
        forms.addAll(singularForms(key));
        String bare = withoutArticle(key);
        if (!bare.equals(key)) {
            forms.add(bare);
            forms.addAll(singularForms(bare));
        }
        return forms;
    }

    /** The group name a modifier stands for: itself, else itself before a kind noun; null if none. Not a singular
     * made from a plural group name ("drink containers" hold drinks: sdk.text.resolver.TaskResolver._modifier). */
    private String modifier(String words) {
        if (groups.containsKey(words) && !singulars.contains(words)) return words;
        for (String noun : KIND_NOUNS) {
            String name = words + " " + noun;
            if (groups.containsKey(name) && !singulars.contains(name)) return name;
        }
        return null;
    }

    /** Rule 3b (sdk.text.resolver.TaskResolver._composed): a phrase built from two groups, or null. */
    private List<Integer> composed(String key, String phrase, List<String> how, Set<Integer> excluded) {
        String[] words = key.split(" ", -1);
        if (words.length < 2) return null;
        List<Integer> exclusion = exclusion(key, words, phrase, how, excluded);
        if (exclusion != null) return exclusion;
        TreeSet<Integer> every = null;   // a modifier whose group holds all of Y: Y ("pet dogs"), if none narrows
        String everyHow = null;
        for (int k = 1; k < words.length; k++) {  // the longest head first
            String head = String.join(" ", Arrays.asList(words).subList(k, words.length));
            String mod = String.join(" ", Arrays.asList(words).subList(0, k));
            Map.Entry<String, List<Integer>> group = group(head);
            String named = group == null ? null : modifier(mod);
            if (named == null) continue;
            TreeSet<Integer> all = new TreeSet<>(group.getValue()), kept = new TreeSet<>(group.getValue());
            kept.retainAll(groups.get(named));
            if (!kept.isEmpty() && kept.size() < all.size()) {
                how.add(repr(phrase) + ": " + repr(named) + " within group " + repr(head));
                return cap(kept);
            }
            if (!kept.isEmpty() && every == null && new TreeSet<>(groups.get(named)).size() > kept.size()) {   // not Y itself
                every = kept;
                everyHow = repr(phrase) + ": " + repr(named) + " within group " + repr(head) + ": all of it";
            }
        }
        if (every == null) return null;
        how.add(everyHow);
        return cap(every);
    }

    /** Rule 3b's "non-X Y" and "Y except X": Y's classes without X's, or null. */
    private List<Integer> exclusion(String key, String[] words, String phrase, List<String> how, Set<Integer> excluded) {
        String keptName, droppedName;
        if (words[0].startsWith(EXCLUSION_PREFIX) && words[0].length() > EXCLUSION_PREFIX.length()) {
            keptName = String.join(" ", Arrays.asList(words).subList(1, words.length));
            droppedName = words[0].substring(EXCLUSION_PREFIX.length());
        } else {
            String[] cut = exclusionCut(key);
            if (cut == null) return null;
            keptName = cut[0];
            droppedName = cut[1];
        }
        Map.Entry<String, List<Integer>> group = keptName.isEmpty() ? null : group(keptName);
        List<Integer> dropped = droppedName.isEmpty() ? null : dropped(droppedName);
        if (group == null || dropped == null) return null;
        TreeSet<Integer> all = new TreeSet<>(group.getValue()), kept = new TreeSet<>(group.getValue());
        kept.removeAll(dropped);
        if (kept.isEmpty() || kept.size() >= all.size()) return null;
        how.add(repr(phrase) + ": group " + repr(keptName) + " without " + repr(droppedName));
        excluded.addAll(dropped);
        return cap(kept);
    }

    /**
     * Rule 3b (sdk.text.resolver.composition.exclusion_cut): {kept, left out} of "Y &lt;exclusion word&gt; X", each past
     * an article and the kept part past a quantifier too ("but" excludes after one); null without one or where either
     * part is empty.
     */
    static String[] exclusionCut(String key) {
        String padded = " " + key + " ", marker = null;
        for (String w : EXCLUSION_WORDS) if (padded.contains(" " + w + " ")) { marker = w; break; }
        int space = key.indexOf(' ');
        if (marker == null && QUANTIFIERS.contains(space < 0 ? key : key.substring(0, space))
                && padded.contains(" " + QUANTIFIED_EXCLUSION + " ")) marker = QUANTIFIED_EXCLUSION;
        if (marker == null) return null;
        int at = padded.indexOf(" " + marker + " ");
        String kept = withoutArticle(withoutArticle(strip(padded.substring(0, at)), QUANTIFIERS));
        String leftOut = withoutArticle(strip(padded.substring(at + marker.length() + 2)));
        return kept.isEmpty() || leftOut.isEmpty() ? null : new String[] {kept, leftOut};
    }

    /** The name without an article before it (sdk.text.resolver.words.without_article; rules 3b and 4b). */
    private static String withoutArticle(String name) {
        return withoutArticle(name, ARTICLES);
    }

    /** The name without one of {@code leading} before it (rule 3b reads past QUANTIFIERS so). */
    private static String withoutArticle(String name, List<String> leading) {
        int space = name.indexOf(' ');
        return space > 0 && space < name.length() - 1 && leading.contains(name.substring(0, space))
                ? name.substring(space + 1) : name;
    }

    /** The classes an exclusion names: a group, a modifier's group or one class; null if none. */
    private List<Integer> dropped(String name) {
        Map.Entry<String, List<Integer>> found = group(name);
        if (found != null) return found.getValue();
        String mod = modifier(name);
        if (mod != null) return groups.get(mod);
        List<String> forms = new ArrayList<>(List.of(name));
        forms.addAll(singularForms(name));
        for (String f : forms) if (byName.containsKey(f)) return List.of(byName.get(f));
        return null;
    }

    private static List<Integer> cap(TreeSet<Integer> classes) {
        List<Integer> out = new ArrayList<>(classes);
        return out.subList(0, Math.min(MAX_GROUP_CLASSES, out.size()));
    }

    /** The classes of the concepts nearest the text, if one (of at most maxClasses classes) is at least as near as any class. */
    private List<Integer> conceptMatch(float[] embedding, double bestClass, TaskOptions options, String phrase, List<String> how) {
        double[] scores = new double[concepts.size()];
        boolean any = false;
        for (int k = 0; k < scores.length; k++) {
            if (concepts.get(k).members().length > options.maxClasses) { scores[k] = Double.NEGATIVE_INFINITY; continue; }
            any = true;
            double s = 0;
            for (int d = 0; d < dim; d++) s += conceptEmbeddings.get(k * dim + d) * (double) embedding[d];
            scores[k] = s;
        }
        if (!any) return null;
        Integer[] order = descending(scores);
        int top = order[0];
        if (scores[top] < bestClass) return null;
        Set<Integer> first = new TreeSet<>();
        for (int c : concepts.get(top).members()) first.add(c);
        TreeSet<Integer> chosen = new TreeSet<>(first);
        List<String> used = new ArrayList<>(List.of(repr(concepts.get(top).names().get(0))));
        for (int k = 1; k < order.length; k++) {
            int j = order[k];
            if (scores[j] < scores[top] - CONCEPT_MARGIN) break;
            Set<Integer> members = new TreeSet<>();
            for (int c : concepts.get(j).members()) members.add(c);
            if (members.containsAll(first) && members.size() > first.size() && members.size() > SUPERSET_RATIO * first.size()) continue;
            TreeSet<Integer> union = new TreeSet<>(chosen);
            union.addAll(members);
            if (union.size() <= options.maxClasses && !chosen.containsAll(members)) {
                chosen = union;
                used.add(repr(concepts.get(j).names().get(0)));
            }
        }
        how.add(String.format(Locale.ROOT, "%s: concept %s (similarity %.2f >= best class %.2f)", repr(phrase),
                String.join(" + ", used), scores[top], bestClass));
        return new ArrayList<>(chosen);
    }

    private double[] scores(float[] embedding) {
        double[] scores = new double[names.size()];
        for (int c = 0; c < scores.length; c++) {
            double s = 0;
            for (int d = 0; d < dim; d++) s += embeddings.get(c * dim + d) * (double) embedding[d];
            scores[c] = s;
        }
        return scores;
    }

    private static Integer[] descending(double[] scores) {
        Integer[] order = new Integer[scores.length];
        for (int i = 0; i < order.length; i++) order[i] = i;
        Arrays.sort(order, (a, b) -> Double.compare(scores[b], scores[a]));
        return order;
    }

    private List<Integer> top(double[] scores, TaskOptions options, int include) {
        Integer[] order = descending(scores);
        List<Integer> keep = new ArrayList<>();
        for (int k = 0; k < Math.min(options.maxClasses, order.length); k++)
            if (scores[order[k]] >= scores[order[0]] - options.margin) keep.add(order[k]);
        if (include >= 0 && !keep.contains(include)) {
            List<Integer> with = new ArrayList<>(List.of(include));
            with.addAll(keep.subList(0, Math.min(keep.size(), options.maxClasses - 1)));
            return with;
        }
        return keep;
    }

    /** Nearest classes until the task has minClasses, none of those the description left out (rule 2b). */
    private int[] pad(TreeSet<Integer> chosen, Set<Integer> leftOut, TaskOptions options) {
        if (chosen.size() < options.minClasses) {
            float[] centre = mean(chosen.stream().mapToInt(Integer::intValue).toArray());
            for (int c : descending(scores(centre))) {
                if (chosen.size() >= options.minClasses) break;
                if (!leftOut.contains(c)) chosen.add(c);
            }
        }
        return chosen.stream().mapToInt(Integer::intValue).toArray();
    }

    private float[] mean(int[] classes) {
        double[] sum = new double[dim];
        for (int c : classes) for (int d = 0; d < dim; d++) sum[d] += embeddings.get(c * dim + d);
        float[] mean = new float[dim];
        for (int d = 0; d < dim; d++) mean[d] = (float) (sum[d] / classes.length);
        return mean;
    }
}
