import Foundation
import SocketCore
import TestSupport
import XCTest

/// Runs the built `tincan` binary (or any program) with bounded waits.
final class Tool: @unchecked Sendable {
    /// `.build/debug/tincan`, next to this test bundle.
    static let tincan: String = {
        let bundle = try! FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        return URL(fileURLWithPath: bundle).deletingLastPathComponent().appendingPathComponent("tincan").path
    }()

    let process = Process()
    private let stdoutPipe = Pipe()
    private let stderrPipe = Pipe()
    private let stdinPipe: Pipe?
    private let outData = Locked(Data())
    private let errData = Locked(Data())
    private let collected = DispatchGroup()

    /// Starts `arguments` (the tincan binary unless `program` is given). `stdin`: a file path,
    /// or nil for a pipe the test writes to (``send(_:)``, ``closeInput()``).
    init(_ arguments: [String], program: String = Tool.tincan, stdinFile: String? = nil, environment: [String: String]? = nil) throws {
        // A program that exited early must fail the test, not kill the test process with
        // SIGPIPE when the test writes to its stdin.
        _ = Glibc.signal(SIGPIPE, SIG_IGN)
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        if let stdinFile {
            process.standardInput = FileHandle(forReadingAtPath: stdinFile)
            stdinPipe = nil
        } else {
            let pipe = Pipe()
            process.standardInput = pipe
            stdinPipe = pipe
        }
        if let environment { process.environment = environment }
        process.standardOutput = stdoutPipe
        process.standardError = stderrPipe
        try process.run()
        collect(stdoutPipe, stdout: true)
        collect(stderrPipe, stdout: false)
    }

    private func collect(_ pipe: Pipe, stdout: Bool) {
        collected.enter()
        let handle = pipe.fileHandleForReading
        // Appended as it arrives, so a test can wait for a line while the program runs.
        Thread { [self] in
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                if stdout { outData.withLock { $0.append(data) } } else { errData.withLock { $0.append(data) } }
            }
            collected.leave()
        }.start()
    }

    func send(_ text: String) { send(Data(text.utf8)) }
    func send(_ data: Data) { try? stdinPipe?.fileHandleForWriting.write(contentsOf: data) }
    func closeInput() { try? stdinPipe?.fileHandleForWriting.close() }

    /// Waits for the process to end (at most `timeout`, then kills it and fails).
    @discardableResult
    func wait(timeout: Duration = .seconds(30), file: StaticString = #filePath, line: UInt = #line) -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning && ContinuousClock.now < deadline { usleep(2_000) }
        if process.isRunning {
            XCTFail("\(process.arguments ?? []) still running after \(timeout); killing it", file: file, line: line)
            kill(process.processIdentifier, SIGKILL)
        }
        process.waitUntilExit()
        _ = collected.wait(timeout: .now() + 10)
        checkForSanitizerReports(file: file, line: line)
        return process.terminationStatus
    }

    /// Under `scripts/sanitize` (TINCAN_SANITIZER set) a sanitizer's report on stderr fails the
    /// test that ran the program, whatever its exit status.
    private func checkForSanitizerReports(file: StaticString, line: UInt) {
        guard let sanitizer = ProcessInfo.processInfo.environment["TINCAN_SANITIZER"] else { return }
        let err = stderrText
        for marker in ["ThreadSanitizer:", "AddressSanitizer:", "LeakSanitizer:", "UndefinedBehaviorSanitizer:", "runtime error:"] where err.contains(marker) {
            XCTFail("\(sanitizer) sanitizer report from \(process.arguments ?? []):\n\(err.suffix(4000))", file: file, line: line)
            return
        }
    }

    func signal(_ number: Int32) { kill(process.processIdentifier, number) }

    var stdout: Data { outData.withLock { $0 } }
    var stdoutText: String { String(decoding: stdout, as: UTF8.self) }
    var stderrText: String { String(decoding: errData.withLock { $0 }, as: UTF8.self) }

    /// Stops it if still running (for defers).
    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// Runs to completion and fails the test unless it exited 0: its stdout.
    static func output(
        _ arguments: [String], input: String? = nil, timeout: Duration = .seconds(30),
        file: StaticString = #filePath, line: UInt = #line
    ) throws -> String {
        let r = try run(arguments, input: input, timeout: timeout, file: file, line: line)
        XCTAssertEqual(r.status, 0, "\(arguments): \(r.err)", file: file, line: line)
        return r.out
    }

    /// curl with `arguments` (silent, errors shown, at most `timeout` seconds), run to
    /// completion: status, stdout, stderr.
    static func curl(
        _ arguments: [String], timeout seconds: Int = 10, file: StaticString = #filePath, line: UInt = #line
    ) throws -> (status: Int32, out: String, err: String) {
        try run(["-sS", "--max-time", String(seconds)] + arguments, input: "", program: "/usr/bin/curl", file: file, line: line)
    }

    /// Runs to completion: status, stdout, stderr.
    static func run(
        _ arguments: [String], input: String? = nil, timeout: Duration = .seconds(30), environment: [String: String]? = nil,
        program: String = Tool.tincan,
        file: StaticString = #filePath, line: UInt = #line
    ) throws -> (status: Int32, out: String, err: String) {
        let tool = try Tool(arguments, program: program, environment: environment)
        if let input { tool.send(input) }
        tool.closeInput()
        let status = tool.wait(timeout: timeout, file: file, line: line)
        return (status, tool.stdoutText, tool.stderrText)
    }
}

