import Foundation
import TestSupport
import XCTest

final class ConnectCommandTests: XCTestCase {
    func testFetchesAPageFromPythonHTTPServer() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-http-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let page = String(repeating: "tincan page line\n", count: 2000)
        try page.write(to: dir.appendingPathComponent("index.txt"), atomically: true, encoding: .utf8)
        let port = freePort()
        let server = try Tool(
            ["python3", "-m", "http.server", String(port), "--bind", "127.0.0.1", "--directory", dir.path],
            program: "/usr/bin/env")
        defer { server.stop() }
        waitForListener(port: port)
        let r = try Tool.run(["connect", "-v", "127.0.0.1", String(port)], input: "GET /index.txt HTTP/1.0\r\n\r\n")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.out.hasPrefix("HTTP/1.0 200 OK\r\n"), String(r.out.prefix(100)))
        XCTAssertTrue(r.out.hasSuffix("\r\n\r\n" + page), "the body arrives whole")
        // -v talks on stderr only; stdout carries only data.
        XCTAssertTrue(r.err.contains("tincan: trying 127.0.0.1:\(port)"), r.err)
        XCTAssertTrue(r.err.contains("connected"), r.err)
        XCTAssertFalse(r.out.contains("tincan:"))
    }

    func testHalfCloseLetsThePeerAnswerAfterOurEOF() throws {
        // The peer answers only once it has read our whole input (it waits for end of stream).
        let peer = try PythonPeer(PythonPeers.sha256AfterEOF)
        defer { peer.stop() }
        let input = String(repeating: "0123456789abcdef", count: 65536)  // 1 MiB
        let r = try Tool.run(["connect", "-vv", "127.0.0.1", String(peer.port)], input: input)
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.err.contains("tincan: end of input: sent end of stream (sent 1048576 bytes)"), r.err)
        XCTAssertTrue(r.err.contains("tincan: the peer ended its stream (received 73 bytes)"), r.err)
        let sum = try Tool([], program: "/usr/bin/sha256sum")
        sum.send(input)
        sum.closeInput()
        sum.wait()
        let digest = String(sum.stdoutText.prefix(64))
        XCTAssertEqual(r.out, "1048576 \(digest)\n")
    }

    func testNoShutdownKeepsTheConnectionOpen() throws {
        // The peer reports whether it saw our end of stream within 1.5 s, then closes.
        let peer = try PythonPeer(
            PythonPeers.listenPrelude + """
                for _ in range(2):
                    c, _ = s.accept(); c.settimeout(1.5); data = b''
                    try:
                        while True:
                            b = c.recv(100)
                            if not b: break
                            data += b
                        c.sendall(b'saw-eof ' + data)
                    except socket.timeout:
                        c.sendall(b'no-eof ' + data)
                    c.close()
                """)
        defer { peer.stop() }
        let normal = try Tool.run(["connect", "127.0.0.1", String(peer.port)], input: "x")
        XCTAssertEqual(normal.out, "saw-eof x")
        let kept = try Tool.run(["connect", "--no-shutdown", "127.0.0.1", String(peer.port)], input: "y")
        XCTAssertEqual(kept.out, "no-eof y")
        XCTAssertEqual(kept.status, 0)
    }

    func testQuitAfterEOFWithASilentPeer() throws {
        let peer = try PythonPeer(
            PythonPeers.listenPrelude + """
                c, _ = s.accept(); c.sendall(b'hello\\n'); time.sleep(30)
                """)
        defer { peer.stop() }
        // stdin ends once the greeting is out: then -q ends the session the peer would keep.
        let tool = try Tool(["connect", "-q", "300ms", "-v", "127.0.0.1", String(peer.port)])
        defer { tool.stop() }
        waitUntil("the greeting") { tool.stdoutText == "hello\n" }
        tool.closeInput()
        XCTAssertEqual(tool.wait(timeout: .seconds(20)), 0, tool.stderrText)
        XCTAssertEqual(tool.stdoutText, "hello\n", "what arrived before quitting is on stdout")
        XCTAssertTrue(tool.stderrText.contains("quit after end of input"), tool.stderrText)
    }

    func testIdleTimeoutExitsWithCode3() throws {
        let peer = try PythonPeer(
            PythonPeers.listenPrelude + """
                c, _ = s.accept(); c.sendall(b'partial'); time.sleep(30)
                """)
        defer { peer.stop() }
        let tool = try Tool(["connect", "--idle-timeout", "300ms", "127.0.0.1", String(peer.port)])
        // stdin stays open: only the idle timer can end this.
        let status = tool.wait(timeout: .seconds(10))
        tool.closeInput()
        XCTAssertEqual(status, 3, tool.stderrText)
        XCTAssertEqual(tool.stdoutText, "partial")
        XCTAssertTrue(tool.stderrText.contains("idle for 300ms (--idle-timeout)"), tool.stderrText)
    }

    func testCRLFAndHexDump() throws {
        let peer = try PythonPeer(
            PythonPeers.listenPrelude + """
                c, _ = s.accept(); data = b''
                while True:
                    b = c.recv(100)
                    if not b: break
                    data += b
                c.sendall(repr(data).encode()); c.close()
                """)
        defer { peer.stop() }
        let r = try Tool.run(["connect", "--crlf", "--hex", "127.0.0.1", String(peer.port)], input: "EHLO a\nQUIT\r\n")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "b'EHLO a\\r\\nQUIT\\r\\n'", "LF became CRLF; CRLF stayed")
        XCTAssertTrue(r.err.contains("> 00000000  45 48 4c 4f 20 61 0d 0a  51 55 49 54 0d 0a        |EHLO a..QUIT..|"), r.err)
        XCTAssertTrue(r.err.contains("< 00000000  62 27 45 48"), r.err)
    }

    func testForcedProgressReportsOnStderr() throws {
        let peer = try PythonPeer(
            PythonPeers.listenPrelude + """
                c, _ = s.accept(); c.sendall(b'z' * 300000); c.close()
                """)
        defer { peer.stop() }
        let r = try Tool.run(["connect", "--force-progress", "127.0.0.1", String(peer.port)], input: "")
        // Without --force-progress, --progress stays quiet when stderr is not a terminal.
        let quietPeer = try PythonPeer(
            PythonPeers.listenPrelude + """
                c, _ = s.accept(); c.sendall(b'z' * 1000); c.close()
                """)
        defer { quietPeer.stop() }
        let quiet = try Tool.run(["connect", "--progress", "127.0.0.1", String(quietPeer.port)], input: "")
        XCTAssertEqual(quiet.out.count, 1000)
        XCTAssertEqual(quiet.err, "", "no progress line on a non-terminal stderr")
        XCTAssertEqual(r.out.count, 300000)
        XCTAssertTrue(r.err.contains("< 292.9 KiB"), r.err)
        XCTAssertTrue(r.err.hasSuffix("/s\n"), r.err)
    }

    func testBadInputGetsOneLineAndExitCode2() throws {
        let cases: [([String], String)] = [
            (["connect", "--verbos", "h", "1"], "did you mean '--verbose'?"),
            (["connect", "127.0.0.1"], "missing PORT after '127.0.0.1'"),
            (["connect"], "missing HOST and PORT"),
            (["connect", "127.0.0.1", "nosuchservice"], "bad port 'nosuchservice': no TCP service named 'nosuchservice' in /etc/services"),
            (["connect", "127.0.0.1", "8.0"], "bad port '8.0': port '8.0' is not a number or a service name"),
            (["connect", "127.0.0.1", "0"], "bad port '0': ports run from 1 to 65535; 0 is only for listening"),
            (["connect", "127.0.0.1", "70000"], "bad port '70000': ports run from 1 to 65535"),
            (["connect", "127.0.0.1:0"], "bad port '0': ports run from 1 to 65535"),
            (["connect", "127.0.0.1:80", "81"], "'127.0.0.1:80' already names a port"),
            (["connect", "[::1", "80"], "bad host '[::1'"),
            (["connect", "::1"], "missing PORT after '::1'"),
            (["connect", "--unix", "/tmp/" + String(repeating: "x", count: 120)], "the limit is 107"),
            (["connect", "-4", "-6", "h", "1"], "-4 and -6 exclude each other"),
            (["connect", "--interface", "nosuchif0", "h", "1"], "no network interface named 'nosuchif0'"),
            (["frobnicate"], "unknown command 'frobnicate'"),
        ]
        for (arguments, message) in cases {
            let r = try Tool.run(arguments)
            XCTAssertEqual(r.status, 2, "\(arguments): \(r.err)")
            XCTAssertTrue(r.err.contains(message), "\(arguments): \(r.err)")
            XCTAssertEqual(r.err.filter { $0 == "\n" }.count, 1, "one line: \(r.err)")
            XCTAssertFalse(r.err.contains("Fatal error"), r.err)
        }
    }

    /// `[::1] PORT`, `HOST:PORT` and `[IPv6]:PORT` as one argument, and service names.
    func testAddressesAsPeopleWriteThem() throws {
        let port = freePort()
        let echo = try Tool(["listen", "-k", "--exec", "/bin/cat", String(port)])
        defer { echo.stop() }
        waitForListener(port: port)
        for (index, arguments) in [["[::1]", String(port)], ["127.0.0.1:\(port)"], ["[::1]:\(port)"], ["localhost:\(port)"]].enumerated() {
            let r = try Tool.run(["connect", "-v"] + arguments, input: "form \(index)\n")
            XCTAssertEqual(r.status, 0, "\(arguments): \(r.err)")
            XCTAssertEqual(r.out, "form \(index)\n", "\(arguments)")
        }
        // Service names from /etc/services, wherever a port is taken.
        let named = try Tool.run(["connect", "-z", "-v", "-w", "1s", "127.0.0.1", "http,smtp", "https"])
        XCTAssertEqual(named.out.split(separator: "\n").map { String($0.split(separator: " ")[1]) }, ["80", "25", "443"], named.out)
        let udp = try Tool.run(["udp-send", "-v", "-m", "x", "127.0.0.1", "domain"])
        XCTAssertTrue(udp.err.contains("sent 1 bytes to 127.0.0.1:53"), udp.err)
    }

    func testRefusedConnectionExitsWithCode1AndNamesTheAddress() throws {
        let port = freePort()
        let r = try Tool.run(["connect", "127.0.0.1", String(port)])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.err, "tincan: connect to 127.0.0.1:\(port) failed: 127.0.0.1:\(port) connection refused\n")
    }

    func testVersionAndHelp() throws {
        let v = try Tool.run(["--version"])
        XCTAssertEqual(v.status, 0)
        XCTAssertTrue(v.out.hasPrefix("tincan "))
        for arguments in [["--help"], ["help", "connect"], ["connect", "--help"], ["listen", "-h"]] {
            let r = try Tool.run(arguments)
            XCTAssertEqual(r.status, 0, "\(arguments)")
            XCTAssertTrue(r.out.contains("usage:"), "\(arguments)")
        }
    }
}

