import Foundation
import TestSupport
import XCTest

/// `connect --raw` in a real terminal (tmux) against `listen --pty`: the remote shell sees a
/// terminal of the local window's size that follows resizes, Ctrl-C reaches the remote program,
/// full-screen programs draw, `~.` quits, and however the session ends the local terminal's
/// modes are as they were.
final class RawTerminalTests: XCTestCase {
    /// A tmux server of the test's own (its own socket), killed at the end.
    private final class Tmux {
        let socket = "tincan-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let dir: String

        init(_ test: XCTestCase) throws {
            dir = FileManager.default.temporaryDirectory.appendingPathComponent(socket).path
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            test.addTeardownBlock { [socket, dir] in
                if let tmux = try? Spawned(["/usr/bin/tmux", "-L", socket, "kill-server"]) {
                    let deadline = ContinuousClock.now + .seconds(10)
                    while tmux.isRunning && ContinuousClock.now < deadline { usleep(2_000) }
                    tmux.stop()
                }
                try? FileManager.default.removeItem(atPath: dir)
            }
        }

        /// Runs a tmux command; its output. Started with posix_spawn (``Spawned``): the server
        /// that `new-session` starts stays behind, and Foundation's Process would wait for it.
        @discardableResult
        func run(_ arguments: [String]) throws -> String {
            let output = "\(dir)/tmux-output"
            try? FileManager.default.removeItem(atPath: output)
            let tmux = try Spawned(["/usr/bin/tmux", "-L", socket] + arguments, output: output)
            let deadline = ContinuousClock.now + .seconds(10)
            while tmux.isRunning {
                guard ContinuousClock.now < deadline else {
                    tmux.stop()
                    throw Listeners.Failure(reason: "tmux \(arguments.first ?? "") did not finish in 10 s")
                }
                usleep(2_000)
            }
            return fileText(output)
        }

        /// Starts `command` (sh) in a window of `columns`x`rows`.
        func start(_ command: String, columns: Int = 100, rows: Int = 30) throws {
            try run(["new-session", "-d", "-s", "t", "-x", String(columns), "-y", String(rows), "/bin/sh", "-c", command])
        }

        func keys(_ keys: String...) throws { try run(["send-keys", "-t", "t"] + keys) }
        var screen: String { (try? run(["capture-pane", "-p", "-t", "t"])) ?? "" }
        func file(_ name: String) -> String { fileText("\(dir)/\(name)") }
    }

    /// The client in tmux, wrapped so its pid, exit status and the terminal's modes before and
    /// after are written to files.
    private func startClient(_ tmux: Tmux, port: UInt16, command: String = "connect", extra: String = "") throws {
        let d = tmux.dir
        try tmux.start(
            """
            stty -g > \(d)/before; sh -c 'echo $$ > \(d)/pid; exec \(Tool.tincan) \(command) --raw \(extra) 127.0.0.1 \(port)'; \
            echo $? > \(d)/status; stty -g > \(d)/after; sleep 60
            """)
        waitUntil("the remote prompt") { tmux.screen.contains("remote$") }
    }

