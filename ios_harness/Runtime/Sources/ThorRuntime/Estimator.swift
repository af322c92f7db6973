// Owns the Swift estimator runtime (format thor-sdk/estimator version 5, 4, 3 or 2): loading, per-layer and whole-model cost.
//
// Reads an estimator JSON (format "thor-sdk/estimator", version 5, 4, 3 or 2) and predicts per-layer and
// whole-model training costs (Swift 5.7+, Foundation only). Per layer kind: a non-negative mean
// function of the layer's training FLOPs F and bytes B (m = overhead L + per_flop F + per_byte B, or with
// per_step_byte ... + per_byte (B - S) + per_step_byte S, S the bytes moved once per step) times
// a sparse GP on the log residual whose factors the file carries (loading is parsing). It mirrors
// android_harness/runtime/.../Estimator.java step by step, which mirrors thor_sdk/runtime/estimator.py;
// the math is in docs/estimator-format.md. Like the Java runtime it does not compute FLOPs and bytes
// from a layer's config: every layer carries its `Cost` terms (`thor-sdk layers --json` writes them).
//
// UNTESTED HERE: the machine this SDK is developed on has no Swift toolchain. Tests/ThorRuntimeTests/
// EstimatorTests.swift checks it against the shared vectors in tests/vectors: `cd ios_harness/Runtime &&
// swift test` (macOS) or add both files to the Xcode project.
//
//   let est = try Estimator.load(json: text)
//   let e = try est.estimate(layers: layers, batchSize: 32)
//   print(e.totalMean, e.totalStd, est.unit)

import Foundation

public enum ThorError: Error, CustomStringConvertible, Equatable {
    /// The estimator JSON is corrupt or breaks the format.
    case format(String)
    /// The estimator has no model for a layer kind.
    case notFound(String)
    /// Bad input: a missing feature or cost, a bad role, a batch size of 0.
    case usage(String)
    /// A usage error of `PowerTable.select`: no (batch size, frequency) in the table stays under the
    /// power cap; the lowest peak power in the table is the smallest cap that would work.
    case infeasibleCap(powerCapW: Double, lowestFeasiblePowerW: Double)

    public var description: String {
        switch self {
        case .format(let m), .notFound(let m), .usage(let m): return m
        case .infeasibleCap(let cap, let lowest):
            return "power cap \(cap) W is infeasible: the lowest peak power in the table is "
                + String(format: "%.3f", lowest) + " W (give a cap of at least that)"
        }
    }
}

let termKeys = ["flops_per_sample", "flops_fixed", "bytes_per_sample", "bytes_fixed"]

/// A layer's cost terms, affine in the batch size b: training FLOPs F = flopsPerSample * b + flopsFixed,
/// bytes moved B = bytesPerSample * b + bytesFixed (the "cost" object of `thor-sdk layers --json`), and
/// launches L (time steps x layers of a recurrent layer, a quarter for a forward-only convolution or dense layer,
/// 1 otherwise; 1 when absent). Each term must be finite and >= 0 (launches > 0); that is checked where the layer
/// is predicted.
public struct Cost {
    public let flopsPerSample: Double
    public let flopsFixed: Double
    public let bytesPerSample: Double
    public let bytesFixed: Double
    public let launches: Double

    public init(flopsPerSample: Double, flopsFixed: Double, bytesPerSample: Double, bytesFixed: Double,
                launches: Double = 1.0) {
        self.flopsPerSample = flopsPerSample
        self.flopsFixed = flopsFixed
        self.bytesPerSample = bytesPerSample
        self.bytesFixed = bytesFixed
        self.launches = launches
    }

    /// From a parsed "cost" object; ThorError.usage if a term is missing or not a number (negative or
    /// infinite terms are refused where the layer is predicted).
    public init(json: [String: Any]) throws {
        var t: [Double] = []
        for key in termKeys {
            guard let n = json[key] as? NSNumber, !isBool(n) else {
                throw ThorError.usage("cost.\(key) must be a finite number >= 0, got \(json[key] ?? "nil")")
            }
            t.append(n.doubleValue)
        }
        var launches = 1.0
        if let v = json["launches"] {
            guard let n = v as? NSNumber, !isBool(n) else {
                throw ThorError.usage("cost.launches must be a finite number > 0, got \(v)")
            }
            launches = n.doubleValue
        }
        self.init(flopsPerSample: t[0], flopsFixed: t[1], bytesPerSample: t[2], bytesFixed: t[3],
                  launches: launches)
    }

    func checked(_ w: String) throws -> [Double] {
        let t = [flopsPerSample, flopsFixed, bytesPerSample, bytesFixed]
        for (j, x) in t.enumerated() where !(x >= 0.0) || x.isInfinite {
            throw ThorError.usage("\(w): cost.\(termKeys[j]) must be a finite number >= 0, got \(x)")
        }
        if !(launches > 0.0) || launches.isInfinite {
            throw ThorError.usage("\(w): cost.launches must be a finite number > 0, got \(launches)")
        }
        return t + [launches]
    }
}

/// One layer of a model, as `thor-sdk layers --json` lists it (name, kind, role, config, cost, and
/// optionally the operator it came from and why it is approximated).
public struct Layer {
    public let name: String
    public let kind: String
    public let role: String  // "input", "hidden" or "output"
    public let config: [String: Double]
    public let cost: Cost?  // required by this runtime
    /// The operator the layer came from (`MultiheadAttention`, `x @ y`), or nil.
    public let op: String?
    /// Why the layer is approximated (a stand-in for an operator without a kind), or nil.
    public let approx: String?
    /// The share of its training step run again in backward (its forward, recomputed under torch.utils.checkpoint),
    /// in [0, 1]; 0 when absent: its mean and std are (1 + recompute) times its kind's.
    public let recompute: Double

    public init(name: String, kind: String, role: String, config: [String: Double], cost: Cost?,
                op: String? = nil, approx: String? = nil, recompute: Double = 0.0) {
        self.name = name
        self.kind = kind
        self.role = role
        self.config = config
        self.cost = cost
        self.op = op
        self.approx = approx
        self.recompute = recompute
    }
}

public struct LayerEstimate {
    public let layer: Layer
    public let mean: Double
    public let std: Double
    /// Why the layer is estimated approximately (its own `approx`, or a feature its kind's model predates), or nil.
    public let approx: String?
    /// Whether `approx` is a feature its kind's model predates (a dilated conv, an estimator fitted before dilation
    /// was a feature): refit the campaign for its own cost.
    public let unreadFeature: Bool
}

