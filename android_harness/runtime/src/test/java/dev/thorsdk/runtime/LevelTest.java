// Owns the JUnit tests of the Java device level: the shared levels.json vectors (deviceLevel, level, atLevel).
package dev.thorsdk.runtime;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.IOException;
import java.util.List;
import java.util.Map;
import org.junit.Test;

/**
 * Reproduces tests/vectors/levels.json (made by tests/vectors/make_vectors.py from {@code thor_sdk.runtime}):
 * every level and ln-std from reference readings, every estimate put at a level (total, layers total, each
 * layer's mean and std) to 1e-9 relative, and every refused input's error class.
 */
public class LevelTest {
    private static final double RTOL = 1e-9;
    /** Identical readings: the Python runtime's exact sum leaves ~1e-16 of spread where plain sums leave 0. */
    private static final double ATOL = 1e-12;

    private static void close(String what, Object expected, double got) {
        double e = (Double) expected;
        assertTrue(what + ": expected " + e + " got " + got, Math.abs(got - e) <= RTOL * Math.abs(e)
                || (Math.abs(e) < ATOL && Math.abs(got) < ATOL));
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> vectors() throws IOException {
        return (Map<String, Object>) Json.parse(TestVectors.read("levels.json"));
    }

    @SuppressWarnings("unchecked")
    private static List<Map<String, Object>> cases(String key) throws IOException {
        return (List<Map<String, Object>>) vectors().get(key);
    }

    private static double[] readings(Object v) {
        List<?> l = (List<?>) v;
        double[] out = new double[l.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = (Double) l.get(i);
        }
        return out;
    }

    private static String errorClass(RuntimeException e) {
        if (e instanceof Estimator.NotFoundError) {
            return "not_found";
        }
        if (e instanceof Estimator.FormatError) {
            return "format";
        }
        if (e instanceof Estimator.UsageError) {
            return "usage";
        }
        throw e;
    }

    @SuppressWarnings("unchecked")
    private static void checkLevel(String what, Map<String, Object> q, Estimator.Level got) {
        Map<String, Object> exp = (Map<String, Object>) q.get("expected");
        close(what + " level", exp.get("level"), got.level);
        close(what + " log_std", exp.get("log_std"), got.logStd);
        assertEquals(what + " readings", ((Double) exp.get("readings")).intValue(), got.readings);
    }

    @Test
    public void deviceLevelReproducesTheVectors() throws IOException {
        int errors = 0;
        for (Map<String, Object> q : cases("device_level")) {
            String what = (String) q.get("what");
            try {
                Estimator.Level got = Estimator.deviceLevel(readings(q.get("readings")),
                        (Double) q.get("reference_value"), (Double) q.get("drift_log_std"));
                assertNull(what + ": expected " + q.get("error"), q.get("error"));
                checkLevel(what, q, got);
            } catch (Estimator.ThorError e) {
                assertEquals(what + ": " + e.getMessage(), q.get("error"), errorClass(e));
                errors++;
            }
        }
        assertTrue("no refused input was checked", errors >= 5);
        System.out.println("LevelTest: " + cases("device_level").size() + " device levels, " + errors + " refused");
    }

    @Test
    public void estimatorLevelReadsTheReferenceProbe() throws IOException {
        int checked = 0;
        for (Map<String, Object> q : cases("estimator_level")) {
            String what = (String) q.get("what");
            Estimator est = Estimator.load(TestVectors.read((String) q.get("estimator")));
            try {
                Estimator.Level got = est.level(readings(q.get("readings")));
                assertNull(what + ": expected " + q.get("error"), q.get("error"));
                checkLevel(what, q, got);
                checked++;
            } catch (Estimator.ThorError e) {
                assertEquals(what + ": " + e.getMessage(), q.get("error"), errorClass(e));
            }
        }
        assertEquals(2, checked);
    }

    @Test
    @SuppressWarnings("unchecked")
    public void estimatesAtALevelReproduceTheVectors() throws IOException {
        int checked = 0;
        for (Map<String, Object> q : cases("at_level")) {
            String what = q.get("what") + " b" + q.get("batch_size");
            Estimator est = Estimator.load(TestVectors.read((String) q.get("estimator")));
            List<Estimator.Layer> layers = LayerList.parse(TestVectors.read((String) q.get("layers"))).layers;
            int b = ((Double) q.get("batch_size")).intValue();
            Estimator.Estimate got;
            try {
                got = est.estimate(layers, b, new Estimator.Level((Double) q.get("level"), (Double) q.get("log_std")));
            } catch (Estimator.ThorError e) {
                assertEquals(what + ": " + e.getMessage(), q.get("error"), errorClass(e));
                continue;
            }
            assertNull(what + ": expected " + q.get("error"), q.get("error"));
            Map<String, Object> exp = (Map<String, Object>) q.get("expected");
            Map<String, Object> t = (Map<String, Object>) exp.get("total");
            Map<String, Object> lt = (Map<String, Object>) exp.get("layers_total");
            close(what + " total mean", t.get("mean"), got.totalMean);
            close(what + " total std", t.get("std"), got.totalStd);
            close(what + " layers total mean", lt.get("mean"), got.layersTotalMean);
            close(what + " layers total std", lt.get("std"), got.layersTotalStd);
            List<List<Double>> ls = (List<List<Double>>) exp.get("layers");
            assertEquals(ls.size(), got.layers.size());
            for (int i = 0; i < ls.size(); i++) {
                close(what + " layer " + i + " mean", ls.get(i).get(0), got.layers.get(i).mean);
                close(what + " layer " + i + " std", ls.get(i).get(1), got.layers.get(i).std);
            }
            assertNotNull(got.level);
            checked++;
        }
        assertTrue("too few estimates at a level checked: " + checked, checked >= 8);
        System.out.println("LevelTest: " + checked + " estimates at a level");
    }

    @Test
    public void anEstimateIsPutAtALevelOnce() throws IOException {
        Estimator est = Estimator.load(TestVectors.read("estimator_time_profile.json"));
        List<Estimator.Layer> layers = LayerList.parse(TestVectors.read("layers_time_profile_0.json")).layers;
        Estimator.Estimate e = est.estimate(layers, 16, new Estimator.Level(0.9, 0.01));
        try {
            Estimator.atLevel(e, new Estimator.Level(0.9, 0.01));
            fail("a second level was applied");
        } catch (Estimator.UsageError expected) {
            assertTrue(expected.getMessage().contains("already"));
        }
        assertNull(est.estimate(layers, 16, null).level);
    }
}
