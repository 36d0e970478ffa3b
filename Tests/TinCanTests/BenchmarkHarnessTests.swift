import Foundation
import XCTest

/// `Benchmarks/run` is too slow for the test command, but its arithmetic is not: the table's
/// ratios must point the right way for each kind of figure, lost bytes must be flagged, and it
/// must build tincan the way README says.
final class BenchmarkHarnessTests: XCTestCase {
    private let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Loads the harness as a module (its main() does not run) and runs `body` with it as `run`.
    private func python(_ body: String) throws -> (status: Int32, out: String, err: String) {
        let script = """
            import importlib.machinery, importlib.util, sys
            loader = importlib.machinery.SourceFileLoader("bench", sys.argv[1])
            spec = importlib.util.spec_from_loader("bench", loader)
            run = importlib.util.module_from_spec(spec)
            loader.exec_module(run)
            \(body)
            """
        let tool = try Tool(["python3", "-c", script, root.appendingPathComponent("Benchmarks/run").path], program: "/usr/bin/env")
        tool.closeInput()
        let status = tool.wait()
        return (status, tool.stdoutText, tool.stderrText)
    }

    func testTableRatiosFollowWhichWayIsBetter() throws {
        let r = try python(
            """
            results = {
                "bulk (GB/s)": {"higher": True, "runs": {
                    "tincan": [{"rate": 2.0, "cpu_send": 0.5, "cpu_recv": 0.1, "cpu": 0.6, "rss": 7.0, "complete": True}] * 3,
                    "peer": [{"rate": 1.0, "cpu_send": 1.0, "cpu_recv": 0.3, "cpu": 1.3, "rss": 4.0, "complete": True},
                             {"rate": 0.5, "cpu_send": 1.0, "cpu_recv": 0.3, "cpu": 1.3, "rss": 4.0, "complete": False},
                             {"rate": 1.5, "cpu_send": 1.0, "cpu_recv": 0.3, "cpu": 1.3, "rss": 4.0, "complete": True}],
                    "silent": [{"rate": 0.0, "rss": 1.0, "complete": False}] * 2}},
                "start-up (ms)": {"higher": False, "runs": {
                    "tincan": [{"rate": 2.0}, {"rate": 3.0}, {"rate": 2.5}],
                    "nc": [{"rate": 1.0}] * 3}},
                "threads added": {"higher": False, "runs": {
                    "tincan": [{"rate": 0}] * 3,
                    "some": [{"rate": 2}] * 3,
                    "none": [{"rate": 0}] * 3}},
            }
            print(run.summarize(results))
            """)
        XCTAssertEqual(r.status, 0, r.err)
        func row(_ tool: String, after title: String) -> [String]? {
            let lines = r.out.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            guard let start = lines.firstIndex(of: title) else { return nil }
            return lines[start...].first { $0.hasPrefix("  \(tool) ") }.map { $0.split(separator: " ").map(String.init) }
        }
        // Throughput: tincan 2.0 against the peer's median 1.0 -> 2.00x; spread min-max.
        let peer = try XCTUnwrap(row("peer", after: "bulk (GB/s)"), r.out)
        XCTAssertEqual(Array(peer.prefix(3)), ["peer", "1", "0.5-1.5"])
        XCTAssertEqual(peer[3], "1.00+0.30", "CPU per GiB, sender+receiver")
        XCTAssertTrue(peer.contains("2.00x"), r.out)
        XCTAssertTrue(r.out.contains("(lost bytes in 1/3 runs)"), r.out)
        // A tool that delivered nothing gets no ratio.
        let silent = try XCTUnwrap(row("silent", after: "bulk (GB/s)"), r.out)
        XCTAssertTrue(silent.contains("n/a"), r.out)
        XCTAssertTrue(r.out.contains("(lost bytes in 2/2 runs)"), r.out)
        // Time: lower is better, so tincan's 2.5 ms against nc's 1.0 ms is 0.40x.
        let nc = try XCTUnwrap(row("nc", after: "start-up (ms)"), r.out)
        XCTAssertEqual(nc.last, "0.40x", r.out)
        // A count where tincan has none: no division by zero, and none against none is even.
        XCTAssertEqual(try XCTUnwrap(row("some", after: "threads added"), r.out).last, "inf", r.out)
        XCTAssertEqual(try XCTUnwrap(row("none", after: "threads added"), r.out).last, "1.00x", r.out)
    }

    func testItBuildsWithTheReadmeCommand() throws {
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let line = try XCTUnwrap(readme.split(separator: "\n").first { $0.hasPrefix("scripts/build") })
        let readmeBuild = line.components(separatedBy: " && ")[0]
        let r = try python("print(' '.join(run.BUILD))")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out.trimmingCharacters(in: .newlines), root.appendingPathComponent(readmeBuild).path)
    }
}
