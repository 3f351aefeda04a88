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
        // The resolver's word lists (Compounds.java, EnglishWords.java) at the class path's root: sdk's files,
        // the one copy.
        resources.setSrcDirs(listOf("../../sdk/text"))
        resources.include("exocentric_compounds.txt", "english_words.txt.gz")
    }
}
