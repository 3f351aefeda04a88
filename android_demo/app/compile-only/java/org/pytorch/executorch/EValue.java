package org.pytorch.executorch;

/** Compile-only declaration of executorch-android's {@code EValue} (the members the app calls); see ../../../../pom.xml. */
public class EValue {
    private EValue() { }

    public static EValue from(Tensor tensor) {
        throw new UnsupportedOperationException("compile-only declaration: the executorch-android AAR provides EValue");
    }

    public Tensor toTensor() {
        throw new UnsupportedOperationException("compile-only declaration");
    }
}
