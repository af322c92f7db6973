// Owns the Swift training-run estimate: one step, one epoch and one run of a layer list, each with an upper bound.
//
// Mirrors android_harness/runtime/.../TrainingRun.java line by line, which mirrors
// thor_sdk/runtime/training.py; the math is in docs/training-runs.md. With B the batch size and S the
// samples per epoch:
// - an epoch is floor(S / B) full steps plus, when S mod B = r > 0, one last step at batch r:
//   mean_epoch = n_full * mean(B) + mean(r); a run is `epochs` epochs;
// - the estimator's std is model error, made at every step alike, so stds add linearly:
//   std_epoch = n_full * std(B) + std(r), std_run = epochs * std_epoch;
// - upper = mean + z * std, z the standard normal quantile of the confidence (Wichura's AS 241, PPND16,
//   the algorithm of Python's statistics.NormalDist().inv_cdf), confidence in [0.5, 0.9999].
// Bad inputs are ThorError.usage; a layer of a kind the estimator lacks is ThorError.notFound.
//
// UNTESTED HERE: the machine this SDK is developed on has no Swift toolchain. Tests/ThorRuntimeTests/
// TrainingRunTests.swift checks it against tests/vectors/training_runs.json (`swift test` on macOS).
//
//   let est = try Estimator.load(json: estimatorText)
//   let layers = try LayerList.parse(json: layerListText).layers
//   let r = try TrainingRun.estimate(est, layers: layers, batchSize: 16, samples: 5000, epochs: 3, confidence: 0.95)
//   print(r.run.mean, r.run.upper, est.unit, r.steps)   // 3 x 313 steps

import Foundation

/// Mean, standard deviation and upper bound (mean + z * std) of one cost, in the estimator's unit.
public struct Bounded {
    public let mean: Double
    public let std: Double
    public let upper: Double

    init(mean: Double, std: Double, z: Double) {
        self.mean = mean
        self.std = std
        self.upper = mean + z * std
    }
}

/// Cost of one training step, one epoch and one run of a layer list at a batch size, each with an upper
/// bound at a one-sided confidence, from an `Estimator` (its device, runtime and metric).
public struct TrainingRun {
    /// Most training samples per epoch accepted.
    public static let maxSamples = 1_000_000_000_000
    /// Most epochs accepted.
    public static let maxEpochs = 1_000_000
    /// Largest batch size accepted (as `Estimator.estimate`).
    public static let maxBatchSize = 1_000_000_000
    /// Lowest and highest one-sided confidence accepted.
    public static let minConfidence = 0.5
    public static let maxConfidence = 0.9999
    /// The confidence of `estimate(_:layers:batchSize:)`.
    public static let defaultConfidence = 0.95

    /// "time" or "energy", and its unit ("s" or "J"), from the estimator.
    public let metric: String
    public let unit: String
    /// device.name of the estimator (nil if it has none) and its runtime.
    public let device: String?
    public let runtime: String
    public let batchSize: Int
    /// Training samples per epoch (the batch size when not given).
    public let samples: Int
    public let epochs: Int
    /// Steps per epoch, the last partial one counted.
    public let stepsPerEpoch: Int
    /// Batch size of the last partial step of an epoch; 0 when the samples divide evenly.
    public let lastBatch: Int
    /// Steps of the whole run (epochs * stepsPerEpoch).
    public let steps: Int
    public let confidence: Double
    /// The standard normal quantile of `confidence`.
    public let z: Double
    /// One step at `batchSize`, one epoch, the whole run.
    public let step: Bounded
    public let epoch: Bounded
    public let run: Bounded

    private static func checkedInt(_ v: Int, _ name: String, _ lo: Int, _ hi: Int) throws {
        if v < lo || v > hi {
            throw ThorError.usage("\(name) must be an integer in [\(lo), \(hi)], got \(v)")
        }
    }

    /// The standard normal quantile z of a one-sided `confidence` in [0.5, 0.9999]
    /// (0.95 gives 1.6448536269514722); ThorError.usage outside that range.
    public static func quantile(_ confidence: Double) throws -> Double {
        guard confidence >= minConfidence && confidence <= maxConfidence else {
            throw ThorError.usage(
                "confidence must be a number in [\(minConfidence), \(maxConfidence)], got \(confidence)")
        }
        return try ppnd16(confidence)
    }

    /// The full steps of `batchSize` in `samples` and the size of the last partial one (0: none).
    public static func stepsPerEpoch(samples: Int, batchSize: Int) throws -> (fullSteps: Int, lastBatch: Int) {
        try checkedInt(samples, "samples", 1, maxSamples)
        try checkedInt(batchSize, "batch size", 1, maxBatchSize)
        return (samples / batchSize, samples % batchSize)
    }

    /// One step, and an epoch of one batch, at `batchSize`, one epoch, bound at 95 %.
    public static func estimate(_ estimator: Estimator, layers: [Layer], batchSize: Int) throws -> TrainingRun {
        try checkedInt(batchSize, "batch size", 1, maxBatchSize)
        return try estimate(estimator, layers: layers, batchSize: batchSize, samples: batchSize, epochs: 1,
                            confidence: defaultConfidence)
    }