final class SignalTests: XCTestCase {
    func testSIGTERMEndsConnectWith143AndKeepsWhatArrived() throws {
        let peer = try PythonPeer(
            PythonPeers.listenPrelude + """
                c, _ = s.accept(); c.sendall(b'first part\\n'); time.sleep(30)
                """)
        defer { peer.stop() }
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-sig-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        let tool = try Tool.tincan(["connect", "127.0.0.1", String(peer.port)], stdoutTo: output)
        waitUntil("the first part on stdout") { fileText(output) == "first part\n" }
        tool.signal(SIGTERM)
        XCTAssertEqual(tool.wait(), 128 + SIGTERM)
        XCTAssertEqual(try String(contentsOfFile: output, encoding: .utf8), "first part\n")
    }

    /// SIGUSR1's statistics count a connection made on the quick road (a numeric host, no -v)
    /// as they count any other, over TLS too.
    func testSIGUSR1CountsAConnectionToANumericHost() throws {
        for tls in [false, true] {
            let (listener, port) = try Tool.listener(tls ? ["--tls"] : [])
            defer { listener.stop() }
            let client = try Tool((tls ? ["tls", "--insecure"] : ["connect"]) + ["127.0.0.1", String(port)])
            defer { client.stop() }
            waitUntil("the listener's client") { listener.stderrText.contains("connection from 127.0.0.1") }
            client.send("counted\n")
            waitUntil("the line across") { listener.stdoutText == "counted\n" }
            client.signal(SIGUSR1)
            waitUntil("the statistics (tls: \(tls))") { client.stderrText.contains("statistics: 1 connection,") }
            client.closeInput()
            listener.closeInput()
            XCTAssertEqual(client.wait(), 0, client.stderrText)
        }
    }
}