/// Cost of one training step of a whole model. `totalStd` includes the whole-model term
/// (wholeModelRelStd * totalMean)^2; `layersTotalStd` is the layers' own uncertainty.
public struct Estimate {
    public let metric: String
    public let unit: String
    public let device: String?  // device.name of the estimator
    public let runtime: String
    public let batchSize: Int
    public let totalMean: Double
    public let totalStd: Double
    public let layersTotalMean: Double
    public let layersTotalStd: Double
    public let layers: [LayerEstimate]
    /// The device level the estimate was put at (`Estimator.atLevel`), or nil: the device as profiled.
    public var level: Level? = nil
}

/// Device levels outside [minLevel, maxLevel] are refused; as the Python runtime's LEVEL_RANGE.
public let minLevel = 0.02
public let maxLevel = 50.0
public let maxLevelLogStd = 5.0
public let maxLevelReadings = 10_000

/// A device level: the reference probe now over its median during the profile (`Estimator.deviceLevel`).
public struct Level {
    public let level: Double
    public let logStd: Double
    public let readings: Int  // 0 for a level given as a number

    public init(level: Double, logStd: Double, readings: Int = 0) throws {
        guard level.isFinite else { throw ThorError.usage("level must be a finite number, got \(level)") }
        guard level >= minLevel, level <= maxLevel else {
            throw ThorError.usage("level \(level) is outside \(minLevel)-\(maxLevel) of the profile's: not the "
                + "profiled device in another state (another device, or readings in another unit)")
        }
        guard logStd.isFinite, logStd >= 0, logStd <= maxLevelLogStd else {
            throw ThorError.usage("level log_std must be a finite number from 0 to \(maxLevelLogStd), got \(logStd)")
        }
        self.level = level
        self.logStd = logStd
        self.readings = readings
    }
}

private let sqrt5 = (5.0).squareRoot()
/// A log residual beyond this is a corrupt file, never a cost (checked on load and per layer).
let maxLogResidual = 60.0
/// constant + noise_level (ln units squared) beyond this is a corrupt file.
let maxLogVar = 25.0
/// Reader caps, the same as the Python runtime's and the Java one's: inducing points and variance-factor rows
/// per kind, kinds per file, numbers in all inducing, alpha and var_factor arrays together, layers per
/// estimate, bytes per file.
let maxInducing = 512
let maxVarRows = 64
let maxKinds = 256
let maxModelNumbers = 1_000_000
let maxLayers = 4096
let maxFileBytes = 8 * 1024 * 1024
let varFloor = 1e-12
/// Std added to a layer marked approx, relative to its mean; over the layers of one `op` these add up
/// linearly in the total (one operator type, one error), as in the Python and Java runtimes.
public let approxOpRelStd = 0.5

/// Features a kind gained after estimators were first written, with the value a layer leaving one out has
/// (thor_sdk.layers.kinds.DEFAULT_FEATURES: a conv's dilation, frozen for every kind with weights but the output
/// head, inplace for the activations that can run in place): an estimator whose entry lacks one reads a layer setting
/// another value as its twin at that value, so the layer is approximated, as a stand-in is (the Python runtime's
/// rule).
let defaultFeatures: [String: [String: Double]] = [
    "conv1d": ["dilation": 1, "frozen": 0],
    "conv2d": ["dilation": 1, "frozen": 0],
    "linear": ["frozen": 0],
    "batchnorm2d": ["frozen": 0],
    "layernorm": ["frozen": 0],
    "embedding": ["frozen": 0],
    "lstm": ["frozen": 0],
    "transformer_block": ["frozen": 0],
    "batchnorm1d": ["frozen": 0],
    "prelu": ["frozen": 0],
    "groupnorm": ["frozen": 0],
    "gru": ["frozen": 0],
    "lstm_cell": ["frozen": 0],
    "gru_cell": ["frozen": 0],
    "mha": ["frozen": 0],
    "conv_transpose2d": ["frozen": 0],
    "relu": ["inplace": 0],
    "relu6": ["inplace": 0],
    "leaky_relu": ["inplace": 0],
    "hardswish": ["inplace": 0],
    "hardsigmoid": ["inplace": 0],
    "silu": ["inplace": 0],
    "elu": ["inplace": 0]
]

/// Why `m`, fitted before one of the layer's kind's defaulted features existed, estimates the layer approximately
/// (the layer sets the feature to another value than its default); else nil.
func unreadFeature(_ layer: Layer, _ m: KindModel) -> String? {
    guard let defaults = defaultFeatures[layer.kind] else {
        return nil
    }
    let off = defaults.keys.sorted().compactMap { f -> String? in
        guard !m.features.contains(f), let v = layer.config[f], v.isFinite, v != defaults[f]! else {
            return nil
        }
        return "\(f) \(show(v))"
    }
    if off.isEmpty {
        return nil
    }
    return "the estimator's \(layer.kind) model predates its feature(s) \(off.joined(separator: ", ")): estimated "
        + "as the same layer at the default (through its own FLOPs and bytes); refit the campaign for its own cost"
}

func matern52(_ r: Double) -> Double {
    let t = r * sqrt5
    return (1.0 + t + t * t / 3.0) * exp(-t)
}

func dist(_ a: [Double], _ b: [Double]) -> Double {
    var s = 0.0
    for j in 0..<a.count {
        let d = a[j] - b[j]
        s += d * d
    }
    return s.squareRoot()
}

func dot(_ a: [Double], _ b: [Double]) -> Double {
    var s = 0.0
    for j in 0..<a.count {
        s += a[j] * b[j]
    }
    return s
}

private func plainSum(_ xs: [Double]) -> Double {
    var s = 0.0
    for x in xs { s += x }
    return s
}

