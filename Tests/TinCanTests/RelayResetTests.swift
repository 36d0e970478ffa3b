import Foundation
import TestSupport
import XCTest

/// `listen --forward`: a reset on one side reaches the other side as a reset — RST, never a FIN
/// or a close_notify — so a client whose download was cut cannot take it for a whole one.
final class RelayResetTests: XCTestCase {
    private let certs = TLSFixtures.shared

    /// An upstream that sends 5 MiB, then resets the connection (SO_LINGER 0).
    private func resettingUpstream() throws -> PythonPeer {
        try PythonPeer(
            PythonPeers.listenPrelude + """
                import struct
                while True:
                    c, _ = s.accept()
                    try:
                        c.sendall(b'x' * (5 << 20))
                    except OSError:
                        pass
                    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
                    c.close()
                """)
    }

    /// An upstream that records how each connection's stream ended: "reset", or "end N".
    private func recordingUpstream(_ record: String) throws -> PythonPeer {
        try PythonPeer(
            "record = '\(record)'\n" + PythonPeers.listenPrelude + """
                while True:
                    c, _ = s.accept(); n = 0
                    try:
                        while True:
                            b = c.recv(65536)
                            if not b: break
                            n += len(b)
                        outcome = f'end {n}'
                    except ConnectionResetError:
                        outcome = 'reset'
                    open(record, 'w').write(outcome)
                    c.close()
                """)
    }

    func testAnUpstreamResetReachesAPlainClientAsAReset() throws {
        let upstream = try resettingUpstream()
        defer { upstream.stop() }
        let (relay, port) = try Tool.listener(["-k", "--forward", "127.0.0.1:\(upstream.port)"])
        defer { relay.stop() }
        for run in 1...5 {
            let r = try Tool.run(["connect", "--no-shutdown", "127.0.0.1", String(port)], input: "")
            XCTAssertEqual(r.status, 1, "run \(run): a cut download must not exit 0 (\(r.out.utf8.count) bytes): \(r.err)")
            XCTAssertTrue(r.err.contains("connection reset by peer"), "run \(run): \(r.err)")
        }
        waitUntil("the relay's lines") { relay.stderrText.components(separatedBy: "cut: ").count > 5 }
    }

    func testAnUpstreamResetReachesATLSClientAsAResetNotACloseNotify() throws {
        let upstream = try resettingUpstream()
        defer { upstream.stop() }
        let (relay, port) = try Tool.listener([
            "-k", "--tls", "--cert", certs.path("server.pem"), "--key", certs.path("server.key"),
            "--forward", "127.0.0.1:\(upstream.port)",
        ])
        defer { relay.stop() }
        for run in 1...5 {
            let r = try Tool.run(["tls", "-v", "--no-shutdown", "--ca", certs.path("ca.pem"), "--servername", "localhost", "127.0.0.1", String(port)], input: "")
            XCTAssertEqual(r.status, 1, "run \(run): \(r.out.utf8.count) bytes: \(r.err)")
            XCTAssertFalse(r.err.contains("close_notify"), "run \(run): \(r.err)")
            XCTAssertTrue(r.err.contains("reset"), "run \(run): \(r.err)")
        }
    }

