import Foundation
import TestSupport
import XCTest

/// `listen --http-proxy`: curl through it both ways (an absolute URL forwarded, CONNECT
/// tunnels), tincan's own `--proxy http://` client, Basic credentials, what the origin gets on
/// the wire (recorded by a python origin), and hostile requests.
final class HTTPProxyServerTests: XCTestCase {
    private func proxy(_ arguments: [String]) throws -> (Tool, UInt16) {
        let port = freePort()
        let tool = try Tool(["listen", "--http-proxy"] + arguments + ["127.0.0.1", String(port)])
        waitForListener(port: port)
        return (tool, port)
    }

    /// An origin that writes each request head it gets (up to its blank line) and what follows
    /// of its body (Content-Length) to `record`, then answers `200` with "recorded\n" and closes.
    private static func recorder(_ record: String) -> String {
        "record = '\(record)'\n" + PythonPeers.listenPrelude + """
            while True:
                c, _ = s.accept(); data = b''
                while b'\\r\\n\\r\\n' not in data:
                    chunk = c.recv(65536)
                    if not chunk: break
                    data += chunk
                head, _, body = data.partition(b'\\r\\n\\r\\n')
                length = 0
                for line in head.split(b'\\r\\n')[1:]:
                    name, _, value = line.partition(b':')
                    if name.strip().lower() == b'content-length': length = int(value)
                while len(body) < length:
                    chunk = c.recv(65536)
                    if not chunk: break
                    body += chunk
                open(record, 'ab').write(head + b'\\r\\n\\r\\n' + body)
                c.sendall(b'HTTP/1.1 200 OK\\r\\nContent-Length: 9\\r\\nConnection: close\\r\\n\\r\\nrecorded\\n'); c.close()
            """
    }

