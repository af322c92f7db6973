// The shared protocol conformance vectors (tests/vectors/protocol_*.json, or THOR_VECTORS; spec docs/protocol.md)
// on the Swift ProtocolRunner, with the scripted device of tests/vectors/make_protocol_vectors.py implemented
// step for step, mirroring android_harness's ProtocolVectorsTest.java. NOT compiled or run on the development
// machine (no Swift toolchain there); where Xcode exists: `xcodebuild test` on the ThorHarnessTests target.
import Foundation
import XCTest
@testable import ThorHarness

final class ProtocolVectorTests: XCTestCase {
    static var folder: URL {
        if let dir = ProcessInfo.processInfo.environment["THOR_VECTORS"] { return URL(fileURLWithPath: dir) }
        var url = URL(fileURLWithPath: #filePath)  // ios_harness/App/Tests/ProtocolVectorTests.swift -> repository root
        for _ in 0..<4 { url.deleteLastPathComponent() }
        return url.appendingPathComponent("tests").appendingPathComponent("vectors")
    }

    static func num(_ o: Any?) -> Double { (o as! NSNumber).doubleValue }

    static func cyc(_ p: Any?, _ k: Int) -> Double {
        let a = p as! [Any]
        return a.isEmpty ? 1.0 : num(a[k % a.count])
    }

    final class Device: EnergyMeter {
        let spec: [String: Any]
        let t0, wallOffset, drift, period: Double
        let states: [[String: Any]]
        var t: Double
        var energy = 0.0
        var steps = 0
        var start0 = (0.0, 0.0, 0)
        var meterLog: [(Double, Double, Double, Double, Int)] = []

        init(_ spec: [String: Any]) {
            self.spec = spec
            t0 = num(spec["t0_s"]); wallOffset = num(spec["wall_offset_s"]); drift = num(spec["drift_s_per_s"])
            period = (spec["meter"] as? [String: Any]).map { num($0["sample_period_s"]) } ?? 0.0
            states = spec["states"] as! [[String: Any]]
            t = t0
        }

        func entry() -> [String: Any] {
            var cur = states[0]
            for e in states where num(e["from_s"]) <= t { cur = e }
            return cur
        }

        func wall() -> Double { t + wallOffset }
        func sleep(_ s: Double) { energy += s * num(entry()["idle_power_w"]); t += s }
        func state() -> [String: Any] { entry()["state"] as! [String: Any] }

        func step(_ part: [String: Any], _ k: Int) {
            var dt = num(part["step_s"]) * cyc(part["jitter"], k) + drift * (t - t0)
            for r in part["slow_steps"] as! [[Any]] where num(r[0]) <= Double(k) && Double(k) < num(r[1]) {
                dt = dt * num(r[2])  // [from, to, factor]
            }
            let e: Double
            if let se = part["step_energy_j"], !(se is NSNull) {
                e = num(se) * cyc(part["energy_jitter"], k)
            } else {
                e = dt * (num(entry()["idle_power_w"]) + num(part["active_power_w"]))
            }
            energy += e; t += dt; steps += 1
        }

        var samplePeriodS: Double { period }
        func start() throws { start0 = (t, energy, steps) }
        func stop() throws -> (energyJ: Double, durationS: Double) {
            let w = (energyJ: energy - start0.1, durationS: t - start0.0)
            meterLog.append((start0.0 + wallOffset, wall(), w.energyJ, w.durationS, steps - start0.2))
            return w
        }
    }

    final class Trainer: StepRunner {
        let d: Device
        let part: [String: Any]
        var k = 0
        init(_ d: Device, _ part: [String: Any]) { self.d = d; self.part = part }
        func step() throws { d.step(part, k); k += 1 }
    }

    static func run(_ vec: [String: Any], order: @escaping ([String], Int) -> [String] = ProtocolRunner.abba,
                    metric: String? = nil, idlePerProbe: Bool = false) throws -> [Any] {
        let spec = vec["device"] as! [String: Any]
        let dev = Device(spec)
        let s = Settings(vec["settings"] as? [String: Any])
        let meter: EnergyMeter? = spec["meter"] is NSNull || spec["meter"] == nil ? nil : dev
        let stateFn: (() -> [String: Any])? = (spec["record_state"] as? Bool) == true ? { dev.state() } : nil
        let env = ProtocolRunner.Env(clock: { dev.t }, wall: { dev.wall() }, sleep: { dev.sleep($0) }, state: stateFn)
        let baseline = IdleBaseline()
        var out: [Any] = []
        for (i, probe) in (vec["probes"] as! [[String: Any]]).enumerated() {
            if i > 0 { dev.sleep(num(spec["probe_gap_s"])) }
            let trainers = (probe["parts"] as! [[String: Any]]).map { ($0["name"] as! String, Trainer(dev, $0)) }
            let mark = dev.meterLog.count
            let res = try ProtocolRunner.measure(trainers.map { ($0.0, $0.1 as StepRunner) }, s,
                                                 metric: metric ?? (vec["metric"] as! String), meter: meter,
                                                 idle: idlePerProbe ? IdleBaseline() : baseline, env: env, order: order)
            var events: [[String: Any]] = dev.meterLog[mark...].filter { $0.4 == 0 }.map {
                ["event": "idle", "start_s": $0.0, "end_s": $0.1, "power_w": $0.2 / $0.3] as [String: Any]
            }
            let idleCount = events.count
            var parts: [String: Any] = [:]
            for (name, r) in res {
                for (i, w) in r.windows.enumerated() {
                    events.append(["event": "window", "part": name, "round": i, "steps": r.stepsPerWindow,
                                   "start_s": w["t_start_s"]!, "end_s": w["t_end_s"]!] as [String: Any])
                }
                var outl: [String: Any] = ["time": ProtocolRunner.outliers(r.timeS, s.outlierK)]
                if !r.energyJ.isEmpty { outl["energy"] = ProtocolRunner.outliers(r.energyJ, s.outlierK) }
                if !r.netEnergyJ.isEmpty { outl["net_energy"] = ProtocolRunner.outliers(r.netEnergyJ, s.outlierK) }
                let k = trainers.first { $0.0 == name }!.1.k
                parts[name] = ["steps_per_window": r.stepsPerWindow, "warmup_steps": k - r.stepsPerWindow * r.timeS.count,
                               "time_s": r.timeS, "energy_j": r.energyJ, "net_energy_j": r.netEnergyJ,
                               "window_idle_power_w": r.windowIdlePowerW,
                               "idle_power_w": r.idlePowerW.map { $0 as Any } ?? NSNull(), "outliers": outl] as [String: Any]
            }
            // a stable sort by start time (idle events first on a tie, as in Python and Java)
            events = events.enumerated().sorted {
                let a = num($0.element["start_s"]), b = num($1.element["start_s"])
                return a != b ? a < b : $0.offset < $1.offset
            }.map { $0.element }
            out.append(["window_s": s.windowS(meter), "rounds": res[0].1.timeS.count, "idle_measurements": idleCount,
                        "events": events, "parts": parts] as [String: Any])
        }
        return out
    }

    /// The first place `got` differs from `want`, or nil: numbers to 1e-9 relative (1e-12 absolute).
    static func mismatch(_ want: Any?, _ got: Any?, _ at: String = "$") -> String? {
        if let w = want as? [String: Any] {
            guard let g = got as? [String: Any], Set(w.keys) == Set(g.keys) else { return "\(at): keys differ" }
            for k in w.keys.sorted() { if let m = mismatch(w[k], g[k], "\(at).\(k)") { return m } }
            return nil
        }
        if let w = want as? [Any] {
            guard let g = got as? [Any], g.count == w.count else { return "\(at): lengths differ" }
            for i in w.indices { if let m = mismatch(w[i], g[i], "\(at)[\(i)]") { return m } }
            return nil
        }
        if let w = want as? String { return (got as? String) == w ? nil : "\(at): \(w) != \(String(describing: got))" }
        if want == nil || want is NSNull { return (got == nil || got is NSNull) ? nil : "\(at): null != \(got!)" }
        if let w = want as? NSNumber, let g = got as? NSNumber {
            let a = w.doubleValue, b = g.doubleValue
            return abs(a - b) <= max(1e-9 * max(abs(a), abs(b)), 1e-12) ? nil : "\(at): \(a) != \(b)"
        }
        return "\(at): \(String(describing: want)) != \(String(describing: got))"
    }

    func testVectorsPassAndNonConformingProtocolsFail() throws {
        let files = try FileManager.default.contentsOfDirectory(at: Self.folder, includingPropertiesForKeys: nil)
            .filter { $0.lastPathComponent.hasPrefix("protocol_") && $0.pathExtension == "json" }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
        XCTAssertFalse(files.isEmpty)
        for f in files {
            let vec = try JSONSerialization.jsonObject(with: Data(contentsOf: f)) as! [String: Any]
            let name = vec["name"] as! String, expected = vec["expected"]
            XCTAssertNil(Self.mismatch(expected, try Self.run(vec)), name)
            XCTAssertNotNil(Self.mismatch(expected, try Self.run(vec, order: { parts, _ in parts })), name)
            if name == "time" || name == "energy" {
                let other = (vec["metric"] as! String) == "time" ? "energy" : "time"
                XCTAssertNotNil(Self.mismatch(expected, try Self.run(vec, metric: other)), name)
            }
            if name == "idle_campaign" {
                XCTAssertNotNil(Self.mismatch(expected, try Self.run(vec, idlePerProbe: true)), name)
            }
        }
    }
}
