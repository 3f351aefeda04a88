package org.taper.sdk.format;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.PublicKey;
import java.security.Signature;
import java.security.spec.X509EncodedKeySpec;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashSet;
import java.util.Locale;
import java.util.Set;

/**
 * Signed bundles (format version 6), mirroring sdk/format/signing.py: the last 128 bytes of the file are a trailer
 * holding an Ed25519 signature of DOMAIN + the bundle's first 64 bytes (docs/bundle-format.md, "Signature").
 * A signed ExecuTorch companion (its version 3) ends in the same trailer over COMPANION_DOMAIN + its prefix
 * and header.
 * Verified with the JDK's Ed25519 (Java 15+); a public key is 64 hex digits (the .pub file's content).
 */
public final class Signatures {
    public static final int SIGNED_SINCE = 6, TRAILER = 128, SCHEME_ED25519 = 1;
    public static final byte[] MAGIC = "TAPERSIG".getBytes(StandardCharsets.US_ASCII);
    public static final byte[] DOMAIN = "taper-bundle signature v1\n".getBytes(StandardCharsets.US_ASCII);
    public static final byte[] COMPANION_DOMAIN = "taper-companion signature v1\n".getBytes(StandardCharsets.US_ASCII);
    /** DER prefix of an X.509 SubjectPublicKeyInfo for Ed25519 (RFC 8410), followed by the 32 raw key bytes. */
    private static final byte[] X509_PREFIX = {0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00};

    private Signatures() {}

    /** Who signed a bundle: the public key (64 hex digits) and its id (first 16 hex digits of its SHA-256). */
    public static final class Signer {
        public final String publicKey, keyId;

        Signer(byte[] publicKey) {
            this.publicKey = Bundle.hex(publicKey);
            this.keyId = keyId(publicKey);
        }

        @Override public String toString() { return "key " + keyId; }
    }

    static String keyId(byte[] publicKey) {
        return Bundle.hex(Bundle.sha256(ByteBuffer.wrap(publicKey))).substring(0, 16);
    }

    /** The verified signer of a version-6 bundle held in `data` (BundleException if the signature fails). */
    public static Signer verify(ByteBuffer data) {
        if (data.capacity() < 64 + TRAILER) throw new BundleException("signature: the file is too short for its trailer");
        byte[] header = new byte[64];
        Bundle.bytesAt(data, 0, header);
        return verify(data, header, DOMAIN, "bundle");
    }

    /** The verified signer of a file held in `data` whose trailer signs `domain` + `message`. */
    public static Signer verify(ByteBuffer data, byte[] message, byte[] domain, String what) {
        long size = data.capacity();
        if (size < TRAILER) throw new BundleException("signature: the file is too short for its trailer");
        ByteBuffer trailer = Bundle.slice(data, (int) (size - TRAILER), TRAILER).order(ByteOrder.LITTLE_ENDIAN);
        byte[] magic = new byte[8], publicKey = new byte[32], signature = new byte[64];
        Bundle.bytesAt(trailer, 0, magic);
        if (!Arrays.equals(magic, MAGIC))
            throw new BundleException("signature: no signature trailer at the end of a signed " + what);
        int scheme = trailer.getInt(8);
        if (scheme != SCHEME_ED25519)
            throw new BundleException("signature: scheme " + Integer.toUnsignedString(scheme) + " is not supported (1: Ed25519)");
        for (int i : new int[] {12, 13, 14, 15}) if (trailer.get(i) != 0) throw new BundleException("signature: reserved bytes are not zero");
        for (int i = 112; i < TRAILER; i++) if (trailer.get(i) != 0) throw new BundleException("signature: reserved bytes are not zero");
        Bundle.bytesAt(trailer, 16, publicKey);
        Bundle.bytesAt(trailer, 48, signature);
        boolean valid;
        try {
            Signature verifier = Signature.getInstance("Ed25519");
            verifier.initVerify(publicKey(publicKey));
            verifier.update(domain);
            verifier.update(message);
            valid = verifier.verify(signature);
        } catch (GeneralSecurityException | IllegalArgumentException e) {
            valid = false;  // a malformed key or signature encoding is a bad signature, as in Python
        }
        if (!valid)
            throw new BundleException("signature: bad signature (key " + keyId(publicKey) + "): the " + what
                    + " was changed after it was signed, or the signature is forged");
        return new Signer(publicKey);
    }

    static PublicKey publicKey(byte[] raw) throws GeneralSecurityException {
        byte[] der = Arrays.copyOf(X509_PREFIX, X509_PREFIX.length + 32);
        System.arraycopy(raw, 0, der, X509_PREFIX.length, 32);
        return KeyFactory.getInstance("Ed25519").generatePublic(new X509EncodedKeySpec(der));
    }

    /** Trusted keys as lower-case hex; IllegalArgumentException for anything that is not 64 hex digits. */
    public static Set<String> trustedSet(Collection<String> keys) {
        if (keys.isEmpty()) throw new IllegalArgumentException("trustedKeys is empty: no bundle could load");
        Set<String> out = new HashSet<>();
        for (String k : keys) {
            String key = k.strip().toLowerCase(Locale.ROOT);
            if (!key.matches("[0-9a-f]{64}"))
                throw new IllegalArgumentException("a trusted key is 64 hex digits (the .pub file's content)");
            out.add(key);
        }
        return out;
    }

    /** BundleException unless `signer` is one of `trusted` (lower-case hex public keys). */
    public static void checkTrusted(Signer signer, Set<String> trusted) {
        checkTrusted(signer, trusted, "bundle");
    }

    public static void checkTrusted(Signer signer, Set<String> trusted, String what) {
        if (signer == null)
            throw new BundleException("unsigned " + what + ": trusted keys accept only one signed by one of them "
                    + "(python -m export sign FILE --key KEY)");
        if (!trusted.contains(signer.publicKey))
            throw new BundleException("signed by an unknown key (" + signer.keyId + "): not among the trusted keys");
    }
}