/// The correctly rounded sum of `xs`, like Python's `math.fsum` (Shewchuk's exact partials); the plain
/// sum where a term or a partial is not finite.
func fsum(_ xs: [Double]) -> Double {
    var p: [Double] = []
    for x0 in xs {
        if !x0.isFinite { return plainSum(xs) }
        var x = x0
        var i = 0
        for j in 0..<p.count {
            var y = p[j]
            if abs(x) < abs(y) { swap(&x, &y) }
            let hi = x + y
            let lo = y - (hi - x)
            if lo != 0.0 {
                p[i] = lo
                i += 1
            }
            x = hi
        }
        if !x.isFinite { return plainSum(xs) }
        p.removeSubrange(i..<p.count)
        p.append(x)
    }
    var hi = 0.0
    if !p.isEmpty {
        var n = p.count - 1
        hi = p[n]
        var lo = 0.0
        while n > 0 {
            let x = hi
            n -= 1
            let y = p[n]
            hi = x + y
            let yr = hi - x
            lo = y - yr
            if lo != 0.0 { break }
        }
        // half-even rounding across several partials
        if n > 0 && ((lo < 0.0 && p[n - 1] < 0.0) || (lo > 0.0 && p[n - 1] > 0.0)) {
            let y = lo * 2.0
            let x = hi + y
            let yr = x - hi
            if y == yr { hi = x }
        }
    }
    return hi
}

// ---------------------------------------------------------------------- validation helpers
private func isBool(_ n: NSNumber) -> Bool {
    return CFGetTypeID(n as CFTypeRef) == CFBooleanGetTypeID()
}

/// A number (JSON numbers, Double and Int bridge to NSNumber; not a boolean) as a Double, else nil.
private func optionalNum(_ v: Any?) -> Double? {
    guard let n = v as? NSNumber, !isBool(n) else { return nil }
    return n.doubleValue
}

private func typeName(_ v: Any?) -> String {
    guard let v = v else { return "null" }
    if v is NSNull { return "null" }
    if let n = v as? NSNumber { return isBool(n) ? "boolean" : "number" }
    if v is String { return "string" }
    if v is [Any] { return "array" }
    if v is [String: Any] { return "object" }
    return "\(type(of: v))"
}

/// A JSON value as the file wrote it: 2.0 prints as 2, a string in quotes.
private func show(_ v: Any?) -> String {
    guard let v = v else { return "missing" }
    if let n = v as? NSNumber, !isBool(n) {
        let d = n.doubleValue
        if d == d.rounded() && abs(d) < 1e15 { return String(Int64(d)) }
        return "\(d)"
    }
    if let s = v as? String { return "'\(s)'" }
    return "\(v)"
}

private func num(_ v: Any?, _ w: String) throws -> Double {
    guard let n = v as? NSNumber, !isBool(n) else {
        throw ThorError.format("estimator: \(w) must be a number, got \(typeName(v))")
    }
    let d = n.doubleValue
    guard d.isFinite else { throw ThorError.format("estimator: \(w) is not a finite number (\(d))") }
    return d
}

private func positive(_ v: Any?, _ w: String) throws -> Double {
    let d = try num(v, w)
    guard d > 0 else { throw ThorError.format("estimator: \(w) must be > 0, got \(d)") }
    return d
}

private func nonNegative(_ v: Any?, _ w: String) throws -> Double {
    let d = try num(v, w)
    guard d >= 0 else { throw ThorError.format("estimator: \(w) must be >= 0, got \(d)") }
    return d
}

private func nums(_ v: Any?, _ w: String, _ length: Int, positiveOnly: Bool = false) throws -> [Double] {
    guard let a = v as? [Any] else { throw ThorError.format("estimator: \(w) must be an array, got \(typeName(v))") }
    if length >= 0 && a.count != length {
        throw ThorError.format("estimator: \(w) has \(a.count) numbers, expected \(length)")
    }
    return try a.enumerated().map { k, x -> Double in
        if positiveOnly { return try positive(x, "\(w)[\(k)]") }
        return try num(x, "\(w)[\(k)]")
    }
}

private func rows(_ v: Any?, _ w: String, _ ncols: Int, _ maxRows: Int) throws -> [[Double]] {
    guard let a = v as? [Any], !a.isEmpty else {
        throw ThorError.format("estimator: \(w) must be a non-empty array of rows")
    }
    guard a.count <= maxRows else {
        throw ThorError.format("estimator: \(w) has \(a.count) rows; at most \(maxRows) are read")
    }
    return try a.enumerated().map { i, r in try nums(r, "\(w)[\(i)]", ncols) }
}

/// Numbers in the kinds' inducing, alpha and var_factor arrays (rows beyond the per-kind caps not counted:
/// they are refused anyway), as thor_sdk.runtime.estimator._model_numbers.
func modelNumbers(_ kinds: [String: Any]) -> Int {
    var n = 0
    for case let d as [String: Any] in kinds.values {
        for (key, cap) in [("inducing", maxInducing), ("var_factor", maxVarRows), ("alpha", -1)] {
            guard let a = d[key] as? [Any] else { continue }
            if cap < 0 {
                n += a.count
                continue
            }
            for r in a.prefix(cap + 1) {
                n += (r as? [Any])?.count ?? 1
            }
        }
    }
    return n
}

private func field(_ d: [String: Any], _ key: String, _ w: String) throws -> Any {
    guard let v = d[key] else { throw ThorError.format("estimator: \(w) lacks field '\(key)'") }
    return v
}

private func object(_ v: Any?, _ w: String) throws -> [String: Any] {
    guard let d = v as? [String: Any] else { throw ThorError.format("estimator: \(w) must be an object") }
    return d
}

/// A feature named `<base>_pad<N>` is `ceil(base / N) * N / base`, derived from the base feature
/// (docs/estimator-format.md, padded features).
let padMark = "_pad"
let maxPadBlock = 1024

/// (base feature, block) of a padded feature's name ("in_channels_pad8" gives ("in_channels", 8)), nil for any
/// other name: the block is a decimal integer in [1, maxPadBlock] without a leading zero.
func parsePadded(_ name: String) -> (base: String, block: Int)? {
    guard let r = name.range(of: padMark, options: .backwards), r.lowerBound > name.startIndex else { return nil }
    let digits = name[r.upperBound...]
    guard !digits.isEmpty, digits.count <= 4, digits.first != "0",
          digits.allSatisfy({ ("0"..."9").contains($0) }), let block = Int(digits), block <= maxPadBlock else {
        return nil
    }
    return (String(name[..<r.lowerBound]), block)
}

/// ceil(x / block) * block / x for a count x >= 1: the work padding to blocks adds, as a ratio.
func paddedValue(_ x: Double, _ block: Int) -> Double {
    let b = Double(block)
    return (x / b).rounded(.up) * b / x
}

/// The features a caller gives: all but the derived and padded ones (padded ones as their base), each once.
func givenFeatures(_ features: [String]) -> [String] {
    var out: [String] = []
    for f in features {
        let g = parsePadded(f)?.base ?? f
        if !Estimator.derived.contains(g) && !out.contains(g) { out.append(g) }
    }
    return out
}

