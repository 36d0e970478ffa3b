import Foundation
import TestSupport
import XCTest

/// `listen --forward` with TLS at either end: curl https through TLS termination to python's
/// http.server, mutual TLS, plain clients through TLS origination to openssl s_server, and both.
final class ForwardTLSTests: XCTestCase {
    private let certs = TLSFixtures.shared

    private func relay(_ arguments: [String], port: UInt16 = freePort()) throws -> (Tool, UInt16) {
        let tool = try Tool(["listen"] + arguments + ["127.0.0.1", String(port)])
        waitForListener(port: port)
        return (tool, port)
    }

    /// `openssl s_server -rev` (each line back reversed) on a free port.
    private func reversingServer(_ extra: [String] = []) throws -> (Tool, UInt16) {
        let port = freePort()
        let tool = try Tool(
            [
                "s_server", "-accept", "127.0.0.1:\(port)", "-cert", certs.path("server.pem"),
                "-key", certs.path("server.key"), "-rev", "-quiet",
            ] + extra, program: "/usr/bin/openssl")
        waitForListener(port: port)
        return (tool, port)
    }

    private func httpServer(page: String) throws -> (Tool, UInt16, String) {
        let port = freePort()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-fwd-tls-\(getpid())-\(port)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try page.write(toFile: "\(dir)/page.txt", atomically: true, encoding: .utf8)
        let server = try Tool(["python3", "-m", "http.server", String(port), "--bind", "127.0.0.1", "--directory", dir], program: "/usr/bin/env")
        waitForListener(port: port)
        return (server, port, dir)
    }

    func testCurlHTTPSThroughTLSTerminationAndMutualTLS() throws {
        let page = String(repeating: "terminated here\n", count: 10_000)
        let (server, upstreamPort, dir) = try httpServer(page: page)
        defer {
            server.stop()
            try? FileManager.default.removeItem(atPath: dir)
        }
        let (listener, port) = try relay([
            "-k", "-v", "--tls", "--cert", certs.path("server.pem"), "--key", certs.path("server.key"),
            "--forward", "127.0.0.1:\(upstreamPort)",
        ])
        defer { listener.stop() }
        for _ in 0..<3 {
            let c = try Tool.curl(["--cacert", certs.path("ca.pem"), "https://localhost:\(port)/page.txt"])
            XCTAssertEqual(c.status, 0, c.err + listener.stderrText)
            XCTAssertTrue(c.out == page, "the page, whole, decrypted by curl (\(c.out.utf8.count) bytes)")
        }
        waitUntil("three relays closed") { listener.stderrText.components(separatedBy: ": closed; ").count - 1 == 3 }
        XCTAssertTrue(listener.stderrText.contains("TLS from the client, TLSv1.3"), listener.stderrText)
        // Plain HTTP to the TLS port reaches no upstream.
        let plain = try Tool.curl(["http://127.0.0.1:\(port)/page.txt"])
        XCTAssertNotEqual(plain.status, 0)
        XCTAssertFalse(plain.out.contains("terminated here"))

        // Mutual TLS: only a client with a certificate from the CA is relayed.
        let (mutual, mutualPort) = try relay([
            "-k", "-v", "--tls", "--cert", certs.path("server.pem"), "--key", certs.path("server.key"),
            "--require-client-cert", "--ca", certs.path("ca.pem"), "--forward", "127.0.0.1:\(upstreamPort)",
        ])
        defer { mutual.stop() }
        let withCert = try Tool.curl([
            "--cacert", certs.path("ca.pem"), "--cert", certs.path("client.pem"), "--key", certs.path("client.key"),
            "https://localhost:\(mutualPort)/page.txt",
        ])
        XCTAssertEqual(withCert.status, 0, withCert.err + mutual.stderrText)
        XCTAssertTrue(withCert.out == page)
        let without = try Tool.curl(["--cacert", certs.path("ca.pem"), "https://localhost:\(mutualPort)/page.txt"])
        XCTAssertNotEqual(without.status, 0)
        XCTAssertEqual(without.out, "")
        waitUntil("the refusal named") { mutual.stderrText.contains("closed the client") }
        XCTAssertTrue(mutual.process.isRunning, "-k goes on after a refused client")
    }

