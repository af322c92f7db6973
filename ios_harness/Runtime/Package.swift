// swift-tools-version:5.7
// The thor-sdk runtime for iOS / macOS (estimator + power-table select): `swift test` runs
// Tests/ThorRuntimeTests against the shared vectors in ../../tests/vectors. Untested on the
// development machine (no Swift toolchain).
import PackageDescription

let package = Package(
    name: "ThorRuntime",
    platforms: [.iOS(.v14), .macOS(.v11)],
    products: [.library(name: "ThorRuntime", targets: ["ThorRuntime"])],
    targets: [
        .target(name: "ThorRuntime"),
        .testTarget(name: "ThorRuntimeTests", dependencies: ["ThorRuntime"]),
    ]
)
