// thor-sdk estimator runtime for iOS / macOS (Swift 5.7+, Foundation only).
//
// Reads an estimator JSON (format "thor-sdk/estimator", version 1) and predicts per-layer and
// whole-model training costs. It mirrors android_harness/runtime/.../Estimator.java line by line;
// the math is in docs/estimator-format.md.
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
    /// The estimator has no GP for a layer kind.
    case notFound(String)
    /// Bad input: a missing feature, a bad role, a batch size of 0.
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

/// One layer of a model, as `thor_sdk.layers.layers_of(...).layers` lists it.
public struct Layer {
    public let name: String
    public let kind: String
    public let role: String  // "input", "hidden" or "output"
    public let config: [String: Double]

    public init(name: String, kind: String, role: String, config: [String: Double]) {
        self.name = name
        self.kind = kind
        self.role = role
        self.config = config
    }
}

public struct LayerEstimate {
    public let layer: Layer
    public let mean: Double
    public let std: Double
}

public struct Estimate {
    public let metric: String
    public let unit: String
    public let batchSize: Int
    public let totalMean: Double
    public let totalStd: Double
    public let layers: [LayerEstimate]
}

private let sqrt5 = (5.0).squareRoot()

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

// ---------------------------------------------------------------------- validation helpers
private func isBool(_ n: NSNumber) -> Bool {
    return CFGetTypeID(n as CFTypeRef) == CFBooleanGetTypeID()
}

private func num(_ v: Any?, _ w: String) throws -> Double {
    guard let n = v as? NSNumber, !isBool(n) else {
        throw ThorError.format("estimator: \(w) must be a number")
    }
    let d = n.doubleValue
    guard d.isFinite else { throw ThorError.format("estimator: \(w) is not a finite number") }
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
    guard let a = v as? [Any] else { throw ThorError.format("estimator: \(w) must be an array") }
    if length >= 0 && a.count != length {
        throw ThorError.format("estimator: \(w) has \(a.count) numbers, expected \(length)")
    }
    return try a.enumerated().map { k, x -> Double in
        if positiveOnly { return try positive(x, "\(w)[\(k)]") }
        return try num(x, "\(w)[\(k)]")
    }
}

private func field(_ d: [String: Any], _ key: String, _ w: String) throws -> Any {
    guard let v = d[key] else { throw ThorError.format("estimator: \(w) lacks field '\(key)'") }
    return v
}

private func object(_ v: Any?, _ w: String) throws -> [String: Any] {
    guard let d = v as? [String: Any] else { throw ThorError.format("estimator: \(w) must be an object") }
    return d
}

private func roleCode(_ role: String, _ w: String) throws -> Double {
    if role == "input" { return 1.0 }
    if role == "hidden" { return 0.0 }
    throw ThorError.usage("\(w): role must be 'input' or 'hidden', got '\(role)'")
}

// ---------------------------------------------------------------------- one kind
struct Row {
    let mu: Double
    let variance: Double
    let v: [Double]
    let u: [Double]
}

final class KindModel {
    let kind: String
    let features: [String]
    let hasRole: Bool
    let isLog: Bool
    let xMean: [Double], xScale: [Double], lengthScale: [Double], alpha: [Double]
    let constant: Double, noise: Double, jitter: Double, yMean: Double, yScale: Double, yVarScale: Double
    let trainU: [[Double]]  // x_train / length_scale
    var lInv: [[Double]] = []  // rows of L^-1, row i has i + 1 entries
    let n: Int

