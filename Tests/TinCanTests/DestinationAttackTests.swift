import Foundation
import TestSupport
import XCTest

/// `--deny-dest 127.0.0.0/8 --deny-dest [::1]` keeps a proxy's clients off this machine's own
/// services, whatever they ask for: the unspecified addresses (0.0.0.0, `0`, ::, ::0), which
/// Linux connects to loopback, by address and by name, over SOCKS4, SOCKS4a, SOCKS5, HTTP
/// CONNECT, an absolute GET and a SOCKS5 UDP datagram; and through a `--proxy` chain
/// (microsocks), where a name used to go on unjudged (`localhost`, `127.1`, `127.0.0.1` as a
/// name). Each was seen reaching the "secret" service before.
final class DestinationAttackTests: XCTestCase {
    /// Asks the proxy on argv[1] for each "KIND HOST PORT" of argv[2...] and prints "KIND HOST
    /// CODE": the SOCKS reply code (5: 0 granted, 2 not allowed; 4: 90 granted, 91 refused) or
    /// the HTTP status.
    private static let asker = """
        import socket, sys
        proxy = int(sys.argv[1])
        def recv(c, n):
            got = b''
            while len(got) < n:
                chunk = c.recv(n - len(got))
                if not chunk: break
                got += chunk
            return got
        for spec in sys.argv[2:]:
            kind, host, port = spec.split(' '); port = int(port)
            c = socket.create_connection(('127.0.0.1', proxy)); c.settimeout(10)
            p = port.to_bytes(2, 'big')
            if kind.startswith('socks5'):
                c.sendall(bytes([5, 1, 0])); assert recv(c, 2) == bytes([5, 0])
                if kind == 'socks5-ip4': target = bytes([1]) + socket.inet_aton(host)
                elif kind == 'socks5-ip6': target = bytes([4]) + socket.inet_pton(socket.AF_INET6, host)
                else: target = bytes([3, len(host)]) + host.encode()
                c.sendall(bytes([5, 1, 0]) + target + p); code = recv(c, 2)[1]
            elif kind == 'socks4':
                c.sendall(bytes([4, 1]) + p + socket.inet_aton(host) + b'u\\0'); code = recv(c, 8)[1]
            elif kind == 'socks4a':
                c.sendall(bytes([4, 1]) + p + bytes([0, 0, 0, 1]) + b'u\\0' + host.encode() + b'\\0'); code = recv(c, 8)[1]
            else:
                authority = ('[%s]' % host if ':' in host else host) + ':%d' % port
                line = 'CONNECT %s HTTP/1.1' % authority if kind == 'connect' else 'GET http://%s/ HTTP/1.1' % authority
                c.sendall((line + '\\r\\nHost: x\\r\\n\\r\\n').encode())
                code = int(c.recv(100).split(b' ')[1])
            print(kind, host, code, flush=True)
            c.close()
        """

    private func ask(_ port: UInt16, _ specs: [String]) throws -> [String] {
        let r = try Tool.run(["python3", "-c", DestinationAttackTests.asker, String(port)] + specs, input: "", program: "/usr/bin/env")
        XCTAssertEqual(r.status, 0, r.err)
        return r.out.split(separator: "\n").map(String.init)
    }

