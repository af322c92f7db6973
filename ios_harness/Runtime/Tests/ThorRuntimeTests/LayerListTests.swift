// Owns the Swift layer-list reader tests: the shared layers_*.json vectors and malformed lists, mirroring
// android_harness/runtime/src/test/.../LayerListTest.java. Untested on the development machine (no Swift
// toolchain); run `swift test` in ios_harness/Runtime on macOS.

import Foundation
import XCTest

@testable import ThorRuntime

final class LayerListTests: XCTestCase {
    let good = "{\"format\":\"thor-sdk/layers\",\"version\":1,\"name\":\"tiny\",\"input_shape\":[8],\"layers\":["
        + "{\"name\":\"r\",\"kind\":\"relu\",\"role\":\"input\",\"config\":{\"numel\":8},"
        + "\"cost\":{\"flops_per_sample\":16,\"flops_fixed\":0,\"bytes_per_sample\":64,\"bytes_fixed\":0}},"
        + "{\"kind\":\"output\",\"config\":{\"in_features\":8,\"out_features\":2,\"tokens\":1},"
        + "\"cost\":{\"flops_per_sample\":96,\"flops_fixed\":72,\"bytes_per_sample\":104,\"bytes_fixed\":216,"
        + "\"launches\":1}}]}"

    func text(_ name: String) throws -> String {
        return try String(contentsOf: TestVectors.url(name), encoding: .utf8)
    }

    func num(_ v: Any?) -> Double {
        return (v as! NSNumber).doubleValue
    }

    func testReadsTheSharedLayerLists() throws {
        let files = [("layers_time_profile_0.json", "expected_time_profile.json", 0),
                     ("layers_time_profile_1.json", "expected_time_profile.json", 1),
                     ("layers_energy_floored_0.json", "expected_energy_floored.json", 0),
                     ("layers_energy_floored_1.json", "expected_energy_floored.json", 1),
                     ("layers_time_stand_in_0.json", "expected_time_stand_in.json", 0),
                     ("layers_time_stand_in_1.json", "expected_time_stand_in.json", 1)]
        for (name, expected, index) in files {
            let list = try LayerList.parse(json: try text(name))
            let exp = try JSONSerialization.jsonObject(with: Data(try text(expected).utf8)) as! [String: Any]
            let e = (exp["estimate"] as! [[String: Any]])[index]
            let want = e["layers"] as! [[String: Any]]
            XCTAssertEqual(want.count, list.layers.count, name)
            for (w, got) in zip(want, list.layers) {
                XCTAssertEqual(w["name"] as? String, got.name)
                XCTAssertEqual(w["kind"] as? String, got.kind)
                XCTAssertEqual(w["role"] as? String, got.role)
                XCTAssertEqual((w["config"] as! [String: Any]).mapValues { num($0) }, got.config)
                XCTAssertEqual(w["op"] as? String, got.op)
                XCTAssertEqual(w["approx"] as? String, got.approx)
                XCTAssertEqual((w["recompute"] as? NSNumber)?.doubleValue ?? 0.0, got.recompute)
                let c = w["cost"] as! [String: Any]
                XCTAssertEqual(num(c["flops_per_sample"]), got.cost!.flopsPerSample)
                XCTAssertEqual(num(c["bytes_fixed"]), got.cost!.bytesFixed)
                XCTAssertEqual(num(c["launches"]), got.cost!.launches)
            }
            XCTAssertEqual(list.inputDtype, "float32")
            XCTAssertTrue(list.name!.hasPrefix("synthetic_"))
            let est = try Estimator.load(json: try text(exp["estimator"] as! String))
            let mean = num((e["total"] as! [String: Any])["mean"])
            let r = try est.estimate(layers: list.layers, batchSize: Int(num(e["batch_size"])))
            XCTAssertLessThanOrEqual(abs(r.totalMean - mean), 1e-9 * abs(mean), name)
            let std = num((e["total"] as! [String: Any])["std"])
            XCTAssertLessThanOrEqual(abs(r.totalStd - std), 1e-9 * std, name)
        }
    }