    func testCurlForwardedAndTunnelledToARealOrigin() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-httpproxy-\(getpid())").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let page = String(repeating: "through the HTTP proxy\n", count: 5000)
        try page.write(toFile: "\(dir)/page.txt", atomically: true, encoding: .utf8)
        let webPort = freePort()
        let web = try Tool(["python3", "-m", "http.server", String(webPort), "--bind", "127.0.0.1", "--directory", dir], program: "/usr/bin/env")
        defer { web.stop() }
        waitForListener(port: webPort)
        let (listener, port) = try proxy(["-v"])
        defer { listener.stop() }
        let forwarded = try Tool.curl(["-x", "http://127.0.0.1:\(port)", "http://127.0.0.1:\(webPort)/page.txt"])
        XCTAssertEqual(forwarded.status, 0, forwarded.err)
        XCTAssertTrue(forwarded.out == page, "forwarded whole (\(forwarded.out.utf8.count) bytes)")
        let tunnelled = try Tool.curl(["-p", "-x", "http://127.0.0.1:\(port)", "http://localhost:\(webPort)/page.txt"])
        XCTAssertEqual(tunnelled.status, 0, tunnelled.err)
        XCTAssertTrue(tunnelled.out == page, "tunnelled whole (\(tunnelled.out.utf8.count) bytes)")
        let missing = try Tool.curl(["-x", "http://127.0.0.1:\(port)", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(webPort)/nothing-here"])
        XCTAssertEqual(missing.out, "404", "the origin's own status passes through")
        let closed = freePort()
        let unreachable = try Tool.curl(["-x", "http://127.0.0.1:\(port)", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(closed)/"])
        XCTAssertEqual(unreachable.out, "502", unreachable.err)
        let tunnelRefused = try Tool.curl(["-p", "-x", "http://127.0.0.1:\(port)", "http://127.0.0.1:\(closed)/"])
        XCTAssertTrue(tunnelRefused.err.contains("502"), tunnelRefused.err)
        waitUntil("the requests said") { listener.stderrText.contains("http CONNECT localhost:\(webPort)") }
        XCTAssertTrue(listener.stderrText.contains("http GET 127.0.0.1:\(webPort)"), listener.stderrText)
    }

    func testTheOriginGetsOriginFormAndNoHopByHopFields() throws {
        let record = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-httpproxy-record-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: record) }
        let origin = try PythonPeer(HTTPProxyServerTests.recorder(record))
        defer { origin.stop() }
        let (listener, port) = try proxy(["--proxy-auth", "alice:s3cret"])
        defer { listener.stop() }
        let posted = try Tool.curl([
            "-x", "http://127.0.0.1:\(port)", "--proxy-user", "alice:s3cret", "-H", "Connection: X-Private", "-H", "X-Private: 1", "-H",
            "Proxy-Connection: keep-alive", "--data-binary", "field=value", "http://localhost:\(origin.port)/form?q=1",
        ])
        XCTAssertEqual(posted.status, 0, posted.err)
        XCTAssertEqual(posted.out, "recorded\n")
        let wire = fileText(record)
        XCTAssertTrue(wire.hasPrefix("POST /form?q=1 HTTP/1.1\r\nHost: localhost:\(origin.port)\r\n"), wire)
        XCTAssertTrue(wire.hasSuffix("Connection: close\r\n\r\nfield=value"), wire)
        for gone in ["Proxy-Authorization", "Proxy-Connection", "X-Private", "keep-alive"] {
            XCTAssertFalse(wire.lowercased().contains(gone.lowercased()), "\(gone) reached the origin: \(wire)")
        }
        // A head near the 32 KiB limit is passed on whole (more than one send may take).
        let big = String(repeating: "v", count: 30_000)
        let large = try Tool.curl(["-x", "http://127.0.0.1:\(port)", "--proxy-user", "alice:s3cret", "-H", "X-Big: \(big)", "http://localhost:\(origin.port)/big"])
        XCTAssertEqual(large.out, "recorded\n", large.err)
        XCTAssertTrue(fileText(record).contains("X-Big: \(big)\r\n"), "the big field arrived whole")
        let anonymous = try Tool.curl(["-x", "http://127.0.0.1:\(port)", "-o", "/dev/null", "-w", "%{http_code}", "http://localhost:\(origin.port)/"])
        XCTAssertEqual(anonymous.out, "407")
        let wrong = try Tool.curl(["-x", "http://127.0.0.1:\(port)", "--proxy-user", "alice:guess", "-o", "/dev/null", "-w", "%{http_code}", "http://localhost:\(origin.port)/"])
        XCTAssertEqual(wrong.out, "407")
        // tincan's own client, through CONNECT with credentials.
        let echo = try PythonPeer(PythonPeers.echoMany)
        defer { echo.stop() }
        let through = try Tool.run(["connect", "--half-close", "--proxy", "http://alice:s3cret@127.0.0.1:\(port)", "localhost", String(echo.port)], input: "hi\n")
        XCTAssertEqual(through.out, "hi\n", through.err)
        XCTAssertFalse(listener.stderrText.contains("s3cret") || listener.stderrText.contains("guess"), listener.stderrText)
    }

    /// The attack: curl reuses one proxy connection for two sites, and site a got the request
    /// meant for b, with the client's Proxy-Authorization. Each request is now routed on its
    /// own: the response says Connection: close, so curl asks for b on a new connection; a
    /// client that pipelines b's request behind a's gets a's response, and b's request goes
    /// nowhere (said at -v); an origin that keeps its connection open does not hold the client.
    func testEachRequestGoesToItsOwnSiteEvenOnAReusedConnection() throws {
        let sites = try RealDaemon.nginxSites()
        defer { sites.stop() }
        let (a, b) = (sites.ports[0], sites.ports[1])
        let (listener, port) = try proxy(["--proxy-auth", "u:secret", "-v"])
        defer { listener.stop() }
        let both = try Tool.curl(["-x", "http://u:secret@127.0.0.1:\(port)", "http://127.0.0.1:\(a)/one", "http://127.0.0.1:\(b)/two"])
        XCTAssertEqual(both.status, 0, both.err)
        XCTAssertEqual(both.out, "site a /one auth=\nsite b /two auth=\n")
        waitUntil("both sites logged") { sites.text("a.log").contains("/one") && sites.text("b.log").contains("/two") }
        XCTAssertEqual(sites.text("a.log"), "GET /one HTTP/1.1\n", "site a got only its own request")

        // Two requests in one write, for two sites, on one connection.
        let script = """
            import socket, sys
            c = socket.create_connection(('127.0.0.1', int(sys.argv[1])))
            auth = b'Proxy-Authorization: Basic dTpzZWNyZXQ=\\r\\n'
            c.sendall(b'GET http://127.0.0.1:' + sys.argv[2].encode() + b'/first HTTP/1.1\\r\\nHost: a\\r\\n' + auth + b'\\r\\n'
                      + b'GET http://127.0.0.1:' + sys.argv[3].encode() + b'/piped HTTP/1.1\\r\\nHost: b\\r\\n' + auth + b'\\r\\n')
            c.settimeout(10); got = b''
            while True:
                chunk = c.recv(65536)
                if not chunk: break
                got += chunk
            head, _, body = got.partition(b'\\r\\n\\r\\n')
            print(head.split(b'\\r\\n')[0].decode(), 'close' if b'\\r\\nConnection: close' in head else 'keep-alive', body.decode(), end='')
            """
        let piped = try Tool.run(["python3", "-c", script, String(port), String(a), String(b)], input: "", program: "/usr/bin/env")
        XCTAssertEqual(piped.status, 0, piped.err)
        XCTAssertEqual(piped.out, "HTTP/1.1 200 OK close site a /first auth=\n", "a's response whole, ended, saying close")
        waitUntil("the dropped request said") { listener.stderrText.contains("were not passed on") }
        XCTAssertFalse(sites.text("a.log").contains("/piped") || sites.text("b.log").contains("/piped"), sites.text("a.log") + sites.text("b.log"))

        // An origin that answers with a length and keeps its connection open (it ignores the
        // close it was asked for): the client still has its answer, and its end, at once.
        let keeper = try PythonPeer(
            PythonPeers.listenPrelude + """
                c, _ = s.accept(); c.recv(65536)
                c.sendall(b'HTTP/1.1 200 OK\\r\\nContent-Length: 5\\r\\n\\r\\nkept\\n')
                time.sleep(60)
                """)
        defer { keeper.stop() }
        let kept = try Tool.run(["python3", "-c", script, String(port), String(keeper.port), String(b)], input: "", timeout: .seconds(20), program: "/usr/bin/env")
        XCTAssertEqual(kept.out, "HTTP/1.1 200 OK close kept\n", kept.err)

        // A chunked upload reaches its site whole, and nothing after it does.
        let upload = try Tool.curl([
            "-x", "http://u:secret@127.0.0.1:\(port)", "-H", "Transfer-Encoding: chunked", "--data-binary", "in chunks", "http://127.0.0.1:\(b)/echo",
        ])
        XCTAssertEqual(upload.out, "site b got in chunks", upload.err)
    }

    func testHostileRequestsAreAnsweredAndClosed() throws {
        let (listener, port) = try proxy(["--handshake-timeout", "1s", "-v"])
        defer { listener.stop() }
        let before = openDescriptors(listener.process.processIdentifier)
        // 10 000 header fields, a head with no end, a request line that is not HTTP, a
        // client that stops halfway: each gets its answer (or the timeout) and is closed.
        let script = """
            import socket, sys, time
            port = int(sys.argv[1])
            def ask(data, wait=3):
                c = socket.create_connection(('127.0.0.1', port)); c.settimeout(wait)
                try:
                    c.sendall(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                got = b''
                try:
                    while True:
                        chunk = c.recv(65536)
                        if not chunk: break
                        got += chunk
                except socket.timeout:
                    got += b' (still open)'
                except ConnectionResetError:
                    got += b' (reset)'
                first = got.split(b'\\r\\n')[0].decode(errors='replace')
                print(first if first else 'closed', flush=True)
            ask(b'GET http://127.0.0.1:1/ HTTP/1.1\\r\\n' + b'X-A: b\\r\\n' * 10000 + b'\\r\\n')
            ask(b'GET http://127.0.0.1:1/ HTTP/1.1\\r\\nX-Long: ' + b'a' * 40000)
            ask(b'\\x16\\x03\\x01 not a request\\r\\n\\r\\n')
            ask(b'GET http://127.0.0.1:1/ HTTP/1.1\\r\\nX-Smuggle: a\\rb\\r\\n\\r\\n')
            ask(b'GET http://127.0.0.1:1/ HTTP/1.1\\r\\nX-Nul: a\\x00b\\r\\n\\r\\n')
            ask(b'POST http://127.0.0.1:1/ HTTP/1.1\\r\\nContent-Length: 3\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n0\\r\\n\\r\\n')
            ask(b'POST http://127.0.0.1:1/ HTTP/1.1\\r\\nContent-Length: 3\\r\\nContent-Length: 4\\r\\n\\r\\nabcd')
            ask(b'POST http://127.0.0.1:1/ HTTP/1.1\\r\\nTransfer-Encoding: chunked, gzip\\r\\n\\r\\n')
            ask(b'GET http://127.0.0.1:1/ HTTP/1.1\\r\\nHost: x\\r\\n')
            """
        let r = try Tool.run(["python3", "-c", script, String(port)], input: "", program: "/usr/bin/env")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(
            r.out.split(separator: "\n").map(String.init),
            [
                "HTTP/1.1 431 Request Header Fields Too Large", "HTTP/1.1 431 Request Header Fields Too Large", "HTTP/1.1 400 Bad Request",
                "HTTP/1.1 400 Bad Request", "HTTP/1.1 400 Bad Request", "HTTP/1.1 400 Bad Request", "HTTP/1.1 400 Bad Request",
                "HTTP/1.1 501 Not Implemented", "closed",
            ], r.out)
        waitUntil("the listener is back to its descriptors") { openDescriptors(listener.process.processIdentifier) == before }
        XCTAssertTrue(listener.stderrText.contains("sent no whole request within 1 s"), listener.stderrText)
    }

    func testAnHTTPSProxyAndSOCKSOverTLSWithClientCertificates() throws {
        let tls = TLSFixtures.shared
        let echo = try PythonPeer(PythonPeers.echoMany)
        defer { echo.stop() }
        let record = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-httpsproxy-record-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: record) }
        let origin = try PythonPeer(HTTPProxyServerTests.recorder(record))
        defer { origin.stop() }
        // Client certificates admit only their holders: no credentials or --allow needed, and
        // still loopback here.
        let (listener, port) = try proxy([
            "--socks5", "--tls", "--cert", tls.path("server.pem"), "--key", tls.path("server.key"), "--require-client-cert", "--ca", tls.path("ca.pem"), "-v",
        ])
        defer { listener.stop() }
        let proxyTLS = ["--proxy-cacert", tls.path("ca.pem"), "--proxy-cert", tls.path("client.pem"), "--proxy-key", tls.path("client.key")]
        let forwarded = try Tool.curl(proxyTLS + ["-x", "https://localhost:\(port)", "http://127.0.0.1:\(origin.port)/over-tls"])
        XCTAssertEqual(forwarded.status, 0, forwarded.err)
        XCTAssertEqual(forwarded.out, "recorded\n")
        XCTAssertTrue(fileText(record).hasPrefix("GET /over-tls HTTP/1.1\r\n"), fileText(record))
        let tunnelled = try Tool.curl(proxyTLS + ["-p", "-x", "https://localhost:\(port)", "http://127.0.0.1:\(origin.port)/tunnelled"])
        XCTAssertEqual(tunnelled.out, "recorded\n", tunnelled.err)
        let noCertificate = try Tool.curl(["--proxy-cacert", tls.path("ca.pem"), "-x", "https://localhost:\(port)", "http://127.0.0.1:\(origin.port)/"])
        XCTAssertNotEqual(noCertificate.status, 0, "no client certificate, no proxy")
        // SOCKS5 inside TLS, with tincan's own client: --tls to the proxy is the session's
        // TLS, so the SOCKS dialogue is checked by a python client wrapped in TLS.
        let script = """
            import socket, ssl, sys
            ctx = ssl.create_default_context(cafile=sys.argv[2]); ctx.load_cert_chain(sys.argv[3], sys.argv[4])
            c = ctx.wrap_socket(socket.create_connection(('127.0.0.1', int(sys.argv[1]))), server_hostname='localhost')
            c.sendall(bytes([5, 1, 0])); assert c.recv(2) == bytes([5, 0])
            c.sendall(bytes([5, 1, 0, 1, 127, 0, 0, 1]) + int(sys.argv[5]).to_bytes(2, 'big'))
            reply = b''
            while len(reply) < 10: reply += c.recv(10 - len(reply))
            assert reply[:2] == bytes([5, 0]), reply
            c.sendall(b'inside TLS\\n'); got = b''
            while not got.endswith(b'\\n'): got += c.recv(100)
            print(got.decode(), end='')
            """
        let socks = try Tool.run(
            ["python3", "-c", script, String(port), tls.path("ca.pem"), tls.path("client.pem"), tls.path("client.key"), String(echo.port)], input: "",
            program: "/usr/bin/env")
        XCTAssertEqual(socks.out, "inside TLS\n", socks.err)
        waitUntil("the requests said") { listener.stderrText.contains("socks5 CONNECT 127.0.0.1:\(echo.port)") }
        XCTAssertTrue(listener.stderrText.contains("TLS from the client"), listener.stderrText)
    }

    func testDestinationRulesHoldWhateverNameIsUsed() throws {
        let echo = try PythonPeer(PythonPeers.echoMany)
        defer { echo.stop() }
        // Only this echo's port, and never this machine's addresses by network: localhost is
        // refused although its name is allowed, 127.0.0.1 and [::1] too.
        let (listener, port) = try proxy(["--socks5", "-v", "--allow-dest", "*:\(echo.port)", "--deny-dest", "127.0.0.0/8", "--deny-dest", "[::1]"])
        defer { listener.stop() }
        let byName = try Tool.curl(["--socks5-hostname", "127.0.0.1:\(port)", "http://localhost:\(echo.port)/"])
        XCTAssertEqual(byName.status, 97, byName.err)
        XCTAssertTrue(byName.err.contains("not allowed") || byName.err.contains("(2)"), byName.err)
        let connect = try Tool.curl(["-p", "-x", "http://127.0.0.1:\(port)", "http://127.0.0.1:\(echo.port)/"])
        XCTAssertTrue(connect.err.contains("403"), connect.err)
        let tincan = try Tool.run(["connect", "--half-close", "--proxy", "socks5h://127.0.0.1:\(port)", "localhost", String(echo.port)], input: "x\n")
        XCTAssertNotEqual(tincan.status, 0)
        XCTAssertTrue(tincan.err.contains("0x02"), tincan.err)
        waitUntil("a line for each refused client") {
            listener.stderrText.split(separator: "\n").filter { line in
                line.contains("not allowed by the destination rules") && (line.contains("closed the client") || line.contains(" refused: "))
            }.count == 3
        }
        XCTAssertTrue(listener.stderrText.contains("127.0.0.1:\(echo.port) not allowed by the destination rules"), listener.stderrText)

        // Allowed by name and port, and by network: the echo answers.
        let (open, openPort) = try proxy(["--socks5", "--allow-dest", "localhost:\(echo.port)", "--allow-dest", "127.0.0.0/8:\(echo.port)"])
        defer { open.stop() }
        let allowed = try Tool.run(["connect", "--half-close", "--proxy", "socks5h://127.0.0.1:\(openPort)", "localhost", String(echo.port)], input: "allowed\n")
        XCTAssertEqual(allowed.out, "allowed\n", allowed.err)
        let otherPort = try Tool.run(["connect", "--half-close", "--proxy", "socks5h://127.0.0.1:\(openPort)", "localhost", String(freePort())], input: "x\n")
        XCTAssertTrue(otherPort.err.contains("0x02"), otherPort.err)
    }
}
