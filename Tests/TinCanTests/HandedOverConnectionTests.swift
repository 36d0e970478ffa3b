import Foundation
import TestSupport
import XCTest

/// `connect --fd N` and `tls --fd N`: a connection another process made (bash's
/// `exec 3<>/dev/tcp/HOST/PORT` here) is used as if tincan had made it.
final class HandedOverConnectionTests: XCTestCase {
    /// Runs tincan under bash with descriptor 3 connected to 127.0.0.1:`port` (bash keeps running
    /// after it, so tincan is its child, not its replacement).
    private func withDescriptor3(to port: UInt16, _ arguments: [String], input: String) throws -> (status: Int32, out: String, err: String) {
        let script = "exec 3<>/dev/tcp/127.0.0.1/\(port) || exit 99; \"$0\" \"$@\"; status=$?; exit $status"
        return try Tool.run(["-c", script, Tool.tincan] + arguments, input: input, program: "/bin/bash")
    }

    func testAPlainConnectionHandedOver() throws {
        let (server, port) = try Tool.listener(["-k", "--exec", "/bin/cat"])
        defer { server.stop() }
        let r = try withDescriptor3(to: port, ["connect", "-v", "--fd", "3"], input: "through descriptor 3\n")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "through descriptor 3\n")
        XCTAssertTrue(r.err.contains("using the connection on descriptor 3 to 127.0.0.1:\(port)"), r.err)
    }

    func testTLSOverAConnectionHandedOverIsVerified() throws {
        let tls = TLSFixtures.shared
        let (server, port) = try Tool.listener(["-k", "--tls", "--cert", tls.path("server.pem"), "--key", tls.path("server.key"), "--exec", "/bin/cat"])
        defer { server.stop() }
        let good = try withDescriptor3(to: port, ["tls", "--half-close", "--fd", "3", "--ca", tls.path("ca.pem"), "--servername", "localhost"], input: "secured\n")
        XCTAssertEqual(good.status, 0, good.err)
        XCTAssertEqual(good.out, "secured\n")
        let untrusted = try withDescriptor3(to: port, ["tls", "--fd", "3"], input: "")
        XCTAssertEqual(untrusted.status, 4, "verified by default: \(untrusted.err)")
    }

    func testWhatIsNotAConnectionIsAUsageError() throws {
        let (server, port) = try Tool.listener(["-k"])
        defer { server.stop() }
        for (arguments, expected) in [
            (["connect", "--fd", "3", "127.0.0.1", "1"], "give no HOST PORT"),
            (["connect", "--fd", "9"], "descriptor 9 is not a connected stream socket"),
            (["connect", "--fd", "3", "--proxy", "socks5://127.0.0.1:1"], "--proxy is for a connection tincan makes"),
        ] {
            let r = try withDescriptor3(to: port, arguments, input: "")
            XCTAssertEqual(r.status, 2, "\(arguments): \(r.err)")
            XCTAssertTrue(r.err.contains(expected), "\(arguments): \(r.err)")
        }
    }
}
