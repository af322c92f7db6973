// Owns the Swift estimator runtime's tests: the shared format-2 vectors, malformed files and bad inputs,
// mirroring android_harness/runtime/src/test/.../EstimatorTest.java. Untested on the development
// machine (no Swift toolchain); run `swift test` in ios_harness/Runtime on macOS.

import Foundation
import XCTest

@testable import ThorRuntime

final class EstimatorTests: XCTestCase {
    let rtol = 1e-9
    /// The expected_*.json cases every runtime reproduces.
    let cases = ["expected_time_profile.json", "expected_energy_floored.json", "expected_time_grouped.json",
                 "expected_time_stand_in.json", "expected_time_defaults.json", "expected_time_unread.json",
                 "expected_time_frozen.json", "expected_time_step_bytes.json", "expected_time_gemm.json",
                 "expected_time_per_call.json", "expected_time_shared_launch.json",
                 "expected_time_shared_launch_v4.json"]
    /// Cost terms of a relu over 4704 numbers (any finite non-negative terms would do here).
    let reluCost = Cost(flopsPerSample: 9408, flopsFixed: 0, bytesPerSample: 75264, bytesFixed: 0)

    var vectors: URL { TestVectors.folder }

    func read(_ name: String) throws -> String {
        return try String(contentsOf: vectors.appendingPathComponent(name), encoding: .utf8)
    }

    func json(_ name: String) throws -> [String: Any] {
        let data = try Data(contentsOf: vectors.appendingPathComponent(name))
        return try JSONSerialization.jsonObject(with: data) as! [String: Any]
    }

    func num(_ v: Any?) -> Double {
        return (v as! NSNumber).doubleValue
    }

    func close(_ what: String, _ expected: Double, _ got: Double) {
        XCTAssertLessThanOrEqual(abs(got - expected), rtol * abs(expected) + 1e-300,
                                 "\(what): expected \(expected) got \(got)")
    }

    func layers(_ list: Any?) throws -> [Layer] {
        return try (list as! [[String: Any]]).map { l in
            Layer(name: l["name"] as! String, kind: l["kind"] as! String, role: l["role"] as! String,
                  config: (l["config"] as! [String: Any]).mapValues { ($0 as! NSNumber).doubleValue },
                  cost: try Cost(json: l["cost"] as! [String: Any]), op: l["op"] as? String,
                  approx: l["approx"] as? String, recompute: (l["recompute"] as? NSNumber)?.doubleValue ?? 0.0)
        }
    }

    func testReproducesSharedVectors() throws {
        var checked = 0
        for name in cases {
            let exp = try json(name)
            let est = try Estimator.load(json: try read(exp["estimator"] as! String))
            for q in exp["predict_layer"] as! [[String: Any]] {
                let ms = try est.predictLayer(kind: q["kind"] as! String, features: q["features"] as! [String: Any],
                                              cost: try Cost(json: q["cost"] as! [String: Any]))
                close("\(name) predictLayer mean", num(q["mean"]), ms.mean)
                close("\(name) predictLayer std", num(q["std"]), ms.std)
                checked += 1
            }
            for e in exp["estimate"] as! [[String: Any]] {
                let bs = (e["batch_size"] as! NSNumber).intValue
                let r = try est.estimate(layers: try layers(e["layers"]), batchSize: bs)
                let total = e["total"] as! [String: Any]
                let layersTotal = e["layers_total"] as! [String: Any]
                close("\(name) total mean", num(total["mean"]), r.totalMean)
                close("\(name) total std", num(total["std"]), r.totalStd)
                close("\(name) layers_total mean", num(layersTotal["mean"]), r.layersTotalMean)
                close("\(name) layers_total std", num(layersTotal["std"]), r.layersTotalStd)
                let means = e["layer_means"] as! [NSNumber]
                let stds = e["layer_stds"] as! [NSNumber]
                XCTAssertEqual(means.count, r.layers.count)
                let unread = (e["layer_unread"] as? [NSNumber])?.map { $0.intValue } ?? []
                for i in 0..<min(means.count, r.layers.count) {
                    close("\(name) layer \(i) mean", means[i].doubleValue, r.layers[i].mean)
                    close("\(name) layer \(i) std", stds[i].doubleValue, r.layers[i].std)
                    // a layer read at a feature its kind's model predates is flagged (and explained), no other
                    XCTAssertEqual(unread.contains(i), r.layers[i].unreadFeature, "\(name) layer \(i) unread feature")
                    if unread.contains(i) {
                        XCTAssertTrue(r.layers[i].approx?.contains("predates its feature") ?? false)
                    }
                }
                XCTAssertEqual(bs, r.batchSize)
                XCTAssertEqual(est.metric, r.metric)
                XCTAssertEqual(est.runtime, r.runtime)
                XCTAssertEqual(est.deviceName, r.device)
                checked += 1
            }
        }
        XCTAssertGreaterThanOrEqual(checked, 8)
    }

