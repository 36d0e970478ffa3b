import Foundation
import TestSupport
import XCTest

/// `--pty`: the program of `--exec`/`--sh-exec` on a pseudo-terminal of its own, on listen (one
/// client, -k, TLS) and connect, with clients that are not terminals: what the program sees,
/// the window size framing, its last line, and its exit status.
final class PtyExecTests: XCTestCase {
    private let certs = TLSFixtures.shared

    /// A python client: connects, and for each step waits until what arrived contains its
    /// text, then sends its bytes; then reads until the server closes, keeping its own end open
    /// (a half-close would be the terminal's end of file), and prints what arrived after the
    /// session's question for the window size (it fails without one).
    private func pythonClient(port: UInt16, steps: [(waitFor: String, send: [UInt8])] = [], runs: Int = 1, tls: Bool = false) throws -> Tool {
        let plan = steps.map { "\($0.waitFor.utf8.map { String(format: "%02x", $0) }.joined()):\($0.send.map { String(format: "%02x", $0) }.joined())" }
        return try Tool(
            [
                "python3", "-c",
                """
                import socket, ssl, sys
                port, runs, tls = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
                steps = [tuple(bytes.fromhex(x) for x in step.split(":")) for step in sys.argv[4:]]
                for _ in range(runs):
                    s = socket.create_connection(("127.0.0.1", port), timeout=20)
                    if tls:
                        ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
                        s = ctx.wrap_socket(s)
                    got = b""
                    for wait, data in steps:
                        while wait not in got:
                            b = s.recv(65536)
                            if not b: break
                            got += b
                        s.sendall(data)
                    while True:
                        b = s.recv(65536)
                        if not b: break
                        got += b
                    # The session opens by asking for the window size (IAC DO NAWS), as telnet's.
                    if not got.startswith(b"\\xff\\xfd\\x1f"): sys.exit("the session did not ask for the window size: %r" % got[:10])
                    sys.stdout.write(got[3:].decode("utf-8", "replace") + "\\n--end--\\n"); sys.stdout.flush()
                    s.close()
                """, String(port), String(runs), tls ? "1" : "0",
            ] + plan, program: "/usr/bin/env")
    }

    func testTheProgramHasATerminalItsSizeTermAndItsExitStatus() throws {
        let (listener, port) = try Tool.listener([
            "--pty", "--pty-size", "132x43", "--pty-term", "vt220",
            "--sh-exec", "tty; stty size; echo TERM=$TERM; test -t 0 && test -t 2 && echo all-terminals; exit 3",
        ])
        defer { listener.stop() }
        let client = try pythonClient(port: port)
        XCTAssertEqual(client.wait(), 0, client.stderrText)
        let out = client.stdoutText
        XCTAssertTrue(out.contains("/dev/pts/"), out)
        XCTAssertTrue(out.contains("43 132\r\n"), "the size given, and ONLCR on: \(out)")
        XCTAssertTrue(out.contains("TERM=vt220"), out)
        XCTAssertTrue(out.contains("all-terminals"), out)
        XCTAssertEqual(listener.wait(), 1, "the program's failure is tincan's")
        XCTAssertTrue(listener.stderrText.contains("exited with status 3"), listener.stderrText)
    }

    func testAFramedClientsWindowSizeReachesTheProgramAndItsBytesArriveWhole() throws {
        let (listener, port) = try Tool.listener(["--pty", "--sh-exec", "stty raw -echo; echo ready; head -c 4 | od -An -tx1; stty size; head -c 1 >/dev/null; stty size"])
        defer { listener.stop() }
        // The opening, a size, four bytes with a 255 doubled; then a new size and one byte:
        // the program reads exactly its bytes, and each size in turn.
        let first: [UInt8] = [255, 251, 31, 255, 250, 31, 0, 100, 0, 30, 255, 240] + [65, 255, 255, 66, 13]
        let second: [UInt8] = [255, 250, 31, 0, 120, 0, 40, 255, 240, 46]
        let client = try pythonClient(port: port, steps: [("ready", first), ("30 100", second)])
        XCTAssertEqual(client.wait(), 0, client.stderrText)
        let lines = client.stdoutText.split(whereSeparator: { $0 == "\n" || $0 == "\r" }).map { $0.trimmingCharacters(in: .whitespaces) }
        XCTAssertEqual(Array(lines.prefix(4)), ["ready", "41 ff 42 0d", "30 100", "40 120"], client.stdoutText)
        XCTAssertEqual(listener.wait(), 0, listener.stderrText)
    }

