import Foundation
import TestSupport
import XCTest

/// The CLI on real test hosts in a private network namespace: 198.18.0.1 works over IPv4,
/// 2001:db8::1 is a blackhole, names come from the namespace's own /etc/hosts, and no DNS
/// query or packet can leave the namespace.
final class NamespaceCommandTests: XCTestCase {
    static let setup =
        Namespace.testNetwork(extra: ["198.18.0.5"])
        + "\nip neigh add 198.18.0.99 lladdr 02:00:00:00:00:01 dev va nud permanent"
    static let hosts = """
        127.0.0.1 localhost
        198.18.0.1 dual.test
        2001:db8::1 dual.test v6blackhole.test

        """

    /// The namespace every scenario here runs in, each in one of its own.
    private func inNetwork(file: StaticString = #filePath, line: UInt = #line, _ body: () throws -> Void) throws {
        try Namespace.scenario(self, setup: NamespaceCommandTests.setup, hosts: NamespaceCommandTests.hosts, file: file, line: line, body)
    }

    func testHappyEyeballsTraceOnStderr() throws {
        try inNetwork { try happyEyeballsTraceOnStderr() }
    }

    func testPreferIPv4AndTheAttemptDelay() throws {
        try inNetwork { try preferIPv4AndTheAttemptDelay() }
    }

    func testConnectTimeoutExitsWithCode3() throws {
        try inNetwork { try connectTimeoutExitsWithCode3() }
    }

    func testUnresolvableNameExitsWithCode1() throws {
        try inNetwork { try unresolvableNameExitsWithCode1() }
    }

    func testSourceAndInterfaceBinding() throws {
        try inNetwork { try sourceAndInterfaceBinding() }
    }

    func testSilentPortProbesAsFiltered() throws {
        try inNetwork { try silentPortProbesAsFiltered() }
    }

    private func echoServer(_ extra: [String] = []) throws -> (Tool, UInt16) {
        let port = freePort()
        let server = try Tool(["listen", "-k", "-v"] + extra + ["--exec", "/bin/cat", "198.18.0.1", String(port)])
        waitForListener(port: port, host: "198.18.0.1")
        return (server, port)
    }

    func happyEyeballsTraceOnStderr() throws {
        let (server, port) = try echoServer()
        defer { server.stop() }
        let start = ContinuousClock.now
        let r = try Tool.run(["connect", "-v", "dual.test", String(port)], input: "over v4\n")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "over v4\n")
        let lines = r.err.split(separator: "\n").map { String($0.replacingOccurrences(of: #" \(\d+(\.\d+)? ms\)"#, with: "", options: .regularExpression)) }
        XCTAssertEqual(
            Array(lines.prefix(4)),
            [
                "tincan: trying [2001:db8::1]:\(port)",
                "tincan: trying 198.18.0.1:\(port)",
                "tincan: 198.18.0.1:\(port) connected",
                "tincan: [2001:db8::1]:\(port) abandoned",
            ], r.err)
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(240), "IPv4 waited for the attempt delay")
    }

    /// --prefer-ipv4 tries 198.18.0.1 first (the blackholed IPv6 address is never needed);
    /// --attempt-delay 1s holds the IPv4 attempt back for a second behind the silent IPv6 one.
    func preferIPv4AndTheAttemptDelay() throws {
        let (server, port) = try echoServer()
        defer { server.stop() }
        let preferred = try Tool.run(["connect", "-v", "--prefer-ipv4", "dual.test", String(port)], input: "v4 first\n")
        XCTAssertEqual(preferred.status, 0, preferred.err)
        XCTAssertEqual(preferred.out, "v4 first\n")
        XCTAssertTrue(preferred.err.hasPrefix("tincan: trying 198.18.0.1:\(port)"), preferred.err)
        XCTAssertFalse(preferred.err.contains("trying [2001:db8::1]"), preferred.err)

        let start = ContinuousClock.now
        let delayed = try Tool.run(["connect", "-v", "--attempt-delay", "1s", "dual.test", String(port)], input: "later\n")
        XCTAssertEqual(delayed.status, 0, delayed.err)
        XCTAssertTrue(delayed.err.hasPrefix("tincan: trying [2001:db8::1]:\(port)"), delayed.err)
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(950), "IPv4 waited for the 1 s attempt delay")
        for bad in ["50ms", "3s"] {
            let refused = try Tool.run(["connect", "--attempt-delay", bad, "dual.test", String(port)], input: "")
            XCTAssertEqual(refused.status, 2, refused.err)
            XCTAssertTrue(refused.err.contains("give 100ms to 2s"), refused.err)
        }
        let both = try Tool.run(["connect", "--prefer-ipv4", "--prefer-ipv6", "dual.test", String(port)], input: "")
        XCTAssertEqual(both.status, 2, both.err)
    }

