package org.taper.sdk.format;

import java.util.List;

/**
 * A kind of thing the classes belong to (a WordNet hypernym such as "clothing", format 5): its names, the
 * first primary, and its classes (strictly increasing indices, at least two). sdk.format.bundle.Concept's mirror.
 */
public record Concept(String id, List<String> names, int[] members) {}