    init(kind: String, entry: Any) throws {
        let w = "kinds['\(kind)']"
        let d = try object(entry, w)
        guard let fl = try field(d, "features", w) as? [String], !fl.isEmpty, Set(fl).count == fl.count else {
            throw ThorError.format("estimator: \(w).features must be a non-empty list of distinct names")
        }
        let nd = fl.count
        guard (try field(d, "feature_transform", w)) as? String == "log1p" else {
            throw ThorError.format("estimator: \(w).feature_transform must be 'log1p'")
        }
        let tt = (try field(d, "target_transform", w)) as? String
        guard tt == "log" || tt == "linear" else {
            throw ThorError.format("estimator: \(w).target_transform must be 'log' or 'linear'")
        }
        let k = try object(try field(d, "kernel", w), "\(w).kernel")
        guard try num(try field(k, "nu", "\(w).kernel"), "\(w).kernel.nu") == 2.5 else {
            throw ThorError.format("estimator: \(w).kernel.nu must be 2.5 (Matern 5/2)")
        }
        guard let xTrain = (try field(d, "x_train", w)) as? [Any] else {
            throw ThorError.format("estimator: \(w).x_train must be an array")
        }
        n = xTrain.count
        guard n >= 1 else { throw ThorError.format("estimator: \(w).x_train is empty") }
        guard let ns = (try field(d, "n_samples", w)) as? NSNumber, !isBool(ns), ns.doubleValue == Double(n) else {
            throw ThorError.format("estimator: \(w).n_samples must be the number of x_train rows (\(n))")
        }
        self.kind = kind
        features = fl
        hasRole = fl.contains("role")
        isLog = tt == "log"
        xMean = try nums(try field(d, "x_mean", w), "\(w).x_mean", nd)
        xScale = try nums(try field(d, "x_scale", w), "\(w).x_scale", nd, positiveOnly: true)
        let ls = try nums(try field(k, "length_scale", "\(w).kernel"), "\(w).kernel.length_scale", nd, positiveOnly: true)
        lengthScale = ls
        constant = try positive(try field(k, "constant", "\(w).kernel"), "\(w).kernel.constant")
        noise = try nonNegative(try field(k, "noise_level", "\(w).kernel"), "\(w).kernel.noise_level")
        yMean = try num(try field(d, "y_mean", w), "\(w).y_mean")
        yScale = try positive(try field(d, "y_scale", w), "\(w).y_scale")
        yVarScale = yScale * yScale
        trainU = try xTrain.enumerated().map { (r, row) -> [Double] in
            let x = try nums(row, "\(w).x_train[\(r)]", nd)
            return (0..<nd).map { j in x[j] / ls[j] }
        }
        alpha = try nums(try field(d, "alpha", w), "\(w).alpha", n)
        jitter = try nonNegative(try field(d, "jitter", w), "\(w).jitter")
        lInv = try KindModel.inverseL(cholesky())
    }

    /// Lower Cholesky factor of constant * Matern(train) + (noise + jitter) * I (full rows).
    private func cholesky() throws -> [[Double]] {
        var kdiag = constant + noise
        kdiag += jitter
        let tiny = 1e-13 * kdiag
        var L: [[Double]] = []
        for i in 0..<n {
            var row = [Double](repeating: 0.0, count: i + 1)
            for j in 0..<i {
                var s = 0.0
                for m in 0..<j { s += row[m] * L[j][m] }
                row[j] = (constant * matern52(dist(trainU[i], trainU[j])) - s) / L[j][j]
            }
            var s = 0.0
            for m in 0..<i { s += row[m] * row[m] }
            let dd = kdiag - s
            guard dd > tiny else {
                throw ThorError.format("estimator: kinds['\(kind)']: the kernel matrix of x_train is not positive "
                    + "definite (corrupt kernel or x_train)")
            }
            row[i] = dd.squareRoot()
            L.append(row)
        }
        return L
    }

    private static func inverseL(_ L: [[Double]]) -> [[Double]] {
        var inv: [[Double]] = []
        for i in 0..<L.count {
            var row = [Double](repeating: 0.0, count: i + 1)
            row[i] = 1.0 / L[i][i]
            for j in 0..<i {
                var s = 0.0
                for m in j..<i { s += L[i][m] * inv[m][j] }
                row[j] = -s / L[i][i]
            }
            inv.append(row)
        }
        return inv
    }

    func scaled(_ raw: [Double]) -> [Double] {
        return (0..<raw.count).map { j in ((log1p(raw[j]) - xMean[j]) / xScale[j]) / lengthScale[j] }
    }

