package dev.thorsdk.runtime;

import static org.junit.Assert.assertTrue;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;

/** The shared test vectors folder (system property {@code thor.vectors}) and reading its files. */
final class TestVectors {
    private TestVectors() {
    }

    static File folder() {
        File dir = new File(System.getProperty("thor.vectors", "../../tests/vectors"));
        assertTrue("vectors folder not found: " + dir, dir.isDirectory());
        return dir;
    }

    static String read(File f) throws IOException {
        assertTrue("missing " + f, f.isFile());
        return new String(Files.readAllBytes(f.toPath()), StandardCharsets.UTF_8);
    }

    static String read(String name) throws IOException {
        return read(new File(folder(), name));
    }
}
