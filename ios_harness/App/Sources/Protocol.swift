// The measurement protocol of the iOS harness, mirroring thor_sdk.harness.protocol and the Android Protocol.java
// step for step (spec: docs/protocol.md; conformance vectors: tests/vectors/protocol_*.json, read by
// Tests/ProtocolVectorTests.swift). Foundation only, every clock injected. NOT compiled on the development
// machine (no Swift toolchain there): the Python and Java implementations are the tested ones.
import Foundation

/// One training step per call (the exported ONNX step, chained); see OrtStepRunner.swift.
protocol StepRunner {
    func step() throws
}

/// An energy meter over a window. iOS gives apps none; the protocol still takes one so that it matches the
/// other harnesses (and the vectors) exactly.
protocol EnergyMeter: AnyObject {
    var samplePeriodS: Double { get }
    func start() throws
    func stop() throws -> (energyJ: Double, durationS: Double)
}

struct Settings {
    var warmupSteps = 3
    var minWindowS = 0.05
    var minRounds = 5
    var maxRounds = 15
    var cvTarget = 0.03
    var maxStepsPerWindow = 5000
    var measureIdle = true
    var outlierK = 3.5

    init(_ m: [String: Any]?) {
        guard let m = m else { return }
        warmupSteps = (m["warmup_steps"] as? NSNumber)?.intValue ?? warmupSteps
        minWindowS = (m["min_window_s"] as? NSNumber)?.doubleValue ?? minWindowS
        minRounds = (m["min_rounds"] as? NSNumber)?.intValue ?? minRounds
        maxRounds = max((m["max_rounds"] as? NSNumber)?.intValue ?? maxRounds, minRounds)
        cvTarget = (m["cv_target"] as? NSNumber)?.doubleValue ?? cvTarget
        maxStepsPerWindow = (m["max_steps_per_window"] as? NSNumber)?.intValue ?? maxStepsPerWindow
        measureIdle = (m["measure_idle"] as? Bool) ?? measureIdle
        outlierK = (m["outlier_k"] as? NSNumber)?.doubleValue ?? outlierK
    }

    /// At least min_window_s and 20 of the meter's sample periods.
    func windowS(_ meter: EnergyMeter?) -> Double {
        max(minWindowS, ProtocolRunner.windowSamplePeriods * (meter?.samplePeriodS ?? 0.0))
    }
}

/// The idle power of one campaign: measured once, again only when the device state changes
/// (ProtocolRunner.idleStateChanged). Hold one per campaign and pass it to every probe's measure.
final class IdleBaseline {
    var powerW: Double?
    var state: [String: Any]?
    var measurements: [[String: Any]] = []

    func stale(_ now: [String: Any]?) -> Bool {
        powerW == nil || ProtocolRunner.idleStateChanged(state, now)
    }
}

final class PartResult {
    let part: String
    let stepsPerWindow: Int
    var timeS: [Double] = []
    var energyJ: [Double] = []
    var netEnergyJ: [Double] = []
    var windowIdlePowerW: [Double] = []
    var windows: [[String: Any]] = []
    var idlePowerW: Double?

    init(_ part: String, _ stepsPerWindow: Int) {
        self.part = part
        self.stepsPerWindow = stepsPerWindow
    }

    /// The results document's part (results.schema.json), outliers flagged with the settings' outlier_k.
    func toDict(_ outlierK: Double) -> [String: Any] {
        var out: [String: Any] = ["time": ProtocolRunner.outliers(timeS, outlierK)]
        if !energyJ.isEmpty { out["energy"] = ProtocolRunner.outliers(energyJ, outlierK) }
        if !netEnergyJ.isEmpty { out["net_energy"] = ProtocolRunner.outliers(netEnergyJ, outlierK) }
        var d: [String: Any] = ["steps_per_window": stepsPerWindow, "time_s": timeS, "energy_j": energyJ,
                                "net_energy_j": netEnergyJ, "idle_power_w": idlePowerW.map { $0 as Any } ?? NSNull(),
                                "windows": windows, "outliers": out]
        // per window, the idle power its net energy used (ingest stores it with each window)
        if !windowIdlePowerW.isEmpty { d["window_idle_power_w"] = windowIdlePowerW }
        return d
    }
}

enum ProtocolError: Error, CustomStringConvertible {
    case bad(String)
    var description: String { if case .bad(let s) = self { return s }; return "protocol error" }
}

/// The shared protocol: window length from the meter, idle baseline checked at the start and after every window,
/// timed warm-up, rounds in alternating (ABBA) order, stop on the campaign's metric, outliers flagged.
enum ProtocolRunner {
    static let windowSamplePeriods = 20.0
    static let idleStateKeys = ["charging", "plugged", "screen_on", "thermal_status", "thermal_state", "low_power_mode"]
    static let idleRecheckTempC = 5.0

    /// As given on even rounds, reversed on odd ones.
    static func abba(_ parts: [String], _ round: Int) -> [String] {
        round % 2 == 0 ? parts : Array(parts.reversed())
    }

    static func median(_ v: [Double]) -> Double {
        let s = v.sorted()
        if s.isEmpty { return .nan }
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }

    static func cv(_ v: [Double]) -> Double {
        if v.isEmpty { return .nan }
        let med = median(v)
        let mad = median(v.map { abs($0 - med) })
        var std = 1.4826 * mad
        if mad == 0 {
            if v.count > 1 {
                let mean = v.reduce(0, +) / Double(v.count)
                std = (v.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(v.count - 1)).squareRoot()
            } else {
                std = 0
            }
        }
        return med != 0 ? std / abs(med) : .infinity
    }