/// The children of process `pid` (found by their PPid, whichever thread spawned them) and the
/// state of each (`S`, `R`, `Z` for a zombie nobody reaped...).
func childProcesses(of pid: Int32) -> [(pid: Int32, state: String)] {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap { entry -> (Int32, String)? in
        guard let child = Int32(entry) else { return nil }
        let status = procText("/proc/\(child)/status").split(separator: "\n")
        func field(_ name: String) -> String? {
            status.first { $0.hasPrefix(name + ":") }.map { $0.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces) }
        }
        guard field("PPid") == String(pid) else { return nil }
        return (child, String(field("State")?.prefix(1) ?? "?"))
    }
}

extension Tool {
    /// Runs tincan with `arguments`, its stdout going to the file `path` (so a test can watch
    /// what arrived while it runs) and stdin a pipe the test writes to.
    static func tincan(_ arguments: [String], stdoutTo path: String) throws -> Tool {
        try Tool(["-c", #"out="$1"; shift; exec "$0" "$@" > "$out""#, Tool.tincan, path] + arguments, program: "/bin/sh")
    }
}

/// Polls `condition` until it holds, at most `timeout`; fails the test if it never does.
func waitUntil(
    _ what: String, timeout: Duration = .seconds(10), file: StaticString = #filePath, line: UInt = #line,
    _ condition: () -> Bool
) {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        guard ContinuousClock.now < deadline else {
            XCTFail("timed out waiting for \(what)", file: file, line: line)
            return
        }
        usleep(5_000)
    }
}

/// How many descriptors process `pid` holds open (-1 if it is gone).
func openDescriptors(_ pid: Int32) -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
}

/// The text of a file, or "" if there is none (yet).
func fileText(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }

/// Sends `chunks` x 64 MiB of random bytes from `cat | tincan SEND...` to `tincan LISTEN... |
/// openssl dgst -sha256` (the CPU's SHA instructions: coreutils' sha256sum is ten times slower) on
/// 127.0.0.1:`port` and fails unless both digests are equal.
func assertBulkTransfer(
    chunks: Int, port: UInt16, listen: [String], send: [String], waitFor sendPort: UInt16? = nil,
    file: StaticString = #filePath, line: UInt = #line
) throws {
    let dir = "/dev/shm/tincan-bulk-\(getpid())-\(port)"
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    // Both sides' stderr is kept (a sanitizer's report fails the test) and both exit codes count.
    let script = """
        set -e
        trap 'cat \(dir)/listen.err \(dir)/send.err >&2 2>/dev/null || true' EXIT
        head -c 67108864 /dev/urandom > \(dir)/chunk
        files=""; for i in $(seq \(chunks)); do files="$files \(dir)/chunk"; done
        { set +e; "$0" \(listen.joined(separator: " ")) < /dev/null 2>\(dir)/listen.err; echo $? > \(dir)/listen.status; } | openssl dgst -sha256 > \(dir)/received &
        reader=$!
        for i in $(seq 500); do grep -qi ":$(printf '%04X' \(port)) 00000000:0000 0A" /proc/net/tcp && break; sleep 0.01; done
        for i in $(seq 500); do grep -qi ":$(printf '%04X' \(sendPort ?? port)) 00000000:0000 0A" /proc/net/tcp && break; sleep 0.01; done
        cat $files | "$0" \(send.joined(separator: " ")) 2>\(dir)/send.err
        wait $reader
        test "$(cat \(dir)/listen.status)" = 0 || { echo "the listener exited with $(cat \(dir)/listen.status)" >&2; exit 1; }
        cat $files | openssl dgst -sha256 > \(dir)/sent
        cmp \(dir)/sent \(dir)/received
        """
    let tool = try Tool(["-c", script, Tool.tincan], program: "/bin/sh")
    tool.closeInput()
    XCTAssertEqual(tool.wait(timeout: .seconds(240), file: file, line: line), 0, "digests differ or a side failed: \(tool.stderrText)", file: file, line: line)
}