    func vectorText() throws -> String {
        return try read("estimator_time_profile.json")
    }

    func assertFormatError(_ text: String, _ fragment: String, line: UInt = #line) {
        XCTAssertThrowsError(try Estimator.load(json: text), line: line) { error in
            guard let thor = error as? ThorError, case .format(let message) = thor else {
                return XCTFail("expected ThorError.format, got \(error)", line: line)
            }
            XCTAssertTrue(message.contains(fragment), message, line: line)
            XCTAssertFalse(message.contains("\n"), line: line)
        }
    }

    /// `good` with its first occurrence of `from` replaced, which must be there.
    func first(_ good: String, _ from: String, _ to: String) -> String {
        guard let r = good.range(of: from) else {
            XCTFail("vector lacks \(from)")
            return good
        }
        return good.replacingCharacters(in: r, with: to)
    }

    /// `good` with the first number after `"key":[` (or `"key":[[`) replaced by `to`.
    func firstNumber(_ good: String, _ key: String, _ to: String) -> String {
        guard let r = good.range(of: "\"\(key)\":\\[+[^,\\]]+", options: .regularExpression) else {
            XCTFail("vector lacks \(key)")
            return good
        }
        let match = good[r]
        let prefix = match[..<match.range(of: "[", options: .backwards)!.upperBound]
        return good.replacingCharacters(in: r, with: String(prefix) + to)
    }

    func testRejectsBrokenFiles() throws {
        let good = try vectorText()
        XCTAssertNoThrow(try Estimator.load(json: good))
        assertFormatError(String(good.prefix(good.count / 2)), "not valid JSON")
        assertFormatError("[1, 2]", "must be an object")
        assertFormatError(first(good, "\"version\":2", "\"version\":1"), "refit the campaign with `thor-sdk fit`")
        assertFormatError(first(good, "\"version\":2", "\"version\":6"), "unsupported estimator version 6")
        assertFormatError(first(good, "\"version\":2", "\"version\":2.5"), "unsupported estimator version 2.5")
        XCTAssertNoThrow(try Estimator.load(json: first(good, "\"version\":2", "\"version\":3")))
        XCTAssertNoThrow(try Estimator.load(json: first(good, "\"version\":2", "\"version\":4")))
        assertFormatError(first(good, "\"per_byte\":", "\"per_call\":-1,\"per_byte\":"), "per_call must be >= 0")
        assertFormatError(first(good, "\"per_byte\":", "\"per_step_byte\":-1,\"per_byte\":"),
                          "per_step_byte must be >= 0")
        assertFormatError(first(good, "\"format\":\"thor-sdk/estimator\"", "\"format\":\"x\""), "format")
        assertFormatError(first(good, "\"residual_offset\":", "\"residual_offset\":NaN,\"was\":"), "not valid JSON")
        assertFormatError(first(good, "\"runtime\":\"torch\",", ""), "lacks field 'runtime'")
        assertFormatError(first(good, "\"runtime\":\"torch\"", "\"runtime\":3"), "runtime must be a string")
        assertFormatError(good.replacingOccurrences(of: "\"alpha\":", with: "\"alpha_gone\":"), "lacks field 'alpha'")
        assertFormatError(good.replacingOccurrences(of: "\"alpha\":[", with: "\"alpha\":[1.0,"), "alpha has")
        assertFormatError(first(good, "\"var_factor\":[[", "\"var_factor\":[[1.0,"), ".var_factor[0] has")
        assertFormatError(first(good, "\"inducing\":[[", "\"inducing\":[[1.0,"), ".inducing[0] has")
        assertFormatError(first(good, "\"x_mean\":[", "\"x_mean\":[1.0,"), ".x_mean has")
        assertFormatError(firstNumber(good, "x_scale", "0"), ".x_scale[0] must be > 0")
        assertFormatError(good.replacingOccurrences(of: "\"per_flop\":", with: "\"per_flop\":-1e-9,\"was\":"),
                          "per_flop must be >= 0")
        assertFormatError(good.replacingOccurrences(of: "\"overhead\":", with: "\"overhead\":0,\"was\":"),
                          "overhead must be > 0")
        assertFormatError(good.replacingOccurrences(of: "\"per_byte\":", with: "\"per_byte_gone\":"),
                          "lacks field 'per_byte'")
        assertFormatError(good.replacingOccurrences(of: "\"residual_offset\":", with: "\"residual_offset\":61,\"was\":"),
                          "|residual_offset| above 60")
        assertFormatError(good.replacingOccurrences(of: "\"residual_offset\":",
                                                    with: "\"residual_offset\":\"1.0\",\"was\":"),
                          "residual_offset must be a number")
        assertFormatError(good.replacingOccurrences(of: "\"constant\":", with: "\"constant\":true,\"was\":"),
                          "constant must be a number")
        assertFormatError(good.replacingOccurrences(of: "\"noise_level\":", with: "\"noise_level\":25,\"was\":"),
                          "constant + noise_level exceeds 25")
        assertFormatError(firstNumber(good, "length_scale", "1e-300"), "length_scale below 1e-6")
        assertFormatError(good.replacingOccurrences(of: "\"unit\":\"s\"", with: "\"unit\":\"J\""), "unit")
        assertFormatError(good.replacingOccurrences(of: "\"nu\":2.5", with: "\"nu\":1.5"), "nu")
        assertFormatError(good.replacingOccurrences(of: "\"n_samples\":", with: "\"n_samples\":0,\"was\":"), "n_samples")
        assertFormatError(good.replacingOccurrences(of: "\"n_samples\":", with: "\"n_samples\":1.5,\"was\":"), "n_samples")
        assertFormatError(first(good, "\"rel_std\":", "\"rel_std\":-0.1,\"was\":"), "rel_std must be >= 0")
        assertFormatError(first(good, "\"rel_std\":", "\"rel_std\":11,\"was\":"), "rel_std above 10")
    }

