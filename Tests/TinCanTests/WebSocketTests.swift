import Foundation
import TestSupport
import XCTest

/// `tincan ws` and `listen --ws` against python `websockets` (a real client and server), curl,
/// each other over TLS, and stubs that misbehave on cue (a close with an error code, a
/// connection dropped without a close, a peer that stops answering pings).
final class WebSocketTests: XCTestCase {
    private let certs = TLSFixtures.shared

    /// A python `websockets` echo server that prints each message it got ("text:…" or
    /// "binary:<length>") and, as argv[2] says, closes with 1011 after the first message
    /// (`error`) or echoes (`echo`; `after` sends one more message, "after", 300 ms after the
    /// echo of the first message, then closes).
    private static let websocketsServer = """
        import asyncio, sys, websockets
        mode = sys.argv[2]
        async def handler(ws):
            if mode == 'headers':
                h = ws.request.headers
                print('auth=%s origin=%s x=%s protocol=%s deflate=%s' % (h.get('Authorization'), h.get('Origin'), h.get('X-Test'), ws.subprotocol,
                      'permessage-deflate' in (ws.response.headers.get('Sec-WebSocket-Extensions') or '')), flush=True)
            async for m in ws:
                said = ('text:' + m) if isinstance(m, str) else ('binary:%d' % len(m))
                print(said, flush=True)
                if mode == 'after':
                    # Echo, then a second message a moment later, which goes only if the client's
                    # close had not come with its message; then our close.
                    await ws.send(m); await asyncio.sleep(0.3)
                    await ws.send('after' if isinstance(m, str) else b'after')
                    await ws.close()
                    return
                if mode == 'error':
                    await ws.close(1011, 'boom')
                    return
                if mode == 'once':
                    await ws.close()
                    return
                await ws.send(m)
        async def main():
            async with websockets.serve(handler, '127.0.0.1', int(sys.argv[1]), max_size=None, subprotocols=['chat'] if mode == 'headers' else None) as server:
                print(server.sockets[0].getsockname()[1], flush=True)
                await asyncio.Future()
        asyncio.run(main())
        """

    /// A raw server that completes the handshake and then, as argv[3] says, drops the
    /// connection without a close frame (`drop`) or goes silent, answering nothing (`mute`).
    private static let rawServer =
        PythonPeers.listenPrelude + """
            import base64
            c, _ = s.accept(); head = b''
            while b'\\r\\n\\r\\n' not in head: head += c.recv(4096)
            key = [l.split(b':', 1)[1].strip() for l in head.split(b'\\r\\n') if l.lower().startswith(b'sec-websocket-key:')][0]
            accept = base64.b64encode(hashlib.sha1(key + b'258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest())
            c.sendall(b'HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Accept: ' + accept + b'\\r\\n\\r\\n')
            if sys.argv[3] == 'drop':
                c.sendall(b'\\x81\\x05hello'); c.close()
            elif sys.argv[3] == 'reset':
                import struct
                c.sendall(b'\\x81\\x05hello'); time.sleep(0.2)
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0)); c.close()
            elif sys.argv[3] in ('late-binary', 'reset-binary'):
                # Binary messages of 200 000, 70 000 and 300 000 bytes (each bytes 0-255 over and
                # over), after 2.5 s of silence; then the close, or (reset-binary, after the first)
                # a reset.
                import struct
                def frame(b):
                    n = len(b)
                    size = bytes([n]) if n < 126 else (b'\\x7e' + struct.pack('>H', n) if n < 65536 else b'\\x7f' + struct.pack('>Q', n))
                    return b'\\x82' + size + b
                time.sleep(2.5)
                for n in (200000, 70000, 300000):
                    c.sendall(frame((bytes(range(256)) * (n // 256 + 1))[:n]))
                    if sys.argv[3] == 'reset-binary':
                        time.sleep(0.2)
                        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0)); c.close()
                        sys.exit(0)
                c.sendall(b'\\x88\\x02\\x03\\xe8')
                try:
                    while c.recv(4096): pass
                except OSError:
                    pass
                c.close()
            elif sys.argv[3] == 'late':
                # After the client's close: six messages 300 ms apart, then the close.
                got = b''
                while not got or got[0] & 0x0F != 8:
                    got += c.recv(4096)
                for i in range(6):
                    c.sendall(b'\\x81\\x01' + str(i).encode()); time.sleep(0.3)
                c.sendall(b'\\x88\\x02\\x03\\xe8'); time.sleep(0.2); c.close()
            else:
                time.sleep(30)
            """

    private func websocketsServer(_ mode: String) throws -> (Tool, UInt16) {
        try Tool.server(["python3", "-u", "-c", WebSocketTests.websocketsServer, "0", mode])
    }

    private func receivedByServer(_ server: Tool) -> [String] { Array(server.stdoutText.split(separator: "\n").dropFirst().map(String.init)) }

