import Foundation
import TestSupport
import XCTest

/// The Autobahn|Testsuite (`wstest`, under Python 2.7) against tincan's WebSocket client
/// (`ws --echo`, driven by its fuzzingserver) and server (`listen -k --ws --echo`, driven by its
/// fuzzingclient): sections 1 to 7 (framing, pings and pongs, reserved bits, opcodes,
/// fragmentation, UTF-8, the close handshake), every case OK, NON-STRICT or INFORMATIONAL.
final class AutobahnTests: XCTestCase {
    private static let sections = ["1.*", "2.*", "3.*", "4.*", "5.*", "6.*", "7.*"]

    /// wstest from the Python 2.7 that pyenv holds (scripts/install-peers puts it there).
    private func wstest() throws -> String {
        let environment = ProcessInfo.processInfo.environment
        let root = environment["PYENV_ROOT"] ?? "\(environment["HOME"] ?? "/root")/.pyenv"
        let path = "\(root)/versions/2.7.18/bin/wstest"
        guard FileManager.default.isExecutableFile(atPath: path) else {
            if environment["CI"] == "true" { XCTFail("no \(path): scripts/install-peers installs autobahntestsuite") }
            throw XCTSkip("no \(path): PYENV_VERSION=2.7.18 python -m pip install autobahntestsuite")
        }
        return path
    }

    private func directory(_ name: String) -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-autobahn-\(getpid())-\(name)").path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        return path
    }

    /// The cases of the report in `directory` that are not OK, NON-STRICT or INFORMATIONAL
    /// (their behaviour or their close's), and how many cases it has.
    private func failures(_ directory: String) throws -> (failed: [String], count: Int) {
        let data = try Data(contentsOf: URL(fileURLWithPath: "\(directory)/index.json"))
        let index = try XCTUnwrap(JSONSerialization.jsonObject(with: data) as? [String: [String: [String: Any]]])
        let cases = try XCTUnwrap(index["tincan"])
        let passing: Set<String> = ["OK", "NON-STRICT", "INFORMATIONAL"]
        let failed = cases.filter { _, result in
            !passing.contains(result["behavior"] as? String ?? "") || !["OK", "INFORMATIONAL"].contains(result["behaviorClose"] as? String ?? "")
        }
        return (failed.map { "\($0.key): \($0.value["behavior"] ?? "?")/\($0.value["behaviorClose"] ?? "?")" }.sorted(), cases.count)
    }

    func testTheClientPassesTheFuzzingServer() throws {
        let wstest = try wstest()
        let reports = directory("client")
        let (server, port) = try Tool.server(program: wstest) { port in
            let spec = "{\"url\": \"ws://127.0.0.1:\(port)\", \"outdir\": \"\(reports)\", \"cases\": [\(AutobahnTests.sections.map { "\"\($0)\"" }.joined(separator: ","))]}"
            try? spec.write(toFile: "\(reports)/spec-\(port).json", atomically: false, encoding: .utf8)
            return ["-m", "fuzzingserver", "-s", "\(reports)/spec-\(port).json"]
        }
        defer { server.stop() }
        let base = "ws://127.0.0.1:\(port)"
        let count = try Tool.run(["ws", "\(base)/getCaseCount"], input: "")
        let cases = try XCTUnwrap(Int(count.out.trimmingCharacters(in: .whitespacesAndNewlines)), count.err)
        XCTAssertGreaterThan(cases, 200)
        for number in 1...cases {
            // Each case ends as it likes (a close with an error code, a failed connection): the
            // suite judges it, not the exit code.
            _ = try Tool.run(["ws", "--echo", "\(base)/runCase?case=\(number)&agent=tincan"], timeout: .seconds(60))
        }
        let update = try Tool.run(["ws", "\(base)/updateReports?agent=tincan"], input: "")
        XCTAssertEqual(update.status, 0, update.err)
        let (failed, total) = try failures(reports)
        XCTAssertEqual(total, cases)
        XCTAssertEqual(failed, [], "cases not passed")
    }

    func testTheServerPassesTheFuzzingClient() throws {
        let wstest = try wstest()
        let reports = directory("server")
        let (server, port) = try Tool.server(program: Tool.tincan) { ["listen", "-k", "--ws", "--echo", "127.0.0.1", String($0)] }
        defer { server.stop() }
        let spec =
            "{\"outdir\": \"\(reports)\", \"servers\": [{\"agent\": \"tincan\", \"url\": \"ws://127.0.0.1:\(port)\"}], \"cases\": [\(AutobahnTests.sections.map { "\"\($0)\"" }.joined(separator: ","))]}"
        try spec.write(toFile: "\(reports)/spec.json", atomically: false, encoding: .utf8)
        let run = try Tool.run(["-m", "fuzzingclient", "-s", "\(reports)/spec.json"], timeout: .seconds(300), program: wstest)
        XCTAssertEqual(run.status, 0, run.err)
        let (failed, total) = try failures(reports)
        XCTAssertGreaterThan(total, 200)
        XCTAssertEqual(failed, [], "cases not passed")
        XCTAssertTrue(server.process.isRunning, "the server serves on: \(server.stderrText)")
    }
}
