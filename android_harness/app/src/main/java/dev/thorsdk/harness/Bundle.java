package dev.thorsdk.harness;

import dev.thorsdk.runtime.Estimator;
import dev.thorsdk.runtime.Json;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A probe bundle pushed by the host: a folder with manifest.json (the parts to measure and the model
 * file of each, the protocol settings, the metric) and a sha256 per file, checked before anything runs.
 * File names from the manifest are validated: relative, no "..", no separators beyond '/'.
 */
public final class Bundle {
    public final File dir;
    public final Map<String, Object> manifest;
    /** part name -> model file (in manifest order). */
    public final Map<String, File> parts = new LinkedHashMap<>();

    @SuppressWarnings("unchecked")
    public Bundle(File dir) throws IOException {
        this.dir = dir;
        File mf = new File(dir, "manifest.json");
        Object doc;
        try {
            doc = Json.parse(new String(Files.readAllBytes(mf.toPath()), StandardCharsets.UTF_8));
        } catch (Estimator.FormatError e) {
            throw new IOException("bundle manifest.json is " + e.getMessage(), e);
        }
        if (!(doc instanceof Map)) {
            throw new IOException("manifest.json is not a JSON object");
        }
        manifest = (Map<String, Object>) doc;
        Object p = manifest.get("parts");
        if (p instanceof Map) {
            for (Map.Entry<String, Object> e : ((Map<String, Object>) p).entrySet()) {
                parts.put(e.getKey(), file(modelName(e.getValue())));
            }
        } else if (p instanceof List) {
            for (Object o : (List<Object>) p) {
                Map<String, Object> m = (Map<String, Object>) o;
                parts.put((String) m.get("name"), file(modelName(m)));
            }
        } else {
            throw new IOException("manifest.json lists no parts");
        }
        verifyHashes();
    }

    @SuppressWarnings("unchecked")
    private static String modelName(Object v) throws IOException {
        if (v instanceof String) {
            return (String) v;
        }
        if (v instanceof Map) {
            Map<String, Object> m = (Map<String, Object>) v;
            for (String k : new String[] {"model", "file", "path", "onnx"}) {
                if (m.get(k) instanceof String) {
                    return (String) m.get(k);
                }
            }
        }
        throw new IOException("manifest part without a model file: " + v);
    }

    /** A file inside the bundle; refuses absolute paths and "..". */
    public File file(String rel) throws IOException {
        if (rel.isEmpty() || rel.startsWith("/") || rel.contains("\\") || rel.contains("\u0000")) {
            throw new IOException("bad file name in manifest: " + rel);
        }
        for (String seg : rel.split("/")) {
            if (seg.equals("..")) {
                throw new IOException("file name in manifest leaves the bundle: " + rel);
            }
        }
        return new File(dir, rel);
    }

    @SuppressWarnings("unchecked")
    private void verifyHashes() throws IOException {
        Object f = manifest.get("files");
        Map<String, String> want = new LinkedHashMap<>();
        if (f instanceof Map) {
            for (Map.Entry<String, Object> e : ((Map<String, Object>) f).entrySet()) {
                Object v = e.getValue();
                if (v instanceof Map) {
                    v = ((Map<String, Object>) v).get("sha256");
                }
                want.put(e.getKey(), (String) v);
            }
        } else if (f instanceof List) {
            for (Object o : (List<Object>) f) {
                Map<String, Object> m = (Map<String, Object>) o;
                want.put((String) m.get("path"), (String) m.get("sha256"));
            }
        }
        for (Map.Entry<String, String> e : want.entrySet()) {
            String got = sha256(file(e.getKey()));
            if (!got.equalsIgnoreCase(e.getValue())) {
                throw new IOException("sha256 mismatch for " + e.getKey() + " (bundle corrupted in transfer?)");
            }
        }
    }

    public static String sha256(File f) throws IOException {
        MessageDigest md;
        try {
            md = MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IOException(e);
        }
        try (InputStream in = Files.newInputStream(f.toPath())) {
            byte[] buf = new byte[1 << 16];
            int n;
            while ((n = in.read(buf)) > 0) {
                md.update(buf, 0, n);
            }
        }
        StringBuilder sb = new StringBuilder();
        for (byte b : md.digest()) {
            sb.append(String.format("%02x", b));
        }
        return sb.toString();
    }

    @SuppressWarnings("unchecked")
    public Map<String, Object> settings() {
        Object s = manifest.get("settings");
        return s instanceof Map ? (Map<String, Object>) s : null;
    }

    public String metric() {
        Object m = manifest.get("metric");
        return m instanceof String ? (String) m : "time";
    }
}
