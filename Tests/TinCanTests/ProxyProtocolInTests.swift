import Foundation
import TestSupport
import XCTest

/// `listen --accept-proxy-protocol`: behind haproxy (`send-proxy`, `send-proxy-v2`) and nginx's
/// stream proxy (`proxy_protocol on`), the header names the client for -v, --json, --allow/--deny
/// and the header written upstream; nothing past it is taken; a connection without a valid
/// header is refused and said.
final class ProxyProtocolInTests: XCTestCase {
    private let certs = TLSFixtures.shared

    /// `tincan connect` from `source` (address, port) to `host`:`port` with `input`; its exit status.
    @discardableResult
    private func client(from source: String, _ sourcePort: UInt16, to host: String, _ port: UInt16, _ input: String) throws -> Int32 {
        let bound = source.contains(":") ? "[\(source)]:\(sourcePort)" : "\(source):\(sourcePort)"
        let run = try Tool.run(["connect", "-s", bound, host, String(port)], input: input)
        return run.status
    }

    private func connectionLine(_ client: String, in stderr: String) -> Bool {
        stderr.contains("connection from \(client) (PROXY header from 127.0.0.1:")
    }

    func testBehindHAProxyEveryVersionAndFamilyNamesTheClientAndNoHeaderByteReachesTheData() throws {
        let (hub, port) = try Tool.listener(["-k", "--accept-proxy-protocol"])
        defer { hub.stop() }
        let balancer = try RealDaemon.haproxyBalancer(to: port)
        defer { balancer.stop() }
        var expected = ""
        for (index, (host, name)) in [("127.0.0.1", "v1 over IPv4"), ("127.0.0.1", "v2 over IPv4"), ("::1", "v1 over IPv6"), ("::1", "v2 over IPv6")].enumerated() {
            let sourcePort = freePort()
            try client(from: host, sourcePort, to: host, balancer.ports[index], name + "\n")
            expected += name + "\n"
            let named = host == "::1" ? "[::1]:\(sourcePort)" : "127.0.0.1:\(sourcePort)"
            waitUntil("\(name): the client named") { self.connectionLine(named, in: hub.stderrText) && hub.stdoutText == expected }
        }
        // A client of the balancer's Unix socket is UNKNOWN: the connection's own address stands.
        let unix = try Tool.run(["connect", "--unix", "\(balancer.directory)/lb.sock"], input: "unknown\n")
        XCTAssertEqual(unix.status, 0, unix.err)
        expected += "unknown\n"
        waitUntil("the UNKNOWN client") { hub.stdoutText == expected }
        let unknown = try XCTUnwrap(hub.stderrText.split(separator: "\n").last { $0.contains("connection from") }.map(String.init))
        let addresses = unknown.split(separator: " ").filter { $0.hasPrefix("127.0.0.1:") }.map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "():")) }
        XCTAssertEqual(addresses.count, 2, unknown)
        XCTAssertEqual(addresses.first, addresses.last, "UNKNOWN: the balancer's own address: \(unknown)")
        XCTAssertEqual(hub.stdoutText, expected, "exactly the clients' bytes, no header byte among them")
    }

    func testAChainOfBalancersTellsTheLastServerTheFirstClientWithJSONEvents() throws {
        // The last server: haproxy's HTTP frontend that reads a PROXY header and says what it named.
        let echo = try RealDaemon.haproxyBalancer(to: 1)
        defer { echo.stop() }
        let (relay, port) = try Tool.listener(["-k", "--json", "--accept-proxy-protocol=v2", "--forward", "127.0.0.1:\(echo.ports[4])", "--proxy-protocol", "v1"])
        defer { relay.stop() }
        let balancer = try RealDaemon.haproxyBalancer(to: port)
        defer { balancer.stop() }
        for (host, frontend) in [("127.0.0.1", balancer.ports[1]), ("::1", balancer.ports[3])] {
            let url = host == "::1" ? "http://[::1]:\(frontend)/" : "http://127.0.0.1:\(frontend)/"
            let curl = try Tool.curl(["-g", "-w", "\n%{local_port}", url])
            XCTAssertEqual(curl.status, 0, relay.stderrText)
            let lines = curl.out.split(separator: "\n")
            XCTAssertEqual(lines.first.map(String.init), "src=\(host) sport=\(lines.last ?? "") dst=\(host) dport=\(frontend)", relay.stderrText)
            let events = relay.stderrText.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            let remote = host == "::1" ? "[::1]:\(lines.last ?? "")" : "127.0.0.1:\(lines.last ?? "")"
            let accepted = events.first { $0["event"] as? String == "accepted" && $0["remote"] as? String == remote }
            XCTAssertNotNil(accepted, "an accepted event for \(remote): \(relay.stderrText)")
            XCTAssertTrue((accepted?["via"] as? String)?.hasPrefix("127.0.0.1:") == true, "via the balancer: \(String(describing: accepted))")
        }
    }

    func testAllowAndDenyJudgeTheClientTheHeaderNamesNotTheBalancer() throws {
        let (hub, port) = try Tool.listener(["-k", "--accept-proxy-protocol", "--deny", "127.0.0.2"])
        defer { hub.stop() }
        let balancer = try RealDaemon.haproxyBalancer(to: port)
        defer { balancer.stop() }
        let denied = freePort()
        try client(from: "127.0.0.2", denied, to: "127.0.0.1", balancer.ports[0], "not me\n")
        waitUntil("the refusal") { hub.stderrText.contains("refused connection from 127.0.0.2:\(denied) (PROXY header from 127.0.0.1:") }
        XCTAssertTrue(hub.stderrText.contains("in --deny 127.0.0.2/32"), hub.stderrText)
        let allowed = freePort()
        try client(from: "127.0.0.1", allowed, to: "127.0.0.1", balancer.ports[1], "me\n")
        waitUntil("the allowed client's line") { hub.stdoutText == "me\n" }
        XCTAssertTrue(connectionLine("127.0.0.1:\(allowed)", in: hub.stderrText), hub.stderrText)
    }

    /// The attack: anyone who reaches the port sends `PROXY TCP4 <an allowed address> ...` and
    /// is taken for that client. Only the balancers of --proxy-protocol-from may send a header;
    /// the rest are refused before a byte is read, and counted.
    func testOnlyTrustedBalancersMaySendAHeader() throws {
        let (hub, port) = try Tool.listener(["-k", "--accept-proxy-protocol", "--proxy-protocol-from", "127.0.0.3", "--allow", "127.0.0.1/32"])
        defer { hub.stop() }
        let balancer = try RealDaemon.haproxyBalancer(to: port, from: "127.0.0.3")
        defer { balancer.stop() }
        let honest = freePort()
        try client(from: "127.0.0.1", honest, to: "127.0.0.1", balancer.ports[1], "through haproxy\n")
        waitUntil("the balancer's client") { hub.stdoutText == "through haproxy\n" }
        XCTAssertTrue(hub.stderrText.contains("connection from 127.0.0.1:\(honest) (PROXY header from 127.0.0.3:"), hub.stderrText)
        // Straight to the listener from 127.0.0.1, claiming an allowed address: refused.
        // (Refused before its bytes are read: the client may see a reset.)
        _ = try Tool.run(["connect", "127.0.0.1", String(port)], input: "PROXY TCP4 127.0.0.1 127.0.0.1 1111 2222\r\nspoofed\n")
        waitUntil("the refusal") { hub.stderrText.contains("is not in --proxy-protocol-from (127.0.0.3/32): only those may send a PROXY header") }
        XCTAssertEqual(hub.stdoutText, "through haproxy\n", "nothing of the spoofer's reached stdout")
        hub.signal(SIGTERM)
        _ = hub.wait(timeout: .seconds(5))
        XCTAssertTrue(hub.stderrText.contains("1 connections from peers not allowed to send a PROXY header (--proxy-protocol-from)"), hub.stderrText)
        // The option needs the header.
        let alone = try Tool.run(["listen", "--proxy-protocol-from", "10.0.0.0/8", "127.0.0.1", "0"], input: "")
        XCTAssertEqual(alone.status, 2)
        XCTAssertTrue(alone.err.contains("add --accept-proxy-protocol"), alone.err)
    }

    /// By default only this machine may send a header: a peer on another address (198.18.0.2 in
    /// a namespace of the test's own) claiming the one address --allow admits is refused.
    func testByDefaultOnlyThisMachineMaySendAHeader() throws {
        try Namespace.scenario(self, setup: Namespace.testNetwork(extra: ["198.18.0.2"])) {
            let (hub, port) = try Tool.listener(["-k", "--accept-proxy-protocol", "--allow", "10.9.9.9/32"], host: "198.18.0.1")
            defer { hub.stop() }
            _ = try Tool.run(["connect", "-s", "198.18.0.2", "198.18.0.1", String(port)], input: "PROXY TCP4 10.9.9.9 198.18.0.1 1111 2222\r\nfrom afar\n")
            waitUntil("the refusal") { hub.stderrText.contains("refused connection from 198.18.0.2:") && hub.stderrText.contains("127.0.0.0/8,::1/128") }
            // From this machine's loopback the same header is believed.
            let local = try Tool.run(["connect", "-s", "127.0.0.1", "198.18.0.1", String(port)], input: "PROXY TCP4 10.9.9.9 198.18.0.1 1111 2222\r\nlocal\n")
            XCTAssertEqual(local.status, 0, local.err)
            waitUntil("the local balancer's client") { hub.stdoutText == "local\n" }
        }
    }

    func testAConnectionWithoutAValidHeaderIsRefusedAndSaid() throws {
        let (hub, port) = try Tool.listener(["-k", "--accept-proxy-protocol", "v1", "--handshake-timeout", "1s"])
        defer { hub.stop() }
        // Straight to the listener, no balancer: refused, and the client sees the close.
        let direct = try Tool.run(["connect", "127.0.0.1", String(port)], input: "hello\n")
        XCTAssertEqual(direct.status, 0, direct.err)
        waitUntil("the refusal") { hub.stderrText.contains("it sent no PROXY protocol header (its first byte is 'h') where a PROXY protocol v1 header was expected") }
        // v2 from a balancer, where v1 is wanted.
        let balancer = try RealDaemon.haproxyBalancer(to: port)
        defer { balancer.stop() }
        try client(from: "127.0.0.1", freePort(), to: "127.0.0.1", balancer.ports[1], "v2\n")
        waitUntil("the v2 refusal") { hub.stderrText.contains("it sent a PROXY protocol v2 header where a PROXY protocol v1 header was expected") }
        // A client that says nothing: closed at --handshake-timeout.
        let silent = try Tool(["connect", "127.0.0.1", String(port)])
        defer { silent.stop() }
        waitUntil("the silent client's refusal") { hub.stderrText.contains("it sent no whole PROXY protocol header within 1 s") }
        silent.closeInput()
        XCTAssertEqual(silent.wait(timeout: .seconds(10)), 0, "the client saw the listener close: \(silent.stderrText)")
        XCTAssertEqual(hub.stdoutText, "", "nothing from a refused connection reaches stdout")
        hub.signal(SIGTERM)
        _ = hub.wait(timeout: .seconds(5))
        XCTAssertTrue(hub.stderrText.contains("3 connections without a valid PROXY protocol header"), hub.stderrText)
    }

    func testTLSAfterTheHeaderOneClient() throws {
        let (server, port) = try Tool.listener(["--tls", "--cert", certs.path("server.pem"), "--key", certs.path("server.key"), "--accept-proxy-protocol"])
        defer { server.stop() }
        server.closeInput()  // nothing to say back: the session ends with the client's end
        let balancer = try RealDaemon.haproxyBalancer(to: port)
        defer { balancer.stop() }
        let sourcePort = freePort()
        let tls = try Tool.run(["tls", "--ca", certs.path("ca.pem"), "-s", "127.0.0.1:\(sourcePort)", "127.0.0.1", String(balancer.ports[1])], input: "over TLS\n")
        XCTAssertEqual(tls.status, 0, tls.err + server.stderrText)
        XCTAssertEqual(server.wait(timeout: .seconds(10)), 0, server.stderrText)
        XCTAssertEqual(server.stdoutText, "over TLS\n")
        XCTAssertTrue(connectionLine("127.0.0.1:\(sourcePort)", in: server.stderrText), server.stderrText)
    }

    func testBehindNginxStreamAProgramPerConnectionHearsOnlyItsClient() throws {
        let (programs, port) = try Tool.listener(["-k", "--accept-proxy-protocol", "v1", "--exec", "/bin/cat"])
        defer { programs.stop() }
        let nginx = try RealDaemon.nginxStream(to: port)
        defer { nginx.stop() }
        for (index, host) in ["127.0.0.1", "::1"].enumerated() {
            let sourcePort = freePort()
            let bound = host == "::1" ? "[::1]:\(sourcePort)" : "127.0.0.1:\(sourcePort)"
            let echo = try Tool.run(["connect", "-s", bound, host, String(nginx.ports[index])], input: "echo from \(host)\n")
            XCTAssertEqual(echo.status, 0, echo.err)
            XCTAssertEqual(echo.out, "echo from \(host)\n", "the program heard the client's bytes and no header: \(programs.stderrText)")
            waitUntil("the client named") { self.connectionLine(bound, in: programs.stderrText) }
        }
    }
}
