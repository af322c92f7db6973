// Owns the Java training-run estimate: one step, one epoch and one run of a layer list, each with an upper bound.
package dev.thorsdk.runtime;

import java.util.List;

/**
 * Cost of one training step, one epoch and one run of a layer list at a batch size, each with an upper
 * bound at a one-sided confidence, from an {@link Estimator} (its device, runtime and metric: seconds or
 * joules). JDK only.
 *
 * <p>Mirrors {@code thor_sdk/runtime/training.py} (the math is in {@code docs/training-runs.md}), with
 * {@code B} the batch size and {@code S} the samples per epoch:
 * <ul>
 *   <li>an epoch is {@code floor(S / B)} full steps plus, when {@code S mod B = r > 0}, one last step at
 *       batch {@code r}: {@code mean_epoch = n_full * mean(B) + mean(r)}; a run is {@code epochs} epochs;</li>
 *   <li>the estimator's std is model error, made at every step alike, so stds add linearly:
 *       {@code std_epoch = n_full * std(B) + std(r)}, {@code std_run = epochs * std_epoch};</li>
 *   <li>{@code upper = mean + z * std}, {@code z} the standard normal quantile of the confidence
 *       (Wichura's algorithm AS 241, PPND16: the same algorithm as Python's
 *       {@code statistics.NormalDist().inv_cdf}), confidence in [0.5, 0.9999].</li>
 * </ul>
 * Bad inputs are {@link Estimator.UsageError}s; a layer of a kind the estimator lacks is an
 * {@link Estimator.NotFoundError}.
 *
 * <pre>{@code
 * Estimator est = Estimator.load(estimatorJson);
 * List<Estimator.Layer> layers = LayerList.parse(layerListJson).layers;
 * TrainingRun r = TrainingRun.estimate(est, layers, 16, 5000, 3, 0.95);
 * double joules = r.run.mean, bound = r.run.upper;   // r.steps = 3 x 313 steps, in est.unit
 * }</pre>
 */
public final class TrainingRun {
    /** Most training samples per epoch accepted. */
    public static final long MAX_SAMPLES = 1_000_000_000_000L;
    /** Most epochs accepted. */
    public static final int MAX_EPOCHS = 1_000_000;
    /** Largest batch size accepted (as {@link Estimator#estimate}). */
    public static final int MAX_BATCH_SIZE = 1_000_000_000;
    /** Lowest and highest one-sided confidence accepted. */
    public static final double MIN_CONFIDENCE = 0.5;
    public static final double MAX_CONFIDENCE = 0.9999;
    /** The confidence of {@link #estimate(Estimator, List, int)}. */
    public static final double DEFAULT_CONFIDENCE = 0.95;

    /** Mean, standard deviation and upper bound ({@code mean + z * std}) of one cost, in the estimator's unit. */
    public static final class Bounded {
        public final double mean;
        public final double std;
        public final double upper;

        Bounded(double mean, double std, double z) {
            this.mean = mean;
            this.std = std;
            this.upper = mean + z * std;
        }
    }

    /** "time" or "energy", and its unit ("s" or "J"), from the estimator. */
    public final String metric;
    public final String unit;
    /** device.name of the estimator (null if it has none) and its runtime. */
    public final String device;
    public final String runtime;
    public final int batchSize;
    /** Training samples per epoch (the batch size when not given). */
    public final long samples;
    public final int epochs;
    /** Steps per epoch, the last partial one counted. */
    public final long stepsPerEpoch;
    /** Batch size of the last partial step of an epoch; 0 when the samples divide evenly. */
    public final long lastBatch;
    /** Steps of the whole run ({@code epochs * stepsPerEpoch}). */
    public final long steps;
    public final double confidence;
    /** The standard normal quantile of {@link #confidence}. */
    public final double z;
    /** One step at {@link #batchSize}, one epoch, the whole run. */
    public final Bounded step;
    public final Bounded epoch;
    public final Bounded run;

