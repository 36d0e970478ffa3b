import Foundation
import TestSupport
import XCTest

/// `--reconnect`: a session the peer ended (FIN) or reset, with every byte acknowledged, is
/// opened again, the --send/--expect script first, and stdin goes on to the new connection
/// without a byte lost or resent; bytes the peer never acknowledged end the run (exit 1).
final class ReconnectTests: XCTestCase {
    /// A server (a Python stub: a real one cannot reset on cue) that, for each connection in
    /// turn, as argv[3] says (comma-separated): `fin` reads two lines, answers "got A+B" and
    /// closes; `rst` reads one line (a --send script's), answers "got A" and resets 200 ms
    /// later (the answer acknowledged first). The connection after those reads to its end.
    /// Each connection's lines are printed as "N: A+B" ("<eof>" for an end).
    private static let server =
        PythonPeers.listenPrelude + """
            import struct
            modes = sys.argv[3].split(',')
            for n in range(1, len(modes) + 2):
                c, _ = s.accept(); f = c.makefile('rb')
                mode = modes[n - 1] if n <= len(modes) else 'last'
                a = f.readline().decode().strip() or '<eof>'
                b = f.readline().decode().strip() or '<eof>' if mode != 'rst' else ''
                print(f'{n}: {a}+{b}', flush=True)
                f.close()  # the file holds the socket open: the close below must be the end
                if mode == 'last':
                    c.close(); break
                c.sendall((f'got {a}+{b}' if b else f'got {a}').encode() + b'\\n')
                if mode == 'rst':
                    time.sleep(0.2)
                    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
                c.close()
            """

    private func start(_ modes: String) throws -> (Tool, UInt16) {
        try Tool.server(["python3", "-u", "-c", ReconnectTests.server, "0", "127.0.0.1", modes])
    }

    /// How many connections `client` (with --json and a --send script) has made and scripted.
    private func scripted(_ client: Tool) -> Int { client.stderrText.components(separatedBy: "\"event\":\"send\"").count - 1 }

    func testEndsAndResetsAreBridgedAndTheScriptRunsOnEachConnection() throws {
        let (server, port) = try start("fin,rst,fin")
        defer { server.stop() }
        let client = try Tool(["connect", "-v", "--json", "--reconnect", "5", "--retry-delay", "50ms", "--send", "HELLO\\n", "127.0.0.1", String(port)])
        defer { client.stop() }
        // A line goes once its connection is up (its script sent), so none goes to a connection
        // that is about to end: connection 2 carries only the script, and is reset.
        waitUntil("connection 1") { self.scripted(client) == 1 }
        client.send("one\n")
        waitUntil("the answer on connection 1") { client.stdoutText.contains("got HELLO+one\n") }
        waitUntil("the reset answer on connection 2") { client.stdoutText.contains("got HELLO\n") }
        waitUntil("connection 3") { self.scripted(client) == 3 }
        client.send("two\n")
        waitUntil("the answer on connection 3") { client.stdoutText.contains("got HELLO+two\n") }
        waitUntil("connection 4") { self.scripted(client) == 4 }
        client.closeInput()
        XCTAssertEqual(client.wait(timeout: .seconds(10)), 0, client.stderrText)
        // The server prints the last connection's line as it sees its end: after the client exits.
        waitUntil("the server's last line") { server.stdoutText.contains("4: ") }
        XCTAssertEqual(server.stdoutText.split(separator: "\n").dropFirst(), ["1: HELLO+one", "2: HELLO+", "3: HELLO+two", "4: HELLO+<eof>"])
        XCTAssertEqual(client.stdoutText, "got HELLO+one\ngot HELLO\ngot HELLO+two\n", "every answer once")
        let events = client.stderrText.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let reconnects = events.filter { $0["event"] as? String == "reconnect" }
        XCTAssertEqual(reconnects.map { $0["reason"] as? String }, ["closed the connection", "reset the connection", "closed the connection"], client.stderrText)
        XCTAssertEqual(reconnects.map { $0["attempt"] as? Double }, [1, 2, 3])
    }

    func testUsedUpReconnectsEndTheRunAndSaySo() throws {
        let (server, port) = try start("fin,fin")
        defer { server.stop() }
        let client = try Tool(["connect", "-v", "--reconnect", "1", "--retry-delay", "50ms", "127.0.0.1", String(port)])
        defer { client.stop() }
        client.send("one\nx\n")
        waitUntil("the reconnect") { client.stderrText.contains("reconnecting (1)") }
        client.send("two\ny\n")  // held until the next connection takes it
        XCTAssertEqual(client.wait(timeout: .seconds(10)), 1, client.stderrText)
        XCTAssertTrue(client.stderrText.contains("closed the connection, and --reconnect 1 is used up; the rest of stdin was not sent"), client.stderrText)
        XCTAssertEqual(client.stdoutText, "got one+x\ngot two+y\n")
    }

    /// A reset after stdin's bytes went to the connection: the peer may not have read them,
    /// and nothing resends them, so the run stops instead of reconnecting.
    func testAResetAfterAnUnansweredLineStopsTheRun() throws {
        let (server, port) = try start("rst")
        defer { server.stop() }
        let client = try Tool(["connect", "--reconnect", "forever", "--retry-delay", "50ms", "127.0.0.1", String(port)])
        defer { client.stop() }
        client.send("one\n")
        waitUntil("the answer") { client.stdoutText == "got one\n" }
        client.send("unread\n")  // the server resets 200 ms after its answer, this unread
        XCTAssertEqual(client.wait(timeout: .seconds(10)), 1, client.stderrText)
        XCTAssertTrue(client.stderrText.contains("after stdin's bytes were sent to it, which a reset may have dropped unread"), client.stderrText)
    }

    /// A peer that stops reading, then resets with what it was sent unread: those bytes are
    /// lost, and --reconnect does not hide it.
    func testBytesNeverAcknowledgedEndTheRun() throws {
        let stall =
            PythonPeers.listenPrelude + """
                c, _ = s.accept()
                c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                time.sleep(1.0)
                import struct
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
                c.close()
                time.sleep(5)
                """
        let (server, port) = try Tool.server(["python3", "-u", "-c", stall, "0"])
        defer { server.stop() }
        let input = String(repeating: "x", count: 8 * 1024 * 1024)
        let run = try Tool.run(["connect", "--reconnect", "forever", "--retry-delay", "50ms", "127.0.0.1", String(port)], input: input)
        XCTAssertEqual(run.status, 1, run.err)
        // However the loss shows first (the reset read, a send refused, or the check of what was
        // acknowledged), the line names it.
        XCTAssertTrue(["a reset may have dropped unread", "were not delivered", "were not acknowledged", "connection reset by peer"].contains { run.err.contains($0) }, run.err)
    }

    func testReconnectRefusesWhatItCannotDo() throws {
        for (arguments, said) in [
            (["connect", "--reconnect", "2", "--exec", "/bin/cat", "127.0.0.1", "9"], "not with --exec"),
            (["connect", "--reconnect", "2", "-u", "127.0.0.1", "9"], "not with -u"),
            (["connect", "--reconnect", "0", "127.0.0.1", "9"], "give a number of reconnects (1 or more) or 'forever'"),
        ] {
            let run = try Tool.run(arguments)
            XCTAssertEqual(run.status, 2, run.err)
            XCTAssertTrue(run.err.contains(said), run.err)
        }
    }
}
