package dev.thorsdk.runtime;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.IOException;
import java.util.List;
import java.util.Map;
import org.junit.Test;

/**
 * Runs every vector of tests/vectors/table_select.json (answers of the Python runtime's
 * {@code thor_sdk.runtime.table.select}, made by tests/vectors/make_vectors.py) through
 * {@link PowerTable#select}. The vectors folder comes from the system property {@code thor.vectors}.
 * Prints one {@code PowerTableTest: ...} line that tests/test_runtime_java.py checks.
 */
public class PowerTableTest {
    private static final double RTOL = 1e-12;

    @SuppressWarnings("unchecked")
    private static Map<String, Object> vectorDoc() throws IOException {
        Map<String, Object> doc = (Map<String, Object>) Json.parse(TestVectors.read("table_select.json"));
        assertEquals("thor-sdk/table-select-vectors", doc.get("format"));
        return doc;
    }

    private static double num(Object v) {
        return ((Number) v).doubleValue();
    }

    private static void close(String what, double expected, double got) {
        assertTrue(what + ": expected " + expected + " got " + got,
                Math.abs(got - expected) <= RTOL * Math.abs(expected) + 1e-300);
    }

    /** The (batch size, frequency) pair and its numbers, as the selection and every candidate carry them. */
    private static void checkPair(String where, Map<String, Object> exp, int batchSize, double freqHz,
                                  double timePerSampleS, double peakPowerW, double ratio, double scoreS) {
        assertEquals(where + " batch_size", (int) num(exp.get("batch_size")), batchSize);
        close(where + " freq_hz", num(exp.get("freq_hz")), freqHz);
        close(where + " time_per_sample_s", num(exp.get("time_per_sample_s")), timePerSampleS);
        close(where + " peak_power_w", num(exp.get("peak_power_w")), peakPowerW);
        close(where + " ratio", num(exp.get("ratio")), ratio);
        close(where + " score_s", num(exp.get("score_s")), scoreS);
    }

    @SuppressWarnings("unchecked")
    private static void checkSelection(String where, Map<String, Object> exp, PowerTable.Selection got) {
        checkPair(where, exp, got.batchSize, got.freqHz, got.timePerSampleS, got.peakPowerW, got.ratio, got.scoreS);
        Object est = exp.get("est_time_to_accuracy_s");
        if (est == null) {
            assertNull(where + " est_time_to_accuracy_s", got.estTimeToAccuracyS);
        } else {
            assertTrue(where + " est_time_to_accuracy_s is null", got.estTimeToAccuracyS != null);
            close(where + " est_time_to_accuracy_s", num(est), got.estTimeToAccuracyS);
        }
        close(where + " power_cap_w", num(exp.get("power_cap_w")), got.powerCapW);
        assertEquals(where + " knob", exp.get("knob"), got.knob);
        assertEquals(where + " simulated", exp.get("simulated"), got.simulated);
        List<Object> cands = (List<Object>) exp.get("candidates");
        assertEquals(where + " number of candidates", cands.size(), got.candidates.size());
        for (int i = 0; i < cands.size(); i++) {
            Map<String, Object> c = (Map<String, Object>) cands.get(i);
            PowerTable.Candidate g = got.candidates.get(i);
            String w = where + " candidate " + i;
            checkPair(w, c, g.batchSize, g.freqHz, g.timePerSampleS, g.peakPowerW, g.ratio, g.scoreS);
            assertEquals(w + " monotone", c.get("monotone"), g.monotone);
        }
        List<Object> nm = (List<Object>) exp.get("non_monotone_batch_sizes");
        assertEquals(where + " non_monotone_batch_sizes size", nm.size(), got.nonMonotoneBatchSizes.size());
        for (int i = 0; i < nm.size(); i++) {
            assertEquals(where + " non_monotone_batch_sizes", (int) num(nm.get(i)),
                    (int) got.nonMonotoneBatchSizes.get(i));
        }
    }

    /** Runs one query; returns the kind of answer ("result" or the error name) it checked. */
    @SuppressWarnings("unchecked")
    private static String check(String where, Object table, Map<String, Object> q) {
        double cap = num(q.get("power_cap_w"));
        String error = (String) q.get("error");
        PowerTable.Selection got;
        try {
            got = PowerTable.select(table, cap);
        } catch (PowerTable.InfeasibleCapException e) {
            assertEquals(where + ": got " + e, "infeasible", error);
            close(where + " lowest_feasible_power_w", num(q.get("lowest_feasible_power_w")), e.lowestFeasiblePowerW);
            close(where + " exception powerCapW", cap, e.powerCapW);
            assertTrue(e.getMessage(), e.getMessage().contains(String.format(java.util.Locale.ROOT, "%.3f W",
                    e.lowestFeasiblePowerW)));
            return error;
        } catch (Estimator.UsageError e) {
            assertEquals(where + ": got " + e, "usage", error);
            return error;
        } catch (Estimator.FormatError e) {
            assertEquals(where + ": got " + e, "format", error);
            assertFalse(e.getMessage().contains("\n"));
            return error;
        }
        assertNull(where + ": expected error " + error + ", got batch " + got.batchSize, error);
        checkSelection(where, (Map<String, Object>) q.get("result"), got);
        return "result";
    }

