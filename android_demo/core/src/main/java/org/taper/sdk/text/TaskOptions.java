package org.taper.sdk.text;

/**
 * How a description becomes a task (sdk.text.resolver.TaskOptions, same defaults and ranges), checked on creation.
 * <pre>{@code
 * TaskOptions options = TaskOptions.DEFAULT.withMaxClasses(5);
 * }</pre>
 */
public final class TaskOptions {
    static final int MAX_TASK_CLASSES = 100_000;
    public static final TaskOptions DEFAULT = new TaskOptions(20, 1, 0.08, 0.13, "tell");   // min 1: sdk.engines.rest

    /** Most classes taken from free text (a named group is taken whole). */
    public final int maxClasses;
    /** Fewest classes in a task; the nearest classes by text similarity pad it. */
    public final int minClasses;
    /** Free text takes the classes within this of the best cosine similarity. */
    public final double margin;
    /** The best class must stand out from the mean similarity by this much, else nothing matches. */
    public final double minContrast;
    /** What an item the bundle lacks gets: "tell" (nothing; the closest names are said) or "nearest". */
    public final String missing;

    public TaskOptions(int maxClasses, int minClasses, double margin, double minContrast) {
        this(maxClasses, minClasses, margin, minContrast, "tell");
    }

    public TaskOptions(int maxClasses, int minClasses, double margin, double minContrast, String missing) {
        if (!"tell".equals(missing) && !"nearest".equals(missing))
            throw new DescriptionException("missing must be one of ('tell', 'nearest'), got " + missing);
        for (int v : new int[]{maxClasses, minClasses})
            if (v < 1 || v > MAX_TASK_CLASSES)
                throw new DescriptionException("max_classes and min_classes must be integers from 1 to " + MAX_TASK_CLASSES + ", got " + v);
        if (minClasses > maxClasses)
            throw new DescriptionException("min_classes (" + minClasses + ") is larger than max_classes (" + maxClasses + ")");
        for (double v : new double[]{margin, minContrast})
            if (!(v >= 0 && v <= 2))
                throw new DescriptionException("margin and min_contrast must be numbers from 0 to 2 (cosine similarities), got " + v);
        this.maxClasses = maxClasses;
        this.minClasses = minClasses;
        this.margin = margin;
        this.minContrast = minContrast;
        this.missing = missing;
    }

    public TaskOptions withMaxClasses(int v) { return new TaskOptions(v, minClasses, margin, minContrast, missing); }
    public TaskOptions withMinClasses(int v) { return new TaskOptions(maxClasses, v, margin, minContrast, missing); }
    public TaskOptions withMargin(double v) { return new TaskOptions(maxClasses, minClasses, v, minContrast, missing); }
    public TaskOptions withMinContrast(double v) { return new TaskOptions(maxClasses, minClasses, margin, v, missing); }
    public TaskOptions withMissing(String v) { return new TaskOptions(maxClasses, minClasses, margin, minContrast, v); }
}
