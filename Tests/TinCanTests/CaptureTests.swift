import Foundation
import TestSupport
import XCTest

/// `-o` and `--hex-dump`: what went each way, in order, to a file, in every stream mode (a
/// client with its --send/--expect script, the hub, a relay to an upstream, a program per
/// connection), a file per connection with `%n`/`%a`; a failed write (a full disk: /dev/full)
/// ends the run with exit 1, or only the capture with --capture-best-effort.
final class CaptureTests: XCTestCase {
    private var temporary: TemporaryDirectory?
    private var directory: String { temporary?.path ?? "" }

    override func setUpWithError() throws { temporary = try TemporaryDirectory("capture") }

    override func tearDown() { temporary?.remove() }

    private func text(_ name: String) -> String { temporary?.text(name) ?? "" }

    /// A hex capture's records: (connection, direction, byte count, the bytes from its lines).
    private func records(_ dump: String) -> [(connection: Int, direction: String, count: Int, bytes: [UInt8])] {
        var out: [(Int, String, Int, [UInt8])] = []
        for line in dump.split(separator: "\n") {
            let fields = line.split(separator: " ")
            if line.hasPrefix("# "), fields.count >= 7, let connection = Int(fields[3]), let count = Int(fields[6]) {
                out.append((connection, String(fields[4]), count, []))
            } else if line.hasPrefix("> ") || line.hasPrefix("< "), !out.isEmpty {
                // "> 00000000  68 65 ...  |he...|": the hex pairs between the offset and the bars.
                let hex = line.dropFirst(12).prefix { $0 != "|" }
                out[out.count - 1].3 += hex.split(separator: " ").compactMap { UInt8($0, radix: 16) }
            }
        }
        return out
    }