    @Test
    @SuppressWarnings("unchecked")
    public void reproducesSharedVectors() throws IOException {
        Map<String, Object> doc = vectorDoc();
        int results = 0;
        int infeasible = 0;
        int usage = 0;
        int format = 0;
        for (Object o : (List<Object>) doc.get("cases")) {
            Map<String, Object> c = (Map<String, Object>) o;
            for (Object qo : (List<Object>) c.get("queries")) {
                Map<String, Object> q = (Map<String, Object>) qo;
                String kind = check(c.get("name") + " @ " + q.get("power_cap_w") + " W", c.get("table"), q);
                results += kind.equals("result") ? 1 : 0;
                infeasible += kind.equals("infeasible") ? 1 : 0;
                usage += kind.equals("usage") ? 1 : 0;
            }
        }
        for (Object o : (List<Object>) doc.get("malformed")) {
            Map<String, Object> m = (Map<String, Object>) o;
            String kind = check("malformed " + m.get("name") + " @ " + m.get("power_cap_w") + " W", m.get("table"), m);
            format += kind.equals("format") ? 1 : 0;
            usage += kind.equals("usage") ? 1 : 0;
        }
        assertTrue(results >= 20 && infeasible >= 4 && usage >= 2 && format >= 20);
        System.out.println("PowerTableTest: " + results + " selections, " + infeasible + " infeasible, " + usage
                + " usage errors, " + format + " format errors reproduced");
    }

    @Test
    public void selectFromJsonText() {
        String json = "{\"format\": \"thor-sdk/power-table\", \"version\": 1, \"reference_samples_to_target\": 1000,"
                + " \"rows\": [{\"batch_size\": 8, \"freq_hz\": 2e8, \"time_per_sample_s\": 0.001,"
                + " \"peak_power_w\": 3},"
                + " {\"batch_size\": 8, \"freq_hz\": 1e8, \"time_per_sample_s\": 0.002, \"peak_power_w\": 2}],"
                + " \"ratios\": [{\"batch_size\": 8, \"ratio\": 0.5}]}";
        PowerTable.Selection s = PowerTable.select(json, 2.5);
        assertEquals(8, s.batchSize);
        assertEquals(1e8, s.freqHz, 0.0);
        assertEquals(0.002 * 0.5 * 1000, s.estTimeToAccuracyS, 1e-15);
        assertEquals("gpu_freq_hz", s.knob);
        assertFalse(s.simulated);
        assertEquals(8, PowerTable.select(json, 3.0).batchSize);
        assertEquals(2e8, PowerTable.select(json, 3.0).freqHz, 0.0);
        try {
            PowerTable.select(json, 1.5);
            fail("1.5 W is below every peak power");
        } catch (PowerTable.InfeasibleCapException e) {
            assertEquals(2.0, e.lowestFeasiblePowerW, 0.0);
            assertEquals(1.5, e.powerCapW, 0.0);
            assertTrue(e instanceof Estimator.UsageError);
        }
        for (double bad : new double[] {0.0, -1.0, Double.NaN, Double.POSITIVE_INFINITY}) {
            try {
                PowerTable.select(json, bad);
                fail("cap " + bad);
            } catch (PowerTable.InfeasibleCapException e) {
                fail("cap " + bad + " is a usage error, not infeasible");
            } catch (Estimator.UsageError e) {
                assertTrue(e.getMessage(), e.getMessage().startsWith("power cap must be a positive number"));
            }
        }
        try {
            PowerTable.select(json.substring(0, 40), 5.0);
            fail("truncated JSON");
        } catch (Estimator.FormatError e) {
            assertTrue(e.getMessage().startsWith("not valid JSON"));
        }
    }

    @Test
    public void binarySearchIsBisectRight() {
        double[] powers = {1.0, 2.0, 2.0, 3.0};
        assertTrue(PowerTable.isMonotone(powers));
        assertEquals(-1, PowerTable.highestFeasibleIndex(powers, 0.5, true));
        assertEquals(0, PowerTable.highestFeasibleIndex(powers, 1.0, true));
        assertEquals(2, PowerTable.highestFeasibleIndex(powers, 2.0, true));
        assertEquals(3, PowerTable.highestFeasibleIndex(powers, 9.0, true));
        double[] dip = {1.0, 3.0, 2.0, 4.0};
        assertFalse(PowerTable.isMonotone(dip));
        assertEquals(2, PowerTable.highestFeasibleIndex(dip, 2.5, false));
        java.util.Random rng = new java.util.Random(7);
        for (int t = 0; t < 500; t++) {
            double[] p = new double[1 + rng.nextInt(10)];
            for (int i = 0; i < p.length; i++) {
                p[i] = (i == 0 ? 0 : p[i - 1]) + rng.nextInt(3);
            }
            double cap = rng.nextInt(2 * p.length + 2) - 1;
            int linear = -1;
            for (int i = 0; i < p.length; i++) {
                if (p[i] <= cap) {
                    linear = i;
                }
            }
            assertEquals(linear, PowerTable.highestFeasibleIndex(p, cap, true));
            assertEquals(linear, PowerTable.highestFeasibleIndex(p, cap, false));
        }
    }
}
