// thor-sdk power-table selection for iOS / macOS (Swift 5.7+, Foundation only).
//
// Answers select(table, powerCapW) from a power table JSON (format "thor-sdk/power-table", version 1,
// schema thor_sdk/schemas/table.schema.json). It mirrors android_harness/runtime/.../PowerTable.java
// line by line, which mirrors thor_sdk/runtime/table.py; the method is in docs/power-aware-training.md
// (section 3). The Python runtime's `why` sentence is not reproduced.
//
// UNTESTED HERE: the machine this SDK is developed on has no Swift toolchain. Tests/ThorRuntimeTests/
// PowerTableTests.swift checks it against tests/vectors/table_select.json (answers of the Python
// runtime): `cd ios_harness/Runtime && swift test` (macOS).
//
//   let s = try PowerTable.select(json: text, powerCapW: 5.0)
//   print(s.batchSize, s.freqHz, s.estTimeToAccuracyS ?? .nan)
//   // no pair under the cap: throws ThorError.infeasibleCap(powerCapW:lowestFeasiblePowerW:)

import Foundation

public enum PowerTable {
    public static let format = "thor-sdk/power-table"
    public static let version = 1

    /// One batch size's highest (batch size, frequency) pair under the cap, with its score.
    public struct Candidate {
        public let batchSize: Int
        public let freqHz: Double
        public let timePerSampleS: Double
        public let peakPowerW: Double
        public let ratio: Double
        public let scoreS: Double
        public let monotone: Bool
    }

    /// The pair to train with (the best candidate) and how it was found.
    public struct Selection {
        public let batchSize: Int
        /// A GPU frequency in Hz, or a power limit in W when `knob` is "power_limit_w".
        public let freqHz: Double
        public let timePerSampleS: Double
        public let peakPowerW: Double
        public let ratio: Double
        public let scoreS: Double
        /// nil unless the table knows the reference batch's samples-to-target.
        public let estTimeToAccuracyS: Double?
        public let powerCapW: Double
        /// The table's knob ("gpu_freq_hz" when absent; nil when not a string).
        public let knob: String?
        /// Every batch size's highest feasible pair, best first.
        public let candidates: [Candidate]
        /// Batch sizes (ascending) whose power did not rise monotonically with frequency.
        public let nonMonotoneBatchSizes: [Int]
        public let simulated: Bool
    }

    /// One table row, as numbers.
    struct Row {
        let freqHz: Double
        let timePerSampleS: Double
        let peakPowerW: Double
    }

    // ------------------------------------------------------------------ helpers
    /// A number (not a boolean, not NaN); Python's `_num`.
    static func number(_ v: Any?) -> Double? {
        guard let n = v as? NSNumber, CFGetTypeID(n as CFTypeRef) != CFBooleanGetTypeID() else { return nil }
        let d = n.doubleValue
        return d.isNaN ? nil : d
    }

    /// Python's `bool(x)` of a parsed JSON value.
    static func truthy(_ v: Any?) -> Bool {
        guard let v = v, !(v is NSNull) else { return false }
        if let n = v as? NSNumber {
            return CFGetTypeID(n as CFTypeRef) == CFBooleanGetTypeID() ? n.boolValue : n.doubleValue != 0.0
        }
        if let s = v as? String { return !s.isEmpty }
        if let a = v as? [Any] { return !a.isEmpty }
        if let m = v as? [String: Any] { return !m.isEmpty }
        return true
    }

    /// Python's `int(x)` for batch sizes, saturating to 32 bits like Java's `(int)` cast.
    static func intOf(_ d: Double) -> Int {
        if d >= 2147483647.0 { return 2147483647 }
        if d <= -2147483648.0 { return -2147483648 }
        return Int(d)  // truncates toward zero
    }

    /// True when `powers` (ordered by rising frequency) never decrease.
    public static func isMonotone(_ powers: [Double]) -> Bool {
        var i = 0
        while i + 1 < powers.count {
            if !(powers[i] <= powers[i + 1]) { return false }
            i += 1
        }
        return true
    }