    /// A client that resets (SO_LINGER 0) after sending: the upstream sees a reset, not an end.
    func testAClientResetReachesTheUpstreamAsAReset() throws {
        let record = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-reset-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: record) }
        let upstream = try recordingUpstream(record)
        defer { upstream.stop() }
        for tls in [false, true] {
            try? FileManager.default.removeItem(atPath: record)
            let extra = tls ? ["--tls", "--cert", certs.path("server.pem"), "--key", certs.path("server.key")] : []
            let (relay, port) = try Tool.listener(["-k"] + extra + ["--forward", "127.0.0.1:\(upstream.port)"])
            defer { relay.stop() }
            let client = try Tool(
                [
                    "python3", "-c",
                    """
                    import os, socket, ssl, struct, sys, time
                    c = socket.create_connection(('127.0.0.1', int(sys.argv[1])))
                    if sys.argv[2] == 'tls':
                        ctx = ssl.create_default_context(cafile=sys.argv[3])
                        c = ctx.wrap_socket(c, server_hostname='localhost')
                    c.sendall(b'y' * 100000)
                    time.sleep(0.3)
                    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
                    os.close(c.detach())  # no close_notify: the descriptor closes, and the linger makes it RST
                    """, String(port), tls ? "tls" : "plain", certs.path("ca.pem"),
                ], program: "/usr/bin/env")
            client.closeInput()
            XCTAssertEqual(client.wait(), 0, client.stderrText)
            waitUntil("the upstream's record") { !fileText(record).isEmpty }
            XCTAssertEqual(fileText(record), "reset", "TLS \(tls): \(relay.stderrText)")
        }
    }

    /// A TLS client that resets right after its handshake (the relay is stopped while its
    /// Finished and the RST arrive, so both wait in the kernel) costs no upstream connection,
    /// while one that sent bytes before its reset has them relayed and the reset passed on.
    func testAClientGoneRightAfterItsHandshakeCostsNoUpstream() throws {
        let record = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-gone-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: record) }
        let upstream = try PythonPeer(
            "record = '\(record)'\n" + PythonPeers.listenPrelude + """
                while True:
                    c, _ = s.accept(); b = b''
                    try:
                        while True:
                            x = c.recv(65536)
                            if not x: break
                            b += x
                        outcome = 'end'
                    except ConnectionResetError:
                        outcome = 'reset'
                    open(record, 'a').write(f'{b.decode()} {outcome}\\n')
                    c.close()
                """)
        defer { upstream.stop() }
        let (relay, port) = try Tool.listener([
            "-k", "-v", "--tls", "--cert", certs.path("server.pem"), "--key", certs.path("server.key"),
            "--forward", "127.0.0.1:\(upstream.port)",
        ])
        defer { relay.stop() }
        for sending in ["", "", "hello"] {
            let client = try Tool(
                [
                    "python3", "-c",
                    """
                    import glob, os, signal, socket, ssl, struct, sys, time
                    port, cafile, pid, data = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4].encode()
                    def stopped():
                        # Every thread of the relay is in the stopped state: none can read meanwhile.
                        states = []
                        for path in glob.glob(f'/proc/{pid}/task/*/stat'):
                            try:
                                states.append(open(path).read().rsplit(')', 1)[1].split()[0])
                            except OSError:
                                pass
                        return bool(states) and all(state in 'tT' for state in states)
                    c = socket.create_connection(('127.0.0.1', port))
                    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
                    t = ssl.create_default_context(cafile=cafile).wrap_bio(incoming, outgoing, server_hostname='localhost')
                    while True:
                        try:
                            t.do_handshake()
                            break
                        except ssl.SSLWantReadError:
                            c.sendall(outgoing.read())
                            b = c.recv(65536)
                            if not b:
                                sys.exit('the relay closed during the handshake')
                            incoming.write(b)
                    if data:
                        t.write(data)
                    os.kill(pid, signal.SIGSTOP)  # the Finished, the data and the RST all arrive before the relay looks
                    try:
                        deadline = time.monotonic() + 10
                        while not stopped():
                            if time.monotonic() > deadline:
                                sys.exit('the relay did not stop')
                            time.sleep(0.001)
                        c.sendall(outgoing.read())
                        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
                        c.close()
                    finally:
                        os.kill(pid, signal.SIGCONT)
                    """, String(port), certs.path("ca.pem"), String(relay.process.processIdentifier), sending,
                ], program: "/usr/bin/env")
            client.closeInput()
            XCTAssertEqual(client.wait(), 0, client.stderrText)
        }
        // Both found the client's Finished and its reset together: the handshake was not even
        // finished for them (nothing queued could be application data); the client whose
        // data came with them was heard whole.
        waitUntil("the relay's lines") { relay.stderrText.components(separatedBy: "reset the connection during its TLS handshake; no upstream dialled").count - 1 == 2 }
        waitUntil("the upstream's record") { fileText(record).contains("reset") }
        XCTAssertEqual(fileText(record), "hello reset\n", "only the client that sent bytes reached the upstream: \(relay.stderrText)")
        relay.signal(SIGTERM)
        _ = relay.wait()
        XCTAssertTrue(relay.stderrText.contains("2 clients gone (reset) before their upstream was dialled"), relay.stderrText)
    }
}
