import Foundation
import TestSupport
import XCTest

/// WebSocket clients of the hub (with --broker and --chat), of --echo, of a program per client
/// and of a relay are members on the mode's events: no thread and no TCP pair per client. Many idle clients, each opened with
/// its handshake, leave the listener's thread count where one client leaves it (each held
/// three threads when a stand-in socket and a relay carried it); messages still go both ways,
/// and every client's close is answered.
final class WebSocketMemberTests: XCTestCase {
    /// `clients` raw WebSocket clients (python's socket module: no library in between). Each
    /// opens; "open" is said; after a line on stdin the last sends one message ("echo": and
    /// reads it back, said as "echoed: ..."); after a second line each sends its close and
    /// reads the server's close ("closed N" counts those answered).
    private static let clients = #"""
        import base64, os, socket, sys
        port, n, echo = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == 'echo'
        def frame(opcode, payload):
            mask = os.urandom(4)
            return bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        def read_exactly(s, size):
            data = b''
            while len(data) < size:
                c = s.recv(size - len(data)); assert c, 'closed'; data += c
            return data
        def read_frame(s):
            head = read_exactly(s, 2)
            size = head[1] & 0x7f
            if size == 126: size = int.from_bytes(read_exactly(s, 2), 'big')
            elif size == 127: size = int.from_bytes(read_exactly(s, 8), 'big')
            return head[0] & 0x0f, read_exactly(s, size)
        socks = []
        for i in range(n):
            s = socket.create_connection(('127.0.0.1', port))
            key = base64.b64encode(os.urandom(16)).decode()
            s.sendall(('GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n'
                       'Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n' % (port, key)).encode())
            head = b''
            while b'\r\n\r\n' not in head:
                c = s.recv(1); assert c, 'no answer'; head += c
            assert head.startswith(b'HTTP/1.1 101'), head
            socks.append(s)
        print('open', flush=True)
        sys.stdin.readline()
        socks[-1].sendall(frame(1, b'hello from the last'))
        if echo:
            print('echoed: %s' % read_frame(socks[-1])[1].decode(), flush=True)
        sys.stdin.readline()
        closed = 0
        for s in socks:
            s.sendall(frame(8, b'\x03\xe8'))
            s.settimeout(10)
            while True:
                opcode, data = read_frame(s)
                if opcode == 8:
                    closed += 1
                    break
            s.close()
        print('closed %d' % closed, flush=True)
        """#

    func testIdleClientsOfEveryEventModeCostNoThreadEach() throws {
        let count = 150
        // The relay's upstream: a program per connection that sends back what it reads.
        let (upstream, upstreamPort) = try Tool.listener(["-k", "--exec", "/bin/cat"])
        defer { upstream.stop() }
        let modes = [
            ("hub", ["-k"]), ("broker", ["--broker"]), ("chat", ["--chat"]), ("echo", ["-k", "--echo"]), ("program", ["-k", "--exec", "/bin/cat"]),
            ("relay", ["-k", "--forward", "127.0.0.1:\(upstreamPort)"]),
        ]
        for (mode, arguments) in modes {
            let (listener, port) = try Tool.listener(["--ws"] + arguments)
            defer { listener.stop() }
            let echoes = ["echo", "program", "relay"].contains(mode)
            let peers = try openIdleClients(Self.clients, of: listener, port: port, count: count, arguments: [echoes ? "echo" : mode], mode: mode)
            defer { peers.stop() }
            peers.send("go\n")
            if echoes {
                waitUntil("\(mode): the message comes back") { peers.stdoutText.contains("echoed: hello from the last\n") }
            } else {
                waitUntil("\(mode): the message on stdout") { listener.stdoutText.contains("hello from the last") }
            }
            peers.send("close\n")
            peers.closeInput()
            XCTAssertEqual(peers.wait(timeout: .seconds(30)), 0, "\(mode): \(peers.stderrText)")
            XCTAssertTrue(peers.stdoutText.hasSuffix("closed \(count)\n"), "\(mode): every close answered: \(peers.stdoutText)")
            XCTAssertTrue(listener.process.isRunning, "\(mode): the listener goes on")
        }
    }

    /// A handshake under way waits on its socket's events in every mode, a program's and the
    /// forwarder's too: 100 clients that sent half an upgrade request hold no thread each (each
    /// held one, until --handshake-timeout), and a whole client is still served meanwhile.
    func testHalfSentHandshakesHoldNoThread() throws {
        let halfSent = #"""
            import socket, sys
            socks = [socket.create_connection(('127.0.0.1', int(sys.argv[1]))) for _ in range(int(sys.argv[2]))]
            for s in socks: s.sendall(b'GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n')
            print('sent', flush=True)
            sys.stdin.readline()
            """#
        let whole = #"""
            import sys
            from websockets.sync.client import connect
            with connect('ws://127.0.0.1:%s/' % sys.argv[1]) as ws:
                ws.send('whole\n')
                if sys.argv[2] == '1':
                    got = ws.recv(timeout=10)
                    print((got.decode() if isinstance(got, bytes) else got).strip())
                else:
                    print('sent')
            """#
        // The forwarder's upstream: a program that sends back what it reads.
        let (upstream, upstreamPort) = try Tool.listener(["-k", "--exec", "/bin/cat"])
        defer { upstream.stop() }
        let modes: [([String], Bool)] = [
            (["-k"], false), (["-k", "--exec", "/bin/cat"], true), (["-k", "--echo"], true), (["-k", "--forward", "127.0.0.1:\(upstreamPort)"], true),
        ]
        for (arguments, echoes) in modes {
            let (listener, port) = try Tool.listener(["--ws", "--max-pending-per-source", "200"] + arguments)
            defer { listener.stop() }
            let peers = try Tool(["python3", "-u", "-c", halfSent, String(port), "100"], program: "/usr/bin/env")
            defer { peers.stop() }
            waitUntil("\(arguments): 100 half-sent requests") { peers.stdoutText == "sent\n" || !peers.process.isRunning }
            let r = try Tool.run(["python3", "-c", whole, String(port), echoes ? "1" : "0"], input: "", program: "/usr/bin/env")
            XCTAssertEqual(r.status, 0, "\(arguments): \(r.err)")
            XCTAssertEqual(r.out, echoes ? "whole\n" : "sent\n", "\(arguments)")
            let held = threadsOnceSettled(listener.process.processIdentifier)
            XCTAssertLessThan(held, 30, "\(arguments): 100 handshakes under way hold \(held) threads")
            peers.closeInput()
            XCTAssertEqual(peers.wait(), 0, peers.stderrText)
        }
    }
}
