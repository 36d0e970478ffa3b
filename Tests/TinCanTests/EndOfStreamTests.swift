import Foundation
import TestSupport
import XCTest

/// The netcat contract, end to end: a peer's end of stream is a half-close, so what stdin still
/// has is sent (after a pause too), and every way bytes can fail to arrive ends with a non-zero
/// exit and the reason named.
final class EndOfStreamTests: XCTestCase {
    /// The pause of the scenario, a script busy between two lines (`echo first; sleep 1; echo
    /// second`): part of the input, not a wait for an event. Longer than any grace a relay might
    /// give a quiet stdin after the peer's end of stream.
    private func pauseLikeAScript() { Thread.sleep(forTimeInterval: 1) }

    private func temporaryFile(_ name: String) -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-eos-\(getpid())-\(name)").path
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        return path
    }

    /// The issue's script: `tincan listen PORT </dev/null > got.txt` and
    /// `(echo first; sleep 1; echo second) | tincan connect 127.0.0.1 PORT`.
    func testAListenerWithEmptyStdinGetsWhatTheClientSendsAfterItsHalfClose() throws {
        let port = freePort()
        let got = temporaryFile("listen")
        let listener = try Tool.tincan(["listen", "127.0.0.1", String(port)], stdoutTo: got)
        defer { listener.stop() }
        listener.closeInput()
        waitForListener(port: port)
        let client = try Tool(["connect", "-vv", "127.0.0.1", String(port)])
        defer { client.stop() }
        client.send("first\n")
        waitUntil("the listener's end of stream at the client") { client.stderrText.contains("the peer ended its stream") }
        waitUntil("the first line at the listener") { fileText(got) == "first\n" }
        pauseLikeAScript()
        client.send("second\n")
        client.closeInput()
        XCTAssertEqual(client.wait(), 0, client.stderrText)
        XCTAssertEqual(listener.wait(), 0, listener.stderrText)
        XCTAssertEqual(fileText(got), "first\nsecond\n")
    }

    /// The same over TLS: the listener's close_notify comes at once, the client keeps sending.
    func testOverTLSTheClientKeepsSendingAfterTheServersCloseNotify() throws {
        let port = freePort()
        let got = temporaryFile("tls")
        let listener = try Tool.tincan(["listen", "--tls", "127.0.0.1", String(port)], stdoutTo: got)
        defer { listener.stop() }
        listener.closeInput()
        waitForListener(port: port)
        let client = try Tool(["tls", "-vv", "--insecure", "127.0.0.1", String(port)])
        defer { client.stop() }
        client.send("first\n")
        waitUntil("the listener's close_notify at the client") { client.stderrText.contains("the peer ended its stream") }
        waitUntil("the first line at the listener") { fileText(got) == "first\n" }
        pauseLikeAScript()
        client.send("second\n")
        client.closeInput()
        XCTAssertEqual(client.wait(), 0, client.stderrText)
        XCTAssertEqual(listener.wait(), 0, listener.stderrText)
        XCTAssertEqual(fileText(got), "first\nsecond\n")
    }

    /// The other way round: the client's stdin is empty, the server pauses between lines.
    func testAClientWithEmptyStdinGetsWhatTheServerSendsAfterItsHalfClose() throws {
        let port = freePort()
        let got = temporaryFile("connect")
        let listener = try Tool(["listen", "-vv", "127.0.0.1", String(port)])
        defer { listener.stop() }
        waitForListener(port: port)
        let client = try Tool.tincan(["connect", "127.0.0.1", String(port)], stdoutTo: got)
        defer { client.stop() }
        client.closeInput()
        listener.send("first\n")
        waitUntil("the client's end of stream at the listener") { listener.stderrText.contains("the peer ended its stream") }
        waitUntil("the first line at the client") { fileText(got) == "first\n" }
        pauseLikeAScript()
        listener.send("second\n")
        listener.closeInput()
        XCTAssertEqual(listener.wait(), 0, listener.stderrText)
        XCTAssertEqual(client.wait(), 0, client.stderrText)
        XCTAssertEqual(fileText(got), "first\nsecond\n")
    }

    /// Real peers that half-close at once (their stdin is empty) and keep reading.
    func testOpenBSDNcAndSocatHalfClosingFirstStillGetEverything() throws {
        let peers: [(name: String, command: String)] = [
            ("nc -N", #"exec nc -N -l 127.0.0.1 "$1" < /dev/null > "$2""#),
            ("socat", #"exec socat -t 30 TCP-LISTEN:"$1",bind=127.0.0.1,reuseaddr STDIO < /dev/null > "$2""#),
        ]
        for peer in peers {
            let port = freePort()
            let got = temporaryFile(peer.name)
            let server = try Tool(["-c", peer.command, "sh", String(port), got], program: "/bin/sh")
            defer { server.stop() }
            waitForListener(port: port)
            let client = try Tool(["connect", "-vv", "127.0.0.1", String(port)])
            defer { client.stop() }
            client.send("first\n")
            waitUntil("\(peer.name)'s end of stream at the client") { client.stderrText.contains("the peer ended its stream") }
            waitUntil("the first line at \(peer.name)") { fileText(got) == "first\n" }
            pauseLikeAScript()
            client.send("second\n")
            client.closeInput()
            XCTAssertEqual(client.wait(), 0, "\(peer.name): \(client.stderrText)")
            XCTAssertEqual(server.wait(), 0, "\(peer.name): \(server.stderrText)")
            XCTAssertEqual(fileText(got), "first\nsecond\n", peer.name)
        }
    }

    /// A peer that closed its socket entirely cannot take what stdin sends later: exit 1, said so.
    func testSendingToAPeerThatClosedCompletelyIsAFailure() throws {
        let server = try Python(PythonPeers.listenPrelude + """
            c, _ = s.accept(); c.sendall(b'220 banner\\r\\n'); c.close(); time.sleep(30)
            """)
        defer { server.stop() }
        let client = try Tool(["connect", "-vv", "127.0.0.1", String(server.port)])
        defer { client.stop() }
        waitUntil("the banner server's close") { client.stderrText.contains("the peer ended its stream") }
        client.send("late\n")
        client.closeInput()
        XCTAssertEqual(client.wait(), 1, client.stderrText)
        XCTAssertEqual(client.stdoutText, "220 banner\r\n")
        XCTAssertTrue(client.stderrText.contains("the peer did not take everything sent (broken pipe)"), client.stderrText)
    }

    /// ... but if stdin ends without more to send, the session simply ends well.
    func testAPeerThatClosesFirstThenStdinEndingIsSuccess() throws {
        let server = try Python(PythonPeers.listenPrelude + """
            c, _ = s.accept(); c.sendall(b'220 banner\\r\\n'); c.close(); time.sleep(30)
            """)
        defer { server.stop() }
        let client = try Tool(["connect", "-vv", "127.0.0.1", String(server.port)])
        defer { client.stop() }
        waitUntil("the banner server's close") { client.stderrText.contains("the peer ended its stream") }
        client.closeInput()
        XCTAssertEqual(client.wait(), 0, client.stderrText)
        XCTAssertEqual(client.stdoutText, "220 banner\r\n")
    }

    /// A server sending `bytes` then closing, for the stdout tests.
    private func sender(_ bytes: Int) throws -> Python {
        try Python(PythonPeers.listenPrelude + """
            while True:
                c, _ = s.accept(); c.sendall(b'x' * \(bytes)); c.close()
            """)
    }

    func testAFullDiskOnStdoutIsNamedAndFails() throws {
        let server = try sender(200_000)
        defer { server.stop() }
        // Spliced (a plain socket) and copied (--hex shows the data on the way, on stderr).
        for extra in [[], ["--hex"]] {
            let tool = try Tool(["-c", #"exec "$0" "$@" < /dev/null > /dev/full"#, Tool.tincan, "connect"] + extra
                                + ["127.0.0.1", String(server.port)], program: "/bin/sh")
            XCTAssertEqual(tool.wait(), 1, "\(extra)")
            let last = tool.stderrText.split(separator: "\n").last ?? ""
            XCTAssertTrue(last.contains("writing to stdout failed: no space left on device"), "\(extra): \(last)")
        }
    }

    func testAClosedStdoutIsReportedNotSilent() throws {
        let server = try sender(1000)
        defer { server.stop() }
        let r = try Tool(["-c", #"exec "$0" connect 127.0.0.1 "$1" < /dev/null >&-"#, Tool.tincan, String(server.port)], program: "/bin/sh")
        XCTAssertEqual(r.wait(), 1)
        XCTAssertTrue(r.stderrText.contains("writing to stdout failed: stdout is not open"), r.stderrText)
    }

    func testAReaderThatLeavesIsAFailureNotSuccess() throws {
        let server = try sender(10_000_000)
        defer { server.stop() }
        let status = temporaryFile("status")
        let r = try Tool(["-c", #"{ "$0" connect 127.0.0.1 "$1" < /dev/null; echo $? > "$2"; } | head -c 5 > /dev/null"#,
                          Tool.tincan, String(server.port), status], program: "/bin/sh")
        XCTAssertEqual(r.wait(), 0)
        XCTAssertEqual(fileText(status), "1\n")
        XCTAssertTrue(r.stderrText.contains("writing to stdout failed: its reader closed it"), r.stderrText)
    }

    /// `-w` as nc has it: after stdin ended, a silent server ends the session (exit 0).
    func testWaitEndsASilentSessionAfterStdinEnded() throws {
        let server = try Python(PythonPeers.listenPrelude + """
            c, _ = s.accept(); c.sendall(b'hello\\n'); time.sleep(60)
            """)
        defer { server.stop() }
        let r = try Tool.run(["connect", "-v", "-w", "300ms", "127.0.0.1", String(server.port)], timeout: .seconds(20))
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "hello\n")
        XCTAssertTrue(r.err.contains("nothing arrived for the -w time after end of input"), r.err)
    }
}