/// An entry's optional "defaults" (feature -> number): config features a layer may leave out, each one the caller
/// gives (not batch_size or role), its value a finite number >= 0; empty when the entry has none.
func defaultsOf(_ d: Any?, _ given: [String], _ wh: String) throws -> [String: Double] {
    guard let d = d, !(d is NSNull) else { return [:] }
    guard let m = d as? [String: Any] else {
        throw ThorError.format("estimator: \(wh).defaults must be an object of feature -> number")
    }
    var out: [String: Double] = [:]
    for (f, v) in m {
        guard given.contains(f), f != "batch_size", f != "role" else {
            throw ThorError.format("estimator: \(wh).defaults names '\(f)', not a config feature a layer gives ("
                + given.joined(separator: ", ") + ")")
        }
        guard let n = v as? NSNumber, !isBool(n), n.doubleValue >= 0, n.doubleValue.isFinite else {
            throw ThorError.format("estimator: \(wh).defaults['\(f)'] must be a finite number >= 0, got \(show(v))")
        }
        out[f] = n.doubleValue
    }
    return out
}

private func roleCode(_ role: String, _ message: String) throws -> Double {
    if role == "input" { return 1.0 }
    if role == "hidden" { return 0.0 }
    throw ThorError.usage(message)
}

// ---------------------------------------------------------------------- one kind
/// One distinct layer: ln-mean, ln-variance (incl. white noise), v = W k, scaled input u.
struct Row {
    let lmu: Double
    let variance: Double
    let v: [Double]
    let u: [Double]
}

/// Mean and std in the metric's unit of a lognormal with ln-mean `lmu` and ln-variance `variance`.
func moments(_ lmu: Double, _ variance: Double) throws -> (mean: Double, std: Double) {
    let m = exp(lmu + variance / 2.0)
    guard m.isFinite else {
        throw ThorError.usage("the estimate is too large to represent (far outside what the estimator covers)")
    }
    return (m, m * expm1(variance).squareRoot())
}

/// The exported cost model of one layer kind.
final class KindModel {
    let kind: String
    let features: [String]
    let hasRole: Bool
    let xMean: [Double], xScale: [Double], lengthScale: [Double], alpha: [Double]
    let overhead: Double, perFlop: Double, perByte: Double, offset: Double, constant: Double, noise: Double
    /// The rate of the bytes moved once per step (version 3); nil: they cost perByte.
    let perStepByte: Double?
    /// Paid once per layer call whatever its launches (version 4; a recurrent layer's fixed cost); 0 where absent.
    let perCall: Double
    let inducingU: [[Double]]  // inducing / length_scale
    let w: [[Double]]  // var_factor, r rows of m
    let nSamples: Int
    /// Per feature, (base, block) where it is padded from another feature (nil else), parsed once.
    let padded: [(base: String, block: Int)?]
    /// The features a caller gives (`givenFeatures`).
    let given: [String]
    /// Config features a layer may leave out, each read as its value (the entry's optional "defaults").
    let defaults: [String: Double]

    init(kind: String, entry: Any) throws {
        let wh = "kinds['\(kind)']"
        let d = try object(entry, wh)
        guard let fl = try field(d, "features", wh) as? [String], !fl.isEmpty, Set(fl).count == fl.count else {
            throw ThorError.format("estimator: \(wh).features must be a non-empty list of distinct names")
        }
        let nd = fl.count
        let ft = try field(d, "feature_transform", wh)
        guard ft as? String == "log1p" else {
            throw ThorError.format("estimator: \(wh).feature_transform must be 'log1p', got \(show(ft))")
        }
        let mf = try object(try field(d, "mean_function", wh), "\(wh).mean_function")
        overhead = try positive(try field(mf, "overhead", "\(wh).mean_function"), "\(wh).mean_function.overhead")
        perFlop = try nonNegative(try field(mf, "per_flop", "\(wh).mean_function"), "\(wh).mean_function.per_flop")
        perByte = try nonNegative(try field(mf, "per_byte", "\(wh).mean_function"), "\(wh).mean_function.per_byte")
        if let psb = mf["per_step_byte"], !(psb is NSNull) {
            perStepByte = try nonNegative(psb, "\(wh).mean_function.per_step_byte")
        } else {
            perStepByte = nil
        }
        if let pc = mf["per_call"], !(pc is NSNull) {
            perCall = try nonNegative(pc, "\(wh).mean_function.per_call")
        } else {
            perCall = 0.0
        }
        let k = try object(try field(d, "kernel", wh), "\(wh).kernel")
        let nu = try num(try field(k, "nu", "\(wh).kernel"), "\(wh).kernel.nu")
        guard nu == 2.5 else {
            throw ThorError.format("estimator: \(wh).kernel.nu must be 2.5 (Matern 5/2), got \(nu)")
        }
        self.kind = kind
        features = fl
        padded = fl.map { parsePadded($0) }
        given = givenFeatures(fl)
        defaults = try defaultsOf(d["defaults"], given, wh)
        hasRole = fl.contains("role")
        xMean = try nums(try field(d, "x_mean", wh), "\(wh).x_mean", nd)
        xScale = try nums(try field(d, "x_scale", wh), "\(wh).x_scale", nd, positiveOnly: true)
        let ls = try nums(try field(k, "length_scale", "\(wh).kernel"), "\(wh).kernel.length_scale", nd,
                          positiveOnly: true)
        lengthScale = ls
        constant = try positive(try field(k, "constant", "\(wh).kernel"), "\(wh).kernel.constant")
        noise = try nonNegative(try field(k, "noise_level", "\(wh).kernel"), "\(wh).kernel.noise_level")
        offset = try num(try field(d, "residual_offset", wh), "\(wh).residual_offset")
        guard ls.allSatisfy({ $0 >= 1e-6 }) else {
            throw ThorError.format("estimator: \(wh).kernel.length_scale below 1e-6 is not a usable kernel")
        }
        let inducing = try rows(try field(d, "inducing", wh), "\(wh).inducing", nd, maxInducing)
        let m = inducing.count
        inducingU = inducing.map { row in (0..<nd).map { j in row[j] / ls[j] } }
        alpha = try nums(try field(d, "alpha", wh), "\(wh).alpha", m)
        w = try rows(try field(d, "var_factor", wh), "\(wh).var_factor", m, maxVarRows)
        let ns = try field(d, "n_samples", wh)
        guard let nsn = ns as? NSNumber, !isBool(nsn), nsn.doubleValue >= 1, nsn.doubleValue == nsn.doubleValue.rounded(),
              nsn.doubleValue <= Double(Int32.max) else {
            throw ThorError.format("estimator: \(wh).n_samples must be a positive integer, got \(show(ns))")
        }
        nSamples = Int(nsn.doubleValue)
        guard abs(offset) <= maxLogResidual else {
            throw ThorError.format("estimator: \(wh): |residual_offset| above 60 is not a cost model")
        }
        guard constant + noise <= maxLogVar else {
            throw ThorError.format("estimator: \(wh): kernel constant + noise_level exceeds 25 (ln units)")
        }
    }