    /// Indices whose robust z-score exceeds k (none with fewer than 3 values; with MAD 0, any value off the median).
    static func outliers(_ v: [Double], _ k: Double) -> [Int] {
        if v.count < 3 { return [] }
        let med = median(v)
        let mad = median(v.map { abs($0 - med) })
        return v.indices.filter { mad == 0 ? v[$0] != med : abs(v[$0] - med) / (1.4826 * mad) > k }
    }

    private static func same(_ a: Any?, _ b: Any?) -> Bool {
        switch (a, b) {
        case (nil, nil): return true
        case (let x as NSNumber, let y as NSNumber): return x == y
        case (let x as String, let y as String): return x == y
        default:
            if a is NSNull && b is NSNull { return true }
            return false
        }
    }

    /// Any of idleStateKeys differs, or battery_temp_c moved more than idleRecheckTempC; no state, no change.
    static func idleStateChanged(_ before: [String: Any]?, _ after: [String: Any]?) -> Bool {
        guard let before = before, let after = after else { return false }
        for k in idleStateKeys where !same(before[k], after[k]) { return true }
        if let a = (before["battery_temp_c"] as? NSNumber)?.doubleValue,
           let b = (after["battery_temp_c"] as? NSNumber)?.doubleValue {
            return abs(b - a) > idleRecheckTempC
        }
        return false
    }

    struct Env {
        var clock: () -> Double
        var wall: () -> Double
        var sleep: (Double) -> Void
        var state: (() -> [String: Any])?

        /// The real device: monotonic uptime, the wall clock, Thread.sleep.
        static func real(state: (() -> [String: Any])?) -> Env {
            Env(clock: { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 },
                wall: { Date().timeIntervalSince1970 },
                sleep: { Thread.sleep(forTimeInterval: max(0, $0)) }, state: state)
        }
    }

    private static func refresh(_ idle: IdleBaseline, _ meter: EnergyMeter, _ windowS: Double,
                                _ st: [String: Any]?, _ env: Env) throws {
        let w0 = env.wall()
        env.sleep(min(0.25 * windowS, 2.0))
        try meter.start()
        env.sleep(windowS)
        let w = try meter.stop()
        if w.durationS <= 0 { throw ProtocolError.bad("idle window of zero duration") }
        let p = w.energyJ / w.durationS
        idle.powerW = p
        idle.state = st
        idle.measurements.append(["power_w": p, "start_s": w0, "end_s": env.wall(),
                                  "state": st.map { $0 as Any } ?? NSNull()])
    }

    /// Measures the parts side by side; returns the results in the parts' order.
    static func measure(_ parts: [(String, StepRunner)], _ s: Settings, metric: String, meter: EnergyMeter?,
                        idle: IdleBaseline?, env: Env,
                        order: ([String], Int) -> [String] = abba) throws -> [(String, PartResult)] {
        if metric != "time" && metric != "energy" { throw ProtocolError.bad("metric must be time or energy") }
        if metric == "energy" && meter == nil { throw ProtocolError.bad("energy was asked for but no meter was given") }
        let windowS = s.windowS(meter)
        var baseline: IdleBaseline? = nil
        if let meter = meter, s.measureIdle {
            let b = idle ?? IdleBaseline()
            let st = env.state?()
            if b.stale(st) { try refresh(b, meter, windowS, st, env) }
            baseline = b
        }
        var results: [String: PartResult] = [:]
        for (name, r) in parts {
            var times: [Double] = []
            for _ in 0..<max(1, s.warmupSteps) {
                let t0 = env.clock(); try r.step(); times.append(env.clock() - t0)
            }
            let stepS = max(median(times), 1e-7)
            let steps = Int(max(1.0, min(Double(s.maxStepsPerWindow), (windowS / stepS).rounded(.up))))
            results[name] = PartResult(name, steps)
        }
        let runners = Dictionary(uniqueKeysWithValues: parts.map { ($0.0, $0.1) })
        let names = parts.map { $0.0 }
        for rnd in 0..<s.maxRounds {
            for name in order(names, rnd) {
                let r = results[name]!, runner = runners[name]!
                if let meter = meter { try meter.start() }
                let w0 = env.wall(), t0 = env.clock()
                for _ in 0..<r.stepsPerWindow { try runner.step() }
                let dt = env.clock() - t0, w1 = env.wall()
                let w = try meter?.stop()
                r.timeS.append(dt / Double(r.stepsPerWindow))
                let st = env.state?()
                var win: [String: Any] = ["t_start_s": w0, "t_end_s": w1]
                if let st = st { win["state"] = st }
                r.windows.append(win)
                if let w = w {
                    let e = w.energyJ / Double(r.stepsPerWindow)
                    let d = w.durationS > 0 ? w.durationS : dt
                    r.energyJ.append(e)
                    if let b = baseline, let meter = meter {
                        // a window whose state differs from the baseline's: idle re-measured in that state now
                        if b.stale(st) { try refresh(b, meter, windowS, st, env) }
                        r.windowIdlePowerW.append(b.powerW!)
                        r.netEnergyJ.append(e - b.powerW! * d / Double(r.stepsPerWindow))
                    }
                }
            }
            if rnd + 1 >= s.minRounds &&
                names.allSatisfy({ cv(metric == "energy" ? results[$0]!.energyJ : results[$0]!.timeS) <= s.cvTarget }) {
                break
            }
        }
        if let b = baseline { for r in results.values { r.idlePowerW = b.powerW } }
        return names.map { ($0, results[$0]!) }
    }
}