    /// The caps of the Python and Java readers (EstimatorTest.readerCapsMatchThePythonRuntime).
    func testReaderCapsMatchThePythonRuntime() throws {
        let good = try vectorText()
        assertFormatError(first(good, "\"inducing\":[", "\"inducing\":[" + String(repeating: "[0],", count: 513)),
                          "at most 512 are read")
        assertFormatError(first(good, "\"var_factor\":[", "\"var_factor\":[" + String(repeating: "[0],", count: 65)),
                          "at most 64 are read")
        let kinds = (0..<257).map { "\"k\($0)\":{}," }.joined()
        assertFormatError(first(good, "\"kinds\":{", "\"kinds\":{" + kinds), "kinds; at most 256 are read")
        let row = "[" + String(repeating: "0,", count: 2099) + "0],"  // 500 rows: 1,050,000 numbers
        assertFormatError(first(good, "\"inducing\":[", "\"inducing\":[" + String(repeating: row, count: 500)),
                          "at most 1000000 are read")
        assertFormatError(first(good, "\"inducing\":[", "\"inducing\":[" + String(repeating: " ", count: 8 * 1024 * 1024)),
                          "bytes; at most")
        let est = try Estimator.load(json: good)
        let l = Layer(name: "r", kind: "relu", role: "hidden", config: ["numel": 4704], cost: reluCost)
        let many = [Layer](repeating: l, count: 4097)
        assertUsageError(try est.estimate(layers: many, batchSize: 16), "4097 layers; at most 4096 are estimated at once")
        XCTAssertNoThrow(try est.estimate(layers: Array(many.prefix(4096)), batchSize: 16))
    }

    func convFeatures() -> [String: Any] {
        return ["in_channels": 1, "out_channels": 64, "kernel": 1, "stride": 1, "padding": 1, "groups": 1,
                "height": 28, "width": 28, "bias": 1, "batch_size": 32, "role": "input"]
    }

