import XCTest
@testable import ThorHarness

final class ProtocolTests: XCTestCase {
    func testRobustCv() {
        XCTAssertEqual(ProtocolRunner.median([3, 1, 2]), 2)
        XCTAssertEqual(ProtocolRunner.cv([1, 1, 1]), 0)
        XCTAssertGreaterThan(ProtocolRunner.cv([1, 2, 3, 10]), 0.3)
    }

    func testPathsStayInsideTheContainer() {
        XCTAssertNil(Paths.insideContainer("/etc/passwd"))
        XCTAssertNil(Paths.insideContainer("Documents/../../x"))
        XCTAssertNotNil(Paths.insideContainer("Documents/thor-sdk/run 1/bundle"))
        XCTAssertNil(LaunchArgs.parse(["app", "--bundle", "Documents/b"]))
    }

    final class Counter: StepRunner {
        var n = 0
        func step() throws { n += 1; usleep(200) }
    }

    func testMeasureInterleavesParts() throws {
        var s = Settings(nil)
        s.minRounds = 2; s.maxRounds = 2; s.warmupSteps = 1; s.minWindowS = 0.002
        let head = Counter(), hidden = Counter()
        let r = try ProtocolRunner.measure([("head", head), ("hidden", hidden)], s, metric: "time", meter: nil,
                                           idle: nil, env: .real(state: nil))
        XCTAssertEqual(r.map { $0.0 }, ["head", "hidden"])
        XCTAssertEqual(r[1].1.timeS.count, 2)
        XCTAssertEqual(r[1].1.windows.count, 2)
        XCTAssertEqual(ProtocolRunner.abba(["head", "hidden"], 1), ["hidden", "head"])
    }
}
