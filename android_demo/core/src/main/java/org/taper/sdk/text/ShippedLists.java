package org.taper.sdk.text;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.Set;
import java.util.zip.GZIPInputStream;

/**
 * How the resolver's shipped word lists are read (Compounds, EnglishWords), as sdk/text reads them: a file of sdk/text
 * (the one copy) at the root of the class path, gzip-compressed where its name ends in ".gz", whose entries are its
 * non-empty lines that do not start with '#' (the header and WordNet's license).
 */
final class ShippedLists {
    private ShippedLists() {}

    /** The entries of {@code file}; IllegalStateException naming the file if the build left it out. */
    static Set<String> read(String file) {
        try (InputStream in = ShippedLists.class.getResourceAsStream("/" + file)) {
            if (in == null) throw new IllegalStateException(file + " is not at the root of the class path "
                    + "(copy sdk/text/" + file + " into the build)");
            try (InputStream body = file.endsWith(".gz") ? new GZIPInputStream(in) : in) {
                return parse(new String(body.readAllBytes(), StandardCharsets.UTF_8));
            }
        } catch (IOException e) {
            throw new IllegalStateException("cannot read " + file + ": " + e.getMessage(), e);
        }
    }

    /** The entries of a file's text: every non-empty line that does not start with '#'. */
    static Set<String> parse(String text) {
        Set<String> out = new HashSet<>();
        for (String line : text.split("\n", -1)) {
            if (line.endsWith("\r")) line = line.substring(0, line.length() - 1);
            if (!line.isEmpty() && !line.startsWith("#")) out.add(line);
        }
        return Set.copyOf(out);
    }
}
