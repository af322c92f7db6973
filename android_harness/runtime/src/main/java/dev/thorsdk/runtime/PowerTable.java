package dev.thorsdk.runtime;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * Answers {@code select(table, powerCapW)} from a power table (format {@code thor-sdk/power-table},
 * version 1, schema {@code thor_sdk/schemas/table.schema.json}) for Java 17 / Android, JDK only.
 *
 * <p>Mirrors {@code thor_sdk/runtime/table.py} step by step (the method is in
 * {@code docs/power-aware-training.md}, section 3):
 * <ol>
 *   <li>per batch size that has a ratio, the highest frequency whose peak power is {@code <= powerCapW}:
 *       a binary search when the batch's powers (ordered by frequency) never decrease, else a linear
 *       scan, and the batch size is listed in {@link Selection#nonMonotoneBatchSizes};</li>
 *   <li>of those, the smallest {@code timePerSampleS * ratio} (ties: the larger batch);</li>
 *   <li>{@code estTimeToAccuracyS} = that score times {@code reference_samples_to_target} when the table
 *       has that number, else {@code null}.</li>
 * </ol>
 * No pair under the cap: {@link InfeasibleCapException}, naming the lowest peak power in the table.
 * The Python runtime's {@code why} sentence is not reproduced.
 *
 * <pre>{@code
 * PowerTable.Selection s = PowerTable.select(jsonText, 5.0);
 * int batch = s.batchSize; double hz = s.freqHz;
 * }</pre>
 */
public final class PowerTable {
    public static final String FORMAT = "thor-sdk/power-table";
    public static final int VERSION = 1;

    private PowerTable() {
    }

    /** No (batch size, frequency) in the table stays under the power cap. */
    public static final class InfeasibleCapException extends Estimator.UsageError {
        private static final long serialVersionUID = 1L;
        public final double powerCapW;
        public final double lowestFeasiblePowerW;

        public InfeasibleCapException(double powerCapW, double lowestFeasiblePowerW) {
            super("power cap " + shortNumber(powerCapW) + " W is infeasible: the lowest peak power in the table is "
                    + String.format(Locale.ROOT, "%.3f", lowestFeasiblePowerW) + " W (give a cap of at least that)");
            this.powerCapW = powerCapW;
            this.lowestFeasiblePowerW = lowestFeasiblePowerW;
        }
    }

    /** One batch size's highest (batch size, frequency) pair under the cap, with its score. */
    public static final class Candidate {
        public final int batchSize;
        public final double freqHz;
        public final double timePerSampleS;
        public final double peakPowerW;
        public final double ratio;
        public final double scoreS;
        public final boolean monotone;

        Candidate(int batchSize, double freqHz, double timePerSampleS, double peakPowerW, double ratio,
                  double scoreS, boolean monotone) {
            this.batchSize = batchSize;
            this.freqHz = freqHz;
            this.timePerSampleS = timePerSampleS;
            this.peakPowerW = peakPowerW;
            this.ratio = ratio;
            this.scoreS = scoreS;
            this.monotone = monotone;
        }
    }

    /** The pair to train with (the best candidate) and how it was found. */
    public static final class Selection {
        public final int batchSize;
        /** A GPU frequency in Hz, or a power limit in W when {@link #knob} is {@code power_limit_w}. */
        public final double freqHz;
        public final double timePerSampleS;
        public final double peakPowerW;
        public final double ratio;
        public final double scoreS;
        /** {@code null} unless the table knows the reference batch's samples-to-target. */
        public final Double estTimeToAccuracyS;
        public final double powerCapW;
        /** The table's {@code knob} ({@code gpu_freq_hz} when absent; {@code null} when not a string). */
        public final String knob;
        /** Every batch size's highest feasible pair, best first. */
        public final List<Candidate> candidates;
        /** Batch sizes (ascending) whose power did not rise monotonically with frequency. */
        public final List<Integer> nonMonotoneBatchSizes;
        public final boolean simulated;

        Selection(Candidate best, Double estTimeToAccuracyS, double powerCapW, String knob,
                  List<Candidate> candidates, List<Integer> nonMonotoneBatchSizes, boolean simulated) {
            this.batchSize = best.batchSize;
            this.freqHz = best.freqHz;
            this.timePerSampleS = best.timePerSampleS;
            this.peakPowerW = best.peakPowerW;
            this.ratio = best.ratio;
            this.scoreS = best.scoreS;
            this.estTimeToAccuracyS = estTimeToAccuracyS;
            this.powerCapW = powerCapW;
            this.knob = knob;
            this.candidates = candidates;
            this.nonMonotoneBatchSizes = nonMonotoneBatchSizes;
            this.simulated = simulated;
        }
    }

    /** One table row, as numbers. */
    static final class Row {
        final double freqHz;
        final double timePerSampleS;
        final double peakPowerW;

        Row(double freqHz, double timePerSampleS, double peakPowerW) {
            this.freqHz = freqHz;
            this.timePerSampleS = timePerSampleS;
            this.peakPowerW = peakPowerW;
        }
    }

    // ------------------------------------------------------------------ helpers
    /** A number (not a boolean, not NaN); Python's {@code _num}. */
    static boolean isNum(Object v) {
        return v instanceof Number && !Double.isNaN(((Number) v).doubleValue());
    }

    static double d(Object v) {
        return ((Number) v).doubleValue();
    }

    /** Python's {@code bool(x)} of a parsed JSON value. */
    static boolean truthy(Object v) {
        if (v == null) {
            return false;
        }
        if (v instanceof Boolean) {
            return (Boolean) v;
        }
        if (v instanceof Number) {
            return d(v) != 0.0;
        }
        if (v instanceof String) {
            return !((String) v).isEmpty();
        }
        if (v instanceof List) {
            return !((List<?>) v).isEmpty();
        }
        if (v instanceof Map) {
            return !((Map<?, ?>) v).isEmpty();
        }
        return true;
    }

    static String shortNumber(double v) {
        if (v == Math.rint(v) && Math.abs(v) < 1e15) {
            return Long.toString((long) v);
        }
        return Double.toString(v);
    }

    /** True when {@code powers} (ordered by rising frequency) never decrease. */
    static boolean isMonotone(double[] powers) {
        for (int i = 0; i + 1 < powers.length; i++) {
            if (!(powers[i] <= powers[i + 1])) {
                return false;
            }
        }
        return true;
    }

    /**
     * Index of the highest frequency with {@code powers[i] <= powerCapW}, or -1. With monotone powers
     * a binary search (Python's {@code bisect_right - 1}), else a linear scan from the top.
     */
    static int highestFeasibleIndex(double[] powers, double powerCapW, boolean monotone) {
        if (monotone) {
            int lo = 0;
            int hi = powers.length;
            while (lo < hi) {
                int mid = (lo + hi) >>> 1;
                if (powerCapW < powers[mid]) {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            return lo - 1;
        }
        for (int i = powers.length - 1; i >= 0; i--) {
            if (powers[i] <= powerCapW) {
                return i;
            }
        }
        return -1;
    }

    /** Light structural check of a parsed table (Python's {@code check_table}); {@link Estimator.FormatError}. */
    static void checkTable(Object doc) {
        if (!(doc instanceof Map) || !FORMAT.equals(((Map<?, ?>) doc).get("format"))) {
            throw new Estimator.FormatError("not a power table: format must be '" + FORMAT + "'");
        }
        Map<?, ?> m = (Map<?, ?>) doc;
        Object version = m.get("version");
        if (!isNum(version) || d(version) != VERSION) {
            throw new Estimator.FormatError("power table version " + version + " not supported (expected " + VERSION
                    + ")");
        }
        Object rows = m.get("rows");
        if (!(rows instanceof List) || ((List<?>) rows).isEmpty()) {
            throw new Estimator.FormatError("power table has no rows");
        }
        List<?> rl = (List<?>) rows;
        for (int i = 0; i < rl.size(); i++) {
            if (!(rl.get(i) instanceof Map)) {
                throw new Estimator.FormatError("power table row " + i + " is not an object");
            }
            Map<?, ?> r = (Map<?, ?>) rl.get(i);
            for (String k : new String[] {"batch_size", "freq_hz", "time_per_sample_s", "peak_power_w"}) {
                if (!isNum(r.get(k)) || d(r.get(k)) < 0) {
                    throw new Estimator.FormatError("power table row " + i + ": " + k
                            + " must be a non-negative number");
                }
            }
            if (d(r.get("batch_size")) < 1 || d(r.get("time_per_sample_s")) <= 0) {
                throw new Estimator.FormatError("power table row " + i
                        + ": batch_size and time_per_sample_s must be positive");
            }
        }
        Object ratios = m.get("ratios");
        if (!(ratios instanceof List) || ((List<?>) ratios).isEmpty()) {
            throw new Estimator.FormatError("power table has no batch-size ratios");
        }
        List<?> ql = (List<?>) ratios;
        for (int i = 0; i < ql.size(); i++) {
            Object o = ql.get(i);
            if (!(o instanceof Map) || !isNum(((Map<?, ?>) o).get("batch_size")) || !isNum(((Map<?, ?>) o).get("ratio"))
                    || d(((Map<?, ?>) o).get("ratio")) <= 0) {
                throw new Estimator.FormatError("power table ratio " + i + ": needs batch_size and a positive ratio");
            }
        }
    }

    // ------------------------------------------------------------------ select
    /** Parses a power table JSON text and answers {@link #select(Object, double)}. */
    public static Selection select(String json, double powerCapW) {
        if (json == null) {
            throw new Estimator.FormatError("power table JSON is null");
        }
        return select(Json.parse(json), powerCapW);
    }

    /**
     * The (batch size, frequency) pair to train with under {@code powerCapW} watts, from a parsed table
     * ({@link Json#parse} output, or maps/lists of {@link Number}s built by the app).
     *
     * @throws Estimator.FormatError the table is malformed
     * @throws Estimator.UsageError the cap is not a positive finite number of watts
     * @throws InfeasibleCapException every peak power in the table is above the cap
     */
    public static Selection select(Object tableDoc, double powerCapW) {
        checkTable(tableDoc);
        if (!(powerCapW > 0) || Double.isInfinite(powerCapW)) {
            throw new Estimator.UsageError("power cap must be a positive number of watts, got "
                    + shortNumber(powerCapW));
        }
        Map<?, ?> doc = (Map<?, ?>) tableDoc;
        Map<Integer, Double> ratios = new LinkedHashMap<>();
        for (Object o : (List<?>) doc.get("ratios")) {
            Map<?, ?> r = (Map<?, ?>) o;
            ratios.put((int) d(r.get("batch_size")), d(r.get("ratio")));
        }
        // batch size (ascending) -> its rows sorted by frequency (stable: equal frequencies keep file order)
        TreeMap<Integer, List<Row>> byBatch = new TreeMap<>();
        for (Object o : (List<?>) doc.get("rows")) {
            Map<?, ?> r = (Map<?, ?>) o;
            int bs = (int) d(r.get("batch_size"));
            if (ratios.containsKey(bs)) {
                byBatch.computeIfAbsent(bs, k -> new ArrayList<>())
                        .add(new Row(d(r.get("freq_hz")), d(r.get("time_per_sample_s")), d(r.get("peak_power_w"))));
            }
        }
        if (byBatch.isEmpty()) {
            throw new Estimator.FormatError("power table: no batch size has both profile rows and a ratio");
        }
        List<Candidate> candidates = new ArrayList<>();
        List<Integer> nonMonotone = new ArrayList<>();
        double lowest = Double.POSITIVE_INFINITY;
        for (Map.Entry<Integer, List<Row>> e : byBatch.entrySet()) {
            List<Row> lst = e.getValue();
            lst.sort((a, b) -> a.freqHz < b.freqHz ? -1 : a.freqHz > b.freqHz ? 1 : 0);
            double[] powers = new double[lst.size()];
            for (int i = 0; i < powers.length; i++) {
                powers[i] = lst.get(i).peakPowerW;
                lowest = Math.min(lowest, powers[i]);
            }
            boolean mono = isMonotone(powers);
            int idx = highestFeasibleIndex(powers, powerCapW, mono);
            if (!mono) {
                nonMonotone.add(e.getKey());
            }
            if (idx >= 0) {
                Row row = lst.get(idx);
                double ratio = ratios.get(e.getKey());
                candidates.add(new Candidate(e.getKey(), row.freqHz, row.timePerSampleS, row.peakPowerW, ratio,
                        row.timePerSampleS * ratio, mono));
            }
        }
        if (candidates.isEmpty()) {
            throw new InfeasibleCapException(powerCapW, lowest);
        }
        candidates.sort((a, b) -> a.scoreS < b.scoreS ? -1 : a.scoreS > b.scoreS ? 1
                : Integer.compare(b.batchSize, a.batchSize));
        Candidate best = candidates.get(0);
        Object refSamples = doc.get("reference_samples_to_target");
        Double est = isNum(refSamples) ? best.scoreS * d(refSamples) : null;
        Object knob = doc.containsKey("knob") ? doc.get("knob") : "gpu_freq_hz";
        return new Selection(best, est, powerCapW, knob instanceof String ? (String) knob : null,
                Collections.unmodifiableList(candidates), Collections.unmodifiableList(nonMonotone),
                truthy(doc.get("simulated")));
    }
}
