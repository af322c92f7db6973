// Owns the JUnit tests of the Java layer-list reader: the shared layers_*.json vectors and malformed lists.
package dev.thorsdk.runtime;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.IOException;
import java.util.List;
import java.util.Map;
import org.junit.Test;

/**
 * Reads the layer lists of tests/vectors (layers_*.json, as {@code thor-sdk layers --out} writes them):
 * the layers equal the ones the estimator vectors list, and estimating them gives the expected totals;
 * broken lists are {@link Estimator.FormatError}s naming the problem.
 */
public class LayerListTest {
    private static final String GOOD = "{\"format\":\"thor-sdk/layers\",\"version\":1,\"name\":\"tiny\","
            + "\"input_shape\":[8],\"layers\":["
            + "{\"name\":\"r\",\"kind\":\"relu\",\"role\":\"input\",\"config\":{\"numel\":8},"
            + "\"cost\":{\"flops_per_sample\":16,\"flops_fixed\":0,\"bytes_per_sample\":64,\"bytes_fixed\":0}},"
            + "{\"kind\":\"output\",\"config\":{\"in_features\":8,\"out_features\":2,\"tokens\":1},"
            + "\"cost\":{\"flops_per_sample\":96,\"flops_fixed\":72,\"bytes_per_sample\":104,\"bytes_fixed\":216,"
            + "\"launches\":1}}]}";

    @Test
    @SuppressWarnings("unchecked")
    public void readsTheSharedLayerLists() throws IOException {
        String[][] files = {{"layers_time_profile_0.json", "expected_time_profile.json", "0"},
            {"layers_time_profile_1.json", "expected_time_profile.json", "1"},
            {"layers_energy_floored_0.json", "expected_energy_floored.json", "0"},
            {"layers_energy_floored_1.json", "expected_energy_floored.json", "1"},
            {"layers_time_stand_in_0.json", "expected_time_stand_in.json", "0"},
            {"layers_time_stand_in_1.json", "expected_time_stand_in.json", "1"}};
        for (String[] f : files) {
            LayerList list = LayerList.parse(TestVectors.read(f[0]));
            Map<String, Object> exp = (Map<String, Object>) Json.parse(TestVectors.read(f[1]));
            List<Object> estimates = (List<Object>) exp.get("estimate");
            Map<String, Object> e = (Map<String, Object>) estimates.get(Integer.parseInt(f[2]));
            List<Object> want = (List<Object>) e.get("layers");
            assertEquals(f[0], want.size(), list.layers.size());
            for (int i = 0; i < want.size(); i++) {
                Map<String, Object> w = (Map<String, Object>) want.get(i);
                Estimator.Layer got = list.layers.get(i);
                assertEquals(w.get("name"), got.name);
                assertEquals(w.get("kind"), got.kind);
                assertEquals(w.get("role"), got.role);
                assertEquals(w.get("config"), got.config);
                assertEquals(w.get("op"), got.op);
                assertEquals(w.get("approx"), got.approx);
                Object r = w.get("recompute");
                assertEquals(r == null ? 0.0 : (Double) r, got.recompute, 0.0);
                Map<String, Object> c = (Map<String, Object>) w.get("cost");
                assertEquals((Double) c.get("flops_per_sample"), got.cost.flopsPerSample, 0.0);
                assertEquals((Double) c.get("bytes_fixed"), got.cost.bytesFixed, 0.0);
                assertEquals((Double) c.get("launches"), got.cost.launches, 0.0);
            }
            assertEquals("float32", list.inputDtype);
            assertTrue(list.name.startsWith("synthetic_"));
            Estimator est = Estimator.load(TestVectors.read((String) exp.get("estimator")));
            int bs = ((Double) e.get("batch_size")).intValue();
            double mean = (Double) ((Map<String, Object>) e.get("total")).get("mean");
            Estimator.Estimate r = est.estimate(list.layers, bs);
            double got = r.totalMean;
            assertTrue(f[0] + ": " + got + " vs " + mean, Math.abs(got - mean) <= 1e-9 * Math.abs(mean));
            double std = (Double) ((Map<String, Object>) e.get("total")).get("std");
            assertTrue(f[0] + ": std " + r.totalStd + " vs " + std, Math.abs(r.totalStd - std) <= 1e-9 * std);
        }
    }

