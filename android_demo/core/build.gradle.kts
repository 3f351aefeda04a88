// The core is plain Java 17 with no dependencies; on the repository's test machines it is compiled and
// tested by core/run_tests.sh (javac), which this build mirrors for Android Studio.
plugins {
    `java-library`
}

java {
    toolchain { languageVersion.set(JavaLanguageVersion.of(17)) }
}

sourceSets {
    main {
        java.setSrcDirs(listOf("src/main/java"))
        // The resolver's compound list (Compounds.java) at the class path's root: sdk's file, the one copy.
        resources.setSrcDirs(listOf("../../sdk/text"))
        resources.include("exocentric_compounds.txt")
    }
}
