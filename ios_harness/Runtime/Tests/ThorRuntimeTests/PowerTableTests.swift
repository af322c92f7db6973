// Runs every vector of tests/vectors/table_select.json (answers of the Python runtime's
// thor_sdk.runtime.table.select, made by tests/vectors/make_vectors.py) through PowerTable.select,
// mirroring android_harness/runtime/src/test/.../PowerTableTest.java.
//
// NOT COMPILED OR RUN on the development machine (no Swift toolchain there); run `swift test` in
// ios_harness/Runtime on macOS (THOR_VECTORS=/path/to/tests/vectors to point elsewhere).

import Foundation
import XCTest

import ThorRuntime

final class PowerTableTests: XCTestCase {
    let rtol = 1e-12

    var vectors: URL { TestVectors.folder }

    func vectorDoc() throws -> [String: Any] {
        let data = try Data(contentsOf: vectors.appendingPathComponent("table_select.json"))
        let doc = try JSONSerialization.jsonObject(with: data) as! [String: Any]
        XCTAssertEqual(doc["format"] as? String, "thor-sdk/table-select-vectors")
        return doc
    }

    func num(_ v: Any?) -> Double {
        return (v as! NSNumber).doubleValue
    }

    func close(_ what: String, _ expected: Double, _ got: Double) {
        XCTAssertLessThanOrEqual(abs(got - expected), rtol * abs(expected) + 1e-300,
                                 "\(what): expected \(expected) got \(got)")
    }

    /// The (batch size, frequency) pair and its numbers, as the selection and every candidate carry them.
    func checkPair(_ w: String, _ exp: [String: Any], _ batchSize: Int, _ freqHz: Double, _ timePerSampleS: Double,
                   _ peakPowerW: Double, _ ratio: Double, _ scoreS: Double) {
        XCTAssertEqual(batchSize, Int(num(exp["batch_size"])), "\(w) batch_size")
        close("\(w) freq_hz", num(exp["freq_hz"]), freqHz)
        close("\(w) time_per_sample_s", num(exp["time_per_sample_s"]), timePerSampleS)
        close("\(w) peak_power_w", num(exp["peak_power_w"]), peakPowerW)
        close("\(w) ratio", num(exp["ratio"]), ratio)
        close("\(w) score_s", num(exp["score_s"]), scoreS)
    }

    func checkSelection(_ w: String, _ exp: [String: Any], _ got: PowerTable.Selection) {
        checkPair(w, exp, got.batchSize, got.freqHz, got.timePerSampleS, got.peakPowerW, got.ratio, got.scoreS)
        if let est = exp["est_time_to_accuracy_s"] as? NSNumber {
            XCTAssertNotNil(got.estTimeToAccuracyS, "\(w) est_time_to_accuracy_s is nil")
            close("\(w) est_time_to_accuracy_s", est.doubleValue, got.estTimeToAccuracyS ?? .nan)
        } else {
            XCTAssertNil(got.estTimeToAccuracyS, "\(w) est_time_to_accuracy_s")
        }
        close("\(w) power_cap_w", num(exp["power_cap_w"]), got.powerCapW)
        XCTAssertEqual(got.knob, exp["knob"] as? String, "\(w) knob")
        XCTAssertEqual(got.simulated, exp["simulated"] as? Bool, "\(w) simulated")
        let cands = exp["candidates"] as! [[String: Any]]
        XCTAssertEqual(got.candidates.count, cands.count, "\(w) number of candidates")
        for (i, c) in cands.enumerated() where i < got.candidates.count {
            let g = got.candidates[i]
            let cw = "\(w) candidate \(i)"
            checkPair(cw, c, g.batchSize, g.freqHz, g.timePerSampleS, g.peakPowerW, g.ratio, g.scoreS)
            XCTAssertEqual(g.monotone, c["monotone"] as? Bool, "\(cw) monotone")
        }
        let nm = (exp["non_monotone_batch_sizes"] as! [NSNumber]).map { $0.intValue }
        XCTAssertEqual(got.nonMonotoneBatchSizes, nm, "\(w) non_monotone_batch_sizes")
    }

    /// Runs one query; returns the kind of answer ("result" or the error name) it checked.
    func check(_ w: String, _ table: Any, _ q: [String: Any]) -> String {
        let cap = num(q["power_cap_w"])
        let want = q["error"] as? String
        do {
            let got = try PowerTable.select(doc: table, powerCapW: cap)
            XCTAssertNil(want, "\(w): expected error \(want ?? ""), got batch \(got.batchSize)")
            if want == nil { checkSelection(w, q["result"] as! [String: Any], got) }
            return "result"
        } catch ThorError.infeasibleCap(let powerCapW, let lowest) {
            XCTAssertEqual(want, "infeasible", w)
            close("\(w) lowest_feasible_power_w", num(q["lowest_feasible_power_w"]), lowest)
            close("\(w) error powerCapW", cap, powerCapW)
            return "infeasible"
        } catch ThorError.usage(let message) {
            XCTAssertEqual(want, "usage", "\(w): got \(message)")
            return "usage"
        } catch ThorError.format(let message) {
            XCTAssertEqual(want, "format", "\(w): got \(message)")
            XCTAssertFalse(message.contains("\n"))
            return "format"
        } catch {
            XCTFail("\(w): unexpected \(error)")
            return "other"
        }
    }