    func row(_ raw: [Double]) -> Row {
        let u = scaled(raw)
        var ks = [Double](repeating: 0.0, count: n)
        var mu = 0.0
        for i in 0..<n {
            ks[i] = constant * matern52(dist(u, trainU[i]))
            mu += ks[i] * alpha[i]
        }
        mu = yScale * mu + yMean
        var v = [Double](repeating: 0.0, count: n)
        var vv = 0.0
        for i in 0..<n {
            let r = lInv[i]
            var s = 0.0
            for j in 0...i { s += r[j] * ks[j] }
            v[i] = s
            vv += s * s
        }
        var variance = constant + noise - vv
        if variance < 0.0 { variance = 0.0 }
        return Row(mu: mu, variance: variance * yVarScale, v: v, u: u)
    }

    func moments(_ mu: Double, _ variance: Double) -> (mean: Double, std: Double) {
        if isLog {
            let m = exp(mu + variance / 2.0)
            return (m, m * expm1(variance).squareRoot())
        }
        return (mu, variance.squareRoot())
    }

    func vector(_ values: [String: Any], _ w: String) throws -> [Double] {
        return try features.map { f -> Double in
            guard var x = values[f] else {
                throw ThorError.usage("\(w): kind '\(kind)' needs feature '\(f)' (features: "
                    + features.joined(separator: ", ") + ")")
            }
            if f == "role", let s = x as? String { x = try roleCode(s, w) }
            // JSON numbers, Double and Int all bridge to NSNumber; a Bool bridges to a CFBoolean
            guard let v = x as? NSNumber, !isBool(v) else {
                throw ThorError.usage("\(w): feature '\(f)' must be a number")
            }
            let d = v.doubleValue
            guard d > -1.0, d.isFinite else {
                throw ThorError.usage("\(w): feature '\(f)' must be a finite number > -1, got \(d)")
            }
            return d
        }
    }
}

// ---------------------------------------------------------------------- the estimator
public final class Estimator {
    public static let format = "thor-sdk/estimator"
    public static let version = 1
    public let metric: String
    public let unit: String
    public let device: [String: Any]
    let models: [String: KindModel]

    public static func load(json: String) throws -> Estimator {
        return try Estimator(data: Data(json.utf8))
    }

