import Foundation
import TestSupport
import XCTest

/// `listen --socks5`: a SOCKS proxy, driven by real clients (curl's SOCKS5, SOCKS5 with the
/// name resolved by the proxy, SOCKS4 and SOCKS4a; tincan's own --proxy client), chained to
/// microsocks, and by a python client where the bytes on the wire are the point (reply codes,
/// optimistic data, hostile requests).
final class ProxyServerTests: XCTestCase {
    /// A SOCKS proxy on 127.0.0.1 (loopback: no credentials needed to start it).
    private func proxy(_ arguments: [String], address: String = "127.0.0.1") throws -> (Tool, UInt16) {
        let port = freePort()
        let tool = try Tool(["listen", "--socks5"] + arguments + [address, String(port)])
        waitForListener(port: port)
        return (tool, port)
    }

    /// A python3 http.server serving `page` as /page.txt: its port, and what stops it and
    /// removes its files.
    private func webServer(page: String) throws -> (UInt16, () -> Void) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-socks-\(getpid())-\(UUID().uuidString.prefix(6))").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try page.write(toFile: "\(dir)/page.txt", atomically: true, encoding: .utf8)
        let port = freePort()
        let server = try Tool(["python3", "-m", "http.server", String(port), "--bind", "127.0.0.1", "--directory", dir], program: "/usr/bin/env")
        waitForListener(port: port)
        return (
            port,
            {
                server.stop()
                try? FileManager.default.removeItem(atPath: dir)
            }
        )
    }

    /// Connects to the proxy, sends each hex message of `messages` (reading what comes back
    /// after each, up to 2 s), and prints each answer in hex (`eof` when the proxy closed, and
    /// nothing more; `silent` when nothing came), then `closed`, `reset` or `open` as the proxy
    /// left the connection.
    private static let rawClient = """
        import socket, sys, time
        port = int(sys.argv[1]); messages = [bytes.fromhex(m) for m in sys.argv[2:]]
        c = socket.create_connection(('127.0.0.1', port)); c.settimeout(2)
        for m in messages:
            if m: c.sendall(m)
            try:
                got = c.recv(4096)
            except socket.timeout:
                got = None
            print('silent' if got is None else got.hex() if got else 'eof', flush=True)
            if got == b'': sys.exit(0)
        try:
            c.settimeout(3); rest = c.recv(4096)
            print('closed' if not rest else 'more ' + rest.hex())
        except socket.timeout:
            print('open')
        except ConnectionResetError:
            print('reset')
        """

    private func raw(_ port: UInt16, _ messages: [String]) throws -> [String] {
        let r = try Tool.run(["python3", "-c", ProxyServerTests.rawClient, String(port)] + messages, input: "", program: "/usr/bin/env")
        XCTAssertEqual(r.status, 0, r.err)
        return r.out.split(separator: "\n").map(String.init)
    }

    func testCurlThroughEverySOCKSVersion() throws {
        let page = String(repeating: "through the SOCKS proxy\n", count: 5000)
        let (webPort, stopServer) = try webServer(page: page)
        defer { stopServer() }
        let (listener, port) = try proxy(["-v"])
        defer { listener.stop() }
        let ways: [(String, String)] = [
            ("--socks5", "127.0.0.1"), ("--socks5-hostname", "localhost"), ("--socks4", "127.0.0.1"), ("--socks4a", "localhost"),
        ]
        for (option, host) in ways {
            let curl = try Tool(["-sS", "--max-time", "10", option, "127.0.0.1:\(port)", "http://\(host):\(webPort)/page.txt"], program: "/usr/bin/curl")
            curl.closeInput()
            XCTAssertEqual(curl.wait(), 0, "\(option): \(curl.stderrText)")
            XCTAssertTrue(curl.stdoutText == page, "\(option): the page arrived whole (\(curl.stdoutText.utf8.count) bytes)")
        }
        waitUntil("four relays closed") { listener.stderrText.components(separatedBy: ": closed; ").count - 1 == 4 }
        for line in ["socks5 CONNECT 127.0.0.1:\(webPort)", "socks5 CONNECT localhost:\(webPort)", "socks4 CONNECT 127.0.0.1:\(webPort)", "socks4a CONNECT localhost:\(webPort)"] {
            XCTAssertTrue(listener.stderrText.contains(line), "-v names each request: \(line)\n\(listener.stderrText)")
        }
        XCTAssertTrue(listener.process.isRunning, "a proxy serves many clients (-k implied)")
    }

    func testJSONEventsTellEachRequestFromAskToClose() throws {
        let echo = try PythonPeer(PythonPeers.echoMany)
        defer { echo.stop() }
        let (listener, port) = try proxy(["--json", "--http-proxy"])
        defer { listener.stop() }
        let r = try Tool.run(["connect", "--half-close", "--proxy", "socks5h://127.0.0.1:\(port)", "localhost", String(echo.port)], input: "ten bytes\n")
        XCTAssertEqual(r.out, "ten bytes\n", r.err)
        waitUntil("the closed event") { listener.stderrText.contains("\"event\":\"closed\"") }
        let events = listener.stderrText.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        XCTAssertEqual(events.compactMap { $0["event"] as? String }.filter { ["proxy", "forward", "closed"].contains($0) }, ["proxy", "forward", "closed"])
        let asked = events.first { $0["event"] as? String == "proxy" }
        XCTAssertEqual(asked?["protocol"] as? String, "socks5")
        XCTAssertEqual(asked?["method"] as? String, "CONNECT")
        XCTAssertEqual(asked?["target"] as? String, "localhost:\(echo.port)")
        let closed = try XCTUnwrap(events.first { $0["event"] as? String == "closed" })
        XCTAssertEqual(closed["upstream"] as? String, "localhost:\(echo.port)")
        XCTAssertEqual(closed["sent"] as? Double, 10)
        XCTAssertEqual(closed["received"] as? Double, 10)
        XCTAssertEqual(closed["method"] as? String, "CONNECT")
        XCTAssertNotNil(closed["duration_ms"] as? Double)
        XCTAssertTrue(closed["error"] is NSNull, "\(closed)")
    }

    /// A target for the byte-path tests, by `mode`: `late` reads to the end, waits 2.5 s, then
    /// answers the count and digest; `first` sends a line and ends its side first, then counts
    /// what still comes (after the client's pause) into `record`; `reset` waits for the client's
    /// first bytes (the tunnel is up), sends a line and resets.
    private static func target(_ mode: String, record: String = "") -> String {
        "mode = '\(mode)'; record = '\(record)'\n" + PythonPeers.listenPrelude + """
            import struct
            c, _ = s.accept()
            if mode == 'reset':
                c.recv(100)  # the client's first bytes: the tunnel is up
                c.sendall(b'partial\\n')
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0)); c.close()
            elif mode == 'first':
                c.sendall(b'the target speaks first\\n'); c.shutdown(socket.SHUT_WR)
                n = 0
                while True:
                    b = c.recv(65536)
                    if not b: break
                    n += len(b)
                open(record, 'w').write(str(n)); c.close()
            else:
                h = hashlib.sha256(); n = 0
                while True:
                    b = c.recv(65536)
                    if not b: break
                    h.update(b); n += len(b)
                time.sleep(2.5)
                c.sendall(f'{n} {h.hexdigest()}\\n'.encode()); c.close()
            """
    }

    func testEachSideEndsFirstAndTheOtherGoesOnAfterAPause() throws {
        let (listener, port) = try proxy([])
        defer { listener.stop() }
        // The client ends first; the target answers 2.5 s later, through the proxy.
        let late = try PythonPeer(ProxyServerTests.target("late"))
        defer { late.stop() }
        let input = String(repeating: "the client's part\n", count: 50_000)
        let r = try Tool.run(["connect", "--half-close", "--proxy", "socks5h://127.0.0.1:\(port)", "localhost", String(late.port)], input: input)
        XCTAssertEqual(r.status, 0, r.err)
        let digest = try Tool.run(["sha256sum"], input: input, program: "/usr/bin/env").out.prefix(64)
        XCTAssertEqual(r.out, "\(input.utf8.count) \(digest)\n", "the answer after the pause, whole")
        // The target ends first; the client sends 1 MiB after a 2.5 s pause, all of it counted.
        let record = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-socks-first-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: record) }
        let first = try PythonPeer(ProxyServerTests.target("first", record: record))
        defer { first.stop() }
        let client = """
            import socket, sys, time
            c = socket.create_connection(('127.0.0.1', int(sys.argv[1]))); c.settimeout(10)
            c.sendall(bytes([5, 1, 0])); assert c.recv(2) == bytes([5, 0])
            c.sendall(bytes([5, 1, 0, 1, 127, 0, 0, 1]) + int(sys.argv[2]).to_bytes(2, 'big'))
            r = b''
            while len(r) < 10: r += c.recv(10 - len(r))
            got = b''
            while True:
                b = c.recv(65536)
                if not b: break
                got += b
            time.sleep(2.5)
            c.sendall(b'x' * (1 << 20)); c.shutdown(socket.SHUT_WR)
            while c.recv(65536): pass
            print(got.decode(), end='')
            """
        let sent = try Tool.run(["python3", "-c", client, String(port), String(first.port)], input: "", program: "/usr/bin/env")
        XCTAssertEqual(sent.out, "the target speaks first\n", sent.err)
        waitUntil("the target's count") { fileText(record) == String(1 << 20) }
    }

    func testATargetsResetReachesTheClientAsAFailure() throws {
        let (listener, port) = try proxy([])
        defer { listener.stop() }
        let reset = try PythonPeer(ProxyServerTests.target("reset"))
        defer { reset.stop() }
        let r = try Tool.run(["connect", "--proxy", "socks5h://127.0.0.1:\(port)", "localhost", String(reset.port)], input: "go\n")
        // What came before the reset may be dropped by the kernel that met it: only a prefix.
        XCTAssertTrue("partial\n".hasPrefix(r.out), r.out)
        XCTAssertNotEqual(r.status, 0, "a reset is not a clean end: \(r.err)")
        XCTAssertTrue(r.err.contains("reset"), r.err)
    }

    func testRepliesSayWhyAndWhatIsNotServed() throws {
        let (listener, port) = try proxy([])
        defer { listener.stop() }
        let closed = freePort()
        let portHex = String(format: "%04x", closed)
        // Refused: 0x05, then the connection is closed.
        XCTAssertEqual(try raw(port, ["050100", "050100017f000001" + portHex]), ["0500", "05050001000000000000", "closed"])
        // BIND and an unknown command: 0x07; an unknown address type: 0x08; IPv6 refused: 0x05.
        XCTAssertEqual(try raw(port, ["050100", "050200017f0000010050"]), ["0500", "05070001000000000000", "closed"])
        XCTAssertEqual(try raw(port, ["050100", "05090001000000000000"]), ["0500", "05070001000000000000", "closed"])
        XCTAssertEqual(try raw(port, ["050100", "0501000901"]), ["0500", "05080001000000000000", "closed"])
        XCTAssertEqual(
            try raw(port, ["050100", "05010004" + String(repeating: "00", count: 15) + "01" + portHex]), ["0500", "05050001000000000000", "closed"])
        // SOCKS4 to a closed port: 91.
        XCTAssertEqual(try raw(port, ["0401" + portHex + "7f00000100"]), ["005b000000000000", "closed"])
        // Not SOCKS at all: closed without an answer.
        XCTAssertEqual(try raw(port, ["474554202f20485454502f312e310d0a0d0a"]), ["eof"])
        XCTAssertTrue(listener.process.isRunning)
    }

    func testWhatTheClientSendsWithItsRequestReachesTheTarget() throws {
        let echo = try PythonPeer(PythonPeers.echoMany)
        defer { echo.stop() }
        let (listener, port) = try proxy([])
        defer { listener.stop() }
        // Greeting, request and "early bird" in one write: the reply, then the echo of it.
        let request = "050100" + "050100017f000001" + String(format: "%04x", echo.port) + Data("early bird".utf8).map { String(format: "%02x", $0) }.joined()
        let lines = try raw(port, [request, ""])
        // The method reply, the connect reply and the echo may come in one read or several.
        let wire = lines.filter { !["silent", "open", "closed"].contains($0) }.map { $0.replacingOccurrences(of: "more ", with: "") }.joined()
        let early = Data("early bird".utf8).map { String(format: "%02x", $0) }.joined()
        XCTAssertTrue(wire.hasPrefix("0500" + "050000017f000001"), "the method, then success with the bound address: \(lines)")
        XCTAssertEqual(wire.count, (2 + 10 + 10) * 2, "\(lines)")
        XCTAssertTrue(wire.hasSuffix(early), "the early bytes came back: \(lines)")
    }

    func testCredentialsFromTheCommandLineAndAPrivateFile() throws {
        let echo = try PythonPeer(PythonPeers.echoMany)
        defer { echo.stop() }
        let (listener, port) = try proxy(["-v", "--proxy-auth", "alice:s3cret"])
        defer { listener.stop() }
        let good = try Tool.run(["connect", "--half-close", "--proxy", "socks5://alice:s3cret@127.0.0.1:\(port)", "127.0.0.1", String(echo.port)], input: "hello\n")
        XCTAssertEqual(good.status, 0, good.err)
        XCTAssertEqual(good.out, "hello\n")
        let wrong = try Tool.run(["connect", "--half-close", "--proxy", "socks5://alice:guess@127.0.0.1:\(port)", "127.0.0.1", String(echo.port)], input: "hello\n")
        XCTAssertNotEqual(wrong.status, 0)
        XCTAssertTrue(wrong.err.contains("refused the user name and password"), wrong.err)
        let curl = try Tool.curl(["--socks5", "127.0.0.1:\(port)", "http://127.0.0.1:\(echo.port)/"], timeout: 5)
        XCTAssertEqual(curl.status, 97, "curl offers no credentials: \(curl.err)")
        XCTAssertEqual(try raw(port, ["0401" + String(format: "%04x", echo.port) + "7f00000100"]), ["005b000000000000", "closed"], "SOCKS4 has no password")
        waitUntil("three refusals said") { listener.stderrText.components(separatedBy: "refused its proxy request").count - 1 == 3 }
        XCTAssertTrue(listener.stderrText.contains("socks5 CONNECT 127.0.0.1:\(echo.port) as alice"), listener.stderrText)
        XCTAssertFalse(listener.stderrText.contains("s3cret") || listener.stderrText.contains("guess"), "never a password: \(listener.stderrText)")

        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-socks-users-\(getpid())").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/users"
        try "# users\nbob:pa:ss\n".write(toFile: file, atomically: true, encoding: .utf8)
        chmod(file, 0o644)
        let exposed = try Tool.run(["listen", "--socks5", "--proxy-auth-file", file, "127.0.0.1", String(freePort())], input: "")
        XCTAssertEqual(exposed.status, 2, exposed.err)
        XCTAssertTrue(exposed.err.contains("mode 644") && exposed.err.contains("chmod 600 \(file)"), exposed.err)
        chmod(file, 0o600)
        let (fromFile, filePort) = try proxy(["--proxy-auth-file", file])
        defer { fromFile.stop() }
        let bob = try Tool.run(["connect", "--half-close", "--proxy", "socks5h://bob:pa%3Ass@127.0.0.1:\(filePort)", "localhost", String(echo.port)], input: "from bob\n")
        XCTAssertEqual(bob.out, "from bob\n", bob.err)
        try "bob\n".write(toFile: file, atomically: true, encoding: .utf8)
        chmod(file, 0o600)
        let bad = try Tool.run(["listen", "--socks5", "--proxy-auth-file", file, "127.0.0.1", String(freePort())], input: "")
        XCTAssertEqual(bad.status, 2)
        XCTAssertTrue(bad.err.contains("\(file):1: no ':'"), bad.err)
    }

    func testNeverAnOpenProxyByAccident() throws {
        let anywhere = try Tool.run(["listen", "--socks5", "0.0.0.0", String(freePort())], input: "")
        XCTAssertEqual(anywhere.status, 2)
        XCTAssertTrue(anywhere.err.contains("open to anyone") && anywhere.err.contains("--open"), anywhere.err)
        let misplaced = try Tool.run(["listen", "--proxy-auth", "a:b", String(freePort())], input: "")
        XCTAssertEqual(misplaced.status, 2)
        XCTAssertTrue(misplaced.err.contains("add --socks5"), misplaced.err)
        // No address, no credentials: loopback only, and said at start without -v.
        let port = freePort()
        let local = try Tool(["listen", "--socks5", String(port)])
        defer { local.stop() }
        waitForListener(port: port)
        waitUntil("the start line") { local.stderrText.contains("loopback only") }
        XCTAssertTrue(local.stderrText.contains("127.0.0.1:\(port)"), local.stderrText)
        let tcp = try String(contentsOfFile: "/proc/net/tcp", encoding: .utf8)
        let listening = tcp.split(separator: "\n").filter { $0.contains(String(format: ":%04X ", port)) && $0.contains(" 0A ") }
        XCTAssertEqual(listening.count, 1, "one IPv4 listener")
        XCTAssertTrue(listening.allSatisfy { $0.contains("0100007F:") }, "bound to 127.0.0.1 only: \(listening)")
        // --open: said at start, at any level (on loopback here: a test opens no proxy to the
        // machine's networks).
        let openPort = freePort()
        let open = try Tool(["listen", "--socks5", "--open", "-4", "127.0.0.1", String(openPort)])
        defer { open.stop() }
        waitForListener(port: openPort)
        waitUntil("the open line") { open.stderrText.contains("a SOCKS proxy on 127.0.0.1:\(openPort): open to anyone who reaches it (--open)") }
    }

    /// A FIFO as --proxy-auth-file held start-up until a writer came: refused at once, said why.
    func testAFIFOAsTheUsersFileIsRefusedAtOnce() throws {
        let fifo = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-users-fifo-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: fifo) }
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let run = try Tool.run(["listen", "--socks5", "--proxy-auth-file", fifo, "127.0.0.1", "0"], input: "", timeout: .seconds(10))
        XCTAssertEqual(run.status, 2, run.err)
        XCTAssertTrue(run.err.contains("cannot read --proxy-auth-file \(fifo): it is not a regular file (a FIFO"), run.err)
    }

    func testHostileClientsAreClosedAndNothingIsLeftOpen() throws {
        let (listener, port) = try proxy(["--handshake-timeout", "1s", "-v"])
        defer { listener.stop() }
        let before = openDescriptors(listener.process.processIdentifier)
        // A greeting cut short, then closed; a user ID with no end; a client that sends one
        // byte and waits; one that never reads (its greeting repeated a thousand times).
        XCTAssertEqual(try raw(port, ["05"]), ["eof"], "one byte, then nothing: closed at --handshake-timeout (1 s)")
        XCTAssertEqual(try raw(port, ["0401005078000001" + String(repeating: "75", count: 2000)]), ["eof"], "an endless user ID")
        let flood = String(repeating: "050100", count: 1000)
        let answer = try raw(port, [flood])
        XCTAssertEqual(answer.first.map { $0.hasPrefix("0500") }, true, "the first greeting is answered: \(answer)")
        waitUntil("the listener is back to its descriptors") { openDescriptors(listener.process.processIdentifier) == before }
        XCTAssertTrue(listener.stderrText.contains("sent no whole request within 1 s"), listener.stderrText)
        XCTAssertTrue(listener.stderrText.contains("longer than 1024 bytes"), listener.stderrText)
    }

    func testChainedThroughMicrosocksAndBulkKeepsEveryByte() throws {
        let upstream = try RealProxy.microsocks()
        defer { upstream.stop() }
        // An echo: microsocks closes both directions at a half-close, so a target that answers
        // only after the client's end (sha256AfterEOF) could not be heard through it.
        let sink = try PythonPeer(PythonPeers.echoMany)
        defer { sink.stop() }
        let (listener, port) = try proxy(["--proxy", "socks5h://127.0.0.1:\(upstream.port)"])
        defer { listener.stop() }
        let payload = (0..<400_000).map { "line \($0) through two SOCKS proxies\n" }.joined()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-socks-bulk-\(getpid())").path
        try payload.write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let client = try Tool(["connect", "--half-close", "--proxy", "socks5h://127.0.0.1:\(port)", "localhost", String(sink.port)], stdinFile: file)
        XCTAssertEqual(client.wait(timeout: .seconds(60)), 0, client.stderrText)
        XCTAssertTrue(client.stdoutText == payload, "every byte through two proxies and back (\(client.stdoutText.utf8.count) of \(payload.utf8.count))")
    }

    func testUDPAssociateRelaysBothWaysForAsLongAsItsConnection() throws {
        let echo = try PythonPeer(PythonPeers.udpEcho(prefix: "echo:"))
        defer { echo.stop() }
        let (listener, port) = try proxy(["-v", "--proxy-auth", "alice:s3cret"])
        defer { listener.stop() }
        // RFC 1928 §7 by hand: associate from our UDP port, three datagrams and their echoes (each
        // with a header naming the echo server), a fragment (dropped: the next answer is the
        // datagram after it), a datagram by name; then the TCP connection closes the association.
        let script =
            PythonPeers.socksAssociate + """
                port, echo = int(sys.argv[1]), int(sys.argv[2])
                u, c, relay = associate(port, (b'alice', b's3cret'))
                header = to(echo)
                for i in range(3):
                    u.sendto(header + b'datagram %d' % i, relay)
                    data, source = u.recvfrom(65536)
                    assert source == relay, source
                    print(data[:10] == header, data[10:].decode(), flush=True)
                u.sendto(bytes([0, 0, 1]) + header[3:] + b'a fragment', relay)
                u.sendto(bytes([0, 0, 0, 3, 9]) + b'localhost' + echo.to_bytes(2, 'big') + b'by name', relay)
                print(u.recvfrom(65536)[0][10:].decode(), flush=True)
                c.close()
                """
        var afterFirst = 0
        // Twice: the first association also starts dispatch's own descriptors (its epoll set,
        // eventfd and timer), which stay; the second must leave nothing behind.
        for round in 1...2 {
            let r = try Tool.run(["python3", "-c", script, String(port), String(echo.port)], input: "", program: "/usr/bin/env")
            XCTAssertEqual(r.status, 0, r.err)
            XCTAssertEqual(r.out, "True echo:datagram 0\nTrue echo:datagram 1\nTrue echo:datagram 2\necho:by name\n")
            waitUntil("the association ends with its connection") { listener.stderrText.components(separatedBy: "UDP association closed").count - 1 == round }
            if round == 1 { afterFirst = openDescriptors(listener.process.processIdentifier) }
        }
        XCTAssertTrue(listener.stderrText.contains("4 datagrams to targets, 4 back; 1 dropped"), listener.stderrText)
        XCTAssertTrue(listener.stderrText.contains("socks5 UDP ASSOCIATE from 127.0.0.1:"), listener.stderrText)
        waitUntil("the listener is back to its descriptors") { openDescriptors(listener.process.processIdentifier) == afterFirst }
    }

    /// The attacks: another process on the client's host (or a stranger) sends to the relay
    /// port first, to take the association or break it. The association belongs to its client:
    /// with its port named, only that port is the client; answers are taken only from where the
    /// client sent; anything else is dropped, counted, and changes nothing. And datagrams go
    /// whole both ways up to the largest IPv4 carries (they were cut to 9 216 bytes).
    func testAUDPAssociationBelongsToItsClientAndCarriesWholeDatagrams() throws {
        let echo = try PythonPeer(PythonPeers.udpEcho())
        defer { echo.stop() }
        let (listener, port) = try proxy(["-v"])
        defer { listener.stop() }
        let script =
            PythonPeers.socksAssociate + """
                port, echo = int(sys.argv[1]), int(sys.argv[2])
                u, c, relay = associate(port)
                u.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
                header = to(echo)
                # Another process of this host, and a stranger (127.0.0.2), send first.
                for source in ['127.0.0.1', '127.0.0.2']:
                    other = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); other.bind((source, 0))
                    other.sendto(header + b'from ' + source.encode(), relay)
                    other.sendto(b'a reply nobody asked for', relay)
                # The client's own datagrams still go, and their answers come back, whole.
                for size in [5, 9217, 65497]:
                    payload = bytes((i * 7) % 251 for i in range(size))
                    u.sendto(header + payload, relay)
                    data, source = u.recvfrom(70000)
                    print(size, source == relay, data[:10] == header, data[10:] == payload, flush=True)
                c.close()
                """
        let r = try Tool.run(["python3", "-c", script, String(port), String(echo.port)], input: "", program: "/usr/bin/env")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "5 True True True\n9217 True True True\n65497 True True True\n")
        waitUntil("the association's end") { listener.stderrText.contains("UDP association closed") }
        XCTAssertTrue(listener.stderrText.contains("3 datagrams to targets, 3 back; 4 dropped"), listener.stderrText)
        XCTAssertTrue(listener.stderrText.contains("neither the client nor a destination it sent to"), listener.stderrText)
    }

    func testIdleTimeoutEndsAnAssociationWhoseDatagramsStopped() throws {
        let echo = try PythonPeer(PythonPeers.udpEcho())
        defer { echo.stop() }
        let (listener, port) = try proxy(["-v", "--idle-timeout", "1s"])
        defer { listener.stop() }
        // Datagrams every 200 ms for 2 s keep it (each is answered, across twice the limit);
        // then silence ends it: the TCP connection closes, and -v says why.
        let script =
            PythonPeers.socksAssociate + """
                import time
                port, echo = int(sys.argv[1]), int(sys.argv[2])
                u, c, relay = associate(port)
                c.settimeout(10)
                header = to(echo)
                answered = 0
                for i in range(10):
                    u.sendto(header + b'%d' % i, relay)
                    answered += u.recvfrom(65536)[0][10:] == b'%d' % i
                    time.sleep(0.2)
                print(answered, flush=True)
                print(repr(c.recv(10)), flush=True)
                """
        let r = try Tool.run(["python3", "-c", script, String(port), String(echo.port)], input: "", program: "/usr/bin/env")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "10\nb''\n", "every datagram answered, then the connection closed by the proxy")
        waitUntil("-v says why") { listener.stderrText.contains("UDP association closed (no datagram either way for 1s, --idle-timeout)") }
        XCTAssertTrue(listener.stderrText.contains("UDP association idle for 1s (--idle-timeout); closed it"), listener.stderrText)
    }
}

