import Foundation
import TestSupport
import XCTest

/// --tls-min, --tls-max, --ciphers, --ciphersuites and --curves against openssl's own ends.
final class TLSControlsTests: XCTestCase {
    private let certs = TLSFixtures.shared

    private func server(_ extra: [String] = []) throws -> (Tool, UInt16) {
        let port = freePort()
        let tool = try Tool(
            [
                "s_server", "-accept", "127.0.0.1:\(port)", "-cert", certs.path("server.pem"), "-key", certs.path("server.key"),
                "-rev", "-quiet",
            ] + extra, program: "/usr/bin/openssl")
        waitForListener(port: port)
        return (tool, port)
    }

    /// One line to the server and its answer; --half-close, since s_server ends a session only
    /// at the client's close_notify (which tincan would otherwise hold for 5 s of quiet).
    private func tls(_ options: [String], port: UInt16) throws -> (status: Int32, out: String, err: String) {
        try Tool.run(["tls", "--half-close", "--ca", certs.path("ca.pem")] + options + ["localhost", String(port)], input: "abc\n")
    }

    func testVersionsCiphersSuitesAndCurvesChooseTheSession() throws {
        let (s, port) = try server()
        defer { s.stop() }
        let twelve = try tls(["--tls-max", "1.2", "--ciphers", "ECDHE-ECDSA-AES128-GCM-SHA256"], port: port)
        XCTAssertEqual(twelve.status, 0, twelve.err)
        XCTAssertEqual(twelve.out, "cba\n")
        XCTAssertTrue(twelve.err.contains("tincan: TLSv1.2, ECDHE-ECDSA-AES128-GCM-SHA256"), twelve.err)
        let chacha = try tls(["--ciphersuites", "TLS_CHACHA20_POLY1305_SHA256"], port: port)
        XCTAssertEqual(chacha.status, 0, chacha.err)
        XCTAssertTrue(chacha.err.contains("tincan: TLSv1.3, TLS_CHACHA20_POLY1305_SHA256"), chacha.err)
        let bad = try tls(["--ciphersuites", "TLS_NOT_A_SUITE"], port: port)
        XCTAssertNotEqual(bad.status, 0)
        XCTAssertTrue(bad.err.contains("no usable TLS 1.3 cipher suite in 'TLS_NOT_A_SUITE'"), bad.err)
    }

    func testAServerOnlyOfP384AndOnlyOfTLS12() throws {
        let (p384, port) = try server(["-groups", "P-384"])
        defer { p384.stop() }
        let x25519 = try tls(["--curves", "X25519"], port: port)
        XCTAssertNotEqual(x25519.status, 0, "no group in common")
        let matching = try tls(["--curves", "X25519,P-384"], port: port)
        XCTAssertEqual(matching.status, 0, matching.err)
        XCTAssertEqual(matching.out, "cba\n")

        let (old, oldPort) = try server(["-tls1_2"])
        defer { old.stop() }
        let refused = try tls(["--tls-min", "1.3"], port: oldPort)
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.err.lowercased().contains("version"), refused.err)
        XCTAssertEqual(try tls([], port: oldPort).status, 0, "1.2 is accepted by default")
    }

    func testTheListenersSideAndTheUsageRules() throws {
        let port = freePort()
        let listener = try Tool([
            "listen", "--tls", "--cert", certs.path("server.pem"), "--key", certs.path("server.key"), "--tls-max", "1.2",
            "127.0.0.1", String(port),
        ])
        defer { listener.stop() }
        waitForListener(port: port)
        listener.closeInput()
        let client = try Tool(["s_client", "-connect", "127.0.0.1:\(port)", "-brief", "-ign_eof"], program: "/usr/bin/openssl")
        client.send("x\n")
        client.closeInput()
        XCTAssertEqual(client.wait(), 0, client.stderrText)
        XCTAssertTrue(client.stderrText.contains("Protocol version: TLSv1.2"), client.stderrText)
        XCTAssertEqual(listener.wait(), 0, listener.stderrText)

        for (arguments, message) in [
            (["tls", "--tls-min", "1.3", "--tls-max", "1.2", "localhost", "9"], "--tls-min 1.3 is above --tls-max 1.2"),
            (["connect", "--ciphers", "X", "127.0.0.1", "9"], "--ciphers needs --tls"),
            (["listen", "--curves", "X25519", "9"], "--curves needs --tls"),
            (["tls", "--tls-max", "1.1", "localhost", "9"], "1.1"),
        ] {
            let r = try Tool.run(arguments)
            XCTAssertEqual(r.status, 2, "\(arguments): \(r.err)")
            XCTAssertTrue(r.err.contains(message), "\(arguments): \(r.err)")
        }
    }
}
