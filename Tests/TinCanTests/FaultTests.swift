import Foundation
import TestSupport
import XCTest

/// Faults from the peer: each ends with its exit code and one clear line, within its timeout,
/// and nothing already received is lost from stdout.
final class FaultTests: XCTestCase {
    func testAResetMidTransferKeepsWhatArrivedAndExitsWith1() throws {
        let server = try PythonPeer(
            """
            import socket, struct, sys
            s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1); print(s.getsockname()[1], flush=True)
            c, _ = s.accept()
            c.sendall(b"x" * 100000)
            c.recv(1)  # wait for the client's first byte: all 100000 were read by then
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.close()
            """)
        defer { server.stop() }
        let tool = try Tool(["connect", "127.0.0.1", String(server.port)])
        defer { tool.stop() }
        // The server resets only after our byte, which it reads after sending its 100000.
        tool.send("!")
        XCTAssertEqual(tool.wait(timeout: .seconds(20)), 1, tool.stderrText)
        XCTAssertEqual(tool.stdout.count, 100000, "everything received before the reset is on stdout")
        XCTAssertTrue(tool.stderrText.contains("connection reset by peer"), tool.stderrText)
    }

    func testAServerThatClosesDuringTheTLSHandshakeIsAClearFailure() throws {
        let server = try PythonPeer(
            """
            import socket, sys
            s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(5); print(s.getsockname()[1], flush=True)
            while True:
                c, _ = s.accept(); c.recv(100); c.close()
            """)
        defer { server.stop() }
        let r = try Tool.run(["tls", "-w", "10s", "127.0.0.1", String(server.port)])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertEqual(r.err.split(separator: "\n").count, 1, r.err)
        XCTAssertTrue(r.err.hasPrefix("tincan: "), r.err)
        XCTAssertTrue(r.err.hasPrefix("tincan: TLS handshake with 127.0.0.1:\(server.port) failed: "), r.err)
    }

    func testHalfAStartTLSReplyThenSilenceEndsWithinTheTimeout() throws {
        let server = try PythonPeer(
            """
            import socket, sys, time
            s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(5); print(s.getsockname()[1], flush=True)
            while True:
                c, _ = s.accept()
                c.sendall(b"220 mail ESMTP\\r\\n")
                c.recv(100)
                c.sendall(b"250-mail hello\\r\\n250-STAR")
                time.sleep(60)
            """)
        defer { server.stop() }
        let r = try Tool.run(["tls", "--starttls", "smtp", "-w", "1s", "127.0.0.1", String(server.port)])
        XCTAssertEqual(r.status, 3, r.err)
        XCTAssertEqual(r.err.split(separator: "\n").count, 1, r.err)
        XCTAssertEqual(r.err, "tincan: STARTTLS with 127.0.0.1:\(server.port): the server's reply did not complete in time (-w); nothing was sent in plaintext\n")
        XCTAssertEqual(r.out, "", "no plaintext was passed on")
    }

    func testAPeerThatStopsReadingEndsWithTheIdleTimeout() throws {
        let server = try PythonPeer(
            """
            import socket, sys, time
            s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1); print(s.getsockname()[1], flush=True)
            c, _ = s.accept()
            time.sleep(60)
            """)
        defer { server.stop() }
        let tool = try Tool(["connect", "--idle-timeout", "500ms", "127.0.0.1", String(server.port)], stdinFile: "/dev/zero")
        defer { tool.stop() }
        XCTAssertEqual(tool.wait(timeout: .seconds(20)), 3, tool.stderrText)
        XCTAssertTrue(tool.stderrText.contains("idle for 500ms (--idle-timeout)"), tool.stderrText)
    }
}