    func testAClientsCaptureHoldsTheScriptAndTheRelayInOrderBothWays() throws {
        let (echo, port) = try Tool.listener(["-k", "--exec", "/bin/cat"])
        defer { echo.stop() }
        let hex = "\(directory)/client.hex"
        let run = try Tool.run(["connect", "--hex-dump", hex, "--send", "HELLO\\n", "--expect", "HELLO", "127.0.0.1", String(port)], input: "payload\n")
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(run.out, "HELLO\npayload\n")
        let dump = records(text("client.hex"))
        let sent = dump.filter { $0.direction == ">" }.flatMap(\.bytes)
        let received = dump.filter { $0.direction == "<" }.flatMap(\.bytes)
        XCTAssertEqual(String(decoding: sent, as: UTF8.self), "HELLO\npayload\n", text("client.hex"))
        XCTAssertEqual(String(decoding: received, as: UTF8.self), "HELLO\npayload\n", text("client.hex"))
        XCTAssertEqual(dump.first?.direction, ">", "the script's send is first")
        XCTAssertTrue(dump.allSatisfy { $0.connection == 1 && $0.count == $0.bytes.count }, text("client.hex"))
        XCTAssertTrue(text("client.hex").contains("> 00000006  70 61 79"), "the sent offsets go on after the script: \(text("client.hex"))")
        let mode = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: hex)[.posixPermissions] as? Int)
        XCTAssertEqual(mode & 0o777, 0o600, "a capture may hold secrets")

        // -o: the raw bytes as they went; --append-output adds a second session after the first.
        let raw = "\(directory)/client.raw"
        XCTAssertEqual(try Tool.run(["connect", "-o", raw, "127.0.0.1", String(port)], input: "first\n").status, 0)
        XCTAssertEqual(try Tool.run(["connect", "-o", raw, "--append-output", "127.0.0.1", String(port)], input: "second\n").status, 0)
        XCTAssertEqual(text("client.raw"), "first\nfirst\nsecond\nsecond\n")
    }

    func testTheHubGivesEachConnectionItsOwnFile() throws {
        let (hub, port) = try Tool.listener(["-k", "-o", "\(directory)/hub-%n.raw"])
        defer { hub.stop() }
        for (index, line) in ["from one\n", "from two\n"].enumerated() {
            let client = try Tool(["connect", "127.0.0.1", String(port)])
            defer { client.stop() }
            client.send(line)
            waitUntil("the hub heard \(index + 1)") { hub.stdoutText.hasSuffix(line) }
            hub.send("hub to \(index + 1)\n")
            waitUntil("the client heard the hub") { client.stdoutText == "hub to \(index + 1)\n" }
            client.closeInput()
            XCTAssertEqual(client.wait(timeout: .seconds(10)), 0, client.stderrText)
            XCTAssertEqual(text("hub-\(index + 1).raw"), line + "hub to \(index + 1)\n", "connection \(index + 1)'s own bytes, in order")
        }
    }

    func testARelayAndAProgramPerConnectionShareOneHexFileByConnection() throws {
        let (programs, programPort) = try Tool.listener(["-k", "--exec", "/bin/cat", "--hex-dump", "\(directory)/programs.hex"])
        defer { programs.stop() }
        let (relay, relayPort) = try Tool.listener(["-k", "--forward", "127.0.0.1:\(programPort)", "--hex-dump", "\(directory)/relay.hex"])
        defer { relay.stop() }
        for n in 1...2 {
            let run = try Tool.run(["connect", "127.0.0.1", String(relayPort)], input: "round \(n)\n")
            XCTAssertEqual(run.status, 0, run.err)
            XCTAssertEqual(run.out, "round \(n)\n")
        }
        waitUntil("both captures whole") { self.records(self.text("relay.hex")).count == 4 && self.records(self.text("programs.hex")).count == 4 }
        for name in ["relay.hex", "programs.hex"] {
            let dump = records(text(name))
            for n in 1...2 {
                let mine = dump.filter { $0.connection == n }
                XCTAssertEqual(mine.map(\.direction), ["<", ">"], "\(name) connection \(n): in, then back out: \(text(name))")
                XCTAssertEqual(mine.map { String(decoding: $0.bytes, as: UTF8.self) }, ["round \(n)\n", "round \(n)\n"], text(name))
            }
        }
    }

    func testAProxysCaptureHoldsTheForwardedHeadAndTheAnswer() throws {
        let (origin, originPort) = try Tool.listener(["-k", "--sh-exec", "head -c 1 >/dev/null; printf 'HTTP/1.0 200 OK\\r\\nContent-Length: 3\\r\\n\\r\\nhi\\n'"])
        defer { origin.stop() }
        let (proxy, port) = try Tool.listener(["--http-proxy", "--hex-dump", "\(directory)/proxy-%n.hex"])
        defer { proxy.stop() }
        let curl = try Tool.curl(["-x", "http://127.0.0.1:\(port)", "http://127.0.0.1:\(originPort)/page"])
        XCTAssertEqual(curl.status, 0, proxy.stderrText)
        XCTAssertEqual(curl.out, "hi\n")
        waitUntil("the capture") { self.records(self.text("proxy-1.hex")).contains { $0.direction == ">" } }
        let dump = records(text("proxy-1.hex"))
        let received = String(decoding: dump.filter { $0.direction == "<" }.flatMap(\.bytes), as: UTF8.self)
        let sent = String(decoding: dump.filter { $0.direction == ">" }.flatMap(\.bytes), as: UTF8.self)
        XCTAssertTrue(received.hasPrefix("GET /page HTTP/1.1\r\n"), "the head as forwarded, in origin form: \(received)")
        XCTAssertTrue(sent.hasPrefix("HTTP/1.0 200 OK\r\n") && sent.hasSuffix("hi\n"), sent)
    }

    /// An upstream (a Python stub: it must pause and reset on cue) that reads to the end of
    /// the client's stream, then after 2.5 s answers "late answer" and closes — or, with
    /// "reset", resets at once after the client's first line.
    private static let upstream =
        PythonPeers.listenPrelude + """
            import struct
            c, _ = s.accept()
            if sys.argv[3] == 'reset':
                c.makefile('rb').readline()
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0)); c.close()
            else:
                while c.recv(65536): pass
                time.sleep(2.5); c.sendall(b'late answer\\n'); c.close()
            """

    func testThroughACapturingRelayALateAnswerArrivesWholeAndAResetStaysAReset() throws {
        for mode in ["late", "reset"] {
            let (server, upstreamPort) = try Tool.server(["python3", "-u", "-c", CaptureTests.upstream, "0", "127.0.0.1", mode])
            defer { server.stop() }
            let (relay, port) = try Tool.listener(["--forward", "127.0.0.1:\(upstreamPort)", "--hex-dump", "\(directory)/\(mode).hex"])
            defer { relay.stop() }
            // The client's input ends first (late) and the upstream speaks 2.5 s later; or the
            // upstream resets, and the client must hear a reset, not an end.
            let run = try Tool.run(["connect", "--reconnect", "3", "127.0.0.1", String(port)], input: "question\n")
            let dump = records(text("\(mode).hex"))
            if mode == "late" {
                XCTAssertEqual(run.status, 0, run.err)
                XCTAssertEqual(run.out, "late answer\n")
                XCTAssertEqual(dump.map(\.direction), ["<", ">"], text("late.hex"))
                XCTAssertEqual(dump.map { String(decoding: $0.bytes, as: UTF8.self) }, ["question\n", "late answer\n"])
            } else {
                XCTAssertEqual(run.status, 1, "a reset after stdin's bytes is no end, and no reconnect: \(run.err)")
                XCTAssertTrue(run.err.contains("reset"), run.err)
                XCTAssertEqual(dump.first.map { String(decoding: $0.bytes, as: UTF8.self) }, "question\n")
            }
        }
    }

    func testAFullDiskEndsTheSessionUnlessBestEffort() throws {
        let (echo, port) = try Tool.listener(["-k", "--exec", "/bin/cat"])
        defer { echo.stop() }
        let full = try Tool.run(["connect", "-o", "/dev/full", "127.0.0.1", String(port)], input: "data\n")
        XCTAssertEqual(full.status, 1, full.err)
        XCTAssertTrue(full.err.contains("writing the capture /dev/full failed: no space left on device"), full.err)
        let best = try Tool.run(["connect", "-o", "/dev/full", "--capture-best-effort", "127.0.0.1", String(port)], input: "data\n")
        XCTAssertEqual(best.status, 0, best.err)
        XCTAssertEqual(best.out, "data\n", "the session goes on")
        XCTAssertEqual(best.err.components(separatedBy: "the capture stopped there").count, 2, "said once: \(best.err)")

        // A hub that cannot write its capture stops, says so, exit 1.
        let (hub, hubPort) = try Tool.listener(["-k", "-o", "/dev/full"])
        defer { hub.stop() }
        let client = try Tool(["connect", "127.0.0.1", String(hubPort)])
        defer { client.stop() }
        client.send("lost?\n")
        XCTAssertEqual(hub.wait(timeout: .seconds(10)), 1, hub.stderrText)
        XCTAssertTrue(hub.stderrText.contains("writing the capture /dev/full failed: no space left on device; stopping"), hub.stderrText)
    }

    func testCaptureOptionsThatCannotWorkAreRefused() throws {
        for (arguments, said) in [
            (["connect", "-u", "-o", "\(directory)/x", "127.0.0.1", "9"], "not with -u"),
            (["connect", "--append-output", "127.0.0.1", "9"], "--append-output is for a capture"),
            (["connect", "-o", "\(directory)/a", "--hex-dump", "\(directory)/b", "127.0.0.1", "9"], "give one"),
            (["connect", "-o", "\(directory)/no/such/dir/x", "127.0.0.1", "9"], "cannot write the capture"),
            (["connect", "-z", "-o", "\(directory)/z", "127.0.0.1", "9"], "not with -z"),
        ] {
            let run = try Tool.run(arguments)
            XCTAssertEqual(run.status, 2, run.err)
            XCTAssertTrue(run.err.contains(said), run.err)
        }
    }

    /// Every mode captures or refuses the option: `listen -k --ws --echo` captured nothing and
    /// said nothing. Now each message is recorded as it came and as it went back; and a SOCKS5
    /// UDP association's datagrams are recorded as a relay's bytes are.
    func testTheWebSocketEchoAndUDPAssociationsAreCaptured() throws {
        let dump = "\(directory)/echo.hex"
        let (server, port) = try Tool.listener(["-k", "--ws", "--echo", "--hex-dump", dump])
        defer { server.stop() }
        let script = """
            import sys
            from websockets.sync.client import connect
            with connect('ws://127.0.0.1:%s/' % sys.argv[1]) as ws:
                for m in ['first message', 'second']:
                    ws.send(m); print(ws.recv(timeout=10))
            """
        let client = try Tool.run(["python3", "-c", script, String(port)], input: "", program: "/usr/bin/env")
        XCTAssertEqual(client.out, "first message\nsecond\n", client.err)
        waitUntil("both messages captured both ways") { records(text("echo.hex")).count == 4 }
        let echoed = records(text("echo.hex"))
        XCTAssertEqual(echoed.map(\.direction), ["<", ">", "<", ">"], text("echo.hex"))
        XCTAssertEqual(echoed.map { String(decoding: $0.bytes, as: UTF8.self) }, ["first message", "first message", "second", "second"])

        let udpEcho = try PythonPeer(PythonPeers.udpEcho(prefix: "echo:"))
        defer { udpEcho.stop() }
        let raw = "\(directory)/udp.raw"
        let (proxy, proxyPort) = try Tool.listener(["--socks5", "-o", raw])
        defer { proxy.stop() }
        let associate =
            PythonPeers.socksAssociate + """
                port, echo = int(sys.argv[1]), int(sys.argv[2])
                u, c, relay = associate(port)
                u.sendto(to(echo) + b'datagram', relay)
                print(u.recvfrom(100)[0][10:].decode(), flush=True); c.close()
                """
        let udp = try Tool.run(["python3", "-c", associate, String(proxyPort), String(udpEcho.port)], input: "", program: "/usr/bin/env")
        XCTAssertEqual(udp.out, "echo:datagram\n", udp.err)
        waitUntil("the association's datagrams captured") { text("udp.raw") == "datagramecho:datagram" }
    }
}
