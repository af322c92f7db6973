// Owns reading the layer-list JSON an app ships beside the estimator (format thor-sdk/layers, version 1) in Swift.
//
// Mirrors android_harness/runtime/.../LayerList.java. Checks what thor_sdk/schemas/layers.schema.json says
// (format, version, a non-empty `layers` array, each layer's `kind` string, `config` of numbers >= 0,
// optional `name`, `role` and `cost`) plus what this runtime needs and `thor-sdk layers MODEL --out
// FILE.json` always writes: every layer's `role` (a layer of kind `output` may leave it out) and its
// `cost` terms. It does not know the kinds: a kind the estimator lacks is reported by
// `Estimator.estimate`. Any problem is a ThorError.format naming the layer (docs/layer-list.md).
//
// UNTESTED HERE: no Swift toolchain on the development machine; Tests/ThorRuntimeTests/LayerListTests.swift
// reads the shared layers_*.json vectors (`swift test` on macOS).
//
//   let list = try LayerList.parse(json: text)
//   let e = try est.estimate(layers: list.layers, batchSize: 32)

import Foundation

public struct LayerList {
    public static let format = "thor-sdk/layers"
    public static let version = 1
    static let roles = ["input", "hidden", "output"]

    /// The model's name (nil when the file has none).
    public let name: String?
    /// Per-sample input shape (empty when the file has none).
    public let inputShape: [Int]
    /// "float32" (the default) or "int64".
    public let inputDtype: String
    /// The layers in execution order, each with its role and cost terms.
    public let layers: [Layer]

    private static func bad(_ what: String) -> ThorError {
        return ThorError.format("layer list: \(what)")
    }

    private static func isBoolean(_ n: NSNumber) -> Bool {
        return CFGetTypeID(n as CFTypeRef) == CFBooleanGetTypeID()
    }

    /// The number a JSON value holds (not a boolean), or nil.
    private static func number(_ v: Any?) -> Double? {
        guard let n = v as? NSNumber, !isBoolean(n) else { return nil }
        return n.doubleValue
    }

    private static func object(_ v: Any?, _ w: String) throws -> [String: Any] {
        guard let d = v as? [String: Any] else { throw bad("\(w) must be an object") }
        return d
    }

    private static func optionalString(_ d: [String: Any], _ key: String, _ w: String) throws -> String? {
        guard let v = d[key], !(v is NSNull) else { return nil }
        guard let s = v as? String else { throw bad("\(w)\(key) must be a string") }
        return s
    }

    /// key -> number of an object whose values must all be finite numbers >= 0.
    private static func numbers(_ v: Any?, _ w: String) throws -> [String: Double] {
        let d = try object(v, w)
        var out: [String: Double] = [:]
        for (key, value) in d {
            guard let x = number(value), x >= 0.0, x.isFinite else {
                throw bad("\(w).\(key) must be a number >= 0, got \(value)")
            }
            out[key] = x
        }
        return out
    }

    /// Parses and checks a layer-list JSON text; ThorError.format on any problem.
    public static func parse(json: String) throws -> LayerList {
        return try LayerList(data: Data(json.utf8))
    }

    public init(data: Data) throws {
        let parsed: Any
        do {
            parsed = try JSONSerialization.jsonObject(with: data, options: [])
        } catch {
            throw ThorError.format("not valid JSON: \(error.localizedDescription)")
        }
        let doc = try LayerList.object(parsed, "top level")
        guard let fmt = doc["format"] as? String, fmt == LayerList.format else {
            throw ThorError.format("not a thor-sdk layer list: format is \(doc["format"] ?? "missing"), expected '"
                + "\(LayerList.format)'")
        }
        guard let ver = LayerList.number(doc["version"]), ver == Double(LayerList.version) else {
            throw ThorError.format("unsupported layer-list version \(doc["version"] ?? "missing"); this runtime reads "
                + "version \(LayerList.version)")
        }
        name = try LayerList.optionalString(doc, "name", "")
        var shape: [Int] = []
        if let s = doc["input_shape"], !(s is NSNull) {
            guard let a = s as? [Any] else { throw LayerList.bad("input_shape must be an array of positive integers") }
            for x in a {
                guard let d = LayerList.number(x), d >= 1, d == d.rounded(), d <= Double(Int32.max) else {
                    throw LayerList.bad("input_shape must be an array of positive integers, got \(x)")
                }
                shape.append(Int(d))
            }
        }
        inputShape = shape
        let dtype = try LayerList.optionalString(doc, "input_dtype", "") ?? "float32"
        guard dtype == "float32" || dtype == "int64" else {
            throw LayerList.bad("input_dtype must be 'float32' or 'int64', got '\(dtype)'")
        }
        inputDtype = dtype
        guard let raw = doc["layers"] as? [Any], !raw.isEmpty else {
            throw LayerList.bad("layers must be a non-empty array")
        }
        layers = try raw.enumerated().map { i, o in try LayerList.layer(o, i) }
    }

    private static func layer(_ o: Any, _ i: Int) throws -> Layer {
        let l = try object(o, "layer \(i)")
        let label = (l["name"] as? String) ?? String(i)
        let w = "layer \(i) (\(label))"
        let name = try optionalString(l, "name", "\(w): ")
        guard let kind = l["kind"] as? String else { throw bad("\(w): kind must be a string") }
        guard l["config"] != nil else { throw bad("\(w): lacks field 'config'") }
        let config = try numbers(l["config"], "\(w): config")
        var role = try optionalString(l, "role", "\(w): ")
        if role == nil && kind == "output" {
            role = "output"
        }
        guard let theRole = role else {
            throw bad("\(w): no role; this runtime needs each layer's role and cost terms as "
                + "`thor-sdk layers MODEL --out FILE.json` writes them")
        }
        guard roles.contains(theRole) else {
            throw bad("\(w): role must be 'input', 'hidden' or 'output', got '\(theRole)'")
        }
        guard let c = l["cost"], !(c is NSNull) else {
            throw bad("\(w): no cost terms; this runtime needs each layer's \"cost\" ("
                + termKeys.joined(separator: ", ") + ") as `thor-sdk layers MODEL --out FILE.json` writes them")
        }
        let costObject = try object(c, "\(w): cost")
        _ = try numbers(costObject, "\(w): cost")
        let cost: Cost
        do {
            cost = try Cost(json: costObject)
        } catch ThorError.usage(let m) {
            throw bad("\(w): \(m)")
        }
        do {
            _ = try cost.checked(w)  // launches > 0
        } catch ThorError.usage(let m) {
            throw bad(m)
        }
        let op = try optionalString(l, "op", "\(w): ")
        let approx = try optionalString(l, "approx", "\(w): ")
        if op?.isEmpty == true || approx?.isEmpty == true {
            throw bad("\(w): op and approx must be non-empty strings")
        }
        var recompute = 0.0
        if let r = l["recompute"], !(r is NSNull) {
            guard let x = number(r), x >= 0.0, x <= 1.0 else {
                throw bad("\(w): recompute must be a number in [0, 1], got \(r)")
            }
            recompute = x
        }
        return Layer(name: name ?? String(i), kind: kind, role: theRole, config: config, cost: cost, op: op,
                     approx: approx, recompute: recompute)
    }
}