    @Test
    public void defaults() {
        LayerList list = LayerList.parse(GOOD);
        assertEquals("tiny", list.name);
        assertEquals(List.of(8), list.inputShape);
        assertEquals("float32", list.inputDtype);
        assertEquals(2, list.layers.size());
        assertEquals("1", list.layers.get(1).name);     // a layer's name defaults to its index
        assertEquals("output", list.layers.get(1).role); // an output head needs no role
        assertEquals(1.0, list.layers.get(0).cost.launches, 0.0);
        LayerList bare = LayerList.parse(GOOD.replace("\"name\":\"tiny\",", "").replace("\"input_shape\":[8],", ""));
        assertNull(bare.name);
        assertTrue(bare.inputShape.isEmpty());
    }

    /** {@code GOOD} with its first {@code from} replaced, which must be there. */
    private static String with(String from, String to) {
        String s = GOOD.replaceFirst(java.util.regex.Pattern.quote(from), java.util.regex.Matcher.quoteReplacement(to));
        assertNotEquals("GOOD lacks " + from, GOOD, s);
        return s;
    }

    private static void assertFormatError(String json, String fragment) {
        try {
            LayerList.parse(json);
            fail("expected FormatError (" + fragment + ")");
        } catch (Estimator.FormatError e) {
            assertTrue(e.getMessage(), e.getMessage().contains(fragment));
            assertFalse(e.getMessage().contains("\n"));
        }
    }

    @Test
    public void rejectsBrokenLists() {
        assertFormatError(GOOD.substring(0, 40), "not valid JSON");
        assertFormatError("[]", "top level must be an object");
        assertFormatError(with("thor-sdk/layers", "thor-sdk/estimator"), "not a thor-sdk layer list");
        assertFormatError(with("\"version\":1", "\"version\":2"), "unsupported layer-list version");
        assertFormatError(with("\"version\":1", "\"version\":true"), "unsupported layer-list version");
        assertFormatError(with("\"layers\":[", "\"layers\":[],\"was\":["), "layers must be a non-empty array");
        assertFormatError(with("\"input_shape\":[8]", "\"input_shape\":[0]"), "input_shape");
        assertFormatError(with("\"name\":\"tiny\"", "\"input_dtype\":\"float16\""), "input_dtype");
        assertFormatError(with("\"kind\":\"relu\"", "\"kind\":7"), "layer 0 (r): kind must be a string");
        assertFormatError(with("\"config\":{\"numel\":8}", "\"cfg\":{\"numel\":8}"),
                "layer 0 (r): lacks field 'config'");
        assertFormatError(with("\"numel\":8", "\"numel\":-8"), "config.numel must be a number >= 0");
        assertFormatError(with("\"numel\":8", "\"numel\":\"8\""), "config.numel must be a number >= 0");
        assertFormatError(with("\"role\":\"input\",", ""), "layer 0 (r): no role");
        assertFormatError(with("\"role\":\"input\"", "\"role\":\"first\""),
                "role must be 'input', 'hidden' or 'output'");
        assertFormatError(with("\"cost\":{\"flops_per_sample\":16,", "\"cost0\":{\"flops_per_sample\":16,"),
                "layer 0 (r): no cost terms");
        assertFormatError(with("\"flops_fixed\":0,", ""), "layer 0 (r): cost.flops_fixed");
        assertFormatError(with("\"bytes_per_sample\":64", "\"bytes_per_sample\":-1"), "cost.bytes_per_sample");
        assertFormatError(with("\"launches\":1", "\"launches\":0"), "cost.launches must be a finite number > 0");
        assertFormatError(with("{\"name\":\"r\",", "7,{\"name\":\"r\","), "layer 0 must be an object");
        for (String r : new String[] {"1.5", "-0.1", "\"0.5\"", "true"}) {
            assertFormatError(with("\"role\":\"input\"", "\"role\":\"input\",\"recompute\":" + r),
                    "layer 0 (r): recompute must be a number in [0, 1]");
        }
        assertEquals(0.5, LayerList.parse(with("\"role\":\"input\"", "\"role\":\"input\",\"recompute\":0.5"))
                .layers.get(0).recompute, 0.0);
    }
}
