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
}
