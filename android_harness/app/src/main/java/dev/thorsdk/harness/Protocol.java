package dev.thorsdk.harness;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * The measurement protocol shared with the host (thor_sdk.harness.protocol; spec docs/protocol.md, conformance
 * vectors tests/vectors/protocol_*.json): warm-up timed to size the windows (at least min_window_s and 20 of the
 * meter's sample periods); rounds in which the parts run in alternating order (ABBA); rounds until every
 * part's coefficient of variation of the campaign's metric (time or energy) is below the target or the cap is
 * hit; the idle power from a baseline held for the campaign, re-measured only when the device state changes;
 * outliers flagged; wall-clock times and device state kept per window.
 */
public final class Protocol {
    /** A window spans at least this many of the meter's sample periods. */
    public static final int WINDOW_SAMPLE_PERIODS = 20;
    /** Device-state keys whose change makes the idle baseline stale (compared exactly; absent = null). */
    public static final List<String> IDLE_STATE_KEYS = Collections.unmodifiableList(Arrays.asList(
            "charging", "plugged", "screen_on", "thermal_status", "thermal_state", "low_power_mode"));
    /** A battery temperature move larger than this (degrees C) since the idle baseline makes it stale. */
    public static final double IDLE_RECHECK_TEMP_C = 5.0;

    /** An energy meter: {@code stop()} returns {energy_j, duration_s}. */
    public interface Meter {
        double samplePeriodS();

        void start() throws Exception;

        double[] stop() throws Exception;
    }

    /** Device state recorded with every window (battery level, temperatures, clocks). */
    public interface StateSource {
        Map<String, Object> state();
    }

    /** The order the parts run in round {@code round} (0-based); {@link #ABBA} is the protocol's. */
    public interface Order {
        List<String> parts(List<String> parts, int round);
    }

    /** As given on even rounds, reversed on odd ones: drift hits every part alike over each pair of rounds. */
    public static final Order ABBA = (parts, round) -> {
        List<String> out = new ArrayList<>(parts);
        if (round % 2 == 1) {
            Collections.reverse(out);
        }
        return out;
    };

    /**
     * The idle power of one campaign on one device: measured by the first {@code measure} that needs it, and
     * again only after a window (or at a probe's start) whose device state {@link #idleStateChanged changed}
     * from the one it was measured in. Hold one per campaign and pass it to every probe's {@code measure}.
     */
    public static final class IdleBaseline {
        public Double powerW;
        /** The device state read when {@code powerW} was measured (null without a state source). */
        public Map<String, Object> state;
        /** Every idle measurement: power_w, start_s, end_s (wall clock), state. */
        public final List<Map<String, Object>> measurements = new ArrayList<>();

        public boolean stale(Map<String, Object> now) {
            return powerW == null || idleStateChanged(state, now);
        }
    }

    /**
     * Whether the device state moved enough since {@code before} to re-measure idle: any of
     * {@link #IDLE_STATE_KEYS} differs, or the battery temperature moved more than {@link #IDLE_RECHECK_TEMP_C}.
     * Clocks, load and battery level alone do not count. No state, no change.
     */
    public static boolean idleStateChanged(Map<String, Object> before, Map<String, Object> after) {
        if (before == null || after == null) {
            return false;
        }
        for (String k : IDLE_STATE_KEYS) {
            if (!sameValue(before.get(k), after.get(k))) {
                return true;
            }
        }
        Object a = before.get("battery_temp_c");
        Object b = after.get("battery_temp_c");
        return a instanceof Number && b instanceof Number
                && Math.abs(((Number) b).doubleValue() - ((Number) a).doubleValue()) > IDLE_RECHECK_TEMP_C;
    }

    /** Equal values; numbers by value whatever their boxed type (2 == 2.0, as in Python and JSON). */
    private static boolean sameValue(Object a, Object b) {
        if (a instanceof Number && b instanceof Number) {
            return ((Number) a).doubleValue() == ((Number) b).doubleValue();
        }
        return Objects.equals(a, b);
    }

    public static final class Settings {
        public int warmupSteps = 3;
        public double minWindowS = 0.05;
        public int minRounds = 5;
        public int maxRounds = 15;
        public double cvTarget = 0.03;
        public int maxStepsPerWindow = 5000;
        public boolean measureIdle = true;
        public double outlierK = 3.5;

        public double windowSFor(Meter meter) {
            double period = meter == null ? 0.0 : meter.samplePeriodS();
            return Math.max(minWindowS, WINDOW_SAMPLE_PERIODS * period);
        }

        /** Settings from the bundle's JSON (unknown keys ignored, missing keys keep their defaults). */
        public static Settings fromMap(Map<String, Object> m) {
            Settings s = new Settings();
            if (m == null) {
                return s;
            }
            s.warmupSteps = intOr(m.get("warmup_steps"), s.warmupSteps);
            s.minWindowS = doubleOr(m.get("min_window_s"), s.minWindowS);
            s.minRounds = intOr(m.get("min_rounds"), s.minRounds);
            s.maxRounds = Math.max(intOr(m.get("max_rounds"), s.maxRounds), s.minRounds);
            s.cvTarget = doubleOr(m.get("cv_target"), s.cvTarget);
            s.maxStepsPerWindow = intOr(m.get("max_steps_per_window"), s.maxStepsPerWindow);
            Object idle = m.get("measure_idle");
            s.measureIdle = idle instanceof Boolean ? (Boolean) idle : s.measureIdle;
            s.outlierK = doubleOr(m.get("outlier_k"), s.outlierK);
            return s;
        }

        private static int intOr(Object o, int d) {
            return o instanceof Number ? ((Number) o).intValue() : d;
        }

        private static double doubleOr(Object o, double d) {
            return o instanceof Number ? ((Number) o).doubleValue() : d;
        }
    }

    public static final class PartResult {
        public final String part;
        public final int stepsPerWindow;
        public final List<Double> timeS = new ArrayList<>();
        public final List<Double> energyJ = new ArrayList<>();
        public final List<Double> netEnergyJ = new ArrayList<>();
        public final List<Double> windowDurationS = new ArrayList<>();
        /** Per window, the idle power its net energy was computed with (empty without an idle baseline). */
        public final List<Double> windowIdlePowerW = new ArrayList<>();
        public final List<Map<String, Object>> windows = new ArrayList<>();
        /** The campaign's idle power in force after the last window; null without a meter. */
        public Double idlePowerW;

        PartResult(String part, int stepsPerWindow) {
            this.part = part;
            this.stepsPerWindow = stepsPerWindow;
        }

        public Map<String, Object> toMap(double outlierK) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("steps_per_window", stepsPerWindow);
            m.put("time_s", timeS);
            m.put("energy_j", energyJ);
            m.put("net_energy_j", netEnergyJ);
            m.put("idle_power_w", idlePowerW);
            if (!windowIdlePowerW.isEmpty()) {
                // per window, the idle power its net energy used (ingest stores it with each window)
                m.put("window_idle_power_w", windowIdlePowerW);
            }
            m.put("windows", windows);
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("time", outliers(timeS, outlierK));
            if (!energyJ.isEmpty()) {
                out.put("energy", outliers(energyJ, outlierK));
            }
            if (!netEnergyJ.isEmpty()) {
                out.put("net_energy", outliers(netEnergyJ, outlierK));
            }
            m.put("outliers", out);
            return m;
        }
    }

    private final Settings settings;
    private final Clock clock;
    private final Clock wall;
    private final Sleeper sleeper;
    private final Order order;

    public Protocol(Settings settings, Clock clock, Clock wall, Sleeper sleeper) {
        this(settings, clock, wall, sleeper, ABBA);
    }

    /** With another part order: only for showing, in tests, that the vectors catch a non-ABBA order. */
    public Protocol(Settings settings, Clock clock, Clock wall, Sleeper sleeper, Order order) {
        this.settings = settings;
        this.clock = clock;
        this.wall = wall;
        this.sleeper = sleeper;
        this.order = order;
    }

    static double median(List<Double> v) {
        double[] s = v.stream().mapToDouble(Double::doubleValue).sorted().toArray();
        int n = s.length;
        if (n == 0) {
            return Double.NaN;
        }
        return n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2.0;
    }

    /** Robust coefficient of variation: 1.4826 MAD (or the sample std when MAD is 0) over |median|. */
    static double cv(List<Double> v) {
        if (v.isEmpty()) {
            return Double.NaN;
        }
        double med = median(v);
        List<Double> dev = new ArrayList<>();
        for (double x : v) {
            dev.add(Math.abs(x - med));
        }
        double mad = median(dev);
        double std;
        if (mad > 0) {
            std = 1.4826 * mad;
        } else if (v.size() > 1) {
            double mean = v.stream().mapToDouble(Double::doubleValue).average().orElse(0);
            double ss = 0;
            for (double x : v) {
                ss += (x - mean) * (x - mean);
            }
            std = Math.sqrt(ss / (v.size() - 1));
        } else {
            std = 0;
        }
        return med != 0 ? std / Math.abs(med) : Double.POSITIVE_INFINITY;
    }

    /** Indices whose robust z-score exceeds k (as thor_sdk.harness.protocol.flag_outliers). */
    public static List<Integer> outliers(List<Double> v, double k) {
        List<Integer> out = new ArrayList<>();
        if (v.size() < 3) {
            return out;
        }
        double med = median(v);
        List<Double> dev = new ArrayList<>();
        for (double x : v) {
            dev.add(Math.abs(x - med));
        }
        double mad = median(dev);
        for (int i = 0; i < v.size(); i++) {
            double x = v.get(i);
            if (mad == 0 ? x != med : Math.abs(x - med) / (1.4826 * mad) > k) {
                out.add(i);
            }
        }
        return out;
    }

    private double idleW(Meter meter, double windowS) throws Exception {
        sleeper.sleepS(Math.min(0.25 * windowS, 2.0));
        meter.start();
        sleeper.sleepS(windowS);
        double[] w = meter.stop();
        if (w[1] <= 0) {
            throw new IllegalStateException("idle window of zero duration");
        }
        return w[0] / w[1];
    }

    private void refresh(IdleBaseline idle, Meter meter, double windowS, Map<String, Object> st) throws Exception {
        double w0 = wall.nowS();
        double p = idleW(meter, windowS);
        idle.powerW = p;
        idle.state = st;
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("power_w", p);
        m.put("start_s", w0);
        m.put("end_s", wall.nowS());
        m.put("state", st);
        idle.measurements.add(m);
    }

    /** Median warm-up step time (at least one step, at least 1e-7 s): what sizes the windows. */
    private double warmUp(StepRunner r) throws Exception {
        List<Double> times = new ArrayList<>();
        for (int i = 0; i < Math.max(1, settings.warmupSteps); i++) {
            double t0 = clock.nowS();
            r.step();
            times.add(clock.nowS() - t0);
        }
        return Math.max(median(times), 1e-7);
    }

    private boolean done(Map<String, PartResult> results, String metric) {
        for (PartResult r : results.values()) {
            List<Double> v = "energy".equals(metric) ? r.energyJ : r.timeS;
            if (!(cv(v) <= settings.cvTarget)) {
                return false;
            }
        }
        return true;
    }

    /**
     * Measures the parts side by side.
     *
     * @param meter energy meter, or null (time only)
     * @param state device state source, or null
     * @param metric "time" or "energy": what the campaign measures and what the rounds stop on
     * @param idle the campaign's idle baseline (null: a fresh one, i.e. measured for this call)
     */
    public Map<String, PartResult> measure(Map<String, StepRunner> parts, Meter meter, StateSource state,
                                           String metric, IdleBaseline idle) throws Exception {
        if (!"time".equals(metric) && !"energy".equals(metric)) {
            throw new IllegalArgumentException("metric must be time or energy, got " + metric);
        }
        if ("energy".equals(metric) && meter == null) {
            throw new IllegalStateException("energy was asked for but no meter was given");
        }
        double windowS = settings.windowSFor(meter);
        IdleBaseline baseline = null;
        if (meter != null && settings.measureIdle) {
            baseline = idle != null ? idle : new IdleBaseline();
            Map<String, Object> st = state != null ? state.state() : null;
            if (baseline.stale(st)) {
                refresh(baseline, meter, windowS, st);
            }
        }
        Map<String, Double> stepS = new LinkedHashMap<>();
        for (Map.Entry<String, StepRunner> e : parts.entrySet()) {
            stepS.put(e.getKey(), warmUp(e.getValue()));
        }
        Map<String, PartResult> results = new LinkedHashMap<>();
        for (Map.Entry<String, Double> e : stepS.entrySet()) {
            int steps = (int) Math.max(1, Math.min(settings.maxStepsPerWindow, Math.ceil(windowS / e.getValue())));
            results.put(e.getKey(), new PartResult(e.getKey(), steps));
        }
        List<String> names = new ArrayList<>(parts.keySet());
        for (int rnd = 0; rnd < settings.maxRounds; rnd++) {
            for (String part : order.parts(names, rnd)) {
                PartResult r = results.get(part);
                StepRunner runner = parts.get(part);
                if (meter != null) {
                    meter.start();
                }
                double wall0 = wall.nowS();
                double t0 = clock.nowS();
                for (int i = 0; i < r.stepsPerWindow; i++) {
                    runner.step();
                }
                double dt = clock.nowS() - t0;
                double wall1 = wall.nowS();
                double[] w = meter != null ? meter.stop() : null;
                r.timeS.add(dt / r.stepsPerWindow);
                Map<String, Object> st = state != null ? state.state() : null;
                Map<String, Object> win = new LinkedHashMap<>();
                win.put("t_start_s", wall0);
                win.put("t_end_s", wall1);
                if (state != null) {
                    win.put("state", st);
                }
                r.windows.add(win);
                if (w != null) {
                    double e = w[0] / r.stepsPerWindow;
                    double d = w[1] > 0 ? w[1] : dt;
                    r.energyJ.add(e);
                    r.windowDurationS.add(d);
                    if (baseline != null) {
                        // a window whose state differs from the baseline's: idle is re-measured in that state
                        // now, and this window's net energy already uses it
                        if (baseline.stale(st)) {
                            refresh(baseline, meter, windowS, st);
                        }
                        r.windowIdlePowerW.add(baseline.powerW);
                        r.netEnergyJ.add(e - baseline.powerW * d / r.stepsPerWindow);
                    }
                }
            }
            if (rnd + 1 >= settings.minRounds && done(results, metric)) {
                break;
            }
        }
        if (baseline != null) {
            for (PartResult r : results.values()) {
                r.idlePowerW = baseline.powerW;
            }
        }
        return results;
    }
}
