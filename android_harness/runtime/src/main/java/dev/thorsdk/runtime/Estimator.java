// Owns the Java estimator runtime (format thor-sdk/estimator version 5, 4, 3 or 2): loading, per-layer and whole-model cost.
package dev.thorsdk.runtime;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * A thor-sdk estimator (format {@code thor-sdk/estimator}, version 5, 4, 3 or 2) for Java 17 / Android, JDK only.
 *
 * <p>Mirrors {@code thor_sdk/runtime/estimator.py} step by step; the math is in
 * {@code docs/estimator-format.md}. Per layer kind: a non-negative mean function of the layer's
 * training FLOPs {@code F}, bytes moved {@code B} and sequential launches {@code L}
 * ({@code m = overhead L + per_flop F + per_byte B}, or where the entry has {@code per_step_byte}
 * {@code ... + per_byte (B - S) + per_step_byte S} with {@code S} the bytes moved once per step)
 * times a sparse GP on the log residual whose factors the file carries (loading is parsing, no
 * factorisation). A layer's cost is lognormal; {@link #estimate} sums a model's layers with the
 * covariance between layers of the same kind and adds the whole-model term.
 *
 * <p>Unlike the Python runtime this one does not compute FLOPs and bytes from a layer's config:
 * every layer carries its {@link Cost} terms ({@code thor-sdk layers --json} writes them).
 *
 * <pre>{@code
 * Estimator est = Estimator.load(jsonText);
 * Estimator.Estimate e = est.estimate(layers, 32);
 * double seconds = e.totalMean, plusMinus = e.totalStd;
 * }</pre>
 */
public final class Estimator {
    public static final String FORMAT = "thor-sdk/estimator";
    public static final int VERSION = 5;
    /** The oldest version this runtime reads: 2 is 3 without {@code per_step_byte}, 3 is 4 without {@code per_call},
     *  4 is 5 with every layer counted at least one launch. */
    public static final int MIN_VERSION = 2;
    /** The first version whose kinds were fitted with a forward-only convolution or dense layer at a share of one
     *  launch (below 1); older files count every layer at least one, as they were fitted. */
    public static final int SHARED_LAUNCH_VERSION = 5;
    private static final double SQRT5 = Math.sqrt(5.0);
    /** A log residual beyond this is a corrupt file, never a cost (checked on load and per layer). */
    static final double MAX_LOG_RESIDUAL = 60.0;
    /** constant + noise_level (ln units squared) beyond this is a corrupt file. */
    static final double MAX_LOG_VAR = 25.0;
    /** Reader caps, the same as the Python runtime's (thor_sdk.runtime.estimator): inducing points and
     *  variance-factor rows per kind, kinds per file, numbers in all inducing, alpha and var_factor arrays
     *  together, and layers per estimate (the whole-model variance is quadratic in a kind's distinct layers). */
    static final int MAX_INDUCING = 512;
    static final int MAX_VAR_ROWS = 64;
    static final int MAX_KINDS = 256;
    static final long MAX_MODEL_NUMBERS = 1_000_000L;
    static final int MAX_LAYERS = 4096;
    static final double VAR_FLOOR = 1e-12;
    /**
     * Std added to a layer marked approx, relative to its mean; over the layers of one {@code op} these add
     * up linearly in the total (one operator type, one error), as in the Python runtime.
     */
    public static final double APPROX_OP_REL_STD = 0.5;
    /**
     * Features a kind gained after estimators were first written, with the value a layer leaving one out has
     * (thor_sdk.layers.kinds.DEFAULT_FEATURES: a conv's dilation, frozen for every kind with weights but the output
     * head, inplace for the activations that can run in place): an estimator whose entry lacks one reads a layer
     * setting another value as its twin at that value, so the layer is approximated, as a stand-in is (the Python
     * runtime's rule).
     */
    static final Map<String, Map<String, Double>> DEFAULT_FEATURES = Map.ofEntries(
            Map.entry("conv1d", Map.of("dilation", 1.0, "frozen", 0.0)),
            Map.entry("conv2d", Map.of("dilation", 1.0, "frozen", 0.0)),
            Map.entry("linear", Map.of("frozen", 0.0)),
            Map.entry("batchnorm2d", Map.of("frozen", 0.0)),
            Map.entry("layernorm", Map.of("frozen", 0.0)),
            Map.entry("embedding", Map.of("frozen", 0.0)),
            Map.entry("lstm", Map.of("frozen", 0.0)),
            Map.entry("transformer_block", Map.of("frozen", 0.0)),
            Map.entry("batchnorm1d", Map.of("frozen", 0.0)),
            Map.entry("prelu", Map.of("frozen", 0.0)),
            Map.entry("groupnorm", Map.of("frozen", 0.0)),
            Map.entry("gru", Map.of("frozen", 0.0)),
            Map.entry("lstm_cell", Map.of("frozen", 0.0)),
            Map.entry("gru_cell", Map.of("frozen", 0.0)),
            Map.entry("mha", Map.of("frozen", 0.0)),
            Map.entry("conv_transpose2d", Map.of("frozen", 0.0)),
            Map.entry("relu", Map.of("inplace", 0.0)),
            Map.entry("relu6", Map.of("inplace", 0.0)),
            Map.entry("leaky_relu", Map.of("inplace", 0.0)),
            Map.entry("hardswish", Map.of("inplace", 0.0)),
            Map.entry("hardsigmoid", Map.of("inplace", 0.0)),
            Map.entry("silu", Map.of("inplace", 0.0)),
            Map.entry("elu", Map.of("inplace", 0.0)));
    static final String[] TERM_KEYS = {"flops_per_sample", "flops_fixed", "bytes_per_sample", "bytes_fixed"};
    /** Features the runtime derives from a layer's cost terms (F and B at the batch size), never from its config. */
    public static final List<String> DERIVED = List.of("train_flops", "train_bytes");
    /** A feature named {@code <base>_pad<N>} is {@code ceil(base / N) * N / base}, derived from the base feature
     *  (docs/estimator-format.md, padded features). */
    static final String PAD_MARK = "_pad";
    static final int MAX_PAD_BLOCK = 1024;

    // ------------------------------------------------------------------ errors (the ThorError tree)
    /** Base of every error the runtime raises on purpose. */
    public static class ThorError extends RuntimeException {
        private static final long serialVersionUID = 1L;

        public ThorError(String message) {
            super(message);
        }
    }

    /** A JSON document (estimator, layer list, power table, bundle manifest) is corrupt or breaks its format. */
    public static class FormatError extends ThorError {
        private static final long serialVersionUID = 1L;

        public FormatError(String message) {
            super(message);
        }
    }

    /** The estimator has no model for a layer kind. */
    public static class NotFoundError extends ThorError {
        private static final long serialVersionUID = 1L;

        public NotFoundError(String message) {
            super(message);
        }
    }

    /** Bad input: a missing feature or cost, a bad role, a batch size of 0. */
    public static class UsageError extends ThorError {
        private static final long serialVersionUID = 1L;

        public UsageError(String message) {
            super(message);
        }
    }

    // ------------------------------------------------------------------ inputs and outputs
    /**
     * A layer's cost terms, affine in the batch size {@code b}: training FLOPs
     * {@code F = flopsPerSample * b + flopsFixed}, bytes moved {@code B = bytesPerSample * b + bytesFixed}
     * (the {@code "cost"} object of {@code thor-sdk layers --json}). Each must be finite and >= 0;
     * that is checked where the layer is predicted.
     */
    public static final class Cost {
        public final double flopsPerSample;
        public final double flopsFixed;
        public final double bytesPerSample;
        public final double bytesFixed;
        /** Sequential launches per step (time steps x layers of a recurrent layer; a quarter for a forward-only
         *  convolution or dense layer; 1 otherwise). */
        public final double launches;

