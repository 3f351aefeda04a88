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
        // The resolver's word lists (Compounds.java, EnglishWords.java) at the class path's root: sdk/text's .txt
        // and .txt.gz files, the one copy (pyproject.toml ships the same patterns).
        resources.setSrcDirs(listOf("../../sdk/text"))
        resources.include("*.txt", "*.txt.gz")
    }
}
