import Foundation
import TestSupport
import XCTest

/// `listen -k --exec` behind TLS or a capture: each client's program is relayed on the mode's
/// events (a socket pair's end in the queue's epoll set), not bridged on threads of its own.
/// Many idle clients hold no thread each, their bytes still reach their programs and come back,
/// and a client's end is its program's end of file (its last output still comes back).
final class ProgramRelayTests: XCTestCase {
    private let certs = TLSFixtures.shared

    /// `count` clients (TLS with the CA in argv[4] when given), each connected and idle; after a
    /// line on stdin the last sends a line and prints what comes back; after a second line each
    /// sends a last line and ends (TLS: close_notify, then the half-close), and counts the ones
    /// whose answer came back and then the end ("closed N").
    private static let clients = #"""
        import socket, ssl, sys
        port, count = int(sys.argv[1]), int(sys.argv[2])
        context = None
        if len(sys.argv) > 3:
            context = ssl.create_default_context(cafile=sys.argv[3])
            context.check_hostname = False
        socks = []
        for i in range(count):
            s = socket.create_connection(('127.0.0.1', port))
            if context: s = context.wrap_socket(s, server_hostname='localhost')
            socks.append(s)
        print('open', flush=True)
        sys.stdin.readline()
        last = socks[-1]
        last.sendall(b'hello from the last\n')
        got = b''
        while not got.endswith(b'\n'):
            chunk = last.recv(100); assert chunk, 'closed'; got += chunk
        print('echoed: %s' % got.decode().strip(), flush=True)
        sys.stdin.readline()
        closed = 0
        for s in socks:
            s.settimeout(10)
            s.sendall(b'bye\n')
            got = b''
            if context:
                # Its answer first; then our close_notify, and the program's end comes back
                # as the listener's close_notify (unwrap waits for it).
                while not got.endswith(b'\n'):
                    chunk = s.recv(100); assert chunk, 'closed'; got += chunk
                s = s.unwrap()
            s.shutdown(socket.SHUT_WR)
            while True:
                chunk = s.recv(100)
                if not chunk: break
                got += chunk
            if got == b'bye\n': closed += 1
            s.close()
        print('closed %d' % closed, flush=True)
        """#

    func testIdleClientsBehindTLSOrACaptureHoldNoThreadAndEndCleanly() throws {
        let count = 100
        let directory = try TemporaryDirectory("program-relay")
        defer { directory.remove() }
        let tls = ["--tls", "--cert", certs.path("server.pem"), "--key", certs.path("server.key")]
        for (mode, arguments, ca) in [
            ("tls", tls, [certs.path("ca.pem")]), ("capture", ["--hex-dump", "\(directory.path)/programs.hex"], [String]()),
        ] {
            let (listener, port) = try Tool.listener(["-k", "--exec", "/bin/cat"] + arguments)
            defer { listener.stop() }
            let peers = try openIdleClients(Self.clients, of: listener, port: port, count: count, arguments: ca, mode: mode)
            defer { peers.stop() }
            peers.send("go\n")
            waitUntil("\(mode): the line comes back") { peers.stdoutText.contains("echoed: hello from the last\n") }
            peers.send("close\n")
            peers.closeInput()
            XCTAssertEqual(peers.wait(timeout: .seconds(60)), 0, "\(mode): \(peers.stderrText)")
            XCTAssertTrue(peers.stdoutText.hasSuffix("closed \(count)\n"), "\(mode): each end was its program's end of file: \(peers.stdoutText)")
            XCTAssertTrue(listener.process.isRunning, "\(mode): the listener goes on")
        }
        let dump = try String(contentsOfFile: "\(directory.path)/programs.hex", encoding: .utf8)
        // Each way, in the hex dump's text column: what the last client sent and what came back.
        XCTAssertEqual(dump.components(separatedBy: "|hello from the l|").count - 1, 2, "both ways in the capture: \(dump.suffix(2000))")
    }

    /// The client's end comes first and the program answers 2.5 s later: the answer arrives
    /// whole, then the end (TLS: after the client's close_notify and half-close; WebSocket:
    /// stdin's end, the client's close held while the program may still answer).
    func testTheProgramAnswersLongAfterTheClientsEnd() throws {
        let late = ["--sh-exec", "read l; sleep 2.5; echo \"late $l\""]
        let (tls, tlsPort) = try Tool.listener(["-k", "--tls", "--cert", certs.path("server.pem"), "--key", certs.path("server.key")] + late)
        defer { tls.stop() }
        // Memory BIOs: python's unwrap would wait for the listener's close_notify and refuse the
        // answer that comes before it; here our close_notify goes, then the half-close, and
        // what comes after is read to the end.
        let endsFirst = #"""
            import socket, ssl, sys
            context = ssl.create_default_context(cafile=sys.argv[2]); context.check_hostname = False
            raw = socket.create_connection(('127.0.0.1', int(sys.argv[1])))
            incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
            tls = context.wrap_bio(incoming, outgoing, server_hostname='localhost')
            raw.settimeout(20)
            def flush():
                data = outgoing.read()
                if data: raw.sendall(data)
            def pump():
                chunk = raw.recv(65536)
                if chunk: incoming.write(chunk)
                else: incoming.write_eof()
                return bool(chunk)
            while True:
                try: tls.do_handshake(); break
                except ssl.SSLWantReadError: flush(); pump()
            flush()
            tls.write(b'question\n'); flush()
            try: tls.unwrap()  # our close_notify goes; theirs has not come
            except ssl.SSLWantReadError: pass
            flush(); raw.shutdown(socket.SHUT_WR)
            got = b''
            while True:
                try:
                    got += tls.read(65536)
                except ssl.SSLWantReadError:
                    if not pump(): break
                except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                    break
            print(repr(got))
            """#
        let r = try Tool.run(["python3", "-c", endsFirst, String(tlsPort), certs.path("ca.pem")], input: "", program: "/usr/bin/env")
        XCTAssertEqual(r.status, 0, r.err + tls.stderrText)
        XCTAssertEqual(r.out, "b'late question\\n'\n", "the answer after the client's end, whole: \(tls.stderrText)")

        let (ws, wsPort) = try Tool.listener(["-k", "--ws"] + late)
        defer { ws.stop() }
        let client = try Tool.run(["ws", "ws://127.0.0.1:\(wsPort)/"], input: "question\n")
        XCTAssertEqual(client.status, 0, client.err + ws.stderrText)
        XCTAssertEqual(client.out, "late question\n")
    }

    /// A TLS client that resets mid-session: its program sees its end and exits, and its place
    /// under --max-conns 1 is free for the next client, which is served.
    func testAClientsResetEndsItsProgramAndFreesItsPlace() throws {
        let (listener, port) = try Tool.listener(
            ["-k", "-vv", "--max-conns", "1", "--tls", "--cert", certs.path("server.pem"), "--key", certs.path("server.key"), "--exec", "/bin/cat"])
        defer { listener.stop() }
        let resetting = #"""
            import socket, ssl, struct, sys
            context = ssl.create_default_context(cafile=sys.argv[2]); context.check_hostname = False
            raw = socket.create_connection(('127.0.0.1', int(sys.argv[1])))
            s = context.wrap_socket(raw, server_hostname='localhost')
            s.settimeout(20)
            s.sendall(b'first\n'); assert s.recv(100) == b'first\n'
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
            s.close()  # no close_notify, and a reset
            """#
        let reset = try Tool.run(["python3", "-c", resetting, String(port), certs.path("ca.pem")], input: "", program: "/usr/bin/env")
        XCTAssertEqual(reset.status, 0, reset.err)
        waitUntil("the program of the client that reset exits") { listener.stderrText.contains("program for 127.0.0.1:") }
        let next = try Tool.run(["tls", "-q", "1s", "--ca", certs.path("ca.pem"), "--servername", "localhost", "127.0.0.1", String(port)], input: "second\n")
        XCTAssertEqual(next.status, 0, next.err + listener.stderrText)
        XCTAssertEqual(next.out, "second\n", "the next client is served: \(listener.stderrText)")
    }
}
