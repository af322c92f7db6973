// Owns the Swift training-run tests: the shared training_runs.json vectors and the AS 241 quantile, mirroring
// android_harness/runtime/src/test/.../TrainingRunTest.java. Untested on the development machine (no Swift
// toolchain); run `swift test` in ios_harness/Runtime on macOS.

import Foundation
import XCTest

@testable import ThorRuntime

final class TrainingRunTests: XCTestCase {
    let rtol = 1e-9
    /// AS 241 evaluated the same way in every runtime: only a last-bit log difference may remain.
    let ztol = 1e-13

    func text(_ name: String) throws -> String {
        return try String(contentsOf: TestVectors.url(name), encoding: .utf8)
    }

    func vectors() throws -> [String: Any] {
        let data = try Data(contentsOf: TestVectors.url("training_runs.json"))
        return try JSONSerialization.jsonObject(with: data) as! [String: Any]
    }

    func num(_ v: Any?) -> Double {
        return (v as! NSNumber).doubleValue
    }

    func close(_ expected: Double, _ got: Double, _ tol: Double) -> Bool {
        return abs(got - expected) <= tol * abs(expected) + 1e-300
    }

    func close(_ what: String, _ expected: Double, _ got: Double, line: UInt = #line) {
        XCTAssertTrue(close(expected, got, rtol), "\(what): expected \(expected) got \(got)", line: line)
    }

    /// Loaded estimators and layer lists by file name (each read once per test).
    final class Files {
        let owner: TrainingRunTests
        var estimators: [String: Estimator] = [:]
        var layers: [String: [Layer]] = [:]

        init(_ owner: TrainingRunTests) {
            self.owner = owner
        }

        func estimator(_ name: String) throws -> Estimator {
            if let e = estimators[name] { return e }
            let e = try Estimator.load(json: try owner.text(name))
            estimators[name] = e
            return e
        }

        func layerList(_ name: String) throws -> [Layer] {
            if let l = layers[name] { return l }
            let l = try LayerList.parse(json: try owner.text(name)).layers
            layers[name] = l
            return l
        }
    }

    func run(_ files: Files, _ q: [String: Any]) throws -> TrainingRun {
        let est = try files.estimator(q["estimator"] as! String)
        let layers = try files.layerList(q["layers"] as! String)
        let batch = Int(num(q["batch_size"]))
        guard let samples = q["samples"], !(samples is NSNull) else {
            return try TrainingRun.estimate(est, layers: layers, batchSize: batch)
        }
        return try TrainingRun.estimate(est, layers: layers, batchSize: batch, samples: Int(num(samples)),
                                        epochs: Int(num(q["epochs"])), confidence: num(q["confidence"]))
    }

    func checkBounded(_ what: String, _ expected: Any?, _ got: Bounded) {
        let e = expected as! [String: Any]
        close("\(what) mean", num(e["mean"]), got.mean)
        close("\(what) std", num(e["std"]), got.std)
        close("\(what) upper", num(e["upper"]), got.upper)
    }

    func testReproducesTrainingVectors() throws {
        let vec = try vectors()
        let files = Files(self)
        var runs = 0
        for q in vec["cases"] as! [[String: Any]] {
            let exp = q["expected"] as! [String: Any]
            let what = "\(q["estimator"]!) \(q["layers"]!) b=\(q["batch_size"]!) (\(q["what"]!))"
            let r = try run(files, q)
            XCTAssertEqual(exp["metric"] as? String, r.metric, what)
            XCTAssertEqual(exp["unit"] as? String, r.unit, what)
            XCTAssertEqual(exp["device"] as? String, r.device, what)
            XCTAssertEqual(exp["runtime"] as? String, r.runtime, what)
            XCTAssertEqual(Int(num(exp["batch_size"])), r.batchSize, what)
            XCTAssertEqual(Int(num(exp["samples"])), r.samples, what)
            XCTAssertEqual(Int(num(exp["epochs"])), r.epochs, what)
            XCTAssertEqual(Int(num(exp["steps_per_epoch"])), r.stepsPerEpoch, what)
            XCTAssertEqual(Int(num(exp["last_batch"])), r.lastBatch, what)
            XCTAssertEqual(num(exp["steps"]), Double(r.steps), what)
            XCTAssertEqual(num(exp["confidence"]), r.confidence, what)
            XCTAssertTrue(close(num(exp["z"]), r.z, ztol), "\(what) z")
            checkBounded("\(what) step", exp["step"], r.step)
            checkBounded("\(what) epoch", exp["epoch"], r.epoch)
            checkBounded("\(what) run", exp["run"], r.run)
            runs += 1
        }
        for q in vec["errors"] as! [[String: Any]] {
            let want = q["error"] as! String
            var got = "none"
            var message = ""
            do {
                _ = try run(files, q)
            } catch ThorError.notFound {
                got = "not_found"
            } catch ThorError.format {
                got = "format"
            } catch ThorError.usage(let m) {
                got = "usage"
                message = m
            }
            XCTAssertEqual(want, got, "\(q["what"]!): \(q["message"]!)")
            if want == "usage" {
                // the parameter it names ("batch size", "samples", "epochs", "confidence") is the same
                let py = q["message"] as! String
                let name = String(py[..<py.range(of: " must")!.lowerBound])
                XCTAssertTrue(message.hasPrefix(name + " must"), "\(message) vs \(py)")
            }
        }
        XCTAssertGreaterThanOrEqual(runs, 50)
    }

