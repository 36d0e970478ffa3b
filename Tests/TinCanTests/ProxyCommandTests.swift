import Foundation
import TestSupport
import XCTest

/// `connect`, `tls` and `connect -z` through proxies: real ones (microsocks, tinyproxy), and a
/// python stub for the wire and the misbehaviour a real proxy will not show on purpose.
final class ProxyCommandTests: XCTestCase {
    private let certs = TLSFixtures.shared

    /// A target that answers "echo: LINE\n" to a connection's first line and closes it (so the
    /// client, holding its end through a proxy, ends at once), for any number of connections.
    private func echoTarget() throws -> PythonPeer {
        try PythonPeer(
            PythonPeers.listenPrelude + """
                import threading
                def serve(c):
                    c.sendall(b'echo: ' + c.makefile('rb').readline())
                    c.close()
                while True:
                    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
                """)
    }

    /// The process environment without any proxy variables, plus `extra`.
    private func environment(_ extra: [String: String] = [:]) -> [String: String] {
        var env = ProcessInfo.processInfo.environment
        for name in ["ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy", "TINCAN_PROXY_PASSWORD"] { env[name] = nil }
        return env.merging(extra) { $1 }
    }

    private func run(
        _ arguments: [String], input: String? = "hello\n", env: [String: String] = [:],
        file: StaticString = #filePath, line: UInt = #line
    ) throws -> (status: Int32, out: String, err: String) {
        try Tool.run(arguments, input: input, timeout: .seconds(20), environment: environment(env), file: file, line: line)
    }

    private func stub(_ mode: String) throws -> (peer: PythonPeer, record: String) {
        let record = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-proxystub-\(getpid())-\(UUID().uuidString)").path
        addTeardownBlock {
            try? FileManager.default.removeItem(atPath: record)
            try? FileManager.default.removeItem(atPath: record + ".peer")
        }
        return (try PythonPeer(ProxyStub.script(mode: mode, record: record)), record)
    }