    private func shellListener(_ extra: [String] = ["-k"]) throws -> (Tool, UInt16) {
        try Tool.listener(["--pty"] + extra + ["--sh-exec", #"PS1='remote$ ' exec /bin/bash --norc --noprofile -i"#])
    }

    private func assertRestored(_ tmux: Tmux, status expected: String, file: StaticString = #filePath, line: UInt = #line) {
        waitUntil("the client's end", file: file, line: line) { !tmux.file("after").isEmpty }
        XCTAssertEqual(tmux.file("status").trimmingCharacters(in: .whitespacesAndNewlines), expected, tmux.screen, file: file, line: line)
        XCTAssertFalse(tmux.file("before").isEmpty, file: file, line: line)
        XCTAssertEqual(tmux.file("after"), tmux.file("before"), "the terminal's modes are as they were", file: file, line: line)
    }

    func testTheRemoteShellHasThisTerminalsSizeCtrlCAndFullScreenProgramsThenTildeDotQuits() throws {
        let (listener, port) = try shellListener()
        defer { listener.stop() }
        let tmux = try Tmux(self)
        try startClient(tmux, port: port)
        try tmux.keys("stty size; tty", "Enter")
        waitUntil("the size and the terminal") { tmux.screen.contains("30 100") && tmux.screen.contains("/dev/pts/") }
        try tmux.run(["resize-window", "-t", "t", "-x", "120", "-y", "40"])
        // The resize and the keys typed after it reach the client by two roads (SIGWINCH, the
        // terminal): asked again every half second until the answer is the new size.
        var asked = ContinuousClock.now - .seconds(1)
        waitUntil("the new size reaches the remote terminal") {
            if ContinuousClock.now - asked > .milliseconds(500) {
                asked = .now
                try? tmux.keys("clear; stty size", "Enter")
            }
            return tmux.screen.contains("40 120")
        }
        try tmux.keys("sleep 100; echo slept-$((2+3))", "Enter")
        // Ctrl-C before the remote sleep starts would only clear the line.
        waitUntil("the remote sleep") { RawTerminalTests.processRuns(["sleep", "100"]) }
        try tmux.keys("C-c")
        try tmux.keys("echo after-$((6*7))", "Enter")
        waitUntil("the shell, alive after Ctrl-C") { tmux.screen.contains("after-42") }
        XCTAssertFalse(tmux.screen.contains("slept-5"), "Ctrl-C reached the remote sleep: \(tmux.screen)")
        try tmux.keys("top -n 1", "Enter")
        waitUntil("top's screen") { tmux.screen.contains("Tasks:") && tmux.screen.contains("PID") }
        try tmux.keys("Enter", "~", ".")
        assertRestored(tmux, status: "0")
        XCTAssertTrue(listener.process.isRunning, "the -k listener goes on")
    }

    /// Whether a process with exactly these arguments runs.
    private static func processRuns(_ arguments: [String]) -> Bool {
        let wanted = arguments.joined(separator: "\u{0}") + "\u{0}"
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.contains { entry in entry.allSatisfy(\.isNumber) && fileText("/proc/\(entry)/cmdline") == wanted }
    }

    /// `tls --raw` against a one-client `listen --tls --pty`: the remote `exit` ends both ends
    /// cleanly (the client answers the server's close_notify with its own), so both exit 0.
    func testOverTLSBothEndsFinishCleanly() throws {
        let (listener, port) = try shellListener(["--tls"])
        defer { listener.stop() }
        let tmux = try Tmux(self)
        try startClient(tmux, port: port, command: "tls", extra: "--insecure")
        try tmux.keys("stty size", "Enter")
        waitUntil("the size over TLS") { tmux.screen.contains("30 100") }
        try tmux.keys("exit", "Enter")
        assertRestored(tmux, status: "0")
        XCTAssertEqual(listener.wait(), 0, listener.stderrText)
    }

    func testTheTerminalComesBackWhenThePeerEndsTheSession() throws {
        let (listener, port) = try shellListener()
        defer { listener.stop() }
        let tmux = try Tmux(self)
        try startClient(tmux, port: port)
        try tmux.keys("exit", "Enter")
        assertRestored(tmux, status: "0")
    }

    func testTheTerminalComesBackAtSIGTERMAndSIGINTFromOutside() throws {
        let (listener, port) = try shellListener()
        defer { listener.stop() }
        for (signal, status) in [(SIGTERM, "143"), (SIGINT, "130"), (SIGHUP, "129")] {
            let tmux = try Tmux(self)
            try startClient(tmux, port: port)
            waitUntil("the client's pid") { Int32(tmux.file("pid").trimmingCharacters(in: .whitespacesAndNewlines)) != nil }
            kill(Int32(tmux.file("pid").trimmingCharacters(in: .whitespacesAndNewlines))!, signal)
            assertRestored(tmux, status: status)
            try tmux.run(["kill-server"])
        }
    }

    func testTheTerminalComesBackWhenTheRemoteDies() throws {
        let (listener, port) = try shellListener()
        let tmux = try Tmux(self)
        try startClient(tmux, port: port)
        listener.signal(SIGKILL)  // the remote end crashes: its connection is closed by the kernel
        assertRestored(tmux, status: "0")
    }

    func testWithoutTheEscapeTildeDotIsSent() throws {
        let (listener, port) = try shellListener()
        defer { listener.stop() }
        let tmux = try Tmux(self)
        try startClient(tmux, port: port, extra: "--escape none")
        try tmux.keys("Enter", "~", ".", "Enter")  // bash: ~. is a command it cannot find
        waitUntil("the remote shell's answer") { tmux.screen.contains("~.: command not found") }
        try tmux.keys("exit", "Enter")
        assertRestored(tmux, status: "0")
    }

    /// socat's EXEC:...,pty does not ask for the window size: it gets the keystrokes and
    /// nothing else (its first command was `Z\372\377echo ...`, framing bytes typed into bash).
    /// The size still reaches a `tincan --pty` peer, which asks (the test above).
    func testAPeerThatDoesNotAskGetsOnlyTheKeystrokes() throws {
        let port = freePort()
        let socat = try Tool(
            [
                "TCP-LISTEN:\(port),bind=127.0.0.1,reuseaddr", "EXEC:bash --norc --noprofile -i,pty,stderr,setsid,sigint,sane",
            ], program: "/usr/bin/socat", environment: ["PS1": "remote$ ", "PATH": "/usr/bin:/bin"])
        defer { socat.stop() }
        waitForListener(port: port)
        let tmux = try Tmux(self)
        try startClient(tmux, port: port)
        try tmux.keys("echo typed-$((40+2))", "Enter")
        waitUntil("the command's answer") { tmux.screen.contains("\ntyped-42") }
        XCTAssertFalse(tmux.screen.contains("command not found"), tmux.screen)
        try tmux.keys("exit", "Enter")
        assertRestored(tmux, status: "0")
    }
}
