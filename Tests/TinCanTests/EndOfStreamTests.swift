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

    /// The scenario every test here shares: `quiet` half-closed at once (its stdin is empty) and
    /// writes what it receives to `got`; `talker` (run with -vv) sends a line, sees that end of
    /// stream, pauses like a script and sends another. Both lines arrive and both exit 0.
    private func assertTalkerOutlivesTheHalfClose(
        talker: Tool, quiet: Tool, got: String, _ label: String,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        talker.send("first\n")
        waitUntil("\(label): the end of stream at the talker", file: file, line: line) { talker.stderrText.contains("the peer ended its stream") }
        waitUntil("\(label): the first line", file: file, line: line) { fileText(got) == "first\n" }
        pauseLikeAScript()
        talker.send("second\n")
        talker.closeInput()
        XCTAssertEqual(talker.wait(), 0, "\(label): \(talker.stderrText)", file: file, line: line)
        XCTAssertEqual(quiet.wait(), 0, "\(label): \(quiet.stderrText)", file: file, line: line)
        XCTAssertEqual(fileText(got), "first\nsecond\n", label, file: file, line: line)
    }

    /// A tincan listener on a free port with stdout to a file, its stdin already ended.
    private func quietListener(_ extra: [String] = [], got: String) throws -> (Tool, UInt16) {
        let port = freePort()
        let listener = try Tool.tincan(["listen"] + extra + ["127.0.0.1", String(port)], stdoutTo: got)
        listener.closeInput()
        waitForListener(port: port)
        return (listener, port)
    }

    /// The issue's script: `tincan listen PORT </dev/null > got.txt` and
    /// `(echo first; sleep 1; echo second) | tincan connect 127.0.0.1 PORT`.
    func testAListenerWithEmptyStdinGetsWhatTheClientSendsAfterItsHalfClose() throws {
        let got = temporaryFile("listen")
        let (listener, port) = try quietListener(got: got)
        defer { listener.stop() }
        let client = try Tool(["connect", "-vv", "127.0.0.1", String(port)])
        defer { client.stop() }
        assertTalkerOutlivesTheHalfClose(talker: client, quiet: listener, got: got, "plain")
    }

    /// The same over TLS: the listener's close_notify comes at once, the client keeps sending.
    func testOverTLSTheClientKeepsSendingAfterTheServersCloseNotify() throws {
        let got = temporaryFile("tls")
        let (listener, port) = try quietListener(["--tls"], got: got)
        defer { listener.stop() }
        let client = try Tool(["tls", "-vv", "--insecure", "127.0.0.1", String(port)])
        defer { client.stop() }
        assertTalkerOutlivesTheHalfClose(talker: client, quiet: listener, got: got, "TLS")
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
        assertTalkerOutlivesTheHalfClose(talker: listener, quiet: client, got: got, "listener talks")
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
            assertTalkerOutlivesTheHalfClose(talker: client, quiet: server, got: got, peer.name)
        }
    }

    /// A peer that closed its socket entirely cannot take what stdin sends later: exit 1, said so.
    func testSendingToAPeerThatClosedCompletelyIsAFailure() throws {
        let server = try PythonPeer(
            PythonPeers.listenPrelude + """
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
        let server = try PythonPeer(
            PythonPeers.listenPrelude + """
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
    private func sender(_ bytes: Int) throws -> PythonPeer {
        try PythonPeer(
            PythonPeers.listenPrelude + """
                while True:
                    c, _ = s.accept(); c.sendall(b'x' * \(bytes)); c.close()
                """)
    }

    func testAFullDiskOnStdoutIsNamedAndFails() throws {
        let server = try sender(200_000)
        defer { server.stop() }
        // Spliced (a plain socket) and copied (--hex shows the data on the way, on stderr).
        for extra in [[], ["--hex"]] {
            let tool = try Tool(
                ["-c", #"exec "$0" "$@" < /dev/null > /dev/full"#, Tool.tincan, "connect"] + extra
                    + ["127.0.0.1", String(server.port)], program: "/bin/sh")
            XCTAssertEqual(tool.wait(), 1, "\(extra)")
            let last = tool.stderrText.split(separator: "\n").last ?? ""
            XCTAssertTrue(last.contains("writing to stdout failed: no space left on device"), "\(extra): \(last)")
        }
    }

    /// A keep-open hub whose stdout fails stops with exit 1, naming it.
    func testAHubWhoseStdoutFailsSaysSoAndFails() throws {
        let port = freePort()
        let hub = try Tool(["-c", #"exec "$0" listen -k 127.0.0.1 "$1" > /dev/full"#, Tool.tincan, String(port)], program: "/bin/sh")
        defer { hub.stop() }
        waitForListener(port: port)
        let client = try Tool(["connect", "127.0.0.1", String(port)])
        defer { client.stop() }
        client.send("a line for the hub's stdout\n")
        XCTAssertEqual(hub.wait(), 1, hub.stderrText)
        XCTAssertTrue(hub.stderrText.contains("writing to stdout failed: no space left on device"), hub.stderrText)
    }

    /// A keep-open hub whose stdin cannot be read (a directory) says so, not taking it for an
    /// end, and its clients go on as after one.
    func testAHubWhoseStdinFailsSaysSoAndServesItsClients() throws {
        let (hub, port) = try Tool.server(program: "/bin/sh") { [#"-c"#, #"exec "$0" listen -k 127.0.0.1 "$1" < /"#, Tool.tincan, String($0)] }
        defer { hub.stop() }
        waitUntil("the hub says why stdin is gone") { hub.stderrText.contains("reading stdin failed: is a directory; the clients go on without it") }
        let client = try Tool(["connect", "127.0.0.1", String(port)])
        defer { client.stop() }
        client.send("still heard\n")
        waitUntil("the client's line on the hub's stdout") { hub.stdoutText == "still heard\n" }
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
        let r = try Tool(
            [
                "-c", #"{ "$0" connect 127.0.0.1 "$1" < /dev/null; echo $? > "$2"; } | head -c 5 > /dev/null"#,
                Tool.tincan, String(server.port), status,
            ], program: "/bin/sh")
        XCTAssertEqual(r.wait(), 0)
        XCTAssertEqual(fileText(status), "1\n")
        XCTAssertTrue(r.stderrText.contains("writing to stdout failed: its reader closed it"), r.stderrText)
    }

    /// `-w` as nc has it: after stdin ended, a silent server ends the session (exit 0).
    func testWaitEndsASilentSessionAfterStdinEnded() throws {
        let server = try PythonPeer(
            PythonPeers.listenPrelude + """
                c, _ = s.accept(); c.sendall(b'hello\\n'); time.sleep(60)
                """)
        defer { server.stop() }
        let r = try Tool.run(["connect", "-v", "-w", "300ms", "127.0.0.1", String(server.port)], timeout: .seconds(20))
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "hello\n")
        XCTAssertTrue(r.err.contains("nothing arrived for the -w time after end of input"), r.err)
    }
}
