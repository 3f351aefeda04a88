package org.taper.sdk.text;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.Set;
import java.util.zip.GZIPInputStream;

/**
 * Real English words beyond the text encoder's vocabulary, read as sdk/text/english_words.py reads them: WordNet
 * 3.0's one-word lemmas of 4 or more letters, sdk/text/english_words.txt.gz (the one copy), placed at the root of
 * the class path by every build (core/run_tests.sh, the Gradle and Maven builds). Lines starting with '#' are
 * comments. Rule 3c of TaskResolver never corrects them as typos ("seahorse" is no "seashore"). Read on first use.
 */
public final class EnglishWords {
    /** The file's name, at the root of the class path. */
    public static final String FILE = "english_words.txt.gz";
    private static Set<String> shipped;

    private EnglishWords() {}

    /** The shipped words (read once); IllegalStateException naming the file if the build left it out. */
    public static synchronized Set<String> shipped() {
        if (shipped == null) {
            try (InputStream in = EnglishWords.class.getResourceAsStream("/" + FILE)) {
                if (in == null) throw new IllegalStateException(FILE + " is not at the root of the class path "
                        + "(copy sdk/text/" + FILE + " into the build)");
                try (GZIPInputStream unzipped = new GZIPInputStream(in)) {
                    shipped = parse(new String(unzipped.readAllBytes(), StandardCharsets.UTF_8));
                }
            } catch (IOException e) {
                throw new IllegalStateException("cannot read " + FILE + ": " + e.getMessage(), e);
            }
        }
        return shipped;
    }

    /** The words of the file's text: every non-empty line that does not start with '#'. */
    static Set<String> parse(String text) {
        Set<String> out = new HashSet<>();
        for (String line : text.split("\n", -1)) {
            if (line.endsWith("\r")) line = line.substring(0, line.length() - 1);
            if (!line.isEmpty() && !line.startsWith("#")) out.add(line);
        }
        return Set.copyOf(out);
    }
}
