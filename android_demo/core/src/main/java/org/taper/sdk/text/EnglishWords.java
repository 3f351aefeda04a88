package org.taper.sdk.text;

import java.util.Set;

/**
 * Real English words beyond the text encoder's vocabulary, read as sdk/text/english_words.py reads them: WordNet
 * 3.0's one-word lemmas of 4 or more letters, sdk/text/english_words.txt.gz (the one copy), placed at the root of
 * the class path by every build (core/run_tests.sh, the Gradle and Maven builds, app/apk.sh) and read by
 * ShippedLists. Rule 3c of TaskResolver never corrects them as typos ("seahorse" is no "seashore"). Read on first
 * use.
 */
public final class EnglishWords {
    /** The file's name, at the root of the class path. */
    public static final String FILE = "english_words.txt.gz";
    private static Set<String> shipped;

    private EnglishWords() {}

    /** The shipped words (read once); IllegalStateException naming the file if the build left it out. */
    public static synchronized Set<String> shipped() {
        if (shipped == null) shipped = ShippedLists.read(FILE);
        return shipped;
    }
}