    func testPlainClientsThroughTLSOriginationVerifiedByDefault() throws {
        let (server, upstreamPort) = try reversingServer()
        defer { server.stop() }
        let (good, goodPort) = try relay(["-k", "--json", "--forward", "localhost:\(upstreamPort)", "--forward-tls", "--forward-ca", certs.path("ca.pem")])
        defer { good.stop() }
        XCTAssertEqual(try Tool.output(["connect", "127.0.0.1", String(goodPort)], input: "hello upstream\n"), "maertspu olleh\n")
        waitUntil("the tls event") { good.stderrText.contains("\"side\":\"upstream\"") }
        XCTAssertTrue(good.stderrText.contains("\"event\":\"tls\""), good.stderrText)

        // Without a CA that signs it, the upstream is refused: the client gets nothing, the line
        // says why and which option fixes it, and one client's run exits 4.
        let (bad, badPort) = try relay(["--forward", "localhost:\(upstreamPort)", "--forward-tls"])
        defer { bad.stop() }
        let refused = try Tool.run(["connect", "127.0.0.1", String(badPort)], input: "secret\n")
        XCTAssertEqual(refused.out, "", "no byte went to an unverified upstream, none came back")
        XCTAssertEqual(bad.wait(), 4, bad.stderrText)
        XCTAssertTrue(
            bad.stderrText.contains("certificate verification failed") && bad.stderrText.contains("--forward-ca FILE")
                && bad.stderrText.contains("--forward-insecure"), bad.stderrText)

        // --forward-insecure skips the chain, but a wrong --forward-pin still refuses.
        let (insecure, insecurePort) = try relay(["--forward", "localhost:\(upstreamPort)", "--forward-tls", "--forward-insecure"])
        defer { insecure.stop() }
        XCTAssertEqual(try Tool.output(["connect", "127.0.0.1", String(insecurePort)], input: "abc\n"), "cba\n")
        let wrongPin = "sha256//" + String(repeating: "A", count: 43) + "="
        let (pinned, pinnedPort) = try relay(["--forward", "localhost:\(upstreamPort)", "--forward-tls", "--forward-insecure", "--forward-pin", wrongPin])
        defer { pinned.stop() }
        XCTAssertEqual(try Tool.run(["connect", "127.0.0.1", String(pinnedPort)], input: "abc\n").out, "")
        XCTAssertEqual(pinned.wait(), 4, pinned.stderrText)
        XCTAssertTrue(pinned.stderrText.contains("matches no --forward-pin (its pin is sha256//"), pinned.stderrText)
    }

    func testTLSAtBothEndsAndBulkThroughOrigination() throws {
        let (server, upstreamPort) = try reversingServer()
        defer { server.stop() }
        let (both, port) = try relay(["-k", "--tls", "--forward", "localhost:\(upstreamPort)", "--forward-tls", "--forward-ca", certs.path("ca.pem")])
        defer { both.stop() }
        let r = try Tool.run(["tls", "--half-close", "--insecure", "127.0.0.1", String(port)], input: "both ends\n")
        XCTAssertEqual(r.status, 0, r.err + both.stderrText)
        XCTAssertEqual(r.out, "sdne htob\n")

        // 64 MiB: plain connect → relay → TLS to a tincan TLS sink | sha256sum.
        let sinkPort = freePort()
        let relayPort = freePort()
        let relay = try Tool(["listen", "127.0.0.1", String(relayPort), "--forward", "localhost:\(sinkPort)", "--forward-tls", "--forward-ca", certs.path("ca.pem")])
        defer { relay.stop() }
        try assertBulkTransfer(
            chunks: 1, port: sinkPort,
            listen: ["listen", "--tls", "--cert", certs.path("server.pem"), "--key", certs.path("server.key"), "127.0.0.1", String(sinkPort)],
            send: ["connect", "127.0.0.1", String(relayPort)], waitFor: relayPort)
        XCTAssertEqual(relay.wait(), 0, relay.stderrText)
    }
}