    /// Raw features -> standardised, length-scaled u.
    func scaled(_ raw: [Double]) -> [Double] {
        return (0..<raw.count).map { j in ((log1p(raw[j]) - xMean[j]) / xScale[j]) / lengthScale[j] }
    }

    /// ln-mean, ln-variance (incl. white noise), v = W k and u of one layer with terms F, B, L and S (of B, the
    /// bytes moved once per step).
    func row(_ raw: [Double], _ flops: Double, _ bytes: Double, _ launches: Double, _ stepBytes: Double) throws -> Row {
        let u = scaled(raw)
        let c = constant
        let ks = inducingU.map { t in c * matern52(dist(u, t)) }
        let mu = offset + fsum((0..<ks.count).map { i in ks[i] * alpha[i] })
        guard abs(mu) <= maxLogResidual else {  // |k_i| <= constant: only a corrupt alpha gets here
            throw ThorError.format("estimator: kinds['\(kind)']: the residual model gives e^"
                + String(format: "%.3g", mu) + " for this layer; the file is corrupt")
        }
        let v = w.map { r in dot(r, ks) }
        var variance = c + noise - fsum(v.map { $0 * $0 })
        if variance < varFloor { variance = varFloor }
        let mean: Double
        if let psb = perStepByte {
            mean = perCall + overhead * launches + perFlop * flops + perByte * (bytes - stepBytes) + psb * stepBytes
        } else {
            mean = perCall + overhead * launches + perFlop * flops + perByte * bytes
        }
        guard mean > 0.0, mean.isFinite else {
            throw ThorError.usage("kind '\(kind)': the mean function is not finite for these layer terms "
                + "(flops \(flops), bytes \(bytes))")
        }
        return Row(lmu: log(mean) + mu, variance: variance, v: v, u: u)
    }

    /// Raw feature vector from a map of feature names to numbers (role may be a String).
    func vector(_ values: [String: Any], _ w: String) throws -> [Double] {
        return try zip(features, padded).map { pair -> Double in
            let (f, pad) = pair
            let name = pad?.base ?? f
            guard var x = values[name] ?? defaults[name].map({ $0 as Any }) else {
                throw ThorError.usage("\(w): kind '\(kind)' needs feature '\(name)' (features: "
                    + given.joined(separator: ", ") + ")")
            }
            if let p = pad {  // derived from its base feature, never read from the values
                guard let n = x as? NSNumber, !isBool(n), n.doubleValue >= 1.0, n.doubleValue.isFinite else {
                    throw ThorError.usage("\(w): feature '\(name)' must be a finite number >= 1 (it gives '\(f)'), got \(x)")
                }
                return paddedValue(n.doubleValue, p.block)
            }
            if f == "role", let s = x as? String {
                x = try roleCode(s, "\(w): role must be 'input' or 'hidden' for kind '\(kind)', got '\(s)'")
            }
            // JSON numbers, Double and Int all bridge to NSNumber; a Bool bridges to a CFBoolean
            guard let v = x as? NSNumber, !isBool(v) else {
                throw ThorError.usage("\(w): feature '\(f)' must be a number, got \(x)")
            }
            let d = v.doubleValue
            guard d > -1.0, d.isFinite else {
                throw ThorError.usage("\(w): feature '\(f)' must be a finite number > -1, got \(d)")
            }
            return d
        }
    }
}

/// (training FLOPs, bytes moved, launches, bytes moved once per step) of one step at `batch` from the checked terms;
/// launches at least 1 for a file older than `Estimator.sharedLaunchVersion`.
private func atBatch(_ t: [Double], _ batch: Double, version: Int)
    -> (flops: Double, bytes: Double, launches: Double, stepBytes: Double) {
    let launches = version < Estimator.sharedLaunchVersion ? max(1.0, t[4]) : t[4]
    return (t[0] * batch + t[1], t[2] * batch + t[3], launches, t[3])
}

// ---------------------------------------------------------------------- the estimator
public final class Estimator {
    public static let format = "thor-sdk/estimator"
    public static let version = 5
    /// The oldest version this runtime reads: 2 is 3 without per_step_byte, 3 is 4 without per_call, 4 is 5 with
    /// every layer counted at least one launch.
    public static let minVersion = 2
    /// The first version whose kinds were fitted with a forward-only convolution or dense layer at a share of one
    /// launch (below 1); older files count every layer at least one, as they were fitted.
    public static let sharedLaunchVersion = 5
    /// The file's format version.
    public let fileVersion: Int
    /// Features the runtime derives from a layer's cost terms (F and B at the batch size), never from its config.
    public static let derived = ["train_flops", "train_bytes"]
    public let metric: String
    public let unit: String
    public let device: [String: Any]
    /// What ran the training steps (torch, onnxruntime, ...): with the device, the estimator's key.
    public let runtime: String
    /// whole_model.rel_std (0 when absent): relative error of whole models beyond the layers'.
    public let wholeModelRelStd: Double
    /// whole_model.drift_log_std (0 when absent), and whole_model.reference.median_value (nil without one).
    public let driftLogStd: Double
    public let referenceValue: Double?
    let models: [String: KindModel]

    public static func load(json: String) throws -> Estimator {
        return try Estimator(data: Data(json.utf8))
    }