/// Reply codes a proxy client can only get from a real network: in a private namespace,
/// 198.19.0.1 has no route (network unreachable, nothing sent), 2001:db8::1 swallows SYNs (the
/// connect times out) and nowhere.test is in no hosts file and no DNS is reachable.
final class ProxyServerNamespaceTests: XCTestCase {
    private static let ask = """
        import socket, sys
        port = int(sys.argv[1])
        def socks(atyp, address, target_port):
            c = socket.create_connection(('198.18.0.1', port)); c.settimeout(10)
            c.sendall(bytes([5, 1, 0])); assert c.recv(2) == bytes([5, 0])
            c.sendall(bytes([5, 1, 0, atyp]) + address + target_port.to_bytes(2, 'big'))
            print('socks5', c.recv(10)[1], flush=True)
        def http(target):
            c = socket.create_connection(('198.18.0.1', port)); c.settimeout(10)
            c.sendall(b'CONNECT ' + target + b' HTTP/1.1\\r\\n\\r\\n')
            print('http', c.recv(100).split(b'\\r\\n')[0].decode(), flush=True)
        socks(1, socket.inet_aton('198.19.0.1'), 80)
        socks(4, socket.inet_pton(socket.AF_INET6, '2001:db8::1'), 80)
        socks(3, bytes([12]) + b'nowhere.test', 80)
        http(b'198.19.0.1:80')
        http(b'[2001:db8::1]:80')
        """

    func testReplyCodesForAnUnreachableNetworkATimeoutAndAnUnknownName() throws {
        try Namespace.scenario(self, setup: NamespaceCommandTests.setup, hosts: NamespaceCommandTests.hosts) {
            let port = freePort()
            let proxy = try Tool(["listen", "--socks5", "--http-proxy", "--allow", "198.18.0.0/24", "--connect-timeout", "500ms", "-v", "198.18.0.1", String(port)])
            defer { proxy.stop() }
            waitForListener(port: port, host: "198.18.0.1")
            let r = try Tool.run(["python3", "-c", ProxyServerNamespaceTests.ask, String(port)], input: "", program: "/usr/bin/env")
            XCTAssertEqual(r.status, 0, r.err)
            XCTAssertEqual(
                r.out.split(separator: "\n").map(String.init),
                ["socks5 3", "socks5 6", "socks5 4", "http HTTP/1.1 502 Bad Gateway", "http HTTP/1.1 504 Gateway Timeout"], proxy.stderrText)
        }
    }
}