    private TrainingRun(Estimator.Estimate s, long samples, int epochs, long full, long rest, double confidence,
                        double z, Bounded step, Bounded epoch, Bounded run) {
        this.metric = s.metric;
        this.unit = s.unit;
        this.device = s.device;
        this.runtime = s.runtime;
        this.batchSize = s.batchSize;
        this.samples = samples;
        this.epochs = epochs;
        this.stepsPerEpoch = full + (rest > 0 ? 1 : 0);
        this.lastBatch = rest;
        this.steps = epochs * this.stepsPerEpoch;
        this.confidence = confidence;
        this.z = z;
        this.step = step;
        this.epoch = epoch;
        this.run = run;
    }

    private static long checkedInt(long v, String name, long lo, long hi) {
        if (v < lo || v > hi) {
            throw new Estimator.UsageError(name + " must be an integer in [" + lo + ", " + hi + "], got " + v);
        }
        return v;
    }

    /**
     * The standard normal quantile {@code z} of a one-sided {@code confidence} in [0.5, 0.9999]
     * (0.95 gives 1.6448536269514722); {@link Estimator.UsageError} outside that range.
     */
    public static double quantile(double confidence) {
        if (!(confidence >= MIN_CONFIDENCE && confidence <= MAX_CONFIDENCE)) {
            throw new Estimator.UsageError("confidence must be a number in [" + MIN_CONFIDENCE + ", " + MAX_CONFIDENCE
                    + "], got " + confidence);
        }
        return ppnd16(confidence);
    }

    /**
     * {@code {fullSteps, lastBatch}}: the full steps of {@code batchSize} in {@code samples} and the size
     * of the last partial one (0: none).
     */
    public static long[] stepsPerEpoch(long samples, int batchSize) {
        checkedInt(samples, "samples", 1, MAX_SAMPLES);
        checkedInt(batchSize, "batch size", 1, MAX_BATCH_SIZE);
        return new long[] {samples / batchSize, samples % batchSize};
    }

    /** One step, and an epoch of one batch, at {@code batchSize}, one epoch, bound at 95 %. */
    public static TrainingRun estimate(Estimator estimator, List<Estimator.Layer> layers, int batchSize) {
        checkedInt(batchSize, "batch size", 1, MAX_BATCH_SIZE);
        return estimate(estimator, layers, batchSize, batchSize, 1, DEFAULT_CONFIDENCE);
    }

    /**
     * Cost of one step, one epoch of {@code samples} training samples and a run of {@code epochs} epochs
     * of training {@code layers} at {@code batchSize} on the estimator's device, runtime and metric, each
     * with its upper bound at {@code confidence}. Inputs are checked in the Python runtime's order: batch
     * size in [1, 1e9], samples in [1, 1e12], epochs in [1, 1e6], confidence in [0.5, 0.9999]
     * ({@link Estimator.UsageError}), then the layers ({@link Estimator#estimate}'s errors).
     */
    public static TrainingRun estimate(Estimator estimator, List<Estimator.Layer> layers, int batchSize,
                                       long samples, int epochs, double confidence) {
        checkedInt(batchSize, "batch size", 1, MAX_BATCH_SIZE);
        long[] split = stepsPerEpoch(samples, batchSize);
        long full = split[0];
        long rest = split[1];
        checkedInt(epochs, "epochs", 1, MAX_EPOCHS);
        double z = quantile(confidence);
        if (estimator == null) {
            throw new Estimator.UsageError("estimator must be a loaded Estimator");
        }
        Estimator.Estimate s = estimator.estimate(layers, batchSize);
        double m = s.totalMean;
        double sd = s.totalStd;
        double em = (double) full * m;
        double es = (double) full * sd;
        if (rest > 0) {
            Estimator.Estimate last = estimator.estimate(layers, (int) rest);
            em = em + last.totalMean;
            es = es + last.totalStd;
        }
        double rm = (double) epochs * em;
        double rs = (double) epochs * es;
        for (double x : new double[] {em, es, rm, rs}) {
            if (Double.isNaN(x) || Double.isInfinite(x)) {
                throw new Estimator.UsageError("the run's estimate is too large to represent");
            }
        }
        return new TrainingRun(s, samples, epochs, full, rest, confidence, z, new Bounded(m, sd, z),
                new Bounded(em, es, z), new Bounded(rm, rs, z));
    }

