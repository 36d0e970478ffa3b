import Foundation
import XCTest

/// SocketCore as an outside package uses it: Tests/OutsidePackage depends on it through
/// `.package(path:)`, imports it without @testable in Swift 6 mode, and runs TCP, TLS, UDP, a
/// relay (a waiting listener, Dial, StreamRelay) and a marked target queue through the public
/// API alone.
final class OutsidePackageTests: XCTestCase {
    func testAPackageThatDependsOnSocketCoreBuildsAndRuns() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let package = root.appendingPathComponent("Tests/OutsidePackage").path
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-outside-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let build = try Tool(["swift", "build", "--package-path", package, "--scratch-path", scratch], program: "/usr/bin/env")
        build.closeInput()
        XCTAssertEqual(build.wait(timeout: .seconds(600)), 0, build.stdoutText + build.stderrText)
        let run = try Tool([], program: "\(scratch)/debug/OutsideUser")
        run.closeInput()
        XCTAssertEqual(run.wait(timeout: .seconds(60)), 0, run.stdoutText + run.stderrText)
        XCTAssertTrue(run.stdoutText.hasSuffix("outside package: ok\n"), run.stdoutText)
        XCTAssertFalse(run.stdoutText.contains("FAILED"), run.stdoutText)
    }
}
