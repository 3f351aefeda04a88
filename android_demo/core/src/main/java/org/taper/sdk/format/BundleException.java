package org.taper.sdk.format;

/** A bundle is corrupt, truncated, of an unsupported version, or inconsistent (mirrors sdk.BundleError). */
public class BundleException extends RuntimeException {
    public BundleException(String message) { super(message); }
}