    // ------------------------------------------------------------------ the normal quantile (AS 241)
    // Wichura, M. J. (1988), "Algorithm AS 241: The percentage points of the normal distribution",
    // Applied Statistics 37(3), 477-484: PPND16, rational approximations accurate to about 1e-16.
    // Central region |p - 0.5| <= 0.425: z = q A(r) / B(r), r = 0.180625 - q^2 (q = p - 0.5).
    private static final double[] A = {3.3871328727963666080e0, 1.3314166789178437745e+2,
        1.9715909503065514427e+3, 1.3731693765509461125e+4, 4.5921953931549871457e+4, 6.7265770927008700853e+4,
        3.3430575583588128105e+4, 2.5090809287301226727e+3};
    private static final double[] B = {1.0, 4.2313330701600911252e+1, 6.8718700749205790830e+2,
        5.3941960214247511077e+3, 2.1213794301586595867e+4, 3.9307895800092710610e+4, 2.8729085735721942674e+4,
        5.2264952788528545610e+3};
    // Intermediate tail, r = sqrt(-ln(min(p, 1 - p))) <= 5: z = C(r - 1.6) / D(r - 1.6).
    private static final double[] C = {1.42343711074968357734e0, 4.63033784615654529590e0,
        5.76949722146069140550e0, 3.64784832476320460504e0, 1.27045825245236838258e0, 2.41780725177450611770e-1,
        2.27238449892691845833e-2, 7.74545014278341407640e-4};
    private static final double[] D = {1.0, 2.05319162663775882187e0, 1.67638483018380384940e0,
        6.89767334985100004550e-1, 1.48103976427480074590e-1, 1.51986665636164571966e-2,
        5.47593808499534494600e-4, 1.05075007164441684324e-9};
    // Far tail, r > 5: z = E(r - 5) / F(r - 5).
    private static final double[] E = {6.65790464350110377720e0, 5.46378491116411436990e0,
        1.78482653991729133580e0, 2.96560571828504891230e-1, 2.65321895265761230930e-2, 1.24266094738807843860e-3,
        2.71155556874348757815e-5, 2.01033439929228813265e-7};
    private static final double[] F = {1.0, 5.99832206555887937690e-1, 1.36929880922735805310e-1,
        1.48753612908506148525e-2, 7.86869131145613259100e-4, 1.84631831751005468180e-5,
        1.42151175831644588870e-7, 2.04426310338993978564e-15};
    private static final double SPLIT1 = 0.425;
    private static final double SPLIT2 = 5.0;
    private static final double CONST1 = 0.180625;
    private static final double CONST2 = 1.6;

    /** {@code c[0] + c[1] x + ... + c[7] x^7} by Horner's rule, highest power first. */
    private static double poly(double[] c, double x) {
        double s = c[c.length - 1];
        for (int k = c.length - 2; k >= 0; k--) {
            s = s * x + c[k];
        }
        return s;
    }

    /**
     * The standard normal quantile of any {@code p} in (0, 1) by AS 241 (PPND16);
     * {@link Estimator.UsageError} outside (0, 1).
     */
    static double ppnd16(double p) {
        if (!(p > 0.0 && p < 1.0)) {
            throw new Estimator.UsageError("p must be a probability in (0, 1), got " + p);
        }
        double q = p - 0.5;
        if (Math.abs(q) <= SPLIT1) {
            double r = CONST1 - q * q;
            return q * poly(A, r) / poly(B, r);
        }
        double r = q < 0.0 ? p : 1.0 - p;
        r = Math.sqrt(-StrictMath.log(r));
        double z;
        if (r <= SPLIT2) {
            r -= CONST2;
            z = poly(C, r) / poly(D, r);
        } else {
            r -= SPLIT2;
            z = poly(E, r) / poly(F, r);
        }
        return q < 0.0 ? -z : z;
    }
}