    func testAClientWithoutTheFramingTypesIntoTheProgramUntouched() throws {
        let (listener, port) = try Tool.listener(["--pty", "--sh-exec", "stty raw -echo; echo ready; head -c 5 | od -An -tx1"])
        defer { listener.stop() }
        let client = try pythonClient(port: port, steps: [("ready", [255, 251, 32, 65, 66])])
        XCTAssertEqual(client.wait(), 0, client.stderrText)
        XCTAssertTrue(client.stdoutText.contains("ff fb 20 41 42"), client.stdoutText)
        XCTAssertEqual(listener.wait(), 0, listener.stderrText)
    }

    /// The last line a program prints as it exits arrives, every time; and a hundred sessions
    /// leave the listener holding no more descriptors than it did before them.
    func testTheLastLineArrivesEveryTime() throws {
        let (listener, port) = try Tool.listener(["-k", "-v", "--pty", "--sh-exec", "seq 1 200 | tr '\\n' ' '; echo; echo the-last-line"])
        defer { listener.stop() }
        let pid = listener.process.processIdentifier
        let before = openDescriptors(pid)
        let client = try pythonClient(port: port, runs: 100)
        XCTAssertEqual(client.wait(timeout: .seconds(120)), 0, client.stderrText)
        let runs = client.stdoutText.components(separatedBy: "--end--").dropLast()
        XCTAssertEqual(runs.count, 100)
        let cut = runs.first(where: { !$0.contains("the-last-line") }) ?? ""
        XCTAssertEqual(runs.filter { $0.contains("199 200 \r\nthe-last-line\r\n") }.count, 100, "\(cut.debugDescription)\n\(listener.stderrText)")
        // Each session's program is reaped and its descriptors closed once its client is gone.
        waitUntil("the sessions' descriptors closed (\(before) before them)") { openDescriptors(pid) <= before + 2 }
    }

    /// The peer's end does not end the session: a program that ignores the hang-up and writes
    /// 2.5 s later still reaches the client, whole, and both ends exit 0.
    func testAProgramThatWritesLongAfterThePeersEndIsHeard() throws {
        let (listener, port) = try Tool.listener(["--pty", "--sh-exec", "trap '' HUP; echo ready; sleep 2.5; echo the-late-line"])
        defer { listener.stop() }
        let client = try Tool(
            [
                "python3", "-c",
                """
                import socket, sys
                s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
                got = b""
                while b"ready" not in got:
                    b = s.recv(65536)
                    if not b: break
                    got += b
                s.shutdown(socket.SHUT_WR)
                while True:
                    b = s.recv(65536)
                    if not b: break
                    got += b
                sys.stdout.write(got.decode("utf-8", "replace"))
                """, String(port),
            ], program: "/usr/bin/env")
        XCTAssertEqual(client.wait(), 0, client.stderrText)
        XCTAssertTrue(client.stdoutText.hasSuffix("ready\r\nthe-late-line\r\n"), client.stdoutText.debugDescription)
        XCTAssertEqual(listener.wait(), 0, listener.stderrText)
    }

