package dev.thorsdk.harness;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

import dev.thorsdk.runtime.Json;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import org.junit.Test;

/**
 * The shared protocol conformance vectors (tests/vectors/protocol_*.json, system property {@code thor.vectors};
 * spec docs/protocol.md) on this harness's {@link Protocol}: each vector's campaign runs on the scripted device
 * of tests/vectors/make_protocol_vectors.py, implemented here step for step, and must give the same windows
 * and numbers (1e-9 relative). A fixed part order, the stop rule on the other metric and an idle baseline per
 * probe must each fail the vectors they concern.
 */
public class ProtocolVectorsTest {
    /** The vector's device: clock, sleep, meter over its energy counter, state; steps run by Trainer. */
    static final class Device implements Clock, Sleeper, Protocol.Meter, Protocol.StateSource {
        final Map<String, Object> spec;
        final double t0;
        final double wallOffset;
        final double drift;
        final double period;
        final List<Map<String, Object>> states;
        double t;
        double energy;
        long steps;
        double startT;
        double startE;
        long startN;
        /** Per meter window: start wall, end wall, energy, duration, steps inside. */
        final List<double[]> meterLog = new ArrayList<>();

        @SuppressWarnings("unchecked")
        Device(Map<String, Object> spec) {
            this.spec = spec;
            t0 = num(spec.get("t0_s"));
            wallOffset = num(spec.get("wall_offset_s"));
            drift = num(spec.get("drift_s_per_s"));
            Map<String, Object> meter = (Map<String, Object>) spec.get("meter");
            period = meter == null ? 0.0 : num(meter.get("sample_period_s"));
            states = (List<Map<String, Object>>) spec.get("states");
            t = t0;
        }

        Map<String, Object> entry() {
            Map<String, Object> cur = states.get(0);
            for (Map<String, Object> e : states) {
                if (num(e.get("from_s")) <= t) {
                    cur = e;
                }
            }
            return cur;
        }

        @Override
        public double nowS() {
            return t;
        }

        double wallS() {
            return t + wallOffset;
        }

        @Override
        public void sleepS(double s) {
            energy += s * num(entry().get("idle_power_w"));
            t += s;
        }

        @SuppressWarnings("unchecked")
        @Override
        public Map<String, Object> state() {
            return new LinkedHashMap<>((Map<String, Object>) entry().get("state"));
        }

        @SuppressWarnings("unchecked")
        void step(Map<String, Object> part, int k) {
            double dt = num(part.get("step_s")) * cyc(part.get("jitter"), k) + drift * (t - t0);
            for (Object o : (List<Object>) part.get("slow_steps")) {
                List<Object> r = (List<Object>) o;   // [from, to, factor]
                if (num(r.get(0)) <= k && k < num(r.get(1))) {
                    dt = dt * num(r.get(2));
                }
            }
            double e;
            if (part.get("step_energy_j") != null) {
                e = num(part.get("step_energy_j")) * cyc(part.get("energy_jitter"), k);
            } else {
                e = dt * (num(entry().get("idle_power_w")) + num(part.get("active_power_w")));
            }
            energy += e;
            t += dt;
            steps++;
        }

        @Override
        public double samplePeriodS() {
            return period;
        }

        @Override
        public void start() {
            startT = t;
            startE = energy;
            startN = steps;
        }

        @Override
        public double[] stop() {
            double[] w = {energy - startE, t - startT};
            meterLog.add(new double[] {startT + wallOffset, wallS(), w[0], w[1], steps - startN});
            return w;
        }
    }

    static final class Trainer implements StepRunner {
        final Device d;
        final Map<String, Object> part;
        int k;

        Trainer(Device d, Map<String, Object> part) {
            this.d = d;
            this.part = part;
        }

        @Override
        public void step() {
            d.step(part, k);
            k++;
        }

        @Override
        public void close() {
        }
    }

    static double num(Object o) {
        return ((Number) o).doubleValue();
    }

    @SuppressWarnings("unchecked")
    static double cyc(Object pattern, int k) {
        List<Object> p = (List<Object>) pattern;
        return p.isEmpty() ? 1.0 : num(p.get(k % p.size()));
    }

    static final Protocol.Order FIXED = (parts, round) -> new ArrayList<>(parts);