    func connectTimeoutExitsWithCode3() throws {
        let r = try Tool.run(["connect", "-w", "400ms", "v6blackhole.test", "80"], input: "")
        XCTAssertEqual(r.status, 3, r.err)
        XCTAssertTrue(r.err.hasPrefix("tincan: connect to v6blackhole.test:80 failed: [2001:db8::1]:80 timed out after "), r.err)
        XCTAssertEqual(r.err.filter { $0 == "\n" }.count, 1)
        // A numeric address connects on the main thread (BlockingConnector): the same story.
        let start = ContinuousClock.now
        let numeric = try Tool.run(["connect", "-w", "400ms", "2001:db8::1", "80"], input: "")
        XCTAssertEqual(numeric.status, 3, numeric.err)
        XCTAssertTrue(numeric.err.hasPrefix("tincan: connect to [2001:db8::1]:80 failed: [2001:db8::1]:80 timed out after "), numeric.err)
        XCTAssertEqual(numeric.err.filter { $0 == "\n" }.count, 1)
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(390))
    }

    func unresolvableNameExitsWithCode1() throws {
        let r = try Tool.run(["connect", "nosuch.test", "80"], input: "")
        XCTAssertEqual(r.status, 1, r.err)
        XCTAssertTrue(r.err.hasPrefix("tincan: connect to nosuch.test:80 failed: AAAA lookup of nosuch.test: "), r.err)
        XCTAssertTrue(r.err.contains("; A lookup of nosuch.test: "), r.err)
    }

    func sourceAndInterfaceBinding() throws {
        let (server, port) = try echoServer()
        defer { server.stop() }
        let r = try Tool.run(["connect", "-v", "-s", "198.18.0.5", "--interface", "va", "198.18.0.1", String(port)], input: "bound\n")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "bound\n")
        XCTAssertTrue(r.err.contains("from 198.18.0.5:"), r.err)
    }

    /// 198.18.0.99 swallows SYNs (a neighbour entry for a MAC nobody has): filtered, not closed.
    func silentPortProbesAsFiltered() throws {
        let (server, port) = try echoServer()
        defer { server.stop() }
        let r = try Tool.run(["connect", "-z", "-v", "-w", "300ms", "198.18.0.99", "80,\(port)"])
        XCTAssertEqual(r.status, 1, r.err)
        XCTAssertEqual(
            r.out.split(separator: "\n").map { $0.split(separator: " ").prefix(3).joined(separator: " ") },
            ["198.18.0.99 80 filtered", "198.18.0.99 \(port) filtered"])
        XCTAssertEqual(r.err, "tincan: no open port among 2 on 198.18.0.99\n")
        let open = try Tool.run(["connect", "-z", "-w", "300ms", "198.18.0.1", String(port)])
        XCTAssertEqual(open.status, 0, open.err)
        XCTAssertTrue(open.out.hasPrefix("198.18.0.1 \(port) open "), open.out)
    }
}