    func testCorruptAlphaIsAFormatErrorWhereItIsUsed() throws {
        // |k_i| <= constant, so only the residual weights can blow the log residual up
        let est = try Estimator.load(json: firstNumber(try vectorText(), "alpha", "1e300"))
        // another kind: untouched (the first alpha is conv2d's)
        XCTAssertNoThrow(try est.predictLayer(kind: "relu", features: ["numel": 4704, "batch_size": 32, "role": "hidden"],
                                              cost: reluCost))
        let cost = Cost(flopsPerSample: 230400, flopsFixed: 256, bytesPerSample: 467072, bytesFixed: 2560)
        XCTAssertThrowsError(try est.predictLayer(kind: "conv2d", features: convFeatures(), cost: cost)) { error in
            guard let thor = error as? ThorError, case .format(let message) = thor else {
                return XCTFail("expected ThorError.format, got \(error)")
            }
            XCTAssertTrue(message.contains("kinds['conv2d']") && message.contains("corrupt"), message)
        }
    }

    func testUnknownKindIsNamed() throws {
        let est = try Estimator.load(json: try vectorText())
        let l = Layer(name: "x", kind: "lstm", role: "hidden", config: ["input_size": 8], cost: reluCost)
        XCTAssertThrowsError(try est.estimate(layers: [l], batchSize: 8)) { error in
            XCTAssertEqual(error as? ThorError,
                           ThorError.notFound("estimator has no model for kind 'lstm'; probe it on this device"))
        }
        XCTAssertThrowsError(try est.predictLayer(kind: "lstm", features: [:], cost: reluCost))
    }

    func assertUsageError(_ body: @autoclosure () throws -> Any, _ fragment: String, line: UInt = #line) {
        XCTAssertThrowsError(try body(), line: line) { error in
            guard let thor = error as? ThorError, case .usage(let message) = thor else {
                return XCTFail("expected ThorError.usage, got \(error)", line: line)
            }
            XCTAssertTrue(message.contains(fragment), message, line: line)
        }
    }

    func testBadInputsAreUsageErrors() throws {
        let est = try Estimator.load(json: try vectorText())
        var f: [String: Any] = ["batch_size": 8, "role": 0]
        assertUsageError(try est.predictLayer(kind: "relu", features: f, cost: reluCost),
                         "kind 'relu' needs feature 'numel' (features: numel, batch_size, role)")
        f["numel"] = 400
        f["role"] = "sideways"
        assertUsageError(try est.predictLayer(kind: "relu", features: f, cost: reluCost), "role")
        f["role"] = "input"
        let byName = try est.predictLayer(kind: "relu", features: f, cost: reluCost)
        f["role"] = 1
        let byCode = try est.predictLayer(kind: "relu", features: f, cost: reluCost)
        XCTAssertEqual(byName.mean, byCode.mean)
        XCTAssertEqual(byName.std, byCode.std)
        assertUsageError(try est.predictLayer(kind: "relu", features: f, cost: nil), "cost")
        assertUsageError(try est.predictLayer(kind: "relu", features: f,
                                              cost: Cost(flopsPerSample: -1, flopsFixed: 0, bytesPerSample: 0, bytesFixed: 0)),
                         "cost.flops_per_sample must be a finite number >= 0")
        assertUsageError(try est.predictLayer(kind: "relu", features: f,
                                              cost: Cost(flopsPerSample: 0, flopsFixed: 0, bytesPerSample: 0,
                                                         bytesFixed: .nan)),
                         "cost.bytes_fixed")
        f["numel"] = Double.infinity
        assertUsageError(try est.predictLayer(kind: "relu", features: f, cost: reluCost), "'numel' must be a finite number")
        f["numel"] = 400
        f["batch_size"] = 0
        assertUsageError(try est.predictLayer(kind: "relu", features: f, cost: reluCost), "batch_size")
        assertUsageError(try Cost(json: ["flops_per_sample": 1]), "cost.flops_fixed")

        let cfg: [String: Double] = ["numel": 8]
        assertUsageError(try est.estimate(layers: [], batchSize: 0), "batch size")
        assertUsageError(try est.estimate(layers: [Layer(name: "r", kind: "relu", role: "output", config: cfg,
                                                         cost: reluCost)], batchSize: 8),
                         "role must be 'input' or 'hidden'")
        assertUsageError(try est.estimate(layers: [Layer(name: "r7", kind: "relu", role: "hidden", config: cfg,
                                                         cost: nil)], batchSize: 8),
                         "layer 0 (r7): no cost terms")
        let negative = Cost(flopsPerSample: 1, flopsFixed: -1, bytesPerSample: 0, bytesFixed: 0)
        assertUsageError(try est.estimate(layers: [Layer(name: "r", kind: "relu", role: "hidden", config: cfg,
                                                         cost: negative)], batchSize: 8),
                         "cost.flops_fixed")
    }

