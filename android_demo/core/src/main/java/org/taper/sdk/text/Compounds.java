package org.taper.sdk.text;

import java.util.Set;

/**
 * Two-word nouns that are no kind of their last word ("hot dog", "teddy bear"), read as sdk/text/compounds.py reads
 * them: sdk/text/exocentric_compounds.txt, the one copy, placed at the root of the class path by every build
 * (core/run_tests.sh, the Gradle and Maven builds, app/apk.sh) and read by ShippedLists. Rule 4a of TaskResolver
 * tells them missing instead of taking their last word's group.
 */
public final class Compounds {
    /** The file's name, at the root of the class path. */
    public static final String FILE = "exocentric_compounds.txt";
    private static Set<String> shipped;

    private Compounds() {}

    /** The shipped list (read once); IllegalStateException naming the file if the build left it out. */
    public static synchronized Set<String> shipped() {
        if (shipped == null) shipped = ShippedLists.read(FILE);
        return shipped;
    }
}
