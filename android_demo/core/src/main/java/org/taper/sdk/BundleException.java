package org.taper.sdk;

/** A bundle is corrupt, truncated, of an unsupported version, or inconsistent (mirrors sdk.BundleError). */
public class BundleException extends RuntimeException {
    public BundleException(String message) { super(message); }
}
