import Foundation
import TestSupport
import XCTest

/// What tincan says is exactly what happened: sender names, lookups, which option timed out,
/// and the hint for the wrong kind of socket.
final class AccuracyTests: XCTestCase {
    private func temporaryPath(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("tincan-\(name)-\(getpid())").path
    }

    /// A datagram from a Unix socket that never bound a name: "(unnamed)", not 0.0.0.0:0.
    func testAnUnnamedUnixSenderIsSaidSo() throws {
        let path = temporaryPath("unnamed.sock")
        defer { unlink(path) }
        let receiver = try Tool(["udp-recv", "-v", "-n", "1", "--format", "json", "--unix", path])
        waitUntil("the socket file") { FileManager.default.fileExists(atPath: path) }
        let sender = try Tool(
            ["python3", "-c", "import socket, sys; socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b'hi', sys.argv[1])", path],
            program: "/usr/bin/env")
        sender.closeInput()
        XCTAssertEqual(sender.wait(), 0, sender.stderrText)
        XCTAssertEqual(receiver.wait(), 0, receiver.stderrText)
        XCTAssertTrue(receiver.stdoutText.hasPrefix(#"{"from":"(unnamed)","#), receiver.stdoutText)
        XCTAssertTrue(receiver.stderrText.contains("2 bytes from (unnamed)"), receiver.stderrText)
        XCTAssertFalse(receiver.stdoutText.contains("0.0.0.0") || receiver.stderrText.contains("0.0.0.0"))
    }

    /// An address literal is not looked up in the other family: no "AAAA 127.0.0.1: no
    /// address" at -vv, no empty ipv6 resolved event.
    func testALiteralIsNotSaidToHaveNoAddress() throws {
        for family in ["127.0.0.1", "::1"] {
            let text = try Tool.run(["connect", "-vv", family, "9"], input: "")
            XCTAssertFalse(text.err.contains("no address"), text.err)
            let json = try Tool.run(["connect", "--json", family, "9"], input: "")
            XCTAssertFalse(json.err.contains(#""addresses":[]"#), json.err)
            XCTAssertTrue(json.err.contains(#""event":"resolved""#), json.err)
        }
    }

    /// A STARTTLS server that never answers: the time that ran out is --connect-timeout's when
    /// it was given (not -w's).
    func testASTARTTLSTimeoutNamesItsOption() throws {
        let silent = try PythonPeer(PythonPeers.listenPrelude + "c, _ = s.accept(); time.sleep(30)")
        defer { silent.stop() }
        let r = try Tool.run(["tls", "--starttls", "smtp", "--connect-timeout", "300ms", "127.0.0.1", String(silent.port)], input: "")
        XCTAssertEqual(r.status, 3, r.err)
        XCTAssertTrue(r.err.contains("did not complete in time (--connect-timeout)"), r.err)
    }

    /// udp-send --unix to a stream socket says what it is and what to use.
    func testADatagramToAStreamSocketSuggestsConnect() throws {
        let path = temporaryPath("stream.sock")
        defer { unlink(path) }
        let listener = try Tool(["listen", "--unix", path])
        defer { listener.stop() }
        waitUntil("the socket file") { FileManager.default.fileExists(atPath: path) }
        let r = try Tool.run(["udp-send", "--unix", path, "-m", "hi"], input: "")
        XCTAssertEqual(r.status, 1, r.err)
        XCTAssertTrue(r.err.contains("it is a stream socket, not a datagram one; use 'tincan connect --unix \(path)'"), r.err)
    }
}
