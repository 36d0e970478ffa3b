import Foundation
import TestSupport
import XCTest

/// What tincan says must be what happened: the lines and HTTP bodies people read, and the
/// statistics each mode counts (by the name of what it did). Each case was seen saying
/// something else.
final class WordsAndFiguresTests: XCTestCase {
    private let certs = TLSFixtures.shared

    /// A name that does not resolve got a 502 whose body said "host unreachable". In a namespace
    /// of the test's own, so the lookup leaves nothing on any network.
    func testAnUnresolvableNameIsSaidSoInTheHTTPBody() throws {
        try Namespace.scenario(self, setup: "") {
            let port = freePort()
            let proxy = try Tool(["listen", "--http-proxy", "127.0.0.1", String(port)])
            defer { proxy.stop() }
            waitForListener(port: port)
            let r = try Tool.curl(["-x", "http://127.0.0.1:\(port)", "http://no-such-name.test/"])
            XCTAssertTrue(r.out.hasPrefix("tincan: connect to no-such-name.test:80 failed: "), r.out)
            XCTAssertTrue(r.out.contains("lookup of no-such-name.test"), r.out)
        }
    }

    /// A line longer than --max-message, read in several chunks, said "sent 262144 bytes"
    /// though nothing went out: its first chunks were counted as they were taken.
    func testAWebSocketLineThatCannotGoIsNotCountedAsSent() throws {
        let (server, port) = try Tool.listener(["-k", "--ws", "--echo"])
        defer { server.stop() }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-ws-long-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: file) }
        try String(repeating: "a", count: 600_000).write(toFile: file, atomically: true, encoding: .utf8)
        let client = try Tool(["ws", "--max-message", "400000", "ws://127.0.0.1:\(port)/"], stdinFile: file)
        XCTAssertEqual(client.wait(), 1, client.stderrText)
        XCTAssertTrue(client.stderrText.contains("longer than --max-message") && client.stderrText.contains("(sent 0 bytes,"), client.stderrText)
    }

    /// ws:// to a TLS port said only that the connection ended; a refused subprotocol was
    /// blamed on the WebSocket version.
    func testAWebSocketClientSaysWhatTheServerDid() throws {
        let (tls, tlsPort) = try Tool.listener(["-k", "--ws", "--echo", "--tls", "--cert", certs.path("server.pem"), "--key", certs.path("server.key")])
        defer { tls.stop() }
        let plain = try Tool.run(["ws", "ws://127.0.0.1:\(tlsPort)/"], input: "x\n")
        XCTAssertNotEqual(plain.status, 0)
        XCTAssertTrue(plain.err.contains("wss://"), "a hint at wss://: \(plain.err)")
        let (chat, chatPort) = try Tool.listener(["-k", "--ws", "--echo", "--protocol", "chat"])
        defer { chat.stop() }
        let refused = try Tool.run(["ws", "--protocol", "mqtt", "ws://127.0.0.1:\(chatPort)/"], input: "x\n")
        XCTAssertEqual(refused.status, 10, refused.err)
        XCTAssertTrue(refused.err.contains("it refused the request (the subprotocols offered were mqtt: --protocol)"), refused.err)
        XCTAssertFalse(refused.err.contains("version"), refused.err)
    }

    /// -vv showed no pings and pongs.
    func testPingsAndPongsAreSaidAtDoubleVerbose() throws {
        let (server, port) = try Tool.listener(["-k", "--ws", "--echo"])
        defer { server.stop() }
        let client = try Tool(["ws", "-vv", "--ping-interval", "100ms", "ws://127.0.0.1:\(port)/"])
        defer { client.stop() }
        waitUntil("a ping and its pong said") { client.stderrText.contains("WebSocket ping sent") && client.stderrText.contains("WebSocket pong from the peer") }
    }

    /// haproxy's check-send-proxy health checks (PROXY v2 LOCAL, then a reset) were logged as
    /// cut relays every few seconds.
    func testBalancerHealthChecksAreNotCutRelays() throws {
        let upstream = try PythonPeer(PythonPeers.echoMany)
        defer { upstream.stop() }
        let (relay, port) = try Tool.listener(["-k", "-vv", "--accept-proxy-protocol", "--forward", "127.0.0.1:\(upstream.port)"])
        defer { relay.stop() }
        let balancer = try RealDaemon.haproxyBalancer(to: port, checks: true)
        defer { balancer.stop() }
        waitUntil("three health checks", timeout: .seconds(20)) { relay.stderrText.components(separatedBy: "a health check (PROXY LOCAL) ended").count > 3 }
        XCTAssertFalse(relay.stderrText.contains("cut:"), relay.stderrText)
    }

    /// `listen -k --ws --echo` said "received 0 bytes, sent 0 bytes" after echoing, and a
    /// partial upgrade was a "TLS handshake failed" though there is no TLS; `listen -u -k
    /// --exec` said "0 connections" after its peers.
    func testEachModeCountsWhatItDidByItsName() throws {
        let (echo, port) = try Tool.listener(["-k", "--ws", "--echo", "--stats", "--handshake-timeout", "1s"])
        let script = """
            import socket, sys
            from websockets.sync.client import connect
            with connect('ws://127.0.0.1:%s/' % sys.argv[1]) as ws:
                ws.send('twelve bytes'); ws.recv(timeout=10)
            s = socket.create_connection(('127.0.0.1', int(sys.argv[1]))); s.sendall(b'GET / HTTP/1.1\\r\\n'); s.settimeout(5)
            s.recv(100)
            """
        let r = try Tool.run(["python3", "-c", script, String(port)], input: "", program: "/usr/bin/env")
        XCTAssertEqual(r.status, 0, r.err)
        echo.signal(SIGTERM)
        _ = echo.wait(timeout: .seconds(5))
        XCTAssertTrue(echo.stderrText.contains("statistics: 2 connections, received 12 bytes"), echo.stderrText)
        XCTAssertTrue(echo.stderrText.contains("sent 12 bytes"), echo.stderrText)
        XCTAssertTrue(echo.stderrText.contains("1 WebSocket handshakes refused or not finished"), echo.stderrText)
        XCTAssertFalse(echo.stderrText.contains("TLS"), echo.stderrText)

        let udpPort = freeUDPPort()
        let programs = try Tool(["listen", "-u", "-k", "--stats", "--exec", "/bin/cat", "127.0.0.1", String(udpPort)])
        waitForUDPReceiver(port: udpPort)
        let peers = """
            import socket, sys
            for i in range(3):
                c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); c.settimeout(5)
                c.sendto(b'peer %d' % i, ('127.0.0.1', int(sys.argv[1]))); c.recv(100)
            """
        XCTAssertEqual(try Tool.run(["python3", "-c", peers, String(udpPort)], input: "", program: "/usr/bin/env").status, 0)
        programs.signal(SIGTERM)
        _ = programs.wait(timeout: .seconds(5))
        XCTAssertTrue(programs.stderrText.contains("statistics: 3 peers, received 18 bytes"), programs.stderrText)
    }
}