        public Cost(double flopsPerSample, double flopsFixed, double bytesPerSample, double bytesFixed) {
            this(flopsPerSample, flopsFixed, bytesPerSample, bytesFixed, 1.0);
        }

        public Cost(double flopsPerSample, double flopsFixed, double bytesPerSample, double bytesFixed,
                double launches) {
            this.flopsPerSample = flopsPerSample;
            this.flopsFixed = flopsFixed;
            this.bytesPerSample = bytesPerSample;
            this.bytesFixed = bytesFixed;
            this.launches = launches;
        }

        /**
         * From a parsed {@code "cost"} object ({@code flops_per_sample}, {@code flops_fixed},
         * {@code bytes_per_sample}, {@code bytes_fixed}); {@link UsageError} if one is missing or not a
         * number (negative or infinite terms are refused where the layer is predicted).
         */
        public static Cost of(Map<String, ?> cost) {
            if (cost == null) {
                throw new UsageError("cost must be an object with " + String.join(", ", TERM_KEYS));
            }
            double[] t = new double[TERM_KEYS.length];
            for (int j = 0; j < t.length; j++) {
                Object v = cost.get(TERM_KEYS[j]);
                if (!(v instanceof Number)) {
                    throw new UsageError("cost." + TERM_KEYS[j] + " must be a finite number >= 0, got " + v);
                }
                t[j] = ((Number) v).doubleValue();
            }
            Object n = cost.containsKey("launches") ? cost.get("launches") : Double.valueOf(1.0);
            if (!(n instanceof Number)) {
                throw new UsageError("cost.launches must be a finite number > 0, got " + n);
            }
            return new Cost(t[0], t[1], t[2], t[3], ((Number) n).doubleValue());
        }

        double[] checked(String where) {
            double[] t = {flopsPerSample, flopsFixed, bytesPerSample, bytesFixed};
            // launches is checked after the four terms, as the Python runtime does
            for (int j = 0; j < t.length; j++) {
                if (!(t[j] >= 0.0) || Double.isInfinite(t[j])) {
                    throw new UsageError(where + ": cost." + TERM_KEYS[j] + " must be a finite number >= 0, got "
                            + t[j]);
                }
            }
            if (!(launches > 0.0) || Double.isInfinite(launches)) {
                throw new UsageError(where + ": cost.launches must be a finite number > 0, got " + launches);
            }
            return new double[] {t[0], t[1], t[2], t[3], launches};
        }
    }

    /**
     * One layer of a model: what {@code thor-sdk layers --json} lists (name, kind, role, config, cost, and
     * optionally the operator it came from and why it is approximated).
     */
    public static final class Layer {
        public final String name;
        public final String kind;
        public final String role; // "input", "hidden" or "output"
        public final Map<String, Double> config;
        public final Cost cost;   // required by this runtime
        /** The operator the layer came from ({@code MultiheadAttention}, {@code x @ y}), or null. */
        public final String op;
        /** Why the layer is approximated (a stand-in for an operator without a kind), or null. */
        public final String approx;
        /** The share of its training step run again in backward (its forward, recomputed under
         *  torch.utils.checkpoint), in [0, 1]; 0 when absent: its mean and std are (1 + recompute) times its kind's. */
        public final double recompute;

        public Layer(String name, String kind, String role, Map<String, Double> config, Cost cost) {
            this(name, kind, role, config, cost, null, null);
        }

        public Layer(String name, String kind, String role, Map<String, Double> config, Cost cost, String op,
                     String approx) {
            this(name, kind, role, config, cost, op, approx, 0.0);
        }

        public Layer(String name, String kind, String role, Map<String, Double> config, Cost cost, String op,
                     String approx, double recompute) {
            this.name = name;
            this.kind = kind;
            this.role = role;
            this.config = config;
            this.cost = cost;
            this.op = op;
            this.approx = approx;
            this.recompute = recompute;
        }
    }

    /** Mean and standard deviation of one layer's cost. */
    public static final class LayerEstimate {
        public final Layer layer;
        public final double mean;
        public final double std;
        /** Why the layer is estimated approximately (its own {@code approx}, or a feature its kind's model
         *  predates), or null. */
        public final String approx;
        /** Whether {@link #approx} is a feature its kind's model predates (a dilated conv, an estimator fitted
         *  before dilation was a feature): refit the campaign for its own cost. */
        public final boolean unreadFeature;

        LayerEstimate(Layer layer, double mean, double std, String approx, boolean unreadFeature) {
            this.layer = layer;
            this.mean = mean;
            this.std = std;
            this.approx = approx;
            this.unreadFeature = unreadFeature;
        }
    }

    /**
     * Cost of one training step of a whole model. {@code totalStd} includes the whole-model term
     * {@code (wholeModelRelStd * totalMean)^2}; {@code layersTotalStd} is the layers' own uncertainty.
     */
    public static final class Estimate {
        public final String metric;
        public final String unit;
        public final String device;  // device.name of the estimator (null if it has none)
        public final String runtime;
        public final int batchSize;
        public final double totalMean;
        public final double totalStd;
        public final double layersTotalMean;
        public final double layersTotalStd;
        public final List<LayerEstimate> layers;
        /** The device level the estimate was put at ({@link #atLevel}), or null: the device as profiled. */
        public final Level level;

        Estimate(String metric, String unit, String device, String runtime, int batchSize, double totalMean,
                 double totalStd, double layersTotalStd, List<LayerEstimate> layers) {
            this(metric, unit, device, runtime, batchSize, totalMean, totalStd, totalMean, layersTotalStd, layers,
                    null);
        }

        Estimate(String metric, String unit, String device, String runtime, int batchSize, double totalMean,
                 double totalStd, double layersTotalMean, double layersTotalStd, List<LayerEstimate> layers,
                 Level level) {
            this.metric = metric;
            this.unit = unit;
            this.device = device;
            this.runtime = runtime;
            this.batchSize = batchSize;
            this.totalMean = totalMean;
            this.totalStd = totalStd;
            this.layersTotalMean = layersTotalMean;
            this.layersTotalStd = layersTotalStd;
            this.layers = layers;
            this.level = level;
        }
    }

    /** A device level: the reference probe now over its median during the profile ({@link #deviceLevel}). */
    public static final class Level {
        public final double level;
        public final double logStd;
        public final int readings;  // 0 for a level given as a number

        public Level(double level, double logStd) {
            this(level, logStd, 0);
        }

        Level(double level, double logStd, int readings) {
            if (Double.isNaN(level) || Double.isInfinite(level)) {
                throw new UsageError("level must be a finite number, got " + level);
            }
            if (level < MIN_LEVEL || level > MAX_LEVEL) {
                throw new UsageError("level " + level + " is outside " + MIN_LEVEL + "-" + MAX_LEVEL
                        + " of the profile's: not the profiled device in another state (another device, or "
                        + "readings in another unit)");
            }
            if (Double.isNaN(logStd) || logStd < 0 || logStd > MAX_LEVEL_LOG_STD) {
                throw new UsageError("level log_std must be a finite number from 0 to " + MAX_LEVEL_LOG_STD
                        + ", got " + logStd);
            }
            this.level = level;
            this.logStd = logStd;
            this.readings = readings;
        }
    }

