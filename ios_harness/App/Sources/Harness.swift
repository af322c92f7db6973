import CryptoKit
import Foundation
import UIKit

enum HarnessError: Error, CustomStringConvertible {
    case bad(String)
    var description: String { if case .bad(let s) = self { return s }; return "error" }
}

/// Device state recorded with every window (and compared by the idle baseline's rule).
enum DeviceState {
    static func read() -> [String: Any] {
        UIDevice.current.isBatteryMonitoringEnabled = true
        let thermal = ProcessInfo.processInfo.thermalState.rawValue  // 0 nominal ... 3 critical
        let battery = UIDevice.current.batteryState
        return ["battery_pct": Double(UIDevice.current.batteryLevel) * 100, "thermal_state": thermal,
                "low_power_mode": ProcessInfo.processInfo.isLowPowerModeEnabled,
                "charging": battery == .charging || battery == .full]
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
        let settings = Settings(manifest["settings"] as? [String: Any])
        let measured = try ProtocolRunner.measure(parts, settings, metric: "time", meter: nil, idle: nil,
                                                  env: .real(state: DeviceState.read))
        var results: [String: Any] = [:]
        for (name, r) in measured { results[name] = r.toDict(settings.outlierK) }
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