/// Waits until a UDP socket is bound to `port` (a receiver just started), from /proc/net/udp
/// and udp6.
func waitForUDPReceiver(port: UInt16, timeout: Duration = .seconds(10), file: StaticString = #filePath, line: UInt = #line) {
    let wanted = String(port, radix: 16, uppercase: true)
    let suffix = ":" + String(repeating: "0", count: 4 - wanted.count) + wanted
    waitUntil("a UDP socket on port \(port)", timeout: timeout, file: file, line: line) {
        ["/proc/net/udp", "/proc/net/udp6"].contains { table in
            procText(table).split(separator: "\n").dropFirst().contains { row in
                let fields = row.split(separator: " ")
                return fields.count > 1 && fields[1].hasSuffix(suffix)
            }
        }
    }
}

/// A UDP port on loopback that was free a moment ago.
func freeUDPPort() -> UInt16 {
    let fd = socket(AF_INET6, Int32(SOCK_DGRAM.rawValue), 0)
    defer { close(fd) }
    var a = sockaddr_in6()
    a.sin6_family = sa_family_t(AF_INET6)
    var length = socklen_t(MemoryLayout<sockaddr_in6>.size)
    _ = withUnsafeMutablePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
    _ = withUnsafeMutablePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
    return UInt16(bigEndian: a.sin6_port)
}

/// A python3 UDP server on 127.0.0.1 that answers each datagram `data` from `peer` with the
/// statements in `reply` (python, indented by the caller's text); ready when bound.
func pythonUDPServer(reply: String) throws -> (Tool, UInt16) {
    let port = freeUDPPort()
    let body = reply.split(separator: "\n").map { "    " + $0 }.joined(separator: "\n")
    let server = try Tool(
        [
            "python3", "-u", "-c",
            """
            import socket, sys
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(("127.0.0.1", int(sys.argv[1])))
            while True:
                data, peer = s.recvfrom(65535)
            \(body)
            """, String(port),
        ], program: "/usr/bin/env")
    waitForUDPReceiver(port: port)
    return (server, port)
}

extension Tool {
    /// `tincan listen -v ARGUMENTS HOST 0`: a listener on a port the kernel chose for it (so no
    /// other process can hold it), ready once it says where it listens: the tool and the port.
    static func listener(
        _ arguments: [String], host: String = "127.0.0.1", timeout: Duration = .seconds(10),
        file: StaticString = #filePath, line: UInt = #line
    ) throws -> (Tool, UInt16) {
        let tool = try Tool(["listen", "-v"] + arguments + [host, "0"])
        var port: UInt16?
        waitUntil("the listener's port", timeout: timeout, file: file, line: line) {
            guard let range = tool.stderrText.range(of: "listening on ") else { return !tool.process.isRunning }
            let rest = tool.stderrText[range.upperBound...].prefix { $0 != "\n" }
            port = rest.split(separator: ":").last.flatMap { UInt16($0.prefix { $0.isNumber }) }  // -v, or a --json note
            return port != nil
        }
        guard let port else {
            tool.stop()
            throw Listeners.Failure(reason: "no port from the listener: \(tool.stderrText)")
        }
        return (tool, port)
    }
}

extension Tool {
    /// Starts a server that binds port 0 (its arguments say so) and prints the port it got as its
    /// first line of stdout: the tool and that port, once printed.
    static func server(
        _ arguments: [String], program: String = "/usr/bin/env", timeout: Duration = .seconds(10),
        file: StaticString = #filePath, line: UInt = #line
    ) throws -> (Tool, UInt16) {
        let tool = try Tool(arguments, program: program)
        waitUntil("the server's port", timeout: timeout, file: file, line: line) { tool.stdoutText.contains("\n") || !tool.process.isRunning }
        guard let port = tool.stdoutText.split(separator: "\n").first.flatMap({ UInt16($0) }) else {
            tool.stop()
            throw Listeners.Failure(reason: "no port from \(arguments.prefix(3)): \(tool.stderrText)")
        }
        return (tool, port)
    }
}

extension Tool {
    /// Starts a server that takes its port as an argument (`arguments(port)`) on a port of its
    /// own: ready once it listens there itself; if another process took the port first, or the
    /// server ended at start, it is started again on another (three tries).
    static func server(
        program: String, file: StaticString = #filePath, line: UInt = #line,
        _ arguments: (UInt16) -> [String]
    ) throws -> (Tool, UInt16) {
        var last = Listeners.Readiness.timedOut
        for _ in 0..<3 {
            let port = freePort()
            let tool = try Tool(arguments(port), program: program)
            last = Listeners.wait(pid: tool.process.processIdentifier, isRunning: { tool.process.isRunning }, ports: [port])
            if last == .ready { return (tool, port) }
            tool.stop()
        }
        XCTFail("\(program) did not listen on a port of its own (\(last))", file: file, line: line)
        throw Listeners.Failure(reason: "\(last)")
    }
}