    func testReproducesSharedVectors() throws {
        let doc = try vectorDoc()
        var counts: [String: Int] = [:]
        for c in doc["cases"] as! [[String: Any]] {
            for q in c["queries"] as! [[String: Any]] {
                let kind = check("\(c["name"]!) @ \(q["power_cap_w"]!) W", c["table"]!, q)
                counts[kind, default: 0] += 1
            }
        }
        for m in doc["malformed"] as! [[String: Any]] {
            let kind = check("malformed \(m["name"]!) @ \(m["power_cap_w"]!) W", m["table"]!, m)
            counts[kind, default: 0] += 1
        }
        XCTAssertGreaterThanOrEqual(counts["result", default: 0], 20)
        XCTAssertGreaterThanOrEqual(counts["infeasible", default: 0], 4)
        XCTAssertGreaterThanOrEqual(counts["usage", default: 0], 2)
        XCTAssertGreaterThanOrEqual(counts["format", default: 0], 20)
        XCTAssertNil(counts["other"])
    }

    func testSelectFromJsonText() throws {
        let json = """
            {"format": "thor-sdk/power-table", "version": 1, "reference_samples_to_target": 1000,
             "rows": [{"batch_size": 8, "freq_hz": 2e8, "time_per_sample_s": 0.001, "peak_power_w": 3},
                      {"batch_size": 8, "freq_hz": 1e8, "time_per_sample_s": 0.002, "peak_power_w": 2}],
             "ratios": [{"batch_size": 8, "ratio": 0.5}]}
            """
        let s = try PowerTable.select(json: json, powerCapW: 2.5)
        XCTAssertEqual(s.batchSize, 8)
        XCTAssertEqual(s.freqHz, 1e8)
        XCTAssertEqual(s.estTimeToAccuracyS ?? .nan, 0.002 * 0.5 * 1000, accuracy: 1e-15)
        XCTAssertEqual(s.knob, "gpu_freq_hz")
        XCTAssertFalse(s.simulated)
        XCTAssertEqual(try PowerTable.select(json: json, powerCapW: 3.0).freqHz, 2e8)
        XCTAssertThrowsError(try PowerTable.select(json: json, powerCapW: 1.5)) { error in
            XCTAssertEqual(error as? ThorError, ThorError.infeasibleCap(powerCapW: 1.5, lowestFeasiblePowerW: 2.0))
        }
        for bad in [0.0, -1.0, Double.nan, Double.infinity] {
            XCTAssertThrowsError(try PowerTable.select(json: json, powerCapW: bad)) { error in
                guard let thor = error as? ThorError, case .usage(let message) = thor else {
                    return XCTFail("cap \(bad): expected ThorError.usage, got \(error)")
                }
                XCTAssertTrue(message.hasPrefix("power cap must be a positive number"), message)
            }
        }
        XCTAssertThrowsError(try PowerTable.select(json: String(json.prefix(40)), powerCapW: 5.0)) { error in
            guard let thor = error as? ThorError, case .format(let message) = thor else {
                return XCTFail("expected ThorError.format, got \(error)")
            }
            XCTAssertTrue(message.hasPrefix("not valid JSON"), message)
        }
    }

    func testBinarySearchIsBisectRight() {
        let powers = [1.0, 2.0, 2.0, 3.0]
        XCTAssertTrue(PowerTable.isMonotone(powers))
        XCTAssertEqual(PowerTable.highestFeasibleIndex(powers, 0.5, monotone: true), -1)
        XCTAssertEqual(PowerTable.highestFeasibleIndex(powers, 1.0, monotone: true), 0)
        XCTAssertEqual(PowerTable.highestFeasibleIndex(powers, 2.0, monotone: true), 2)
        XCTAssertEqual(PowerTable.highestFeasibleIndex(powers, 9.0, monotone: true), 3)
        let dip = [1.0, 3.0, 2.0, 4.0]
        XCTAssertFalse(PowerTable.isMonotone(dip))
        XCTAssertEqual(PowerTable.highestFeasibleIndex(dip, 2.5, monotone: false), 2)
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            var p: [Double] = []
            for i in 0..<Int.random(in: 1...10, using: &rng) {
                p.append((i == 0 ? 0 : p[i - 1]) + Double(Int.random(in: 0...2, using: &rng)))
            }
            let cap = Double(Int.random(in: -1...(2 * p.count), using: &rng))
            let linear = p.lastIndex(where: { $0 <= cap }) ?? -1
            XCTAssertEqual(PowerTable.highestFeasibleIndex(p, cap, monotone: true), linear)
            XCTAssertEqual(PowerTable.highestFeasibleIndex(p, cap, monotone: false), linear)
        }
    }
}
