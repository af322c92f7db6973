// Owns the Swift device-level tests: the shared levels.json vectors (deviceLevel, level, atLevel), mirroring
// android_harness/runtime/src/test/.../LevelTest.java. Untested on the development machine (no Swift
// toolchain); run `swift test` in ios_harness/Runtime on macOS.

import Foundation
import XCTest

@testable import ThorRuntime

final class LevelTests: XCTestCase {
    /// Relative tolerance; identical readings: the Python runtime's exact sum leaves ~1e-16 of spread where
    /// plain sums leave 0, hence an absolute one near zero.
    let rtol = 1e-9, atol = 1e-12

    func text(_ name: String) throws -> String { return try TestVectors.text(name) }

    func cases(_ key: String) throws -> [[String: Any]] {
        let data = try Data(contentsOf: TestVectors.url("levels.json"))
        let vec = try JSONSerialization.jsonObject(with: data) as! [String: Any]
        return vec[key] as! [[String: Any]]
    }

    func num(_ v: Any?) -> Double {
        return (v as! NSNumber).doubleValue
    }

    func close(_ what: String, _ expected: Double, _ got: Double, line: UInt = #line) {
        let ok = abs(got - expected) <= rtol * abs(expected) || (abs(expected) < atol && abs(got) < atol)
        XCTAssertTrue(ok, "\(what): expected \(expected) got \(got)", line: line)
    }

    func readings(_ v: Any?) -> [Double] {
        return (v as! [Any]).map { num($0) }
    }

    /// The error class a call raises ("not_found", "format", "usage"), or nil when it returns.
    func errorClass(_ body: () throws -> Void) -> String? {
        do {
            try body()
            return nil
        } catch ThorError.notFound {
            return "not_found"
        } catch ThorError.format {
            return "format"
        } catch ThorError.usage {
            return "usage"
        } catch {
            return "other: \(error)"
        }
    }

    func checkLevel(_ what: String, _ q: [String: Any], _ got: Level) {
        let exp = q["expected"] as! [String: Any]
        close("\(what) level", num(exp["level"]), got.level)
        close("\(what) log_std", num(exp["log_std"]), got.logStd)
        XCTAssertEqual(Int(num(exp["readings"])), got.readings, what)
    }

    func testDeviceLevelReproducesTheVectors() throws {
        var refused = 0
        for q in try cases("device_level") {
            let what = q["what"] as! String
            var got: Level? = nil
            let err = errorClass {
                got = try Estimator.deviceLevel(readings: readings(q["readings"]),
                                                referenceValue: num(q["reference_value"]),
                                                driftLogStd: num(q["drift_log_std"]))
            }
            XCTAssertEqual(q["error"] as? String, err, what)
            if let got = got, err == nil {
                checkLevel(what, q, got)
            } else {
                refused += 1
            }
        }
        XCTAssertGreaterThanOrEqual(refused, 5)
    }

    func testEstimatorLevelReadsTheReferenceProbe() throws {
        var checked = 0
        for q in try cases("estimator_level") {
            let what = q["what"] as! String
            let est = try Estimator.load(json: try text(q["estimator"] as! String))
            var got: Level? = nil
            let err = errorClass { got = try est.level(readings: readings(q["readings"])) }
            XCTAssertEqual(q["error"] as? String, err, what)
            if let got = got, err == nil {
                checkLevel(what, q, got)
                checked += 1
            }
        }
        XCTAssertEqual(2, checked)
    }

    func testEstimatesAtALevelReproduceTheVectors() throws {
        var checked = 0
        for q in try cases("at_level") {
            let what = "\(q["what"]!) b\(q["batch_size"]!)"
            let est = try Estimator.load(json: try text(q["estimator"] as! String))
            let layers = try LayerList.parse(json: try text(q["layers"] as! String)).layers
            var got: Estimate? = nil
            let err = errorClass {
                let level = try Level(level: num(q["level"]), logStd: num(q["log_std"]))
                got = try est.estimate(layers: layers, batchSize: Int(num(q["batch_size"])), level: level)
            }
            XCTAssertEqual(q["error"] as? String, err, what)
            guard let e = got, err == nil else { continue }
            let exp = q["expected"] as! [String: Any]
            for (part, mean, std) in [("total", e.totalMean, e.totalStd),
                                      ("layers_total", e.layersTotalMean, e.layersTotalStd)] {
                let want = exp[part] as! [String: Any]
                close("\(what) \(part) mean", num(want["mean"]), mean)
                close("\(what) \(part) std", num(want["std"]), std)
            }
            let ls = exp["layers"] as! [[Any]]
            XCTAssertEqual(ls.count, e.layers.count, what)
            for (i, pair) in ls.enumerated() where i < e.layers.count {
                close("\(what) layer \(i) mean", num(pair[0]), e.layers[i].mean)
                close("\(what) layer \(i) std", num(pair[1]), e.layers[i].std)
            }
            XCTAssertNotNil(e.level, what)
            checked += 1
        }
        XCTAssertGreaterThanOrEqual(checked, 8)
    }

    func testAnEstimateIsPutAtALevelOnce() throws {
        let est = try Estimator.load(json: try text("estimator_time_profile.json"))
        let layers = try LayerList.parse(json: try text("layers_time_profile_0.json")).layers
        let level = try Level(level: 0.9, logStd: 0.01)
        let e = try est.estimate(layers: layers, batchSize: 16, level: level)
        XCTAssertEqual("usage", errorClass { _ = try Estimator.atLevel(e, level) })
        XCTAssertNil(try est.estimate(layers: layers, batchSize: 16, level: nil).level)
    }
}
