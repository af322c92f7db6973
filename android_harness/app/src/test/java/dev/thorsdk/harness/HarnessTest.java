package dev.thorsdk.harness;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import dev.thorsdk.runtime.Json;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;

public class HarnessTest {
    @Rule public TemporaryFolder tmp = new TemporaryFolder();

    private File bundle(String partFile, boolean corrupt) throws IOException {
        File dir = tmp.newFolder("bundle");
        Files.write(new File(dir, "head.onnx").toPath(), "HEAD".getBytes(StandardCharsets.UTF_8));
        File hidden = new File(dir, "parts/hidden part.onnx");
        hidden.getParentFile().mkdirs();
        Files.write(hidden.toPath(), "HIDDEN".getBytes(StandardCharsets.UTF_8));
        String hh = Bundle.sha256(new File(dir, "head.onnx"));
        String hx = corrupt ? "00" : Bundle.sha256(hidden);
        String manifest = "{\"id\": \"probe-1\", \"metric\": \"time\", "
                + "\"settings\": {\"min_rounds\": 3, \"max_rounds\": 3, \"warmup_steps\": 1, \"min_window_s\": 0.05},"
                + "\"parts\": {\"head\": {\"model\": \"head.onnx\"}, \"hidden\": {\"model\": \"" + partFile + "\"}},"
                + "\"files\": {\"head.onnx\": \"" + hh + "\", \"parts/hidden part.onnx\": \"" + hx + "\"}}";
        Files.write(new File(dir, "manifest.json").toPath(), manifest.getBytes(StandardCharsets.UTF_8));
        return dir;
    }

    static final class FakeRunners implements Harness.RunnerFactory {
        final ProtocolTest.Board b = new ProtocolTest.Board();
        final List<String> opened = new ArrayList<>();
        final List<ProtocolTest.Runner> runners = new ArrayList<>();

        @Override
        public StepRunner open(File model) throws IOException {
            String what = new String(Files.readAllBytes(model.toPath()), StandardCharsets.UTF_8);
            opened.add(what);
            ProtocolTest.Runner r = new ProtocolTest.Runner(b, what.equals("HEAD") ? 0.001 : 0.004, 1.0);
            runners.add(r);
            return r;
        }
    }

    @Test
    @SuppressWarnings("unchecked")
    public void runsTheBundleAndWritesResults() throws Exception {
        File dir = bundle("parts/hidden part.onnx", false);
        FakeRunners f = new FakeRunners();
        File out = new File(tmp.getRoot(), "out/run 1/results.json");
        new Harness(f, f.b, f.b, f.b).run(dir, out, null, null, null);
        assertEquals(List.of("HEAD", "HIDDEN"), f.opened);
        for (ProtocolTest.Runner r : f.runners) {
            assertTrue(r.closed);
        }
        Map<String, Object> doc = (Map<String, Object>) Json.parse(
                new String(Files.readAllBytes(out.toPath()), StandardCharsets.UTF_8));
        assertEquals("thor-sdk/results", doc.get("format"));
        Map<String, Object> parts = (Map<String, Object>) doc.get("parts");
        Map<String, Object> hidden = (Map<String, Object>) parts.get("hidden");
        assertEquals(3, ((List<Object>) hidden.get("time_s")).size());
        assertEquals(0.004, (Double) ((List<Object>) hidden.get("time_s")).get(0), 1e-12);
        assertEquals(3, ((List<Object>) hidden.get("windows")).size());
        assertTrue(!new File(out.getPath() + ".tmp").exists());
    }

