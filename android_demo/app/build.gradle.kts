plugins {
    alias(libs.plugins.android.application)
}

android {
    namespace = "org.taper.demo"
    compileSdk = 35

    defaultConfig {
        applicationId = "org.taper.demo"
        // The core avoids java.nio.file (API 26) and ByteBuffer.slice(int, int) (API 34): see Bundle.slice.
        minSdk = 24
        targetSdk = 35
        versionCode = 1
        versionName = "0.1"
    }

    compileOptions {
        // The core is Java 17 (records, List.of): D8 desugars the language features and backports the
        // Java 9+ collection factories; library desugaring covers the rest on old API levels.
        sourceCompatibility = JavaVersion.VERSION_17
        targetCompatibility = JavaVersion.VERSION_17
        isCoreLibraryDesugaringEnabled = true
    }

    buildTypes {
        release {
            isMinifyEnabled = false
        }
    }
}

dependencies {
    implementation(project(":core"))
    implementation(libs.onnxruntime.android)
    implementation(libs.executorch.android)
    coreLibraryDesugaring(libs.desugar.jdk.libs)
}