    func testIdenticalLayersAreCorrelated() throws {
        let est = try Estimator.load(json: try vectorText())
        let l = Layer(name: "r", kind: "relu", role: "hidden", config: ["numel": 4704], cost: reluCost)
        let one = try est.estimate(layers: [l], batchSize: 32)
        let three = try est.estimate(layers: [l, l, l], batchSize: 32)
        close("3x mean", 3 * one.totalMean, three.totalMean)
        XCTAssertGreaterThan(three.layersTotalStd, 3.0.squareRoot() * one.layersTotalStd)
        XCTAssertLessThanOrEqual(three.layersTotalStd, 3 * one.layersTotalStd * (1 + 1e-12))
        // the whole-model term adds (rel_std * mean)^2 to the layers' variance
        XCTAssertGreaterThan(est.wholeModelRelStd, 0)
        let rel = est.wholeModelRelStd * three.totalMean
        close("whole-model std", (three.layersTotalStd * three.layersTotalStd + rel * rel).squareRoot(), three.totalStd)
        // predictLayer agrees with a one-layer estimate
        let ms = try est.predictLayer(kind: "relu", features: ["numel": 4704, "batch_size": 32, "role": "hidden"],
                                      cost: reluCost)
        close("predictLayer mean", one.layers[0].mean, ms.mean)
        close("predictLayer std", one.layers[0].std, ms.std)
    }

    func testGroupedConvolutionsUseTheirVariantEntryOrFallBack() throws {
        XCTAssertEqual(Estimator.modelKey("conv2d", ["groups": 32.0]), "conv2d:grouped")
        XCTAssertEqual(Estimator.modelKey("conv1d", ["groups": 32.0]), "conv1d:grouped")
        XCTAssertEqual(Estimator.modelKey("linear", ["groups": 32.0]), "linear")
        XCTAssertEqual(Estimator.modelKey("conv2d", ["groups": 32.0, "in_channels": 32.0]), "conv2d:grouped")
        // several input channels per group (ResNeXt, RegNetX, ShuffleNetV1): the dense entry
        XCTAssertEqual(Estimator.modelKey("conv2d", ["groups": 32.0, "in_channels": 64.0]), "conv2d")
        XCTAssertEqual(Estimator.modelKey("conv1d", ["groups": 32.0, "in_channels": 64.0]), "conv1d")
        XCTAssertEqual(Estimator.modelKey("conv2d", ["groups": 1.0]), "conv2d")
        XCTAssertEqual(Estimator.modelKey("conv2d", [:]), "conv2d")
        var f: [String: Any] = ["in_channels": 16.0, "out_channels": 16.0, "groups": 16.0, "kernel": 3.0,
                                "stride": 1.0, "padding": 1.0, "height": 14.0, "width": 14.0, "bias": 0.0,
                                "batch_size": 8.0, "role": "hidden"]
        let c = Cost(flopsPerSample: 1e6, flopsFixed: 0, bytesPerSample: 1e5, bytesFixed: 0)
        // a file without the variant entry costs a depthwise layer with the kind's own entry
        let old = try Estimator.load(json: try vectorText())
        XCTAssertNil(old.kinds["conv2d:grouped"])
        XCTAssertGreaterThan(try old.predictLayer(kind: "conv2d", features: f, cost: c).mean, 0)
        // one with it costs the same layer with the variant, and the dense twin with the kind's entry
        let grouped = try Estimator.load(json: try read("estimator_time_grouped.json"))
        let dwMean = try grouped.predictLayer(kind: "conv2d", features: f, cost: c).mean
        f["groups"] = 1.0
        let denseMean = try grouped.predictLayer(kind: "conv2d", features: f, cost: c).mean
        XCTAssertGreaterThan(dwMean, 2 * denseMean)
    }