    /** The layout exporters/bundle.py writes: parts and files as lists (thor_sdk/schemas/manifest.schema.json). */
    @Test
    @SuppressWarnings("unchecked")
    public void readsTheExportersManifestLayout() throws Exception {
        File dir = tmp.newFolder("real");
        File parts = new File(dir, "parts");
        parts.mkdirs();
        Files.write(new File(parts, "aaa.onnx").toPath(), "HEAD".getBytes(StandardCharsets.UTF_8));
        Files.write(new File(parts, "bbb.onnx").toPath(), "HIDDEN".getBytes(StandardCharsets.UTF_8));
        String ha = Bundle.sha256(new File(parts, "aaa.onnx"));
        String hb = Bundle.sha256(new File(parts, "bbb.onnx"));
        String manifest = "{\"format\": \"thor-sdk/bundle\", \"version\": 1, \"id\": \"relu-hidden-b4-2dda05cc04eb\","
                + " \"model_format\": \"onnx\", \"runtime\": \"onnxruntime\", \"metric\": \"time\","
                + " \"settings\": {\"warmup_steps\": 1, \"min_rounds\": 2, \"max_rounds\": 2, \"min_window_s\": 0.01,"
                + " \"measure_idle\": true, \"outlier_k\": 3.5},"
                + " \"parts\": [{\"name\": \"head\", \"file\": \"parts/aaa.onnx\", \"sha256\": \"" + ha + "\"},"
                + " {\"name\": \"hidden\", \"file\": \"parts/bbb.onnx\", \"sha256\": \"" + hb + "\"}],"
                + " \"files\": [{\"path\": \"parts/aaa.onnx\", \"sha256\": \"" + ha + "\", \"bytes\": 4},"
                + " {\"path\": \"parts/bbb.onnx\", \"sha256\": \"" + hb + "\", \"bytes\": 6}]}";
        Files.write(new File(dir, "manifest.json").toPath(), manifest.getBytes(StandardCharsets.UTF_8));
        FakeRunners f = new FakeRunners();
        File out = new File(tmp.getRoot(), "real.json");
        Map<String, Object> doc = new Harness(f, f.b, f.b, f.b).run(dir, out, null, null, null);
        assertEquals("relu-hidden-b4-2dda05cc04eb", doc.get("bundle"));
        assertEquals(List.of("HEAD", "HIDDEN"), f.opened);
        Map<String, Object> head = (Map<String, Object>) ((Map<String, Object>) doc.get("parts")).get("head");
        assertEquals(2, ((List<Object>) head.get("time_s")).size());
        String keep = System.getProperty("thor.results.out");
        if (keep != null) {  // the Python test checks this file against thor_sdk/schemas/results.schema.json
            Files.copy(out.toPath(), new File(keep).toPath(), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        }
    }

    @Test
    public void refusesCorruptOrEscapingBundles() throws Exception {
        FakeRunners f = new FakeRunners();
        File out = new File(tmp.getRoot(), "r.json");
        try {
            new Harness(f, f.b, f.b, f.b).run(bundle("parts/hidden part.onnx", true), out, null, null, null);
            fail("accepted a corrupted bundle");
        } catch (IOException e) {
            assertTrue(e.getMessage().contains("sha256 mismatch"));
        }
        tmp.delete();
        tmp.create();
        try {
            new Harness(f, f.b, f.b, f.b).run(bundle("../../etc/passwd", false), out, null, null, null);
            fail("accepted a path leaving the bundle");
        } catch (IOException e) {
            assertTrue(e.getMessage().contains("leaves the bundle"));
        }
        assertTrue(f.opened.isEmpty());
    }

    @Test
    public void energyWithoutMeterIsRefused() throws Exception {
        File dir = tmp.newFolder("b2");
        Files.write(new File(dir, "m.onnx").toPath(), "HEAD".getBytes(StandardCharsets.UTF_8));
        Files.write(new File(dir, "manifest.json").toPath(),
                "{\"metric\": \"energy\", \"parts\": {\"head\": \"m.onnx\"}}".getBytes(StandardCharsets.UTF_8));
        FakeRunners f = new FakeRunners();
        try {
            new Harness(f, f.b, f.b, f.b).run(dir, new File(dir, "r.json"), null, null, null);
            fail("energy without a meter");
        } catch (IllegalStateException e) {
            assertTrue(e.getMessage().contains("no meter"));
        }
    }

    /** One idle baseline per campaign: carried in the manifest, kept across bundles, re-measured on a state change. */
    @Test
    @SuppressWarnings("unchecked")
    public void idleBaselineIsCarriedAndRecheckedOnlyOnAStateChange() throws Exception {
        File dir = tmp.newFolder("b3");
        Files.write(new File(dir, "m.onnx").toPath(), "HEAD".getBytes(StandardCharsets.UTF_8));
        Files.write(new File(dir, "manifest.json").toPath(), ("{\"id\": \"p1\", \"metric\": \"energy\", "
                + "\"settings\": {\"min_rounds\": 2, \"max_rounds\": 2, \"warmup_steps\": 1, \"min_window_s\": 0.05},"
                + "\"parts\": {\"head\": \"m.onnx\"}, "
                + "\"idle_baseline\": {\"power_w\": 2.0, \"state\": {\"charging\": false}}}")
                .getBytes(StandardCharsets.UTF_8));
        FakeRunners f = new FakeRunners();
        Map<String, Object> st = new java.util.LinkedHashMap<>();
        st.put("charging", false);
        Harness h = new Harness(f, f.b, f.b, f.b);
        int[] measured = new int[3];
        for (int run = 0; run < 3; run++) {
            if (run == 1) {
                st.put("charging", true);   // the charger is plugged in between the first and second bundle
            }
            Map<String, Object> doc = h.run(dir, new File(tmp.getRoot(), "r" + run + ".json"), f.b,
                    () -> new java.util.LinkedHashMap<>(st), null);
            Map<String, Object> ib = (Map<String, Object>) doc.get("idle_baseline");
            measured[run] = ((List<Object>) ib.get("measured")).size();
            assertEquals(ProtocolTest.IDLE_W, (Double) ib.get("power_w"), 1e-9);
            Map<String, Object> head = (Map<String, Object>) ((Map<String, Object>) doc.get("parts")).get("head");
            for (Object net : (List<Object>) head.get("net_energy_j")) {
                assertEquals(1.0 * 0.001, (Double) net, 1e-9);   // the runner's extra 1 W over 1 ms steps
            }
            List<Object> idleW = (List<Object>) head.get("window_idle_power_w");
            assertEquals(((List<Object>) head.get("time_s")).size(), idleW.size());   // one per window
            for (Object w : idleW) {
                assertEquals(ProtocolTest.IDLE_W, (Double) w, 1e-9);
            }
        }
        assertEquals(0, measured[0]);   // the carried baseline's state matches: no idle window
        assertEquals(1, measured[1]);   // charging changed: measured again
        assertEquals(0, measured[2]);   // same state as the new baseline
    }
}
