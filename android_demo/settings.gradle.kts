// The Android project: the Java core (plain Java 17, tested on the JVM by the repository's test command)
// and the demo app (Android; not built on the repository's test machines: see README.md).
pluginManagement {
    repositories {
        google()
        mavenCentral()
        gradlePluginPortal()
    }
}
dependencyResolutionManagement {
    repositoriesMode.set(RepositoriesMode.FAIL_ON_PROJECT_REPOS)
    repositories {
        google()
        mavenCentral()
    }
}
rootProject.name = "taper-android"
include(":core", ":app")
