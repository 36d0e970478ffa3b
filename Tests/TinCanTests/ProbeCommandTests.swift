import Foundation
import TestSupport
import XCTest

/// --send/--expect, connect -z, --json and --timing end to end against python3 and openssl peers.
final class ProbeCommandTests: XCTestCase {
    private let certs = TLSFixtures.shared

    /// A python3 SMTP-like server: a 220 greeting, a multi-line 250 reply to EHLO (or `ehloReply`),
    /// 221 to QUIT, then it closes.
    private func smtpServer(ehloReply: String = "250-probe.test hello\\r\\n250-SIZE 1000\\r\\n250 OK\\r\\n") throws -> PythonPeer {
        try PythonPeer(
            """
            import socket, sys
            server = socket.socket()
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind(("127.0.0.1", int(sys.argv[1])))
            server.listen(5); print(server.getsockname()[1], flush=True)
            while True:
                conn, _ = server.accept()
                conn.sendall(b"220 probe.test ESMTP\\r\\n")
                f = conn.makefile("rb")
                for line in f:
                    if line.startswith(b"EHLO"):
                        conn.sendall(b"\(ehloReply)")
                    elif line.startswith(b"QUIT"):
                        conn.sendall(b"221 bye\\r\\n")
                        break
                f.close()
                conn.shutdown(socket.SHUT_RDWR)
                conn.close()
            """)
    }