    /// Cost of one step, one epoch of `samples` training samples and a run of `epochs` epochs of training
    /// `layers` at `batchSize` on the estimator's device, runtime and metric, each with its upper bound at
    /// `confidence`. Inputs are checked in the Python runtime's order: batch size in [1, 1e9], samples in
    /// [1, 1e12], epochs in [1, 1e6], confidence in [0.5, 0.9999] (ThorError.usage), then the layers
    /// (`Estimator.estimate`'s errors).
    public static func estimate(_ estimator: Estimator, layers: [Layer], batchSize: Int, samples: Int, epochs: Int,
                                confidence: Double) throws -> TrainingRun {
        try checkedInt(batchSize, "batch size", 1, maxBatchSize)
        let split = try stepsPerEpoch(samples: samples, batchSize: batchSize)
        let full = split.fullSteps
        let rest = split.lastBatch
        try checkedInt(epochs, "epochs", 1, maxEpochs)
        let z = try quantile(confidence)
        let s = try estimator.estimate(layers: layers, batchSize: batchSize)
        let m = s.totalMean
        let sd = s.totalStd
        var em = Double(full) * m
        var es = Double(full) * sd
        if rest > 0 {
            let last = try estimator.estimate(layers: layers, batchSize: rest)
            em = em + last.totalMean
            es = es + last.totalStd
        }
        let rm = Double(epochs) * em
        let rs = Double(epochs) * es
        for x in [em, es, rm, rs] where !x.isFinite {
            throw ThorError.usage("the run's estimate is too large to represent")
        }
        let perEpoch = full + (rest > 0 ? 1 : 0)
        return TrainingRun(metric: s.metric, unit: s.unit, device: s.device, runtime: s.runtime,
                           batchSize: s.batchSize, samples: samples, epochs: epochs, stepsPerEpoch: perEpoch,
                           lastBatch: rest, steps: epochs * perEpoch, confidence: confidence, z: z,
                           step: Bounded(mean: m, std: sd, z: z), epoch: Bounded(mean: em, std: es, z: z),
                           run: Bounded(mean: rm, std: rs, z: z))
    }

    // ------------------------------------------------------------------ the normal quantile (AS 241)
    // Wichura, M. J. (1988), "Algorithm AS 241: The percentage points of the normal distribution",
    // Applied Statistics 37(3), 477-484: PPND16, rational approximations accurate to about 1e-16.
    // Central region |p - 0.5| <= 0.425: z = q A(r) / B(r), r = 0.180625 - q^2 (q = p - 0.5).
    static let a: [Double] = [3.3871328727963666080e0, 1.3314166789178437745e+2, 1.9715909503065514427e+3,
                              1.3731693765509461125e+4, 4.5921953931549871457e+4, 6.7265770927008700853e+4,
                              3.3430575583588128105e+4, 2.5090809287301226727e+3]
    static let b: [Double] = [1.0, 4.2313330701600911252e+1, 6.8718700749205790830e+2, 5.3941960214247511077e+3,
                              2.1213794301586595867e+4, 3.9307895800092710610e+4, 2.8729085735721942674e+4,
                              5.2264952788528545610e+3]
    // Intermediate tail, r = sqrt(-ln(min(p, 1 - p))) <= 5: z = C(r - 1.6) / D(r - 1.6).
    static let c: [Double] = [1.42343711074968357734e0, 4.63033784615654529590e0, 5.76949722146069140550e0,
                              3.64784832476320460504e0, 1.27045825245236838258e0, 2.41780725177450611770e-1,
                              2.27238449892691845833e-2, 7.74545014278341407640e-4]
    static let d: [Double] = [1.0, 2.05319162663775882187e0, 1.67638483018380384940e0, 6.89767334985100004550e-1,
                              1.48103976427480074590e-1, 1.51986665636164571966e-2, 5.47593808499534494600e-4,
                              1.05075007164441684324e-9]
    // Far tail, r > 5: z = E(r - 5) / F(r - 5).
    static let e: [Double] = [6.65790464350110377720e0, 5.46378491116411436990e0, 1.78482653991729133580e0,
                              2.96560571828504891230e-1, 2.65321895265761230930e-2, 1.24266094738807843860e-3,
                              2.71155556874348757815e-5, 2.01033439929228813265e-7]
    static let f: [Double] = [1.0, 5.99832206555887937690e-1, 1.36929880922735805310e-1, 1.48753612908506148525e-2,
                              7.86869131145613259100e-4, 1.84631831751005468180e-5, 1.42151175831644588870e-7,
                              2.04426310338993978564e-15]
    static let split1 = 0.425
    static let split2 = 5.0
    static let const1 = 0.180625
    static let const2 = 1.6

    /// c[0] + c[1] x + ... + c[7] x^7 by Horner's rule, highest power first (as the Java runtime).
    static func poly(_ coefficients: [Double], _ x: Double) -> Double {
        var s = coefficients[coefficients.count - 1]
        for k in stride(from: coefficients.count - 2, through: 0, by: -1) {
            s = s * x + coefficients[k]
        }
        return s
    }

    /// The standard normal quantile of any p in (0, 1) by AS 241 (PPND16); ThorError.usage outside (0, 1).
    static func ppnd16(_ p: Double) throws -> Double {
        guard p > 0.0 && p < 1.0 else {
            throw ThorError.usage("p must be a probability in (0, 1), got \(p)")
        }
        let q = p - 0.5
        if abs(q) <= split1 {
            let r = const1 - q * q
            return q * poly(a, r) / poly(b, r)
        }
        var r = q < 0.0 ? p : 1.0 - p
        r = (-log(r)).squareRoot()
        let z: Double
        if r <= split2 {
            r -= const2
            z = poly(c, r) / poly(d, r)
        } else {
            r -= split2
            z = poly(e, r) / poly(f, r)
        }
        return q < 0.0 ? -z : z
    }
}