    func testQuantileIsAs241LikePython() throws {
        let vec = try vectors()
        let quantiles = vec["quantiles"] as! [[String: Any]]
        XCTAssertEqual(quantiles.count, 200)
        for q in quantiles {
            let c = num(q["confidence"])
            let got = try TrainingRun.quantile(c)
            XCTAssertTrue(close(num(q["z"]), got, ztol), "z(\(c)): expected \(num(q["z"])) got \(got)")
        }
        for q in vec["ppnd16"] as! [[String: Any]] {
            let p = num(q["p"])
            let got = try TrainingRun.ppnd16(p)
            XCTAssertTrue(close(num(q["z"]), got, ztol), "ppnd16(\(p)): expected \(num(q["z"])) got \(got)")
        }
        XCTAssertEqual(try TrainingRun.quantile(0.5), 0.0)
        for p in [0.0, 1.0, -0.1, Double.nan] {
            XCTAssertThrowsError(try TrainingRun.ppnd16(p))
        }
    }

    func assertUsageError(_ body: @autoclosure () throws -> Any, _ fragment: String, line: UInt = #line) {
        XCTAssertThrowsError(try body(), line: line) { error in
            guard let thor = error as? ThorError, case .usage(let message) = thor else {
                return XCTFail("expected ThorError.usage, got \(error)", line: line)
            }
            XCTAssertTrue(message.contains(fragment), message, line: line)
        }
    }

    func testEpochsCountTheLastPartialBatch() throws {
        let files = Files(self)
        let est = try files.estimator("estimator_time_profile.json")
        let layers = try files.layerList("layers_time_profile_0.json")
        let split = try TrainingRun.stepsPerEpoch(samples: 5000, batchSize: 16)
        XCTAssertEqual(split.fullSteps, 312)
        XCTAssertEqual(split.lastBatch, 8)
        XCTAssertEqual(try TrainingRun.stepsPerEpoch(samples: 4992, batchSize: 16).lastBatch, 0)
        let r = try TrainingRun.estimate(est, layers: layers, batchSize: 16, samples: 5000, epochs: 3, confidence: 0.95)
        XCTAssertEqual(r.stepsPerEpoch, 313)
        XCTAssertEqual(r.lastBatch, 8)
        XCTAssertEqual(r.steps, 939)
        let s16 = try est.estimate(layers: layers, batchSize: 16)
        let s8 = try est.estimate(layers: layers, batchSize: 8)
        close("epoch mean", 312 * s16.totalMean + s8.totalMean, r.epoch.mean)
        close("epoch std", 312 * s16.totalStd + s8.totalStd, r.epoch.std)
        close("run mean", 3 * r.epoch.mean, r.run.mean)
        close("run upper", r.run.mean + r.z * r.run.std, r.run.upper)
        let one = try TrainingRun.estimate(est, layers: layers, batchSize: 32)
        XCTAssertEqual(one.samples, 32)
        XCTAssertEqual(one.epochs, 1)
        XCTAssertEqual(one.confidence, 0.95)
        XCTAssertEqual(one.step.mean, one.run.mean)
        let few = try TrainingRun.estimate(est, layers: layers, batchSize: 32, samples: 5, epochs: 1, confidence: 0.5)
        XCTAssertEqual(try est.estimate(layers: layers, batchSize: 5).totalMean, few.epoch.mean)
        XCTAssertEqual(few.run.mean, few.run.upper)
    }

    func testBadInputsAreUsageErrors() throws {
        let files = Files(self)
        let est = try files.estimator("estimator_time_profile.json")
        let layers = try files.layerList("layers_time_profile_0.json")
        assertUsageError(try TrainingRun.estimate(est, layers: layers, batchSize: 0),
                         "batch size must be an integer in [1, 1000000000]")
        assertUsageError(try TrainingRun.estimate(est, layers: layers, batchSize: 8, samples: 0, epochs: 1,
                                                  confidence: 0.9), "samples")
        assertUsageError(try TrainingRun.estimate(est, layers: layers, batchSize: 8, samples: 10, epochs: 0,
                                                  confidence: 0.9), "epochs")
        assertUsageError(try TrainingRun.estimate(est, layers: layers, batchSize: 8, samples: 10, epochs: 1,
                                                  confidence: Double.nan), "confidence")
        assertUsageError(try TrainingRun.estimate(est, layers: layers, batchSize: 8, samples: 10, epochs: 1,
                                                  confidence: 0.3),
                         "confidence must be a number in [0.5, 0.9999], got 0.3")
    }
}