    /** Runs the vector's campaign; returns what its "expected" holds (as make_protocol_vectors.observe). */
    @SuppressWarnings("unchecked")
    static List<Object> run(Map<String, Object> vec, Protocol.Order order, String metric, boolean idlePerProbe)
            throws Exception {
        Map<String, Object> spec = (Map<String, Object>) vec.get("device");
        Device dev = new Device(spec);
        Protocol.Settings s = Protocol.Settings.fromMap((Map<String, Object>) vec.get("settings"));
        Protocol.Meter meter = spec.get("meter") != null ? dev : null;
        Protocol.StateSource state = Boolean.TRUE.equals(spec.get("record_state")) ? dev : null;
        Protocol.IdleBaseline baseline = new Protocol.IdleBaseline();
        Protocol protocol = new Protocol(s, dev, dev::wallS, dev, order);
        List<Object> out = new ArrayList<>();
        List<Object> probes = (List<Object>) vec.get("probes");
        for (int i = 0; i < probes.size(); i++) {
            if (i > 0) {
                dev.sleepS(num(spec.get("probe_gap_s")));
            }
            Map<String, StepRunner> trainers = new LinkedHashMap<>();
            for (Object p : (List<Object>) ((Map<String, Object>) probes.get(i)).get("parts")) {
                Map<String, Object> part = (Map<String, Object>) p;
                trainers.put((String) part.get("name"), new Trainer(dev, part));
            }
            int mark = dev.meterLog.size();
            Map<String, Protocol.PartResult> res = protocol.measure(trainers, meter, state, metric,
                    idlePerProbe ? new Protocol.IdleBaseline() : baseline);
            out.add(observe(s.windowSFor(meter), s.outlierK, res, trainers,
                    dev.meterLog.subList(mark, dev.meterLog.size())));
        }
        return out;
    }

    static Map<String, Object> observe(double windowS, double outlierK, Map<String, Protocol.PartResult> res,
                                       Map<String, StepRunner> trainers, List<double[]> meterLog) {
        List<Map<String, Object>> events = new ArrayList<>();
        int idle = 0;
        for (double[] w : meterLog) {
            if (w[4] == 0) {
                Map<String, Object> e = new LinkedHashMap<>();
                e.put("event", "idle");
                e.put("start_s", w[0]);
                e.put("end_s", w[1]);
                e.put("power_w", w[2] / w[3]);
                events.add(e);
                idle++;
            }
        }
        Map<String, Object> parts = new LinkedHashMap<>();
        Set<Integer> rounds = new HashSet<>();
        for (Map.Entry<String, Protocol.PartResult> en : res.entrySet()) {
            Protocol.PartResult r = en.getValue();
            for (int i = 0; i < r.windows.size(); i++) {
                Map<String, Object> e = new LinkedHashMap<>();
                e.put("event", "window");
                e.put("part", en.getKey());
                e.put("round", i);
                e.put("steps", r.stepsPerWindow);
                e.put("start_s", r.windows.get(i).get("t_start_s"));
                e.put("end_s", r.windows.get(i).get("t_end_s"));
                events.add(e);
            }
            Map<String, Object> outliers = new LinkedHashMap<>();
            outliers.put("time", Protocol.outliers(r.timeS, outlierK));
            if (!r.energyJ.isEmpty()) {
                outliers.put("energy", Protocol.outliers(r.energyJ, outlierK));
            }
            if (!r.netEnergyJ.isEmpty()) {
                outliers.put("net_energy", Protocol.outliers(r.netEnergyJ, outlierK));
            }
            Map<String, Object> p = new LinkedHashMap<>();
            p.put("steps_per_window", r.stepsPerWindow);
            p.put("warmup_steps", ((Trainer) trainers.get(en.getKey())).k - r.stepsPerWindow * r.timeS.size());
            p.put("time_s", r.timeS);
            p.put("energy_j", r.energyJ);
            p.put("net_energy_j", r.netEnergyJ);
            p.put("window_idle_power_w", r.windowIdlePowerW);
            p.put("idle_power_w", r.idlePowerW);
            p.put("outliers", outliers);
            parts.put(en.getKey(), p);
            rounds.add(r.timeS.size());
        }
        events.sort((a, b) -> Double.compare(num(a.get("start_s")), num(b.get("start_s"))));
        assertEquals(1, rounds.size());
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("window_s", windowS);
        out.put("rounds", rounds.iterator().next());
        out.put("idle_measurements", idle);
        out.put("events", events);
        out.put("parts", parts);
        return out;
    }

