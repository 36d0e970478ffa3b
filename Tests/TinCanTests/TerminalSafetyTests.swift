import Foundation
import TestSupport
import XCTest

/// Bytes the remote end chose never reach the terminal raw: a certificate's names, a server's
/// quoted reply line and a proxy's status line are shown with their control characters escaped.
final class TerminalSafetyTests: XCTestCase {
    private let certs = TLSFixtures.shared

    private func assertNoControlBytes(_ text: String, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        let raw = text.unicodeScalars.filter { ($0.value < 0x20 && $0 != "\n" && $0 != "\t") || (0x7F...0x9F).contains($0.value) }
        XCTAssertTrue(raw.isEmpty, "\(what) reached stderr raw: \(raw.map { String($0.value, radix: 16) }) in \(text.debugDescription)", file: file, line: line)
    }

    /// A certificate whose subject and SAN hold ESC and BEL (a terminal title and a screen clear).
    func testCertificateNamesAreEscaped() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-evil-\(getpid())").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let make = try Tool(
            [
                "-c",
                """
                openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
                  -subj "/CN=evil$(printf '\\033')[2J$(printf '\\a')" \
                  -addext "subjectAltName=DNS:x$(printf '\\033')]0;pwned$(printf '\\a').test" \
                  -keyout "$0/evil.key" -out "$0/evil.pem" 2>/dev/null
                """, dir,
            ], program: "/bin/sh")
        make.closeInput()
        XCTAssertEqual(make.wait(), 0, make.stderrText)
        let (server, port) = try Tool.server(program: "/usr/bin/openssl") { port in
            ["s_server", "-accept", "127.0.0.1:\(port)", "-cert", "\(dir)/evil.pem", "-key", "\(dir)/evil.key", "-quiet"]
        }
        defer { server.stop() }
        let r = try Tool.run(["tls", "--insecure", "--half-close", "127.0.0.1", String(port)], input: "")
        assertNoControlBytes(r.err, "the certificate's names")
        XCTAssertTrue(r.err.contains(#"names   DNS:x\x1b]0;pwned\x07.test"#), r.err)
        // A name mismatch quotes the certificate's names too.
        let mismatch = try Tool.run(["tls", "--ca", "\(dir)/evil.pem", "--servername", "other.test", "127.0.0.1", String(port)], input: "")
        XCTAssertEqual(mismatch.status, 4, mismatch.err)
        assertNoControlBytes(mismatch.err, "the names of a mismatch")
    }

    /// A STARTTLS server whose greeting clears the screen: quoted escaped, at the refusal and in
    /// the -vv transcript.
    func testAServersQuotedLineIsEscaped() throws {
        let server = try PythonPeer(
            PythonPeers.listenPrelude + """
                while True:
                    c, _ = s.accept(); c.sendall(b'220 mx \\x1b[2J\\x07 hello\\r\\n250 fine\\r\\n'); c.recv(100); c.close()
                """)
        defer { server.stop() }
        let r = try Tool.run(["tls", "-vv", "--starttls", "pop3", "127.0.0.1", String(server.port)], input: "")
        XCTAssertEqual(r.status, 5, r.err)
        assertNoControlBytes(r.err, "the server's line")
        XCTAssertTrue(r.err.contains(#"the server's greeting was not +OK: "220 mx \x1b[2J\x07 hello""#), r.err)
        XCTAssertTrue(r.err.contains(#"starttls < 220 mx \x1b[2J\x07 hello"#), r.err)
    }

    /// An HTTP proxy whose status line holds ESC: exit 8, the line quoted without it.
    func testAProxysStatusLineIsEscaped() throws {
        let proxy = try PythonPeer(
            PythonPeers.listenPrelude + """
                while True:
                    c, _ = s.accept(); c.recv(4096); c.sendall(b'HTTP/1.1 403 \\x1b]0;owned\\x07 no\\r\\n\\r\\n'); c.close()
                """)
        defer { proxy.stop() }
        let r = try Tool.run(["connect", "--proxy", "http://127.0.0.1:\(proxy.port)", "127.0.0.1", "9"], input: "")
        XCTAssertEqual(r.status, 8, r.err)
        assertNoControlBytes(r.err, "the proxy's status line")
        XCTAssertTrue(r.err.contains("403"), r.err)
    }
}