    func testTheUnspecifiedAddressesCountAsThisHostOnEveryRoad() throws {
        let secret = try PythonPeer(PythonPeers.echoMany)
        defer { secret.stop() }
        let secret6 = try PythonPeer(PythonPeers.echoMany, host: "::1")
        defer { secret6.stop() }
        let port = freePort()
        let listener = try Tool(["listen", "--socks5", "--http-proxy", "-vv", "--deny-dest", "127.0.0.0/8", "--deny-dest", "[::1]", "127.0.0.1", String(port)])
        defer { listener.stop() }
        waitForListener(port: port)
        let (s, s6) = (secret.port, secret6.port)
        let asked = try ask(
            port,
            [
                "socks5-ip4 0.0.0.0 \(s)", "socks5-ip4 0.1.2.3 \(s)", "socks5-ip6 :: \(s6)", "socks5-ip6 ::ffff:0.0.0.0 \(s)", "socks5-name 0 \(s)",
                "socks5-name 0.0.0.0 \(s)", "socks4 0.0.0.0 \(s)", "socks4a 0 \(s)", "connect 0.0.0.0 \(s)", "connect 0 \(s)", "connect :: \(s6)",
                "connect ::0 \(s6)", "get 0.0.0.0 \(s)", "get :: \(s6)",
            ])
        XCTAssertEqual(
            asked,
            [
                "socks5-ip4 0.0.0.0 2", "socks5-ip4 0.1.2.3 2", "socks5-ip6 :: 2", "socks5-ip6 ::ffff:0.0.0.0 2", "socks5-name 0 2", "socks5-name 0.0.0.0 2",
                "socks4 0.0.0.0 91", "socks4a 0 91", "connect 0.0.0.0 403", "connect 0 403", "connect :: 403", "connect ::0 403", "get 0.0.0.0 403",
                "get :: 403",
            ])

        // A UDP datagram for 0.0.0.0 is dropped, said at -vv; the service hears nothing.
        let udp = try PythonPeer(
            """
            import socket, sys
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1], flush=True)
            while True:
                d, a = s.recvfrom(65536); print('heard', d, flush=True)
            """)
        defer { udp.stop() }
        let script =
            PythonPeers.socksAssociate + """
                port, target = int(sys.argv[1]), int(sys.argv[2])
                u, c, relay = associate(port)
                c.settimeout(None)  # held open until the test is done
                for atyp in [bytes([1, 0, 0, 0, 0]), bytes([3, 1]) + b'0']:
                    u.sendto(bytes([0, 0, 0]) + atyp + target.to_bytes(2, 'big') + b'to this host', relay)
                print('sent', flush=True); c.recv(1)
                """
        let client = try Tool(["python3", "-c", script, String(port), String(udp.port)], program: "/usr/bin/env")
        defer { client.stop() }
        waitUntil("both datagrams dropped") {
            listener.stderrText.contains("dropped a datagram for 0.0.0.0:\(udp.port), not allowed")
                && listener.stderrText.contains("dropped a datagram for 0 (0.0.0.0:\(udp.port)), not allowed")
        }
        XCTAssertFalse(udp.output.contains("heard"), udp.output)
    }

    func testNamesThroughAProxyChainAreJudgedHereAndSentAsTheAddressJudged() throws {
        let microsocks = try RealProxy.microsocks()
        defer { microsocks.stop() }
        let secret = try PythonPeer(PythonPeers.echoMany)
        defer { secret.stop() }
        let allowed = try PythonPeer(PythonPeers.echoMany)
        defer { allowed.stop() }
        let port = freePort()
        let listener = try Tool([
            "listen", "--socks5", "--http-proxy", "-v", "--proxy", "socks5h://127.0.0.1:\(microsocks.port)", "--deny-dest", "127.0.0.0/8:\(secret.port)",
            "--deny-dest", "[::1]:\(secret.port)", "127.0.0.1", String(port),
        ])
        defer { listener.stop() }
        waitForListener(port: port)
        let s = secret.port
        XCTAssertEqual(
            try ask(port, ["socks5-name localhost \(s)", "socks5-name 127.1 \(s)", "socks5-name 127.0.0.1 \(s)", "socks4a localhost \(s)", "connect 127.1 \(s)"]),
            ["socks5-name localhost 2", "socks5-name 127.1 2", "socks5-name 127.0.0.1 2", "socks4a localhost 91", "connect 127.1 403"])
        // What the rules admit still goes through the chain, by name.
        let through = try Tool.run(["connect", "--half-close", "--proxy", "socks5h://127.0.0.1:\(port)", "localhost", String(allowed.port)], input: "via microsocks\n")
        XCTAssertEqual(through.out, "via microsocks\n", through.err)
        XCTAssertTrue(listener.stderrText.contains("127.0.0.1:\(s) not allowed by the destination rules"), listener.stderrText)
    }

    /// Inside a namespace of its own (no route anywhere, so a lookup cannot leave the machine): a
    /// name that does not resolve here cannot be judged, and is refused with a line saying so.
    func testANameTheRulesCannotJudgeIsRefused() throws {
        try Namespace.scenario(self, setup: "") {
            let microsocks = try RealProxy.microsocks()
            defer { microsocks.stop() }
            let port = freePort()
            let listener = try Tool([
                "listen", "--socks5", "-v", "--proxy", "socks5h://127.0.0.1:\(microsocks.port)", "--deny-dest", "127.0.0.0/8", "127.0.0.1", String(port),
            ])
            defer { listener.stop() }
            waitForListener(port: port)
            XCTAssertEqual(try ask(port, ["socks5-name unknown.test 80"]), ["socks5-name unknown.test 4"])
            waitUntil("the refusal said") { listener.stderrText.contains("cannot judge it") }
        }
    }
}
