import CryptoKit
import Foundation
import UIKit

/// One training step per call (the exported ONNX step, chained); see OrtStepRunner.swift.
protocol StepRunner {
    func step() throws
}

struct Settings {
    var warmupSteps = 3
    var minWindowS = 0.05
    var minRounds = 5
    var maxRounds = 15
    var cvTarget = 0.03
    var maxStepsPerWindow = 5000

    init(_ m: [String: Any]?) {
        guard let m = m else { return }
        warmupSteps = (m["warmup_steps"] as? NSNumber)?.intValue ?? warmupSteps
        minWindowS = (m["min_window_s"] as? NSNumber)?.doubleValue ?? minWindowS
        minRounds = (m["min_rounds"] as? NSNumber)?.intValue ?? minRounds
        maxRounds = max((m["max_rounds"] as? NSNumber)?.intValue ?? maxRounds, minRounds)
        cvTarget = (m["cv_target"] as? NSNumber)?.doubleValue ?? cvTarget
        maxStepsPerWindow = (m["max_steps_per_window"] as? NSNumber)?.intValue ?? maxStepsPerWindow
    }
}

enum HarnessError: Error, CustomStringConvertible {
    case bad(String)
    var description: String { if case .bad(let s) = self { return s }; return "error" }
}

/// The shared protocol (thor_sdk.harness.protocol), time only: warm-up, window sizing, parts interleaved
/// round by round, stop on a small robust coefficient of variation or the round cap; per window the wall-clock
/// start/end (to align a bench meter's log on the host) and the device state.
enum ProtocolRunner {
    static func median(_ v: [Double]) -> Double {
        let s = v.sorted()
        if s.isEmpty { return .nan }
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }

    static func cv(_ v: [Double]) -> Double {
        let med = median(v)
        let mad = median(v.map { abs($0 - med) })
        var std = 1.4826 * mad
        if mad == 0 && v.count > 1 {
            let mean = v.reduce(0, +) / Double(v.count)
            std = (v.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(v.count - 1)).squareRoot()
        }
        return med != 0 ? std / abs(med) : .infinity
    }

    static func state() -> [String: Any] {
        UIDevice.current.isBatteryMonitoringEnabled = true
        let thermal = ProcessInfo.processInfo.thermalState.rawValue  // 0 nominal ... 3 critical
        return ["battery_pct": Double(UIDevice.current.batteryLevel) * 100, "thermal_state": thermal,
                "low_power_mode": ProcessInfo.processInfo.isLowPowerModeEnabled]
    }

    static func measure(_ parts: [(String, StepRunner)], _ s: Settings) throws -> [String: Any] {
        let clock = { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
        let wall = { Date().timeIntervalSince1970 }
        for (_, r) in parts { for _ in 0..<s.warmupSteps { try r.step() } }
        var steps: [String: Int] = [:]
        for (name, r) in parts {
            let t0 = clock(); try r.step(); let dt = max(clock() - t0, 1e-7)
            steps[name] = max(1, min(s.maxStepsPerWindow, Int((s.minWindowS / dt).rounded(.up))))
        }
        var times: [String: [Double]] = [:]
        var windows: [String: [[String: Any]]] = [:]
        for rnd in 0..<s.maxRounds {
            for (name, r) in parts {
                let n = steps[name]!
                let w0 = wall(); let t0 = clock()
                for _ in 0..<n { try r.step() }
                let dt = clock() - t0; let w1 = wall()
                times[name, default: []].append(dt / Double(n))
                windows[name, default: []].append(["t_start_s": w0, "t_end_s": w1, "state": state()])
            }
            if rnd + 1 >= s.minRounds && parts.allSatisfy({ cv(times[$0.0]!) <= s.cvTarget }) { break }
        }
        var out: [String: Any] = [:]
        for (name, _) in parts {
            out[name] = ["steps_per_window": steps[name]!, "time_s": times[name]!, "energy_j": [Double](),
                         "net_energy_j": [Double](), "idle_power_w": NSNull(), "windows": windows[name]!]
        }
        return out
    }
}

enum Harness {
    static func sha256(_ url: URL) throws -> String {
        let d = try Data(contentsOf: url)
        return SHA256.hash(data: d).map { String(format: "%02x", $0) }.joined()
    }

    static func file(_ bundle: URL, _ rel: String) throws -> URL {
        if rel.isEmpty || rel.hasPrefix("/") || rel.split(separator: "/").contains("..") {
            throw HarnessError.bad("bad file name in manifest: \(rel)")
        }
        return bundle.appendingPathComponent(rel)
    }

    static func run(_ job: LaunchArgs) throws -> [String: Any] {
        let data = try Data(contentsOf: job.bundle.appendingPathComponent("manifest.json"))
        guard let manifest = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw HarnessError.bad("manifest.json is not a JSON object")
        }
        // manifest layout: thor_sdk/schemas/manifest.schema.json (files and parts are lists)
        for f in (manifest["files"] as? [[String: Any]]) ?? [] {
            guard let rel = f["path"] as? String, let want = f["sha256"] as? String else {
                throw HarnessError.bad("manifest file entry without path or sha256")
            }
            if try sha256(file(job.bundle, rel)) != want.lowercased() {
                throw HarnessError.bad("sha256 mismatch for \(rel) (bundle corrupted in transfer?)")
            }
        }
        guard let partsSpec = manifest["parts"] as? [[String: Any]], !partsSpec.isEmpty else {
            throw HarnessError.bad("the bundle has no top-level parts (one probe or one model per bundle)")
        }
        var parts: [(String, StepRunner)] = []
        for p in partsSpec {
            guard let name = p["name"] as? String, let rel = p["file"] as? String else {
                throw HarnessError.bad("manifest part without name or file")
            }
            parts.append((name, try OrtStepRunner(model: try file(job.bundle, rel))))
        }
        if (manifest["metric"] as? String) == "energy" {
            throw HarnessError.bad("iOS gives apps no energy counter: measure time, and energy with a bench meter")
        }
        let results = try ProtocolRunner.measure(parts, Settings(manifest["settings"] as? [String: Any]))
        return ["format": "thor-sdk/results", "version": 1, "harness": "ios", "bundle": manifest["id"] ?? NSNull(),
                "metric": "time", "device": ["model": UIDevice.current.model,
                                             "system": UIDevice.current.systemVersion], "parts": results]
    }

    /// Runs the job and writes results (or {"error": ...}) atomically to job.out; returns the exit code.
    static func runAndReport(_ job: LaunchArgs) -> Int32 {
        var doc: [String: Any]
        var code: Int32 = 0
        do { doc = try run(job) } catch { doc = ["error": "\(error)"]; code = 1 }  // the results schema's failure form
        do {
            try FileManager.default.createDirectory(at: job.out.deletingLastPathComponent(),
                                                    withIntermediateDirectories: true)
            let data = try JSONSerialization.data(withJSONObject: doc, options: [.sortedKeys])
            try data.write(to: job.out, options: .atomic)
        } catch { code = 2 }
        return code
    }
}
