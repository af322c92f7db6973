// Owns the JUnit tests of the Java estimator runtime: the shared format-2 vectors, malformed files, bad inputs.
package dev.thorsdk.runtime;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.Test;

/**
 * Reproduces the shared test vectors (tests/vectors, made by tests/vectors/make_vectors.py and
 * reproduced by the Python runtime) and checks validation. The vectors folder comes from the system
 * property {@code thor.vectors}.
 */
public class EstimatorTest {
    private static final double RTOL = 1e-9;
    /** The expected_*.json cases every runtime reproduces. */
    private static final String[] CASES = {"expected_time_profile.json", "expected_energy_floored.json",
        "expected_time_grouped.json", "expected_time_stand_in.json", "expected_time_defaults.json",
        "expected_time_unread.json", "expected_time_frozen.json", "expected_time_step_bytes.json",
        "expected_time_gemm.json", "expected_time_per_call.json", "expected_time_shared_launch.json",
        "expected_time_shared_launch_v4.json"};
    /** Cost terms of a relu over 4704 numbers (any finite non-negative terms would do here). */
    private static final Estimator.Cost RELU_COST = new Estimator.Cost(9408.0, 0.0, 75264.0, 0.0);

    private static void close(String what, double expected, double got) {
        assertTrue(what + ": expected " + expected + " got " + got,
                Math.abs(got - expected) <= RTOL * Math.abs(expected) + 1e-300);
    }

