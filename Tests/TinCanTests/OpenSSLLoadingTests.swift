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
