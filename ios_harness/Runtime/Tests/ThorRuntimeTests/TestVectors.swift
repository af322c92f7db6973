// The shared test vectors folder (tests/vectors, or THOR_VECTORS) for the Swift runtime's tests,
// mirroring android_harness/runtime/src/test/.../TestVectors.java. Not compiled on the development
// machine (no Swift toolchain there).

import Foundation

enum TestVectors {
    static var folder: URL {
        if let dir = ProcessInfo.processInfo.environment["THOR_VECTORS"] {
            return URL(fileURLWithPath: dir)
        }
        // ios_harness/Runtime/Tests/ThorRuntimeTests/TestVectors.swift -> repository root
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<5 { url.deleteLastPathComponent() }
        return url.appendingPathComponent("tests").appendingPathComponent("vectors")
    }

    static func url(_ name: String) -> URL {
        return folder.appendingPathComponent(name)
    }

    /// A vectors file's text (UTF-8).
    static func text(_ name: String) throws -> String {
        return try String(contentsOf: url(name), encoding: .utf8)
    }
}