    @SuppressWarnings("unchecked")
    private static Estimator.Cost cost(Object o) {
        return Estimator.Cost.of((Map<String, Object>) o);
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
            Object r = l.get("recompute");
            out.add(new Estimator.Layer((String) l.get("name"), (String) l.get("kind"), (String) l.get("role"), config,
                    cost(l.get("cost")), (String) l.get("op"), (String) l.get("approx"),
                    r == null ? 0.0 : (Double) r));
        }
        return out;
    }

    @Test
    @SuppressWarnings("unchecked")
    public void reproducesSharedVectors() throws IOException {
        int checked = 0;
        for (String name : CASES) {
            Map<String, Object> exp = (Map<String, Object>) Json.parse(TestVectors.read(name));
            Estimator est = Estimator.load(TestVectors.read((String) exp.get("estimator")));
            for (Object o : (List<Object>) exp.get("predict_layer")) {
                Map<String, Object> q = (Map<String, Object>) o;
                double[] ms = est.predictLayer((String) q.get("kind"), (Map<String, Object>) q.get("features"),
                        cost(q.get("cost")));
                close(name + " predictLayer mean", (Double) q.get("mean"), ms[0]);
                close(name + " predictLayer std", (Double) q.get("std"), ms[1]);
                checked++;
            }
            for (Object o : (List<Object>) exp.get("estimate")) {
                Map<String, Object> e = (Map<String, Object>) o;
                int bs = ((Double) e.get("batch_size")).intValue();
                Estimator.Estimate r = est.estimate(layers(e.get("layers")), bs);
                Map<String, Object> total = (Map<String, Object>) e.get("total");
                Map<String, Object> layersTotal = (Map<String, Object>) e.get("layers_total");
                close(name + " total mean", (Double) total.get("mean"), r.totalMean);
                close(name + " total std", (Double) total.get("std"), r.totalStd);
                close(name + " layers_total mean", (Double) layersTotal.get("mean"), r.layersTotalMean);
                close(name + " layers_total std", (Double) layersTotal.get("std"), r.layersTotalStd);
                List<Object> means = (List<Object>) e.get("layer_means");
                List<Object> stds = (List<Object>) e.get("layer_stds");
                assertEquals(means.size(), r.layers.size());
                List<Object> unread = e.containsKey("layer_unread") ? (List<Object>) e.get("layer_unread")
                        : Collections.emptyList();
                for (int i = 0; i < means.size(); i++) {
                    close(name + " layer " + i + " mean", (Double) means.get(i), r.layers.get(i).mean);
                    close(name + " layer " + i + " std", (Double) stds.get(i), r.layers.get(i).std);
                    // a layer read at a feature its kind's model predates is flagged (and explained), no other
                    boolean flagged = unread.contains((double) i);
                    assertEquals(name + " layer " + i + " unread feature", flagged, r.layers.get(i).unreadFeature);
                    if (flagged) {
                        assertTrue(r.layers.get(i).approx, r.layers.get(i).approx.contains("predates its feature"));
                    }
                }
                assertEquals(bs, r.batchSize);
                assertEquals(est.metric, r.metric);
                assertEquals(est.runtime, r.runtime);
                assertEquals(est.deviceName(), r.device);
                checked++;
            }
        }
        assertTrue(checked >= 8);
    }

    private static String vectorText() throws IOException {
        return TestVectors.read("estimator_time_profile.json");
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

    /** {@code good} with its first occurrence of {@code from} replaced, which must be there. */
    private static String first(String good, String from, String to) {
        assertTrue("vector lacks " + from, good.contains(from));
        int i = good.indexOf(from);
        return good.substring(0, i) + to + good.substring(i + from.length());
    }

    /** {@code good} with the first number after {@code key:[} (or {@code key:[[}) replaced by {@code to}. */
    private static String firstNumber(String good, String key, String to) {
        String with = good.replaceFirst("(\"" + key + "\":\\[+)[^,\\]]+", "$1" + to);
        assertNotEquals("vector lacks " + key, good, with);
        return with;
    }

    @Test
    public void readsAFeatureLeftOutAsItsDefaultAndRejectsMalformedDefaults() throws IOException {
        String good = TestVectors.read("estimator_time_defaults.json");
        Estimator est = Estimator.load(good);
        Map<String, Object> c = new HashMap<>();
        for (String[] kv : new String[][] {{"in_channels", "16"}, {"out_channels", "32"}, {"kernel", "3"},
                {"stride", "1"}, {"padding", "1"}, {"groups", "1"}, {"length", "96"}, {"bias", "1"},
                {"batch_size", "16"}}) {
            c.put(kv[0], Double.parseDouble(kv[1]));
        }
        c.put("role", "hidden");
        Estimator.Cost cost = new Estimator.Cost(10.0, 0.0, 10.0, 0.0);
        double[] leftOut = est.predictLayer("conv1d", c, cost);
        Map<String, Object> one = new HashMap<>(c);
        one.put("dilation", 1.0);
        assertArrayEquals(leftOut, est.predictLayer("conv1d", one, cost), 0.0);
        one.put("dilation", 4.0);
        assertNotEquals(leftOut[0], est.predictLayer("conv1d", one, cost)[0], 0.0);
        String defaults = "\"defaults\":{\"dilation\":1}";
        assertFormatError(first(good, defaults, "\"defaults\":[1]"), "must be an object");
        assertFormatError(first(good, defaults, "\"defaults\":{\"nope\":1}"), "names 'nope'");
        assertFormatError(first(good, defaults, "\"defaults\":{\"batch_size\":1}"), "names 'batch_size'");
        assertFormatError(first(good, defaults, "\"defaults\":{\"dilation\":-1}"), "finite number >= 0");
        assertFormatError(first(good, defaults, "\"defaults\":{\"dilation\":true}"), "finite number >= 0");
        Estimator without = Estimator.load(first(good, "," + defaults, ""));
        try {
            without.predictLayer("conv1d", c, cost);
            fail("expected UsageError");
        } catch (Estimator.UsageError e) {
            assertTrue(e.getMessage(), e.getMessage().contains("needs feature 'dilation'"));
        }
    }

    @Test
    public void rejectsBrokenFiles() throws IOException {
        String good = vectorText();
        Estimator.load(good);
        assertFormatError(good.substring(0, good.length() / 2), "not valid JSON");
        assertFormatError("[1, 2]", "must be an object");
        assertFormatError(first(good, "\"version\":2", "\"version\":1"), "refit the campaign with `thor-sdk fit`");
        assertFormatError(first(good, "\"version\":2", "\"version\":6"), "unsupported estimator version 6");
        assertFormatError(first(good, "\"version\":2", "\"version\":2.5"), "unsupported estimator version 2.5");
        Estimator.load(first(good, "\"version\":2", "\"version\":3")); // 3 reads a file without per_step_byte alike
        Estimator.load(first(good, "\"version\":2", "\"version\":4")); // 4 one without per_call alike
        assertFormatError(first(good, "\"per_byte\":", "\"per_call\":-1,\"per_byte\":"), "per_call must be >= 0");
        assertFormatError(first(good, "\"per_byte\":", "\"per_step_byte\":-1,\"per_byte\":"),
                "per_step_byte must be >= 0");
        assertFormatError(first(good, "\"format\":\"thor-sdk/estimator\"", "\"format\":\"x\""), "format");
        assertFormatError(first(good, "\"residual_offset\":", "\"residual_offset\":NaN,\"was\":"), "not valid JSON");
        assertFormatError(first(good, "\"runtime\":\"torch\",", ""), "lacks field 'runtime'");
        assertFormatError(first(good, "\"runtime\":\"torch\"", "\"runtime\":3"), "runtime must be a string");
        assertFormatError(good.replace("\"alpha\":", "\"alpha_gone\":"), "lacks field 'alpha'");
        assertFormatError(good.replace("\"alpha\":[", "\"alpha\":[1.0,"), "alpha has");
        assertFormatError(first(good, "\"var_factor\":[[", "\"var_factor\":[[1.0,"), ".var_factor[0] has");
        assertFormatError(first(good, "\"inducing\":[[", "\"inducing\":[[1.0,"), ".inducing[0] has");
        assertFormatError(first(good, "\"x_mean\":[", "\"x_mean\":[1.0,"), ".x_mean has");
        assertFormatError(firstNumber(good, "x_scale", "0"), ".x_scale[0] must be > 0");
        assertFormatError(good.replace("\"per_flop\":", "\"per_flop\":-1e-9,\"was\":"), "per_flop must be >= 0");
        assertFormatError(good.replace("\"overhead\":", "\"overhead\":0,\"was\":"), "overhead must be > 0");
        assertFormatError(good.replace("\"per_byte\":", "\"per_byte_gone\":"), "lacks field 'per_byte'");
        assertFormatError(good.replace("\"residual_offset\":", "\"residual_offset\":61,\"was\":"),
                "|residual_offset| above 60");
        assertFormatError(good.replace("\"residual_offset\":", "\"residual_offset\":\"1.0\",\"was\":"),
                "residual_offset must be a number");
        assertFormatError(good.replace("\"constant\":", "\"constant\":true,\"was\":"), "constant must be a number");
        assertFormatError(good.replace("\"noise_level\":", "\"noise_level\":25,\"was\":"),
                "constant + noise_level exceeds 25");
        assertFormatError(firstNumber(good, "length_scale", "1e-300"), "length_scale below 1e-6");
        assertFormatError(good.replace("\"unit\":\"s\"", "\"unit\":\"J\""), "unit");
        assertFormatError(good.replace("\"nu\":2.5", "\"nu\":1.5"), "nu");
        assertFormatError(good.replace("\"n_samples\":", "\"n_samples\":0,\"was\":"), "n_samples");
        assertFormatError(good.replace("\"n_samples\":", "\"n_samples\":1.5,\"was\":"), "n_samples");
        assertFormatError(first(good, "\"rel_std\":", "\"rel_std\":-0.1,\"was\":"), "rel_std must be >= 0");
        assertFormatError(first(good, "\"rel_std\":", "\"rel_std\":11,\"was\":"), "rel_std above 10");
        assertFormatError(first(good, "\"kinds\":{", "\"kinds\":{\"relu2\":[1,2],"), "kinds['relu2'] must be an object");
    }

    private static String repeat(String s, int n) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < n; i++) {
            b.append(s);
        }
        return b.toString();
    }

    @Test
    public void readerCapsMatchThePythonRuntime() throws IOException {
        String good = vectorText();
        assertFormatError(first(good, "\"inducing\":[", "\"inducing\":[" + repeat("[0],", 513)), "at most 512 are read");
        assertFormatError(first(good, "\"var_factor\":[", "\"var_factor\":[" + repeat("[0],", 65)),
                "at most 64 are read");
        assertFormatError(first(good, "\"kinds\":{", "\"kinds\":{"
                + manyKinds(257)), "kinds; at most 256 are read");
        // 500 rows of 2,100 numbers: 1,050,000 numbers, refused before any kind is parsed
        String row = "[" + repeat("0,", 2099) + "0],";
        assertFormatError(first(good, "\"inducing\":[", "\"inducing\":[" + repeat(row, 500)),
                "at most 1000000 are read");
        assertFormatError(first(good, "\"inducing\":[", "\"inducing\":[" + repeat(" ", Estimator.MAX_TEXT_CHARS)),
                "characters; at most");
        assertFormatError(first(good, "\"runtime\":\"torch\"", "\"runtime\":\"torch\",\"runtime\":\"onnxruntime\""),
                "key 'runtime' appears twice");
        Estimator est = Estimator.load(good);
        List<Estimator.Layer> many = new ArrayList<>();
        Map<String, Double> config = new HashMap<>();
        config.put("numel", 4704.0);
        for (int i = 0; i < 4097; i++) {
            many.add(new Estimator.Layer("r" + i, "relu", "hidden", config, RELU_COST));
        }
        assertUsageError(() -> est.estimate(many, 16), "4097 layers; at most 4096 are estimated at once");
        est.estimate(many.subList(0, 4096), 16);
    }

    private static String manyKinds(int n) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < n; i++) {
            b.append("\"k").append(i).append("\":{},");
        }
        return b.toString();
    }

    /** An input conv2d layer's features at batch 32 (stride 1, padding 1, one group, 28x28, with bias). */
    private static Map<String, Object> convFeatures(double inChannels, double outChannels, double kernel) {
        Map<String, Object> f = new HashMap<>();
        String[] names = {"in_channels", "out_channels", "kernel", "stride", "padding", "groups", "height", "width",
            "bias"};
        double[] vals = {inChannels, outChannels, kernel, 1, 1, 1, 28, 28, 1};
        for (int j = 0; j < names.length; j++) {
            f.put(names[j], vals[j]);
        }
        f.put("batch_size", 32.0);
        f.put("role", "input");
        return f;
    }

    @Test
    public void corruptAlphaIsAFormatErrorWhereItIsUsed() throws IOException {
        // |k_i| <= constant, so only the residual weights can blow the log residual up
        Estimator est = Estimator.load(firstNumber(vectorText(), "alpha", "1e300"));
        Map<String, Object> f = new HashMap<>();
        f.put("numel", 4704.0);
        f.put("batch_size", 32.0);
        f.put("role", "hidden");
        est.predictLayer("relu", f, RELU_COST); // another kind: untouched (the first alpha is conv2d's)
        Map<String, Object> c = convFeatures(1, 64, 1);
        try {
            est.predictLayer("conv2d", c, new Estimator.Cost(230400.0, 256.0, 467072.0, 2560.0));
            fail("expected FormatError");
        } catch (Estimator.FormatError e) {
            assertTrue(e.getMessage(), e.getMessage().contains("kinds['conv2d']") && e.getMessage().contains("corrupt"));
        }
    }

    @Test
    public void unknownKindIsNamed() throws IOException {
        Estimator est = Estimator.load(vectorText());
        List<Estimator.Layer> ls = new ArrayList<>();
        Map<String, Double> cfg = new HashMap<>();
        cfg.put("input_size", 8.0);
        ls.add(new Estimator.Layer("x", "lstm", "hidden", cfg, RELU_COST));
        try {
            est.estimate(ls, 8);
            fail("expected NotFoundError");
        } catch (Estimator.NotFoundError e) {
            assertEquals("estimator has no model for kind 'lstm'; probe it on this device", e.getMessage());
        }
        try {
            est.predictLayer("lstm", new HashMap<String, Object>(), RELU_COST);
            fail("expected NotFoundError");
        } catch (Estimator.NotFoundError e) {
            assertTrue(e.getMessage().contains("'lstm'"));
        }
    }

    private static void assertUsageError(Runnable r, String fragment) {
        try {
            r.run();
            fail("expected UsageError (" + fragment + ")");
        } catch (Estimator.UsageError e) {
            assertTrue(e.getMessage(), e.getMessage().contains(fragment));
        }
    }

    @Test
    public void badInputsAreUsageErrors() throws IOException {
        Estimator est = Estimator.load(vectorText());
        Map<String, Object> f = new HashMap<>();
        f.put("batch_size", 8.0);
        f.put("role", 0.0);
        assertUsageError(() -> est.predictLayer("relu", f, RELU_COST),
                "kind 'relu' needs feature 'numel' (features: numel, batch_size, role)");
        f.put("numel", 400.0);
        f.put("role", "sideways");
        assertUsageError(() -> est.predictLayer("relu", f, RELU_COST), "role");
        f.put("role", "input");
        double[] byName = est.predictLayer("relu", f, RELU_COST);
        f.put("role", 1.0);
        double[] byCode = est.predictLayer("relu", f, RELU_COST);
        assertEquals(byName[0], byCode[0], 0.0);
        assertEquals(byName[1], byCode[1], 0.0);
        assertUsageError(() -> est.predictLayer("relu", f, null), "cost");
        assertUsageError(() -> est.predictLayer("relu", f, new Estimator.Cost(-1.0, 0.0, 0.0, 0.0)),
                "cost.flops_per_sample must be a finite number >= 0");
        assertUsageError(() -> est.predictLayer("relu", f, new Estimator.Cost(0.0, 0.0, 0.0, Double.NaN)),
                "cost.bytes_fixed");
        f.put("numel", Double.POSITIVE_INFINITY);
        assertUsageError(() -> est.predictLayer("relu", f, RELU_COST), "'numel' must be a finite number");
        f.put("numel", 400.0);
        f.put("batch_size", 0.0);
        assertUsageError(() -> est.predictLayer("relu", f, RELU_COST), "batch_size");
        Map<String, Object> partial = new HashMap<>();
        partial.put("flops_per_sample", 1.0);
        assertUsageError(() -> Estimator.Cost.of(partial), "cost.flops_fixed");

        Map<String, Double> cfg = new HashMap<>();
        cfg.put("numel", 8.0);
        assertUsageError(() -> est.estimate(new ArrayList<>(), 0), "batch size");
        assertUsageError(() -> est.estimate(List.of(new Estimator.Layer("r", "relu", "output", cfg, RELU_COST)), 8),
                "role must be 'input' or 'hidden'");
        assertUsageError(() -> est.estimate(List.of(new Estimator.Layer("r7", "relu", "hidden", cfg, null)), 8),
                "layer 0 (r7): no cost terms");
        assertUsageError(() -> est.estimate(List.of(new Estimator.Layer("r", "relu", "hidden", cfg,
                new Estimator.Cost(1.0, -1.0, 0.0, 0.0))), 8), "cost.flops_fixed");
    }

    @Test
    public void identicalLayersAreCorrelated() throws IOException {
        Estimator est = Estimator.load(vectorText());
        Map<String, Double> cfg = new HashMap<>();
        cfg.put("numel", 4704.0);
        Estimator.Layer l = new Estimator.Layer("r", "relu", "hidden", cfg, RELU_COST);
        Estimator.Estimate one = est.estimate(List.of(l), 32);
        Estimator.Estimate three = est.estimate(List.of(l, l, l), 32);
        close("3x mean", 3 * one.totalMean, three.totalMean);
        assertTrue(three.layersTotalStd > Math.sqrt(3) * one.layersTotalStd);
        assertTrue(three.layersTotalStd <= 3 * one.layersTotalStd * (1 + 1e-12));
        // the whole-model term adds (rel_std * mean)^2 to the layers' variance
        assertTrue(est.wholeModelRelStd > 0);
        double rel = est.wholeModelRelStd * three.totalMean;
        close("whole-model std", Math.sqrt(three.layersTotalStd * three.layersTotalStd + rel * rel), three.totalStd);
        // predictLayer agrees with a one-layer estimate
        Map<String, Object> f = new HashMap<>(cfg);
        f.put("batch_size", 32.0);
        f.put("role", "hidden");
        double[] ms = est.predictLayer("relu", f, RELU_COST);
        close("predictLayer mean", one.layers.get(0).mean, ms[0]);
        close("predictLayer std", one.layers.get(0).std, ms[1]);
    }

    @Test
    public void groupedConvolutionsUseTheirVariantEntryOrFallBack() throws IOException {
        Map<String, Double> dw = new HashMap<>();
        dw.put("groups", 32.0);
        assertEquals("conv2d:grouped", Estimator.modelKey("conv2d", dw));
        assertEquals("conv1d:grouped", Estimator.modelKey("conv1d", dw));
        assertEquals("linear", Estimator.modelKey("linear", dw));
        dw.put("in_channels", 32.0);
        assertEquals("conv2d:grouped", Estimator.modelKey("conv2d", dw));
        // several input channels per group (ResNeXt, RegNetX, ShuffleNetV1): the dense entry
        dw.put("in_channels", 64.0);
        assertEquals("conv2d", Estimator.modelKey("conv2d", dw));
        assertEquals("conv1d", Estimator.modelKey("conv1d", dw));
        dw.put("groups", 1.0);
        assertEquals("conv2d", Estimator.modelKey("conv2d", dw));
        assertEquals("conv2d", Estimator.modelKey("conv2d", new HashMap<String, Double>()));
        // a file without the variant entry costs a depthwise layer with the kind's own entry
        Estimator old = Estimator.load(vectorText());
        assertTrue(old.kinds().containsKey("conv2d") && !old.kinds().containsKey("conv2d:grouped"));
        Map<String, Object> f = new HashMap<>();
        for (String k : new String[] {"in_channels", "out_channels", "groups"}) {
            f.put(k, 16.0);
        }
        f.put("kernel", 3.0);
        f.put("stride", 1.0);
        f.put("padding", 1.0);
        f.put("height", 14.0);
        f.put("width", 14.0);
        f.put("bias", 0.0);
        f.put("batch_size", 8.0);
        f.put("role", "hidden");
        Estimator.Cost c = new Estimator.Cost(1e6, 0.0, 1e5, 0.0);
        assertTrue(old.predictLayer("conv2d", f, c)[0] > 0);
        // one with it costs the same layer with the variant, and the dense twin with the kind's entry
        Estimator grouped = Estimator.load(TestVectors.read("estimator_time_grouped.json"));
        double dwMean = grouped.predictLayer("conv2d", f, c)[0];
        f.put("groups", 1.0);
        double denseMean = grouped.predictLayer("conv2d", f, c)[0];
        assertTrue("depthwise " + dwMean + " vs dense " + denseMean, dwMean > 2 * denseMean);
    }

    @Test
    @SuppressWarnings("unchecked")
    public void convolutionsPyTorchRunsOffOneDnnNameTheGemmEntry() throws IOException {
        Map<String, Object> exp = (Map<String, Object>) Json.parse(TestVectors.read("expected_time_gemm.json"));
        List<Map<String, Object>> queries = (List<Map<String, Object>>) exp.get("model_key");
        int gemm = 0;
        for (Map<String, Object> q : queries) {
            String kind = (String) q.get("kind");
            Map<String, Object> config = (Map<String, Object>) q.get("config");
            String key = (String) q.get("key");
            double b = ((Number) q.get("batch_size")).doubleValue();
            assertEquals(kind + " " + config + " at batch " + b, key, Estimator.modelKey(kind, config, b));
            if (!key.endsWith(":grouped")) {  // a depthwise 1x1 conv runs off oneDNN too, but is grouped's first
                assertEquals(key.endsWith(":gemm"), Estimator.runsAsGemm(kind, config, b));
            }
            // without a batch size no layer is the gemm variant's
            assertEquals(key.endsWith(":gemm") ? kind : key, Estimator.modelKey(kind, config));
            gemm += key.endsWith(":gemm") ? 1 : 0;
        }
        assertTrue(gemm >= 5 && gemm < queries.size() - 5);
    }

    @Test
    public void paddedFeaturesAreDerivedFromTheirBase() throws IOException {
        assertEquals("in_channels", Estimator.parsePadded("in_channels_pad8")[0]);
        assertEquals(8, Estimator.parsePadded("in_channels_pad8")[1]);
        for (String bad : new String[] {"padding", "x_pad", "_pad8", "x_pad08", "x_pad1025", "x_pad8a", "x_pad-8"}) {
            assertEquals(bad, null, Estimator.parsePadded(bad));
        }
        assertEquals(16.0 / 9.0, Estimator.paddedValue(9.0, 8), 0.0);
        assertEquals(1.0, Estimator.paddedValue(16.0, 8), 0.0);
        assertEquals(8.0, Estimator.paddedValue(1.0, 8), 0.0);
        Estimator est = Estimator.load(vectorText());
        assertTrue(est.kinds().get("conv2d").contains("in_channels_pad8"));
        Map<String, Object> f = convFeatures(3, 64, 3);
        Estimator.Cost c = new Estimator.Cost(3e7, 0.0, 1e6, 0.0);
        double mean = est.predictLayer("conv2d", f, c)[0];
        f.put("in_channels_pad8", 1.0); // a config never sets a padded feature: the reader derives it
        assertEquals(mean, est.predictLayer("conv2d", f, c)[0], 0.0);
        f.put("in_channels", 0.5);
        assertUsageError(() -> est.predictLayer("conv2d", f, c), "'in_channels' must be a finite number >= 1");
        f.remove("in_channels");
        assertUsageError(() -> est.predictLayer("conv2d", f, c), "needs feature 'in_channels'");
    }

    @Test
    public void attributes() throws IOException {
        Estimator est = Estimator.load(vectorText());
        assertEquals("time", est.metric);
        assertEquals("s", est.unit);
        assertEquals("torch", est.runtime);
        assertEquals("synthetic", est.deviceName());
        assertEquals(0.08, est.wholeModelRelStd, 0.0);
        Map<String, List<String>> kinds = est.kinds();
        assertTrue(kinds.containsKey("relu") && kinds.containsKey("output"));
        assertFalse(kinds.get("output").contains("role"));
        assertTrue(kinds.get("relu").contains("role"));
        Estimator floored = Estimator.load(TestVectors.read("estimator_energy_floored.json"));
        assertEquals("energy", floored.metric);
        assertEquals("J", floored.unit);
        assertEquals("onnxruntime", floored.runtime);
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

    @Test
    public void fsumIsCorrectlyRounded() {
        assertEquals(1e-16, Estimator.fsum(new double[] {1.0, 1e-16, -1.0}), 0.0);
        assertEquals(0.0, Estimator.fsum(new double[] {}), 0.0);
        double[] tenths = new double[10];
        java.util.Arrays.fill(tenths, 0.1);
        assertEquals(1.0, Estimator.fsum(tenths), 0.0);
        assertEquals(1.0, Estimator.fsum(new double[] {1e100, 1.0, -1e100}), 0.0);
    }
}