    /** The first place {@code got} differs from {@code want}, or null: numbers to 1e-9 relative (1e-12 absolute). */
    @SuppressWarnings("unchecked")
    static String mismatch(Object want, Object got, String where) {
        if (want instanceof Map) {
            if (!(got instanceof Map) || !((Map<String, Object>) want).keySet().equals(((Map<String, Object>) got).keySet())) {
                return where + ": keys " + (want instanceof Map ? ((Map<String, Object>) want).keySet() : want) + " != "
                        + (got instanceof Map ? ((Map<String, Object>) got).keySet() : got);
            }
            for (String k : ((Map<String, Object>) want).keySet()) {
                String m = mismatch(((Map<String, Object>) want).get(k), ((Map<String, Object>) got).get(k), where + "." + k);
                if (m != null) {
                    return m;
                }
            }
            return null;
        }
        if (want instanceof List) {
            if (!(got instanceof List) || ((List<Object>) want).size() != ((List<Object>) got).size()) {
                return where + ": length " + ((List<Object>) want).size() + " != "
                        + (got instanceof List ? ((List<Object>) got).size() : got);
            }
            for (int i = 0; i < ((List<Object>) want).size(); i++) {
                String m = mismatch(((List<Object>) want).get(i), ((List<Object>) got).get(i), where + "[" + i + "]");
                if (m != null) {
                    return m;
                }
            }
            return null;
        }
        if (want instanceof Number) {
            if (!(got instanceof Number)) {
                return where + ": " + want + " != " + got;
            }
            double a = num(want);
            double b = num(got);
            boolean close = Math.abs(a - b) <= Math.max(1e-9 * Math.max(Math.abs(a), Math.abs(b)), 1e-12);
            return close ? null : where + ": " + a + " != " + b;
        }
        return Objects.equals(want, got) ? null : where + ": " + want + " != " + got;
    }

    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> vectors() throws Exception {
        File dir = new File(System.getProperty("thor.vectors", "../tests/vectors"));
        assertTrue("vectors folder not found: " + dir, dir.isDirectory());
        File[] files = dir.listFiles((d, n) -> n.startsWith("protocol_") && n.endsWith(".json"));
        assertNotNull(files);
        Arrays.sort(files);
        List<Map<String, Object>> out = new ArrayList<>();
        for (File f : files) {
            Map<String, Object> v = (Map<String, Object>) Json.parse(
                    new String(Files.readAllBytes(f.toPath()), StandardCharsets.UTF_8));
            assertEquals(f.getName(), "thor-sdk/protocol-vector", v.get("format"));
            out.add(v);
        }
        assertTrue("no protocol vectors in " + dir, !out.isEmpty());
        return out;
    }

    @Test
    public void vectorsPassAndNonConformingProtocolsFail() throws Exception {
        int nVectors = 0;
        int nProbes = 0;
        int fixedFails = 0;
        int metricFails = 0;
        int idleFails = 0;
        for (Map<String, Object> vec : vectors()) {
            String name = (String) vec.get("name");
            String metric = (String) vec.get("metric");
            Object expected = vec.get("expected");
            assertNull(name, mismatch(expected, run(vec, Protocol.ABBA, metric, false), name));
            nVectors++;
            nProbes += ((List<?>) expected).size();
            // a fixed part order fails every vector (each has two or more parts and rounds)
            String m = mismatch(expected, run(vec, FIXED, metric, false), name);
            assertNotNull(name + ": a fixed order passed", m);
            fixedFails++;
            // stopping on the other metric fails the vectors built to tell them apart
            if (name.equals("time") || name.equals("energy")) {
                String other = metric.equals("time") ? "energy" : "time";
                assertNotNull(name + ": stop on " + other + " passed",
                        mismatch(expected, run(vec, Protocol.ABBA, other, false), name));
                metricFails++;
            }
            // an idle baseline per probe fails the campaign vector
            if (name.equals("idle_campaign")) {
                assertNotNull(name + ": idle per probe passed",
                        mismatch(expected, run(vec, Protocol.ABBA, metric, true), name));
                idleFails++;
            }
        }
        System.out.println("ProtocolVectorsTest: " + nVectors + " vectors, " + nProbes + " probes passed; fixed order failed "
                + fixedFails + ", wrong stop metric failed " + metricFails + ", idle per probe failed " + idleFails);
    }

    @Test
    public void idleStateChangeRule() {
        Map<String, Object> a = new LinkedHashMap<>();
        a.put("charging", false);
        a.put("battery_pct", 80.0);
        a.put("battery_temp_c", 30.0);
        a.put("cpu_khz", 1800000);
        Map<String, Object> b = new LinkedHashMap<>(a);
        b.put("battery_pct", 60.0);
        b.put("battery_temp_c", 34.9);
        b.put("cpu_khz", 600000);
        assertTrue(!Protocol.idleStateChanged(a, b));   // level, clocks and < 5 C do not count
        b.put("battery_temp_c", 35.5);
        assertTrue(Protocol.idleStateChanged(a, b));
        b.put("battery_temp_c", 30.0);
        b.put("charging", true);
        assertTrue(Protocol.idleStateChanged(a, b));
        assertTrue(!Protocol.idleStateChanged(null, b));
        Protocol.IdleBaseline idle = new Protocol.IdleBaseline();
        assertTrue(idle.stale(a));                        // nothing measured yet
        idle.powerW = 1.0;
        idle.state = a;
        assertTrue(!idle.stale(a) && idle.stale(b));
    }
}
