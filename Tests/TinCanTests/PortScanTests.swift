import Foundation
import TestSupport
import XCTest

/// connect -z: a port is open only when something listens there, a proxy's refusal of one port
/// does not end the scan, and --json names each port's real address.
final class PortScanTests: XCTestCase {
    /// Every port of loopback, in a private network namespace where one listener runs: only its
    /// port is open. Without a check, a probe of a port in the ephemeral range can pick that same
    /// port as its source and connect to itself (a TCP simultaneous open): "open", with nothing
    /// there. Three full scans.
    func testAFullScanFindsOnlyWhatListens() throws {
        guard getuid() == 0 else { throw Namespace.unavailable("a private network namespace needs root") }
        let script = """
            ip link set lo up || exit 90
            "$0" listen -k 127.0.0.1 40404 < /dev/null > /dev/null 2>&1 &
            listener=$!
            trap 'kill $listener' EXIT
            for i in $(seq 500); do grep -q ':9DD4 00000000:0000 0A' /proc/net/tcp && break; sleep 0.01; done
            for run in 1 2 3; do "$0" connect -z 127.0.0.1 1-65535 || exit 91; done
            """
        let r = try Tool(["-n", "sh", "-c", script, Tool.tincan], program: "/usr/bin/unshare")
        r.closeInput()
        XCTAssertEqual(r.wait(timeout: .seconds(120)), 0, r.stderrText)
        XCTAssertEqual(
            r.stdoutText.split(separator: "\n").map { $0.split(separator: " ").prefix(3).joined(separator: " ") },
            Array(repeating: "127.0.0.1 40404 open", count: 3), r.stdoutText)
    }

    /// A probe from the port it probes (-s) connects to itself: closed, not open. -s is the
    /// probes' source, as with connect.
    func testASocketConnectedToItselfIsNoOpenPort() throws {
        let port = freePort()
        let r = try Tool.run(["connect", "-z", "-v", "--json", "-s", "127.0.0.1:\(port)", "127.0.0.1", String(port)], input: "")
        XCTAssertEqual(r.status, 1, r.err)
        XCTAssertTrue(r.out.hasPrefix("127.0.0.1 \(port) closed "), r.out)
        XCTAssertTrue(r.err.contains("connected to itself"), r.err)
    }

    /// Through tinyproxy, which may CONNECT only to one port (ConnectPort): the others are
    /// closed (its 403 quoted), the scan goes on, exit 0 as one port is open. Through squid, a
    /// refused port is closed too (X-Squid-Error ERR_CONNECT_FAIL 111).
    func testAProxyRefusingOnePortDoesNotEndTheScan() throws {
        let open = try PythonPeer(PythonPeers.listenPrelude + "while True: s.accept()[0].close()")
        defer { open.stop() }
        let closed = freePort()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-scan-\(getpid())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (proxy, ports) = try Listeners.start { ports in
            try "Port \(ports[0])\nListen 127.0.0.1\nAllow 127.0.0.1\nConnectPort \(open.port)\nLogLevel Critical\n"
                .write(toFile: "\(directory)/tinyproxy.conf", atomically: true, encoding: .utf8)
            return try Spawned(["/usr/bin/tinyproxy", "-d", "-c", "\(directory)/tinyproxy.conf"])
        }
        defer { Listeners.stop(proxy) }
        let r = try Tool.run(["connect", "-z", "-v", "--json", "--proxy", "http://127.0.0.1:\(ports[0])", "127.0.0.1", "\(closed),\(open.port)"], input: "")
        XCTAssertEqual(r.status, 0, r.err)
        let states = r.out.split(separator: "\n").map { $0.split(separator: " ").prefix(3).joined(separator: " ") }
        XCTAssertEqual(states, ["127.0.0.1 \(closed) closed", "127.0.0.1 \(open.port) open"], r.out)
        XCTAssertTrue(r.err.contains(#""reason":"the proxy refused it: the HTTP proxy answered 'HTTP/1.1 403 Access violation'""#), r.err)
        XCTAssertTrue(r.err.contains(#""address":"127.0.0.1:\#(closed)""#), r.err)

        guard getuid() == 0 else { throw Namespace.unavailable("squid starts as root") }
        let squid = try RealDaemon.squid(user: "bob", password: "secret")
        defer { squid.stop() }
        let s = try Tool.run(["connect", "-z", "-v", "--proxy", "http://bob:secret@127.0.0.1:\(squid.ports[0])", "127.0.0.1", "\(closed),\(open.port)"], input: "")
        XCTAssertEqual(s.status, 0, s.err)
        XCTAssertEqual(
            s.out.split(separator: "\n").map { $0.split(separator: " ").prefix(3).joined(separator: " ") },
            ["127.0.0.1 \(closed) closed", "127.0.0.1 \(open.port) open"], s.out)
    }

    /// --json port events carry the address probed, with its port.
    func testJSONPortEventsNameTheRealAddress() throws {
        let open = try PythonPeer(PythonPeers.listenPrelude + "while True: s.accept()[0].close()")
        defer { open.stop() }
        let r = try Tool.run(["connect", "-z", "--json", "127.0.0.1", String(open.port)], input: "")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.err.contains(#""address":"127.0.0.1:\#(open.port)""#), r.err)
        XCTAssertFalse(r.err.contains("127.0.0.1:0"), r.err)
    }
}
