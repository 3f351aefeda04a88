package org.pytorch.executorch;

/** Compile-only declaration of executorch-android's {@code Tensor} (the members the app calls); see ../../../../pom.xml. */
public abstract class Tensor {
    private Tensor() { }

    public static Tensor fromBlob(float[] data, long[] shape) {
        throw new UnsupportedOperationException("compile-only declaration: the executorch-android AAR provides Tensor");
    }

    public float[] getDataAsFloatArray() {
        throw new UnsupportedOperationException("compile-only declaration");
    }
}
