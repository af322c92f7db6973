package dev.thorsdk.runtime;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A thor-sdk estimator (format {@code thor-sdk/estimator}, version 1) for Java 17 / Android, JDK only.
 *
 * <p>Mirrors {@code thor_sdk/runtime/estimator.py} step by step; the math is in
 * {@code docs/estimator-format.md}. One Gaussian Process per layer kind predicts a layer's cost
 * (seconds or joules) from its features; {@link #estimate} sums a model's layers with the
 * covariance between layers of the same kind.
 *
 * <pre>{@code
 * Estimator est = Estimator.load(jsonText);
 * Estimator.Estimate e = est.estimate(layers, 32);
 * double seconds = e.totalMean, plusMinus = e.totalStd;
 * }</pre>
 */
public final class Estimator {
    public static final String FORMAT = "thor-sdk/estimator";
    public static final int VERSION = 1;
    private static final double SQRT5 = Math.sqrt(5.0);

    // ------------------------------------------------------------------ errors (the ThorError tree)
    /** Base of every error the runtime raises on purpose. */
    public static class ThorError extends RuntimeException {
        private static final long serialVersionUID = 1L;

        public ThorError(String message) {
            super(message);
        }
    }

    /** The estimator JSON is corrupt or breaks the format. */
    public static class FormatError extends ThorError {
        private static final long serialVersionUID = 1L;

        public FormatError(String message) {
            super(message);
        }
    }

    /** The estimator has no GP for a layer kind. */
    public static class NotFoundError extends ThorError {
        private static final long serialVersionUID = 1L;

        public NotFoundError(String message) {
            super(message);
        }
    }

    /** Bad input: a missing feature, a bad role, a batch size of 0. */
    public static class UsageError extends ThorError {
        private static final long serialVersionUID = 1L;

        public UsageError(String message) {
            super(message);
        }
    }

    // ------------------------------------------------------------------ inputs and outputs
    /** One layer of a model: what {@code thor_sdk.layers.layers_of(...).layers} lists. */
    public static final class Layer {
        public final String name;
        public final String kind;
        public final String role; // "input", "hidden" or "output"
        public final Map<String, Double> config;

        public Layer(String name, String kind, String role, Map<String, Double> config) {
            this.name = name;
            this.kind = kind;
            this.role = role;
            this.config = config;
        }
    }

    /** Mean and standard deviation of one layer's cost. */
    public static final class LayerEstimate {
        public final Layer layer;
        public final double mean;
        public final double std;

        LayerEstimate(Layer layer, double mean, double std) {
            this.layer = layer;
            this.mean = mean;
            this.std = std;
        }
    }

    /** Cost of one training step of a whole model. */
    public static final class Estimate {
        public final String metric;
        public final String unit;
        public final int batchSize;
        public final double totalMean;
        public final double totalStd;
        public final List<LayerEstimate> layers;

        Estimate(String metric, String unit, int batchSize, double totalMean, double totalStd,
                 List<LayerEstimate> layers) {
            this.metric = metric;
            this.unit = unit;
            this.batchSize = batchSize;
            this.totalMean = totalMean;
            this.totalStd = totalStd;
            this.layers = layers;
        }
    }

    // ------------------------------------------------------------------ validation helpers
    private static double num(Object v, String where) {
        if (!(v instanceof Double)) {
            throw new FormatError("estimator: " + where + " must be a number");
        }
        double d = (Double) v;
        if (Double.isNaN(d) || Double.isInfinite(d)) {
            throw new FormatError("estimator: " + where + " is not a finite number");
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
            throw new FormatError("estimator: " + where + " must be an array");
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
            throw new FormatError("estimator: " + where + " must be a string");
        }
        return (String) v;
    }

    // ------------------------------------------------------------------ one kind
    /** The exported GP of one layer kind, precomputed for prediction. */
    static final class KindModel {
        final String kind;
        final String[] features;
        final Map<String, Integer> index = new HashMap<>();
        final boolean hasRole;
        final boolean isLog;
        final double[] xMean, xScale, lengthScale, alpha;
        final double constant, noise, jitter, yMean, yScale, yVarScale;
        final double[][] trainU; // x_train / length_scale
        final double[][] lInv;   // rows of L^-1, row i has i + 1 entries
        final int n;

        KindModel(String kind, Object entry) {
            String w = "kinds['" + kind + "']";
            Map<String, Object> d = object(entry, w);
            Object f = field(d, "features", w);
            if (!(f instanceof List) || ((List<?>) f).isEmpty()) {
                throw new FormatError("estimator: " + w + ".features must be a non-empty list of distinct names");
            }
            List<?> fl = (List<?>) f;
            features = new String[fl.size()];
            for (int k = 0; k < features.length; k++) {
                features[k] = str(fl.get(k), w + ".features[" + k + "]");
                if (index.put(features[k], k) != null) {
                    throw new FormatError("estimator: " + w + ".features must be a non-empty list of distinct names");
                }
            }
            int nd = features.length;
            if (!"log1p".equals(field(d, "feature_transform", w))) {
                throw new FormatError("estimator: " + w + ".feature_transform must be 'log1p'");
            }
            Object tt = field(d, "target_transform", w);
            if (!"log".equals(tt) && !"linear".equals(tt)) {
                throw new FormatError("estimator: " + w + ".target_transform must be 'log' or 'linear'");
            }
            Map<String, Object> k = object(field(d, "kernel", w), w + ".kernel");
            if (num(field(k, "nu", w + ".kernel"), w + ".kernel.nu") != 2.5) {
                throw new FormatError("estimator: " + w + ".kernel.nu must be 2.5 (Matern 5/2)");
            }
            Object xt = field(d, "x_train", w);
            if (!(xt instanceof List)) {
                throw new FormatError("estimator: " + w + ".x_train must be an array");
            }
            List<?> xTrain = (List<?>) xt;
            n = xTrain.size();
            if (n < 1) {
                throw new FormatError("estimator: " + w + ".x_train is empty");
            }
            Object ns = field(d, "n_samples", w);
            if (!(ns instanceof Double) || (Double) ns != n) {
                throw new FormatError("estimator: " + w + ".n_samples must be the number of x_train rows (" + n + ")");
            }
            this.kind = kind;
            hasRole = index.containsKey("role");
            isLog = "log".equals(tt);
            xMean = nums(field(d, "x_mean", w), w + ".x_mean", nd, false);
            xScale = nums(field(d, "x_scale", w), w + ".x_scale", nd, true);
            lengthScale = nums(field(k, "length_scale", w + ".kernel"), w + ".kernel.length_scale", nd, true);
            constant = positive(field(k, "constant", w + ".kernel"), w + ".kernel.constant");
            noise = nonNegative(field(k, "noise_level", w + ".kernel"), w + ".kernel.noise_level");
            yMean = num(field(d, "y_mean", w), w + ".y_mean");
            yScale = positive(field(d, "y_scale", w), w + ".y_scale");
            yVarScale = yScale * yScale;
            trainU = new double[n][];
            for (int r = 0; r < n; r++) {
                double[] row = nums(xTrain.get(r), w + ".x_train[" + r + "]", nd, false);
                for (int j = 0; j < nd; j++) {
                    row[j] = row[j] / lengthScale[j];
                }
                trainU[r] = row;
            }
            alpha = nums(field(d, "alpha", w), w + ".alpha", n, false);
            jitter = nonNegative(field(d, "jitter", w), w + ".jitter");
            lInv = inverseL(cholesky());
        }

        /** Lower Cholesky factor of constant * Matern(train) + (noise + jitter) * I (full rows). */
        private double[][] cholesky() {
            double kdiag = constant + noise;
            kdiag += jitter;
            double tiny = 1e-13 * kdiag;
            double[][] L = new double[n][];
            for (int i = 0; i < n; i++) {
                L[i] = new double[i + 1];
                for (int j = 0; j < i; j++) {
                    double s = 0.0;
                    for (int m = 0; m < j; m++) {
                        s += L[i][m] * L[j][m];
                    }
                    L[i][j] = (constant * matern52(dist(trainU[i], trainU[j])) - s) / L[j][j];
                }
                double s = 0.0;
                for (int m = 0; m < i; m++) {
                    s += L[i][m] * L[i][m];
                }
                double dd = kdiag - s;
                if (!(dd > tiny)) {
                    throw new FormatError("estimator: kinds['" + kind + "']: the kernel matrix of x_train is not "
                            + "positive definite (corrupt kernel or x_train)");
                }
                L[i][i] = Math.sqrt(dd);
            }
            return L;
        }

        private static double[][] inverseL(double[][] L) {
            int n = L.length;
            double[][] inv = new double[n][];
            for (int i = 0; i < n; i++) {
                inv[i] = new double[i + 1];
                inv[i][i] = 1.0 / L[i][i];
                for (int j = 0; j < i; j++) {
                    double s = 0.0;
                    for (int m = j; m < i; m++) {
                        s += L[i][m] * inv[m][j];
                    }
                    inv[i][j] = -s / L[i][i];
                }
            }
            return inv;
        }

        /** Raw features -> standardised, length-scaled u. */
        double[] scaled(double[] raw) {
            double[] u = new double[raw.length];
            for (int j = 0; j < raw.length; j++) {
                u[j] = ((Math.log1p(raw[j]) - xMean[j]) / xScale[j]) / lengthScale[j];
            }
            return u;
        }

        /** Target-space mean, clipped variance (incl. noise), v = L^-1 k and u of one raw vector. */
        Row row(double[] raw) {
            double[] u = scaled(raw);
            double[] ks = new double[n];
            double mu = 0.0;
            for (int i = 0; i < n; i++) {
                ks[i] = constant * matern52(dist(u, trainU[i]));
                mu += ks[i] * alpha[i];
            }
            mu = yScale * mu + yMean;
            double[] v = new double[n];
            double vv = 0.0;
            for (int i = 0; i < n; i++) {
                double[] r = lInv[i];
                double s = 0.0;
                for (int j = 0; j <= i; j++) {
                    s += r[j] * ks[j];
                }
                v[i] = s;
                vv += s * s;
            }
            double var = constant + noise - vv;
            if (var < 0.0) {
                var = 0.0;
            }
            return new Row(mu, var * yVarScale, v, u);
        }

        /** Mean and std in original units of a target-space N(mu, var). */
        double[] moments(double mu, double var) {
            if (isLog) {
                double m = Math.exp(mu + var / 2.0);
                return new double[] {m, m * Math.sqrt(Math.expm1(var))};
            }
            return new double[] {mu, Math.sqrt(var)};
        }

        /** Raw feature vector from a map of feature names to numbers (role may be a String). */
        double[] vector(Map<String, ?> values, String where) {
            double[] out = new double[features.length];
            for (int j = 0; j < features.length; j++) {
                String f = features[j];
                Object x = values.get(f);
                if (x == null) {
                    throw new UsageError(where + ": kind '" + kind + "' needs feature '" + f + "' (features: "
                            + String.join(", ", features) + ")");
                }
                if (f.equals("role") && x instanceof String) {
                    x = roleCode((String) x, where);
                }
                if (!(x instanceof Number)) {
                    throw new UsageError(where + ": feature '" + f + "' must be a number");
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

    static final class Row {
        final double mu, var;
        final double[] v, u;

        Row(double mu, double var, double[] v, double[] u) {
            this.mu = mu;
            this.var = var;
            this.v = v;
            this.u = u;
        }
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

    private static Double roleCode(String role, String where) {
        if (role.equals("input")) {
            return 1.0;
        }
        if (role.equals("hidden")) {
            return 0.0;
        }
        throw new UsageError(where + ": role must be 'input' or 'hidden', got '" + role + "'");
    }

    // ------------------------------------------------------------------ the estimator
    public final String metric;
    public final String unit;
    public final Map<String, Object> device;
    private final Map<String, KindModel> models = new LinkedHashMap<>();

    private Estimator(Object parsed) {
        Map<String, Object> doc = object(parsed, "top level");
        Object fmt = doc.get("format");
        if (!FORMAT.equals(fmt)) {
            throw new FormatError("not a thor-sdk estimator: format is " + fmt + ", expected '" + FORMAT + "'");
        }
        Object version = doc.get("version");
        if (!(version instanceof Double) || (Double) version != VERSION) {
            throw new FormatError("unsupported estimator version " + version + "; this runtime reads version " + VERSION);
        }
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
        Map<String, Object> fb = object(field(doc, "flops_baseline", "top level"), "flops_baseline");
        num(field(fb, "unit_per_flop", "flops_baseline"), "flops_baseline.unit_per_flop");
        Map<String, Object> kinds = object(field(doc, "kinds", "top level"), "kinds");
        if (kinds.isEmpty()) {
            throw new FormatError("estimator: kinds is empty");
        }
        for (Map.Entry<String, Object> e : kinds.entrySet()) {
            models.put(e.getKey(), new KindModel(e.getKey(), e.getValue()));
        }
    }

    /** Parses and validates an estimator JSON text; {@link FormatError} on any problem. */
    public static Estimator load(String json) {
        return new Estimator(Json.parse(json));
    }

    /** Kind name -> its feature names, for every kind this estimator has a GP for. */
    public Map<String, List<String>> kinds() {
        Map<String, List<String>> out = new LinkedHashMap<>();
        for (Map.Entry<String, KindModel> e : models.entrySet()) {
            out.put(e.getKey(), List.of(e.getValue().features));
        }
        return out;
    }

    private KindModel model(String kind) {
        KindModel m = models.get(kind);
        if (m == null) {
            throw new NotFoundError("estimator has no GP for kind '" + kind + "'; probe it on this device");
        }
        return m;
    }

    /**
     * {mean, std} of one layer's cost in {@link #unit}. {@code features} maps the kind's feature names
     * (config features, "batch_size", "role" as 1/0 or "input"/"hidden") to numbers.
     */
    public double[] predictLayer(String kind, Map<String, ?> features) {
        KindModel m = model(kind);
        Row r = m.row(m.vector(features, "layer of kind '" + kind + "'"));
        return m.moments(r.mu, r.var);
    }

    /** Per-layer and whole-model cost of one training step at {@code batchSize}. */
    public Estimate estimate(List<Layer> layers, int batchSize) {
        if (batchSize < 1) {
            throw new UsageError("batch size must be a positive integer, got " + batchSize);
        }
        // kind -> (feature vector -> count), in first-seen order
        Map<String, LinkedHashMap<List<Double>, int[]>> groups = new LinkedHashMap<>();
        List<List<Double>> keys = new ArrayList<>();
        for (int i = 0; i < layers.size(); i++) {
            Layer layer = layers.get(i);
            KindModel m = model(layer.kind);
            Map<String, Object> values = new HashMap<>(layer.config);
            values.put("batch_size", (double) batchSize);
            if (m.hasRole) {
                if (!"input".equals(layer.role) && !"hidden".equals(layer.role)) {
                    throw new UsageError("layer " + i + " (" + layer.kind + "): role must be 'input' or 'hidden', got '"
                            + layer.role + "'");
                }
                values.put("role", roleCode(layer.role, "layer " + i));
            }
            double[] raw = m.vector(values, "layer " + i + " (" + layer.name + ")");
            List<Double> key = new ArrayList<>(raw.length);
            for (double x : raw) {
                key.add(x);
            }
            groups.computeIfAbsent(layer.kind, k -> new LinkedHashMap<>()).computeIfAbsent(key, k -> new int[1])[0]++;
            keys.add(key);
        }
        Map<String, Map<List<Double>, double[]>> results = new HashMap<>();
        double totalMean = 0.0;
        double totalVar = 0.0;
        for (Map.Entry<String, LinkedHashMap<List<Double>, int[]>> g : groups.entrySet()) {
            KindModel m = models.get(g.getKey());
            Map<List<Double>, double[]> res = new HashMap<>();
            List<Row> rows = new ArrayList<>();
            List<Integer> counts = new ArrayList<>();
            List<Double> means = new ArrayList<>();
            for (Map.Entry<List<Double>, int[]> e : g.getValue().entrySet()) {
                double[] raw = new double[e.getKey().size()];
                for (int j = 0; j < raw.length; j++) {
                    raw[j] = e.getKey().get(j);
                }
                Row r = m.row(raw);
                double[] ms = m.moments(r.mu, r.var);
                res.put(e.getKey(), ms);
                rows.add(r);
                counts.add(e.getValue()[0]);
                means.add(ms[0]);
                totalMean += e.getValue()[0] * ms[0];
            }
            results.put(g.getKey(), res);
            totalVar += groupVar(m, rows, counts, means);
        }
        List<LayerEstimate> out = new ArrayList<>();
        for (int i = 0; i < layers.size(); i++) {
            double[] ms = results.get(layers.get(i).kind).get(keys.get(i));
            out.add(new LayerEstimate(layers.get(i), ms[0], ms[1]));
        }
        return new Estimate(metric, unit, batchSize, totalMean, totalVar > 0.0 ? Math.sqrt(totalVar) : 0.0,
                Collections.unmodifiableList(out));
    }

    /** Variance (original units) of the summed cost of all layers of one kind. */
    private static double groupVar(KindModel m, List<Row> rows, List<Integer> counts, List<Double> means) {
        double c = m.constant;
        double ys2 = m.yVarScale;
        double total = 0.0;
        int n = rows.size();
        for (int a = 0; a < n; a++) {
            Row ra = rows.get(a);
            double ca = counts.get(a);
            double ma = means.get(a);
            // the layer with itself (includes the white noise) and with its (ca - 1) identical twins
            double twin = ca > 1 ? ys2 * (c - dot(ra.v, ra.v)) : 0.0;
            if (m.isLog) {
                total += ca * ma * ma * Math.expm1(ra.var);
                if (ca > 1) {
                    total += ca * (ca - 1) * ma * ma * Math.expm1(twin);
                }
            } else {
                total += ca * ra.var;
                if (ca > 1) {
                    total += ca * (ca - 1) * twin;
                }
            }
            for (int b = a + 1; b < n; b++) {
                Row rb = rows.get(b);
                double cov = ys2 * (c * matern52(dist(ra.u, rb.u)) - dot(ra.v, rb.v));
                if (m.isLog) {
                    total += 2.0 * ca * counts.get(b) * ma * means.get(b) * Math.expm1(cov);
                } else {
                    total += 2.0 * ca * counts.get(b) * cov;
                }
            }
        }
        return total;
    }
}