    /// Index of the highest frequency with `powers[i] <= powerCapW`, or -1. With monotone powers a
    /// binary search (Python's `bisect_right - 1`), else a linear scan from the top.
    public static func highestFeasibleIndex(_ powers: [Double], _ powerCapW: Double, monotone: Bool) -> Int {
        if monotone {
            var lo = 0
            var hi = powers.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if powerCapW < powers[mid] {
                    hi = mid
                } else {
                    lo = mid + 1
                }
            }
            return lo - 1
        }
        var i = powers.count - 1
        while i >= 0 {
            if powers[i] <= powerCapW { return i }
            i -= 1
        }
        return -1
    }

    /// Light structural check of a parsed table (Python's `check_table`); ThorError.format.
    static func checkTable(_ doc: Any) throws {
        guard let m = doc as? [String: Any], (m["format"] as? String) == format else {
            throw ThorError.format("not a power table: format must be '\(format)'")
        }
        guard let version = number(m["version"]), version == Double(PowerTable.version) else {
            throw ThorError.format("power table version \(m["version"] ?? "missing") not supported "
                + "(expected \(PowerTable.version))")
        }
        guard let rl = m["rows"] as? [Any], !rl.isEmpty else {
            throw ThorError.format("power table has no rows")
        }
        for (i, o) in rl.enumerated() {
            guard let r = o as? [String: Any] else {
                throw ThorError.format("power table row \(i) is not an object")
            }
            for k in ["batch_size", "freq_hz", "time_per_sample_s", "peak_power_w"] {
                guard let x = number(r[k]), !(x < 0) else {
                    throw ThorError.format("power table row \(i): \(k) must be a non-negative number")
                }
            }
            if number(r["batch_size"])! < 1 || number(r["time_per_sample_s"])! <= 0 {
                throw ThorError.format("power table row \(i): batch_size and time_per_sample_s must be positive")
            }
        }
        guard let ql = m["ratios"] as? [Any], !ql.isEmpty else {
            throw ThorError.format("power table has no batch-size ratios")
        }
        for (i, o) in ql.enumerated() {
            guard let r = o as? [String: Any], number(r["batch_size"]) != nil, let ratio = number(r["ratio"]),
                  ratio > 0 else {
                throw ThorError.format("power table ratio \(i): needs batch_size and a positive ratio")
            }
        }
    }

    // ------------------------------------------------------------------ select
    /// Parses a power table JSON text and answers `select(doc:powerCapW:)`.
    public static func select(json: String, powerCapW: Double) throws -> Selection {
        return try select(data: Data(json.utf8), powerCapW: powerCapW)
    }

    public static func select(data: Data, powerCapW: Double) throws -> Selection {
        let parsed: Any
        do {
            parsed = try JSONSerialization.jsonObject(with: data, options: [])
        } catch {
            throw ThorError.format("not valid JSON: \(error.localizedDescription)")
        }
        return try select(doc: parsed, powerCapW: powerCapW)
    }

    /// The (batch size, frequency) pair to train with under `powerCapW` watts, from a parsed table
    /// (JSONSerialization output). Throws ThorError.format (malformed table), ThorError.usage (the
    /// cap is not a positive finite number of watts) or ThorError.infeasibleCap (every peak power in
    /// the table is above the cap).
    public static func select(doc tableDoc: Any, powerCapW: Double) throws -> Selection {
        try checkTable(tableDoc)
        guard powerCapW > 0, !powerCapW.isInfinite else {
            throw ThorError.usage("power cap must be a positive number of watts, got \(powerCapW)")
        }
        let doc = tableDoc as! [String: Any]
        var ratios: [Int: Double] = [:]
        for o in doc["ratios"] as! [Any] {
            let r = o as! [String: Any]
            ratios[intOf(number(r["batch_size"])!)] = number(r["ratio"])!
        }
        // batch size -> its rows with their file order (sorted by frequency below, file order on ties)
        var byBatch: [Int: [(order: Int, row: Row)]] = [:]
        for (k, o) in (doc["rows"] as! [Any]).enumerated() {
            let r = o as! [String: Any]
            let bs = intOf(number(r["batch_size"])!)
            if ratios[bs] != nil {
                let row = Row(freqHz: number(r["freq_hz"])!, timePerSampleS: number(r["time_per_sample_s"])!,
                              peakPowerW: number(r["peak_power_w"])!)
                byBatch[bs, default: []].append((order: k, row: row))
            }
        }
        if byBatch.isEmpty {
            throw ThorError.format("power table: no batch size has both profile rows and a ratio")
        }
        var candidates: [Candidate] = []
        var nonMonotone: [Int] = []
        var lowest = Double.infinity
        for bs in byBatch.keys.sorted() {
            let lst = byBatch[bs]!.sorted { a, b in
                a.row.freqHz != b.row.freqHz ? a.row.freqHz < b.row.freqHz : a.order < b.order
            }.map { $0.row }
            let powers = lst.map { $0.peakPowerW }
            for p in powers { lowest = min(lowest, p) }
            let mono = isMonotone(powers)
            let idx = highestFeasibleIndex(powers, powerCapW, monotone: mono)
            if !mono {
                nonMonotone.append(bs)
            }
            if idx >= 0 {
                let row = lst[idx]
                let ratio = ratios[bs]!
                candidates.append(Candidate(batchSize: bs, freqHz: row.freqHz, timePerSampleS: row.timePerSampleS,
                                            peakPowerW: row.peakPowerW, ratio: ratio,
                                            scoreS: row.timePerSampleS * ratio, monotone: mono))
            }
        }
        if candidates.isEmpty {
            throw ThorError.infeasibleCap(powerCapW: powerCapW, lowestFeasiblePowerW: lowest)
        }
        candidates.sort { a, b in
            a.scoreS < b.scoreS ? true : a.scoreS > b.scoreS ? false : a.batchSize > b.batchSize
        }
        let best = candidates[0]
        let est: Double? = number(doc["reference_samples_to_target"]).map { best.scoreS * $0 }
        let knob: String?
        if let k = doc["knob"] {
            knob = k as? String
        } else {
            knob = "gpu_freq_hz"
        }
        return Selection(batchSize: best.batchSize, freqHz: best.freqHz, timePerSampleS: best.timePerSampleS,
                         peakPowerW: best.peakPowerW, ratio: best.ratio, scoreS: best.scoreS,
                         estTimeToAccuracyS: est, powerCapW: powerCapW, knob: knob,
                         candidates: candidates, nonMonotoneBatchSizes: nonMonotone,
                         simulated: truthy(doc["simulated"]))
    }
}