    public init(data: Data) throws {
        guard data.count <= maxFileBytes else {
            throw ThorError.format("estimator: \(data.count) bytes; at most \(maxFileBytes) are read")
        }
        let parsed: Any
        do {
            parsed = try JSONSerialization.jsonObject(with: data, options: [])
        } catch {
            throw ThorError.format("not valid JSON: \(error.localizedDescription)")
        }
        let doc = try object(parsed, "top level")
        let fmt = doc["format"] as? String
        guard fmt == Estimator.format else {
            throw ThorError.format("not a thor-sdk estimator: format is \(show(doc["format"])), expected '\(Estimator.format)'")
        }
        guard let ver = doc["version"] as? NSNumber, !isBool(ver), ver.doubleValue >= Double(Estimator.minVersion),
              ver.doubleValue <= Double(Estimator.version), ver.doubleValue == ver.doubleValue.rounded() else {
            var hint = ""
            if let v = doc["version"] as? NSNumber, !isBool(v), v.doubleValue == 1 {
                hint = " (version 1 files predate device profiles: refit the campaign with `thor-sdk fit`)"
            }
            throw ThorError.format("unsupported estimator version \(show(doc["version"])); this runtime reads "
                + "versions \(Estimator.minVersion) to \(Estimator.version)\(hint)")
        }
        fileVersion = Int(ver.doubleValue)
        let metricValue = try field(doc, "metric", "top level")
        guard let metric = metricValue as? String else {
            throw ThorError.format("estimator: metric must be a string, got \(typeName(metricValue))")
        }
        let expectedUnit: String
        switch metric {
        case "time": expectedUnit = "s"
        case "energy": expectedUnit = "J"
        default: throw ThorError.format("estimator: metric must be 'time' or 'energy', got '\(metric)'")
        }
        let unitValue = try field(doc, "unit", "top level")
        guard let unit = unitValue as? String, unit == expectedUnit else {
            throw ThorError.format("estimator: unit of metric '\(metric)' must be '\(expectedUnit)', got \(show(unitValue))")
        }
        self.metric = metric
        self.unit = unit
        device = try object(try field(doc, "device", "top level"), "device")
        let runtimeValue = try field(doc, "runtime", "top level")
        guard let runtime = runtimeValue as? String else {
            throw ThorError.format("estimator: runtime must be a string, got \(typeName(runtimeValue))")
        }
        self.runtime = runtime
        let fb = try object(try field(doc, "flops_baseline", "top level"), "flops_baseline")
        _ = try num(try field(fb, "unit_per_flop", "flops_baseline"), "flops_baseline.unit_per_flop")
        var relStd = 0.0
        var drift = 0.0
        var refValue: Double? = nil
        if let wmo = doc["whole_model"], !(wmo is NSNull) {
            let wm = try object(wmo, "whole_model")
            if let r = wm["rel_std"] {
                relStd = try nonNegative(r, "whole_model.rel_std")
            }
            guard relStd <= 10 else {
                throw ThorError.format("estimator: whole_model.rel_std above 10 is not a calibration")
            }
            if let d = wm["drift_log_std"], !(d is NSNull) {
                drift = try nonNegative(d, "whole_model.drift_log_std")
                guard drift <= maxLevelLogStd else {
                    throw ThorError.format("estimator: whole_model.drift_log_std above \(maxLevelLogStd) is not a drift")
                }
            }
            if let r = wm["reference"], !(r is NSNull) {
                let ref = try object(r, "whole_model.reference")
                refValue = try positive(try field(ref, "median_value", "whole_model.reference"),
                                        "whole_model.reference.median_value")
                _ = try object(try field(ref, "probe", "whole_model.reference"), "whole_model.reference.probe")
            }
        }
        wholeModelRelStd = relStd
        driftLogStd = drift
        referenceValue = refValue
        let kinds = try object(try field(doc, "kinds", "top level"), "kinds")
        guard !kinds.isEmpty else { throw ThorError.format("estimator: kinds is empty") }
        guard kinds.count <= maxKinds else {
            throw ThorError.format("estimator: \(kinds.count) kinds; at most \(maxKinds) are read")
        }
        let n = modelNumbers(kinds)
        guard n <= maxModelNumbers else {
            throw ThorError.format("estimator: its kinds hold \(n) numbers in inducing, alpha and var_factor; "
                + "at most \(maxModelNumbers) are read (docs/estimator-format.md)")
        }
        var models: [String: KindModel] = [:]
        for (name, entry) in kinds {
            models[name] = try KindModel(kind: name, entry: entry)
        }
        self.models = models
    }

    /// Kind name -> its feature names.
    public var kinds: [String: [String]] {
        return models.mapValues { $0.features }
    }

    /// device.name of the estimator, or nil.
    public var deviceName: String? {
        guard let n = device["name"], !(n is NSNull) else { return nil }
        if let s = n as? String { return s }
        return show(n)
    }

    /// Kinds whose depthwise layers (config groups > 1, in_channels <= groups) have a structural variant entry.
    static let groupedKinds: Set<String> = ["conv1d", "conv2d"]

    /// The estimator entry that costs a layer: "KIND:grouped" for a depthwise convolution (groups > 1 and
    /// in_channels absent or at most groups), else the kind itself, grouped convolutions of several channels per
    /// group included (thor_sdk.layers.kinds.model_key).
    /// With `batchSize`, "KIND:gemm" for a dense convolution that PyTorch at one thread runs off oneDNN
    /// (`runsAsGemm`).
    public static func modelKey(_ kind: String, _ config: [String: Any], batchSize: Double? = nil) -> String {
        guard groupedKinds.contains(kind) else { return kind }
        if let g = optionalNum(config["groups"]), g > 1 {
            let severalPerGroup = optionalNum(config["in_channels"]).map { $0 > g } ?? false
            if !severalPerGroup { return kind + ":grouped" }
        }
        if let b = batchSize, runsAsGemm(kind, config, b) { return kind + ":gemm" }
        return kind
    }

    /// Batch size from which PyTorch runs 1x1 convs on oneDNN at one thread (thor_sdk.layers.kinds.GEMM_BATCH).
    static let gemmBatch = 16.0
    /// The largest batch-1 input (numbers) PyTorch keeps off oneDNN (thor_sdk.layers.kinds.GEMM_BATCH1_NUMEL).
    static let gemmBatch1Numel = 20480.0

