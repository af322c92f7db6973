package dev.thorsdk.harness;

import java.io.File;
import java.util.LinkedHashMap;
import java.util.Map;

/** Runs a bundle: one StepRunner per part, the shared protocol, results written atomically. */
public final class Harness {
    /** Opens the training step of one part (the app: ONNX Runtime; tests: a fake). */
    public interface RunnerFactory {
        StepRunner open(File model) throws Exception;
    }

    private final RunnerFactory factory;
    private final Clock clock;
    private final Clock wall;
    private final Sleeper sleeper;
    /** The campaign's idle baseline: kept across the bundles this harness runs (docs/protocol.md). */
    private final Protocol.IdleBaseline idle;

    public Harness(RunnerFactory factory, Clock clock, Clock wall, Sleeper sleeper) {
        this(factory, clock, wall, sleeper, new Protocol.IdleBaseline());
    }

    public Harness(RunnerFactory factory, Clock clock, Clock wall, Sleeper sleeper, Protocol.IdleBaseline idle) {
        this.factory = factory;
        this.clock = clock;
        this.wall = wall;
        this.sleeper = sleeper;
        this.idle = idle;
    }

    /**
     * Measures every part of the bundle and writes the results JSON to {@code out}.
     *
     * @param meter energy meter, or null (then energy is not measured even if the bundle asks for it)
     * @param device plain description of the device (model, OS) stored in the results
     */
    public Map<String, Object> run(File bundleDir, File out, Protocol.Meter meter, Protocol.StateSource state,
                                   Map<String, Object> device) throws Exception {
        Bundle b = new Bundle(bundleDir);
        Protocol.Settings s = Protocol.Settings.fromMap(b.settings());
        boolean energy = "energy".equals(b.metric());
        if (energy && meter == null) {
            throw new IllegalStateException("the bundle asks for energy but no meter is readable on this device");
        }
        seedIdle(b.manifest.get("idle_baseline"));
        int idleBefore = idle.measurements.size();
        Map<String, StepRunner> runners = new LinkedHashMap<>();
        Map<String, Object> doc = new LinkedHashMap<>();
        try {
            for (Map.Entry<String, File> e : b.parts.entrySet()) {
                runners.put(e.getKey(), factory.open(e.getValue()));
            }
            Map<String, Protocol.PartResult> res =
                    new Protocol(s, clock, wall, sleeper).measure(runners, energy ? meter : null, state,
                            energy ? "energy" : "time", idle);
            Map<String, Object> parts = new LinkedHashMap<>();
            for (Map.Entry<String, Protocol.PartResult> e : res.entrySet()) {
                parts.put(e.getKey(), e.getValue().toMap(s.outlierK));
            }
            doc.put("format", "thor-sdk/results");
            doc.put("version", 1);
            doc.put("harness", "android");
            doc.put("bundle", b.manifest.get("id"));
            doc.put("metric", b.metric());
            doc.put("device", device);
            doc.put("parts", parts);
            if (energy && idle.powerW != null) {
                // the baseline after this bundle, for the host to carry to the campaign's next bundle
                Map<String, Object> ib = new LinkedHashMap<>();
                ib.put("power_w", idle.powerW);
                ib.put("state", idle.state);
                ib.put("measured", idle.measurements.subList(idleBefore, idle.measurements.size()));
                doc.put("idle_baseline", ib);
            }
        } finally {
            for (StepRunner r : runners.values()) {
                r.close();
            }
        }
        JsonWriter.writeAtomically(out, doc);
        return doc;
    }

    /**
     * A campaign's idle baseline carried by the host in the manifest ({@code "idle_baseline": {"power_w": W,
     * "state": {...}}}, as a previous bundle's results returned it): used unless this harness already holds
     * one, so a campaign of one-probe bundles measures idle once, and again only when the state changes.
     */
    @SuppressWarnings("unchecked")
    private void seedIdle(Object carried) {
        if (idle.powerW != null || !(carried instanceof Map)) {
            return;
        }
        Map<String, Object> m = (Map<String, Object>) carried;
        Object w = m.get("power_w");
        if (w instanceof Number && Double.isFinite(((Number) w).doubleValue())) {
            idle.powerW = ((Number) w).doubleValue();
            idle.state = m.get("state") instanceof Map ? (Map<String, Object>) m.get("state") : null;
        }
    }
}