    func testEachLineIsATextMessageAndEachMessageComesBackOnALine() throws {
        let (server, port) = try websocketsServer("echo")
        defer { server.stop() }
        let r = try Tool.run(["ws", "-v", "-q", "1s", "ws://127.0.0.1:\(port)/chat"], input: "hello\nwörld\r\n\nlast without newline")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "hello\nwörld\n\nlast without newline\n")
        XCTAssertEqual(receivedByServer(server), ["text:hello", "text:wörld", "text:", "text:last without newline"])
        XCTAssertTrue(r.err.contains("the peer closed the WebSocket with 1000 (normal closure)"), r.err)
    }

    func testTheCloseIsHeldSoALateAnswerStillArrives() throws {
        // No -q: stdin ends at once, the close waits until the server is quiet (its echo comes
        // first), so the answer to the last line is not cut by our close.
        let (server, port) = try websocketsServer("echo")
        defer { server.stop() }
        let r = try Tool.run(["ws", "ws://127.0.0.1:\(port)/"], input: "one\ntwo\n")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "one\ntwo\n")
    }

    func testBinaryMessagesCarryEveryByte() throws {
        let (server, port) = try websocketsServer("echo")
        defer { server.stop() }
        let input = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-ws-\(getpid())-in.bin").path
        addTeardownBlock { try? FileManager.default.removeItem(atPath: input) }
        var bytes = [UInt8](repeating: 0, count: 700_000)
        for i in bytes.indices { bytes[i] = UInt8(truncatingIfNeeded: i &* 7919 >> 3) }
        try Data(bytes).write(to: URL(fileURLWithPath: input))
        let client = try Tool(["ws", "--binary", "-q", "1s", "ws://127.0.0.1:\(port)/"], stdinFile: input)
        defer { client.stop() }
        XCTAssertEqual(client.wait(), 0, client.stderrText)
        XCTAssertEqual(Array(client.stdout), bytes)
        let sizes = receivedByServer(server).map { Int($0.dropFirst("binary:".count)) ?? -1 }
        XCTAssertEqual(sizes.reduce(0, +), bytes.count, "every byte went, as binary messages")
    }

    /// The bytes of `late-binary`'s messages of these sizes, one after another.
    private static func patterned(_ sizes: [Int]) -> [UInt8] { sizes.flatMap { n in (0..<n).map { UInt8($0 % 256) } } }

    /// Binary messages handed on where they arrive: stdin ends at once, the server answers
    /// after 2.5 s with messages larger than a receive and cut by it, then closes; every byte
    /// reaches stdout, exit 0.
    func testBinaryMessagesAfterAPauseOnceStdinEndedArriveWhole() throws {
        let (server, port) = try Tool.server(["python3", "-u", "-c", WebSocketTests.rawServer, "0", "127.0.0.1", "late-binary"])
        defer { server.stop() }
        let client = try Tool(["ws", "--binary", "ws://127.0.0.1:\(port)/"], stdinFile: "/dev/null")
        defer { client.stop() }
        XCTAssertEqual(client.wait(), 0, client.stderrText)
        XCTAssertEqual(client.stdout.count, 570_000, client.stderrText)
        XCTAssertTrue(Array(client.stdout) == WebSocketTests.patterned([200_000, 70_000, 300_000]), "every byte, in order")
    }

    /// A reset after a binary message: the message is written whole, the run exits 1.
    func testABinaryMessageBeforeAResetIsWrittenAndTheRunFails() throws {
        let (server, port) = try Tool.server(["python3", "-u", "-c", WebSocketTests.rawServer, "0", "127.0.0.1", "reset-binary"])
        defer { server.stop() }
        let client = try Tool(["ws", "--binary", "ws://127.0.0.1:\(port)/"])
        defer { client.stop() }
        XCTAssertEqual(client.wait(), 1, client.stderrText)
        XCTAssertTrue(Array(client.stdout) == WebSocketTests.patterned([200_000]), "the message before the reset, whole: \(client.stdout.count) bytes")
        XCTAssertTrue(client.stderrText.contains("reset"), client.stderrText)
    }

    /// Binary messages to a stdout that is closed: the run ends with exit 1 and says so.
    func testBinaryMessagesToAStdoutThatFailsEndTheRunNonZero() throws {
        let (server, port) = try Tool.server(["python3", "-u", "-c", WebSocketTests.rawServer, "0", "127.0.0.1", "late-binary"])
        defer { server.stop() }
        let r = try Tool.run(["/bin/sh", "-c", "'\(Tool.tincan)' ws --binary ws://127.0.0.1:\(port)/ </dev/null >&-"], program: "/usr/bin/env")
        XCTAssertEqual(r.status, 1, r.err)
        XCTAssertTrue(r.err.contains("writing to stdout failed"), r.err)
    }

    /// tincan to tincan with 64 KiB binary messages (sent from where stdin's chunk lies, masked
    /// there, read where they arrive): 5 MiB byte-exact, then stdin's end ends the session.
    func testBinaryBulkTincanToTincanIsByteExact() throws {
        let dir = try TemporaryDirectory("ws-bulk")
        defer { dir.remove() }
        var bytes = [UInt8](repeating: 0, count: 5 << 20)
        for i in bytes.indices { bytes[i] = UInt8(truncatingIfNeeded: i &* 2_654_435_761 >> 13) }
        try Data(bytes).write(to: URL(fileURLWithPath: dir.file("in")))
        let port = freePort()
        let listener = try Tool(["listen", "--ws", "--binary", "127.0.0.1", String(port)])
        defer { listener.stop() }
        waitForListener(port: port)
        let client = try Tool(["ws", "--binary", "--chunk", "65536", "ws://127.0.0.1:\(port)/"], stdinFile: dir.file("in"))
        defer { client.stop() }
        XCTAssertEqual(client.wait(), 0, client.stderrText)
        XCTAssertEqual(listener.wait(), 0, listener.stderrText)
        XCTAssertEqual(listener.stdout.count, bytes.count)
        XCTAssertTrue(Array(listener.stdout) == bytes, "every byte, in order")
    }

    func testACloseWithAnErrorCodeExits10AndSaysIt() throws {
        let (server, port) = try websocketsServer("error")
        defer { server.stop() }
        let client = try Tool(["ws", "ws://127.0.0.1:\(port)/"])
        defer { client.stop() }
        client.send("hi\n")
        XCTAssertEqual(client.wait(), 10, client.stderrText)
        XCTAssertTrue(client.stderrText.contains("closed the WebSocket with 1011 (internal error): 'boom'"), client.stderrText)
    }

    func testAConnectionDroppedWithoutACloseFailsAfterWritingWhatCame() throws {
        let (server, port) = try Tool.server(["python3", "-u", "-c", WebSocketTests.rawServer, "0", "127.0.0.1", "drop"])
        defer { server.stop() }
        let client = try Tool(["ws", "ws://127.0.0.1:\(port)/"])
        defer { client.stop() }
        XCTAssertEqual(client.wait(), 1, client.stderrText)
        XCTAssertEqual(client.stdoutText, "hello\n", "what came before the drop is written")
        XCTAssertTrue(client.stderrText.contains("without a WebSocket close"), client.stderrText)
    }

    func testAPeerThatStopsAnsweringPingsIsNoticed() throws {
        let (server, port) = try Tool.server(["python3", "-u", "-c", WebSocketTests.rawServer, "0", "127.0.0.1", "mute"])
        defer { server.stop() }
        let client = try Tool(["ws", "--ping-interval", "200ms", "--ping-timeout", "300ms", "ws://127.0.0.1:\(port)/"])
        defer { client.stop() }
        XCTAssertEqual(client.wait(), 1, client.stderrText)
        XCTAssertTrue(client.stderrText.contains("did not answer a ping within 300"), client.stderrText)
    }

    func testTheServerRefusesWhatIsNotItsUpgradeInPlainHTTP() throws {
        // A plain HTTP request: 426 with the version to use, said at -v.
        let (server, port) = try Tool.server(program: Tool.tincan) { ["listen", "-v", "--ws=/chat", "127.0.0.1", String($0)] }
        defer { server.stop() }
        let curl = try Tool.curl(["-i", "http://127.0.0.1:\(port)/chat"])
        XCTAssertTrue(curl.out.hasPrefix("HTTP/1.1 426 Upgrade Required\r\n"), curl.out)
        XCTAssertTrue(curl.out.contains("Sec-WebSocket-Version: 13\r\n"), curl.out)
        XCTAssertEqual(server.wait(), 10, server.stderrText)
        XCTAssertTrue(server.stderrText.contains("refused the WebSocket handshake: a plain HTTP request"), server.stderrText)

        // Another path: 404, and the client says what the server answered (exit 10).
        let (other, otherPort) = try Tool.server(program: Tool.tincan) { ["listen", "--ws=/chat", "127.0.0.1", String($0)] }
        defer { other.stop() }
        let r = try Tool.run(["ws", "ws://127.0.0.1:\(otherPort)/elsewhere"], input: "")
        XCTAssertEqual(r.status, 10, r.err)
        XCTAssertTrue(r.err.contains("it answered 'HTTP/1.1 404 Not Found': is the path right?"), r.err)
    }

    func testAPythonClientTalksToTheServerAndTheServerClosesCleanly() throws {
        let (server, port) = try Tool.server(program: Tool.tincan) { ["listen", "--ws", "-q", "1s", "127.0.0.1", String($0)] }
        defer { server.stop() }
        server.send("from server\n")
        server.closeInput()
        let script = """
            import asyncio, sys, websockets
            async def main():
                async with websockets.connect('ws://127.0.0.1:%s/any' % sys.argv[1]) as ws:
                    await ws.send('from client')
                    await ws.send(b'\\x00\\x01')
                    print(await ws.recv(), flush=True)
                    await ws.wait_closed()
                    print('closed', ws.close_code, flush=True)
            asyncio.run(main())
            """
        let client = try Tool.run(["python3", "-c", script, String(port)], program: "/usr/bin/env")
        XCTAssertEqual(client.status, 0, client.err)
        XCTAssertEqual(client.out, "from server\nclosed 1000\n")
        XCTAssertEqual(server.wait(), 0, server.stderrText)
        XCTAssertEqual(server.stdoutText, "from client\n\u{0}\u{1}\n")
    }

    func testTincanToTincanOverTLS() throws {
        let (server, port) = try Tool.server(program: Tool.tincan) {
            ["listen", "-k", "--ws", "--echo", "--tls", "--cert", self.certs.path("server.pem"), "--key", self.certs.path("server.key"), "127.0.0.1", String($0)]
        }
        defer { server.stop() }
        let r = try Tool.run(["ws", "-q", "1s", "--ca", certs.path("ca.pem"), "wss://localhost:\(port)/"], input: "secret\n")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "secret\n")
        // Unverified, the client refuses the server and says why (exit 4).
        let refused = try Tool.run(["ws", "wss://localhost:\(port)/"], input: "")
        XCTAssertEqual(refused.status, 4, refused.err)
    }

    /// --idle-timeout for WebSocket clients of the hub, kept by the hub's watch on each
    /// client's connection: a client whose messages keep coming stays past the limit; one
    /// gone quiet is cut, and -v names it.
    func testIdleTimeoutCutsAQuietWebSocketClientOfTheHub() throws {
        let (hub, port) = try Tool.server(program: Tool.tincan) { ["listen", "-k", "-v", "--ws", "--idle-timeout", "1s", "127.0.0.1", String($0)] }
        defer { hub.stop() }
        let busy = try Tool(["ws", "ws://127.0.0.1:\(port)/"])
        defer { busy.stop() }
        let quiet = try Tool(["ws", "ws://127.0.0.1:\(port)/"])
        defer { quiet.stop() }
        waitUntil("both clients open") { hub.stderrText.components(separatedBy: "WebSocket open").count == 3 }
        quiet.send("once\n")
        // The busy client speaks every 200 ms for 2.4 s: twice the limit, never quiet for it.
        for index in 0..<12 {
            busy.send("line \(index)\n")
            usleep(200_000)
        }
        waitUntil("the quiet client is cut") { hub.stderrText.contains("idle for 1s (--idle-timeout); closed it") }
        XCTAssertNotEqual(quiet.wait(), 0, "cut, not closed with a handshake: \(quiet.stderrText)")
        XCTAssertEqual(hub.stderrText.components(separatedBy: "(--idle-timeout); closed it").count - 1, 1, hub.stderrText)
        XCTAssertTrue(busy.process.isRunning, "the busy client stays")
        waitUntil("every line of the busy client") { hub.stdoutText.contains("line 11\n") }
        XCTAssertTrue(hub.stdoutText.contains("once\n"))
    }

    func testTheHubTakesWebSocketClientsAsLinesAndSendsStdinToEach() throws {
        let (hub, port) = try Tool.server(program: Tool.tincan) { ["listen", "-k", "-v", "--ws", "127.0.0.1", String($0)] }
        defer { hub.stop() }
        let first = try Tool(["ws", "--half-close", "ws://127.0.0.1:\(port)/"])
        defer { first.stop() }
        let second = try Tool(["ws", "ws://127.0.0.1:\(port)/"])
        defer { second.stop() }
        waitUntil("both clients open") { hub.stderrText.components(separatedBy: "WebSocket open").count == 3 }
        first.send("from one\n")
        second.send("from two\n")
        waitUntil("both lines on the hub's stdout") { hub.stdoutText.contains("from one\n") && hub.stdoutText.contains("from two\n") }
        hub.send("to everyone\n")
        waitUntil("stdin's line at each client") { first.stdoutText == "to everyone\n" && second.stdoutText == "to everyone\n" }
        first.closeInput()
        XCTAssertEqual(first.wait(), 0, first.stderrText)
        XCTAssertTrue(hub.process.isRunning)
    }

    /// The help of `listen --ws` names the modes WebSocket clients are served in (it said the
    /// -k modes were not built yet, while they ran): each one it names runs, with a python
    /// `websockets` client whose message comes back (a program, --echo, a relay) or reaches
    /// the listener's stdout (one client, the hub, the broker, the chat).
    func testEveryModeTheHelpNamesRuns() throws {
        let help = try Tool.output(["listen", "--help-all"])
        let after = try XCTUnwrap(help.components(separatedBy: "--ws[=PATH]").dropFirst().first?.components(separatedBy: "--allow-origin LIST").first)
        let wsHelp = after.split(whereSeparator: { $0 == " " || $0 == "\n" }).joined(separator: " ")
        let upstream = try PythonPeer(PythonPeers.echoMany)
        defer { upstream.stop() }
        let modes: [(named: String, arguments: [String], echoes: Bool)] = [
            ("one client on stdin/stdout", [], false), ("-k hub", ["-k"], false), ("--broker", ["--broker"], false), ("--chat", ["--chat"], false),
            ("--exec", ["-k", "--exec", "/bin/cat"], true), ("--sh-exec", ["-k", "--sh-exec", "cat"], true), ("--pty", ["-k", "--pty", "--exec", "/bin/cat"], true),
            ("--echo", ["-k", "--echo"], true), ("--forward", ["-k", "--forward", "127.0.0.1:\(upstream.port)"], true),
        ]
        let client = """
            import sys
            from websockets.sync.client import connect
            with connect('ws://127.0.0.1:%s/' % sys.argv[1]) as ws:
                ws.send(sys.argv[2] + '\\n')
                if sys.argv[3] == '1':
                    got = ''
                    while sys.argv[2] not in got:
                        m = ws.recv(timeout=10); got += m if isinstance(m, str) else m.decode()
                    print('echoed')
            """
        for (named, arguments, echoes) in modes {
            XCTAssertTrue(wsHelp.contains(named), "the help names \(named): \(wsHelp)")
            let (listener, port) = try Tool.listener(["--ws"] + arguments)
            defer { listener.stop() }
            let word = "mode-\(named.filter(\.isLetter))"
            let r = try Tool.run(["python3", "-c", client, String(port), word, echoes ? "1" : "0"], input: "", program: "/usr/bin/env")
            XCTAssertEqual(r.status, 0, "\(named): \(r.err) \(listener.stderrText)")
            if echoes {
                XCTAssertEqual(r.out, "echoed\n", named)
            } else {
                waitUntil("\(named): the message on stdout") { listener.stdoutText.contains(word) }
            }
        }
    }

    func testTheBrokerPassesMessagesBetweenClients() throws {
        let (broker, port) = try Tool.server(program: Tool.tincan) { ["listen", "--broker", "-v", "--ws", "127.0.0.1", String($0)] }
        defer { broker.stop() }
        let first = try Tool(["ws", "ws://127.0.0.1:\(port)/"])
        defer { first.stop() }
        let second = try Tool(["ws", "ws://127.0.0.1:\(port)/"])
        defer { second.stop() }
        waitUntil("both clients open") { broker.stderrText.components(separatedBy: "WebSocket open").count == 3 }
        // "WebSocket open" is said as the handshake ends, a moment before the broker takes the
        // client in: say it again until the other client hears it.
        var polls = 0
        waitUntil("the other client hears it") {
            if polls % 20 == 0 { first.send("hello two\n") }  // every 100 ms
            polls += 1
            return second.stdoutText.hasPrefix("hello two\n")
        }
        XCTAssertEqual(Set(second.stdoutText.split(separator: "\n")), ["hello two"])
        XCTAssertEqual(first.stdoutText, "", "not back to its sender")
    }

    func testAProgramPerConnectionSeesLinesAndItsLinesAreMessages() throws {
        let (server, port) = try Tool.server(program: Tool.tincan) {
            ["listen", "-k", "--ws", "--sh-exec", "while read l; do echo \"got $l\"; done", "127.0.0.1", String($0)]
        }
        defer { server.stop() }
        for name in ["a", "b"] {
            let r = try Tool.run(["ws", "-q", "1s", "ws://127.0.0.1:\(port)/"], input: "\(name)1\n\(name)2\n")
            XCTAssertEqual(r.status, 0, r.err)
            XCTAssertEqual(r.out, "got \(name)1\ngot \(name)2\n")
        }
    }

    func testTheForwarderRelaysWebSocketBytesToAPlainUpstreamAsWebsockifyDoes() throws {
        let upstream = try PythonPeer(PythonPeers.echoMany)
        defer { upstream.stop() }
        let (server, port) = try Tool.server(program: Tool.tincan) {
            [
                "listen", "-k", "--ws", "--tls", "--cert", self.certs.path("server.pem"), "--key", self.certs.path("server.key"), "127.0.0.1", String($0),
                "--forward", "127.0.0.1:\(upstream.port)",
            ]
        }
        defer { server.stop() }
        // A megabyte in one binary message comes back as binary messages, every byte in order.
        let script = """
            import asyncio, ssl, sys, websockets
            async def main():
                context = ssl.create_default_context(cafile=sys.argv[2])
                async with websockets.connect('wss://localhost:%s/' % sys.argv[1], ssl=context, max_size=None) as ws:
                    data = bytes(range(256)) * 4096
                    await ws.send(data)
                    back = b''
                    while len(back) < len(data):
                        message = await ws.recv()
                        assert isinstance(message, bytes), 'a text message'
                        back += message
                    print('same' if back == data else 'different', flush=True)
            asyncio.run(main())
            """
        let client = try Tool.run(["python3", "-c", script, String(port), certs.path("ca.pem")], program: "/usr/bin/env")
        XCTAssertEqual(client.status, 0, client.err)
        XCTAssertEqual(client.out, "same\n")
    }

    /// An upstream (a Python stub: it must reset on cue) that echoes the client's first bytes;
    /// then, with `reset`, sends a line and resets; with `record`, writes to argv[3] how the
    /// client's side ended: `eof` or `reset`.
    private static let resettingUpstream =
        PythonPeers.listenPrelude + """
            import struct
            c, _ = s.accept(); c.sendall(c.recv(100))
            if sys.argv[3] == 'reset':
                c.sendall(b'partial\\n')
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0)); c.close()
            else:
                try:
                    while c.recv(100): pass
                    ended = 'eof'
                except ConnectionResetError:
                    ended = 'reset'
                open(sys.argv[3], 'w').write(ended)
            """

    func testTheForwarderPassesAResetOnAsAResetBothWays() throws {
        // The upstream resets: the client gets what came before it, then no clean close.
        let resetting = try PythonPeer(WebSocketTests.resettingUpstream.replacingOccurrences(of: "sys.argv[3]", with: "'reset'"))
        defer { resetting.stop() }
        let (server, port) = try Tool.server(program: Tool.tincan) {
            ["listen", "-k", "-v", "--ws", "--forward", "127.0.0.1:\(resetting.port)", "127.0.0.1", String($0)]
        }
        defer { server.stop() }
        let client = try Tool(["ws", "ws://127.0.0.1:\(port)/"])
        defer { client.stop() }
        client.send("hi\n")  // stdin stays open: only the reset can end this session
        XCTAssertEqual(client.wait(), 1, client.stderrText)
        // The echo of "hi", then the line before the reset, each message on a line; what came
        // just before a reset may be dropped by the kernel that meets it: only a prefix.
        XCTAssertTrue("hi\npartial\n\n".hasPrefix(client.stdoutText) || "hipartial\n\n".hasPrefix(client.stdoutText), client.stdoutText)
        XCTAssertTrue(client.stderrText.contains("without a WebSocket close"), client.stderrText)
        waitUntil("the listener says why") { server.stderrText.contains("cut: reading from upstream 127.0.0.1:\(resetting.port) failed: recv: Connection reset by peer") }

        // The client resets: the upstream is reset, not ended.
        let record = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-ws-reset-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: record) }
        let recording = try PythonPeer(WebSocketTests.resettingUpstream.replacingOccurrences(of: "sys.argv[3]", with: "'\(record)'"))
        defer { recording.stop() }
        let (relay, relayPort) = try Tool.server(program: Tool.tincan) {
            ["listen", "-k", "--ws", "--forward", "127.0.0.1:\(recording.port)", "127.0.0.1", String($0)]
        }
        defer { relay.stop() }
        let script = """
            import asyncio, socket, struct, sys, websockets
            async def main():
                async with websockets.connect('ws://127.0.0.1:%s/' % sys.argv[1]) as ws:
                    await ws.send(b'hello')
                    assert await ws.recv() == b'hello'
                    ws.transport.get_extra_info('socket').setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
                    ws.transport.abort()
            asyncio.run(main())
            """
        let aborting = try Tool.run(["python3", "-c", script, String(relayPort)], program: "/usr/bin/env")
        XCTAssertEqual(aborting.status, 0, aborting.err)
        waitUntil("the upstream hears the end") { FileManager.default.fileExists(atPath: record) }
        waitUntil("the upstream wrote how") { (try? String(contentsOfFile: record, encoding: .utf8)) != "" }
        XCTAssertEqual(try String(contentsOfFile: record, encoding: .utf8), "reset")
    }

    func testTheHandshakeCarriesHeadersOriginSubprotocolCredentialsAndCompression() throws {
        let (server, port) = try websocketsServer("headers")
        defer { server.stop() }
        let r = try Tool.run(
            ["ws", "-v", "-q", "1s", "-H", "X-Test: yes", "--origin", "https://app.example", "--protocol", "other, chat", "ws://bob:s%3Acret@127.0.0.1:\(port)/"],
            input: "hi\n")
        XCTAssertEqual(r.status, 0, r.err)
        // "bob:s:cret" in base64.
        XCTAssertEqual(receivedByServer(server).first, "auth=Basic Ym9iOnM6Y3JldA== origin=https://app.example x=yes protocol=chat deflate=True")
        XCTAssertTrue(r.err.contains("subprotocol chat, permessage-deflate"), r.err)
        XCTAssertEqual(r.out, "hi\n")
        let plain = try Tool.run(["ws", "-v", "-q", "1s", "--no-deflate", "--protocol", "chat", "ws://127.0.0.1:\(port)/"], input: "")
        XCTAssertEqual(plain.status, 0, plain.err)
        XCTAssertEqual(receivedByServer(server).last, "auth=None origin=None x=None protocol=chat deflate=False")
    }

    func testJSONLinesKeepEachMessagesTypeAndBoundaryBothWays() throws {
        let (server, port) = try websocketsServer("echo")
        defer { server.stop() }
        let input = "{\"type\":\"text\",\"data\":\"two\\nlines \\u00e9\"}\n{\"type\":\"binary\",\"data\":\"AAEC/w==\"}\n"
        let r = try Tool.run(["ws", "--jsonl", "-q", "1s", "ws://127.0.0.1:\(port)/"], input: input)
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "{\"type\":\"text\",\"data\":\"two\\nlines é\"}\n{\"type\":\"binary\",\"data\":\"AAEC/w==\"}\n")
        XCTAssertEqual(receivedByServer(server), ["text:two", "lines é", "binary:4"])
        let bad = try Tool.run(["ws", "--jsonl", "ws://127.0.0.1:\(port)/"], input: "{\"type\":\"text\"}\n")
        XCTAssertEqual(bad.status, 1)
        XCTAssertTrue(bad.err.contains("line 1 of stdin is not a message in JSON (it has no \"data\" string)"), bad.err)
    }

    func testChunkAndWholeCutStdinIntoBinaryMessages() throws {
        let (server, port) = try websocketsServer("echo")
        defer { server.stop() }
        let data = String(repeating: "x", count: 1000)
        let chunked = try Tool.run(["ws", "--binary", "--chunk", "300", "-q", "1s", "ws://127.0.0.1:\(port)/"], input: data)
        XCTAssertEqual(chunked.status, 0, chunked.err)
        XCTAssertEqual(chunked.out, data)
        XCTAssertEqual(receivedByServer(server), ["binary:300", "binary:300", "binary:300", "binary:100"])
        let whole = try Tool.run(["ws", "--binary", "--whole", "-q", "1s", "ws://127.0.0.1:\(port)/"], input: data)
        XCTAssertEqual(whole.status, 0, whole.err)
        XCTAssertEqual(receivedByServer(server).last, "binary:1000")
    }

    /// The last message went out with our close, held behind the end-of-stream hold: python
    /// `websockets` then had the close before it could answer (1 run in 5 to 20 nothing came
    /// back, and the exit was 0). A message is complete when stdin is: it goes at once, and the
    /// server answers while the connection is still open; only the close waits.
    func testTheLastMessageGoesWhenStdinEndsOnlyTheCloseWaits() throws {
        let (server, port) = try websocketsServer("after")
        defer { server.stop() }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-ws-whole-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: file) }
        let data = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7919 >> 3) })
        try data.write(to: URL(fileURLWithPath: file))
        // The server's "after" comes 300 ms after its echo: it reaches us only if our close was
        // not sent with the message (the old way, the close held 5 s and the message with it).
        let client = try Tool(["ws", "--binary", "--whole", "ws://127.0.0.1:\(port)/"], stdinFile: file)
        XCTAssertEqual(client.wait(timeout: .seconds(30)), 0, client.stderrText)
        XCTAssertTrue(client.stdout == data + Data("after".utf8), "every byte echoed, then the server's after (\(client.stdout.count) of \(data.count + 5))")
        XCTAssertEqual(receivedByServer(server).last, "binary:1048576")
        let line = try Tool.run(["ws", "ws://127.0.0.1:\(port)/"], input: "no newline at the end")
        XCTAssertEqual(line.out, "no newline at the end\nafter\n", line.err)
    }

    /// A server that closes the WebSocket ends the client's session at once, though stdin is
    /// still open (it waited for stdin's end: nothing more could be sent after the close); and
    /// `listen --ws`'s one client closing ends the listener's session.
    func testThePeersCloseEndsTheSessionWhateverStdinDoes() throws {
        let (server, port) = try websocketsServer("error")
        defer { server.stop() }
        let client = try Tool(["ws", "ws://127.0.0.1:\(port)/"])
        defer { client.stop() }
        client.send("one message\n")
        XCTAssertEqual(client.wait(timeout: .seconds(20)), 10, client.stderrText)
        XCTAssertTrue(client.stderrText.contains("1011 (internal error): 'boom'"), client.stderrText)

        let (listener, listenerPort) = try Tool.listener(["--ws"])
        defer { listener.stop() }
        let script = """
            import sys
            from websockets.sync.client import connect
            with connect('ws://127.0.0.1:%s/' % sys.argv[1], close_timeout=30) as ws:
                ws.send('hello')
            print('closed', flush=True)
            """
        let python = try Tool.run(["python3", "-c", script, String(listenerPort)], input: "", timeout: .seconds(20), program: "/usr/bin/env")
        XCTAssertEqual(python.out, "closed\n", python.err)
        XCTAssertEqual(listener.wait(timeout: .seconds(20)), 0, listener.stderrText)
        XCTAssertEqual(listener.stdoutText, "hello\n")
    }

    /// A line read from stdin but not ended when the peer closes could not go: the session
    /// fails naming it (it ended 0, the line lost without a word); a peer's close after
    /// everything went is still a clean end.
    func testALineHeldWhenThePeerClosesIsNamedAsNotDelivered() throws {
        let (server, port) = try websocketsServer("once")
        defer { server.stop() }
        let cut = try Tool(["ws", "ws://127.0.0.1:\(port)/"])
        defer { cut.stop() }
        cut.send("one\ntwo-partial")
        XCTAssertEqual(cut.wait(timeout: .seconds(20)), 1, cut.stderrText)
        XCTAssertTrue(cut.stderrText.contains("(11 bytes read from stdin were not delivered)"), cut.stderrText)
        let whole = try Tool(["ws", "ws://127.0.0.1:\(port)/"])
        defer { whole.stop() }
        whole.send("one\n")
        XCTAssertEqual(whole.wait(timeout: .seconds(20)), 0, whole.stderrText)
        XCTAssertEqual(receivedByServer(server), ["text:one", "text:one"])
    }

    func testSendAndExpectWorkOnMessages() throws {
        let (server, port) = try websocketsServer("echo")
        defer { server.stop() }
        let r = try Tool.run(["ws", "--send", "ping\\n", "--expect", "^ping$", "--send", "bye\\n", "--expect", "^bye$", "-q", "0", "ws://127.0.0.1:\(port)/"], input: "")
        XCTAssertEqual(r.status, 0, r.err)
        let missing = try Tool.run(["ws", "--send", "ping\\n", "--expect", "^pong$", "--expect-timeout", "1s", "ws://127.0.0.1:\(port)/"], input: "")
        XCTAssertEqual(missing.status, 6, missing.err)
    }

    func testThroughProxiesAChainOfMicrosocksAndTinyproxyToAWSSServer() throws {
        let (server, port) = try Tool.server(program: Tool.tincan) {
            ["listen", "-k", "--ws", "--echo", "--tls", "--cert", self.certs.path("server.pem"), "--key", self.certs.path("server.key"), "127.0.0.1", String($0)]
        }
        defer { server.stop() }
        let socks = try RealProxy.microsocks()
        defer { socks.stop() }
        let http = try RealProxy.tinyproxy()
        defer { http.stop() }
        let chain = [
            "--proxy", "socks5h://127.0.0.1:\(socks.port)", "--proxy", "http://127.0.0.1:\(http.port)", "--ca", certs.path("ca.pem"), "-q", "1s",
            "wss://localhost:\(port)/",
        ]
        let r = try Tool.run(["ws", "-v"] + chain, input: "through two proxies\n")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "through two proxies\n")
        XCTAssertTrue(r.err.contains("WebSocket open to localhost:\(port)"), r.err)
        // wss:// through an HTTPS proxy (tincan's own): TLS to the server inside TLS to the proxy.
        let (https, httpsPort) = try Tool.listener(["-k", "--http-proxy", "--tls", "--cert", certs.path("server.pem"), "--key", certs.path("server.key")])
        defer { https.stop() }
        let inside = try Tool.run(
            ["ws", "--proxy", "https://localhost:\(httpsPort)", "--proxy-ca", certs.path("ca.pem"), "--ca", certs.path("ca.pem"), "-q", "1s", "wss://localhost:\(port)/"],
            input: "through an https proxy\n")
        XCTAssertEqual(inside.status, 0, inside.err)
        XCTAssertEqual(inside.out, "through an https proxy\n")
    }

    func testAfterOurCloseThePeersSilenceIsTimedNotItsAnswer() throws {
        // --close-timeout 1s, and the peer answers for 1.8 s before its close: nothing is cut.
        let (server, port) = try Tool.server(["python3", "-u", "-c", WebSocketTests.rawServer, "0", "127.0.0.1", "late"])
        defer { server.stop() }
        let r = try Tool.run(["ws", "--close-timeout", "1s", "-q", "0", "ws://127.0.0.1:\(port)/"], input: "")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "0\n1\n2\n3\n4\n5\n")
    }

    func testAResetExitsNonZeroAfterWritingWhatCame() throws {
        let (server, port) = try Tool.server(["python3", "-u", "-c", WebSocketTests.rawServer, "0", "127.0.0.1", "reset"])
        defer { server.stop() }
        let client = try Tool(["ws", "ws://127.0.0.1:\(port)/"])
        defer { client.stop() }
        XCTAssertEqual(client.wait(), 1, client.stderrText)
        XCTAssertEqual(client.stdoutText, "hello\n")
        XCTAssertTrue(client.stderrText.contains("reset"), client.stderrText)
    }

    func testStdoutThatFailsEndsTheRunNonZero() throws {
        let (server, port) = try websocketsServer("echo")
        defer { server.stop() }
        // stdout closed: the echo of the first line cannot be written.
        let r = try Tool.run(["/bin/sh", "-c", "printf 'a\\nb\\n' | '\(Tool.tincan)' ws -q 1s ws://127.0.0.1:\(port)/ >&-"], program: "/usr/bin/env")
        XCTAssertEqual(r.status, 1, r.err)
        XCTAssertTrue(r.err.contains("writing to stdout failed"), r.err)
    }

    /// ws has no --tls: its TLS options need a wss:// URL, and its framing rules come from the
    /// table; each refusal is one line and exit code 2, before anything is dialled.
    func testTLSOptionsWithoutAWSSURLAndClashingFramingsAreUsageErrors() throws {
        for (arguments, says) in [
            (["ws", "--ca", "/etc/hosts", "ws://127.0.0.1:9/"], "tincan: ws: --ca is for TLS: give a wss:// URL"),
            (["ws", "--binary", "--jsonl", "ws://127.0.0.1:9/"], "tincan: ws: --binary and --jsonl are two ways to frame messages: give one"),
        ] {
            let r = try Tool.run(arguments)
            XCTAssertEqual(r.status, 2, "\(arguments): \(r.err)")
            XCTAssertTrue(r.err.hasPrefix(says), "\(arguments): \(r.err)")
        }
    }
}
