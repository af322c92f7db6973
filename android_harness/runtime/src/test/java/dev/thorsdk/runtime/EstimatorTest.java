package dev.thorsdk.runtime;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.File;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.Test;

/**
 * Reproduces the shared test vectors (tests/vectors, made by scikit-learn) and checks validation.
 * The vectors folder comes from the system property {@code thor.vectors}.
 */
public class EstimatorTest {
    private static final double RTOL = 1e-9;

    private static List<File> expectedFiles() {
        List<File> out = new ArrayList<>();
        File[] all = TestVectors.folder().listFiles();
        for (File f : all) {
            if (f.getName().startsWith("expected_") && f.getName().endsWith(".json")) {
                out.add(f);
            }
        }
        assertFalse("no expected_*.json vectors", out.isEmpty());
        return out;
    }

    private static void close(String what, double expected, double got) {
        assertTrue(what + ": expected " + expected + " got " + got,
                Math.abs(got - expected) <= RTOL * Math.abs(expected) + 1e-300);
    }

    @SuppressWarnings("unchecked")
    private static List<Estimator.Layer> layers(Object list) {
        List<Estimator.Layer> out = new ArrayList<>();
        for (Object o : (List<Object>) list) {
            Map<String, Object> l = (Map<String, Object>) o;
            Map<String, Double> config = new LinkedHashMap<>();
            for (Map.Entry<String, Object> e : ((Map<String, Object>) l.get("config")).entrySet()) {
                config.put(e.getKey(), (Double) e.getValue());
            }
            out.add(new Estimator.Layer((String) l.get("name"), (String) l.get("kind"), (String) l.get("role"), config));
        }
        return out;
    }

    @Test
    @SuppressWarnings("unchecked")
    public void reproducesSharedVectors() throws IOException {
        int checked = 0;
        for (File f : expectedFiles()) {
            Map<String, Object> exp = (Map<String, Object>) Json.parse(TestVectors.read(f));
            Estimator est = Estimator.load(TestVectors.read((String) exp.get("estimator")));
            for (Object o : (List<Object>) exp.get("predict_layer")) {
                Map<String, Object> q = (Map<String, Object>) o;
                double[] ms = est.predictLayer((String) q.get("kind"), (Map<String, Object>) q.get("features"));
                close(f.getName() + " predictLayer mean", (Double) q.get("mean"), ms[0]);
                close(f.getName() + " predictLayer std", (Double) q.get("std"), ms[1]);
                checked++;
            }
            for (Object o : (List<Object>) exp.get("estimate")) {
                Map<String, Object> e = (Map<String, Object>) o;
                int bs = ((Double) e.get("batch_size")).intValue();
                Estimator.Estimate r = est.estimate(layers(e.get("layers")), bs);
                Map<String, Object> total = (Map<String, Object>) e.get("total");
                close(f.getName() + " total mean", (Double) total.get("mean"), r.totalMean);
                close(f.getName() + " total std", (Double) total.get("std"), r.totalStd);
                List<Object> means = (List<Object>) e.get("layer_means");
                List<Object> stds = (List<Object>) e.get("layer_stds");
                assertEquals(means.size(), r.layers.size());
                for (int i = 0; i < means.size(); i++) {
                    close("layer mean", (Double) means.get(i), r.layers.get(i).mean);
                    close("layer std", (Double) stds.get(i), r.layers.get(i).std);
                }
                assertEquals(bs, r.batchSize);
                assertEquals(est.metric, r.metric);
                checked++;
            }
        }
        assertTrue(checked >= 4);
    }

    private static String vectorText() throws IOException {
        return TestVectors.read("estimator_time_log.json");
    }

    private static void assertFormatError(String json, String fragment) {
        try {
            Estimator.load(json);
            fail("expected FormatError (" + fragment + ")");
        } catch (Estimator.FormatError e) {
            assertTrue(e.getMessage(), e.getMessage().contains(fragment));
            assertFalse(e.getMessage().contains("\n"));
        }
    }