    func testConvolutionsPyTorchRunsOffOneDnnNameTheGemmEntry() throws {
        let queries = try json("expected_time_gemm.json")["model_key"] as! [[String: Any]]
        var gemm = 0
        for q in queries {
            let kind = q["kind"] as! String
            let config = q["config"] as! [String: Any]
            let key = q["key"] as! String
            let b = num(q["batch_size"])
            XCTAssertEqual(Estimator.modelKey(kind, config, batchSize: b), key, "\(kind) \(config) at batch \(b)")
            if !key.hasSuffix(":grouped") {  // a depthwise 1x1 conv runs off oneDNN too, but is grouped's first
                XCTAssertEqual(Estimator.runsAsGemm(kind, config, b), key.hasSuffix(":gemm"))
            }
            // without a batch size no layer is the gemm variant's
            XCTAssertEqual(Estimator.modelKey(kind, config), key.hasSuffix(":gemm") ? kind : key)
            gemm += key.hasSuffix(":gemm") ? 1 : 0
        }
        XCTAssertTrue(gemm >= 5 && gemm < queries.count - 5)
    }

    func testPaddedFeaturesAreDerivedFromTheirBase() throws {
        XCTAssertEqual(parsePadded("in_channels_pad8")?.base, "in_channels")
        XCTAssertEqual(parsePadded("in_channels_pad8")?.block, 8)
        for bad in ["padding", "x_pad", "_pad8", "x_pad08", "x_pad1025", "x_pad8a", "x_pad-8", "x_pad\u{0663}"] {
            XCTAssertNil(parsePadded(bad), bad)
        }
        XCTAssertEqual(paddedValue(9.0, 8), 16.0 / 9.0)
        XCTAssertEqual(paddedValue(16.0, 8), 1.0)
        XCTAssertEqual(paddedValue(1.0, 8), 8.0)
        let est = try Estimator.load(json: try vectorText())
        XCTAssertTrue(est.kinds["conv2d"]!.contains("in_channels_pad8"))
        var f: [String: Any] = ["in_channels": 3.0, "out_channels": 64.0, "kernel": 3.0, "stride": 1.0,
                                "padding": 1.0, "groups": 1.0, "height": 28.0, "width": 28.0, "bias": 1.0,
                                "batch_size": 32.0, "role": "input"]
        let c = Cost(flopsPerSample: 3e7, flopsFixed: 0, bytesPerSample: 1e6, bytesFixed: 0)
        let mean = try est.predictLayer(kind: "conv2d", features: f, cost: c).mean
        f["in_channels_pad8"] = 1.0  // a config never sets a padded feature: the reader derives it
        XCTAssertEqual(try est.predictLayer(kind: "conv2d", features: f, cost: c).mean, mean)
        f["in_channels"] = 0.5
        assertUsageError(try est.predictLayer(kind: "conv2d", features: f, cost: c),
                         "'in_channels' must be a finite number >= 1")
        f["in_channels"] = nil
        assertUsageError(try est.predictLayer(kind: "conv2d", features: f, cost: c), "needs feature 'in_channels'")
    }

    func testAttributes() throws {
        let est = try Estimator.load(json: try vectorText())
        XCTAssertEqual(est.metric, "time")
        XCTAssertEqual(est.unit, "s")
        XCTAssertEqual(est.runtime, "torch")
        XCTAssertEqual(est.deviceName, "synthetic")
        XCTAssertEqual(est.wholeModelRelStd, 0.08, accuracy: 1e-15)
        XCTAssertNotNil(est.kinds["relu"])
        XCTAssertFalse(est.kinds["output"]!.contains("role"))
        XCTAssertTrue(est.kinds["relu"]!.contains("role"))
        let floored = try Estimator.load(json: try read("estimator_energy_floored.json"))
        XCTAssertEqual(floored.metric, "energy")
        XCTAssertEqual(floored.unit, "J")
        XCTAssertEqual(floored.runtime, "onnxruntime")
    }

    func testFsumIsCorrectlyRounded() {
        XCTAssertEqual(fsum([1.0, 1e-16, -1.0]), 1e-16)
        XCTAssertEqual(fsum([]), 0.0)
        XCTAssertEqual(fsum([Double](repeating: 0.1, count: 10)), 1.0)
        XCTAssertEqual(fsum([1e100, 1.0, -1e100]), 1.0)
    }
}
