package org.pytorch.executorch;

/** Compile-only declaration of executorch-android's {@code Module} (the members the app calls); see ../../../../pom.xml. */
public class Module {
    public static final int LOAD_MODE_FILE = 0;

    private Module() { }

    public static Module load(String modelPath, int loadMode, int numThreads) {
        throw new UnsupportedOperationException("compile-only declaration: the executorch-android AAR provides Module");
    }

    public EValue[] forward(EValue... inputs) {
        throw new UnsupportedOperationException("compile-only declaration");
    }

    public void destroy() {
        throw new UnsupportedOperationException("compile-only declaration");
    }
}
