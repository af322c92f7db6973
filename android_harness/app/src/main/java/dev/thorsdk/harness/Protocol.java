package dev.thorsdk.harness;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The measurement protocol shared with the host (thor_sdk.harness.protocol): warm-up; an idle baseline
 * before and after (with a meter); windows long enough for the clock or meter (20 sensor periods);
 * parts interleaved round by round; rounds until every part's coefficient of variation is below the
 * target or the cap is hit; outliers flagged; wall-clock times and device state kept per window.
 */
public final class Protocol {
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
            return Math.max(minWindowS, 20.0 * period);
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
        public final List<Map<String, Object>> windows = new ArrayList<>();
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
            m.put("windows", windows);
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("time", outliers(timeS, outlierK));
            if (!energyJ.isEmpty()) {
                out.put("energy", outliers(energyJ, outlierK));
            }
            m.put("outliers", out);
            return m;
        }
    }

    private final Settings settings;
    private final Clock clock;
    private final Clock wall;
    private final Sleeper sleeper;

    public Protocol(Settings settings, Clock clock, Clock wall, Sleeper sleeper) {
        this.settings = settings;
        this.clock = clock;
        this.wall = wall;
        this.sleeper = sleeper;
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

    public Map<String, PartResult> measure(Map<String, StepRunner> parts, Meter meter, StateSource state)
            throws Exception {
        double windowS = settings.windowSFor(meter);
        List<Double> idle = new ArrayList<>();
        if (meter != null && settings.measureIdle) {
            idle.add(idleW(meter, windowS));
        }
        for (StepRunner r : parts.values()) {
            for (int i = 0; i < settings.warmupSteps; i++) {
                r.step();
            }
        }
        Map<String, PartResult> results = new LinkedHashMap<>();
        for (Map.Entry<String, StepRunner> e : parts.entrySet()) {
            double t0 = clock.nowS();
            e.getValue().step();
            double dt = Math.max(clock.nowS() - t0, 1e-7);
            int steps = (int) Math.max(1, Math.min(settings.maxStepsPerWindow, Math.ceil(windowS / dt)));
            results.put(e.getKey(), new PartResult(e.getKey(), steps));
        }
        for (int rnd = 0; rnd < settings.maxRounds; rnd++) {
            for (Map.Entry<String, StepRunner> e : parts.entrySet()) {
                PartResult r = results.get(e.getKey());
                if (meter != null) {
                    meter.start();
                }
                double wall0 = wall.nowS();
                double t0 = clock.nowS();
                for (int i = 0; i < r.stepsPerWindow; i++) {
                    e.getValue().step();
                }
                double dt = clock.nowS() - t0;
                double wall1 = wall.nowS();
                double[] w = meter != null ? meter.stop() : null;
                r.timeS.add(dt / r.stepsPerWindow);
                if (w != null) {
                    r.energyJ.add(w[0] / r.stepsPerWindow);
                    r.windowDurationS.add(w[1] > 0 ? w[1] : dt);
                }
                Map<String, Object> win = new LinkedHashMap<>();
                win.put("t_start_s", wall0);
                win.put("t_end_s", wall1);
                if (state != null) {
                    win.put("state", state.state());
                }
                r.windows.add(win);
            }
            if (rnd + 1 >= settings.minRounds) {
                boolean done = true;
                for (PartResult r : results.values()) {
                    List<Double> v = meter != null ? r.energyJ : r.timeS;
                    if (!(cv(v) <= settings.cvTarget)) {
                        done = false;
                    }
                }
                if (done) {
                    break;
                }
            }
        }
        if (!idle.isEmpty()) {
            idle.add(idleW(meter, windowS));
            double idleW = (idle.get(0) + idle.get(1)) / 2.0;
            for (PartResult r : results.values()) {
                r.idlePowerW = idleW;
                for (int i = 0; i < r.energyJ.size(); i++) {
                    r.netEnergyJ.add(r.energyJ.get(i) - idleW * r.windowDurationS.get(i) / r.stepsPerWindow);
                }
            }
        }
        return results;
    }
}
