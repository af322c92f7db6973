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

    public Harness(RunnerFactory factory, Clock clock, Clock wall, Sleeper sleeper) {
        this.factory = factory;
        this.clock = clock;
        this.wall = wall;
        this.sleeper = sleeper;
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
        Map<String, StepRunner> runners = new LinkedHashMap<>();
        Map<String, Object> doc = new LinkedHashMap<>();
        try {
            for (Map.Entry<String, File> e : b.parts.entrySet()) {
                runners.put(e.getKey(), factory.open(e.getValue()));
            }
            Map<String, Protocol.PartResult> res =
                    new Protocol(s, clock, wall, sleeper).measure(runners, energy ? meter : null, state);
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
        } finally {
            for (StepRunner r : runners.values()) {
                r.close();
            }
        }
        JsonWriter.writeAtomically(out, doc);
        return doc;
    }
}
