import Foundation
import TestSupport
import XCTest

/// `tincan tls`, `connect --tls` and `listen --tls` against openssl s_server / s_client.
final class TLSCommandTests: XCTestCase {
    private let certs = TLSFixtures.shared

    /// `openssl s_server -rev` (answers each line reversed) with one of the fixture certificates.
    private func server(_ cert: String = "server", extra: [String] = []) throws -> (Tool, UInt16) {
        try Tool.server(program: "/usr/bin/openssl") { port in
            [
                "s_server", "-accept", "127.0.0.1:\(port)", "-cert", certs.path("\(cert).pem"),
                "-key", certs.path("\(cert).key"), "-rev", "-quiet",
            ] + extra
        }
    }

    /// --show-cert prints the chain even when it does not verify (fetching a certificate in
    /// order to trust it is its main use), and still exits 4 with the reason.
    /// TLS to a numeric host is dialled on the main thread, as a plain connect is: its
    /// connect(2) comes before any thread starts (dispatch's threads come with the handshake).
    func testTLSToANumericHostConnectsBeforeAnyThreadStarts() throws {
        let (listener, port) = try Tool.listener(["--tls"])
        defer { listener.stop() }
        listener.closeInput()
        let trace = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-tls-strace-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: trace) }
        let traced = try Tool.run(
            ["-f", "-e", "trace=clone,clone3,connect", "-o", trace, Tool.tincan, "tls", "--insecure", "--send", "numeric\\n", "127.0.0.1", String(port)],
            program: "/usr/bin/strace")
        XCTAssertEqual(traced.status, 0, traced.err)
        XCTAssertEqual(listener.wait(), 0, listener.stderrText)
        XCTAssertEqual(listener.stdoutText, "numeric\n")
        let lines = fileText(trace).split(separator: "\n")
        let connect = try XCTUnwrap(lines.firstIndex { $0.contains("connect(") && $0.contains("htons(\(port))") }, "\(lines)")
        let firstThread = lines.firstIndex { $0.contains("clone") } ?? lines.count
        XCTAssertLessThan(connect, firstThread, "a thread started before the connect: \(lines.prefix(4).joined(separator: "\n"))")
    }

    func testShowCertPrintsAChainThatFailsVerification() throws {
        let (selfSigned, port) = try server("self")
        defer { selfSigned.stop() }
        let r = try Tool.run(["tls", "--show-cert", "localhost", String(port)], input: "")
        XCTAssertEqual(r.status, 4, r.err)
        XCTAssertTrue(r.err.contains("certificate verification failed: self-signed certificate"), r.err)
        let served = try String(contentsOfFile: certs.path("self.pem"), encoding: .utf8)
        XCTAssertEqual(r.out, served, "the chain the server sent, as PEM")
        // Verified, it prints the same way, exit 0.
        let good = try Tool.run(["tls", "--show-cert", "--ca", certs.path("self.pem"), "localhost", String(port)], input: "")
        XCTAssertEqual(good.status, 0, good.err)
        XCTAssertEqual(good.out, served)
    }

    /// A server that requires a client certificate (openssl s_server -Verify 1, socat
    /// verify=1, tincan's own listen --require-client-cert), TLS 1.3 and 1.2: without --cert the
    /// client says so and exits 4, every run; with it, the session works.
    func testAServerThatRequiresAClientCertificateIsNamed() throws {
        let want = "the server requires a client certificate: give yours with --cert FILE"
        let servers: [(String, () throws -> (Tool, UInt16))] = [
            ("openssl s_server -Verify 1", { try self.server(extra: ["-Verify", "1", "-CAfile", self.certs.path("ca.pem")]) }),
            (
                "socat verify=1",
                {
                    try Tool.server(program: "/usr/bin/socat") { port in
                        [
                            "OPENSSL-LISTEN:\(port),bind=127.0.0.1,reuseaddr,fork,cert=\(self.certs.path("server.pem")),key=\(self.certs.path("server.key")),cafile=\(self.certs.path("ca.pem")),verify=1",
                            "EXEC:/bin/cat",
                        ]
                    }
                }
            ),
            (
                "tincan listen --require-client-cert",
                {
                    let (tool, port) = try Tool.listener([
                        "-k", "--tls", "--cert", self.certs.path("server.pem"), "--key", self.certs.path("server.key"),
                        "--require-client-cert", "--ca", self.certs.path("ca.pem"), "--exec", "/bin/cat",
                    ])
                    return (tool, port)
                }
            ),
        ]
        for (name, start) in servers {
            let (server, port) = try start()
            defer { server.stop() }
            for version in ["1.3", "1.3", "1.3", "1.2"] {
                let r = try Tool.run(
                    ["tls", "--tls-max", version, "--ca", certs.path("ca.pem"), "--servername", "localhost", "127.0.0.1", String(port)],
                    input: "hello\n")
                XCTAssertEqual(r.status, 4, "\(name), TLS \(version): \(r.err)")
                XCTAssertTrue(r.err.contains(want), "\(name), TLS \(version): \(r.err)")
                XCTAssertEqual(r.out, "", name)
            }
            // --insecure is no reason to blame the server's certificate.
            let insecure = try Tool.run(["tls", "--tls-max", "1.2", "--insecure", "127.0.0.1", String(port)], input: "")
            XCTAssertTrue(insecure.err.contains(want), "\(name): \(insecure.err)")
            let good = try Tool.run(
                [
                    "tls", "--half-close", "--cert", certs.path("client.pem"), "--key", certs.path("client.key"), "--ca", certs.path("ca.pem"),
                    "--servername", "localhost", "127.0.0.1", String(port),
                ], input: "hello\n")
            XCTAssertEqual(good.status, 0, "\(name): \(good.err)")
            XCTAssertTrue(good.out == "hello\n" || good.out == "olleh\n", "\(name): \(good.out)")
        }
    }

    func testVerifiedSessionSummaryAndData() throws {
        let (s, port) = try server(extra: ["-alpn", "http/1.1"])
        defer { s.stop() }
        let r = try Tool.run(["tls", "--half-close", "--ca", certs.path("ca.pem"), "--alpn", "h2,http/1.1", "localhost", String(port)], input: "hello\n")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "olleh\n")
        XCTAssertTrue(r.err.contains("tincan: TLSv1.3, "), r.err)
        XCTAssertTrue(r.err.contains(", ALPN http/1.1"), r.err)
        XCTAssertTrue(r.err.contains("tincan: certificate verified for localhost"), r.err)
        XCTAssertTrue(r.err.contains("tincan: 0 subject CN=localhost"), r.err)
        XCTAssertTrue(r.err.contains("tincan:   issuer  CN=tincan test CA"), r.err)
        XCTAssertTrue(r.err.contains("tincan:   names   DNS:localhost, IP:127.0.0.1, IP:::1"), r.err)
    }

    func testVerificationFailuresExitWith4() throws {
        let (selfSigned, p1) = try server("self")
        defer { selfSigned.stop() }
        let a = try Tool.run(["tls", "localhost", String(p1)], input: "")
        XCTAssertEqual(a.status, 4)
        XCTAssertEqual(
            a.err,
            "tincan: TLS with localhost:\(p1): certificate verification failed: self-signed certificate (trust its issuer with --ca FILE, or skip the check with --insecure)\n")
        XCTAssertEqual(a.out, "", "nothing goes over an unverified connection")

        let (good, p2) = try server()
        defer { good.stop() }
        let b = try Tool.run(["tls", "--ca", certs.path("ca.pem"), "--servername", "wrong.example", "127.0.0.1", String(p2)], input: "")
        XCTAssertEqual(b.status, 4)
        XCTAssertEqual(
            b.err,
            "tincan: TLS with 127.0.0.1:\(p2): certificate verification failed: hostname mismatch: the certificate is for DNS:localhost, IP:127.0.0.1, IP:::1 (use one of its names as HOST or with --servername NAME, or skip the check with --insecure)\n"
        )

        let (expired, p3) = try server("expired")
        defer { expired.stop() }
        let c = try Tool.run(["connect", "--tls", "--ca", certs.path("ca.pem"), "localhost", String(p3)], input: "")
        XCTAssertEqual(c.status, 4)
        XCTAssertEqual(
            c.err,
            "tincan: TLS with localhost:\(p3): certificate verification failed: certificate has expired (check the server's certificate dates and this machine's clock, or skip the check with --insecure)\n"
        )
    }

    func testInsecureAndPins() throws {
        let (s, port) = try server("self")
        defer { s.stop() }
        let insecure = try Tool.run(["tls", "--half-close", "--insecure", "localhost", String(port)], input: "abc\n")
        XCTAssertEqual(insecure.status, 0, insecure.err)
        XCTAssertEqual(insecure.out, "cba\n")
        XCTAssertTrue(insecure.err.contains("certificate NOT verified (--insecure)"), insecure.err)
        let pinLine = insecure.err.split(separator: "\n").first { $0.contains("  pin     sha256//") }
        let pin = String(try XCTUnwrap(pinLine).split(separator: " ").last!)
        let pinned = try Tool.run(["tls", "--half-close", "--insecure", "--pin", pin, "localhost", String(port)], input: "x\n")
        XCTAssertEqual(pinned.status, 0, pinned.err)
        let wrong = try Tool.run(["tls", "--insecure", "--pin", "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "localhost", String(port)], input: "")
        XCTAssertEqual(wrong.status, 4)
        XCTAssertTrue(wrong.err.contains("matches no --pin (its pin is \(pin))"), wrong.err)
        let bad = try Tool.run(["tls", "--pin", "nonsense", "localhost", String(port)])
        XCTAssertEqual(bad.status, 2)
    }

    func testShowCertPrintsTheChain() throws {
        let (s, port) = try server()
        defer { s.stop() }
        let r = try Tool.run(["tls", "--show-cert", "--ca", certs.path("ca.pem"), "localhost", String(port)], input: "")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.out.hasPrefix("-----BEGIN CERTIFICATE-----\n"), r.out)
        XCTAssertTrue(r.out.hasSuffix("-----END CERTIFICATE-----\n"), r.out)
        let server = try String(contentsOfFile: certs.path("server.pem"), encoding: .utf8)
        XCTAssertEqual(r.out, server)
    }

    func testTLSOptionsWithoutTLSAreRefused() throws {
        let r = try Tool.run(["connect", "--insecure", "localhost", "1"])
        XCTAssertEqual(r.status, 2)
        XCTAssertTrue(r.err.contains("--insecure needs --tls"), r.err)
    }

    func testListenTLSExecRunsAProgramPerClient() throws {
        let port = freePort()
        let listener = try Tool(["listen", "-k", "--tls", "--sh-exec", "tr a-z A-Z", "127.0.0.1", String(port)])
        defer { listener.stop() }
        waitForListener(port: port)
        for word in ["first", "second"] {
            let r = try Tool.run(["tls", "--half-close", "--insecure", "127.0.0.1", String(port)], input: "\(word)\n")
            XCTAssertEqual(r.status, 0, r.err)
            XCTAssertEqual(r.out, word.uppercased() + "\n")
        }
        // One connection, --exec without a shell.
        let port2 = freePort()
        let single = try Tool(["listen", "--tls", "--exec", "/bin/cat", "127.0.0.1", String(port2)])
        waitForListener(port: port2)
        let r = try Tool.run(["tls", "--half-close", "--insecure", "127.0.0.1", String(port2)], input: "echo over tls\n")
        XCTAssertEqual(r.out, "echo over tls\n", r.err)
        XCTAssertEqual(single.wait(), 0, single.stderrText)
    }

    private func client(port: UInt16, extra: [String] = [], input: String) throws -> Tool {
        let tool = try Tool(["s_client", "-connect", "127.0.0.1:\(port)", "-quiet", "-ign_eof"] + extra, program: "/usr/bin/openssl")
        tool.send(input)
        tool.closeInput()
        return tool
    }

    func testListenTLSWithEphemeralCertificateAgainstSClient() throws {
        // The listener answers only once "ping" is in: s_client -ign_eof quits at the server's
        // close_notify, and one that came first could end it before it sent its line.
        let (listener, port) = try Tool.listener(["--tls", "--expect", "ping", "--send", "pong\\n"])
        defer { listener.stop() }
        listener.closeInput()
        let c = try client(port: port, input: "ping\n")
        XCTAssertEqual(c.wait(), 0)
        XCTAssertEqual(c.stdoutText, "pong\n")
        XCTAssertEqual(listener.wait(), 0, listener.stderrText)
        XCTAssertEqual(listener.stdoutText, "ping\n")
        XCTAssertTrue(listener.stderrText.contains("tincan: no --cert: serving a self-signed certificate, SHA-256 "), listener.stderrText)
    }

    func testListenTLSAcceptsALPN() throws {
        let port = freePort()
        let listener = try Tool(["listen", "-v", "--tls", "--alpn", "h2,http/1.1", "127.0.0.1", String(port)])
        defer { listener.stop() }
        waitForListener(port: port)
        listener.closeInput()
        let c = try client(port: port, extra: ["-alpn", "http/1.1,spdy/1"], input: "x\n")
        XCTAssertEqual(c.wait(), 0)
        XCTAssertEqual(listener.wait(), 0, listener.stderrText)
        XCTAssertTrue(listener.stderrText.contains(", ALPN http/1.1"), listener.stderrText)
    }

    func testListenTLSRequiringClientCertificates() throws {
        let port = freePort()
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-mtls-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        let listener = try Tool.tincan(
            [
                "listen", "-k", "-v", "--tls", "--cert", certs.path("server.pem"), "--key", certs.path("server.key"),
                "--require-client-cert", "--ca", certs.path("ca.pem"), "127.0.0.1", String(port),
            ], stdoutTo: output)
        defer { listener.stop() }
        waitForListener(port: port)
        let refused = try client(port: port, extra: ["-CAfile", certs.path("ca.pem")], input: "no cert\n")
        refused.wait()
        // The listener turned it away at the handshake (its line never reaches stdout: below).
        waitUntil("the refusal on the listener's stderr") { listener.stderrText.contains("certificate") }
        let accepted = try client(
            port: port,
            extra: [
                "-CAfile", certs.path("ca.pem"), "-cert", certs.path("client.pem"),
                "-key", certs.path("client.key"),
            ], input: "with cert\n")
        // The broker forwards the client's line to stdout once the handshake passed.
        waitUntil("the client's line") { fileText(output) == "with cert\n" }
        listener.signal(SIGTERM)
        XCTAssertEqual(listener.wait(), 128 + SIGTERM)
        accepted.wait()
        XCTAssertEqual(try String(contentsOfFile: output, encoding: .utf8), "with cert\n")
        XCTAssertTrue(listener.stderrText.contains("TLS with 127.0.0.1:"), listener.stderrText)
    }

    func testQuarterGibibyteThroughListenTLSAndTLS() throws {
        let port = freePort()
        try assertBulkTransfer(
            chunks: 4, port: port, listen: ["listen", "--tls", "127.0.0.1", String(port)],
            send: ["tls", "--insecure", "127.0.0.1", String(port)])
    }
}
