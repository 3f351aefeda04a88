package org.taper.sdk.format;

import java.util.List;

/**
 * A kind of thing the classes belong to (a WordNet hypernym such as "clothing", format 5): its names, the
 * first primary, its classes (strictly increasing indices, at least two) and the names of the kinds below it
 * that no class is ("beagle" below 'dog': the resolver tells them missing and names this concept).
 * sdk.format.bundle.Concept's mirror.
 */
public record Concept(String id, List<String> names, int[] members, List<String> kinds) {
    /** sdk.format.bundle.DERIVED_CONCEPT_PREFIX: a concept the exporter derived from WordNet for one's own classes. */
    public static final String DERIVED_PREFIX = "wordnet/";

    /** A concept without kinds below it. */
    public Concept(String id, List<String> names, int[] members) {
        this(id, names, members, List.of());
    }

    /** Whether the exporter derived it from WordNet rather than the bundle's author wrote it. */
    public boolean derived() { return id.startsWith(DERIVED_PREFIX); }
}
