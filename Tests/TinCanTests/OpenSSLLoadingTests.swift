import Foundation
import TestSupport
import XCTest

/// OpenSSL is loaded when TLS is first used, not when tincan starts (COpenSSL/loader.c).
final class OpenSSLLoadingTests: XCTestCase {
    /// The environment with the dynamic loader reporting every library it opens on stderr.
    private var tracingLoads: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["LD_DEBUG"] = "files"
        return environment
    }

    func testPlainCommandsDoNotLoadOpenSSLAndTLSDoes() throws {
        let closed = freePort()
        let plain = try Tool(["connect", "127.0.0.1", String(closed)], environment: tracingLoads)
        plain.closeInput()
        XCTAssertEqual(plain.wait(), 1)
        XCTAssertTrue(plain.stderrText.contains("file=libc.so"), "LD_DEBUG did not trace: \(plain.stderrText.prefix(500))")
        XCTAssertFalse(plain.stderrText.contains("libssl"), "a plain connect loaded OpenSSL")

        let port = freePort()
        let listener = try Tool(["listen", "--tls", "127.0.0.1", String(port)], environment: tracingLoads)
        defer { listener.stop() }
        listener.closeInput()
        waitForListener(port: port)
        let client = try Tool(["tls", "--insecure", "127.0.0.1", String(port)], environment: tracingLoads)
        client.send("over TLS\n")
        client.closeInput()
        XCTAssertEqual(client.wait(), 0, client.stderrText)
        XCTAssertEqual(listener.wait(), 0)
        XCTAssertEqual(listener.stdoutText, "over TLS\n")
        XCTAssertTrue(client.stderrText.contains("file=libssl.so"), "the client did not load libssl")
        XCTAssertTrue(listener.stderrText.contains("file=libssl.so"), "the listener did not load libssl")
    }

    /// OpenSSL's atexit cleanup would free its global state while threads are still ending
    /// (a thread's OpenSSL destructor then walks freed memory: a `tls` client crashed so as it
    /// exited, once, under load). The loader initialises OpenSSL without it: a TLS client run
    /// to its end under gdb never reaches OPENSSL_cleanup.
    func testOpenSSLIsNotCleanedUpAtExitUnderRunningThreads() throws {
        // gdb itself sometimes fails under load ("internal-error: wait returned unexpected
        // status", gdb 13): such a run says nothing of tincan, and is run again.
        for attempt in 1...3 {
            let (listener, port) = try Tool.listener(["--tls"])
            defer { listener.stop() }
            listener.closeInput()
            let output = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-gdb-\(getpid())-\(attempt)").path
            defer { try? FileManager.default.removeItem(atPath: output) }
            // posix_spawn (Spawned): gdb waits for its inferior with signals a test runner's
            // threads may block.
            let gdb = try Spawned(
                [
                    "/usr/bin/gdb", "-batch", "-ex", "set breakpoint pending on", "-ex", "break OPENSSL_cleanup", "-ex", "run", "--args",
                    Tool.tincan, "tls", "--insecure", "--send", "over TLS\\n", "127.0.0.1", String(port),
                ], output: output, errors: output)
            defer { gdb.stop() }
            waitUntil("gdb and its client to end", timeout: .seconds(60)) { !gdb.isRunning }
            let said = fileText(output)
            if said.contains("internal-error") && attempt < 3 { continue }
            XCTAssertTrue(said.contains("exited normally"), "the client ran to its end under gdb: \(said)")
            XCTAssertFalse(said.contains("Breakpoint 1,"), "OPENSSL_cleanup ran at exit: \(said)")
            XCTAssertEqual(listener.wait(), 0, listener.stderrText)
            XCTAssertEqual(listener.stdoutText, "over TLS\n")
            return
        }
    }

    func testTLSWithoutALoadableOpenSSLFailsWithOneClearLine() throws {
        guard getuid() == 0 else { throw Namespace.unavailable("hiding libssl in a mount namespace needs root") }
        let candidates = ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"]
            .map { $0 + "/libssl.so.3" }
        guard let library = candidates.first(where: { FileManager.default.fileExists(atPath: $0) }) else {
            throw Namespace.unavailable("libssl.so.3 not found in the usual places")
        }
        // In a private mount namespace, an empty file stands where libssl was. Both sides fail
        // the same way: one line, exit 1 (the machine lacks something; the arguments are fine).
        // The client's peer, a plain listener, accepts: `tls` gets as far as its handshake.
        let port = freePort()
        let peer = try Tool(["listen", "127.0.0.1", String(port)])
        defer { peer.stop() }
        waitForListener(port: port)
        for command in ["listen --tls 127.0.0.1 0", "tls --insecure 127.0.0.1 \(port)"] {
            let script = "mount --bind /dev/null \"$(realpath \"$1\")\" && exec \"$0\" \(command)"
            let r = try Tool(["--mount", "sh", "-c", script, Tool.tincan, library], program: "/usr/bin/unshare")
            r.closeInput()
            let status = r.wait()
            XCTAssertEqual(status, 1, "\(command): \(r.stderrText)")
            let lines = r.stderrText.split(separator: "\n")
            XCTAssertEqual(lines.count, 1, r.stderrText)
            XCTAssertTrue(r.stderrText.hasPrefix("tincan: TLS unavailable: cannot load OpenSSL: "), r.stderrText)
            XCTAssertTrue(r.stderrText.contains("install libssl3"), r.stderrText)
        }
    }
}
