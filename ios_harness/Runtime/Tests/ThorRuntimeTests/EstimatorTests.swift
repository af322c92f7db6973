// Reproduces the shared test vectors (tests/vectors, computed by scikit-learn) with the Swift runtime,
// mirroring android_harness/runtime/src/test/.../EstimatorTest.java. Untested on the development
// machine (no Swift toolchain); run `swift test` in ios_harness/Runtime on macOS.

import Foundation
import XCTest

import ThorRuntime

final class EstimatorTests: XCTestCase {
    let rtol = 1e-9

    var vectors: URL { TestVectors.folder }

    func read(_ name: String) throws -> String {
        return try String(contentsOf: vectors.appendingPathComponent(name), encoding: .utf8)
    }

    func json(_ name: String) throws -> [String: Any] {
        let data = try Data(contentsOf: vectors.appendingPathComponent(name))
        return try JSONSerialization.jsonObject(with: data) as! [String: Any]
    }

    func close(_ what: String, _ expected: Double, _ got: Double) {
        XCTAssertLessThanOrEqual(abs(got - expected), rtol * abs(expected) + 1e-300,
                                 "\(what): expected \(expected) got \(got)")
    }

    func layers(_ list: Any?) -> [Layer] {
        return (list as! [[String: Any]]).map { l in
            Layer(name: l["name"] as! String, kind: l["kind"] as! String, role: l["role"] as! String,
                  config: (l["config"] as! [String: Any]).mapValues { ($0 as! NSNumber).doubleValue })
        }
    }

    func testReproducesSharedVectors() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: vectors.path)
            .filter { $0.hasPrefix("expected_") && $0.hasSuffix(".json") }.sorted()
        XCTAssertFalse(names.isEmpty)
        var checked = 0
        for name in names {
            let exp = try json(name)
            let est = try Estimator.load(json: try read(exp["estimator"] as! String))
            for q in exp["predict_layer"] as! [[String: Any]] {
                let ms = try est.predictLayer(kind: q["kind"] as! String, features: q["features"] as! [String: Any])
                close("\(name) predictLayer mean", (q["mean"] as! NSNumber).doubleValue, ms.mean)
                close("\(name) predictLayer std", (q["std"] as! NSNumber).doubleValue, ms.std)
                checked += 1
            }
            for e in exp["estimate"] as! [[String: Any]] {
                let bs = (e["batch_size"] as! NSNumber).intValue
                let r = try est.estimate(layers: layers(e["layers"]), batchSize: bs)
                let total = e["total"] as! [String: Any]
                close("\(name) total mean", (total["mean"] as! NSNumber).doubleValue, r.totalMean)
                close("\(name) total std", (total["std"] as! NSNumber).doubleValue, r.totalStd)
                let means = e["layer_means"] as! [NSNumber]
                let stds = e["layer_stds"] as! [NSNumber]
                XCTAssertEqual(means.count, r.layers.count)
                for i in 0..<means.count {
                    close("layer mean", means[i].doubleValue, r.layers[i].mean)
                    close("layer std", stds[i].doubleValue, r.layers[i].std)
                }
                checked += 1
            }
        }
        XCTAssertGreaterThanOrEqual(checked, 4)
    }

    func assertFormatError(_ text: String, _ fragment: String) {
        XCTAssertThrowsError(try Estimator.load(json: text)) { error in
            guard let thor = error as? ThorError, case .format(let message) = thor else {
                return XCTFail("expected ThorError.format, got \(error)")
            }
            XCTAssertTrue(message.contains(fragment), message)
        }
    }

    func testRejectsBrokenFiles() throws {
        let good = try read("estimator_time_log.json")
        assertFormatError(String(good.prefix(good.count / 2)), "not valid JSON")
        assertFormatError("[1, 2]", "must be an object")
        assertFormatError(good.replacingOccurrences(of: "\"version\":1", with: "\"version\":2"), "version")
        assertFormatError(good.replacingOccurrences(of: "\"alpha\":", with: "\"alpha_gone\":"), "lacks field 'alpha'")
        assertFormatError(good.replacingOccurrences(of: "\"unit\":\"s\"", with: "\"unit\":\"J\""), "unit")
        assertFormatError(good.replacingOccurrences(of: "\"nu\":2.5", with: "\"nu\":1.5"), "nu")
    }

    func testUnknownKindIsNamed() throws {
        let est = try Estimator.load(json: try read("estimator_time_log.json"))
        let l = Layer(name: "x", kind: "lstm", role: "hidden", config: ["input_size": 8])
        XCTAssertThrowsError(try est.estimate(layers: [l], batchSize: 8)) { error in
            XCTAssertEqual(error as? ThorError,
                           ThorError.notFound("estimator has no GP for kind 'lstm'; probe it on this device"))
        }
    }

    func testIdenticalLayersAreCorrelated() throws {
        let est = try Estimator.load(json: try read("estimator_time_log.json"))
        let l = Layer(name: "r", kind: "relu", role: "hidden", config: ["numel": 4704])
        let one = try est.estimate(layers: [l], batchSize: 32)
        let three = try est.estimate(layers: [l, l, l], batchSize: 32)
        close("3x mean", 3 * one.totalMean, three.totalMean)
        XCTAssertGreaterThan(three.totalStd, 3.0.squareRoot() * one.totalStd)
        XCTAssertLessThanOrEqual(three.totalStd, 3 * one.totalStd * (1 + 1e-12))
    }
}
