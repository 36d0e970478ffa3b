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
        try PythonPeer(
            PythonPeers.listenPrelude + """
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
            XCTAssertTrue(r.err.contains("the peer ended TLS without close_notify, between two records: what it sent may be incomplete"), r.err)
            XCTAssertFalse(r.err.contains("nothing was cut"), "tincan cannot know that: \(r.err)")
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
        XCTAssertTrue(r.err.contains("without close_notify, between two records: what it sent may be incomplete"), r.err)
        // --json says so too.
        let json = try Tool.run(["tls", "--json", "--ca", certs.path("ca.pem"), "127.0.0.1", String(server.port)], input: "")
        XCTAssertEqual(json.status, 0, json.err)
        XCTAssertTrue(json.err.contains(#""event":"peer_end","#) && json.err.contains(#""close_notify":false,"may_be_incomplete":true"#), json.err)
    }

    /// As the TLS server, a client that ends without close_notify (killed mid-transfer, between
    /// two records) has not finished: exit 1, not a success with what arrived.
    func testAKilledTLSClientIsNotAFinishedTransfer() throws {
        for run in 1...3 {
            let out = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-killed-\(getpid())-\(run)").path
            defer { try? FileManager.default.removeItem(atPath: out) }
            // TLS 1.2: no session ticket arrives after the handshake, so the killed client has
            // nothing unread and its socket ends with a FIN, not a reset.
            let (server, port) = try Tool.listener(["--tls", "--tls-max", "1.2", "--cert", certs.path("server.pem"), "--key", certs.path("server.key")])
            defer { server.stop() }
            // (The server's stdin stays open: its end of stream would be a close_notify the
            // client never reads, and the kernel would reset the killed client's connection.)
            // A python TLS client: a 1 KiB record every 5 ms, until it is killed. Its socket never
            // fills, so each record leaves whole: the kill ends the stream between two records.
            let client = try Tool(
                [
                    "python3", "-c",
                    """
                    import socket, ssl, sys, time
                    ctx = ssl.create_default_context(cafile=sys.argv[2])
                    c = ctx.wrap_socket(socket.create_connection(('127.0.0.1', int(sys.argv[1]))), server_hostname='localhost')
                    while True:
                        c.sendall(b'z' * 1024); time.sleep(0.005)
                    """, String(port), certs.path("ca.pem"),
                ], program: "/usr/bin/env")
            waitUntil("data at the server") { server.stderrText.contains("connection from") }
            usleep(200_000)
            client.signal(SIGKILL)
            _ = client.wait()
            let status = server.wait(timeout: .seconds(10))
            XCTAssertEqual(status, 1, "run \(run): \(server.stderrText)")
            XCTAssertTrue(server.stderrText.contains("the client ended TLS without close_notify: what it sent may be incomplete"), server.stderrText)
            XCTAssertFalse(server.stderrText.contains("nothing was cut"), server.stderrText)
        }
        // A client that ends properly (close_notify) is a finished transfer: exit 0.
        let (server, port) = try Tool.listener(["--tls", "--cert", certs.path("server.pem"), "--key", certs.path("server.key")])
        defer { server.stop() }
        server.closeInput()
        let r = try Tool.run(["tls", "--half-close", "--ca", certs.path("ca.pem"), "--servername", "localhost", "127.0.0.1", String(port)], input: "all of it\n")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(server.wait(timeout: .seconds(10)), 0, server.stderrText)
        XCTAssertEqual(server.stdoutText, "all of it\n")
    }

    /// A TLS send to a peer that left names what happened, not "unknown error". The server has
    /// ended its own stream (close_notify: its stdin is empty), so the session no longer calls
    /// write(2) at all when the peer is gone.
    func testSendingToADeadPeerSaysWhy() throws {
        let (server, port) = try Tool.listener(["--tls", "--cert", certs.path("server.pem"), "--key", certs.path("server.key")])
        server.closeInput()
        let sender = try Tool(
            [
                "-c", "head -c 4000000000 /dev/zero | \"$0\" tls --ca \"$1\" --servername localhost 127.0.0.1 \"$2\"",
                Tool.tincan, certs.path("ca.pem"), String(port),
            ], program: "/bin/sh")
        sender.closeInput()
        // Killed mid-stream, while the sender's writes wait for room.
        waitUntil("8 MB at the server") { server.stdout.count > 8 << 20 }
        server.signal(SIGKILL)
        _ = server.wait()
        XCTAssertEqual(sender.wait(), 1, sender.stderrText)
        XCTAssertFalse(sender.stderrText.contains("unknown error"), sender.stderrText)
        XCTAssertTrue(sender.stderrText.contains("broken pipe") || sender.stderrText.contains("reset by peer"), sender.stderrText)
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
        let server = try Tool(
            [
                "s_server", "-accept", "127.0.0.1:\(port)", "-cert", certs.path("server.pem"),
                "-key", certs.path("server.key"), "-rev", "-quiet", "-naccept", "1",
            ], program: "/usr/bin/openssl")
        defer { server.stop() }
        waitForListener(port: port)
        let r = try Tool.run(["tls", "-vv", "--half-close", "--ca", certs.path("ca.pem"), "127.0.0.1", String(port)], input: "hello\n")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "olleh\n")
        XCTAssertFalse(r.err.contains("holding close_notify"), r.err)
    }
}