    /// The peer's end of stream is the terminal's end of file, as Ctrl-D typed after what it
    /// sent: the program reads every line first (a hang-up beat bash to piped commands, which
    /// never ran, and the client exited 0). A session cut by a reset hangs the terminal up.
    func testThePeersEndIsTheTerminalsEndOfFileAndACutHangsItUp() throws {
        let program = "trap 'echo hung-up >&2; exit 7' HUP; echo ready; read line; echo \"got $line\"; read more || { echo 'end of file'; exit 5; }"
        let (listener, port) = try Tool.listener(["--pty", "--sh-exec", program])
        defer { listener.stop() }
        let client = try Tool(["connect", "127.0.0.1", String(port)])
        waitUntil("the program's first line") { client.stdoutText.contains("ready") }
        client.send("first\nsecond without its newline")
        client.closeInput()
        XCTAssertEqual(listener.wait(), 1, listener.stderrText)
        XCTAssertTrue(listener.stderrText.contains("exited with status 5"), listener.stderrText)
        _ = client.wait()
        XCTAssertTrue(client.stdoutText.contains("got first\r\n"), client.stdoutText.debugDescription)
        XCTAssertTrue(client.stdoutText.contains("end of file\r\n"), client.stdoutText.debugDescription)

        let hungUp = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-pty-hup-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: hungUp) }
        let (cut, cutPort) = try Tool.listener(["--pty", "--sh-exec", "trap 'touch \(hungUp); exit 7' HUP; echo ready; while :; do sleep 0.1; done"])
        defer { cut.stop() }
        let resetter = """
            import socket, struct, sys
            c = socket.create_connection(('127.0.0.1', int(sys.argv[1]))); got = b''
            while b'ready' not in got: got += c.recv(100)
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0)); c.close()
            """
        XCTAssertEqual(try Tool.run(["python3", "-c", resetter, String(cutPort)], input: "", program: "/usr/bin/env").status, 0)
        XCTAssertEqual(cut.wait(), 1, cut.stderrText)
        XCTAssertTrue(cut.stderrText.contains("the connection failed: connection reset by peer"), cut.stderrText)
        waitUntil("the program hung up") { FileManager.default.fileExists(atPath: hungUp) }
    }

    /// `printf 'cmd\n' | tincan connect` to an interactive bash on a terminal runs the command
    /// and ends as the shell does at Ctrl-D (socat's EXEC:...,pty and ssh -tt run it too).
    func testCommandsPipedIntoAnInteractiveShellRun() throws {
        let marker = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-pty-mark-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: marker) }
        let (listener, port) = try Tool.listener(["--pty", "--exec", "/bin/bash --norc --noprofile -i"])
        defer { listener.stop() }
        let client = try Tool.run(["connect", "127.0.0.1", String(port)], input: "echo MARK > \(marker)\necho done-\(getpid())\n", timeout: .seconds(20))
        XCTAssertEqual(client.status, 0, client.err)
        XCTAssertEqual(fileText(marker), "MARK\n", client.out.debugDescription)
        XCTAssertTrue(client.out.contains("done-\(getpid())\r\n"), client.out.debugDescription)
        XCTAssertEqual(listener.wait(), 0, listener.stderrText)
    }

    /// TLS and -k: 20 sessions at once, each on a terminal of its own.
    func testTwentyTLSSessionsAtOnceEachOnItsOwnTerminal() throws {
        // Each program holds its terminal until all twenty run (at most 30 s): twenty at once.
        let running = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-pty-\(getpid())").path
        try FileManager.default.createDirectory(atPath: running, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: running) }
        let (listener, port) = try Tool.listener([
            "-k", "--tls", "--cert", certs.path("server.pem"), "--key", certs.path("server.key"),
            "--pty", "--sh-exec", "tty; touch \(running)/$$; n=0; while [ $(ls \(running) | wc -l) -lt 20 ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done",
        ])
        defer { listener.stop() }
        let clients = try (0..<20).map { _ in try pythonClient(port: port, tls: true) }
        var terminals = Set<String>()
        for client in clients {
            XCTAssertEqual(client.wait(timeout: .seconds(60)), 0, client.stderrText)
            let line = client.stdoutText.split(separator: "\r\n").first.map(String.init) ?? ""
            XCTAssertTrue(line.hasPrefix("/dev/pts/"), client.stdoutText)
            terminals.insert(line)
        }
        XCTAssertEqual(terminals.count, 20, "each session its own terminal, all at once: \(terminals)")
    }

    func testConnectRunsTheProgramOnATerminalToo() throws {
        let (server, port) = try Tool.server([
            "python3", "-c",
            """
            import socket
            s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1); print(s.getsockname()[1], flush=True)
            c, _ = s.accept(); got = b""
            while True:
                b = c.recv(4096)
                if not b: break
                got += b
            print(got.decode(), flush=True)
            """,
        ])
        defer { server.stop() }
        let r = try Tool.run(["connect", "--pty", "--sh-exec", "tty; stty size", "127.0.0.1", String(port)])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(server.wait(), 0)
        XCTAssertTrue(server.stdoutText.contains("/dev/pts/") && server.stdoutText.contains("24 80"), server.stdoutText)
    }
}