    @Test
    public void rejectsBrokenFiles() throws IOException {
        String good = vectorText();
        assertFormatError(good.substring(0, good.length() / 2), "not valid JSON");
        assertFormatError("[1, 2]", "must be an object");
        assertFormatError(good.replace("\"version\":1", "\"version\":2"), "version");
        assertFormatError(good.replace("\"format\":\"thor-sdk/estimator\"", "\"format\":\"x\""), "format");
        assertFormatError(good.replace("\"y_mean\":", "\"y_mean\":NaN,\"was\":"), "not valid JSON");
        assertFormatError(good.replace("\"alpha\":", "\"alpha_gone\":"), "lacks field 'alpha'");
        assertFormatError(good.replace("\"alpha\":[", "\"alpha\":[1.0,"), "alpha has");
        assertFormatError(good.replace("\"unit\":\"s\"", "\"unit\":\"J\""), "unit");
        assertFormatError(good.replace("\"nu\":2.5", "\"nu\":1.5"), "nu");
        assertFormatError(good.replace("\"n_samples\":", "\"n_samples\":1000,\"was\":"), "n_samples");
    }

    @Test
    public void unknownKindIsNamed() throws IOException {
        Estimator est = Estimator.load(vectorText());
        List<Estimator.Layer> ls = new ArrayList<>();
        Map<String, Double> cfg = new HashMap<>();
        cfg.put("input_size", 8.0);
        ls.add(new Estimator.Layer("x", "lstm", "hidden", cfg));
        try {
            est.estimate(ls, 8);
            fail("expected NotFoundError");
        } catch (Estimator.NotFoundError e) {
            assertEquals("estimator has no GP for kind 'lstm'; probe it on this device", e.getMessage());
        }
    }

    @Test
    public void badInputsAreUsageErrors() throws IOException {
        Estimator est = Estimator.load(vectorText());
        Map<String, Object> f = new HashMap<>();
        f.put("batch_size", 8.0);
        f.put("role", 0.0);
        try {
            est.predictLayer("relu", f);
            fail("missing numel");
        } catch (Estimator.UsageError e) {
            assertTrue(e.getMessage().contains("'numel'"));
        }
        f.put("numel", 400.0);
        f.put("role", "sideways");
        try {
            est.predictLayer("relu", f);
            fail("bad role");
        } catch (Estimator.UsageError e) {
            assertTrue(e.getMessage().contains("role"));
        }
        f.put("role", "input");
        double[] byName = est.predictLayer("relu", f);
        f.put("role", 1.0);
        double[] byCode = est.predictLayer("relu", f);
        assertEquals(byName[0], byCode[0], 0.0);
        assertEquals(byName[1], byCode[1], 0.0);
        try {
            est.estimate(new ArrayList<>(), 0);
            fail("batch size 0");
        } catch (Estimator.UsageError e) {
            assertTrue(e.getMessage().contains("batch size"));
        }
    }

    @Test
    public void identicalLayersAreCorrelated() throws IOException {
        Estimator est = Estimator.load(vectorText());
        Map<String, Double> cfg = new HashMap<>();
        cfg.put("numel", 4704.0);
        Estimator.Layer l = new Estimator.Layer("r", "relu", "hidden", cfg);
        Estimator.Estimate one = est.estimate(List.of(l), 32);
        Estimator.Estimate three = est.estimate(List.of(l, l, l), 32);
        close("3x mean", 3 * one.totalMean, three.totalMean);
        assertTrue(three.totalStd > Math.sqrt(3) * one.totalStd);
        assertTrue(three.totalStd <= 3 * one.totalStd * (1 + 1e-12));
    }

    @Test
    @SuppressWarnings("unchecked")
    public void jsonParser() {
        Object v = Json.parse(" {\"a\": [1, -2.5e-3, true, false, null], \"s\": \"q\\\"\\u00e9\\n\", \"o\": {}} ");
        Map<String, Object> m = (Map<String, Object>) v;
        List<Object> a = (List<Object>) m.get("a");
        assertEquals(1.0, (Double) a.get(0), 0.0);
        assertEquals(-2.5e-3, (Double) a.get(1), 0.0);
        assertEquals(Boolean.TRUE, a.get(2));
        assertEquals(null, a.get(4));
        assertEquals("q\"\u00e9\n", m.get("s"));
        assertTrue(((Map<String, Object>) m.get("o")).isEmpty());
        for (String bad : new String[] {"", "{", "[1,]", "{\"a\" 1}", "01", "1.", "Infinity", "\"\\x\"", "[1] 2", "tru"}) {
            try {
                Json.parse(bad);
                fail("parsed invalid JSON: " + bad);
            } catch (Estimator.FormatError e) {
                assertTrue(e.getMessage().startsWith("not valid JSON"));
            }
        }
    }
}