    /// Whether PyTorch's CPU backend at one thread runs this dense conv1d/conv2d by im2col and a matrix product
    /// rather than oneDNN: a 1x1, stride-1, undilated conv below batch 16, or a batch-1 conv whose kernel is at
    /// most 3 along a side over an input of at most 20480 numbers (thor_sdk.layers.kinds.runs_as_gemm).
    public static func runsAsGemm(_ kind: String, _ config: [String: Any], _ batchSize: Double) -> Bool {
        guard groupedKinds.contains(kind), !batchSize.isNaN else { return false }
        func num(_ key: String, _ fallback: Double? = nil) -> Double? {
            if config[key] == nil { return fallback }
            guard let v = optionalNum(config[key]), !v.isNaN else { return nil }
            return v
        }
        let kh, kw, sh, sw, area: Double?
        if kind == "conv2d" {
            kh = num("kernel")
            sh = num("stride")
            kw = num("kernel_w", kh)
            sw = num("stride_w", sh)
            if let h = num("height"), let w = num("width") { area = h * w } else { area = nil }
        } else {
            kh = 1
            sh = 1
            kw = num("kernel")
            sw = num("stride")
            area = num("length")
        }
        guard let kH = kh, let kW = kw, let sH = sh, let sW = sw, let a = area, let cin = num("in_channels"),
              let dilation = num("dilation", 1), let groups = num("groups", 1) else { return false }
        let pointwise = kH == 1 && kW == 1 && sH == 1 && sW == 1 && dilation == 1 && batchSize < gemmBatch
        let small = batchSize <= 1 && groups == 1 && !(kH > 3 && kW > 3) && batchSize * cin * a <= gemmBatch1Numel
        return pointwise || small
    }

    /// The entry name costing a layer at a batch size: its structural variant where this estimator has one, else
    /// its kind.
    private func entryFor(_ kind: String, _ config: [String: Any], _ batchSize: Double?) -> String {
        let key = Estimator.modelKey(kind, config, batchSize: batchSize)
        return models[key] != nil ? key : kind
    }

    private func model(_ kind: String) throws -> KindModel {
        guard let m = models[kind] else {
            throw ThorError.notFound("estimator has no model for kind '\(kind)'; probe it on this device")
        }
        return m
    }

    /// Mean and std of one layer's cost in `unit`. `features` maps the kind's feature names but
    /// `Estimator.derived` (config features, "batch_size", "role" as 1/0 or "input"/"hidden") to numbers;
    /// `cost` gives the layer's training FLOPs and bytes, from which the features train_flops and
    /// train_bytes are set (overriding any given).
    public func predictLayer(kind: String, features: [String: Any], cost: Cost?) throws -> (mean: Double, std: Double) {
        let m = try model(entryFor(kind, features, optionalNum(features["batch_size"])))
        let w = "layer of kind '\(kind)'"
        let given = m.given
        if let missing = given.first(where: { features[$0] == nil && m.defaults[$0] == nil }) {
            throw ThorError.usage("\(w): kind '\(kind)' needs feature '\(missing)' (features: "
                + given.joined(separator: ", ") + ")")
        }
        guard let b = features["batch_size"] as? NSNumber, !isBool(b), b.doubleValue >= 1 else {
            throw ThorError.usage("\(w): batch_size must be a number >= 1")
        }
        guard let cost = cost else {
            throw ThorError.usage("\(w): cost must be an object with " + termKeys.joined(separator: ", "))
        }
        let fb = atBatch(try cost.checked(w), b.doubleValue, version: fileVersion)
        var values = features
        values["train_flops"] = fb.flops
        values["train_bytes"] = fb.bytes
        let r = try m.row(try m.vector(values, w), fb.flops, fb.bytes, fb.launches, fb.stepBytes)
        return try moments(r.lmu, r.variance)
    }

    /// Per-layer and whole-model cost of one training step at `batchSize`.
    public func estimate(layers: [Layer], batchSize: Int) throws -> Estimate {
        guard batchSize >= 1, Double(batchSize) <= 1e9 else {
            throw ThorError.usage("batch size must be a positive integer (at most 1e9), got \(batchSize)")
        }
        guard layers.count <= maxLayers else {
            throw ThorError.usage("\(layers.count) layers; at most \(maxLayers) are estimated at once")
        }
        var order: [String] = []  // entries (kinds or structural variants) in first-seen order
        var groups: [String: [[Double]]] = [:]  // entry -> distinct raw features + [F, B], first-seen order
        var counts: [String: [[Double]: Int]] = [:]
        var keys: [[Double]] = []
        var entries: [String] = []
        for (i, layer) in layers.enumerated() {
            let entry = entryFor(layer.kind, layer.config, Double(batchSize))
            let m = try model(entry)
            var values: [String: Any] = layer.config
            values["batch_size"] = Double(batchSize)
            if m.hasRole {
                values["role"] = try roleCode(layer.role,
                    "layer \(i) (\(layer.kind)): role must be 'input' or 'hidden', got '\(layer.role)'")
            }
            let w = "layer \(i) (\(layer.name))"
            guard let cost = layer.cost else {
                throw ThorError.usage("\(w): no cost terms; this runtime needs each layer's \"cost\" ("
                    + termKeys.joined(separator: ", ") + ") as `thor-sdk layers --json` writes it")
            }
            let fb = atBatch(try cost.checked(w), Double(batchSize), version: fileVersion)
            guard layer.recompute >= 0.0, layer.recompute <= 1.0 else {
                throw ThorError.usage("\(w): recompute must be a number in [0, 1], got \(layer.recompute)")
            }
            values["train_flops"] = fb.flops
            values["train_bytes"] = fb.bytes
            // the last entry: a recomputed forward, that share of the layer's step more
            let key = try m.vector(values, w) + [fb.flops, fb.bytes, fb.launches, fb.stepBytes, 1.0 + layer.recompute]
            if groups[entry] == nil {
                order.append(entry)
                groups[entry] = []
                counts[entry] = [:]
            }
            if counts[entry]![key] == nil {
                groups[entry]!.append(key)
            }
            counts[entry]![key, default: 0] += 1
            entries.append(entry)
            keys.append(key)
        }
        var results: [String: [[Double]: (mean: Double, std: Double)]] = [:]
        var totalMean = 0.0
        var kindVars: [Double] = []
        for kind in order {
            let m = models[kind]!
            var rs: [Row] = []
            var cs: [Double] = []
            var means: [Double] = []
            var res: [[Double]: (mean: Double, std: Double)] = [:]
            for key in groups[kind]! {
                let nd = key.count - 5
                let r = try m.row(Array(key[0..<nd]), key[nd], key[nd + 1], key[nd + 2], key[nd + 3])
                let one = try moments(r.lmu, r.variance)
                let ms = (mean: one.mean * key[nd + 4], std: one.std * key[nd + 4])
                let c = counts[kind]![key]!
                res[key] = ms
                rs.append(r)
                cs.append(Double(c))
                means.append(ms.mean)
                totalMean += Double(c) * ms.mean
            }
            results[kind] = res
            kindVars.append(Estimator.groupVar(m, rs, cs, means))
        }
        var out: [LayerEstimate] = []
        // operator type (or the layer's own index when it names none) -> the added stds of its approx layers
        var opOrder: [String] = []
        var opExtra: [String: [Double]] = [:]
        for (i, layer) in layers.enumerated() {
            let ms = results[entries[i]]![keys[i]]!
            var std = ms.std
            let unread = layer.approx == nil ? unreadFeature(layer, models[entries[i]]!) : nil
            let why = layer.approx ?? unread
            if why != nil {
                let extra = approxOpRelStd * ms.mean
                std = (std * std + extra * extra).squareRoot()
                let key = layer.op.map { "op:" + $0 } ?? "layer:\(i)"
                if opExtra[key] == nil {
                    opOrder.append(key)
                    opExtra[key] = []
                }
                opExtra[key]!.append(extra)
            }
            out.append(LayerEstimate(layer: layer, mean: ms.mean, std: std, approx: why, unreadFeature: unread != nil))
        }
        let layersVar = fsum(kindVars + opOrder.map { key -> Double in
            let sum = fsum(opExtra[key]!)
            return sum * sum
        })
        let rel = wholeModelRelStd * totalMean
        let whole = rel * rel
        guard totalMean.isFinite, (layersVar + whole).isFinite else {
            throw ThorError.usage("the estimate is too large to represent (far outside what the estimator covers)")
        }
        return Estimate(metric: metric, unit: unit, device: deviceName, runtime: runtime, batchSize: batchSize,
                        totalMean: totalMean, totalStd: max(layersVar + whole, 0.0).squareRoot(),
                        layersTotalMean: totalMean, layersTotalStd: max(layersVar, 0.0).squareRoot(), layers: out)
    }