    public init(data: Data) throws {
        let parsed: Any
        do {
            parsed = try JSONSerialization.jsonObject(with: data, options: [])
        } catch {
            throw ThorError.format("not valid JSON: \(error.localizedDescription)")
        }
        let doc = try object(parsed, "top level")
        let fmt = doc["format"] as? String
        guard fmt == Estimator.format else {
            throw ThorError.format("not a thor-sdk estimator: format is \(fmt ?? "missing"), expected '\(Estimator.format)'")
        }
        guard let ver = doc["version"] as? NSNumber, !isBool(ver), ver.doubleValue == Double(Estimator.version) else {
            throw ThorError.format("unsupported estimator version \(doc["version"] ?? "missing"); this runtime reads version \(Estimator.version)")
        }
        guard let metric = (try field(doc, "metric", "top level")) as? String else {
            throw ThorError.format("estimator: metric must be a string")
        }
        let expectedUnit: String
        switch metric {
        case "time": expectedUnit = "s"
        case "energy": expectedUnit = "J"
        default: throw ThorError.format("estimator: metric must be 'time' or 'energy', got '\(metric)'")
        }
        guard let unit = (try field(doc, "unit", "top level")) as? String, unit == expectedUnit else {
            throw ThorError.format("estimator: unit of metric '\(metric)' must be '\(expectedUnit)'")
        }
        self.metric = metric
        self.unit = unit
        device = try object(try field(doc, "device", "top level"), "device")
        let fb = try object(try field(doc, "flops_baseline", "top level"), "flops_baseline")
        _ = try num(try field(fb, "unit_per_flop", "flops_baseline"), "flops_baseline.unit_per_flop")
        let kinds = try object(try field(doc, "kinds", "top level"), "kinds")
        guard !kinds.isEmpty else { throw ThorError.format("estimator: kinds is empty") }
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

    private func model(_ kind: String) throws -> KindModel {
        guard let m = models[kind] else {
            throw ThorError.notFound("estimator has no GP for kind '\(kind)'; probe it on this device")
        }
        return m
    }

    /// Mean and std of one layer's cost in `unit`; `features` maps the kind's feature names
    /// (config features, "batch_size", "role" as 1/0 or "input"/"hidden") to numbers.
    public func predictLayer(kind: String, features: [String: Any]) throws -> (mean: Double, std: Double) {
        let m = try model(kind)
        let r = m.row(try m.vector(features, "layer of kind '\(kind)'"))
        return m.moments(r.mu, r.variance)
    }

    /// Per-layer and whole-model cost of one training step at `batchSize`.
    public func estimate(layers: [Layer], batchSize: Int) throws -> Estimate {
        guard batchSize >= 1 else { throw ThorError.usage("batch size must be a positive integer, got \(batchSize)") }
        var order: [String] = []  // kinds in first-seen order
        var groups: [String: [[Double]]] = [:]  // kind -> distinct feature vectors, first-seen order
        var counts: [String: [[Double]: Int]] = [:]
        var keys: [[Double]] = []
        for (i, layer) in layers.enumerated() {
            let m = try model(layer.kind)
            var values: [String: Any] = layer.config
            values["batch_size"] = Double(batchSize)
            if m.hasRole {
                guard layer.role == "input" || layer.role == "hidden" else {
                    throw ThorError.usage("layer \(i) (\(layer.kind)): role must be 'input' or 'hidden', got '\(layer.role)'")
                }
                values["role"] = try roleCode(layer.role, "layer \(i)")
            }
            let key = try m.vector(values, "layer \(i) (\(layer.name))")
            if groups[layer.kind] == nil {
                order.append(layer.kind)
                groups[layer.kind] = []
                counts[layer.kind] = [:]
            }
            if counts[layer.kind]![key] == nil {
                groups[layer.kind]!.append(key)
            }
            counts[layer.kind]![key, default: 0] += 1
            keys.append(key)
        }
        var results: [String: [[Double]: (mean: Double, std: Double)]] = [:]
        var totalMean = 0.0
        var totalVar = 0.0
        for kind in order {
            let m = models[kind]!
            var rows: [Row] = []
            var cs: [Double] = []
            var means: [Double] = []
            var res: [[Double]: (mean: Double, std: Double)] = [:]
            for key in groups[kind]! {
                let r = m.row(key)
                let ms = m.moments(r.mu, r.variance)
                let c = counts[kind]![key]!
                res[key] = ms
                rows.append(r)
                cs.append(Double(c))
                means.append(ms.mean)
                totalMean += Double(c) * ms.mean
            }
            results[kind] = res
            totalVar += Estimator.groupVar(m, rows, cs, means)
        }
        var out: [LayerEstimate] = []
        for (i, layer) in layers.enumerated() {
            let ms = results[layer.kind]![keys[i]]!
            out.append(LayerEstimate(layer: layer, mean: ms.mean, std: ms.std))
        }
        return Estimate(metric: metric, unit: unit, batchSize: batchSize, totalMean: totalMean,
                        totalStd: totalVar > 0.0 ? totalVar.squareRoot() : 0.0, layers: out)
    }

    /// Variance (original units) of the summed cost of all layers of one kind.
    static func groupVar(_ m: KindModel, _ rows: [Row], _ counts: [Double], _ means: [Double]) -> Double {
        let c = m.constant
        let ys2 = m.yVarScale
        var total = 0.0
        for a in 0..<rows.count {
            let ra = rows[a]
            let ca = counts[a]
            let ma = means[a]
            // the layer with itself (includes the white noise) and with its (ca - 1) identical twins
            let twin = ca > 1 ? ys2 * (c - dot(ra.v, ra.v)) : 0.0
            if m.isLog {
                total += ca * ma * ma * expm1(ra.variance)
                if ca > 1 { total += ca * (ca - 1) * ma * ma * expm1(twin) }
            } else {
                total += ca * ra.variance
                if ca > 1 { total += ca * (ca - 1) * twin }
            }
            for b in (a + 1)..<rows.count {
                let rb = rows[b]
                let cov = ys2 * (c * matern52(dist(ra.u, rb.u)) - dot(ra.v, rb.v))
                if m.isLog {
                    total += 2.0 * ca * counts[b] * ma * means[b] * expm1(cov)
                } else {
                    total += 2.0 * ca * counts[b] * cov
                }
            }
        }
        return total
    }
}