    /** Device levels outside [MIN_LEVEL, MAX_LEVEL] are refused; as the Python runtime's LEVEL_RANGE. */
    public static final double MIN_LEVEL = 0.02;
    public static final double MAX_LEVEL = 50.0;
    public static final double MAX_LEVEL_LOG_STD = 5.0;
    public static final int MAX_LEVEL_READINGS = 10_000;

    /**
     * The device's level from its reference probe measured now: {@code median(readings) / referenceValue},
     * with ln-std {@code max(s, driftLogStd) / sqrt(n)} ({@code s} the sample std of the readings' logs, 0
     * for one), capped at {@link #MAX_LEVEL_LOG_STD}; as {@code thor_sdk.runtime.device_level}.
     */
    public static Level deviceLevel(double[] readings, double referenceValue, double driftLogStd) {
        if (readings == null || readings.length < 1 || readings.length > MAX_LEVEL_READINGS) {
            throw new UsageError("readings: 1 to " + MAX_LEVEL_READINGS + " numbers, got "
                    + (readings == null ? 0 : readings.length));
        }
        for (int i = 0; i < readings.length; i++) {
            double v = readings[i];
            if (!(v > 0) || Double.isInfinite(v)) {
                throw new UsageError("readings[" + i + "] must be a finite number > 0, got " + v);
            }
        }
        if (!(referenceValue > 0) || Double.isInfinite(referenceValue)) {
            throw new UsageError("reference_value must be a finite number > 0, got " + referenceValue);
        }
        if (!(driftLogStd >= 0) || Double.isInfinite(driftLogStd)) {
            throw new UsageError("drift_log_std must be a finite number >= 0, got " + driftLogStd);
        }
        int n = readings.length;
        double[] logs = new double[n];
        double mu = 0.0;
        for (int i = 0; i < n; i++) {
            logs[i] = Math.log(readings[i]);
            mu += logs[i];
        }
        mu /= n;
        double spread = 0.0;
        if (n > 1) {
            double ss = 0.0;
            for (double x : logs) {
                ss += (x - mu) * (x - mu);
            }
            spread = Math.sqrt(ss / (n - 1));
        }
        double[] sorted = readings.clone();
        java.util.Arrays.sort(sorted);
        double median = n % 2 == 1 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
        double logStd = Math.min(Math.max(spread, driftLogStd) / Math.sqrt(n), MAX_LEVEL_LOG_STD);
        return new Level(median / referenceValue, logStd, n);
    }

    /** The device's level from readings of this estimator's reference probe (whole_model.reference);
     *  {@link NotFoundError} for an estimator without one. */
    public Level level(double[] readings) {
        if (Double.isNaN(referenceValue)) {
            throw new NotFoundError("this estimator has no reference probe (whole_model.reference): its level "
                    + "cannot be measured");
        }
        return deviceLevel(readings, referenceValue, driftLogStd);
    }

    /**
     * The estimate put at a device level: every mean and std times {@code level.level}; the total's variance
     * gains {@code (totalMean * level * logStd)^2}; as the Python runtime's {@code at_level}.
     */
    public static Estimate atLevel(Estimate e, Level level) {
        if (level == null) {
            throw new UsageError("level must be given");
        }
        if (e.level != null) {
            throw new UsageError("the estimate is already at a level");
        }
        double f = level.level;
        List<LayerEstimate> layers = new ArrayList<>();
        for (LayerEstimate l : e.layers) {
            layers.add(new LayerEstimate(l.layer, l.mean * f, l.std * f, l.approx, l.unreadFeature));
        }
        double mean = e.totalMean * f;
        double a = e.totalStd * f;
        double b = mean * level.logStd;
        return new Estimate(e.metric, e.unit, e.device, e.runtime, e.batchSize, mean, Math.sqrt(a * a + b * b),
                e.layersTotalMean * f, e.layersTotalStd * f, Collections.unmodifiableList(layers), level);
    }

    /** {@link #estimate(List, int)} at a device level (null: as profiled). */
    public Estimate estimate(List<Layer> layers, int batchSize, Level level) {
        Estimate e = estimate(layers, batchSize);
        return level == null ? e : atLevel(e, level);
    }

    // ------------------------------------------------------------------ validation helpers
    private static double num(Object v, String where) {
        if (!(v instanceof Double)) {
            throw new FormatError("estimator: " + where + " must be a number, got " + typeName(v));
        }
        double d = (Double) v;
        if (Double.isNaN(d) || Double.isInfinite(d)) {
            throw new FormatError("estimator: " + where + " is not a finite number (" + d + ")");
        }
        return d;
    }

    private static double positive(Object v, String where) {
        double d = num(v, where);
        if (d <= 0) {
            throw new FormatError("estimator: " + where + " must be > 0, got " + d);
        }
        return d;
    }

    private static double nonNegative(Object v, String where) {
        double d = num(v, where);
        if (d < 0) {
            throw new FormatError("estimator: " + where + " must be >= 0, got " + d);
        }
        return d;
    }

    private static double[] nums(Object v, String where, int length, boolean mustBePositive) {
        if (!(v instanceof List)) {
            throw new FormatError("estimator: " + where + " must be an array, got " + typeName(v));
        }
        List<?> a = (List<?>) v;
        if (length >= 0 && a.size() != length) {
            throw new FormatError("estimator: " + where + " has " + a.size() + " numbers, expected " + length);
        }
        double[] out = new double[a.size()];
        for (int k = 0; k < out.length; k++) {
            out[k] = mustBePositive ? positive(a.get(k), where + "[" + k + "]") : num(a.get(k), where + "[" + k + "]");
        }
        return out;
    }

    private static double[][] rows(Object v, String where, int ncols, int maxRows) {
        if (!(v instanceof List) || ((List<?>) v).isEmpty()) {
            throw new FormatError("estimator: " + where + " must be a non-empty array of rows");
        }
        List<?> a = (List<?>) v;
        if (a.size() > maxRows) {
            throw new FormatError("estimator: " + where + " has " + a.size() + " rows; at most " + maxRows
                    + " are read");
        }
        double[][] out = new double[a.size()][];
        for (int i = 0; i < out.length; i++) {
            out[i] = nums(a.get(i), where + "[" + i + "]", ncols, false);
        }
        return out;
    }