    func testDefaults() throws {
        let list = try LayerList.parse(json: good)
        XCTAssertEqual(list.name, "tiny")
        XCTAssertEqual(list.inputShape, [8])
        XCTAssertEqual(list.inputDtype, "float32")
        XCTAssertEqual(list.layers.count, 2)
        XCTAssertEqual(list.layers[1].name, "1")       // a layer's name defaults to its index
        XCTAssertEqual(list.layers[1].role, "output")  // an output head needs no role
        XCTAssertEqual(list.layers[0].cost!.launches, 1.0)
        let bare = try LayerList.parse(json: good.replacingOccurrences(of: "\"name\":\"tiny\",", with: "")
            .replacingOccurrences(of: "\"input_shape\":[8],", with: ""))
        XCTAssertNil(bare.name)
        XCTAssertTrue(bare.inputShape.isEmpty)
    }

    /// `good` with its first `from` replaced, which must be there.
    func with(_ from: String, _ to: String) -> String {
        guard let r = good.range(of: from) else {
            XCTFail("good lacks \(from)")
            return good
        }
        return good.replacingCharacters(in: r, with: to)
    }

    func assertFormatError(_ text: String, _ fragment: String, line: UInt = #line) {
        XCTAssertThrowsError(try LayerList.parse(json: text), line: line) { error in
            guard let thor = error as? ThorError, case .format(let message) = thor else {
                return XCTFail("expected ThorError.format, got \(error)", line: line)
            }
            XCTAssertTrue(message.contains(fragment), message, line: line)
            XCTAssertFalse(message.contains("\n"), line: line)
        }
    }

    func testRejectsBrokenLists() {
        assertFormatError(String(good.prefix(40)), "not valid JSON")
        assertFormatError("[]", "top level must be an object")
        assertFormatError(with("thor-sdk/layers", "thor-sdk/estimator"), "not a thor-sdk layer list")
        assertFormatError(with("\"version\":1", "\"version\":2"), "unsupported layer-list version")
        assertFormatError(with("\"version\":1", "\"version\":true"), "unsupported layer-list version")
        assertFormatError(with("\"layers\":[", "\"layers\":[],\"was\":["), "layers must be a non-empty array")
        assertFormatError(with("\"input_shape\":[8]", "\"input_shape\":[0]"), "input_shape")
        assertFormatError(with("\"name\":\"tiny\"", "\"input_dtype\":\"float16\""), "input_dtype")
        assertFormatError(with("\"kind\":\"relu\"", "\"kind\":7"), "layer 0 (r): kind must be a string")
        assertFormatError(with("\"config\":{\"numel\":8}", "\"cfg\":{\"numel\":8}"),
                          "layer 0 (r): lacks field 'config'")
        assertFormatError(with("\"numel\":8", "\"numel\":-8"), "config.numel must be a number >= 0")
        assertFormatError(with("\"numel\":8", "\"numel\":\"8\""), "config.numel must be a number >= 0")
        assertFormatError(with("\"role\":\"input\",", ""), "layer 0 (r): no role")
        assertFormatError(with("\"role\":\"input\"", "\"role\":\"first\""),
                          "role must be 'input', 'hidden' or 'output'")
        assertFormatError(with("\"cost\":{\"flops_per_sample\":16,", "\"cost0\":{\"flops_per_sample\":16,"),
                          "layer 0 (r): no cost terms")
        assertFormatError(with("\"flops_fixed\":0,", ""), "layer 0 (r): cost.flops_fixed")
        assertFormatError(with("\"bytes_per_sample\":64", "\"bytes_per_sample\":-1"), "cost.bytes_per_sample")
        assertFormatError(with("\"launches\":1", "\"launches\":0"), "cost.launches must be a finite number > 0")
        assertFormatError(with("{\"name\":\"r\",", "7,{\"name\":\"r\","), "layer 0 must be an object")
        for r in ["1.5", "-0.1", "\"0.5\"", "true"] {
            assertFormatError(with("\"role\":\"input\"", "\"role\":\"input\",\"recompute\":" + r),
                              "layer 0 (r): recompute must be a number in [0, 1]")
        }
        let half = try? LayerList.parse(json: with("\"role\":\"input\"", "\"role\":\"input\",\"recompute\":0.5"))
        XCTAssertEqual(half?.layers[0].recompute, 0.5)
    }
}
