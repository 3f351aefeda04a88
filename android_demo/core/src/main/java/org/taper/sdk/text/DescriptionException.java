package org.taper.sdk.text;

/** The description, a class name or an option cannot be used (sdk.errors.DescriptionError). */
public final class DescriptionException extends IllegalArgumentException {
    public DescriptionException(String message) { super(message); }
}
