import Foundation
import XCTest

/// The README's "Ten things to try" are run as they are written, so they cannot drift: each
/// ```sh block in that section runs in bash, in a directory of its own, with this build's tincan
/// first on PATH; it must exit 0, and print every `# -> TEXT` it promises (stdout or stderr).
/// A line that starts a listener in the background (`... &`) is followed by a bounded wait until
/// its port is bound, where a person would have waited for the other terminal.
final class ReadmeExamplesTests: XCTestCase {
    private let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The blocks of the README section `heading`, in order.
    private func blocks(under heading: String) throws -> [String] {
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let start = try XCTUnwrap(readme.range(of: "\n" + heading))
        let rest = readme[start.upperBound...]
        let section = rest.range(of: "\n## ").map { rest[..<$0.lowerBound] } ?? rest
        return section.components(separatedBy: "```sh\n").dropFirst().compactMap { $0.components(separatedBy: "\n```").first }
    }

    /// Waits (at most 10 s) until something is bound to the TCP or UDP port $1.
    private static let prelude = #"""
        set -eu
        # Each background job in a process group of its own, all ended when the block is done.
        set -m
        trap 'for job in $(jobs -p); do kill -- -"$job" 2>/dev/null || true; done' EXIT
        wait_for_port() {
            local hex; hex=$(printf '%04X' "$1")
            for _ in $(seq 1 1000); do
                if awk 'NR > 1 { print $2 }' /proc/net/tcp /proc/net/tcp6 /proc/net/udp /proc/net/udp6 | grep -qi ":$hex\$"; then return 0; fi
                sleep 0.01
            done
            echo "nothing bound port $1 within 10 s" >&2
            return 1
        }

        """#

    /// The block as a script: after each line that ends in `&`, a wait for the port it names.
    private func script(_ block: String) -> String {
        var lines: [String] = []
        for line in block.split(separator: "\n", omittingEmptySubsequences: false) {
            lines.append(String(line))
            let code = line.components(separatedBy: " #").first ?? ""
            guard code.trimmingCharacters(in: .whitespaces).hasSuffix("&") else { continue }
            let words = code.split(separator: " ").map(String.init)
            if let port = words.first(where: { (4...5).contains($0.count) && $0.allSatisfy(\.isNumber) }) {
                lines.append("wait_for_port " + port)
            }
        }
        return ReadmeExamplesTests.prelude + lines.joined(separator: "\n") + "\n"
    }

    func testEveryExampleRunsAndPrintsWhatItPromises() throws {
        let examples = try blocks(under: "## Ten things to try")
        XCTAssertEqual(examples.count, 10, "the README promises ten")
        let tincanDirectory = URL(fileURLWithPath: Tool.tincan).deletingLastPathComponent().path
        for (index, example) in examples.enumerated() {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-readme-\(getpid())-\(index)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let environment = ProcessInfo.processInfo.environment.merging(["PATH": tincanDirectory + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")]) { $1 }
            let run = try Tool.run(["-c", "cd '\(directory.path)'\n" + script(example)], timeout: .seconds(60), environment: environment, program: "/bin/bash")
            let title = example.split(separator: "\n").first.map(String.init) ?? "example \(index + 1)"
            XCTAssertEqual(run.status, 0, "\(title)\n\(run.out)\(run.err)")
            let printed = run.out + run.err
            for promise in example.split(separator: "\n").filter({ $0.hasPrefix("# -> ") }) {
                XCTAssertTrue(printed.contains(promise.dropFirst(5)), "\(title): no '\(promise.dropFirst(5))' in\n\(printed)")
            }
        }
    }
}