    /// The device's level from its reference probe measured now: median(readings) / referenceValue, with
    /// ln-std max(s, driftLogStd) / sqrt(n) (s the sample std of the readings' logs, 0 for one), capped at
    /// maxLevelLogStd; as `thor_sdk.runtime.device_level`.
    public static func deviceLevel(readings: [Double], referenceValue: Double, driftLogStd: Double) throws -> Level {
        guard readings.count >= 1, readings.count <= maxLevelReadings else {
            throw ThorError.usage("readings: 1 to \(maxLevelReadings) numbers, got \(readings.count)")
        }
        for (i, v) in readings.enumerated() {
            guard v.isFinite, v > 0 else { throw ThorError.usage("readings[\(i)] must be a finite number > 0, got \(v)") }
        }
        guard referenceValue.isFinite, referenceValue > 0 else {
            throw ThorError.usage("reference_value must be a finite number > 0, got \(referenceValue)")
        }
        guard driftLogStd.isFinite, driftLogStd >= 0 else {
            throw ThorError.usage("drift_log_std must be a finite number >= 0, got \(driftLogStd)")
        }
        let n = readings.count
        let logs = readings.map { log($0) }
        let mu = logs.reduce(0.0, +) / Double(n)
        var spread = 0.0
        if n > 1 {
            spread = (logs.map { ($0 - mu) * ($0 - mu) }.reduce(0.0, +) / Double(n - 1)).squareRoot()
        }
        let sorted = readings.sorted()
        let median = n % 2 == 1 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2])
        let logStd = min(max(spread, driftLogStd) / Double(n).squareRoot(), maxLevelLogStd)
        return try Level(level: median / referenceValue, logStd: logStd, readings: n)
    }

    /// The device's level from readings of this estimator's reference probe (whole_model.reference);
    /// ThorError.notFound for an estimator without one.
    public func level(readings: [Double]) throws -> Level {
        guard let ref = referenceValue else {
            throw ThorError.notFound("this estimator has no reference probe (whole_model.reference): its level "
                + "cannot be measured")
        }
        return try Estimator.deviceLevel(readings: readings, referenceValue: ref, driftLogStd: driftLogStd)
    }

    /// The estimate put at a device level: every mean and std times `level.level`; the total's variance gains
    /// (totalMean * level * logStd)^2; as the Python runtime's `at_level`.
    public static func atLevel(_ e: Estimate, _ level: Level) throws -> Estimate {
        guard e.level == nil else { throw ThorError.usage("the estimate is already at a level") }
        let f = level.level
        let layers = e.layers.map {
            LayerEstimate(layer: $0.layer, mean: $0.mean * f, std: $0.std * f, approx: $0.approx,
                          unreadFeature: $0.unreadFeature)
        }
        let mean = e.totalMean * f
        let a = e.totalStd * f
        let b = mean * level.logStd
        return Estimate(metric: e.metric, unit: e.unit, device: e.device, runtime: e.runtime, batchSize: e.batchSize,
                        totalMean: mean, totalStd: (a * a + b * b).squareRoot(),
                        layersTotalMean: e.layersTotalMean * f, layersTotalStd: e.layersTotalStd * f, layers: layers,
                        level: level)
    }

    /// `estimate(layers:batchSize:)` at a device level (nil: as profiled).
    public func estimate(layers: [Layer], batchSize: Int, level: Level?) throws -> Estimate {
        let e = try estimate(layers: layers, batchSize: batchSize)
        guard let level = level else { return e }
        return try Estimator.atLevel(e, level)
    }

    /// Variance (the metric's unit squared) of the summed cost of all layers of one kind.
    static func groupVar(_ m: KindModel, _ rows: [Row], _ counts: [Double], _ means: [Double]) -> Double {
        let c = m.constant
        var parts: [Double] = []
        for a in 0..<rows.count {
            let ra = rows[a]
            let ca = counts[a]
            let ma = means[a]
            let mm = ma * ma
            parts.append(ca * mm * expm1(ra.variance))
            if ca > 1 {  // identical twins share the latent cost: constant - v.v, no white noise
                let twin = c - fsum(ra.v.map { $0 * $0 })
                parts.append(ca * (ca - 1) * mm * expm1(max(twin, 0.0)))
            }
            for b in (a + 1)..<rows.count {
                let rb = rows[b]
                let cov = c * matern52(dist(ra.u, rb.u)) - dot(ra.v, rb.v)
                parts.append(2.0 * ca * counts[b] * ma * means[b] * expm1(cov))
            }
        }
        return fsum(parts)
    }
}
