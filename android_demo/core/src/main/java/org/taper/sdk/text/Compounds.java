package org.taper.sdk.text;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.Set;

/**
 * Two-word nouns that are no kind of their last word ("hot dog", "teddy bear"), read as sdk/text/compounds.py reads
 * them: sdk/text/exocentric_compounds.txt, the one copy, placed at the root of the class path by every build
 * (core/run_tests.sh, the Gradle build, the Python scripts that compile the core). Lines starting with '#'
 * are comments. Rule 4a of TaskResolver tells them missing instead of taking their last word's group.
 */
public final class Compounds {
    /** The file's name, at the root of the class path. */
    public static final String FILE = "exocentric_compounds.txt";
    private static Set<String> shipped;

    private Compounds() {}

    /** The shipped list (read once); IllegalStateException naming the file if the build left it out. */
    public static synchronized Set<String> shipped() {
        if (shipped == null) {
            try (InputStream in = Compounds.class.getResourceAsStream("/" + FILE)) {
                if (in == null) throw new IllegalStateException(FILE + " is not at the root of the class path "
                        + "(copy sdk/text/" + FILE + " into the build)");
                shipped = parse(new String(in.readAllBytes(), StandardCharsets.UTF_8));
            } catch (IOException e) {
                throw new IllegalStateException("cannot read " + FILE + ": " + e.getMessage(), e);
            }
        }
        return shipped;
    }

    /** The compounds of the file's text: every non-empty line that does not start with '#'. */
    static Set<String> parse(String text) {
        Set<String> out = new HashSet<>();
        for (String line : text.split("\n", -1)) {
            if (line.endsWith("\r")) line = line.substring(0, line.length() - 1);
            if (!line.isEmpty() && !line.startsWith("#")) out.add(line);
        }
        return Set.copyOf(out);
    }
}