    func testSMTPDialogueRunsInOrderAndEverythingReceivedReachesStdout() throws {
        let server = try smtpServer()
        defer { server.stop() }
        let r = try Tool.run([
            "connect", "-v", "127.0.0.1", String(server.port), "--expect", "^220", "--send", "EHLO probe\\r\\n",
            "--expect", "^250 ", "--send", "QUIT\\r\\n", "--expect", "^221",
        ])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "220 probe.test ESMTP\r\n250-probe.test hello\r\n250-SIZE 1000\r\n250 OK\r\n221 bye\r\n")
        for line in ["matched --expect '^220'", "sent 12 bytes (--send 'EHLO probe\\r\\n')", "matched --expect '^250 '", "matched --expect '^221'"] {
            XCTAssertTrue(r.err.contains(line), "\(line) in \(r.err)")
        }
    }

    func testAFailedExpectationExitsWith6AndQuotesWhatArrived() throws {
        let server = try smtpServer(ehloReply: "554 go away\\r\\n")
        defer { server.stop() }
        let r = try Tool.run([
            "connect", "--expect", "^220", "--send", "EHLO probe\\r\\n", "--expect", "^250 ",
            "--expect-timeout", "1500ms", "127.0.0.1", String(server.port),
        ])
        XCTAssertEqual(r.status, 6)
        XCTAssertEqual(
            r.err,
            "tincan: --expect '^250 ' failed: nothing matched within 1500ms (--expect-timeout); received since the last match: \" probe.test ESMTP\\r\\n554 go away\\r\\n\"\n")
        XCTAssertEqual(r.out, "220 probe.test ESMTP\r\n554 go away\r\n", "what arrived is on stdout too")

        let closed = try Tool.run(["connect", "--send", "QUIT\\r\\n", "--expect", "^250", "127.0.0.1", String(server.port)])
        XCTAssertEqual(closed.status, 6)
        XCTAssertTrue(
            closed.err.hasPrefix(
                "tincan: --expect '^250' failed: the peer closed the connection first; received since the last match: \"220 probe.test ESMTP\\r\\n221 bye\\r\\n\""), closed.err)
    }

    func testBadScriptArgumentsAreUsageErrors() throws {
        for (arguments, message) in [
            (["connect", "--expect", "([", "127.0.0.1", "9"], "tincan: connect: --expect '([': missing ']' for the '[' here (at offset 1)"),
            (["connect", "--expect", "(a)\\1", "127.0.0.1", "9"], "tincan: connect: --expect '(a)\\1': backreferences are not supported"),
            (["connect", "--send", "\\q", "127.0.0.1", "9"], "tincan: connect: --send: unknown escape '\\q'"),
            (["listen", "-k", "--send", "hi", "9"], "tincan: listen: --send talks to one connection: not with -k"),
            (["udp-send", "--send", "a", "-m", "b", "127.0.0.1", "9"], "tincan: udp-send: --send and --expect replace stdin: not with --message"),
            (["connect", "-z", "127.0.0.1", "80-20"], "tincan: connect: bad port range '80-20': it runs backwards; write 20-80"),
            (
                ["connect", "-z", "127.0.0.1", "22,nosuchservice"],
                "tincan: connect: bad port list '22,nosuchservice': 'nosuchservice' is not a port (1-65535), a range such as 8000-8100 or a service name"
            ),
            (["connect", "--parallel", "5", "127.0.0.1", "9"], "tincan: connect: --parallel needs -z"),
        ] {
            let r = try Tool.run(arguments)
            XCTAssertEqual(r.status, 2, "\(arguments): \(r.err)")
            XCTAssertTrue(r.err.hasPrefix(message), "\(arguments): \(r.err)")
        }
    }

    func testTLSScriptWithJSONEventsAndTiming() throws {
        let port = freePort()
        let server = try Tool(
            [
                "s_server", "-accept", "127.0.0.1:\(port)", "-cert", certs.path("server.pem"),
                "-key", certs.path("server.key"), "-www", "-quiet",
            ], program: "/usr/bin/openssl")
        defer { server.stop() }
        waitForListener(port: port)
        let r = try Tool.run([
            "tls", "--ca", certs.path("ca.pem"), "--json", "--timing", "--send", "GET / HTTP/1.0\\r\\n\\r\\n",
            "--expect", "^HTTP/1.0 200", "localhost", String(port),
        ])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.out.hasPrefix("HTTP/1.0 200 ok"), r.out)
        // s_server's page arrived whole (its last line), so the count below is the real size.
        XCTAssertTrue(r.out.hasSuffix("</pre></BODY></HTML>\r\n\r\n"), String(r.out.suffix(80)))
        // Every line on stderr is a JSON object: the tls command's summary is in the tls event.
        let events = try jsonLines(r.err)
        let names = events.compactMap { $0["event"] as? String }
        XCTAssertEqual(names.filter { $0 != "attempt" && $0 != "resolved" }, ["connected", "tls", "send", "expect", "peer_end", "closed"], r.err)
        XCTAssertTrue(names.contains("resolved") && names.contains("attempt"), r.err)
        let tls = try XCTUnwrap(events.first { $0["event"] as? String == "tls" })
        XCTAssertEqual(tls["protocol"] as? String, "TLSv1.3")
        XCTAssertEqual(tls["verified"] as? Bool, true)
        let chain = try XCTUnwrap(tls["chain"] as? [[String: Any]])
        XCTAssertEqual(chain.first?["subject"] as? String, "CN=localhost")
        XCTAssertEqual(chain.first?["names"] as? [String], ["DNS:localhost", "IP:127.0.0.1", "IP:::1"])
        XCTAssertTrue((tls["pin"] as? String)?.hasPrefix("sha256//") == true, "\(tls)")
        let closed = try XCTUnwrap(events.last)
        XCTAssertEqual(closed["sent"] as? Int, 18)
        XCTAssertEqual(closed["received"] as? Int, r.out.utf8.count)
        XCTAssertEqual(closed["exit"] as? Int, 0)
        for phase in ["dns_ms", "connect_ms", "tls_ms", "first_byte_ms", "total_ms"] {
            XCTAssertNotNil(closed[phase] as? Double, "\(phase) in \(closed)")
        }

        // --timing on its own: one line of prose at the end.
        let timed = try Tool.run(
            [
                "tls", "--ca", certs.path("ca.pem"), "--timing", "--send", "GET / HTTP/1.0\\r\\n\\r\\n",
                "localhost", String(port),
            ], input: "")
        XCTAssertEqual(timed.status, 0, timed.err)
        let timing = try XCTUnwrap(timed.err.split(separator: "\n").last)
        XCTAssertNotNil(
            timing.wholeMatch(of: #/tincan: timing: dns [0-9.]+ ms, connect [0-9.]+ ms, tls [0-9.]+ ms, first byte [0-9.]+ ms, total [0-9.]+ (ms|s), sent 18 B, received \d+ B/#),
            String(timing))
    }

    /// Each line of `text` as a JSON object; fails on any line that is not one.
    private func jsonLines(_ text: String, file: StaticString = #filePath, line: UInt = #line) throws -> [[String: Any]] {
        try text.split(separator: "\n").map {
            try XCTUnwrap(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any], "not JSON: \($0)", file: file, line: line)
        }
    }

    /// With --json, stderr is JSON lines in every command that has it, -v and -vv notes included.
    func testJSONIsPureInEveryCommand() throws {
        let port = freePort()
        let listener = try Tool(["listen", "-vv", "--json", "127.0.0.1", String(port)])
        defer { listener.stop() }
        listener.closeInput()
        waitForListener(port: port)
        let client = try Tool.run(["connect", "-vv", "--json", "127.0.0.1", String(port)], input: "hi\n")
        XCTAssertEqual(client.status, 0, client.err)
        XCTAssertEqual(listener.wait(), 0, listener.stderrText)
        let heard = try jsonLines(listener.stderrText)
        XCTAssertTrue(heard.contains { $0["event"] as? String == "note" }, listener.stderrText)
        let accepted = try XCTUnwrap(heard.first { $0["event"] as? String == "accepted" }, listener.stderrText)
        XCTAssertTrue((accepted["remote"] as? String)?.hasPrefix("127.0.0.1:") == true)
        let closed = try XCTUnwrap(heard.last)
        XCTAssertNotNil(closed["wait_ms"] as? Double, "listen calls its first phase the wait for a client: \(closed)")
        XCTAssertNil(closed["connect_ms"], "\(closed)")
        XCTAssertNotNil(try jsonLines(client.err).first { $0["event"] as? String == "connected" })

        let probe = try Tool.run(["connect", "-z", "-v", "--json", "127.0.0.1", String(freePort())])
        XCTAssertEqual(probe.status, 1)
        XCTAssertEqual(try jsonLines(probe.err).filter { $0["event"] as? String == "port" }.count, 1)

        let (server, udpPort) = try pythonUDPServer(reply: "s.sendto(b'pong', peer)")
        defer { server.stop() }
        let udp = try Tool.run(["udp-send", "-v", "--json", "--send", "ping", "--expect", "pong", "127.0.0.1", String(udpPort)])
        XCTAssertEqual(udp.status, 0, udp.err)
        XCTAssertEqual(try jsonLines(udp.err).compactMap { $0["event"] as? String }.filter { $0 != "note" }, ["send", "expect", "closed"])

        let mixed = try Tool.run(["connect", "--json", "--hex", "127.0.0.1", "9"])
        XCTAssertEqual(mixed.status, 2)
        XCTAssertTrue(mixed.err.contains("--hex writes text on stderr: not with --json"), mixed.err)
    }

    func testJSONReportsAFailureAsAnEventOnly() throws {
        let closedPort = freePort()
        let r = try Tool.run(["connect", "--json", "127.0.0.1", String(closedPort)])
        XCTAssertEqual(r.status, 1)
        let events = try r.err.split(separator: "\n").map { try XCTUnwrap(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any], String($0)) }
        let error = try XCTUnwrap(events.first { $0["event"] as? String == "error" })
        XCTAssertEqual(error["message"] as? String, "connect to 127.0.0.1:\(closedPort) failed: 127.0.0.1:\(closedPort) connection refused")
        XCTAssertEqual(error["exit"] as? Int, 1)
        XCTAssertEqual(events.last?["event"] as? String, "closed")
    }

    func testListenRunsTheScriptOnItsConnection() throws {
        let port = freePort()
        let listener = try Tool(["listen", "--send", "name?\\n", "--expect", "^name: \\w+$", "--send", "ok\\n", "127.0.0.1", String(port)])
        defer { listener.stop() }
        listener.closeInput()
        waitForListener(port: port)
        let client = try Tool(
            [
                "python3", "-c",
                """
                import socket, sys
                s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
                f = s.makefile("rb")
                assert f.readline() == b"name?\\n"
                s.sendall(b"name: bob\\n")
                assert f.readline() == b"ok\\n"
                s.close()
                print("client ok")
                """, String(port),
            ], program: "/usr/bin/env")
        defer { client.stop() }
        XCTAssertEqual(client.wait(), 0, client.stderrText)
        XCTAssertEqual(client.stdoutText, "client ok\n")
        XCTAssertEqual(listener.wait(), 0, listener.stderrText)
        XCTAssertEqual(listener.stdoutText, "name: bob\n")
    }

    func testUDPSendExpectsAMatchingReply() throws {
        let (server, port) = try pythonUDPServer(
            reply: """
                s.sendto(b"noise", peer)
                s.sendto(b"pong " + data, peer)
                """)
        defer { server.stop() }
        let ok = try Tool.run(["udp-send", "--send", "ping", "--expect", "^pong ping$", "--send", "again", "--expect", "again", "127.0.0.1", String(port)])
        XCTAssertEqual(ok.status, 0, ok.err)
        XCTAssertEqual(ok.out, "noisepong pingnoisepong again", "every reply is printed, matching or not")
        let bad = try Tool.run(["udp-send", "--send", "ping", "--expect", "^pang", "--expect-timeout", "1500ms", "127.0.0.1", String(port)])
        XCTAssertEqual(bad.status, 6)
        XCTAssertEqual(bad.err, "tincan: --expect '^pang' failed: no matching reply from 127.0.0.1:\(port) within 1500ms (--expect-timeout); last reply \"pong ping\"\n")
        let refused = try Tool.run(["udp-send", "--send", "ping", "--expect", "x", "127.0.0.1", String(freeUDPPort())])
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.err.contains("refused the datagrams"), refused.err)
    }

    func testPortProbesReportOpenAndClosedInOrder() throws {
        let open = try PythonPeer(
            """
            import socket, sys
            s = socket.socket()
            s.bind(("127.0.0.1", int(sys.argv[1])))
            s.listen(50); print(s.getsockname()[1], flush=True)
            while True:
                c, _ = s.accept()
                c.close()
            """)
        defer { open.stop() }
        let closed = freePort()
        let r = try Tool.run(["connect", "-z", "-v", "-4", "127.0.0.1", "\(closed),\(open.port)"])
        XCTAssertEqual(r.status, 0, r.err)
        let lines = r.out.split(separator: "\n").map { $0.split(separator: " ").prefix(3).joined(separator: " ") }
        XCTAssertEqual(lines, ["127.0.0.1 \(closed) closed", "127.0.0.1 \(open.port) open"], r.out)
        XCTAssertNotNil(r.out.split(separator: "\n").first?.wholeMatch(of: #/127\.0\.0\.1 \d+ closed [0-9.]+ ms/#))

        let none = try Tool.run(["connect", "-z", "--json", "127.0.0.1", "\(closed)"])
        XCTAssertEqual(none.status, 1)
        let events = none.err.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let port = try XCTUnwrap(events.first { $0["event"] as? String == "port" })
        XCTAssertEqual(port["state"] as? String, "closed")
        XCTAssertEqual(port["port"] as? Int, Int(closed))
        XCTAssertEqual(events.first { $0["event"] as? String == "error" }?["message"] as? String, "no open port among 1 on 127.0.0.1")

        // A range, probed concurrently, one line each in order.
        let base = Int(closed)
        let range = "\(max(1, base - 20))-\(base)"
        let many = try Tool.run(["connect", "-z", "-v", "--parallel", "8", "127.0.0.1", range + ",\(open.port)"])
        XCTAssertEqual(many.status, 0, many.err)
        let ports = many.out.split(separator: "\n").compactMap { Int($0.split(separator: " ")[1]) }
        XCTAssertEqual(ports, Array(max(1, base - 20)...base) + [Int(open.port)])

        // As nc -z: without -v only the open ports, and several port arguments, names among them.
        let quiet = try Tool.run(["connect", "-z", "127.0.0.1", range, String(open.port), "ssh"])
        XCTAssertEqual(quiet.status, 0, quiet.err)
        XCTAssertEqual(
            quiet.out.split(separator: "\n").map { $0.split(separator: " ").prefix(3).joined(separator: " ") },
            ["127.0.0.1 \(open.port) open"])
        let one = try Tool.run(["connect", "-z", "127.0.0.1:\(open.port)"])
        XCTAssertEqual(one.status, 0, one.err)
        XCTAssertTrue(one.out.hasPrefix("127.0.0.1 \(open.port) open "), one.out)
    }
}

/// `--expect` on hostile input: one pass over the bytes, and --expect-timeout always wins.
final class ExpectBoundsTests: XCTestCase {
    /// A server that sends `count` bytes of `byte`, then `tail`, and keeps the connection open.
    private func flood(_ count: Int, _ byte: String, tail: String = "") throws -> PythonPeer {
        try PythonPeer(
            PythonPeers.listenPrelude + """
                c, _ = s.accept(); c.sendall(b'\(byte)' * \(count) + b'\(tail)'); time.sleep(60)
                """)
    }

    func testALongLineThatNeverMatchesEndsAtTheExpectTimeout() throws {
        let server = try flood(100_000, "A")
        defer { server.stop() }
        let r = try Tool.run(
            ["connect", "--expect", "A+B", "--expect-timeout", "1s", "127.0.0.1", String(server.port)],
            timeout: .seconds(20))
        XCTAssertEqual(r.status, 6, r.err)
        XCTAssertEqual(r.out.count, 100_000, "everything received went to stdout")
        XCTAssertTrue(r.err.hasPrefix("tincan: --expect 'A+B' failed: nothing matched within 1s (--expect-timeout); received since the last match: ...\"AAAA"), r.err)
    }

    func testALongLineMatchesAtItsEnd() throws {
        let server = try flood(20_000, "x", tail: " OK\\n")
        defer { server.stop() }
        let r = try Tool.run(["connect", "-v", "-q", "0", "--expect", ".*OK", "127.0.0.1", String(server.port)], input: "", timeout: .seconds(20))
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.err.contains("matched --expect '.*OK'"), r.err)
        XCTAssertEqual(r.out.count, 20_004)
    }

    func testListenExpectIsBoundedToo() throws {
        let port = freePort()
        let listener = try Tool(["listen", "--expect", "(A|A)*B", "--expect-timeout", "1s", "127.0.0.1", String(port)])
        defer { listener.stop() }
        waitForListener(port: port)
        let client = try Tool(
            [
                "python3", "-c",
                """
                import socket, sys, time
                c = socket.create_connection(('127.0.0.1', int(sys.argv[1]))); c.sendall(b'A' * 100000); time.sleep(30)
                """, String(port),
            ], program: "/usr/bin/env")
        defer { client.stop() }
        XCTAssertEqual(listener.wait(timeout: .seconds(20)), 6, listener.stderrText)
        XCTAssertEqual(listener.stdout.count, 100_000)
    }
}