    private static Object field(Map<?, ?> d, String key, String where) {
        if (!d.containsKey(key)) {
            throw new FormatError("estimator: " + where + " lacks field '" + key + "'");
        }
        return d.get(key);
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> object(Object v, String where) {
        if (!(v instanceof Map)) {
            throw new FormatError("estimator: " + where + " must be an object");
        }
        return (Map<String, Object>) v;
    }

    private static String str(Object v, String where) {
        if (!(v instanceof String)) {
            throw new FormatError("estimator: " + where + " must be a string, got " + typeName(v));
        }
        return (String) v;
    }

    private static String typeName(Object v) {
        if (v == null) {
            return "null";
        }
        if (v instanceof Double) {
            return "number";
        }
        if (v instanceof String) {
            return "string";
        }
        if (v instanceof Boolean) {
            return "boolean";
        }
        if (v instanceof List) {
            return "array";
        }
        if (v instanceof Map) {
            return "object";
        }
        return v.getClass().getSimpleName();
    }

    /** A JSON number as the file wrote it: 2.0 prints as 2. */
    private static String show(Object v) {
        if (v instanceof Double) {
            double d = (Double) v;
            if (d == Math.rint(d) && Math.abs(d) < 1e15) {
                return Long.toString((long) d);
            }
        }
        return v instanceof String ? "'" + v + "'" : String.valueOf(v);
    }

    // ------------------------------------------------------------------ one kind
    /** The exported cost model of one layer kind. */
    static final class KindModel {
        final String kind;
        final String[] features;
        final Map<String, Integer> index = new HashMap<>();
        final boolean hasRole;
        final double[] xMean, xScale, lengthScale, alpha;
        final double overhead, perFlop, perByte, offset, constant, noise;
        /** The rate of the bytes moved once per step (version 3); NaN: they cost {@code perByte}. */
        final double perStepByte;
        /** Paid once per layer call whatever its launches (version 4; a recurrent layer's fixed cost); 0 where absent. */
        final double perCall;
        final double[][] inducingU; // inducing / length_scale
        final double[][] w;         // var_factor, r rows of m
        final int nSamples;
        /** Per feature, {base, block} where it is padded from another feature (null else), parsed once. */
        final Object[][] padded;
        /** The features a caller gives (see {@link #givenFeatures}). */
        final List<String> given;
        /** Config features a layer may leave out, each read as its value (the entry's optional "defaults"). */
        final Map<String, Double> defaults;

        KindModel(String kind, Object entry) {
            String wh = "kinds['" + kind + "']";
            Map<String, Object> d = object(entry, wh);
            Object f = field(d, "features", wh);
            if (!(f instanceof List) || ((List<?>) f).isEmpty()) {
                throw new FormatError("estimator: " + wh + ".features must be a non-empty list of distinct names");
            }
            List<?> fl = (List<?>) f;
            features = new String[fl.size()];
            for (int k = 0; k < features.length; k++) {
                if (!(fl.get(k) instanceof String) || index.put((String) fl.get(k), k) != null) {
                    throw new FormatError("estimator: " + wh + ".features must be a non-empty list of distinct names");
                }
                features[k] = (String) fl.get(k);
            }
            int nd = features.length;
            padded = new Object[nd][];
            for (int j = 0; j < nd; j++) {
                padded[j] = parsePadded(features[j]);
            }
            given = givenFeatures(features);
            defaults = defaultsOf(d.get("defaults"), given, wh);
            Object ft = field(d, "feature_transform", wh);
            if (!"log1p".equals(ft)) {
                throw new FormatError("estimator: " + wh + ".feature_transform must be 'log1p', got " + show(ft));
            }
            Map<String, Object> mf = object(field(d, "mean_function", wh), wh + ".mean_function");
            overhead = positive(field(mf, "overhead", wh + ".mean_function"), wh + ".mean_function.overhead");
            perFlop = nonNegative(field(mf, "per_flop", wh + ".mean_function"), wh + ".mean_function.per_flop");
            perByte = nonNegative(field(mf, "per_byte", wh + ".mean_function"), wh + ".mean_function.per_byte");
            perStepByte = mf.get("per_step_byte") == null ? Double.NaN
                    : nonNegative(mf.get("per_step_byte"), wh + ".mean_function.per_step_byte");
            perCall = mf.get("per_call") == null ? 0.0
                    : nonNegative(mf.get("per_call"), wh + ".mean_function.per_call");
            Map<String, Object> k = object(field(d, "kernel", wh), wh + ".kernel");
            double nu = num(field(k, "nu", wh + ".kernel"), wh + ".kernel.nu");
            if (nu != 2.5) {
                throw new FormatError("estimator: " + wh + ".kernel.nu must be 2.5 (Matern 5/2), got " + nu);
            }
            this.kind = kind;
            hasRole = index.containsKey("role");
            xMean = nums(field(d, "x_mean", wh), wh + ".x_mean", nd, false);
            xScale = nums(field(d, "x_scale", wh), wh + ".x_scale", nd, true);
            lengthScale = nums(field(k, "length_scale", wh + ".kernel"), wh + ".kernel.length_scale", nd, true);
            constant = positive(field(k, "constant", wh + ".kernel"), wh + ".kernel.constant");
            noise = nonNegative(field(k, "noise_level", wh + ".kernel"), wh + ".kernel.noise_level");
            offset = num(field(d, "residual_offset", wh), wh + ".residual_offset");
            for (double l : lengthScale) {
                if (l < 1e-6) {
                    throw new FormatError("estimator: " + wh + ".kernel.length_scale below 1e-6 is not a usable kernel");
                }
            }
            double[][] inducing = rows(field(d, "inducing", wh), wh + ".inducing", nd, MAX_INDUCING);
            int m = inducing.length;
            inducingU = new double[m][nd];
            for (int i = 0; i < m; i++) {
                for (int j = 0; j < nd; j++) {
                    inducingU[i][j] = inducing[i][j] / lengthScale[j];
                }
            }
            alpha = nums(field(d, "alpha", wh), wh + ".alpha", m, false);
            w = rows(field(d, "var_factor", wh), wh + ".var_factor", m, MAX_VAR_ROWS);
            Object ns = field(d, "n_samples", wh);
            if (!(ns instanceof Double) || (Double) ns < 1 || (Double) ns != Math.rint((Double) ns)
                    || (Double) ns > Integer.MAX_VALUE) {
                throw new FormatError("estimator: " + wh + ".n_samples must be a positive integer, got " + show(ns));
            }
            nSamples = (int) (double) (Double) ns;
            if (Math.abs(offset) > MAX_LOG_RESIDUAL) {
                throw new FormatError("estimator: " + wh + ": |residual_offset| above 60 is not a cost model");
            }
            if (constant + noise > MAX_LOG_VAR) {
                throw new FormatError("estimator: " + wh + ": kernel constant + noise_level exceeds 25 (ln units)");
            }
        }

        /** Raw features -> standardised, length-scaled u. */
        double[] scaled(double[] raw) {
            double[] u = new double[raw.length];
            for (int j = 0; j < raw.length; j++) {
                u[j] = ((Math.log1p(raw[j]) - xMean[j]) / xScale[j]) / lengthScale[j];
            }
            return u;
        }

        /** ln-mean, ln-variance (incl. white noise), v = W k and u of one layer with terms F, B. */
        Row row(double[] raw, double flops, double bytes, double launches, double stepBytes) {
            double[] u = scaled(raw);
            double c = constant;
            int m = inducingU.length;
            double[] ks = new double[m];
            double[] prod = new double[m];
            for (int i = 0; i < m; i++) {
                ks[i] = c * matern52(dist(u, inducingU[i]));
                prod[i] = ks[i] * alpha[i];
            }
            double mu = offset + fsum(prod);
            if (!(Math.abs(mu) <= MAX_LOG_RESIDUAL)) { // |k_i| <= constant: only a corrupt alpha gets here
                throw new FormatError("estimator: kinds['" + kind + "']: the residual model gives e^"
                        + String.format(Locale.ROOT, "%.3g", mu) + " for this layer; the file is corrupt");
            }
            double[] v = new double[w.length];
            double[] vsq = new double[w.length];
            for (int r = 0; r < w.length; r++) {
                v[r] = dot(w[r], ks);
                vsq[r] = v[r] * v[r];
            }
            double var = c + noise - fsum(vsq);
            if (var < VAR_FLOOR) {
                var = VAR_FLOOR;
            }
            double mean = perCall + (Double.isNaN(perStepByte) ? overhead * launches + perFlop * flops + perByte * bytes
                    : overhead * launches + perFlop * flops + perByte * (bytes - stepBytes) + perStepByte * stepBytes);
            if (!(mean > 0.0) || Double.isInfinite(mean)) {
                throw new UsageError("kind '" + kind + "': the mean function is not finite for these layer terms "
                        + "(flops " + flops + ", bytes " + bytes + ")");
            }
            return new Row(Math.log(mean) + mu, var, v, u);
        }

        /** Raw feature vector from a map of feature names to numbers (role may be a String). */
        double[] vector(Map<String, ?> values, String where) {
            double[] out = new double[features.length];
            for (int j = 0; j < features.length; j++) {
                String f = features[j];
                Object[] pad = padded[j];
                String name = pad != null ? (String) pad[0] : f;
                if (!values.containsKey(name) && !defaults.containsKey(name)) {
                    throw new UsageError(where + ": kind '" + kind + "' needs feature '" + name + "' (features: "
                            + String.join(", ", given) + ")");
                }
                Object x = values.containsKey(name) ? values.get(name) : defaults.get(name);
                if (pad != null) { // derived from its base feature, never read from the values
                    double c = x instanceof Number && !(x instanceof Boolean) ? ((Number) x).doubleValue() : Double.NaN;
                    if (!(c >= 1.0) || Double.isInfinite(c)) {
                        throw new UsageError(where + ": feature '" + name + "' must be a finite number >= 1 (it gives '"
                                + f + "'), got " + x);
                    }
                    out[j] = paddedValue(c, (Integer) pad[1]);
                    continue;
                }
                if (f.equals("role") && x instanceof String) {
                    x = roleCode((String) x, where + ": role must be 'input' or 'hidden' for kind '" + kind + "', got '"
                            + x + "'");
                }
                if (!(x instanceof Number)) {
                    throw new UsageError(where + ": feature '" + f + "' must be a number, got " + x);
                }
                double d = ((Number) x).doubleValue();
                if (!(d > -1.0) || Double.isInfinite(d)) {
                    throw new UsageError(where + ": feature '" + f + "' must be a finite number > -1, got " + d);
                }
                out[j] = d;
            }
            return out;
        }
    }

    /** One distinct layer: ln-mean, ln-variance, v = W k, scaled input u. */
    static final class Row {
        final double lmu, var;
        final double[] v, u;

        Row(double lmu, double var, double[] v, double[] u) {
            this.lmu = lmu;
            this.var = var;
            this.v = v;
            this.u = u;
        }
    }

    /** Mean and std in the metric's unit of a lognormal with ln-mean {@code lmu} and ln-variance {@code var}. */
    static double[] moments(double lmu, double var) {
        double m = Math.exp(lmu + var / 2.0);
        if (Double.isInfinite(m) || Double.isNaN(m)) {
            throw new UsageError("the estimate is too large to represent (far outside what the estimator covers)");
        }
        return new double[] {m, m * Math.sqrt(Math.expm1(var))};
    }

    static double matern52(double r) {
        double t = r * SQRT5;
        return (1.0 + t + t * t / 3.0) * Math.exp(-t);
    }

    static double dist(double[] a, double[] b) {
        double s = 0.0;
        for (int j = 0; j < a.length; j++) {
            double d = a[j] - b[j];
            s += d * d;
        }
        return Math.sqrt(s);
    }

    static double dot(double[] a, double[] b) {
        double s = 0.0;
        for (int j = 0; j < a.length; j++) {
            s += a[j] * b[j];
        }
        return s;
    }

    /**
     * The correctly rounded sum of {@code xs}, like Python's {@code math.fsum} (Shewchuk's exact partials);
     * the plain sum where a term or a partial is not finite.
     */
    static double fsum(double[] xs) {
        double[] p = new double[8];
        int np = 0;
        for (double x0 : xs) {
            if (Double.isNaN(x0) || Double.isInfinite(x0)) {
                return plain(xs);
            }
            double x = x0;
            int i = 0;
            for (int j = 0; j < np; j++) {
                double y = p[j];
                if (Math.abs(x) < Math.abs(y)) {
                    double t = x;
                    x = y;
                    y = t;
                }
                double hi = x + y;
                double lo = y - (hi - x);
                if (lo != 0.0) {
                    p[i++] = lo;
                }
                x = hi;
            }
            if (Double.isInfinite(x) || Double.isNaN(x)) {
                return plain(xs);
            }
            if (i == p.length) {
                p = Arrays.copyOf(p, 2 * p.length);
            }
            p[i] = x;
            np = i + 1;
        }
        double hi = 0.0;
        if (np > 0) {
            int n = np - 1;
            hi = p[n];
            double lo = 0.0;
            while (n > 0) {
                double x = hi;
                double y = p[--n];
                hi = x + y;
                double yr = hi - x;
                lo = y - yr;
                if (lo != 0.0) {
                    break;
                }
            }
            // half-even rounding across several partials
            if (n > 0 && ((lo < 0.0 && p[n - 1] < 0.0) || (lo > 0.0 && p[n - 1] > 0.0))) {
                double y = lo * 2.0;
                double x = hi + y;
                double yr = x - hi;
                if (y == yr) {
                    hi = x;
                }
            }
        }
        return hi;
    }

    private static double plain(double[] xs) {
        double s = 0.0;
        for (double x : xs) {
            s += x;
        }
        return s;
    }

    /**
     * {base feature, block} of a padded feature's name ("in_channels_pad8" gives {"in_channels", 8}), null for
     * any other name: the block is a decimal integer in [1, MAX_PAD_BLOCK] without a leading zero.
     */
    static Object[] parsePadded(String name) {
        int at = name.lastIndexOf(PAD_MARK);
        if (at <= 0) {
            return null;
        }
        String digits = name.substring(at + PAD_MARK.length());
        if (digits.isEmpty() || digits.length() > 4 || digits.charAt(0) == '0') {
            return null;
        }
        for (int i = 0; i < digits.length(); i++) {
            char ch = digits.charAt(i);
            if (ch < '0' || ch > '9') {
                return null;
            }
        }
        int block = Integer.parseInt(digits);
        return block <= MAX_PAD_BLOCK ? new Object[] {name.substring(0, at), block} : null;
    }

    /** ceil(x / block) * block / x for a count x >= 1: the work padding to blocks adds, as a ratio. */
    static double paddedValue(double x, int block) {
        return Math.ceil(x / block) * block / x;
    }

    /**
     * An entry's optional "defaults" (feature -> number): config features a layer may leave out, each one the
     * caller gives (not batch_size or role), its value a finite number >= 0; empty when the entry has none.
     */
    static Map<String, Double> defaultsOf(Object d, List<String> given, String wh) {
        Map<String, Double> out = new HashMap<>();
        if (d == null) {
            return out;
        }
        if (!(d instanceof Map)) {
            throw new FormatError("estimator: " + wh + ".defaults must be an object of feature -> number");
        }
        for (Map.Entry<?, ?> e : ((Map<?, ?>) d).entrySet()) {
            Object f = e.getKey();
            if (!given.contains(f) || "batch_size".equals(f) || "role".equals(f)) {
                throw new FormatError("estimator: " + wh + ".defaults names '" + f
                        + "', not a config feature a layer gives (" + String.join(", ", given) + ")");
            }
            Object v = e.getValue();
            if (!(v instanceof Double) || !((Double) v >= 0.0) || ((Double) v).isInfinite()) {
                throw new FormatError("estimator: " + wh + ".defaults['" + f + "'] must be a finite number >= 0, got "
                        + show(v));
            }
            out.put((String) f, (Double) v);
        }
        return out;
    }

    /** The features a caller gives: all but the derived and padded ones (padded ones as their base), each once. */
    static List<String> givenFeatures(String[] features) {
        List<String> out = new ArrayList<>();
        for (String f : features) {
            Object[] p = parsePadded(f);
            String g = p != null ? (String) p[0] : f;
            if (!DERIVED.contains(g) && !out.contains(g)) {
                out.add(g);
            }
        }
        return out;
    }

    private static Double roleCode(String role, String message) {
        if (role.equals("input")) {
            return 1.0;
        }
        if (role.equals("hidden")) {
            return 0.0;
        }
        throw new UsageError(message);
    }

    // ------------------------------------------------------------------ the estimator
    public final String metric;
    public final String unit;
    public final Map<String, Object> device;
    /** What ran the training steps (torch, onnxruntime, ...): with the device, the estimator's key. */
    public final String runtime;
    /** whole_model.rel_std (0 when absent): relative error of whole models beyond the layers'. */
    public final double wholeModelRelStd;
    /** whole_model.drift_log_std (0 when absent), and whole_model.reference.median_value (NaN without one). */
    public final double driftLogStd;
    public final double referenceValue;
    /** The file's format version (before {@link #SHARED_LAUNCH_VERSION}, every layer counts at least one launch). */
    public final int version;
    private final Map<String, KindModel> models = new LinkedHashMap<>();

    private Estimator(Object parsed) {
        Map<String, Object> doc = object(parsed, "top level");
        Object fmt = doc.get("format");
        if (!FORMAT.equals(fmt)) {
            throw new FormatError("not a thor-sdk estimator: format is " + show(fmt) + ", expected '" + FORMAT + "'");
        }
        Object version = doc.get("version");
        if (!(version instanceof Double) || (Double) version < MIN_VERSION || (Double) version > VERSION
                || (Double) version != Math.rint((Double) version)) {
            String hint = version instanceof Double && (Double) version == 1
                    ? " (version 1 files predate device profiles: refit the campaign with `thor-sdk fit`)" : "";
            throw new FormatError("unsupported estimator version " + show(version) + "; this runtime reads versions "
                    + MIN_VERSION + " to " + VERSION + hint);
        }
        this.version = (int) Math.rint((Double) version);
        metric = str(field(doc, "metric", "top level"), "metric");
        String expectedUnit = metric.equals("time") ? "s" : metric.equals("energy") ? "J" : null;
        if (expectedUnit == null) {
            throw new FormatError("estimator: metric must be 'time' or 'energy', got '" + metric + "'");
        }
        unit = str(field(doc, "unit", "top level"), "unit");
        if (!unit.equals(expectedUnit)) {
            throw new FormatError("estimator: unit of metric '" + metric + "' must be '" + expectedUnit + "', got '"
                    + unit + "'");
        }
        device = Collections.unmodifiableMap(object(field(doc, "device", "top level"), "device"));
        runtime = str(field(doc, "runtime", "top level"), "runtime");
        Map<String, Object> fb = object(field(doc, "flops_baseline", "top level"), "flops_baseline");
        num(field(fb, "unit_per_flop", "flops_baseline"), "flops_baseline.unit_per_flop");
        Object wmo = doc.get("whole_model");
        double relStd = 0.0;
        double drift = 0.0;
        double refValue = Double.NaN;
        if (wmo != null) {
            Map<String, Object> wm = object(wmo, "whole_model");
            if (wm.containsKey("rel_std")) {
                relStd = nonNegative(wm.get("rel_std"), "whole_model.rel_std");
            }
            if (relStd > 10) {
                throw new FormatError("estimator: whole_model.rel_std above 10 is not a calibration");
            }
            if (wm.get("drift_log_std") != null) {
                drift = nonNegative(wm.get("drift_log_std"), "whole_model.drift_log_std");
                if (drift > MAX_LEVEL_LOG_STD) {
                    throw new FormatError("estimator: whole_model.drift_log_std above " + MAX_LEVEL_LOG_STD
                            + " is not a drift");
                }
            }
            if (wm.get("reference") != null) {
                Map<String, Object> ref = object(wm.get("reference"), "whole_model.reference");
                refValue = positive(field(ref, "median_value", "whole_model.reference"),
                        "whole_model.reference.median_value");
                object(field(ref, "probe", "whole_model.reference"), "whole_model.reference.probe");
            }
        }
        wholeModelRelStd = relStd;
        driftLogStd = drift;
        referenceValue = refValue;
        Map<String, Object> kinds = object(field(doc, "kinds", "top level"), "kinds");
        if (kinds.isEmpty()) {
            throw new FormatError("estimator: kinds is empty");
        }
        if (kinds.size() > MAX_KINDS) {
            throw new FormatError("estimator: " + kinds.size() + " kinds; at most " + MAX_KINDS + " are read");
        }
        long n = modelNumbers(kinds);
        if (n > MAX_MODEL_NUMBERS) {
            throw new FormatError("estimator: its kinds hold " + n + " numbers in inducing, alpha and var_factor; "
                    + "at most " + MAX_MODEL_NUMBERS + " are read (docs/estimator-format.md)");
        }
        for (Map.Entry<String, Object> e : kinds.entrySet()) {
            models.put(e.getKey(), new KindModel(e.getKey(), e.getValue()));
        }
    }

    /** Numbers in the kinds' inducing, alpha and var_factor arrays (rows beyond the per-kind caps not
     *  counted: they are refused anyway), as thor_sdk.runtime.estimator._model_numbers. */
    static long modelNumbers(Map<String, Object> kinds) {
        long n = 0;
        for (Object d : kinds.values()) {
            if (!(d instanceof Map)) {
                continue;
            }
            Map<?, ?> kind = (Map<?, ?>) d;
            String[] keys = {"inducing", "var_factor", "alpha"};
            int[] caps = {MAX_INDUCING, MAX_VAR_ROWS, -1};
            for (int j = 0; j < keys.length; j++) {
                Object v = kind.get(keys[j]);
                if (!(v instanceof List)) {
                    continue;
                }
                List<?> a = (List<?>) v;
                if (caps[j] < 0) {
                    n += a.size();
                    continue;
                }
                for (Object r : a.subList(0, Math.min(a.size(), caps[j] + 1))) {
                    n += r instanceof List ? ((List<?>) r).size() : 1;
                }
            }
        }
        return n;
    }

    /** The most {@link #load} reads, as the Python runtime's MAX_FILE_BYTES (an estimator is about 100-250 KB). */
    static final int MAX_TEXT_CHARS = 8 * 1024 * 1024;

    /** Parses and validates an estimator JSON text; {@link FormatError} on any problem. */
    public static Estimator load(String json) {
        if (json != null && json.length() > MAX_TEXT_CHARS) {
            throw new FormatError("estimator: " + json.length() + " characters; at most " + MAX_TEXT_CHARS
                    + " are read");
        }
        return new Estimator(Json.parse(json));
    }

    /** Kind name -> its feature names, for every kind this estimator has a model for. */
    public Map<String, List<String>> kinds() {
        Map<String, List<String>> out = new LinkedHashMap<>();
        for (Map.Entry<String, KindModel> e : models.entrySet()) {
            out.put(e.getKey(), List.of(e.getValue().features));
        }
        return out;
    }

    /** device.name of the estimator, or null. */
    public String deviceName() {
        Object n = device.get("name");
        return n == null ? null : n instanceof String ? (String) n : show(n);
    }

    /** Kinds whose depthwise layers (config groups &gt; 1, in_channels &lt;= groups) have a structural variant entry. */
    private static final Set<String> GROUPED_KINDS = Set.of("conv1d", "conv2d");

    /**
     * The estimator entry that costs a layer: "KIND:grouped" for a depthwise convolution (groups &gt; 1 and
     * in_channels absent or at most groups), else the kind itself, grouped convolutions of several channels per
     * group included (thor_sdk.layers.kinds.model_key).
     */
    public static String modelKey(String kind, Map<String, ?> config) {
        return modelKey(kind, config, null);
    }

    /**
     * The estimator entry that costs a layer at {@code batchSize} (null: none): "KIND:grouped" for a depthwise
     * convolution, else "KIND:gemm" for a dense convolution that PyTorch at one thread runs off oneDNN
     * ({@link #runsAsGemm}), else the kind itself (thor_sdk.layers.kinds.model_key).
     */
    public static String modelKey(String kind, Map<String, ?> config, Double batchSize) {
        if (kind != null && GROUPED_KINDS.contains(kind) && config != null) {
            Object g = config.get("groups");
            Object cin = config.get("in_channels");
            if (g instanceof Number && ((Number) g).doubleValue() > 1
                    && !(cin instanceof Number && ((Number) cin).doubleValue() > ((Number) g).doubleValue())) {
                return kind + ":grouped";
            }
            if (batchSize != null && runsAsGemm(kind, config, batchSize)) {
                return kind + ":gemm";
            }
        }
        return kind;
    }

    private static Double num(Map<String, ?> config, String key, Double fallback) {
        Object v = config.containsKey(key) ? config.get(key) : fallback;
        return v instanceof Number && !Double.isNaN(((Number) v).doubleValue()) ? ((Number) v).doubleValue() : null;
    }

    /**
     * Whether PyTorch's CPU backend at one thread runs this dense conv1d/conv2d by im2col and a matrix product
     * rather than oneDNN: a 1x1, stride-1, undilated conv below batch 16, or a batch-1 conv whose kernel is at most
     * 3 along a side over an input of at most 20480 numbers (thor_sdk.layers.kinds.runs_as_gemm).
     */
    public static boolean runsAsGemm(String kind, Map<String, ?> config, double batchSize) {
        if (kind == null || !GROUPED_KINDS.contains(kind) || config == null || Double.isNaN(batchSize)) {
            return false;
        }
        Double kh, kw, sh, sw, area;
        if (kind.equals("conv2d")) {
            kh = num(config, "kernel", null);
            sh = num(config, "stride", null);
            kw = num(config, "kernel_w", kh);
            sw = num(config, "stride_w", sh);
            Double h = num(config, "height", null);
            Double w = num(config, "width", null);
            area = h == null || w == null ? null : h * w;
        } else {
            kh = 1.0;
            sh = 1.0;
            kw = num(config, "kernel", null);
            sw = num(config, "stride", null);
            area = num(config, "length", null);
        }
        Double cin = num(config, "in_channels", null);
        Double dilation = num(config, "dilation", 1.0);
        Double groups = num(config, "groups", 1.0);
        if (kh == null || kw == null || sh == null || sw == null || area == null || cin == null || dilation == null
                || groups == null) {
            return false;
        }
        boolean pointwise = kh == 1 && kw == 1 && sh == 1 && sw == 1 && dilation == 1 && batchSize < GEMM_BATCH;
        boolean small = batchSize <= 1 && groups == 1 && !(kh > 3 && kw > 3)
                && batchSize * cin * area <= GEMM_BATCH1_NUMEL;
        return pointwise || small;
    }

    /** Batch size from which PyTorch runs 1x1 convs on oneDNN at one thread (thor_sdk.layers.kinds.GEMM_BATCH). */
    public static final double GEMM_BATCH = 16;
    /** The largest batch-1 input (numbers) that PyTorch keeps off oneDNN (thor_sdk.layers.kinds.GEMM_BATCH1_NUMEL). */
    public static final double GEMM_BATCH1_NUMEL = 20480;

    /**
     * The entry name costing a layer at a batch size: its structural variant where this estimator has one, else
     * its kind.
     */
    private String entryFor(String kind, Map<String, ?> config, Double batchSize) {
        String key = modelKey(kind, config, batchSize);
        return key != null && models.containsKey(key) ? key : kind;
    }

    private KindModel model(String kind) {
        KindModel m = kind == null ? null : models.get(kind);
        if (m == null) {
            throw new NotFoundError("estimator has no model for kind '" + kind + "'; probe it on this device");
        }
        return m;
    }

    /**
     * {mean, std} of one layer's cost in {@link #unit}. {@code features} maps the kind's feature names
     * but {@link #DERIVED} (config features, "batch_size", "role" as 1/0 or "input"/"hidden") to numbers;
     * {@code cost} gives the layer's training FLOPs and bytes, from which the features train_flops and
     * train_bytes are set (overriding any given).
     */
    public double[] predictLayer(String kind, Map<String, ?> features, Cost cost) {
        if (features == null) {
            throw new UsageError("features must be a map of feature name -> number");
        }
        Object b = features.get("batch_size");
        KindModel m = model(entryFor(kind, features, b instanceof Number ? ((Number) b).doubleValue() : null));
        String where = "layer of kind '" + kind + "'";
        List<String> given = m.given;
        for (String f : given) {
            if (!features.containsKey(f) && !m.defaults.containsKey(f)) {
                throw new UsageError(where + ": kind '" + kind + "' needs feature '" + f + "' (features: "
                        + String.join(", ", given) + ")");
            }
        }
        Object batch = features.get("batch_size");
        if (!(batch instanceof Number) || !(((Number) batch).doubleValue() >= 1)) {
            throw new UsageError(where + ": batch_size must be a number >= 1");
        }
        if (cost == null) {
            throw new UsageError(where + ": cost must be an object with " + String.join(", ", TERM_KEYS));
        }
        double[] fb = atBatch(cost.checked(where), ((Number) batch).doubleValue());
        Map<String, Object> values = new HashMap<>(features);
        values.put("train_flops", fb[0]);
        values.put("train_bytes", fb[1]);
        Row r = m.row(m.vector(values, where), fb[0], fb[1], fb[2], fb[3]);
        return moments(r.lmu, r.var);
    }

    /** (training FLOPs, bytes moved, launches, bytes moved once per step) of one step at {@code batch} from the
     *  checked terms; launches at least 1 for a file older than {@link #SHARED_LAUNCH_VERSION}. */
    private double[] atBatch(double[] t, double batch) {
        double launches = version < SHARED_LAUNCH_VERSION ? Math.max(1.0, t[4]) : t[4];
        return new double[] {t[0] * batch + t[1], t[2] * batch + t[3], launches, t[3]};
    }

    /** Per-layer and whole-model cost of one training step at {@code batchSize}. */
    public Estimate estimate(List<Layer> layers, int batchSize) {
        if (batchSize < 1 || batchSize > 1e9) {
            throw new UsageError("batch size must be a positive integer (at most 1e9), got " + batchSize);
        }
        if (layers == null) {
            throw new UsageError("layers must be a list of layers");
        }
        if (layers.size() > MAX_LAYERS) {
            throw new UsageError(layers.size() + " layers; at most " + MAX_LAYERS + " are estimated at once");
        }
        // entry (kind or structural variant) -> (raw features + [F, B] -> count), both in first-seen order
        Map<String, LinkedHashMap<List<Double>, int[]>> groups = new LinkedHashMap<>();
        List<List<Double>> keys = new ArrayList<>();
        List<String> entries = new ArrayList<>();
        for (int i = 0; i < layers.size(); i++) {
            Layer layer = layers.get(i);
            if (layer == null) {
                throw new UsageError("layer " + i + " must be a layer with a kind and a config");
            }
            if (layer.config == null) {
                throw new UsageError("layer " + i + " (" + layer.kind + "): config must be a map");
            }
            String entry = entryFor(layer.kind, layer.config, (double) batchSize);
            KindModel m = model(entry);
            Map<String, Object> values = new HashMap<>(layer.config);
            values.put("batch_size", (double) batchSize);
            if (m.hasRole) {
                String bad = "layer " + i + " (" + layer.kind + "): role must be 'input' or 'hidden', got '"
                        + layer.role + "'";
                if (layer.role == null) {
                    throw new UsageError(bad);
                }
                values.put("role", roleCode(layer.role, bad));
            }
            String where = "layer " + i + " (" + (layer.name != null ? layer.name : String.valueOf(i)) + ")";
            if (layer.cost == null) {
                throw new UsageError(where + ": no cost terms; this runtime needs each layer's \"cost\" ("
                        + String.join(", ", TERM_KEYS) + ") as `thor-sdk layers --json` writes it");
            }
            double[] fb = atBatch(layer.cost.checked(where), batchSize);
            if (!(layer.recompute >= 0.0 && layer.recompute <= 1.0)) {
                throw new UsageError(where + ": recompute must be a number in [0, 1], got " + layer.recompute);
            }
            values.put("train_flops", fb[0]);
            values.put("train_bytes", fb[1]);
            double[] raw = m.vector(values, where);
            List<Double> key = new ArrayList<>(raw.length + 5);
            for (double x : raw) {
                key.add(x);
            }
            key.add(fb[0]);
            key.add(fb[1]);
            key.add(fb[2]);
            key.add(fb[3]);
            key.add(1.0 + layer.recompute); // a recomputed forward: that share of the layer's step more
            groups.computeIfAbsent(entry, k -> new LinkedHashMap<>()).computeIfAbsent(key, k -> new int[1])[0]++;
            entries.add(entry);
            keys.add(key);
        }
        Map<String, Map<List<Double>, double[]>> results = new HashMap<>();
        double totalMean = 0.0;
        double[] kindVars = new double[groups.size()];
        int g = 0;
        for (Map.Entry<String, LinkedHashMap<List<Double>, int[]>> e : groups.entrySet()) {
            KindModel m = models.get(e.getKey());
            Map<List<Double>, double[]> res = new HashMap<>();
            List<Row> rows = new ArrayList<>();
            List<Integer> counts = new ArrayList<>();
            List<Double> means = new ArrayList<>();
            for (Map.Entry<List<Double>, int[]> ke : e.getValue().entrySet()) {
                List<Double> key = ke.getKey();
                int nd = key.size() - 5;
                double[] raw = new double[nd];
                for (int j = 0; j < nd; j++) {
                    raw[j] = key.get(j);
                }
                Row r = m.row(raw, key.get(nd), key.get(nd + 1), key.get(nd + 2), key.get(nd + 3));
                double[] ms = moments(r.lmu, r.var);
                double scale = key.get(nd + 4);
                ms = new double[] {ms[0] * scale, ms[1] * scale};
                int cnt = ke.getValue()[0];
                res.put(key, ms);
                rows.add(r);
                counts.add(cnt);
                means.add(ms[0]);
                totalMean += cnt * ms[0];
            }
            results.put(e.getKey(), res);
            kindVars[g++] = groupVar(m, rows, counts, means);
        }
        List<LayerEstimate> out = new ArrayList<>();
        // operator type (or the layer's own index when it names none) -> the added stds of its approx layers
        Map<Object, List<Double>> opExtra = new LinkedHashMap<>();
        for (int i = 0; i < layers.size(); i++) {
            double[] ms = results.get(entries.get(i)).get(keys.get(i));
            Layer layer = layers.get(i);
            double std = ms[1];
            String unread = layer.approx == null ? unreadFeature(layer, models.get(entries.get(i))) : null;
            String why = layer.approx != null ? layer.approx : unread;
            if (why != null) {
                double extra = APPROX_OP_REL_STD * ms[0];
                std = Math.sqrt(std * std + extra * extra);
                opExtra.computeIfAbsent(layer.op != null ? layer.op : (Object) i, k -> new ArrayList<>()).add(extra);
            }
            out.add(new LayerEstimate(layer, ms[0], std, why, unread != null));
        }
        double[] parts = Arrays.copyOf(kindVars, kindVars.length + opExtra.size());
        int q = kindVars.length;
        for (List<Double> extras : opExtra.values()) {
            double[] xs = new double[extras.size()];
            for (int j = 0; j < xs.length; j++) {
                xs[j] = extras.get(j);
            }
            double sum = fsum(xs);
            parts[q++] = sum * sum;
        }
        double layersVar = fsum(parts);
        double rel = wholeModelRelStd * totalMean;
        double whole = rel * rel;
        if (Double.isInfinite(totalMean) || Double.isNaN(totalMean) || Double.isInfinite(layersVar + whole)
                || Double.isNaN(layersVar + whole)) {
            throw new UsageError("the estimate is too large to represent (far outside what the estimator covers)");
        }
        return new Estimate(metric, unit, deviceName(), runtime, batchSize, totalMean,
                Math.sqrt(Math.max(layersVar + whole, 0.0)), Math.sqrt(Math.max(layersVar, 0.0)),
                Collections.unmodifiableList(out));
    }

    /**
     * Why {@code m}, fitted before one of the layer's kind's defaulted features existed, estimates the layer
     * approximately (the layer sets the feature to another value than its default); else null.
     */
    static String unreadFeature(Layer layer, KindModel m) {
        Map<String, Double> defaults = DEFAULT_FEATURES.get(layer.kind);
        if (defaults == null) {
            return null;
        }
        List<String> off = new ArrayList<>();
        for (Map.Entry<String, Double> d : new TreeMap<>(defaults).entrySet()) {
            Double v = layer.config.get(d.getKey());
            if (!m.index.containsKey(d.getKey()) && v != null && Double.isFinite(v) && !v.equals(d.getValue())) {
                off.add(d.getKey() + " " + show(v));
            }
        }
        if (off.isEmpty()) {
            return null;
        }
        return "the estimator's " + layer.kind + " model predates its feature(s) " + String.join(", ", off)
                + ": estimated as the same layer at the default (through its own FLOPs and bytes); refit the campaign "
                + "for its own cost";
    }

    /** Variance (the metric's unit squared) of the summed cost of all layers of one kind. */
    private static double groupVar(KindModel m, List<Row> rows, List<Integer> counts, List<Double> means) {
        double c = m.constant;
        int n = rows.size();
        double[] parts = new double[n * (n + 3) / 2];
        int p = 0;
        for (int a = 0; a < n; a++) {
            Row ra = rows.get(a);
            double ca = counts.get(a);
            double ma = means.get(a);
            double mm = ma * ma;
            parts[p++] = ca * mm * Math.expm1(ra.var);
            if (ca > 1) { // identical twins share the latent cost: constant - v.v, no white noise
                double[] vsq = new double[ra.v.length];
                for (int r = 0; r < vsq.length; r++) {
                    vsq[r] = ra.v[r] * ra.v[r];
                }
                double twin = c - fsum(vsq);
                parts[p++] = ca * (ca - 1) * mm * Math.expm1(Math.max(twin, 0.0));
            }
            for (int b = a + 1; b < n; b++) {
                Row rb = rows.get(b);
                double cov = c * matern52(dist(ra.u, rb.u)) - dot(ra.v, rb.v);
                parts[p++] = 2.0 * ca * counts.get(b) * ma * means.get(b) * Math.expm1(cov);
            }
        }
        return fsum(Arrays.copyOf(parts, p));
    }
}