    private func recorded(_ path: String) -> [UInt8] { (try? [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))) ?? [] }

    func testSOCKS5ThroughMicrosocksWithCredentialsFromEachPlace() throws {
        let target = try echoTarget()
        defer { target.stop() }
        let open = try RealProxy.microsocks()
        defer { open.stop() }
        let locked = try RealProxy.microsocks(user: "alice", password: "s3:cret")
        defer { locked.stop() }
        let t = String(target.port)

        var r = try run(["connect", "-v", "--proxy", "socks5h://127.0.0.1:\(open.port)", "127.0.0.1", t])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "echo: hello\n")
        XCTAssertTrue(r.err.contains("proxy: through socks5h://127.0.0.1:\(open.port) (from --proxy)"), r.err)
        XCTAssertTrue(r.err.contains("to 127.0.0.1:\(t): open"), r.err)

        r = try run(["connect", "--proxy", "socks5://alice:s3%3Acret@127.0.0.1:\(locked.port)", "127.0.0.1", t])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "echo: hello\n")
        // The password from the environment, so it is not in argv.
        r = try run(
            ["connect", "--proxy-user", "alice", "--proxy", "socks5h://127.0.0.1:\(locked.port)", "127.0.0.1", t],
            env: ["TINCAN_PROXY_PASSWORD": "s3:cret"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "echo: hello\n")

        r = try run(["connect", "--proxy", "socks5h://alice:wrong@127.0.0.1:\(locked.port)", "127.0.0.1", t])
        XCTAssertEqual(r.status, 7, r.err)
        XCTAssertEqual(r.out, "")
        XCTAssertTrue(r.err.contains("authentication failed: the SOCKS5 proxy refused the user name and password"), r.err)
        XCTAssertFalse(r.err.contains("wrong"), "the password is never shown: \(r.err)")
        r = try run(["connect", "--proxy", "socks5h://127.0.0.1:\(locked.port)", "127.0.0.1", t])
        XCTAssertEqual(r.status, 7, r.err)
        XCTAssertTrue(r.err.contains("wants a user name and password"), r.err)
    }

    func testHTTPConnectThroughTinyproxyWithBasicAuth() throws {
        let target = try echoTarget()
        defer { target.stop() }
        let proxy = try RealProxy.tinyproxy(user: "bob", password: "hunter2")
        defer { proxy.stop() }
        let t = String(target.port)
        var r = try run(["connect", "--proxy", "http://bob:hunter2@127.0.0.1:\(proxy.port)", "127.0.0.1", t])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "echo: hello\n")
        r = try run(["connect", "--proxy", "http://127.0.0.1:\(proxy.port)", "127.0.0.1", t])
        XCTAssertEqual(r.status, 7, r.err)
        XCTAssertTrue(r.err.contains("wants credentials: 'HTTP/1.0 407 Proxy Authentication Required'"), r.err)
        r = try run(["connect", "--proxy", "http://bob:nope@127.0.0.1:\(proxy.port)", "127.0.0.1", t])
        XCTAssertEqual(r.status, 7, r.err)
        XCTAssertTrue(r.err.contains("refused the credentials"), r.err)
        r = try run(["connect", "--proxy", "http://bob:hunter2@127.0.0.1:\(proxy.port)", "127.0.0.1", String(freePort())])
        XCTAssertEqual(r.status, 9, r.err)
        XCTAssertTrue(r.err.contains("could not reach 127.0.0.1:"), r.err)
    }

    func testAChainOfTwoWithJSONEvents() throws {
        let target = try echoTarget()
        defer { target.stop() }
        let socks = try RealProxy.microsocks()
        defer { socks.stop() }
        let http = try RealProxy.tinyproxy()
        defer { http.stop() }
        let r = try run([
            "connect", "--json", "--proxy", "socks5h://127.0.0.1:\(socks.port)", "--proxy", "http://127.0.0.1:\(http.port)",
            "127.0.0.1", String(target.port),
        ])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "echo: hello\n")
        let events = r.err.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let hops = events.filter { $0["event"] as? String == "proxy" }
        XCTAssertEqual(hops.map { $0["scheme"] as? String }, ["socks5h", "http"], r.err)
        XCTAssertEqual(hops.map { $0["address"] as? String }, ["127.0.0.1:\(socks.port)", "127.0.0.1:\(http.port)"])
        XCTAssertEqual(hops.map { $0["target"] as? String }, ["127.0.0.1:\(http.port)", "127.0.0.1:\(target.port)"])
        XCTAssertEqual(hops.map { $0["result"] as? String }, ["connected", "connected"])
        XCTAssertTrue(hops.allSatisfy { ($0["took_ms"] as? Double).map { $0 >= 0 } ?? false }, r.err)
    }

    func testTheEnvironmentAsCurlReadsIt() throws {
        let target = try echoTarget()
        defer { target.stop() }
        let (proxy, record) = try stub("socks5:00")
        defer { proxy.stop() }
        let t = String(target.port)
        let url = "socks5h://127.0.0.1:\(proxy.port)"
        // ALL_PROXY is used: the stub answers, not the target.
        var r = try run(["connect", "-v", "127.0.0.1", t], input: nil, env: ["ALL_PROXY": url])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "through the stub\n")
        XCTAssertTrue(r.err.contains("(from ALL_PROXY)"), r.err)
        XCTAssertEqual(recorded(record), [5, 1, 0, 1, 127, 0, 0, 1, UInt8(target.port >> 8), UInt8(target.port & 0xFF)])
        // all_proxy is read first, as curl does.
        r = try run(["connect", "-v", "127.0.0.1", t], input: nil, env: ["all_proxy": url, "ALL_PROXY": "socks5://127.0.0.1:1"])
        XCTAssertEqual(r.out, "through the stub\n", r.err)
        // NO_PROXY entries: a CIDR block, a domain suffix, *; --no-proxy ignores the environment.
        for (exclusion, host) in [("localhost,127.0.0.0/8", "127.0.0.1"), (".test,localhost", "localhost"), ("*", "127.0.0.1")] {
            r = try run(["connect", "-v", "-4", host, t], env: ["ALL_PROXY": url, "NO_PROXY": exclusion])
            XCTAssertEqual(r.status, 0, r.err)
            XCTAssertEqual(r.out, "echo: hello\n", "\(exclusion): \(r.err)")
            XCTAssertTrue(r.err.contains("not using ALL_PROXY \(url): NO_PROXY entry"), r.err)
        }
        r = try run(["connect", "--no-proxy", "127.0.0.1", t], env: ["ALL_PROXY": url])
        XCTAssertEqual(r.out, "echo: hello\n", r.err)
        r = try run(["connect", "127.0.0.1", t], env: ["ALL_PROXY": "gopher://x"])
        XCTAssertEqual(r.status, 2, r.err)
        XCTAssertTrue(r.err.contains("ALL_PROXY: bad proxy URL 'gopher://x': the scheme"), r.err)
    }

    func testNetcatStyleAndSOCKS4OnTheWire() throws {
        let target = try echoTarget()
        defer { target.stop() }
        let (socks4, record4) = try stub("socks4:5a")
        defer { socks4.stop() }
        var r = try run(["connect", "-x", "127.0.0.1:\(socks4.port)", "-X", "4", "localhost", "4242"], input: nil)
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "through the stub\n")
        XCTAssertEqual(recorded(record4), [4, 1, 0x10, 0x92, 127, 0, 0, 1, 0], "SOCKS4: the address resolved here")
        r = try run(["connect", "--proxy", "socks4a://someone@127.0.0.1:\(socks4.port)", "name.test", "4242"], input: nil)
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(
            recorded(record4), [4, 1, 0x10, 0x92, 0, 0, 0, 1] + Array("someone".utf8) + [0] + Array("name.test".utf8) + [0],
            "SOCKS4a: the name, for the proxy to resolve")
        let socks = try RealProxy.microsocks()
        defer { socks.stop() }
        r = try run(["connect", "-x", "127.0.0.1:\(socks.port)", "127.0.0.1", String(target.port)])
        XCTAssertEqual(r.out, "echo: hello\n", "-X 5 is the default: \(r.err)")
        let http = try RealProxy.tinyproxy()
        defer { http.stop() }
        r = try run(["connect", "-x", "127.0.0.1:\(http.port)", "-X", "connect", "127.0.0.1", String(target.port)])
        XCTAssertEqual(r.out, "echo: hello\n", r.err)
    }

    func testEveryFailureIsOneLineWithItsCode() throws {
        let cases: [(mode: String, status: Int32, says: String)] = [
            ("socks5:01", 8, "refused to connect to 127.0.0.1:9: SOCKS5 reply 0x01 (general SOCKS server failure)"),
            ("socks5:02", 8, "SOCKS5 reply 0x02 (connection not allowed by ruleset)"),
            ("socks5:03", 9, "could not reach 127.0.0.1:9: SOCKS5 reply 0x03 (network unreachable)"),
            ("socks5:04", 9, "SOCKS5 reply 0x04 (host unreachable, or its name does not resolve)"),
            ("socks5:05", 9, "SOCKS5 reply 0x05 (connection refused)"),
            ("socks5:06", 9, "SOCKS5 reply 0x06 (TTL expired: most proxies, tincan's among them, mean that connecting timed out)"),
            ("socks5:07", 8, "SOCKS5 reply 0x07 (command not supported)"),
            ("socks5:08", 8, "SOCKS5 reply 0x08 (address type not supported)"),
            ("garbage", 8, "not a SOCKS5 reply: 0x48 0x54; is it a socks5h proxy?"),
            ("truncated", 8, "the proxy closed the connection before its SOCKS5H reply was complete"),
        ]
        for item in cases {
            let (proxy, _) = try stub(item.mode)
            defer { proxy.stop() }
            let r = try run(["connect", "--proxy", "socks5h://127.0.0.1:\(proxy.port)", "127.0.0.1", "9"])
            XCTAssertEqual(r.status, item.status, "\(item.mode): \(r.err)")
            XCTAssertEqual(r.out, "")
            XCTAssertEqual(r.err.split(separator: "\n").count, 1, "\(item.mode): one line: \(r.err)")
            XCTAssertTrue(r.err.contains(item.says), "\(item.mode): \(r.err)")
        }
        for (status, code) in [("403 Forbidden", Int32(8)), ("502 Bad Gateway", 9)] {
            let (proxy, record) = try stub("http:\(status)")
            defer { proxy.stop() }
            let r = try run(["connect", "--proxy", "http://127.0.0.1:\(proxy.port)", "name.test", "443"])
            XCTAssertEqual(r.status, code, r.err)
            XCTAssertTrue(r.err.contains("answered 'HTTP/1.1 \(status)'"), r.err)
            XCTAssertEqual(String(decoding: recorded(record), as: UTF8.self), "CONNECT name.test:443 HTTP/1.1\r\nHost: name.test:443\r\n\r\n")
        }
        // A proxy that accepts and says nothing: -w bounds the whole set-up (exit 3).
        let (silent, _) = try stub("silent")
        defer { silent.stop() }
        let started = ContinuousClock.now
        var r = try run(["connect", "-w", "1s", "--proxy", "socks5h://127.0.0.1:\(silent.port)", "127.0.0.1", "9"])
        XCTAssertEqual(r.status, 3, r.err)
        XCTAssertTrue(r.err.contains("did not complete its SOCKS5H reply in time"), r.err)
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(10))
        // Nobody at the proxy's address: exit 1, and the message says it was the proxy.
        r = try run(["connect", "--proxy", "socks5h://127.0.0.1:\(freePort())", "127.0.0.1", "9"])
        XCTAssertEqual(r.status, 1, r.err)
        XCTAssertTrue(r.err.hasPrefix("tincan: cannot reach proxy socks5h://127.0.0.1:"), r.err)
    }

    func testSourceAddressIsTheFirstHops() throws {
        let (proxy, record) = try stub("socks5:00")
        defer { proxy.stop() }
        let r = try run(["connect", "-s", "127.0.0.2", "--proxy", "socks5h://127.0.0.1:\(proxy.port)", "127.0.0.1", "9"], input: nil)
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(String(decoding: recorded(record + ".peer"), as: UTF8.self), "127.0.0.2")
    }

    func testTLSThroughAProxyVerifiesTheTarget() throws {
        let port = freePort()
        let server = try Tool(
            [
                "s_server", "-accept", "127.0.0.1:\(port)", "-cert", certs.path("server.pem"), "-key", certs.path("server.key"),
                "-naccept", "3", "-quiet",
            ], program: "/usr/bin/openssl")
        defer { server.stop() }
        waitForListener(port: port)
        let socks = try RealProxy.microsocks()
        defer { socks.stop() }
        // socks5:// resolves localhost here; SNI and verification are the target's name.
        var r = try run(
            ["tls", "--half-close", "--ca", certs.path("ca.pem"), "--proxy", "socks5://127.0.0.1:\(socks.port)", "-w", "10s", "localhost", String(port)],
            input: "over tls through socks\n")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.err.contains("certificate verified for localhost"), r.err)
        // Our exit says the bytes reached the server's kernel; s_server prints them a moment later.
        waitUntil("the server prints what it got") { server.stdoutText.contains("over tls through socks") }
        r = try run(
            [
                "connect", "--tls", "--ca", certs.path("ca.pem"), "--servername", "other.test",
                "--proxy", "socks5h://127.0.0.1:\(socks.port)", "-w", "10s", "127.0.0.1", String(port),
            ], input: nil)
        XCTAssertEqual(r.status, 4, "a name the target's certificate lacks fails through the proxy too: \(r.err)")
    }

    func testSTARTTLSThroughTinyproxy() throws {
        let (server, port) = try Tool.server([
            "python3", "-c", StartTLSPeers.server, "0", "127.0.0.1", "smtp", "ok",
            certs.path("server.pem"), certs.path("server.key"),
        ])
        defer { server.stop() }
        let http = try RealProxy.tinyproxy()
        defer { http.stop() }
        let r = try run(
            [
                "tls", "--starttls", "smtp", "--ca", certs.path("ca.pem"), "--servername", "localhost",
                "--proxy", "http://127.0.0.1:\(http.port)", "-w", "10s", "127.0.0.1", String(port),
            ], input: "secret after tls\n")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "SECRET AFTER TLS\n", r.err)
    }

    func testZeroIOThroughAProxy() throws {
        let target = try echoTarget()
        defer { target.stop() }
        let socks = try RealProxy.microsocks()
        defer { socks.stop() }
        let closed = freePort()
        var r = try run(["connect", "-z", "-v", "--proxy", "socks5h://127.0.0.1:\(socks.port)", "127.0.0.1", "\(target.port),\(closed)"], input: nil)
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.out.contains("127.0.0.1 \(target.port) open"), r.out)
        XCTAssertTrue(r.out.contains("127.0.0.1 \(closed) closed"), r.out)
        r = try run(["connect", "-z", "--proxy", "socks5h://127.0.0.1:\(socks.port)", "127.0.0.1", String(closed)], input: nil)
        XCTAssertEqual(r.status, 1, r.err)
        XCTAssertEqual(r.out, "")
    }

    /// https:// proxies (CONNECT inside TLS to the proxy, verified for its name) on every road:
    /// squid's https_port (squid-openssl) and tincan's own HTTPS proxy, which curl could use
    /// and tincan could not; TLS to the target inside (TLS in TLS); chains with microsocks
    /// before and after; connect -z; a listener's upstream; and verification that holds.
    func testHTTPSProxiesOnEveryRoadAndInChains() throws {
        let target = try echoTarget()
        defer { target.stop() }
        let squid = try RealDaemon.squid(user: "alice", password: "pw", https: true)
        defer { squid.stop() }
        let (ours, oursPort) = try Tool.listener([
            "-k", "--http-proxy", "--tls", "--cert", certs.path("server.pem"), "--key", certs.path("server.key"), "--proxy-auth", "bob:pw2",
        ])
        defer { ours.stop() }
        let socks = try RealProxy.microsocks()
        defer { socks.stop() }
        let t = String(target.port)
        let ca = ["--proxy-ca", certs.path("ca.pem")]
        let viaSquid = "https://alice:pw@localhost:\(squid.ports[1])"
        let viaOurs = "https://bob:pw2@localhost:\(oursPort)"
        for proxies in [[viaSquid], [viaOurs], ["socks5h://127.0.0.1:\(socks.port)", viaOurs], [viaSquid, "socks5h://127.0.0.1:\(socks.port)"], [viaSquid, viaOurs]] {
            let r = try run(["connect"] + proxies.flatMap { ["--proxy", $0] } + ca + ["127.0.0.1", t])
            XCTAssertEqual(r.status, 0, "\(proxies): \(r.err)")
            XCTAssertEqual(r.out, "echo: hello\n", "\(proxies)")
        }
        // Verified: without its issuer the proxy is refused (exit 4), with a hint; or not checked.
        var r = try run(["connect", "--proxy", viaSquid, "127.0.0.1", t])
        XCTAssertEqual(r.status, 4, r.err)
        XCTAssertTrue(r.err.contains("TLS with the proxy failed") && r.err.contains("--proxy-ca FILE"), r.err)
        XCTAssertEqual(r.err.split(separator: "\n").count, 1, r.err)
        XCTAssertEqual(try run(["connect", "--proxy", viaSquid, "--proxy-insecure", "127.0.0.1", t]).out, "echo: hello\n")
        // TLS to the target inside the proxy's TLS, the target verified apart.
        let tlsPort = freePort()
        let tlsServer = try Tool(
            ["s_server", "-accept", "127.0.0.1:\(tlsPort)", "-cert", certs.path("server.pem"), "-key", certs.path("server.key"), "-naccept", "1", "-quiet"],
            program: "/usr/bin/openssl")
        defer { tlsServer.stop() }
        waitForListener(port: tlsPort)
        r = try run(["tls", "--half-close", "--proxy", viaOurs] + ca + ["--ca", certs.path("ca.pem"), "-w", "10s", "localhost", String(tlsPort)], input: "tls in tls\n")
        XCTAssertEqual(r.status, 0, r.err)
        waitUntil("the TLS server prints what it got") { tlsServer.stdoutText.contains("tls in tls") }
        // connect -z, and a listener whose upstream is reached through the HTTPS proxy.
        let closed = freePort()
        r = try run(["connect", "-z", "-v", "--proxy", viaSquid] + ca + ["127.0.0.1", "\(target.port),\(closed)"], input: nil)
        XCTAssertTrue(r.out.contains("127.0.0.1 \(target.port) open") && r.out.contains("127.0.0.1 \(closed) closed"), r.out + r.err)
        let (relay, relayPort) = try Tool.listener(["-k", "--forward", "127.0.0.1:\(target.port)", "--proxy", viaOurs] + ca)
        defer { relay.stop() }
        XCTAssertEqual(try run(["connect", "127.0.0.1", String(relayPort)]).out, "echo: hello\n", relay.stderrText)
    }

    func testUsageErrors() throws {
        let cases: [([String], String)] = [
            (["connect", "--proxy", "socks5://host:99999", "a", "1"], "bad proxy URL 'socks5://host:99999': the port"),
            (["connect", "-X", "4", "a", "1"], "-X names the protocol of the proxy -x gives"),
            (["connect", "--proxy", "socks5://h", "--unix", "/tmp/x"], "not with --unix"),
            (["connect", "--proxy", "socks4://u:pw@h", "a", "1"], "SOCKS4 sends a user ID, not a password"),
            (["connect", "--proxy-user", "u", "a", "1"], "--proxy-user is for a proxy"),
            (["connect", "-x", "h", "--proxy", "socks5://h", "a", "1"], "-x and --proxy both name a proxy"),
            (["connect", "--half-close", "a", "1"], "--half-close needs --tls or a proxy"),
        ]
        for (arguments, says) in cases {
            let r = try run(arguments, input: nil)
            XCTAssertEqual(r.status, 2, "\(arguments): \(r.err)")
            XCTAssertTrue(r.err.contains(says), "\(arguments): \(r.err)")
        }
    }
}
