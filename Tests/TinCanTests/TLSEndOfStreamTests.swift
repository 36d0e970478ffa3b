import Foundation
import TestSupport
import XCTest

/// TLS at the end of a session: the server's last reply survives our end of input, and a server
/// that skips close_notify is an error only when it cut a record.
final class TLSEndOfStreamTests: XCTestCase {
    private let certs = TLSFixtures.shared

    /// An SMTP-like server (python ssl) that answers QUIT with 221 and closes its socket at once,
    /// without close_notify and without reading further: a close_notify of ours that had arrived
    /// would still be unread, so the close would reset the connection and the reset would drop the
    /// 221 from our receive queue.
    private func quitServer() throws -> PythonPeer {
        try PythonPeer(PythonPeers.listenPrelude + """
            import ssl
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain('\(certs.path("server.pem"))', '\(certs.path("server.key"))')
            while True:
                c, _ = s.accept()
                t = None
                try:
                    t = ctx.wrap_socket(c, server_side=True)
                    t.sendall(b'220 ready\\r\\n')
                    got = b''
                    while b'QUIT\\r\\n' not in got:
                        d = t.recv(4096)
                        if not d: break
                        got += d
                    t.sendall(b'221 bye\\r\\n')
                except (ssl.SSLError, OSError):
                    pass
                (t or c).close()  # the wrapped socket owns the descriptor
            """)
    }

    func testTheServersLastReplySurvivesOurEndOfInputTenTimesOutOfTen() throws {
        let server = try quitServer()
        defer { server.stop() }
        for run in 1...10 {
            let r = try Tool.run(["tls", "-v", "--ca", certs.path("ca.pem"), "127.0.0.1", String(server.port)], input: "QUIT\r\n", timeout: .seconds(10))
            XCTAssertEqual(r.out, "220 ready\r\n221 bye\r\n", "run \(run): \(r.err)")
            XCTAssertEqual(r.status, 0, "run \(run): \(r.err)")
            XCTAssertTrue(r.err.contains("the peer ended TLS without close_notify, between two records (nothing was cut)"), r.err)
        }
        // connect --tls holds its close_notify the same way.
        let r = try Tool.run(["connect", "--tls", "--ca", certs.path("ca.pem"), "127.0.0.1", String(server.port)], input: "QUIT\r\n", timeout: .seconds(10))
        XCTAssertEqual(r.out, "220 ready\r\n221 bye\r\n", r.err)
        XCTAssertEqual(r.status, 0, r.err)
    }

    private func recordServer(cut: Bool) throws -> PythonPeer {
        try PythonPeer(PythonPeers.tlsRecordCutter(certificate: certs.path("server.pem"), key: certs.path("server.key"), cut: cut))
    }

    func testAServerSkippingCloseNotifyBetweenRecordsIsNotAnError() throws {
        let server = try recordServer(cut: false)
        defer { server.stop() }
        let r = try Tool.run(["tls", "-v", "--ca", certs.path("ca.pem"), "127.0.0.1", String(server.port)], input: "")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "first record\nsecond record\n")
        XCTAssertTrue(r.err.contains("without close_notify, between two records (nothing was cut)"), r.err)
    }

    func testAServerCuttingARecordIsAnErrorAfterTheWholeRecordsBeforeIt() throws {
        let server = try recordServer(cut: true)
        defer { server.stop() }
        let r = try Tool.run(["tls", "--ca", certs.path("ca.pem"), "127.0.0.1", String(server.port)], input: "")
        XCTAssertEqual(r.status, 1, r.err)
        XCTAssertEqual(r.out, "first record\n")
        XCTAssertTrue(r.err.contains("the peer ended TLS in the middle of a record: data was cut short"), r.err)
    }

    /// --half-close sends close_notify at the end of stdin, for servers that wait for it: here
    /// `openssl s_server -rev` answers, and the session ends when it sees our close_notify.
    func testHalfCloseSendsCloseNotifyAtTheEndOfInput() throws {
        let port = freePort()
        let server = try Tool(["s_server", "-accept", "127.0.0.1:\(port)", "-cert", certs.path("server.pem"),
                               "-key", certs.path("server.key"), "-rev", "-quiet", "-naccept", "1"], program: "/usr/bin/openssl")
        defer { server.stop() }
        waitForListener(port: port)
        let r = try Tool.run(["tls", "-vv", "--half-close", "--ca", certs.path("ca.pem"), "127.0.0.1", String(port)], input: "hello\n")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "olleh\n")
        XCTAssertFalse(r.err.contains("holding close_notify"), r.err)
    }
}
